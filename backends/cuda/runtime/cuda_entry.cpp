// The CUDA backend's entry in the registry (runtime/src/backend_registry.cpp), compiled into
// flashdeberta::runtime without any CUDA header or library: starting it opens the backend module
// (cuda_backend.cpp, which links cudart and cuBLASLt) the first time a run asks for --backend cuda.
// CMakeLists.txt here defines where the build and the install put the module.
#include "flashdeberta/runtime/backend_entry.hpp"
#include "flashdeberta/runtime/backend_module.hpp"

namespace flashdeberta::runtime {

namespace {

std::unique_ptr<StartedBackend> start(RuntimeOptions const& options) {
  static constexpr BackendModuleLocation kWhere{.file_name = FLASHDEBERTA_CUDA_BACKEND_FILE,
                                                .build_dir = FLASHDEBERTA_CUDA_BACKEND_BUILD_DIR,
                                                .install_libdir = FLASHDEBERTA_CUDA_BACKEND_INSTALL_LIBDIR,
                                                .install_dir = FLASHDEBERTA_CUDA_BACKEND_INSTALL_DIR};
  return open_backend_module(BackendKind::kCuda, kWhere)(options);
}

}  // namespace

BackendEntry const& cuda_backend_entry() {
  static constexpr BackendEntry kEntry{
      .kind = BackendKind::kCuda, .computes_in = "fp32, bf16 or fp16", .start = &start};
  return kEntry;
}

}  // namespace flashdeberta::runtime

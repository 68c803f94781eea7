// The registration point: the one place that lists the backends of this build. runtime/CMakeLists.txt adds
// each backend folder's runtime/ (its entry, and for CUDA the module the entry opens) and defines
// FLASHDEBERTA_RUNTIME_WITH_<NAME> for this file only; the rest of the runtime asks find_backend.
#include <vector>

#include "flashdeberta/runtime/backend_entry.hpp"
#include "flashdeberta/runtime/options.hpp"

namespace flashdeberta::runtime {

// Each defined in its folder, backends/<name>/runtime/.
BackendEntry const& eigen_backend_entry();
BackendEntry const& kokkos_backend_entry();
BackendEntry const& cuda_backend_entry();

namespace {

std::vector<BackendEntry const*> const& registered_backends() {
  static std::vector<BackendEntry const*> const entries = [] {
    std::vector<BackendEntry const*> out;
#if defined(FLASHDEBERTA_RUNTIME_WITH_EIGEN)
    out.push_back(&eigen_backend_entry());
#endif
#if defined(FLASHDEBERTA_RUNTIME_WITH_KOKKOS)
    out.push_back(&kokkos_backend_entry());
#endif
#if defined(FLASHDEBERTA_RUNTIME_WITH_CUDA)
    out.push_back(&cuda_backend_entry());
#endif
    return out;
  }();
  return entries;
}

}  // namespace

BackendEntry const* find_backend(BackendKind kind) {
  for (BackendEntry const* entry : registered_backends()) {
    if (entry->kind == kind) return entry;
  }
  return nullptr;
}

bool backend_compiled_in(BackendKind backend) { return find_backend(backend) != nullptr; }

}  // namespace flashdeberta::runtime

// A backend built as a shared module (the CUDA backend: backends/cuda/runtime/), opened by its entry when a run
// first asks for it, so that the libraries it links are loaded only then. The module exports BackendModule
// under kBackendModuleSymbol (backend_entry.hpp).
#pragma once

#include <string_view>

#include "flashdeberta/runtime/backend_entry.hpp"
#include "flashdeberta/runtime/options.hpp"

namespace flashdeberta::runtime {

// Where a module may be, as its CMakeLists.txt knows it.
struct BackendModuleLocation {
  std::string_view file_name;       // "libflashdeberta_backend_cuda.so"
  std::string_view build_dir;       // where this build tree writes it
  std::string_view install_libdir;  // CMAKE_INSTALL_LIBDIR, relative to the prefix ("lib")
  std::string_view install_dir;     // the same under the configured prefix ("/usr/local/lib")
};

// The start function of the module `where` names, opened once per process and never closed (the models,
// tensors and deleters it made may outlive any handle). Looked for in this order: beside the file that holds
// the runtime (the program; _native*.so of the Python package), in <that directory>/../<install_libdir>,
// beside the running executable and in its ../<install_libdir>, in the build tree, in the install
// directory. Throws flashdeberta::Error naming the backend and the module when none is found, it cannot be
// loaded (its libraries are missing: dlerror's message) or it comes from another version.
StartBackend open_backend_module(BackendKind kind, BackendModuleLocation const& where);

}  // namespace flashdeberta::runtime

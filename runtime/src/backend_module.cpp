#include "flashdeberta/runtime/backend_module.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "flashdeberta/config.hpp"
#include "flashdeberta/core/error.hpp"

namespace flashdeberta::runtime {

namespace {

namespace fs = std::filesystem;

fs::path existing_canonical(fs::path const& path) {
  std::error_code ec;
  fs::path out = fs::canonical(path, ec);
  return ec ? fs::path() : out;
}

// The file that holds this code: the program for the CLI and the server, _native*.so for Python. dladdr names
// a program as it was started (argv[0], maybe found on PATH), so a name without a directory is left to
// /proc/self/exe, which the caller looks beside too.
fs::path file_holding_runtime() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void const*>(&file_holding_runtime), &info) == 0 || info.dli_fname == nullptr)
    return {};
  std::string const name = info.dli_fname;
  if (name.find('/') == std::string::npos) return {};
  return existing_canonical(name);
}

// The directories to look in, in the order open_backend_module's contract gives, without repeats.
std::vector<fs::path> module_directories(BackendModuleLocation const& where) {
  std::vector<fs::path> out;
  auto const add = [&](fs::path const& dir) {
    if (dir.empty()) return;
    fs::path const normal = dir.lexically_normal();
    if (std::find(out.begin(), out.end(), normal) == out.end()) out.push_back(normal);
  };
  for (fs::path const& file : {file_holding_runtime(), existing_canonical("/proc/self/exe")}) {
    if (file.empty()) continue;
    add(file.parent_path());
    add(file.parent_path().parent_path() / where.install_libdir);
  }
  add(fs::path(where.build_dir));
  add(fs::path(where.install_dir));
  return out;
}

StartBackend open_module(BackendKind kind, BackendModuleLocation const& where) {
  std::string const what =
      "--backend " + std::string(backend_name(kind)) + ": the " + std::string(backend_title(kind)) + " backend module ";
  std::vector<fs::path> const directories = module_directories(where);
  fs::path found;
  for (fs::path const& dir : directories) {
    std::error_code ec;
    if (fs::is_regular_file(dir / where.file_name, ec)) {
      found = dir / where.file_name;
      break;
    }
  }
  if (found.empty()) {
    std::string searched;
    for (fs::path const& dir : directories) searched += (searched.empty() ? "" : ", ") + dir.string();
    throw Error(what + std::string(where.file_name) + " is in none of " + searched +
                " (it is built with the runtime, and cmake --install puts it in " + std::string(where.install_dir) +
                ")");
  }
  // RTLD_LOCAL: its symbols (all hidden but one) never mix with the program's or another extension's.
  void* const handle = ::dlopen(found.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) throw Error(what + found.string() + " could not be loaded: " + ::dlerror());
  using Describe = BackendModule const* (*)();
  auto const describe = reinterpret_cast<Describe>(::dlsym(handle, kBackendModuleSymbol));
  if (describe == nullptr) {
    throw Error(what + found.string() + " is not a flashdeberta backend module (it exports no " + kBackendModuleSymbol +
                ")");
  }
  BackendModule const* const module = describe();
  if (std::string(module->version) != FLASHDEBERTA_VERSION_STRING) {
    throw Error(what + found.string() + " is of flashdeberta " + module->version + ", this program of " +
                FLASHDEBERTA_VERSION_STRING);
  }
  return module->start;
}

}  // namespace

StartBackend open_backend_module(BackendKind kind, BackendModuleLocation const& where) {
  static std::mutex mutex;
  static std::map<std::string, StartBackend, std::less<>> opened;  // by file name; a failure is tried again
  std::lock_guard const lock(mutex);
  if (auto const it = opened.find(where.file_name); it != opened.end()) return it->second;
  StartBackend const start = open_module(kind, where);
  opened.emplace(std::string(where.file_name), start);
  return start;
}

}  // namespace flashdeberta::runtime

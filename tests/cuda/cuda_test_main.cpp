// doctest main for the GPU test executables. Without a CUDA device (CI, build machines) no case runs and
// the process exits with FLASHDEBERTA_SKIP_EXIT_CODE, which tests/cuda/CMakeLists.txt registers as CTest's
// SKIP_RETURN_CODE: ctest then reports the cases as skipped, not passed. Listing (--list-test-cases, which
// doctest_discover_tests runs at build time) needs no device and succeeds as usual.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <string_view>

#ifndef FLASHDEBERTA_SKIP_EXIT_CODE
#error "FLASHDEBERTA_SKIP_EXIT_CODE must be defined (tests/cuda/CMakeLists.txt)"
#endif

namespace {

// doctest's options that only print (listings, count, help, version) run no case and need no device.
bool only_prints(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    arg.remove_prefix(std::min(arg.find_first_not_of('-'), arg.size()));
    if (arg.starts_with("dt-")) arg.remove_prefix(3);
    arg = arg.substr(0, arg.find('='));
    for (std::string_view option : {"ltc", "lts", "lr", "c", "count", "h", "?", "help", "v", "version"}) {
      if (arg == option) return true;
    }
    if (arg.starts_with("list-")) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  int devices = 0;
  bool const has_device = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
  if (!has_device && !only_prints(argc, argv)) {
    cudaGetLastError();  // clear the error state left by the failed query
    std::fprintf(stderr, "no CUDA device available: GPU test cases skipped (exit %d)\n", FLASHDEBERTA_SKIP_EXIT_CODE);
    return FLASHDEBERTA_SKIP_EXIT_CODE;
  }
  return context.run();
}

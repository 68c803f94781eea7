// The libFuzzer entry points of flashdeberta_fuzz, the one program holding every target (fuzz_support.hpp):
// it runs the target its name says, fuzz_<name>, as CMake links each name to it. Run under another name it lists
// the targets and exits.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "fuzz_support.hpp"

namespace {

flashdeberta::fuzz::FuzzTarget selected = nullptr;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  std::string_view name = *argc > 0 ? (*argv)[0] : "";
  if (std::size_t const slash = name.rfind('/'); slash != std::string_view::npos) name.remove_prefix(slash + 1);
  for (auto const& target : flashdeberta::fuzz::fuzz_targets()) {
    if (name == target.name) selected = target.run;
  }
  if (selected == nullptr) {
    std::fprintf(stderr, "flashdeberta_fuzz: run as one of its targets (a link of that name): ");
    for (auto const& target : flashdeberta::fuzz::fuzz_targets()) std::fprintf(stderr, "%s ", target.name);
    std::fprintf(stderr, "\n");
    std::exit(2);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) { return selected(data, size); }

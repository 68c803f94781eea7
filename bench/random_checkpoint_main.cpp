// random_checkpoint [--layers N] [--root DIR]: writes the random v3-base-shaped checkpoint (or finds
// the cached one) and prints its directory, for tools that take a checkpoint path such as the CLI.
#include <cstdlib>
#include <iostream>
#include <string>

#include "random_checkpoint.hpp"

int main(int argc, char** argv) {
  flashdeberta::bench::RandomCheckpointSpec spec = flashdeberta::bench::RandomCheckpointSpec::v3_base();
  std::filesystem::path root;
  for (int i = 1; i < argc; ++i) {
    std::string const arg = argv[i];
    if (arg == "--layers" && i + 1 < argc) {
      spec.num_layers = std::atoll(argv[++i]);
    } else if (arg == "--root" && i + 1 < argc) {
      root = argv[++i];
    } else {
      std::cerr << "usage: random_checkpoint [--layers N] [--root DIR]\n";
      return 2;
    }
  }
  try {
    std::cout << flashdeberta::bench::random_checkpoint(spec, root).string() << "\n";
  } catch (std::exception const& e) {
    std::cerr << "random_checkpoint: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

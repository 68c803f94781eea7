// libFuzzer target: arbitrary bytes as a Keras 3 weights file (HDF5), read as ZeroModels' DeBERTa-v3 of the
// v3_base fixture's config: libhdf5 parses the image from memory (its core driver), the reader walks and checks
// every dataset, the mapping assigns roles, and every variable is read. Any outcome other than a mapping or a
// flashdeberta::Error (a crash, a sanitizer report, another exception type) is a bug.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "flashdeberta/io/zeromodels.hpp"
#include "fuzz_support.hpp"

namespace {

flashdeberta::io::ZeroModelsConfig const& fixture_config() {
  static flashdeberta::io::ZeroModelsConfig const config = flashdeberta::io::read_zeromodels_config(
      std::string(FLASHDEBERTA_FIXTURE_DIR) + "/zeromodels/v3_base/zm_config.json");
  return config;
}

}  // namespace

FLASHDEBERTA_FUZZ_TARGET(keras_weights) {
  namespace io = flashdeberta::io;
  try {
    io::KerasWeights const weights = io::KerasWeights::open_image(std::as_bytes(std::span(data, size)), "fuzz");
    for (auto const& [path, group] : weights.groups()) {
      for (auto const& [index, variable] : group.variables) {
        auto const bytes = weights.read(variable);
        if (bytes.size() !=
            static_cast<std::size_t>(variable.dataset.numel) * flashdeberta::dtype_size(variable.dataset.dtype))
          __builtin_trap();
      }
    }
    (void)io::map_zeromodels(weights, fixture_config());
  } catch (flashdeberta::Error const&) {
  }
  // libhdf5 keeps freed blocks on free lists until it closes; returned here, LeakSanitizer's check after each
  // input sees only what is really lost.
  H5garbage_collect();
  return 0;
}

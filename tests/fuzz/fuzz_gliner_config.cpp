// libFuzzer target: arbitrary bytes as gliner_config.json (GLiNER's defaults, its dispatch and refusals, the
// backbone's encoder_config). Any outcome other than a config or a flashdeberta::Error is a bug; an accepted
// config must hold the sizes the GLiNER layers are built from.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "flashdeberta/gliner/gliner_config.hpp"
#include "fuzz_support.hpp"

FLASHDEBERTA_FUZZ_TARGET(gliner_config) {
  try {
    flashdeberta::GlinerConfig const c =
        flashdeberta::parse_gliner_config(std::string_view(reinterpret_cast<char const*>(data), size), "fuzz");
    bool const ok = c.hidden_size > 0 && c.max_len > 0 && c.num_rnn_layers >= 0 &&
                    (c.token_level() || c.max_width > 0) && !c.ent_token.empty() && !c.sep_token.empty() &&
                    c.encoder.hidden_size > 0 && c.encoder.num_layers > 0 && c.encoder.vocab_size > 0;
    if (!ok) __builtin_trap();
  } catch (flashdeberta::Error const&) {
  }
  return 0;
}

// libFuzzer target: arbitrary bytes as config.json. Any outcome other than a config or a
// flashdeberta::Error is a bug; an accepted config must satisfy the invariants the model relies on.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "flashdeberta/io/config_json.hpp"
#include "fuzz_support.hpp"

FLASHDEBERTA_FUZZ_TARGET(config) {
  try {
    flashdeberta::ModelConfig const c =
        flashdeberta::parse_model_config(std::string_view(reinterpret_cast<char const*>(data), size), "fuzz");
    bool const ok = c.hidden_size > 0 && c.num_heads > 0 && c.head_size > 0 && c.num_layers > 0 && c.vocab_size > 0 &&
                    c.embedding_size > 0 && c.layer_norm_eps > 0.0f && std::isfinite(c.attention_scale()) &&
                    c.num_labels >= 1 && (!c.relative_attention || c.relative_span() > 0) &&
                    (c.conv_kernel_size == 0 || (c.conv_kernel_size % 2 == 1 && c.hidden_size % c.conv_groups == 0));
    if (!ok) __builtin_trap();
  } catch (flashdeberta::Error const&) {
  }
  return 0;
}

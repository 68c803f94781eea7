// flashdeberta fill-mask: HF's fill-mask pipeline. For each text, the top-k tokens at every [MASK] with
// their probabilities, token strings and the filled-in text.
#include <algorithm>
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "pipeline_common.hpp"

namespace flashdeberta::cli {

int fill_mask_command(std::span<char const* const> args) {
  auto const options = parse_pipeline_options("fill-mask", args);
  if (!options) return 0;  // --help printed the help
  auto const pipeline = load_pipeline(*options, HeadKind::kMaskedLM, "fill-mask");
  runtime::FillMaskOptions const task{.top_k = static_cast<std::size_t>(options->top_k.value_or(5))};
  std::size_t const refused = for_each_batch(*options, [&](std::vector<std::string> const& texts, std::size_t first) {
    auto const results = pipeline->fill_mask(texts, task, text_run(*pipeline, first));
    for (std::size_t i = 0; i < texts.size(); ++i)
      print_line({{"text", texts[i]}, {"masks", runtime::masks_json(results[i])}});
  });
  return exit_status(refused);
}

}  // namespace flashdeberta::cli

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

std::string fill_mask_help() {
  return "usage: flashdeberta fill-mask --model DIR [--top-k K] [options] [TEXT...]\n"
         "\n"
         "Predicts the tokens at the mask token ([MASK]) of each TEXT (or, without TEXT, each line of stdin)\n"
         "with a masked-LM checkpoint (architectures Deberta*ForMaskedLM), as HF's fill-mask pipeline. Prints\n"
         "{\"text\": ..., \"masks\": [[{\"score\", \"token\", \"token_str\", \"sequence\"}, ...], ...]}: one list per\n"
         "mask, best first; score is the softmax probability, sequence the text with that mask filled in\n"
         "(special tokens left out when the text has one mask, kept when it has several, as HF).\n"
         "\n"
         "  --top-k K            predictions per mask (default 5)\n" +
         pipeline_common_help();
}

int fill_mask_command(std::span<char const* const> args) {
  ExtraOption const extras[] = {{"top-k"}};
  auto const options = parse_pipeline_options("fill-mask", args, extras, true);
  if (!options) {
    std::cout << fill_mask_help();
    return 0;
  }
  auto const pipeline = load_pipeline(*options, HeadKind::kMaskedLM, "fill-mask");
  runtime::FillMaskOptions const task{.top_k = static_cast<std::size_t>(options->top_k.value_or(5))};
  for_each_batch(*options, [&](std::vector<std::string> const& texts, std::size_t first) {
    auto const results = pipeline->fill_mask(texts, task, text_run(*pipeline, first));
    for (std::size_t i = 0; i < texts.size(); ++i)
      print_line({{"text", texts[i]}, {"masks", runtime::masks_json(results[i])}});
  });
  return 0;
}

}  // namespace flashdeberta::cli

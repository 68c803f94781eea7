// flashdeberta ner: HF's token-classification pipeline (aggregation_strategy "simple" unless
// --aggregation-strategy names another): entities with their label group, mean score, text and character span.
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "pipeline_common.hpp"

namespace flashdeberta::cli {

int ner_command(std::span<char const* const> args) {
  auto const options = parse_pipeline_options("ner", args);
  if (!options) return 0;  // --help printed the help
  auto const pipeline = load_pipeline(*options, HeadKind::kTokenClassification, "ner");
  std::size_t const refused = for_each_batch(*options, [&](std::vector<std::string> const& texts, std::size_t first) {
    runtime::NerOptions ner_options;
    ner_options.aggregation = options->aggregation.value_or(pipelines::Aggregation::kSimple);
    auto const results = pipeline->ner(texts, ner_options, text_run(*pipeline, first));
    for (std::size_t i = 0; i < texts.size(); ++i)
      print_line({{"text", texts[i]}, {"entities", runtime::entities_json(results[i])}});
  });
  return exit_status(refused);
}

}  // namespace flashdeberta::cli

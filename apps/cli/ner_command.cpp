// flashdeberta ner: HF's token-classification pipeline with aggregation_strategy="simple": entities
// with their label group, mean score, text and character span.
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "pipeline_common.hpp"

namespace flashdeberta::cli {

std::string ner_help() {
  return "usage: flashdeberta ner --model DIR [options] [TEXT...]\n"
         "\n"
         "Finds the entities of each TEXT (or, without TEXT, each line of stdin) with a token-classification\n"
         "checkpoint (architectures Deberta*ForTokenClassification), as HF's token-classification pipeline with\n"
         "aggregation_strategy=\"simple\". Prints {\"text\": ..., \"entities\": [{\"entity_group\", \"score\",\n"
         "\"word\", \"start\", \"end\"}, ...]}: each token takes its most probable label (softmax); neighbours\n"
         "join while the tag stays the same and no B- starts a new one (B-/I- prefixes; other labels act as\n"
         "I-); O is left out. score is the mean of the tokens' probabilities, start and end count Unicode code\n"
         "points of the text (HF's offsets, which include a word's leading space for SentencePiece\n"
         "tokenizers), word is the entity's tokens decoded.\n"
         "\n" +
         pipeline_common_help();
}

int ner_command(std::span<char const* const> args) {
  auto const options = parse_pipeline_options("ner", args, {}, true);
  if (!options) {
    std::cout << ner_help();
    return 0;
  }
  auto const pipeline = load_pipeline(*options, HeadKind::kTokenClassification, "ner");
  for_each_batch(*options, [&](std::vector<std::string> const& texts, std::size_t first) {
    auto const results = pipeline->ner(texts, text_run(*pipeline, first));
    for (std::size_t i = 0; i < texts.size(); ++i)
      print_line({{"text", texts[i]}, {"entities", runtime::entities_json(results[i])}});
  });
  return 0;
}

}  // namespace flashdeberta::cli

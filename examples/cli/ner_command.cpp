// flashdeberta ner: HF's token-classification pipeline with aggregation_strategy="simple": entities
// with their label group, mean score, text and character span.
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "flashdeberta/heads/sequence_classification.hpp"
#include "flashdeberta/pipelines/token_classification.hpp"
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
  Pipeline const pipeline(*options, HeadKind::kTokenClassification, "ner");
  tokenizer::Tokenizer const& tok = pipeline.tokenizer();
  std::vector<std::string> const labels = label_names(pipeline.config());
  auto const decode = [&](std::span<std::int64_t const> ids) { return tok.decode(ids); };

  for_each_batch(*options, [&](std::vector<std::string> const& texts, std::size_t first) {
    std::vector<tokenizer::Encoding> encodings;
    std::vector<std::size_t> sizes;
    for (std::size_t i = 0; i < texts.size(); ++i) {
      encodings.push_back(pipeline.encode(texts[i], first + i));
      sizes.push_back(encodings.back().size());
    }
    HeadOutput const out = pipeline.forward(encodings, std::nullopt, first);
    std::vector<std::vector<float>> const logits = rows_by_sequence(out["logits"], sizes);
    for (std::size_t i = 0; i < texts.size(); ++i) {
      auto const predictions = pipelines::token_predictions(encodings[i], logits[i], labels.size());
      nlohmann::ordered_json list = nlohmann::ordered_json::array();
      for (auto const& e : pipelines::group_entities_simple(encodings[i], predictions, labels, decode)) {
        list.push_back({{"entity_group", e.entity_group},
                        {"score", e.score},
                        {"word", e.word},
                        {"start", e.start},
                        {"end", e.end}});
      }
      nlohmann::ordered_json line;
      line["text"] = texts[i];
      line["entities"] = std::move(list);
      std::cout << line.dump() << '\n';
    }
  });
  return 0;
}

}  // namespace flashdeberta::cli

// flashdeberta classify: HF's text-classification pipeline with top_k=None (or --top-k K). Every label of
// id2label (or the K best) with its probability, highest first: softmax, or a sigmoid per label when config.json's
// problem_type is multi_label_classification (or the model has one label).
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "pipeline_common.hpp"

namespace flashdeberta::cli {

std::string classify_help() {
  return "usage: flashdeberta classify --model DIR [--top-k K] [options] [TEXT...]\n"
         "\n"
         "Classifies each TEXT (or, without TEXT, each line of stdin) with a sequence-classification\n"
         "checkpoint (architectures Deberta*ForSequenceClassification), as HF's text-classification pipeline\n"
         "with top_k=None. Prints {\"text\": ..., \"labels\": [{\"label\", \"score\"}, ...]}: every label of\n"
         "config.json's id2label (LABEL_<i> without one), highest score first. Scores are the softmax over the\n"
         "labels, or a sigmoid per label when problem_type is multi_label_classification or there is one label.\n"
         "\n"
         "  --top-k K            the K best labels only (HF's top_k; default: every label)\n" +
         pipeline_common_help();
}

int classify_command(std::span<char const* const> args) {
  ExtraOption const extras[] = {{"top-k"}};
  auto const options = parse_pipeline_options("classify", args, extras, true);
  if (!options) {
    std::cout << classify_help();
    return 0;
  }
  auto const pipeline = load_pipeline(*options, HeadKind::kSequenceClassification, "classify");
  std::optional<std::size_t> const top_k =
      options->top_k ? std::optional<std::size_t>(static_cast<std::size_t>(*options->top_k)) : std::nullopt;
  for_each_batch(*options, [&](std::vector<std::string> const& texts, std::size_t first) {
    auto const results = pipeline->classify(texts, {}, top_k, first);
    for (std::size_t i = 0; i < texts.size(); ++i) {
      nlohmann::ordered_json list = nlohmann::ordered_json::array();
      for (auto const& s : results[i]) list.push_back({{"label", s.label}, {"score", s.score}});
      nlohmann::ordered_json line;
      line["text"] = texts[i];
      line["labels"] = std::move(list);
      std::cout << line.dump() << '\n';
    }
  });
  return 0;
}

}  // namespace flashdeberta::cli

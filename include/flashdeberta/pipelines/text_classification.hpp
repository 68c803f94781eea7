// HF's text-classification pipeline with top_k=None after the model: every label with its score,
// highest first. Softmax over the labels, a sigmoid per label where HF uses one (config.json's
// problem_type "multi_label_classification", or a single label), the logits for "regression", or what
// function_to_apply asks for.
#pragma once

#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/pipelines/scores.hpp"

namespace flashdeberta::pipelines {

// HF's function_to_apply: softmax, sigmoid, or none (the logits themselves, as TEI's raw_scores).
enum class ScoreFunction { kSoftmax, kSigmoid, kNone };

// What HF's pipeline applies for a config with `num_labels` labels and `problem_type` ("" when absent): none
// for regression, sigmoid for multi-label or a single label, else softmax.
inline ScoreFunction classification_function(std::string_view problem_type, std::size_t num_labels) {
  if (problem_type == "regression") return ScoreFunction::kNone;
  return problem_type == "multi_label_classification" || num_labels == 1 ? ScoreFunction::kSigmoid
                                                                         : ScoreFunction::kSoftmax;
}

// HF's function_to_apply by name (any case, as ClassificationFunction[name.upper()]): "softmax", "sigmoid",
// "none"; "default" (the name HF's documentation gives the unset value) is nullopt: the config decides.
inline std::optional<ScoreFunction> parse_score_function(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (lower == "softmax") return ScoreFunction::kSoftmax;
  if (lower == "sigmoid") return ScoreFunction::kSigmoid;
  if (lower == "none") return ScoreFunction::kNone;
  FLASHDEBERTA_REQUIRE(lower == "default",
                       "function_to_apply '" << name << "' is not one of default, sigmoid, softmax, none");
  return std::nullopt;
}

struct LabelScore {
  std::string label;
  float score = 0.0f;
};

// One sequence's logits [num_labels] -> every label and its score, highest first (stable: equal scores
// keep label order, as Python's sort).
inline std::vector<LabelScore> classify(std::span<float const> logits, std::vector<std::string> const& labels,
                                        ScoreFunction function) {
  FLASHDEBERTA_REQUIRE(logits.size() == labels.size(),
                       "classify: " << logits.size() << " logits for " << labels.size() << " labels");
  std::vector<float> const scores = function == ScoreFunction::kSigmoid ? sigmoid(logits)
                                    : function == ScoreFunction::kNone
                                        ? std::vector<float>(logits.begin(), logits.end())
                                        : softmax(logits);
  std::vector<LabelScore> out;
  out.reserve(scores.size());
  for (std::size_t i = 0; i < scores.size(); ++i) out.push_back({labels[i], scores[i]});
  std::stable_sort(out.begin(), out.end(), [](LabelScore const& a, LabelScore const& b) { return a.score > b.score; });
  return out;
}

}  // namespace flashdeberta::pipelines

// HF's zero-shot-classification pipeline (ZeroShotClassificationPipeline, transformers 5.17) around an NLI
// model: each text is the premise of one pair per candidate label, whose hypothesis is the template with
// the label in it, and the model's entailment logits rank the labels. These are the steps before and
// after the model: the labels and hypotheses, the entailment and contradiction columns, the scores and
// their order.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/core/quoted_excerpt.hpp"

namespace flashdeberta::pipelines {

// HF's default hypothesis_template.
inline constexpr std::string_view kDefaultHypothesisTemplate = "This example is {}.";

// The columns of the NLI model's logits that zero-shot reads.
struct NliLabelIds {
  std::size_t entailment = 0;
  std::size_t contradiction = 0;
};

// One text's candidate labels, best first, with their scores (HF's {"labels", "scores"}).
struct ZeroShotResult {
  std::vector<std::string> labels;
  std::vector<float> scores;
};

namespace detail {

inline bool is_python_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

inline bool starts_with_ignoring_case(std::string_view text, std::string_view prefix) {
  if (text.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    char c = text[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != prefix[i]) return false;
  }
  return true;
}

}  // namespace detail

// HF's entailment_id and its contradiction column: the first label (in id order) that starts with
// "entail", ASCII case-insensitive; nullopt when none does (HF then warns and reads the last column, which
// is rarely what anyone wants). The contradiction column is found by position, not by name, exactly as HF
// does: the last label when entailment is label 0, label 0 otherwise. So two-label NLI models
// ({entailment, not_entailment}) work, and a model whose contradiction label is elsewhere is read as HF
// reads it.
inline std::optional<NliLabelIds> nli_label_ids(std::span<std::string const> labels) {
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (detail::starts_with_ignoring_case(labels[i], "entail"))
      return NliLabelIds{i, i == 0 ? labels.size() - 1 : std::size_t{0}};
  }
  return std::nullopt;
}

// HF's _parse_labels for a string: split on commas, each label stripped of (ASCII) white space, empty ones
// dropped ("sports, weather ,politics" -> sports, weather, politics).
inline std::vector<std::string> parse_candidate_labels(std::string_view text) {
  std::vector<std::string> labels;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    std::size_t end = text.find(',', begin);
    if (end == std::string_view::npos) end = text.size();
    std::size_t first = begin, last = end;
    while (first < last && detail::is_python_space(text[first])) ++first;
    while (last > first && detail::is_python_space(text[last - 1])) --last;
    if (last > first) labels.emplace_back(text.substr(first, last - first));
    begin = end + 1;
  }
  return labels;
}

// hypothesis_template.format(label) as Python computes it for the templates HF documents: "{}" and "{0}"
// become the label, "{{" and "}}" a brace. Any other replacement field ("{name}", "{:>8}", "{!r}") or a
// lone brace is an error naming the template.
inline std::string format_hypothesis(std::string_view hypothesis_template, std::string_view label) {
  std::string out;
  for (std::size_t i = 0; i < hypothesis_template.size(); ++i) {
    char const c = hypothesis_template[i];
    bool const doubled = i + 1 < hypothesis_template.size() && hypothesis_template[i + 1] == c;
    if ((c == '{' || c == '}') && doubled) {
      out += c;
      ++i;
      continue;
    }
    if (c == '{') {
      std::size_t const close = hypothesis_template.find('}', i);
      std::string_view const field =
          close == std::string_view::npos ? std::string_view() : hypothesis_template.substr(i + 1, close - i - 1);
      FLASHDEBERTA_REQUIRE(close != std::string_view::npos && (field.empty() || field == "0"),
                           "hypothesis template " << quoted_excerpt(hypothesis_template, '"')
                                                  << ": only {} (or {0}) may stand for the label, and a literal "
                                                     "brace is written {{ or }}");
      out += label;
      i = close;
      continue;
    }
    FLASHDEBERTA_REQUIRE(c != '}', "hypothesis template " << quoted_excerpt(hypothesis_template, '"')
                                                          << " has a single '}' (a literal brace is written }})");
    out += c;
  }
  return out;
}

// The hypothesis of every candidate label, refused as HF refuses them: no label, or a template that the
// first label leaves unchanged (it has no {} for the label).
inline std::vector<std::string> hypotheses(std::string_view hypothesis_template,
                                           std::span<std::string const> candidate_labels) {
  FLASHDEBERTA_REQUIRE(!candidate_labels.empty(), "zero-shot classification needs at least one candidate label");
  std::vector<std::string> out;
  for (std::string const& label : candidate_labels) out.push_back(format_hypothesis(hypothesis_template, label));
  FLASHDEBERTA_REQUIRE(out.front() != hypothesis_template, "hypothesis template "
                                                               << quoted_excerpt(hypothesis_template, '"')
                                                               << " has no {} where the candidate label should go");
  return out;
}

// One text's scores in candidate order from its logits (candidates, num_labels), row c being the pair of
// the text with candidate c's hypothesis. With multi_label, or a single candidate whatever multi_label
// says, each candidate is scored alone: softmax over its (contradiction, entailment) logits, the entailment
// part. Otherwise the softmax of the entailment logits over the candidates. Computed in double (HF: float32
// numpy, no max subtracted; the two agree to ~1e-7).
inline std::vector<float> zero_shot_scores(std::span<float const> logits, std::size_t num_labels, NliLabelIds ids,
                                           bool multi_label) {
  FLASHDEBERTA_REQUIRE(num_labels > std::max(ids.entailment, ids.contradiction) && logits.size() % num_labels == 0,
                       "zero_shot_scores: " << logits.size() << " logits are not rows of " << num_labels
                                            << " labels holding columns " << ids.entailment << " and "
                                            << ids.contradiction);
  std::size_t const candidates = logits.size() / num_labels;
  auto const at = [&](std::size_t c, std::size_t column) {
    return static_cast<double>(logits[c * num_labels + column]);
  };
  std::vector<float> scores(candidates);
  if (multi_label || candidates == 1) {
    for (std::size_t c = 0; c < candidates; ++c) {
      // e^entail / (e^contra + e^entail), written so that neither exponential can overflow
      scores[c] = static_cast<float>(1.0 / (1.0 + std::exp(at(c, ids.contradiction) - at(c, ids.entailment))));
    }
    return scores;
  }
  double top = -INFINITY;
  for (std::size_t c = 0; c < candidates; ++c) top = std::max(top, at(c, ids.entailment));
  std::vector<double> e(candidates);
  double sum = 0.0;
  for (std::size_t c = 0; c < candidates; ++c) sum += e[c] = std::exp(at(c, ids.entailment) - top);
  for (std::size_t c = 0; c < candidates; ++c) scores[c] = static_cast<float>(e[c] / sum);
  return scores;
}

// HF's order, list(reversed(scores.argsort())): highest score first, and of equal scores the later
// candidate first (numpy's argsort keeps equal scores in index order for the few candidates a call has,
// and the list is then reversed).
inline std::vector<std::size_t> zero_shot_order(std::span<float const> scores) {
  std::vector<std::size_t> order(scores.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return scores[a] > scores[b] || (scores[a] == scores[b] && a > b); });
  return order;
}

// The candidates and their scores, best first.
inline ZeroShotResult rank_candidates(std::span<std::string const> candidate_labels, std::span<float const> scores) {
  FLASHDEBERTA_REQUIRE(candidate_labels.size() == scores.size(),
                       "rank_candidates: " << scores.size() << " scores for " << candidate_labels.size() << " labels");
  ZeroShotResult result;
  for (std::size_t c : zero_shot_order(scores)) {
    result.labels.push_back(candidate_labels[c]);
    result.scores.push_back(scores[c]);
  }
  return result;
}

}  // namespace flashdeberta::pipelines

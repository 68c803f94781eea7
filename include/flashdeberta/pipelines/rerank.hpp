// Reranking with a cross-encoder (a sequence-classification model of one label run on (query, passage)
// pairs), as text-embeddings-inference's /rerank answers it: the passages by descending score, each with
// its index in the request; the score is the sigmoid of the logit (what HF's text-classification pipeline
// gives a one-label model), or the logit itself when raw scores are asked for.
#pragma once

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <optional>
#include <span>
#include <vector>

#include "flashdeberta/pipelines/scores.hpp"

namespace flashdeberta::pipelines {

struct RerankScore {
  std::size_t index = 0;  // the passage's position in the request
  float score = 0.0f;
};

// Passage indices by descending logit; equal logits keep request order (a stable sort, as Python's
// sorted and TEI). Sorting the logits rather than the sigmoids keeps apart logits whose sigmoids round to
// the same float.
inline std::vector<std::size_t> rerank_order(std::span<float const> logits) {
  std::vector<std::size_t> order(logits.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return logits[a] > logits[b]; });
  return order;
}

// The passages' logits (one per passage, in request order) -> the top_n best (all when unset), best
// first, with sigmoid scores or the raw logits.
inline std::vector<RerankScore> rerank(std::span<float const> logits, std::optional<std::size_t> top_n,
                                       bool raw_scores) {
  std::vector<float> const scores = raw_scores ? std::vector<float>(logits.begin(), logits.end()) : sigmoid(logits);
  std::vector<std::size_t> order = rerank_order(logits);
  if (top_n && *top_n < order.size()) order.resize(*top_n);
  std::vector<RerankScore> out;
  out.reserve(order.size());
  for (std::size_t i : order) out.push_back({i, scores[i]});
  return out;
}

}  // namespace flashdeberta::pipelines

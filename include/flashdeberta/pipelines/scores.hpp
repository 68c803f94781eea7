// Scores of HF's pipelines from raw logits: softmax and sigmoid as the pipelines compute them (max
// subtracted, then normalized), and the top-k order (highest first, ties to the lower index).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

namespace flashdeberta::pipelines {

// exp(x - max) / sum, accumulated in double and rounded to float (HF computes in float32; the results
// agree to ~1e-7).
inline std::vector<float> softmax(std::span<float const> logits) {
  std::vector<float> out(logits.size());
  if (logits.empty()) return out;
  double const top = *std::max_element(logits.begin(), logits.end());
  std::vector<double> e(logits.size());
  double sum = 0.0;
  for (std::size_t i = 0; i < logits.size(); ++i) sum += e[i] = std::exp(static_cast<double>(logits[i]) - top);
  for (std::size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<float>(e[i] / sum);
  return out;
}

inline std::vector<float> sigmoid(std::span<float const> logits) {
  std::vector<float> out(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i)
    out[i] = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(logits[i]))));
  return out;
}

// Indices of the k largest values, largest first; equal values keep index order.
inline std::vector<std::int64_t> top_k(std::span<float const> values, std::size_t k) {
  std::vector<std::int64_t> order(values.size());
  std::iota(order.begin(), order.end(), std::int64_t{0});
  k = std::min(k, order.size());
  std::partial_sort(
      order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
      [&](std::int64_t a, std::int64_t b) { return values[a] > values[b] || (values[a] == values[b] && a < b); });
  order.resize(k);
  return order;
}

}  // namespace flashdeberta::pipelines

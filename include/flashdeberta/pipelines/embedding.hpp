// Sentence embeddings from a backbone's last hidden states, as text-embeddings-inference's /embed and
// sentence-transformers' Pooling and Normalize modules compute them: the [CLS] row or the mean of the
// text's rows, then optionally scaled to unit L2 norm.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

#include "flashdeberta/core/error.hpp"

namespace flashdeberta::pipelines {

enum class Pooling {
  kCls,   // the first token's row ([CLS])
  kMean,  // the mean over every token of the encoding, special tokens included (its attention mask)
};

// One text's hidden states (tokens, hidden_size), row-major -> its pooled vector [hidden_size]. Summed in
// double: a mean over thousands of tokens in float would lose the low digits of each row.
inline std::vector<float> pool(std::span<float const> hidden, std::size_t hidden_size, Pooling pooling) {
  FLASHDEBERTA_REQUIRE(
      hidden_size > 0 && !hidden.empty() && hidden.size() % hidden_size == 0,
      "pool: " << hidden.size() << " values are not rows of " << hidden_size << " (a text has at least one token)");
  if (pooling == Pooling::kCls) return std::vector<float>(hidden.begin(), hidden.begin() + hidden_size);
  std::size_t const tokens = hidden.size() / hidden_size;
  std::vector<double> sum(hidden_size, 0.0);
  for (std::size_t t = 0; t < tokens; ++t)
    for (std::size_t h = 0; h < hidden_size; ++h) sum[h] += hidden[t * hidden_size + h];
  std::vector<float> out(hidden_size);
  for (std::size_t h = 0; h < hidden_size; ++h) out[h] = static_cast<float>(sum[h] / static_cast<double>(tokens));
  return out;
}

// v / max(|v|, 1e-12), as torch.nn.functional.normalize: a zero vector stays zero instead of becoming NaN.
inline void l2_normalize(std::span<float> v) {
  double squares = 0.0;
  for (float x : v) squares += static_cast<double>(x) * x;
  double const norm = std::max(std::sqrt(squares), 1e-12);
  for (float& x : v) x = static_cast<float>(x / norm);
}

}  // namespace flashdeberta::pipelines

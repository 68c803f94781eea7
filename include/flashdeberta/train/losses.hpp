// The heads' losses as HF computes them (docs/training.md), on host logits, with their gradient: each returns the
// loss and d loss / d logits. Sums run in float64.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "flashdeberta/core/error.hpp"

namespace flashdeberta {

// HF's ignore_index for token-level labels.
inline constexpr std::int64_t kIgnoredLabel = -100;

struct LossGradient {
  double loss = 0.0;
  std::vector<float> dlogits;  // the logits' shape
  std::int64_t counted = 0;    // rows (or elements) the loss averaged over
};

// Mean cross-entropy over the rows whose label is not kIgnoredLabel; logits (rows, classes). With no counted row
// the loss is 0 with a zero gradient (HF's mean over nothing is NaN; a batch of only ignored labels adds nothing).
inline LossGradient cross_entropy(std::span<float const> logits, std::int64_t classes,
                                  std::span<std::int64_t const> labels) {
  auto const rows = static_cast<std::int64_t>(labels.size());
  FLASHDEBERTA_REQUIRE(
      classes > 0 && static_cast<std::int64_t>(logits.size()) == rows * classes,
      "cross-entropy: " << logits.size() << " logits are not " << rows << " rows x " << classes << " classes");
  LossGradient out;
  out.dlogits.assign(logits.size(), 0.0f);
  for (std::int64_t label : labels) {
    FLASHDEBERTA_REQUIRE(label == kIgnoredLabel || (label >= 0 && label < classes),
                         "cross-entropy: label " << label << " is outside [0, " << classes << ")");
    out.counted += label == kIgnoredLabel ? 0 : 1;
  }
  if (out.counted == 0) return out;
  std::vector<double> probabilities(static_cast<std::size_t>(classes));
  for (std::int64_t r = 0; r < rows; ++r) {
    if (labels[r] == kIgnoredLabel) continue;
    float const* row = logits.data() + r * classes;
    double const top = *std::max_element(row, row + classes);
    double sum = 0.0;
    for (std::int64_t c = 0; c < classes; ++c) sum += probabilities[c] = std::exp(static_cast<double>(row[c]) - top);
    out.loss += std::log(sum) + top - static_cast<double>(row[labels[r]]);
    for (std::int64_t c = 0; c < classes; ++c) {
      double const target = c == labels[r] ? 1.0 : 0.0;
      out.dlogits[r * classes + c] = static_cast<float>((probabilities[c] / sum - target) / out.counted);
    }
  }
  out.loss /= static_cast<double>(out.counted);
  return out;
}

// Mean squared error of one logit per row against float targets (num_labels 1: regression).
inline LossGradient mean_squared_error(std::span<float const> logits, std::span<float const> targets) {
  FLASHDEBERTA_REQUIRE(logits.size() == targets.size() && !logits.empty(),
                       "regression: " << logits.size() << " logits against " << targets.size() << " targets");
  LossGradient out;
  auto const n = static_cast<double>(logits.size());
  out.counted = static_cast<std::int64_t>(logits.size());
  out.dlogits.resize(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i) {
    double const diff = static_cast<double>(logits[i]) - targets[i];
    out.loss += diff * diff;
    out.dlogits[i] = static_cast<float>(2.0 * diff / n);
  }
  out.loss /= n;
  return out;
}

// Mean binary cross-entropy with logits over every element (multi_label_classification), targets in [0, 1].
inline LossGradient binary_cross_entropy(std::span<float const> logits, std::span<float const> targets) {
  FLASHDEBERTA_REQUIRE(logits.size() == targets.size() && !logits.empty(),
                       "multi-label: " << logits.size() << " logits against " << targets.size() << " targets");
  LossGradient out;
  auto const n = static_cast<double>(logits.size());
  out.counted = static_cast<std::int64_t>(logits.size());
  out.dlogits.resize(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i) {
    double const x = logits[i];
    double const y = targets[i];
    // log(1 + exp(-|x|)) + max(x, 0) - x y: PyTorch's stable form.
    out.loss += std::max(x, 0.0) - x * y + std::log1p(std::exp(-std::abs(x)));
    out.dlogits[i] = static_cast<float>((1.0 / (1.0 + std::exp(-x)) - y) / n);
  }
  out.loss /= n;
  return out;
}

// Question answering: (CE(start) + CE(end)) / 2, each over one sequence's tokens. `offsets` (B + 1) delimit each
// sequence's rows of the packed (T) start and end logits; a position of kIgnoredLabel (HF: clamped to the padded
// length, its ignore_index) counts in neither mean.
inline LossGradient question_answering_loss(std::span<float const> start_logits, std::span<float const> end_logits,
                                            std::span<std::int32_t const> offsets, std::span<std::int64_t const> starts,
                                            std::span<std::int64_t const> ends) {
  auto const batch = static_cast<std::int64_t>(offsets.size()) - 1;
  FLASHDEBERTA_REQUIRE(batch >= 0 && static_cast<std::int64_t>(starts.size()) == batch &&
                           static_cast<std::int64_t>(ends.size()) == batch,
                       "question answering: " << starts.size() << " start and " << ends.size() << " end positions for "
                                              << batch << " sequences");
  LossGradient out;
  out.dlogits.assign(start_logits.size() * 2, 0.0f);  // [start (T) | end (T)]
  auto const tokens = static_cast<std::int64_t>(start_logits.size());
  for (int side = 0; side < 2; ++side) {
    std::span<float const> const logits = side == 0 ? start_logits : end_logits;
    std::span<std::int64_t const> const positions = side == 0 ? starts : ends;
    std::int64_t counted = 0;
    for (std::int64_t p : positions) counted += p == kIgnoredLabel ? 0 : 1;
    if (counted == 0) continue;
    double loss = 0.0;
    for (std::int64_t b = 0; b < batch; ++b) {
      if (positions[b] == kIgnoredLabel) continue;
      std::int64_t const first = offsets[b];
      std::int64_t const length = offsets[b + 1] - first;
      FLASHDEBERTA_REQUIRE(positions[b] >= 0 && positions[b] < length,
                           "question answering: sequence " << b << "'s " << (side == 0 ? "start" : "end")
                                                           << " position " << positions[b] << " is outside its "
                                                           << length << " tokens");
      LossGradient const one = cross_entropy(logits.subspan(first, length), length, positions.subspan(b, 1));
      loss += one.loss;
      for (std::int64_t i = 0; i < length; ++i)
        out.dlogits[side * tokens + first + i] = static_cast<float>(one.dlogits[i] / (2.0 * counted));
    }
    out.loss += loss / (2.0 * counted);
    out.counted += counted;
  }
  return out;
}

}  // namespace flashdeberta

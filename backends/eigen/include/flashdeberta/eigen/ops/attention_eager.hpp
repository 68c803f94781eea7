// Eager host attention: materializes the (L, L) scores of one head at a time, in HF's order of operations
// (deberta-spec 4.2): content = q . (k / scale)^T; c2p and p2c formed as full (L, 2k) products, gathered
// through an (L, L) index matrix and divided by scale; softmax; dropout (training, AttentionArgs::dropout);
// probabilities . v. The reference path.
#pragma once

#include <cmath>
#include <vector>

#include "flashdeberta/eigen/ops/attention_common.hpp"

namespace flashdeberta::eigen_ops {

inline void attention_eager(AttentionArgs const& a, int threads) {
  check_attention_args(a);
  std::int64_t const d = a.head_size;
  bool const c2p = !a.pos_key.empty();
  bool const p2c = !a.pos_query.empty();
  ProbsDropout const drop(a);
  for (std::int64_t b = 0; b < a.sequences.batch; ++b) {
    std::int64_t const first = a.sequences.cu_seqlens[b];
    std::int64_t const length = a.sequences.cu_seqlens[b + 1] - first;
    if (length == 0) continue;
    // (L, L) relative slot of every query/key pair, built once per sequence as HF builds relative_pos.
    std::vector<std::int32_t> slot_index;
    if (c2p || p2c) {
      slot_index.resize(static_cast<std::size_t>(length * length));
      std::int32_t const* pos = a.sequences.positions + first;
      for (std::int64_t i = 0; i < length; ++i) {
        for (std::int64_t j = 0; j < length; ++j) {
          std::int64_t diff = static_cast<std::int64_t>(pos[i]) - pos[j];
          diff = diff < -a.saturation ? -a.saturation : (diff > a.saturation ? a.saturation : diff);
          slot_index[i * length + j] = a.relative_index[diff + a.saturation];
        }
      }
    }
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (std::int64_t h = 0; h < a.num_heads; ++h) {
      HeadViews view = head_views(a, first, length, h);
      RowMatrix const k_scaled = view.k / a.scale;
      RowMatrix scores = view.q * k_scaled.transpose();  // (L, L)
      if (c2p || p2c) {
        RowMatrix c2p_full;  // (L, 2k) = q . Kr^T
        RowMatrix p2c_full;  // (L, 2k) = k . Qr^T
        if (c2p) c2p_full = view.q * relative_head(a.pos_key, h, d).transpose();
        if (p2c) p2c_full = view.k * relative_head(a.pos_query, h, d).transpose();
        for (std::int64_t i = 0; i < length; ++i) {
          for (std::int64_t j = 0; j < length; ++j) {
            std::int32_t const slot = slot_index[i * length + j];
            float rel = 0.0f;
            if (c2p) rel = c2p_full(i, slot) / a.scale;
            if (p2c) rel += p2c_full(j, slot) / a.scale;
            scores(i, j) += rel;
          }
        }
      }
      float* lse = a.lse != nullptr ? a.lse + h * a.sequences.total_tokens + first : nullptr;  // (L) or null
      for (std::int64_t i = 0; i < length; ++i) {
        auto row = scores.row(i);
        float const max = row.maxCoeff();
        row = (row.array() - max).exp();
        float const sum = row.sum();
        row /= sum;
        if (lse != nullptr) lse[i] = max + std::log(sum);
        if (drop.active()) drop.apply(row.data(), length, drop.row_counter(h, first + i));  // after lse: undropped
      }
      view.out.noalias() = scores * view.v;
    }
  }
}

}  // namespace flashdeberta::eigen_ops

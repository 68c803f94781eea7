// Eager host attention backward: per sequence and head, the (L, L) probabilities recomputed in the eager
// forward's order of operations (attention_eager.hpp), then dS, the (L, 2k) band gradients and every gradient
// as dense products, as HF's autograd differentiates its materialized scores (with dropout on the probabilities, the
// mask redrawn per row). The reference path of the backward; attention_backward_common.hpp gives the terms.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "flashdeberta/eigen/ops/attention_backward_common.hpp"
#include "flashdeberta/eigen/ops/op_threads.hpp"

namespace flashdeberta::eigen_ops {
namespace detail {

// One head of one sequence. slot_index: the (L, L) slot of every pair, or null without position terms.
inline void eager_head_backward(AttentionBackwardArgs const& g, std::int32_t const* slot_index, std::int64_t first,
                                std::int64_t length, std::int64_t head) {
  AttentionArgs const& a = g.forward;
  std::int64_t const d = a.head_size;
  bool const c2p = !a.pos_key.empty();
  bool const p2c = !a.pos_query.empty();
  float const inv_scale = 1.0f / a.scale;
  HeadViews const view = head_views(a, first, length, head);
  HeadGradients grad = head_gradients(g, first, length, head);

  RowMatrix const k_scaled = view.k / a.scale;
  RowMatrix p = view.q * k_scaled.transpose();  // (L, L) scores, then probabilities
  if (slot_index != nullptr) {
    RowMatrix c2p_full;  // (L, 2k) = q . Kr^T
    RowMatrix p2c_full;  // (L, 2k) = k . Qr^T
    if (c2p) c2p_full = view.q * relative_head(a.pos_key, head, d).transpose();
    if (p2c) p2c_full = view.k * relative_head(a.pos_query, head, d).transpose();
    for (std::int64_t i = 0; i < length; ++i) {
      for (std::int64_t j = 0; j < length; ++j) {
        std::int32_t const slot = slot_index[i * length + j];
        float rel = 0.0f;
        if (c2p) rel = c2p_full(i, slot) / a.scale;
        if (p2c) rel += p2c_full(j, slot) / a.scale;
        p(i, j) += rel;
      }
    }
  }
  for (std::int64_t i = 0; i < length; ++i) {
    auto row = p.row(i);
    float const max = row.maxCoeff();
    row = (row.array() - max).exp();
    row /= row.sum();
  }

  ConstMatrixMap const out = cmap(view.out.data(), length, d, view.out.outerStride());
  RowMatrix ds = grad.dout * view.v.transpose();  // (L, L) dP, then dS = P * (dP - D)
  ProbsDropout const drop(a);
  if (drop.active()) {  // dP = (dO V^T) * m / (1 - p), D from the dropped output; then P dropped for dV
    Eigen::RowVectorXf keep(length);
    for (std::int64_t i = 0; i < length; ++i) {
      drop.factors(keep.data(), length, drop.row_counter(head, first + i));
      float const row_dot = output_dot(grad.dout, out, i);
      ds.row(i) = p.row(i).cwiseProduct((ds.row(i).cwiseProduct(keep).array() - row_dot).matrix());
      p.row(i) = p.row(i).cwiseProduct(keep);
    }
  } else {
    for (std::int64_t i = 0; i < length; ++i) {
      float const row_dot = output_dot(grad.dout, out, i);
      ds.row(i) = p.row(i).cwiseProduct((ds.row(i).array() - row_dot).matrix());
    }
  }
  grad.dv.noalias() = p.transpose() * grad.dout;
  ds *= inv_scale;  // from here on d loss / d (q . k + position terms)
  grad.dq.noalias() = ds * view.k;
  grad.dk.noalias() = ds.transpose() * view.q;
  if (slot_index == nullptr) return;

  std::int64_t const slots = c2p ? a.pos_key.rows : a.pos_query.rows;
  RowMatrix band_c2p = RowMatrix::Zero(c2p ? length : 0, slots);  // (L, 2k) Gc2p / scale
  RowMatrix band_p2c = RowMatrix::Zero(p2c ? length : 0, slots);  // (L, 2k) Gp2c / scale
  for (std::int64_t i = 0; i < length; ++i) {
    for (std::int64_t j = 0; j < length; ++j) {
      std::int32_t const slot = slot_index[i * length + j];
      if (c2p) band_c2p(i, slot) += ds(i, j);
      if (p2c) band_p2c(j, slot) += ds(i, j);
    }
  }
  if (c2p) {
    ConstMatrixMap const kr = relative_head(a.pos_key, head, d);
    grad.dq.noalias() += band_c2p * kr;
    relative_head_gradient(g.dpos_key, head, d).noalias() += band_c2p.transpose() * view.q;
  }
  if (p2c) {
    ConstMatrixMap const qr = relative_head(a.pos_query, head, d);
    grad.dk.noalias() += band_p2c * qr;
    relative_head_gradient(g.dpos_query, head, d).noalias() += band_p2c.transpose() * view.k;
  }
}

}  // namespace detail

// Sequences one after another, the heads of each split over the threads: a head's table columns have one writer,
// and each adds its sequences in batch order, so the result does not depend on the thread count.
inline void attention_backward_eager(AttentionBackwardArgs const& g, int threads) {
  check_attention_backward_args(g);
  AttentionArgs const& a = g.forward;
  bool const relative = !a.pos_key.empty() || !a.pos_query.empty();
  std::int64_t const slots = relative ? (a.pos_key.empty() ? a.pos_query.rows : a.pos_key.rows) : 0;
  std::vector<std::int32_t> slot_index;
  for (std::int64_t b = 0; b < a.sequences.batch; ++b) {
    std::int64_t const first = a.sequences.cu_seqlens[b];
    std::int64_t const length = a.sequences.cu_seqlens[b + 1] - first;
    if (length == 0) continue;
    if (relative) {  // (L, L), as the forward builds it
      slot_index.resize(static_cast<std::size_t>(length * length));
      std::int32_t const* pos = a.sequences.positions + first;
      for (std::int64_t i = 0; i < length; ++i) {
        for (std::int64_t j = 0; j < length; ++j) {
          std::int64_t const diff =
              std::clamp<std::int64_t>(std::int64_t{pos[i]} - pos[j], -a.saturation, a.saturation);
          slot_index[static_cast<std::size_t>(i * length + j)] = a.relative_index[diff + a.saturation];
        }
      }
    }
    auto const l = static_cast<double>(length);
    double const fma = static_cast<double>(a.num_heads * a.head_size) * (5.0 * l * l + 4.0 * l * double(slots));
    OpThreads const team = threads_for(fma, kMinFmaPerThread, threads, a.num_heads);
    for_each_index(team, a.num_heads, [&](std::int64_t h) {
      detail::eager_head_backward(g, relative ? slot_index.data() : nullptr, first, length, h);
    });
  }
}

}  // namespace flashdeberta::eigen_ops

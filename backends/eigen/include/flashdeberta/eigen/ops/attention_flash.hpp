// Flash host attention: tiled online softmax with no (L, L) buffer (memory linear in L).
//
// Position terms come from two small products per head: p2c_all (L, 2k) = k . Qr^T once per head, and
// c2p_block (BM, 2k) = q_block . Kr^T per query block; a tile adds c2p_block[i, delta] + p2c_all[j, delta]
// with delta read from the precomputed slot table. A tile whose pairs all lie beyond the saturation
// distance uses one slot for all of them, so its position terms reduce to a per-row plus a per-column
// vector: plain attention plus two biases, no table look-ups.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

#include "flashdeberta/eigen/ops/attention_common.hpp"

namespace flashdeberta::eigen_ops {

struct HostFlashTile {
  static constexpr std::int64_t kBlockQ = 64;  // query rows per task
  static constexpr std::int64_t kBlockK = 64;  // key columns per inner step
};

namespace detail {

// Adds the c2p/p2c terms of the tile (rows [i0, i0 + rows), cols [j0, j0 + cols)) to scores.
inline void add_position_terms(AttentionArgs const& a, std::int32_t const* pos, std::int64_t i0, std::int64_t rows,
                               std::int64_t j0, std::int64_t cols, RowMatrix const& c2p_block, RowMatrix const& p2c_all,
                               bool c2p, bool p2c, RowMatrix& scores) {
  std::int64_t const min_diff = static_cast<std::int64_t>(pos[i0]) - pos[j0 + cols - 1];
  std::int64_t const max_diff = static_cast<std::int64_t>(pos[i0 + rows - 1]) - pos[j0];
  bool const saturated_far = min_diff >= a.saturation;    // every key far to the left of every query
  bool const saturated_near = max_diff <= -a.saturation;  // every key far to the right
  if (saturated_far || saturated_near) {
    std::int32_t const slot = a.relative_index[saturated_far ? 2 * a.saturation : 0];
    if (c2p) scores.topRows(rows).leftCols(cols).colwise() += c2p_block.col(slot).head(rows);
    if (p2c) scores.topRows(rows).leftCols(cols).rowwise() += p2c_all.col(slot).segment(j0, cols).transpose();
    return;
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int64_t const pi = pos[i0 + r];
    for (std::int64_t c = 0; c < cols; ++c) {
      std::int64_t diff = pi - pos[j0 + c];
      diff = std::clamp(diff, -a.saturation, a.saturation);
      std::int32_t const slot = a.relative_index[diff + a.saturation];
      float term = 0.0f;
      if (c2p) term = c2p_block(r, slot);
      if (p2c) term += p2c_all(j0 + c, slot);
      scores(r, c) += term;
    }
  }
}

}  // namespace detail

inline void attention_flash(AttentionArgs const& a, int threads) {
  check_attention_args(a);
  using Tile = HostFlashTile;
  std::int64_t const d = a.head_size;
  bool const c2p = !a.pos_key.empty();
  bool const p2c = !a.pos_query.empty();
  float const inv_scale = 1.0f / a.scale;
  for (std::int64_t b = 0; b < a.sequences.batch; ++b) {
    std::int64_t const first = a.sequences.cu_seqlens[b];
    std::int64_t const length = a.sequences.cu_seqlens[b + 1] - first;
    if (length == 0) continue;
    std::int32_t const* pos = a.sequences.positions + first;
    std::int64_t const query_blocks = (length + Tile::kBlockQ - 1) / Tile::kBlockQ;
    for (std::int64_t h = 0; h < a.num_heads; ++h) {
      HeadViews view = head_views(a, first, length, h);
      RowMatrix p2c_all;  // (L, 2k), linear in L
      if (p2c) p2c_all.noalias() = view.k * relative_head(a.pos_query, h, d).transpose();
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
      for (std::int64_t qb = 0; qb < query_blocks; ++qb) {
        std::int64_t const i0 = qb * Tile::kBlockQ;
        std::int64_t const rows = std::min(Tile::kBlockQ, length - i0);
        auto const q_block = view.q.middleRows(i0, rows);
        RowMatrix c2p_block;  // (BM, 2k)
        if (c2p) c2p_block.noalias() = q_block * relative_head(a.pos_key, h, d).transpose();
        RowMatrix scores(Tile::kBlockQ, Tile::kBlockK);
        RowMatrix acc = RowMatrix::Zero(rows, d);
        Eigen::VectorXf row_max = Eigen::VectorXf::Constant(rows, -std::numeric_limits<float>::infinity());
        Eigen::VectorXf row_sum = Eigen::VectorXf::Zero(rows);
        for (std::int64_t j0 = 0; j0 < length; j0 += Tile::kBlockK) {
          std::int64_t const cols = std::min(Tile::kBlockK, length - j0);
          auto tile = scores.topLeftCorner(rows, cols);
          tile.noalias() = q_block * view.k.middleRows(j0, cols).transpose();
          if (c2p || p2c) detail::add_position_terms(a, pos, i0, rows, j0, cols, c2p_block, p2c_all, c2p, p2c, scores);
          tile *= inv_scale;
          for (std::int64_t r = 0; r < rows; ++r) {
            float const new_max = std::max(row_max[r], tile.row(r).maxCoeff());
            float const correction = std::exp(row_max[r] - new_max);
            tile.row(r) = (tile.row(r).array() - new_max).exp();
            row_sum[r] = row_sum[r] * correction + tile.row(r).sum();
            acc.row(r) *= correction;
            row_max[r] = new_max;
          }
          acc.noalias() += tile * view.v.middleRows(j0, cols);
        }
        view.out.middleRows(i0, rows) = row_sum.cwiseInverse().asDiagonal() * acc;
      }
    }
  }
}

}  // namespace flashdeberta::eigen_ops

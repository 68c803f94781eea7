// Flash host attention: tiled online softmax with no (L, L) buffer (memory linear in L).
//
// Per head, p2c (L, 2k) = k . Qr^T / scale is formed once (rows split across threads); per query block,
// c2p (BM, 2k) = (q / scale) . Kr^T. A score tile is then (q / scale) . k^T plus, per element, one value
// from a c2p row and one from a p2c row at the slot delta(i - j) (performance.md, "Where the time goes"):
//   - delta depends on i - j only, so for contiguous positions a tile's slots are one window of
//     rows + cols - 1 table entries, read in order along each row: no per-element clamp or look-up;
//   - pairs at |i - j| >= saturation all use an edge slot, so in each row the keys far to the left form
//     a prefix and those far to the right a suffix where the terms are a per-row constant plus a
//     contiguous per-key vector (the p2c column of that edge slot): plain vector adds, no gathers.
// Batches with holes in their positions (masked tokens inside a sequence) take a per-element path.
// With AVX-512 and head size 64 (flash_microkernel.hpp), K, V and the relative tables are packed once per
// head and the score tile, p.v, c2p, p2c and the softmax step use hand-written register-tiled kernels; the
// one dispatch point is PackedHead::enabled (else Eigen's products, any head size, any ISA). Dropout on the
// probabilities (training) runs on both paths: a tile is masked between the softmax step and p.v (drop_tile).
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "flashdeberta/eigen/ops/flash_state.hpp"
#include "flashdeberta/eigen/ops/op_threads.hpp"
#include "flashdeberta/eigen/ops/relative_window.hpp"

namespace flashdeberta::eigen_ops {
namespace detail {

#if defined(__AVX512F__)
// The block kernel's view of one tile (flash_position_band.hpp).
inline BandTile band_tile(PositionTerms const& t, FlashWorkspace& w, std::int64_t i0, std::int64_t rows,
                          std::int64_t j0, std::int64_t cols) {
  BandTile tile;
  tile.scores = w.scores.data();
  tile.ld = w.scores.cols();
  tile.slots = t.c2p ? w.c2p.cols() : t.p2c_all->cols();
  tile.table_ld = tile.slots;
  if (t.c2p) tile.c2p = w.c2p.data();
  if (t.p2c) {
    tile.p2c = t.p2c_all->data() + j0 * tile.slots;
    tile.p2c_far = t.p2c_far + j0;
    tile.p2c_near = t.p2c_near + j0;
  }
  tile.slot_far = t.slot_far;
  tile.slot_near = t.slot_near;
  tile.i0 = i0;
  tile.rows = rows;
  tile.j0 = j0;
  tile.cols = cols;
  return tile;
}
#endif

// Contiguous positions: row r of the tile is query i0 + r; column c is key j0 + c.
inline void add_position_terms_contiguous(AttentionArgs const& a, PositionTerms const& t, FlashWorkspace& w,
                                          std::int64_t i0, std::int64_t rows, std::int64_t j0, std::int64_t cols) {
#if defined(__AVX512F__)
  if (t.unit_steps) {
    BandTile const tile = band_tile(t, w, i0, rows, j0, cols);
    SlotWindows const windows = slot_windows(tile, a.relative_index, a.saturation, w.band_window);
    if (t.c2p && t.p2c) {
      add_position_blocks<true, true>(tile, a.saturation, windows);
    } else if (t.c2p) {
      add_position_blocks<true, false>(tile, a.saturation, windows);
    } else {
      add_position_blocks<false, true>(tile, a.saturation, windows);
    }
    return;
  }
#endif
  std::int64_t const s = a.saturation;
  // window[v] = slot of the pair (r, c) with c - r = v - (rows - 1): row r reads window[rows - 1 - r + c].
  std::int64_t const base_diff = i0 - j0 + rows - 1;  // i - j at v = 0
  std::int32_t* window = w.slot_window.data();
  for (std::int64_t v = 0; v < rows + cols - 1; ++v) {
    std::int64_t const diff = std::clamp(base_diff - v, -s, s);
    window[v] = a.relative_index[diff + s];
  }
  std::int64_t const slots_ld = t.p2c ? t.p2c_all->cols() : 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int64_t const i = i0 + r;
    float* __restrict score = &w.scores(r, 0);  // restrict: lets the compiler gather-vectorize the band
    float const* __restrict c2p_row = &w.c2p(r, 0);
    // Columns [0, far_end) have i - j >= s; columns [near_begin, cols) have j - i >= s.
    std::int64_t const far_end = std::clamp(i - s - j0 + 1, std::int64_t{0}, cols);
    std::int64_t const near_begin = std::clamp(i + s - j0, far_end, cols);
    if (far_end > 0) {
      float const c = t.c2p ? c2p_row[t.slot_far] : 0.0f;
      if (t.p2c) {
        float const* pf = t.p2c_far + j0;
        for (std::int64_t col = 0; col < far_end; ++col) score[col] += c + pf[col];
      } else {
        for (std::int64_t col = 0; col < far_end; ++col) score[col] += c;
      }
    }
    std::int32_t const* __restrict slot = window + (rows - 1 - r);
#if defined(__AVX512F__)
    float const* p2c_block = t.p2c ? t.p2c_all->data() + j0 * slots_ld : nullptr;
    if (t.c2p && t.p2c) {
      add_band<true, true>(score, c2p_row, p2c_block, slots_ld, slot, far_end, near_begin);
    } else if (t.c2p) {
      add_band<true, false>(score, c2p_row, p2c_block, slots_ld, slot, far_end, near_begin);
    } else {
      add_band<false, true>(score, c2p_row, p2c_block, slots_ld, slot, far_end, near_begin);
    }
#else
    if (t.c2p && t.p2c) {
      float const* __restrict p2c_rows = t.p2c_all->data() + j0 * slots_ld;
      for (std::int64_t col = far_end; col < near_begin; ++col)
        score[col] += c2p_row[slot[col]] + p2c_rows[col * slots_ld + slot[col]];
    } else if (t.c2p) {
      for (std::int64_t col = far_end; col < near_begin; ++col) score[col] += c2p_row[slot[col]];
    } else {
      float const* p2c_rows = t.p2c_all->data() + j0 * slots_ld;
      for (std::int64_t col = far_end; col < near_begin; ++col) score[col] += p2c_rows[col * slots_ld + slot[col]];
    }
#endif
    if (near_begin < cols) {
      float const c = t.c2p ? c2p_row[t.slot_near] : 0.0f;
      if (t.p2c) {
        float const* pn = t.p2c_near + j0;
        for (std::int64_t col = near_begin; col < cols; ++col) score[col] += c + pn[col];
      } else {
        for (std::int64_t col = near_begin; col < cols; ++col) score[col] += c;
      }
    }
  }
}

// Any positions (holes where masked tokens were dropped): the slot of every pair from its positions.
inline void add_position_terms_general(AttentionArgs const& a, PositionTerms const& t, FlashWorkspace& w,
                                       std::int32_t const* pos, std::int64_t i0, std::int64_t rows, std::int64_t j0,
                                       std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int64_t const pi = pos[i0 + r];
    for (std::int64_t c = 0; c < cols; ++c) {
      std::int64_t const diff = std::clamp(pi - pos[j0 + c], -a.saturation, a.saturation);
      std::int32_t const slot = a.relative_index[diff + a.saturation];
      float term = 0.0f;
      if (t.c2p) term = w.c2p(r, slot);
      if (t.p2c) term += (*t.p2c_all)(j0 + c, slot);
      w.scores(r, c) += term;
    }
  }
}

// The tile's probabilities (w.scores) times m / (1 - p) of their pairs (ProbsDropout), after the softmax step.
inline void drop_tile(ProbsDropout const& drop, FlashWorkspace& w, std::int64_t first, std::int64_t i0,
                      std::int64_t rows, std::int64_t j0, std::int64_t cols, std::int64_t head) {
  std::uint64_t const counter = drop.row_counter(head, first + i0) + static_cast<std::uint64_t>(j0);
  for (std::int64_t r = 0; r < rows; ++r)
    drop.apply(&w.scores(r, 0), cols, counter + static_cast<std::uint64_t>(r * drop.stride));
}

// One query block of one head against all keys of its sequence: the flash mainloop.
// lse: the (L) log-sum-exp row of this head and sequence in args.lse, or null. first: the sequence's first token.
// With dropout, each tile's exp(S - max) is summed undropped into row_sum (so lse and the normalization are those
// of the undropped softmax), then masked and scaled in place before p.v, on the micro-kernel path as on Eigen's.
inline void attend_query_block(AttentionArgs const& a, HeadViews& view, PositionTerms const& terms,
                               PackedHead const& packed, ProbsDropout const& drop, std::int32_t const* pos,
                               bool contiguous, std::int64_t length, std::int64_t first, std::int64_t i0,
                               std::int64_t head, FlashWorkspace& w, float* lse) {
  using Tile = HostFlashTile;
  std::int64_t const rows = std::min(Tile::kBlockQ, length - i0);
  float const inv_scale = 1.0f / a.scale;
  auto q = w.q.topRows(rows);
  q.noalias() = view.q.middleRows(i0, rows) * inv_scale;  // load_q, scale folded in once
#if defined(__AVX512F__)
  if (terms.c2p && packed.relative) {
    // With contiguous positions only the panels of this block's distances (reached_panels); the position terms read
    // no other column.
    TableRows const r =
        contiguous ? reached_panels(a, i0 - (length - 1), i0 + rows - 1, w.c2p.cols()) : TableRows{0, w.c2p.cols()};
    score_tile(w.q.data(), a.head_size, packed.key_rel.data(), r.first, rows, r.count, w.c2p.data() + r.first,
               w.c2p.cols());
  } else
#endif
      if (terms.c2p) {
    w.c2p.topRows(rows).noalias() = q * relative_head(a.pos_key, head, a.head_size).transpose();
  }
  auto acc = w.acc.topRows(rows);
  acc.setZero();
  w.row_max.head(rows).setConstant(-std::numeric_limits<float>::infinity());
  w.row_sum.head(rows).setZero();
  for (std::int64_t j0 = 0; j0 < length; j0 += Tile::kBlockK) {
    std::int64_t const cols = std::min(Tile::kBlockK, length - j0);
    auto tile = w.scores.topLeftCorner(rows, cols);
#if defined(__AVX512F__)
    if (packed.enabled) {
      score_tile(w.q.data(), a.head_size, packed.kt.data(), j0, rows, cols, w.scores.data(),
                 Tile::kBlockK);  // compute_qk
    } else
#endif
    {
      tile.noalias() = q * view.k.middleRows(j0, cols).transpose();  // compute_qk
    }
    if (terms.c2p || terms.p2c) {  // add_position_bias
      if (contiguous) {
        add_position_terms_contiguous(a, terms, w, i0, rows, j0, cols);
      } else {
        add_position_terms_general(a, terms, w, pos, i0, rows, j0, cols);
      }
    }
#if defined(__AVX512F__)
    if (packed.enabled) {
      for (std::int64_t r = 0; r < rows; ++r) {  // update_softmax_state
        float correction = 1.0f;
        float const sum = softmax_row(&w.scores(r, 0), cols, w.row_max[r], correction);
        w.row_sum[r] = w.row_sum[r] * correction + sum;
        if (correction != 1.0f) acc.row(r) *= correction;
      }
      if (drop.active()) drop_tile(drop, w, first, i0, rows, j0, cols, head);
      pv_tile(w.scores.data(), Tile::kBlockK, packed.v.data(), j0, rows, cols, w.acc.data());  // compute_pv
      continue;
    }
#endif
    for (std::int64_t r = 0; r < rows; ++r) {  // update_softmax_state
      auto row = tile.row(r).array();
      float const new_max = std::max(w.row_max[r], row.maxCoeff());
      float const correction = std::exp(w.row_max[r] - new_max);
      row = (row - new_max).exp();
      w.row_sum[r] = w.row_sum[r] * correction + row.sum();
      if (correction != 1.0f) acc.row(r) *= correction;
      w.row_max[r] = new_max;
    }
    if (drop.active()) drop_tile(drop, w, first, i0, rows, j0, cols, head);
    acc.noalias() += tile * view.v.middleRows(j0, cols);  // compute_pv
  }
  view.out.middleRows(i0, rows) = w.row_sum.head(rows).cwiseInverse().asDiagonal() * acc;  // write_o
  if (lse != nullptr) {  // the scores were formed from q / scale: already in the units of S
    for (std::int64_t r = 0; r < rows; ++r) lse[i0 + r] = w.row_max[r] + std::log(w.row_sum[r]);
  }
}

// Multiply-adds of q.k^T, p.v, c2p and p2c over the batch: what sizes the team.
inline double attention_fma(AttentionArgs const& a, std::int64_t slots) {
  double fma = 0.0;
  for (std::int64_t b = 0; b < a.sequences.batch; ++b) {
    auto const length = static_cast<double>(a.sequences.cu_seqlens[b + 1] - a.sequences.cu_seqlens[b]);
    fma += 2.0 * length * (length + static_cast<double>(slots));
  }
  return fma * static_cast<double>(a.num_heads * a.head_size);
}

}  // namespace detail

inline void attention_flash(AttentionArgs const& args, int policy_threads) {
  check_attention_args(args);
  std::vector<std::int32_t> window_index;
  AttentionArgs const a = narrow_relative_window(args, detail::kMicroPanel, window_index);
  using Tile = HostFlashTile;
  std::int64_t const d = a.head_size;
  bool const c2p = !a.pos_key.empty();
  bool const p2c = !a.pos_query.empty();
  std::int64_t const slots = c2p ? a.pos_key.rows : (p2c ? a.pos_query.rows : 1);
  std::int64_t const max_length = a.sequences.max_seqlen;
  bool const contiguous = a.sequences.contiguous_positions;
  ProbsDropout const drop(a);
  auto sequence = [&](std::int64_t b) {
    return std::pair{std::int64_t{a.sequences.cu_seqlens[b]}, std::int64_t{a.sequences.cu_seqlens[b + 1]}};
  };
  std::int64_t const tasks = a.sequences.batch * a.num_heads;
  OpThreads team = threads_for(detail::attention_fma(a, slots), kMinFmaPerThread, policy_threads);
  // With enough (sequence, head) pairs, each worker takes whole heads: it projects its own p2c table and
  // no thread ever waits for another until the end. Otherwise (few heads, many threads) the query blocks
  // of one head are shared, at the price of two barriers per head, which stall every thread whenever
  // one of them is descheduled (measured on 2 busy cores: 2-3x slower at L = 512). Up to two query blocks
  // a head, those barriers cost more than idle threads: one head per worker, fewer workers.
  if (tasks < 2 * static_cast<std::int64_t>(team.workers) && max_length <= 2 * Tile::kBlockQ)
    team.workers = static_cast<int>(std::min<std::int64_t>(team.workers, tasks));
  if (tasks >= 2 * static_cast<std::int64_t>(team.workers) || max_length <= 2 * Tile::kBlockQ) {
    std::atomic<std::int64_t> next_task{0};  // heads handed out one at a time: their lengths differ
    run_workers(team, [&](int, int) {
      detail::FlashWorkspace workspace(d, slots);
      detail::P2cTable table;
      if (p2c) table.resize(max_length, slots);
      detail::PackedHead packed(d, max_length, slots, true);
      detail::PositionTerms const terms = detail::position_terms(a, table);
      for (std::int64_t task = next_task++; task < tasks; task = next_task++) {
        std::int64_t const b = task / a.num_heads;
        std::int64_t const h = task % a.num_heads;
        auto const [first, last] = sequence(b);
        if (last == first) continue;
        HeadViews view = head_views(a, first, last - first, h);
        packed.pack_relative(a, h);
        if (p2c) table.project(a, view, terms, h, 0, last - first, packed.relative ? packed.query_rel.data() : nullptr);
        packed.pack(view, 0, last - first);
        float* lse = a.lse != nullptr ? a.lse + h * a.sequences.total_tokens + first : nullptr;
        for (std::int64_t i0 = 0; i0 < last - first; i0 += Tile::kBlockQ)
          detail::attend_query_block(a, view, terms, packed, drop, a.sequences.positions + first, contiguous,
                                     last - first, first, i0, h, workspace, lse);
      }
    });
    return;
  }
  detail::P2cTable table;  // shared by the threads working on one head
  if (p2c) table.resize(max_length, slots);
  detail::PackedHead packed(d, max_length, slots, false);  // relative tables: Eigen (no per-head serial step)
  detail::PositionTerms const terms = detail::position_terms(a, table);
#pragma omp parallel num_threads(team.team)  // every member shares the query blocks (op_threads.hpp: no smaller team)
  {
    detail::FlashWorkspace workspace(d, slots);
    for (std::int64_t b = 0; b < a.sequences.batch; ++b) {
      // Not a structured binding: the omp for below captures it, which clang before 16 refuses.
      std::int64_t const first = sequence(b).first;
      std::int64_t const length = sequence(b).second - first;
      std::int64_t const blocks = (length + Tile::kBlockQ - 1) / Tile::kBlockQ;
      for (std::int64_t h = 0; h < a.num_heads && length > 0; ++h) {
        HeadViews view = head_views(a, first, length, h);
        if (p2c || packed.enabled) {
#pragma omp for schedule(static)
          for (std::int64_t kb = 0; kb < blocks; ++kb) {
            std::int64_t const j0 = kb * Tile::kBlockQ;
            std::int64_t const n = std::min(Tile::kBlockQ, length - j0);
            if (p2c) table.project(a, view, terms, h, j0, n);
            packed.pack(view, j0, n);
          }
        }  // implicit barrier: every block below reads all of the table and the packed head
        float* lse = a.lse != nullptr ? a.lse + h * a.sequences.total_tokens + first : nullptr;
#pragma omp for schedule(dynamic, 1)
        for (std::int64_t qb = 0; qb < blocks; ++qb)
          detail::attend_query_block(a, view, terms, packed, drop, a.sequences.positions + first, contiguous, length,
                                     first, qb * Tile::kBlockQ, h, workspace, lse);
        // implicit barrier: the table is overwritten for the next head
      }
    }
  }
}

}  // namespace flashdeberta::eigen_ops

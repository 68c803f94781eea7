// Flash host attention backward: memory linear in L, no atomics, and bit-identical from run to run at a given
// thread count. attention_backward_common.hpp gives the terms (with dropout on the probabilities: each tile redraws
// its mask from the pairs' counters, tile_gradient).
//
// The probabilities are recomputed tile by tile from q, k, the relative tables and each row's log-sum-exp,
// P = exp(S - lse): the forward's (AttentionBackwardArgs::lse), or recomputed when none is given. Two passes over
// the tasks of every head:
//   - statistics: a task owns a block of query rows: D = rowsum(dO * O), and the rows' lse when recomputed (a sweep
//     of the scores over all keys of the sequence);
//   - gradients: a task owns a block of keys and sweeps all queries of its sequence once, as FlashAttention 2's
//     backward does: each tile's scores, P and dS are formed once and give dK, dV and the keys' p2c band
//     gradient (cell (j, r) collects dS down column j), which the task owns, and the queries' dS K and c2p band
//     gradient (cell (i, r) collects dS along row i), which every key block of the sequence adds to.
// The tasks, head by head, are cut into one contiguous part per worker, balanced by cost; both passes use the same
// parts. A part sweeps the key blocks of one (head, sequence) after another into its thread's (L, d) dQ and (L, W)
// band accumulators: a sequence whose key blocks all lie in the part is finished there (dQ written, s Gc2p^T Q added
// to the part's partial of dpos_key); one whose key blocks two or more parts share keeps each part's sums, added
// after the pass in part order. Each part's partials (s Gc2p^T Q, s Gp2c^T K) are then added into dpos_key /
// dpos_query part by part in order, so no sum depends on which thread ran what.
// Per thread: the (L, W) c2p and p2c tables of the head at hand (W: the rows of the relative window the batch
// reaches, relative_window.hpp), the (L, d) dQ and (L, W) c2p band accumulators, the (B, B) P and dS tiles and the
// tile's slots, two (B, d) accumulators and a (B, W) p2c band gradient; per call: D and the recomputed lse, (H, T)
// each, per part the (W, d) partials of the heads it touches, and the sums of the sequences parts share.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "flashdeberta/eigen/ops/flash_backward_products.hpp"
#include "flashdeberta/eigen/ops/flash_backward_tile.hpp"
#include "flashdeberta/eigen/ops/flash_microkernel.hpp"
#include "flashdeberta/eigen/ops/op_threads.hpp"
#include "flashdeberta/eigen/ops/relative_window.hpp"

namespace flashdeberta::eigen_ops {
namespace detail {

struct BackwardTask {
  std::int64_t head = 0;
  std::int64_t first = 0;   // first token of the sequence
  std::int64_t length = 0;  // of the sequence
  std::int64_t start = 0;   // first owned query row (row pass) or key (column pass) within the sequence
};

// A contiguous range of tasks and its partial table gradients.
struct BackwardPart {
  std::int64_t begin = 0, end = 0;         // tasks
  std::int64_t head_lo = 0, head_hi = -1;  // heads its tasks touch
  RowMatrix dkr, dqr;                      // (W, d * heads) s Gc2p^T Q and s Gp2c^T K, head_lo first
  // The sums of a (head, sequence) whose key blocks this part shares with another: (L, d) dS K and (L, W) band.
  struct SharedSums {
    std::int64_t head = 0, first = 0, length = 0;
    RowMatrix dq, band;
  };
  std::vector<SharedSums> shared;

  auto key_head(std::int64_t head, std::int64_t d) { return dkr.middleCols((head - head_lo) * d, d); }
  auto query_head(std::int64_t head, std::int64_t d) { return dqr.middleCols((head - head_lo) * d, d); }
};

// The statistics of the task's query rows: the lse (when recomputed: the online softmax's running maximum and sum
// over all keys) and D.
inline void backward_statistics_task(BackwardProblem const& t, BackwardTask const& task, BackwardWorkspace& w) {
  using Tile = HostFlashBackwardTile;
  std::int64_t const length = task.length;
  std::int64_t const i0 = task.start;
  std::int64_t const rows = std::min(Tile::kBlock, length - i0);
  std::int64_t const d = t.a.head_size;
  HeadViews const view = head_views(t.a, task.first, length, task.head);
  HeadGradients const grad = head_gradients(*t.g, task.first, length, task.head);
  std::int64_t const row_offset = task.head * t.tokens + task.first + i0;  // of the block's rows in (H, T)
  if (t.lse_out != nullptr) {
    std::int32_t const* pos = t.a.sequences.positions + task.first;
    w.hold(t, view, task.first, task.head);
    w.q.topRows(rows).noalias() = view.q.middleRows(i0, rows) * t.inv_scale;
    Eigen::VectorXf max = Eigen::VectorXf::Constant(rows, -std::numeric_limits<float>::infinity());
    Eigen::VectorXf sum = Eigen::VectorXf::Zero(rows);
    for (std::int64_t j0 = 0; j0 < length; j0 += Tile::kBlock) {
      std::int64_t const cols = std::min(Tile::kBlock, length - j0);
      w.p.topLeftCorner(rows, cols).noalias() =
          cmap(w.q.data(), rows, d, w.q.outerStride()) * middle_rows(view.k, j0, cols).transpose();
      add_tile_position_terms(t, pos, i0, rows, j0, cols, w);
      for (std::int64_t r = 0; r < rows; ++r) {
        auto const row = w.p.row(r).head(cols).array();
        float const new_max = std::max(max[r], row.maxCoeff());
        sum[r] = sum[r] * std::exp(max[r] - new_max) + (row - new_max).exp().sum();
        max[r] = new_max;
      }
    }
    for (std::int64_t r = 0; r < rows; ++r) t.lse_out[row_offset + r] = max[r] + std::log(sum[r]);
  }
  ConstMatrixMap const out = cmap(view.out.data(), length, d, view.out.outerStride());
  for (std::int64_t r = 0; r < rows; ++r) t.row_dot[row_offset + r] = output_dot(grad.dout, out, i0 + r);
}

// One key block against every query block of its sequence: dK, dV and the p2c band of the keys, written here;
// dS K and the c2p band of the queries, added into the thread's accumulators (w.row_dq, w.row_band).
inline void backward_key_task(BackwardProblem const& t, BackwardTask const& task, BackwardWorkspace& w,
                              BackwardPart& part) {
  using Tile = HostFlashBackwardTile;
  std::int64_t const length = task.length;
  std::int64_t const j0 = task.start;
  std::int64_t const cols = std::min(Tile::kBlock, length - j0);
  std::int64_t const d = t.a.head_size;
  std::int32_t const* pos = t.a.sequences.positions + task.first;
  HeadViews const view = head_views(t.a, task.first, length, task.head);
  HeadGradients grad = head_gradients(*t.g, task.first, length, task.head);
  w.hold(t, view, task.first, task.head);
  auto dk = w.acc.topRows(cols);    // (cols, d) dS^T Q / scale
  auto dv = w.acc_v.topRows(cols);  // (cols, d) P^T dO
  dk.setZero();
  dv.setZero();
  if (t.p2c) w.band.topRows(cols).setZero();
  ConstMatrixMap const keys = middle_rows(view.k, j0, cols);
  ConstMatrixMap const values = middle_rows(view.v, j0, cols);
  w.k.topRows(cols).noalias() = keys * t.inv_scale;  // once per key block, not per tile
  ConstMatrixMap const keys_scaled = cmap(w.k.data(), cols, d, w.k.outerStride());
  pack_key_block(t, keys_scaled, values, w);
  for (std::int64_t i0 = 0; i0 < length; i0 += Tile::kBlock) {
    std::int64_t const rows = std::min(Tile::kBlock, length - i0);
    std::int64_t const row_offset = task.head * t.tokens + task.first + i0;
    ConstMatrixMap const queries = middle_rows(view.q, i0, rows);
    ConstMatrixMap const dout = middle_rows(grad.dout, i0, rows);
    tile_forward_products(t, queries, keys_scaled, dout, values, w);
    std::int32_t const edge = add_tile_position_terms(t, pos, i0, rows, j0, cols, w);
    tile_gradient(t, rows, cols, t.lse + row_offset, t.row_dot + row_offset,
                  t.drop.row_counter(task.head, task.first + i0) + static_cast<std::uint64_t>(j0), w);
    tile_gradient_products(t, queries, keys, dout, w, i0);
    if (edge == kBlockSlots) {
      scatter_blocks(t, i0, rows, cols, w);
    } else {
      if (t.p2c) scatter_columns(edge, rows, cols, w);
      if (t.c2p) scatter_rows(edge, i0, rows, cols, w);
    }
  }
  grad.dv.middleRows(j0, cols) = dv;
  grad.dk.middleRows(j0, cols) = dk;
  if (!t.p2c) return;
  TableRows const r = key_block_slots(t, j0, cols, length);
  ConstMatrixMap const query_table = middle_rows(relative_head(t.a.pos_query, task.head, d), r.first, r.count);
  auto dqr = part.query_head(task.head, d);
  if (t.micro_products) {
    float const* band = &w.band(0, r.first);
    std::int64_t const ld = w.band.outerStride();
    micro_update(band, ld, 1, query_table, cols, &grad.dk(j0, 0), grad.dk.outerStride());
    micro_update(band, 1, ld, keys, r.count, &dqr(r.first, 0), dqr.outerStride());
    return;
  }
  auto const band = w.band.block(0, r.first, cols, r.count);
  grad.dk.middleRows(j0, cols).noalias() += band * query_table;
  dqr.middleRows(r.first, r.count).noalias() += band.transpose() * keys;
}

// dQ of one (head, sequence) from its summed dS K / scale (L, d) and c2p band / scale (L, W); s Gc2p^T Q added
// into dkr_target(), the (W, d) block of the head's key-table gradient (called only with c2p).
template <class DkrTarget>
inline void finish_queries(BackwardProblem const& t, std::int64_t head, std::int64_t first, std::int64_t length,
                           ConstMatrixMap const& dq_sum, ConstMatrixMap const& band, DkrTarget&& dkr_target) {
  std::int64_t const d = t.a.head_size;
  HeadGradients grad = head_gradients(*t.g, first, length, head);
  grad.dq = dq_sum;
  if (!t.c2p) return;
  HeadViews const view = head_views(t.a, first, length, head);
  ConstMatrixMap const kr = relative_head(t.a.pos_key, head, d);
  auto dkr = dkr_target();
  for (std::int64_t i0 = 0; i0 < length; i0 += HostFlashBackwardTile::kBlock) {  // band rows are zero elsewhere
    std::int64_t const rows = std::min(HostFlashBackwardTile::kBlock, length - i0);
    TableRows const r = query_block_slots(t, i0, rows, length);
    if (t.micro_products) {
      float const* block = band.data() + i0 * band.outerStride() + r.first;
      std::int64_t const ld = band.outerStride();
      micro_update(block, ld, 1, middle_rows(kr, r.first, r.count), rows, &grad.dq(i0, 0), grad.dq.outerStride());
      micro_update(block, 1, ld, middle_rows(view.q, i0, rows), r.count, &dkr(r.first, 0), dkr.outerStride());
      continue;
    }
    auto const block = band.block(i0, r.first, rows, r.count);
    grad.dq.middleRows(i0, rows).noalias() += block * kr.middleRows(r.first, r.count);
    dkr.middleRows(r.first, r.count).noalias() += block.transpose() * view.q.middleRows(i0, rows);
  }
}

// The tasks of a pass, head by head and sequence by sequence, cut into `parts` contiguous ranges of about equal
// cost (a task's tile count is the length of its sequence); partials sized for each part's heads.
inline std::vector<BackwardPart> backward_parts(BackwardProblem const& t, std::vector<BackwardTask> const& tasks,
                                                int parts) {
  double total = 0.0;
  for (BackwardTask const& task : tasks) total += static_cast<double>(task.length);
  std::vector<BackwardPart> result(static_cast<std::size_t>(parts));
  double before = 0.0;
  for (std::size_t x = 0; x < tasks.size(); ++x) {
    auto const p = static_cast<std::size_t>(std::min<double>(parts - 1, before * parts / total));
    BackwardPart& part = result[p];
    if (part.head_hi < part.head_lo) {
      part.begin = static_cast<std::int64_t>(x);
      part.head_lo = tasks[x].head;
    }
    part.end = static_cast<std::int64_t>(x) + 1;
    part.head_hi = tasks[x].head;
    before += static_cast<double>(tasks[x].length);
  }
  std::int64_t const d = t.a.head_size;
  for (BackwardPart& part : result) {
    std::int64_t const heads = part.head_hi - part.head_lo + 1;
    if (t.c2p) part.dkr = RowMatrix::Zero(t.slots, heads * d);
    if (t.p2c) part.dqr = RowMatrix::Zero(t.slots, heads * d);
  }
  return result;
}

}  // namespace detail

inline void attention_backward_flash(AttentionBackwardArgs const& g, int threads) {
  using Tile = HostFlashBackwardTile;
  check_attention_backward_args(g);
  detail::BackwardProblem t;
  std::vector<std::int32_t> window_index;
  t.a = narrow_relative_window(g.forward, 1, window_index);
  t.g = &g;
  t.c2p = !t.a.pos_key.empty();
  t.p2c = !t.a.pos_query.empty();
  t.slots = t.c2p ? t.a.pos_key.rows : (t.p2c ? t.a.pos_query.rows : 0);
  t.tokens = t.a.sequences.total_tokens;
  t.inv_scale = 1.0f / t.a.scale;
  t.drop = ProbsDropout(t.a);
  t.micro_products = detail::backward_micro_products(t.a);
  t.band_kernels = detail::kHasFlashMicrokernel && (t.c2p || t.p2c) && t.a.sequences.contiguous_positions &&
                   t.slots >= 16 && detail::has_unit_steps(t.a.relative_index, t.a.saturation);
  if (t.c2p || t.p2c) {  // the window's first row of the full tables: the narrowed index is shifted by it
    std::int64_t const begin = g.forward.relative_index[g.forward.saturation - t.a.saturation] - t.a.relative_index[0];
    if (t.c2p) t.dpos_key = g.dpos_key.row_range(begin, t.slots);
    if (t.p2c) t.dpos_query = g.dpos_query.row_range(begin, t.slots);
  }
  std::int64_t const heads = t.a.num_heads;
  std::int64_t const d = t.a.head_size;
  auto const stats_size = static_cast<std::size_t>(heads * t.tokens);
  std::vector<float> row_dot(stats_size);
  std::vector<float> lse;
  t.row_dot = row_dot.data();
  if (g.lse != nullptr) {
    t.lse = g.lse;
  } else {
    lse.resize(stats_size);
    t.lse = t.lse_out = lse.data();
  }

  std::vector<detail::BackwardTask> tasks;
  std::int64_t max_length = 0;
  double fma = 0.0;
  for (std::int64_t h = 0; h < heads; ++h) {
    for (std::int64_t b = 0; b < t.a.sequences.batch; ++b) {
      std::int64_t const first = t.a.sequences.cu_seqlens[b];
      std::int64_t const length = t.a.sequences.cu_seqlens[b + 1] - first;
      max_length = std::max(max_length, length);
      for (std::int64_t start = 0; start < length; start += Tile::kBlock) tasks.push_back({h, first, length, start});
      // Per head: S and dP once, the 3 products of dS and P, the tables and band products; S again for the lse.
      auto const l = static_cast<double>(length);
      double const sweeps = g.lse != nullptr ? 5.0 : 6.0;
      fma += static_cast<double>(d) * (sweeps * l * l + 6.0 * l * static_cast<double>(t.slots));
    }
  }
  if (tasks.empty()) return;
  OpThreads const team = threads_for(fma, kMinFmaPerThread, threads, static_cast<std::int64_t>(tasks.size()));
  std::vector<detail::BackwardPart> parts = detail::backward_parts(t, tasks, team.workers);
  auto const for_parts = [&](auto&& part_body) {
    run_workers(team, [&](int worker, int workers) {
      detail::BackwardWorkspace w(t, max_length);
      for (std::size_t p = static_cast<std::size_t>(worker); p < parts.size(); p += static_cast<std::size_t>(workers))
        part_body(parts[p], w);
    });
  };
  // lse (when recomputed) and D, which every key block reads for all rows of its sequence.
  for_parts([&](detail::BackwardPart const& part, detail::BackwardWorkspace& w) {
    for (std::int64_t x = part.begin; x < part.end; ++x) detail::backward_statistics_task(t, tasks[x], w);
  });
  for_parts([&](detail::BackwardPart& part, detail::BackwardWorkspace& w) {
    for (std::int64_t x = part.begin; x < part.end;) {  // one (head, sequence) at a time
      detail::BackwardTask const& first_task = tasks[x];
      std::int64_t const length = first_task.length;
      w.row_dq.topRows(length).setZero();
      if (t.c2p) w.row_band.topRows(length).setZero();
      std::int64_t y = x;
      for (; y < part.end && tasks[y].head == first_task.head && tasks[y].first == first_task.first; ++y)
        detail::backward_key_task(t, tasks[y], w, part);
      bool const whole = first_task.start == 0 && tasks[y - 1].start + Tile::kBlock >= length;
      ConstMatrixMap const dq_sum = cmap(w.row_dq.data(), length, d, w.row_dq.outerStride());
      ConstMatrixMap const band = cmap(w.row_band.data(), t.c2p ? length : 0, t.slots, w.row_band.outerStride());
      if (whole) {
        detail::finish_queries(t, first_task.head, first_task.first, length, dq_sum, band,
                               [&] { return part.key_head(first_task.head, d); });
      } else {
        part.shared.push_back({first_task.head, first_task.first, length, dq_sum, band});
      }
      x = y;
    }
  });
  // The sequences parts share, their sums added in part order: consecutive parts, at most one sequence each.
  std::vector<detail::BackwardPart::SharedSums const*> shared;
  for (detail::BackwardPart const& part : parts)
    for (auto const& sums : part.shared) shared.push_back(&sums);
  for (std::size_t x = 0; x < shared.size();) {
    detail::BackwardPart::SharedSums total = *shared[x];
    std::size_t y = x + 1;
    for (; y < shared.size() && shared[y]->head == total.head && shared[y]->first == total.first; ++y) {
      total.dq += shared[y]->dq;
      if (t.c2p) total.band += shared[y]->band;
    }
    ConstMatrixMap const dq_sum = cmap(total.dq.data(), total.length, d, total.dq.outerStride());
    ConstMatrixMap const band = cmap(total.band.data(), total.band.rows(), t.slots, total.band.outerStride());
    detail::finish_queries(t, total.head, total.first, total.length, dq_sum, band,
                           [&] { return relative_head_gradient(t.dpos_key, total.head, d); });
    x = y;
  }
  if (!t.c2p && !t.p2c) return;
  OpThreads const reduce = threads_for(static_cast<double>(parts.size() * t.slots) * static_cast<double>(heads * d),
                                       kMinElementsPerThread, threads, heads);
  for_each_index(reduce, heads, [&](std::int64_t h) {
    for (detail::BackwardPart& part : parts) {
      if (h < part.head_lo || h > part.head_hi) continue;
      if (t.c2p) relative_head_gradient(t.dpos_key, h, d) += part.key_head(h, d);
      if (t.p2c) relative_head_gradient(t.dpos_query, h, d) += part.query_head(h, d);
    }
  });
}

}  // namespace flashdeberta::eigen_ops

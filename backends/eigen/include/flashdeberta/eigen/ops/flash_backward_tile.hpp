// The tiles of the host flash attention backward (attention_backward_flash.hpp runs the passes over them): the
// per-thread workspace, one tile's scores recomputed with their position terms, its probabilities and dS, and
// the scatter of dS into the band gradients.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "flashdeberta/eigen/ops/attention_backward_common.hpp"
#include "flashdeberta/eigen/ops/flash_band_gradient.hpp"
#include "flashdeberta/eigen/ops/flash_microkernel.hpp"
#include "flashdeberta/eigen/ops/relative_window.hpp"

namespace flashdeberta::eigen_ops {

// Tile shape of the host flash backward: a task owns kBlock keys and sweeps the queries kBlock at a time (the
// statistics pass: kBlock query rows, sweeping the keys). One extent for both, so that the two passes have the same
// tasks and share one partition over the threads. 64 vs 128 on a 2-core AMD EPYC
// (AVX-512, under KVM), one thread, 12 heads of 64, log buckets k = 256, CPU time, best of 8-10, three rounds (noisy:
// the cores are shared): L = 128 64 ran 11 vs 12 ms; L = 512 80-91 vs 75-83 ms. 64 keeps twice the tasks for the
// threads and its (64, 64) P and dS tiles (32 KB) in L1.
struct HostFlashBackwardTile {
  static constexpr std::int64_t kBlock = 64;
  static_assert(kBlock > 0, "tile extent must be positive");
  static constexpr bool is_valid() { return 2 * kBlock * kBlock <= 256 * 1024; }  // P and dS within L2
};
static_assert(HostFlashBackwardTile::is_valid(), "the P and dS tiles must stay within a core's L2");

namespace detail {

// What every task of one call reads: the forward narrowed to its relative window (relative_window.hpp) and the
// table gradients narrowed alike, the row statistics, the scale.
struct BackwardProblem {
  AttentionArgs a;
  AttentionBackwardArgs const* g = nullptr;
  MatrixRef dpos_key, dpos_query;  // (W, A) rows of the window
  bool c2p = false, p2c = false;
  // Contiguous positions and a slot table of unit steps (flash_position_band.hpp): the tiles' position terms and
  // band gradients take the AVX-512 block kernels, which need no per-pair slot.
  bool band_kernels = false;
  // Heads of 64 with AVX-512: the tiles' five products on the register-tiled micro-kernels
  // (flash_backward_products.hpp).
  bool micro_products = false;
  std::int64_t slots = 0;   // W, 0 without position terms
  std::int64_t tokens = 0;  // T
  float inv_scale = 1.0f;
  float const* lse = nullptr;          // (H, T) the forward's, or lse_out once the statistics pass wrote it
  float* lse_out = nullptr;            // (H, T) recomputed by the statistics pass when none was given, else null
  float* row_dot = nullptr;            // (H, T) D_i = dO_i . O_i, written by the statistics pass
  ProbsDropout drop{AttentionArgs{}};  // of the probabilities, as the forward drew it
};

// The table rows [first, first + count) that the pairs of one block of kBlock query rows (against every key of the
// sequence: c2p) or of kBlock keys (against every query: p2c) reach. A row i meets the distances i - (L - 1) .. i,
// half of the sequence's window, so the tables and band products of a block need only those rows: at L = 128 a
// block of 64 reaches 191 of the 255, and the products outside would multiply zeros of the band gradients.
// Without the block kernels (positions not contiguous), the whole window.
inline TableRows query_block_slots(BackwardProblem const& t, std::int64_t i0, std::int64_t rows, std::int64_t length) {
  return t.band_kernels ? reached_table_rows(t.a, i0 - (length - 1), i0 + rows - 1) : TableRows{0, t.slots};
}
inline TableRows key_block_slots(BackwardProblem const& t, std::int64_t j0, std::int64_t cols, std::int64_t length) {
  return t.band_kernels ? reached_table_rows(t.a, -(j0 + cols - 1), length - 1 - j0) : TableRows{0, t.slots};
}

// Pair slot of a tile whose pairs are not all on one edge slot: each reads its own, from BackwardWorkspace::slot.
inline constexpr std::int32_t kPerPairSlots = -1;
// The same, for the block kernels (BackwardProblem::band_kernels): the tile's slot windows are in the workspace.
inline constexpr std::int32_t kBlockSlots = -2;

// Row length of the band accumulators: W rounded up to 16 floats, plus 8. The block kernels add to rows one apart at
// slots one apart, so with rows of W = 511 floats (L = 512) every second addition would land 4096 bytes after the one
// before last and its load wait on that store (4K aliasing: a sixth of the gradient pass's samples outside its GEMMs,
// in perf).
inline std::int64_t padded_band_width(std::int64_t slots) { return (slots + 15) / 16 * 16 + 8; }

// Row length of the c2p / p2c tables: W, or whole 64-slot panels for the micro-kernels, which write whole panels.
inline std::int64_t table_width(BackwardProblem const& t) {
  return t.micro_products ? (t.slots + kMicroPanel - 1) / kMicroPanel * kMicroPanel : t.slots;
}

// Per-thread buffers, sized once per pass: nothing is allocated inside the tile loops.
struct BackwardWorkspace {
  RowMatrix c2p_all;  // (L, W) q . Kr^T / scale of the sequence and head held (rows table_width() long)
  RowMatrix p2c_all;  // (L, W) k . Qr^T / scale
  std::int64_t held_first = -1, held_head = -1;
  RowMatrix q;                     // (B, d) query tile / scale (statistics pass)
  RowMatrix k;                     // (B, d) the owned keys / scale (gradients pass)
  RowMatrix p;                     // (B, B) scores, then probabilities
  RowMatrix ds;                    // (B, B) dP, then dS / scale
  RowMatrix acc, acc_v;            // (B, d) dK and dV of the owned keys
  RowMatrix band;                  // (B, W) p2c band gradient / scale of the owned keys
  RowMatrix row_dq;                // (L, d) dS K / scale of the sequence and head swept
  RowMatrix row_band;              // (L, W) its c2p band gradient / scale
  std::vector<std::int32_t> slot;  // (B, B) slot of each pair of a per-pair tile
  Eigen::RowVectorXf keep;         // (B) m / (1 - p) of one tile row, with dropout
  // The block kernels: the p2c columns of the two edge slots, (L) each, and the tile's slot windows.
  Eigen::VectorXf p2c_far, p2c_near;
  std::vector<std::int32_t> window;
  // The micro-kernels' operands: the owned keys / scale and their values as (d, kBlock) panels, and the head's
  // relative key and query tables / scale as panels of 64 table rows (rows past W zero), of head panels_head.
  std::vector<float> key_panel, value_panel, key_table_panels, query_table_panels;
  std::int64_t panels_head = -1;
#if defined(__AVX512F__)
  SlotWindows windows;
#endif

  BackwardWorkspace(BackwardProblem const& t, std::int64_t max_length) {
    std::int64_t const b = HostFlashBackwardTile::kBlock;
    std::int64_t const d = t.a.head_size;
    c2p_all.resize(t.c2p ? max_length : 0, table_width(t));
    p2c_all.resize(t.p2c ? max_length : 0, table_width(t));
    q.resize(b, d);
    k.resize(b, d);
    p.resize(b, b);
    ds.resize(b, b);
    acc.resize(b, d);
    acc_v.resize(b, d);
    band.resize(t.p2c ? b : 0, padded_band_width(t.slots));
    row_dq.resize(max_length, d);
    row_band.resize(t.c2p ? max_length : 0, padded_band_width(t.slots));
    slot.resize(static_cast<std::size_t>(b * b));
    keep.resize(t.drop.active() ? b : 0);
    p2c_far.resize(t.band_kernels && t.p2c ? max_length : 0);
    p2c_near.resize(p2c_far.size());
    window.reserve(static_cast<std::size_t>(2 * (2 * b + 32)));
    key_panel.resize(t.micro_products ? static_cast<std::size_t>(b * d) : 0);
    value_panel.resize(key_panel.size());
    if (t.micro_products) {
      key_table_panels.assign(t.c2p ? static_cast<std::size_t>(table_width(t) * d) : 0, 0.0f);
      query_table_panels.assign(t.p2c ? static_cast<std::size_t>(table_width(t) * d) : 0, 0.0f);
    }
  }

  // Both projected tables of one sequence and head, unless already held (tasks come sequence by sequence).
  void hold(BackwardProblem const& t, HeadViews const& view, std::int64_t first, std::int64_t head) {
    if (held_first == first && held_head == head) return;
    held_first = first;
    held_head = head;
    std::int64_t const length = view.q.rows();
    std::int64_t const d = t.a.head_size;
    if (t.micro_products) {
      project_tables_micro(t, view, head, length);
    } else {
      project_tables(t, view, head, length);
    }
    if (t.p2c && t.band_kernels) {
      p2c_far.head(length) = p2c_all.col(t.a.relative_index[2 * t.a.saturation]).head(length);
      p2c_near.head(length) = p2c_all.col(t.a.relative_index[0]).head(length);
    }
  }

 private:
  // Each block of rows over the table rows it reaches (block_slots); the tiles read no other cell. The scale on
  // the left operand becomes GEMM's alpha (flash_state.hpp: P2cTable).
  void project_tables(BackwardProblem const& t, HeadViews const& view, std::int64_t head, std::int64_t length) {
    std::int64_t const d = t.a.head_size;
    for (std::int64_t x0 = 0; x0 < length; x0 += HostFlashBackwardTile::kBlock) {
      std::int64_t const n = std::min(HostFlashBackwardTile::kBlock, length - x0);
      if (t.c2p) {
        TableRows const r = query_block_slots(t, x0, n, length);
        c2p_all.block(x0, r.first, n, r.count).noalias() =
            (t.inv_scale * view.q.middleRows(x0, n)) *
            relative_head(t.a.pos_key, head, d).middleRows(r.first, r.count).transpose();
      }
      if (t.p2c) {
        TableRows const r = key_block_slots(t, x0, n, length);
        p2c_all.block(x0, r.first, n, r.count).noalias() =
            (t.inv_scale * view.k.middleRows(x0, n)) *
            relative_head(t.a.pos_query, head, d).middleRows(r.first, r.count).transpose();
      }
    }
  }

  // The same on the micro-kernels: the head's tables packed once per head, each block over the whole panels it
  // reaches.
  void project_tables_micro([[maybe_unused]] BackwardProblem const& t, [[maybe_unused]] HeadViews const& view,
                            [[maybe_unused]] std::int64_t head, [[maybe_unused]] std::int64_t length) {
#if defined(__AVX512F__)
    std::int64_t const d = t.a.head_size;
    if (panels_head != head) {  // the tables depend on the head only; tasks come head by head
      panels_head = head;
      if (t.c2p) pack_table_panels(relative_head(t.a.pos_key, head, d), t.inv_scale, key_table_panels.data());
      if (t.p2c) pack_table_panels(relative_head(t.a.pos_query, head, d), t.inv_scale, query_table_panels.data());
    }
    auto const whole_panels = [](TableRows r) {
      std::int64_t const first = r.first / kMicroPanel * kMicroPanel;
      return TableRows{first, r.first + r.count - first};
    };
    for (std::int64_t x0 = 0; x0 < length; x0 += HostFlashBackwardTile::kBlock) {
      std::int64_t const n = std::min(HostFlashBackwardTile::kBlock, length - x0);
      if (t.c2p) {
        TableRows const r = whole_panels(query_block_slots(t, x0, n, length));
        score_tile(view.q.data() + x0 * view.q.outerStride(), view.q.outerStride(), key_table_panels.data(), r.first, n,
                   r.count, &c2p_all(x0, r.first), c2p_all.outerStride());
      }
      if (t.p2c) {
        TableRows const r = whole_panels(key_block_slots(t, x0, n, length));
        score_tile(view.k.data() + x0 * view.k.outerStride(), view.k.outerStride(), query_table_panels.data(), r.first,
                   n, r.count, &p2c_all(x0, r.first), p2c_all.outerStride());
      }
    }
#endif
  }
};

// The position terms of the tile of query rows [i0, i0 + rows) and keys [j0, j0 + cols), added to its scores in w.p
// (the product of the queries and keys, one of the two divided by scale). Returns the edge slot when every pair lies
// beyond the saturation distance on one side (the position terms are then a per-row plus a per-key vector, and the band
// gradients row and column sums); kBlockSlots when the block kernels added the position terms (the tile's slot windows
// in w.windows); else kPerPairSlots with each pair's slot in w.slot.
inline std::int32_t add_tile_position_terms(BackwardProblem const& t, std::int32_t const* pos, std::int64_t i0,
                                            std::int64_t rows, std::int64_t j0, std::int64_t cols,
                                            BackwardWorkspace& w) {
  std::int64_t const b = HostFlashBackwardTile::kBlock;
  auto s = w.p.topLeftCorner(rows, cols);
  if (!t.c2p && !t.p2c) return kPerPairSlots;
  std::int64_t const sat = t.a.saturation;
  std::int32_t const* index = t.a.relative_index;
  auto const [q_lo, q_hi] = std::minmax_element(pos + i0, pos + i0 + rows);
  auto const [k_lo, k_hi] = std::minmax_element(pos + j0, pos + j0 + cols);
  std::int32_t edge = kPerPairSlots;
  if (std::int64_t{*q_lo} - *k_hi >= sat) edge = index[2 * sat];
  if (std::int64_t{*q_hi} - *k_lo <= -sat) edge = index[0];
  if (edge != kPerPairSlots) {
    if (t.c2p) s.colwise() += w.c2p_all.col(edge).segment(i0, rows);
    if (t.p2c) s.rowwise() += w.p2c_all.col(edge).segment(j0, cols).transpose();
    return edge;
  }
#if defined(__AVX512F__)
  if (t.band_kernels) {
    BandTile tile;
    tile.scores = w.p.data();
    tile.ld = w.p.outerStride();
    tile.c2p = t.c2p ? &w.c2p_all(i0, 0) : nullptr;
    tile.p2c = t.p2c ? &w.p2c_all(j0, 0) : nullptr;
    tile.p2c_far = t.p2c ? w.p2c_far.data() + j0 : nullptr;
    tile.p2c_near = t.p2c ? w.p2c_near.data() + j0 : nullptr;
    tile.slots = t.slots;
    tile.table_ld = table_width(t);
    tile.slot_far = index[2 * sat];
    tile.slot_near = index[0];
    tile.i0 = i0;
    tile.rows = rows;
    tile.j0 = j0;
    tile.cols = cols;
    w.windows = slot_windows(tile, index, sat, w.window);
    if (t.c2p && t.p2c) {
      add_position_blocks<true, true>(tile, sat, w.windows);
    } else if (t.c2p) {
      add_position_blocks<true, false>(tile, sat, w.windows);
    } else {
      add_position_blocks<false, true>(tile, sat, w.windows);
    }
    return kBlockSlots;
  }
#endif
  std::int64_t const ld = table_width(t);
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int64_t const pi = pos[i0 + r];
    std::int32_t* __restrict slot = w.slot.data() + r * b;
    float* __restrict score = &w.p(r, 0);
    float const* c2p_row = t.c2p ? &w.c2p_all(i0 + r, 0) : nullptr;
    float const* p2c_rows = t.p2c ? &w.p2c_all(j0, 0) : nullptr;
    for (std::int64_t c = 0; c < cols; ++c) {
      std::int32_t const x = index[std::clamp(pi - pos[j0 + c], -sat, sat) + sat];
      slot[c] = x;
      if (c2p_row != nullptr) score[c] += c2p_row[x];
      if (p2c_rows != nullptr) score[c] += p2c_rows[c * ld + x];
    }
  }
  return kPerPairSlots;
}

// From the tile's scores S (w.p) and dP = dO V^T (w.ds): w.p = P = exp(S - lse) and w.ds = P * (dP - D) / scale;
// lse and row_dot: (rows) of its queries. With dropout (t.drop), w.ds = P * (dP * M - D) / scale and w.p = P * M,
// the dropped probabilities that dV reads; counter: ProbsDropout's counter of the tile's first pair.
inline void tile_gradient(BackwardProblem const& t, std::int64_t rows, std::int64_t cols, float const* lse,
                          float const* row_dot, std::uint64_t counter, BackwardWorkspace& w) {
  auto p = w.p.topLeftCorner(rows, cols);
  auto ds = w.ds.topLeftCorner(rows, cols);
  if (t.drop.active()) {
    for (std::int64_t r = 0; r < rows; ++r) {
      t.drop.factors(w.keep.data(), cols, counter + static_cast<std::uint64_t>(r * t.drop.stride));
      auto const m = w.keep.head(cols).array();
      p.row(r) = (p.row(r).array() - lse[r]).exp().matrix();
      ds.row(r) = (p.row(r).array() * (ds.row(r).array() * m - row_dot[r]) * t.inv_scale).matrix();
      p.row(r).array() *= m;
    }
    return;
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    p.row(r) = (p.row(r).array() - lse[r]).exp().matrix();
    ds.row(r) = (p.row(r).array() * (ds.row(r).array() - row_dot[r]) * t.inv_scale).matrix();
  }
}

// Both band gradients of a tile whose scores took the block kernels (tile_scores returned kBlockSlots).
inline void scatter_blocks([[maybe_unused]] BackwardProblem const& t, [[maybe_unused]] std::int64_t i0,
                           [[maybe_unused]] std::int64_t rows, [[maybe_unused]] std::int64_t cols,
                           [[maybe_unused]] BackwardWorkspace& w) {
#if defined(__AVX512F__)
  BandGradientTile tile;
  tile.ds = w.ds.data();
  tile.ld = w.ds.outerStride();
  tile.c2p = t.c2p ? &w.row_band(i0, 0) : nullptr;
  tile.p2c = t.p2c ? w.band.data() : nullptr;
  tile.c2p_ld = w.row_band.outerStride();
  tile.p2c_ld = w.band.outerStride();
  tile.rows = rows;
  tile.cols = cols;
  if (t.c2p && t.p2c) {
    add_band_gradients<true, true>(tile, w.windows);
  } else if (t.c2p) {
    add_band_gradients<true, false>(tile, w.windows);
  } else {
    add_band_gradients<false, true>(tile, w.windows);
  }
#endif
}

// row_band rows [i0, i0 + rows) += dS collected by slot along each row (c2p: the band rows are the tile's queries).
inline void scatter_rows(std::int32_t edge, std::int64_t i0, std::int64_t rows, std::int64_t cols,
                         BackwardWorkspace& w) {
  if (edge != kPerPairSlots) {
    w.row_band.col(edge).segment(i0, rows) += w.ds.topLeftCorner(rows, cols).rowwise().sum();
    return;
  }
  std::int64_t const b = HostFlashBackwardTile::kBlock;
  for (std::int64_t r = 0; r < rows; ++r) {
    float* band = &w.row_band(i0 + r, 0);
    float const* ds = &w.ds(r, 0);
    std::int32_t const* slot = w.slot.data() + r * b;
    for (std::int64_t c = 0; c < cols; ++c) band[slot[c]] += ds[c];
  }
}

// band (cols, W) += dS collected by slot down each column (p2c: the band rows are the tile's keys).
inline void scatter_columns(std::int32_t edge, std::int64_t rows, std::int64_t cols, BackwardWorkspace& w) {
  if (edge != kPerPairSlots) {
    w.band.col(edge).head(cols) += w.ds.topLeftCorner(rows, cols).colwise().sum().transpose();
    return;
  }
  std::int64_t const b = HostFlashBackwardTile::kBlock;
  std::int64_t const ld = w.band.outerStride();
  for (std::int64_t r = 0; r < rows; ++r) {
    float* __restrict band = w.band.data();
    float const* __restrict ds = &w.ds(r, 0);
    std::int32_t const* __restrict slot = w.slot.data() + r * b;
    for (std::int64_t c = 0; c < cols; ++c) band[c * ld + slot[c]] += ds[c];
  }
}

}  // namespace detail
}  // namespace flashdeberta::eigen_ops

// The state of the host flash attention: its tile shape, the per-thread workspace, the per-head p2c table
// and packed K/V/relative panels, and what a tile needs to add its position terms. attention_flash.hpp runs
// the mainloop over these.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "flashdeberta/eigen/ops/attention_common.hpp"
#include "flashdeberta/eigen/ops/flash_microkernel.hpp"
#include "flashdeberta/eigen/ops/flash_position_band.hpp"
#include "flashdeberta/eigen/ops/relative_window.hpp"

namespace flashdeberta::eigen_ops {

// Tile shape of the host flash kernel, measured on the 2-core Xeon (Sapphire Rapids under KVM) of docs/benchmarks.md,
// v3-base shapes, -march=native, with the AVX-512 micro-kernels and the gather-free position blocks: at L = 2048 the
// (64, 128) tile (32 KB of scores, inside the 48 KB L1 through the position, softmax and p.v passes) ran 3-8% faster
// than (64, 256) (best of 4 single-thread runs under load, three rounds: 187-192 vs 191-200 ms CPU; two threads
// 183 vs 220 ms in one round); (64, 64), (128, 64) and (128, 128) were not better. Before the micro-kernels, with
// Eigen's products, 64 x 256 led (wider key blocks amortized Eigen's per-tile packing).
struct HostFlashTile {
  static constexpr std::int64_t kBlockQ = 64;   // query rows per task
  static constexpr std::int64_t kBlockK = 128;  // key columns per online-softmax step
  static_assert(kBlockQ > 0 && kBlockK > 0, "tile extents must be positive");
  static constexpr bool is_valid() { return kBlockQ * kBlockK <= 256 * 1024; }  // scores tile within L2
};
static_assert(HostFlashTile::is_valid(), "the (BM, BN) score tile must stay within a core's L2");
static_assert(HostFlashTile::kBlockQ % detail::kMicroPanel == 0 && HostFlashTile::kBlockK % detail::kMicroPanel == 0,
              "K is packed in 64-key panels by query-block-sized row ranges, and key blocks start on a panel");

namespace detail {

// Per-thread buffers, sized once per call: nothing is allocated inside the tile loops.
struct FlashWorkspace {
  RowMatrix q;                            // (BM, d) query block / scale
  RowMatrix c2p;                          // (BM, 2k) scaled c2p of the block
  RowMatrix scores;                       // (BM, BN)
  RowMatrix acc;                          // (BM, d)
  Eigen::VectorXf row_max, row_sum;       // (BM)
  std::vector<std::int32_t> slot_window;  // (BM + BN - 1)
  std::vector<std::int32_t> band_window;  // scratch of slot_windows, capacity reserved once

  FlashWorkspace(std::int64_t d, std::int64_t slots)
      : q(HostFlashTile::kBlockQ, d),
        c2p(HostFlashTile::kBlockQ, slots),
        scores(HostFlashTile::kBlockQ, HostFlashTile::kBlockK),
        acc(HostFlashTile::kBlockQ, d),
        row_max(HostFlashTile::kBlockQ),
        row_sum(HostFlashTile::kBlockQ),
        slot_window(static_cast<std::size_t>(HostFlashTile::kBlockQ + HostFlashTile::kBlockK - 1)) {
    band_window.reserve(static_cast<std::size_t>(2 * (HostFlashTile::kBlockQ + HostFlashTile::kBlockK + 32)));
  }
};

// What one tile needs to add its position terms. Every table is already divided by scale.
struct PositionTerms {
  bool c2p = false;
  bool p2c = false;
  RowMatrix const* p2c_all = nullptr;  // (L, 2k) of the current head
  float const* p2c_far = nullptr;      // (L) p2c column of the slot used at i - j >= saturation
  float const* p2c_near = nullptr;     // (L) p2c column of the slot used at j - i >= saturation
  std::int32_t slot_far = 0;
  std::int32_t slot_near = 0;
  bool unit_steps = false;  // slot table rises by 0 or 1 per unit of i - j: the gather-free block kernel applies
};

// reached_table_rows widened to whole panels of kMicroPanel within the `slots` columns. A query row i meets
// i - (L - 1) .. i and a key j meets -j .. L - 1 - j: about half of the window each, so a block's c2p or p2c products
// need only those panels (3 of 4 per block of 64 at L = 128).
inline TableRows reached_panels(AttentionArgs const& a, std::int64_t lowest, std::int64_t highest, std::int64_t slots) {
  TableRows const rows = reached_table_rows(a, lowest, highest);
  std::int64_t const first = rows.first / kMicroPanel * kMicroPanel;
  std::int64_t const end = (rows.first + rows.count - 1 + kMicroPanel) / kMicroPanel * kMicroPanel;
  return {first, std::min(slots, end) - first};
}

// p2c (L, 2k) = k . Qr^T / scale of one head, and its two edge-slot columns as contiguous vectors.
struct P2cTable {
  RowMatrix all;
  Eigen::VectorXf far, near;

  void resize(std::int64_t length, std::int64_t slots) {
    all.resize(length, slots);
    far.resize(length);
    near.resize(length);
  }

  // Rows [j0, j0 + n) of the table of `head`.
  void project(AttentionArgs const& a, HeadViews const& view, PositionTerms const& t, std::int64_t head,
               std::int64_t j0, std::int64_t n, float const* query_rel_panels = nullptr) {
#if defined(__AVX512F__)
    if (query_rel_panels != nullptr) {
      // Key blocks of kMicroPanel over the panels their distances reach (reached_panels) where positions are
      // contiguous; the edge columns are read only by blocks that reach them.
      std::int64_t const length = view.k.rows();
      for (std::int64_t x0 = j0; x0 < j0 + n; x0 += kMicroPanel) {
        std::int64_t const m = std::min(kMicroPanel, j0 + n - x0);
        TableRows const r = a.sequences.contiguous_positions
                                ? reached_panels(a, -(x0 + m - 1), length - 1 - x0, all.cols())
                                : TableRows{0, all.cols()};
        score_tile(view.k.data() + x0 * view.k.outerStride(), view.k.outerStride(), query_rel_panels, r.first, m,
                   r.count, all.data() + x0 * all.cols() + r.first, all.cols());
      }
      far.segment(j0, n) = all.col(t.slot_far).segment(j0, n);
      near.segment(j0, n) = all.col(t.slot_near).segment(j0, n);
      return;
    }
#endif
    // The scale on the left operand becomes GEMM's alpha; on the product it forced Eigen's lazy
    // coefficient-wise evaluation (measured: a quarter of the time at L = 128).
    all.middleRows(j0, n).noalias() =
        ((1.0f / a.scale) * view.k.middleRows(j0, n)) * relative_head(a.pos_query, head, a.head_size).transpose();
    far.segment(j0, n) = all.col(t.slot_far).segment(j0, n);
    near.segment(j0, n) = all.col(t.slot_near).segment(j0, n);
  }
};

// K (as 64-key panels of K^T) and V (contiguous) of one head for the micro-kernels, packed once per head.
// With `relative`, also the head's relative key (for c2p) and query (for p2c) tables as panels, divided by
// scale, so that c2p of a query block and p2c of the head use the micro-kernel too: Eigen re-packed the
// (2k, 64) table for every query block (perf at L = 2048, one thread: Eigen's GEMM kernel and packing
// ~14% of the flash time for 10% of its FLOP).
struct PackedHead {
  bool enabled = false;
  bool relative = false;
  std::vector<float> kt, v, key_rel, query_rel;

  PackedHead(std::int64_t d, std::int64_t max_length, std::int64_t slots, bool pack_relative)
      : enabled(kHasFlashMicrokernel && d == kMicroHeadSize) {
    if (!enabled) return;
    relative = pack_relative && slots % kMicroPanel == 0;
    if (relative) {
      key_rel.resize(static_cast<std::size_t>(slots * d));
      query_rel.resize(static_cast<std::size_t>(slots * d));
    }
    std::int64_t const padded = (max_length + kMicroPanel - 1) / kMicroPanel * kMicroPanel;
    kt.assign(static_cast<std::size_t>(padded * d), 0.0f);  // zero padding: finite scores past the last key
    v.assign(static_cast<std::size_t>(padded * d), 0.0f);
  }

  // Rows [j0, j0 + n) of the head; j0 a multiple of the panel width.
  void pack([[maybe_unused]] HeadViews const& view, [[maybe_unused]] std::int64_t j0, [[maybe_unused]] std::int64_t n) {
#if defined(__AVX512F__)
    if (!enabled) return;
    pack_k_panels(view.k, kt.data(), j0, n);
    pack_v_rows(view.v, v.data(), j0, n);
#endif
  }

  void pack_relative([[maybe_unused]] AttentionArgs const& a, [[maybe_unused]] std::int64_t head) {
#if defined(__AVX512F__)
    if (!relative) return;
    if (!a.pos_key.empty()) pack_table_panels(relative_head(a.pos_key, head, a.head_size), 1.0f, key_rel.data());
    if (!a.pos_query.empty())
      pack_table_panels(relative_head(a.pos_query, head, a.head_size), 1.0f / a.scale, query_rel.data());
#endif
  }
};

inline PositionTerms position_terms(AttentionArgs const& a, P2cTable const& table) {
  PositionTerms t;
  t.c2p = !a.pos_key.empty();
  t.p2c = !a.pos_query.empty();
  t.p2c_all = &table.all;
  t.p2c_far = table.far.data();
  t.p2c_near = table.near.data();
  if (t.c2p || t.p2c) {
    t.slot_far = a.relative_index[2 * a.saturation];
    t.slot_near = a.relative_index[0];
    std::int64_t const slots = t.c2p ? a.pos_key.rows : a.pos_query.rows;
    t.unit_steps = slots >= 16 && has_unit_steps(a.relative_index, a.saturation);
  }
  return t;
}

}  // namespace detail
}  // namespace flashdeberta::eigen_ops

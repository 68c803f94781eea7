// The five products of a host flash backward tile (kBlock query rows i against kBlock keys j, head size d):
//   S = Q_i Ks_j^T, dP = dO_i V_j^T, dV_j += P^T dO_i, dK_j += dS^T Q_i, dQ_i += dS K_j.
// With AVX-512 and heads of 64 they run on the forward's register-tiled micro-kernels (flash_microkernel.hpp) over
// the key block's scaled K and V packed once per task (a task sweeps every query block against one key block), and
// read Q, dO and K where they lie. Eigen instead packs both operands of each of the five products for every tile:
// perf put gebp and its packing at ~70% of the backward at L = 512 (2-core EPYC), a sixth of it packing.
#pragma once

#include <algorithm>
#include <cstdint>

#include "flashdeberta/eigen/ops/flash_backward_tile.hpp"
#include "flashdeberta/eigen/ops/flash_microkernel.hpp"

namespace flashdeberta::eigen_ops::detail {

static_assert(HostFlashBackwardTile::kBlock == kMicroPanel, "a key block is one packed panel of the micro-kernels");

// Whether a call's tiles take the micro-kernels: one decision per call, read by every function below.
inline bool backward_micro_products(AttentionArgs const& a) {
  return kHasFlashMicrokernel && a.head_size == kMicroHeadSize;
}

// The key block's operands of S and dP as 64-column panels (kt[e][c] = k(c, e)), columns past `cols` zero: the
// micro-kernels compute whole panels and the caller reads only the first cols columns.
inline void pack_key_block([[maybe_unused]] BackwardProblem const& t,
                           [[maybe_unused]] ConstMatrixMap const& keys_scaled,
                           [[maybe_unused]] ConstMatrixMap const& values, [[maybe_unused]] BackwardWorkspace& w) {
#if defined(__AVX512F__)
  if (!t.micro_products) return;
  if (keys_scaled.rows() < kMicroPanel) {
    std::fill(w.key_panel.begin(), w.key_panel.end(), 0.0f);
    std::fill(w.value_panel.begin(), w.value_panel.end(), 0.0f);
  }
  pack_k_panels(keys_scaled, w.key_panel.data(), 0, keys_scaled.rows());
  pack_k_panels(values, w.value_panel.data(), 0, values.rows());
#endif
}

// w.p (rows, cols) = queries . keys_scaled^T and w.ds (rows, cols) = dout . values^T, before the position terms and
// the softmax; queries and dout: the tile's (rows, d) rows.
inline void tile_forward_products(BackwardProblem const& t, ConstMatrixMap const& queries,
                                  ConstMatrixMap const& keys_scaled, ConstMatrixMap const& dout,
                                  ConstMatrixMap const& values, BackwardWorkspace& w) {
  std::int64_t const rows = queries.rows();
  std::int64_t const cols = keys_scaled.rows();
#if defined(__AVX512F__)
  if (t.micro_products) {
    score_tile(queries.data(), queries.outerStride(), w.key_panel.data(), 0, rows, cols, w.p.data(), w.p.outerStride());
    score_tile(dout.data(), dout.outerStride(), w.value_panel.data(), 0, rows, cols, w.ds.data(), w.ds.outerStride());
    return;
  }
#endif
  w.p.topLeftCorner(rows, cols).noalias() = queries * keys_scaled.transpose();
  w.ds.topLeftCorner(rows, cols).noalias() = dout * values.transpose();
}

// From the tile's P (w.p, dropped where dropout is on) and dS / scale (w.ds), (rows, cols) each:
// dv (cols, d) += P^T dout, dk (cols, d) += dS^T queries, dq (rows, d) += dS keys. dv and dk are the workspace's
// contiguous (kBlock, d) accumulators, dq rows of its (L, d) accumulator.
inline void tile_gradient_products(BackwardProblem const& t, ConstMatrixMap const& queries, ConstMatrixMap const& keys,
                                   ConstMatrixMap const& dout, BackwardWorkspace& w, std::int64_t i0) {
  std::int64_t const rows = queries.rows();
  std::int64_t const cols = keys.rows();
#if defined(__AVX512F__)
  if (t.micro_products) {
    std::int64_t const ld = w.p.outerStride();
    rank_update_tile(w.p.data(), 1, ld, dout.data(), dout.outerStride(), cols, rows, w.acc_v.data(),
                     w.acc_v.outerStride());
    rank_update_tile(w.ds.data(), 1, ld, queries.data(), queries.outerStride(), cols, rows, w.acc.data(),
                     w.acc.outerStride());
    rank_update_tile(w.ds.data(), ld, 1, keys.data(), keys.outerStride(), rows, cols, &w.row_dq(i0, 0),
                     w.row_dq.outerStride());
    return;
  }
#endif
  auto const p = w.p.topLeftCorner(rows, cols);
  auto const ds = w.ds.topLeftCorner(rows, cols);
  w.acc_v.topRows(cols).noalias() += p.transpose() * dout;
  w.acc.topRows(cols).noalias() += ds.transpose() * queries;
  w.row_dq.middleRows(i0, rows).noalias() += ds * keys;
}

// acc (out_rows, 64; rows acc_ld apart) += A (out_rows, n) . b (n, 64), A's element (x, y) at
// a[x * a_out + y * a_red]: the band products of a key block and of a sequence's queries on the micro-kernels.
// Called only where t.micro_products holds.
inline void micro_update([[maybe_unused]] float const* a, [[maybe_unused]] std::int64_t a_out,
                         [[maybe_unused]] std::int64_t a_red, [[maybe_unused]] ConstMatrixMap const& b,
                         [[maybe_unused]] std::int64_t out_rows, [[maybe_unused]] float* acc,
                         [[maybe_unused]] std::int64_t acc_ld) {
#if defined(__AVX512F__)
  rank_update_tile(a, a_out, a_red, b.data(), b.outerStride(), out_rows, b.rows(), acc, acc_ld);
#endif
}

}  // namespace flashdeberta::eigen_ops::detail

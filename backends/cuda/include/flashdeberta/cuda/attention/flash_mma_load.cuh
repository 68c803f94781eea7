// The tensor-core flash kernel's loads (flash_mma_kernel.cuh): the query tile and its A fragments, the
// key / value tiles (cp.async into the double buffer), and the shared-memory addresses the mainloop's
// ldmatrix read its fragments from.
#pragma once

#include <cstdint>

#include "flashdeberta/cuda/attention/flash_mma_cta.cuh"
#include "flashdeberta/cuda/attention/mma.cuh"

namespace flashdeberta::cuda_kernels::flash_mma {

// One k16 (or n16) step through a swizzled (rows, 64) tile of 16-bit elements: 16 rows.
inline constexpr int kStep16Bytes = 16 * 64 * 2;

// load_q: the CTA's query rows into the query tile (cp.async; the caller commits). Padding rows are
// zero-filled.
template <class Tr, bool kDiffWindows>
__device__ __forceinline__ void load_q(MmaCta<Tr, kDiffWindows> const& cta) {
  auto const& p = cta.p;
  mma::load_tile_async<Tr::kThreads>(cta.q_s, cta.q + static_cast<std::int64_t>(cta.first + cta.i0) * p.q_ld, p.q_ld,
                                     Tr::kBlockM, cta.rows, cta.d);
}

// load_kv: keys, values and (with holes in the positions) key positions of the tile at j0 into `buffer`
// (cp.async; the caller commits). Padding rows and columns repeat the last valid position, so they stay
// inside every slot window. full_head: d == 64, so that full tiles load without column checks.
template <class Tr, bool kDiffWindows>
__device__ inline void load_kv(MmaCta<Tr, kDiffWindows> const& cta, bool full_head, int j0, int buffer) {
  constexpr int BN = Tr::kBlockN, kThreads = Tr::kThreads, kTile = BN * Tr::kHeadDim;
  auto const& p = cta.p;
  int const first = cta.first;
  int const cols = min(BN, cta.length - j0);
  if (cols == BN && full_head) {
    mma::load_full_tile_async<kThreads, BN>(cta.k_s + buffer * kTile,
                                            cta.k + static_cast<std::int64_t>(first + j0) * p.k_ld, p.k_ld);
    mma::load_full_tile_async<kThreads, BN>(cta.v_s + buffer * kTile,
                                            cta.v + static_cast<std::int64_t>(first + j0) * p.v_ld, p.v_ld);
    if (!cta.contiguous && threadIdx.x < BN) cta.kpos_s[buffer * BN + threadIdx.x] = cta.positions[j0 + threadIdx.x];
    return;
  }
  mma::load_tile_async<kThreads>(cta.k_s + buffer * kTile, cta.k + static_cast<std::int64_t>(first + j0) * p.k_ld,
                                 p.k_ld, BN, cols, cta.d);
  mma::load_tile_async<kThreads>(cta.v_s + buffer * kTile, cta.v + static_cast<std::int64_t>(first + j0) * p.v_ld,
                                 p.v_ld, BN, cols, cta.d);
  if (!cta.contiguous && threadIdx.x < BN)
    cta.kpos_s[buffer * BN + threadIdx.x] = cta.positions[j0 + min(static_cast<int>(threadIdx.x), cols - 1)];
}

// This warp's 16 query rows as A fragments, k = head columns 16kk.. (the query tile has landed).
template <class Tr, bool kDiffWindows>
__device__ __forceinline__ void load_q_fragments(MmaCta<Tr, kDiffWindows> const& cta, std::uint32_t (&qf)[4][4]) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) mma::load_a(qf[kk], cta.q_s, 16 * cta.warp, 16 * kk);
}

// Scores are kept in log2 units, scaled: q is scaled once (rounded to T, as HF rounds k / scale), so Q.K^T,
// the c2p terms and the edge c2p bias come out scaled; p2c (k . Qr) is scaled where stored.
template <class T>
__device__ __forceinline__ void scale_q_fragments(std::uint32_t (&qf)[4][4], float score_scale) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
#pragma unroll
    for (int i = 0; i < 4; ++i) qf[kk][i] = mma::scale_pair<T>(qf[kk][i], score_scale);
}

// The shared-memory addresses of the mainloop's ldmatrix, per k16 (or n16) step of buffer 0 (buffer 1 is
// Tr::kTileBytes further), made opaque: otherwise the compiler re-derives the swizzled offsets from the
// thread index in every tile (about 80 instructions of ~1000 per tile and warp, Nsight Compute source
// counters at 32 x 512).
struct FragmentAddresses {
  int row_offset[4];            // mma::b_rows_offset, computed once (window_terms takes it)
  int col_offset[4];            // mma::b_cols_offset (a member, not a local: flash_mma_kernel.cuh says why)
  std::uint32_t k[4];           // B of Q.K^T, key rows 16np..
  std::uint32_t v[4];           // B of P.V, value columns 16np..
  std::uint32_t key_a[4];       // this warp's 16 keys as A (p2c windows), head columns 16kk..
  std::uint32_t c2p_window[4];  // B of the by-diff c2p window, this warp's first row
  std::uint32_t p2c_window[4];  // B of the by-diff p2c window, this warp's first row
};

template <class Tr, bool kDiffWindows>
__device__ __forceinline__ void fragment_addresses(MmaCta<Tr, kDiffWindows> const& cta, FragmentAddresses& f) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f.row_offset[i] = mma::b_rows_offset(i);
    f.col_offset[i] = mma::b_cols_offset(i);
  }
  int const warp = cta.warp, lane = cta.lane;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f.k[i] = mma::opaque(mma::smem_address(cta.k_s + f.row_offset[i]));
    f.v[i] = mma::opaque(mma::smem_address(cta.v_s + f.col_offset[i]));
    f.key_a[i] = mma::opaque(mma::smem_address(cta.k_s + mma::swizzle(16 * warp + lane % 16, 2 * i + lane / 16)));
    f.c2p_window[i] = mma::opaque(mma::smem_address(cta.key_window + 16 * warp * 64 + f.row_offset[i]));
    f.p2c_window[i] =
        mma::opaque(mma::smem_address(cta.query_window + (Tr::kBlockM - 16 - 16 * warp) * 64 + f.row_offset[i]));
  }
}

}  // namespace flashdeberta::cuda_kernels::flash_mma

// The tensor-core flash kernel's position terms (flash_mma_kernel.cuh), added to a key tile's scores. A
// tile's slots are one contiguous range (delta is monotone in p_i - p_j), and it takes one of three paths:
//   - one edge slot (saturated tiles): p2c = Qr[edge] . k_j is accumulated with S by compute_qk, c2p is the
//     row's bias computed once per CTA (edge_slot_terms, add_edge_bias)
//   - contiguous positions (by-diff windows): c2p (64 rows) = Q . Kr[window]^T and p2c (64 keys) =
//     K . Qr[window]^T on tensor cores into fp16 shared memory before compute_qk (diff_window_terms), then
//     gathered per score at x = i - j + 63: S[i, j] += c2p[i, x] + p2c[j, x] (gather_diff_terms)
//   - otherwise (holes) the same over the tile's slot window, W slots at a time (window_chunk_terms), each
//     score's slot looked up (gather_window_terms)
// All terms come out scaled like the scores (log2(e) / scale).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "flashdeberta/cuda/attention/flash_mma_cta.cuh"
#include "flashdeberta/cuda/attention/flash_mma_load.cuh"
#include "flashdeberta/cuda/attention/mma.cuh"
#include "flashdeberta/cuda/attention/window_terms.cuh"

namespace flashdeberta::cuda_kernels::flash_mma {

// The edge slots' terms, once per CTA: c2p of rows g, g + 8 at slots lo / hi (one mma per k16 step: B's
// column 0 is Kr[lo], column 1 Kr[hi]; lane t = 0 of each quad receives both), and Qr at both edge slots as
// A fragments whose 16 rows are all that row, so that Qr[edge] . k_j lands in the score registers of every
// row of column j.
//   c2p_edge [row r][lo, hi], scaled like the scores (q is); qr_edge [lo, hi][kk][head columns 16kk + 2t,
//   16kk + 8 + 2t]. Both zero on entry (the kernel declares them so; only edge tiles read them), and c2p_edge
//   is the mma's accumulator itself rather than a local of this function (flash_mma_kernel.cuh says why).
template <class Tr, bool kDiffWindows>
__device__ __forceinline__ void edge_slot_terms(MmaCta<Tr, kDiffWindows> const& cta, EdgeSlots const& edge,
                                                std::uint32_t const (&qf)[4][4], float score_scale,
                                                float (&c2p_edge)[2][2], std::uint32_t (&qr_edge)[2][4][2]) {
  using T = typename Tr::Element;
  auto const& p = cta.p;
  int const g = cta.g, t = cta.t, d = cta.d;
  if (cta.c2p && edge.reachable) {
    // accumulated in place: c2p_edge as the mma's C fragment (rows g, g + 8 x slots lo, hi in lane t = 0)
    float(&acc)[4] = reinterpret_cast<float(&)[4]>(c2p_edge);
    T const* edge_row = cta.pos_key + static_cast<std::int64_t>(g == 0 ? edge.lo : edge.hi) * p.pos_key_ld;
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      std::uint32_t const b0 = g < 2 ? load_pair(edge_row, 16 * kk + 2 * t, d) : 0u;
      std::uint32_t const b1 = g < 2 ? load_pair(edge_row, 16 * kk + 8 + 2 * t, d) : 0u;
      mma::mma_16816<T>(acc, qf[kk], b0, b1);
    }
    int const quad = cta.lane & ~3;
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int e = 0; e < 2; ++e) c2p_edge[r][e] = __shfl_sync(0xffffffffu, acc[2 * r + e], quad);
  }
  if (cta.p2c && edge.reachable) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      T const* row = cta.pos_query + static_cast<std::int64_t>(e == 0 ? edge.lo : edge.hi) * p.pos_query_ld;
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        qr_edge[e][kk][0] = mma::scale_pair<T>(load_pair(row, 16 * kk + 2 * t, d), score_scale);
        qr_edge[e][kk][1] = mma::scale_pair<T>(load_pair(row, 16 * kk + 8 + 2 * t, d), score_scale);
      }
    }
  }
}

// An edge tile's c2p: every score of row r gets the row's term at the tile's edge slot.
__device__ __forceinline__ void add_edge_bias(float (&sc)[8][4], float const (&c2p_edge)[2][2], WindowEdge edge) {
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    float const bias = edge == WindowEdge::kHigh ? c2p_edge[e >> 1][1] : c2p_edge[e >> 1][0];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) sc[nt][e] += bias;
  }
}

// The by-diff windows' terms into the term tiles, before compute_qk: the scores' 32 registers are free
// while the window accumulators are live, and the two windows run as one interleaved stream of mma (two
// independent chains where one window alone leaves the tensor pipe waiting). Each warp computes only the
// window columns its rows read: x = row - col + BN - 1 in [16w, 16w + BN + 15) for c2p, its 16 keys' x in
// [BM - 16 - 16w, BM + BN - 1 - 16w) for p2c, 80 of the 128 columns each.
template <class Tr, bool kDiffWindows>
__device__ __forceinline__ void diff_window_terms(MmaCta<Tr, kDiffWindows> const& cta, std::uint32_t const (&qf)[4][4],
                                                  FragmentAddresses const& frag, int kv_bytes, float score_scale,
                                                  std::uint32_t (&kf)[4][4]) {
  using T = typename Tr::Element;
  constexpr int BM = Tr::kBlockM, BN = Tr::kBlockN, kLd = Tr::kTermLd;
  constexpr int kSteps = (BN + 16) / Tr::kWindowStep;
  int const warp = cta.warp;
  int const c2p_begin = 16 * warp, p2c_begin = BM - 16 - 16 * warp;
  if (cta.p2c) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) mma::ldmatrix_x4(kf[kk], frag.key_a[kk] + kv_bytes);
  }
  // tested from locals, as the single-function kernel did: cta's fields tested in place compile differently
  bool const c2p = cta.c2p, p2c = cta.p2c, by_diff_tables = cta.by_diff_tables;
  if (c2p && p2c && by_diff_tables) {  // the by-diff Qr table is pre-scaled (dispatch.cuh)
    window_pair_terms<Tr, kSteps, T>(cta.c2p_s + 16 * warp * kLd, qf, frag.c2p_window, c2p_begin,
                                     cta.p2c_s + 16 * warp * kLd, kf, frag.p2c_window, p2c_begin);
  } else {
    if (cta.c2p)
      window_terms<Tr, false, kSteps>(cta.c2p_s + 16 * warp * kLd, qf, cta.key_window, c2p_begin, 0, 1.0f,
                                      frag.row_offset);
    if (cta.p2c) {
      if (cta.by_diff_tables) {
        window_terms<Tr, false, kSteps>(cta.p2c_s + 16 * warp * kLd, kf, cta.query_window, p2c_begin, 0, 1.0f,
                                        frag.row_offset);
      } else {
        window_terms<Tr, true, kSteps>(cta.p2c_s + 16 * warp * kLd, kf, cta.query_window, p2c_begin, 0, score_scale,
                                       frag.row_offset);
      }
    }
  }
}

// S[i, j] += c2p[i, x] + p2c[j, x] at x = i - j + BN - 1, once the terms are visible to every warp; with
// both terms they are added in fp16 (one more rounding of 2^-11, one conversion less).
template <class Tr, bool kDiffWindows>
__device__ __forceinline__ void gather_diff_terms(MmaCta<Tr, kDiffWindows> const& cta, float (&sc)[8][4]) {
  constexpr int BN = Tr::kBlockN, kLd = Tr::kTermLd;
  __half const* c2p_s = cta.c2p_s;
  __half const* p2c_s = cta.p2c_s;
  int const t = cta.t;
  int const row_base = 16 * cta.warp + cta.g;
  auto const gather = [&]<bool kC2p, bool kP2c>() {
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        int const row = row_base + 8 * (e >> 1);
        int const col = 8 * nt + 2 * t + (e & 1);
        int const x = row - col + BN - 1;
        if constexpr (kC2p && kP2c) {
          sc[nt][e] += __half2float(__hadd(c2p_s[row * kLd + x], p2c_s[col * kLd + x]));
        } else if constexpr (kC2p) {
          sc[nt][e] += __half2float(c2p_s[row * kLd + x]);
        } else {
          sc[nt][e] += __half2float(p2c_s[col * kLd + x]);
        }
      }
    }
  };
  if (cta.c2p && cta.p2c) {
    gather.template operator()<true, true>();
  } else if (cta.c2p) {
    gather.template operator()<true, false>();
  } else {
    gather.template operator()<false, true>();
  }
}

// A general window's chunk of terms into the term tiles (its Kr / Qr rows have landed): `width` window
// columns, the chunk's slots rounded up to the n16 step.
template <class Tr, bool kDiffWindows>
__device__ __forceinline__ void window_chunk_terms(MmaCta<Tr, kDiffWindows> const& cta, int width,
                                                   std::uint32_t const (&qf)[4][4], FragmentAddresses const& frag,
                                                   int kv_bytes, float score_scale, std::uint32_t (&kf)[4][4]) {
  constexpr int kLd = Tr::kTermLd;
  int const warp = cta.warp;
  if (cta.c2p)
    window_terms<Tr, false, 0>(cta.c2p_s + 16 * warp * kLd, qf, cta.key_window, 0, width, 1.0f, frag.row_offset);
  if (cta.p2c) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) mma::ldmatrix_x4(kf[kk], frag.key_a[kk] + kv_bytes);
    window_terms<Tr, true, 0>(cta.p2c_s + 16 * warp * kLd, kf, cta.query_window, 0, width, score_scale,
                              frag.row_offset);
  }
}

// The chunk's terms added to the scores whose slot falls in it, each score's slot looked up in the tile's
// diff -> slot table (narrow windows) or the relative index. qpos: query_positions; kpos: the tile's key
// positions.
template <class Tr, bool kDiffWindows>
__device__ __forceinline__ void gather_window_terms(MmaCta<Tr, kDiffWindows> const& cta, SlotWindow const& win, int c0,
                                                    int const (&qpos)[2], int const* kpos, int const* slot_table,
                                                    float (&sc)[8][4]) {
  constexpr int W = Tr::kWindow, kLd = Tr::kTermLd;
  int const t = cta.t;
  int const row_base = 16 * cta.warp + cta.g;
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      int const row = row_base + 8 * (e >> 1);
      int const col = 8 * nt + 2 * t + (e & 1);
      int local = 0;  // slot - first - c0
      if (win.slots > 1) {
        int const diff = qpos[e >> 1] - kpos[col];
        local = (win.narrow ? slot_table[diff - win.diff_min] : cta.slot_of_diff(diff) - win.first) - c0;
        if (static_cast<unsigned>(local) >= static_cast<unsigned>(W)) continue;
      }
      float term = 0.0f;
      if (cta.c2p) term += __half2float(cta.c2p_s[row * kLd + local]);
      if (cta.p2c) term += __half2float(cta.p2c_s[col * kLd + local]);
      sc[nt][e] += term;
    }
  }
}

}  // namespace flashdeberta::cuda_kernels::flash_mma

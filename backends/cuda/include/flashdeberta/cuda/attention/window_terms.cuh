// The position-term windows of the tensor-core flash kernel (flash_mma_kernel.cuh): which relative rows a
// key tile touches (SlotWindow), and the warp-level products of the tile's query or key rows with a window
// of relative rows (window_terms, window_pair_terms), stored as fp16 term tiles for the gather.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "flashdeberta/cuda/attention/mma.cuh"

namespace flashdeberta::cuda_kernels::flash_mma {

// Whether a key tile's window is one of the two edge slots: every difference of the tile saturated, at
// or below -s (kLow, slot edge_lo) or at or above s (kHigh, slot edge_hi). Edge tiles are plain flash plus
// a row bias and a column bias, with no window to load.
enum class WindowEdge { kNone, kLow, kHigh };

// The slots one key tile touches, the same for every thread of the CTA.
struct SlotWindow {
  int first = 0;        // first slot
  int slots = 0;        // slot count
  int diff_min = 0;     // smallest p_i - p_j of the tile
  int range = 0;        // diff_max - diff_min + 1
  bool narrow = false;  // range <= BM + BN: the tile's slot table maps diff - diff_min -> slot - first
  WindowEdge edge = WindowEdge::kNone;
  // Contiguous positions, not an edge tile: window row x holds the relative row of diff diff_min + x for
  // x in [0, BM + BN - 1), diff_min taken as if the tile were full, so the c2p / p2c term of tile element
  // (r, c) sits at x = r - c + BN - 1, an affine index the gather computes from the fragment coordinates
  // (no slot table, key position or range check per score, which cost about 30 instructions each).
  bool by_diff = false;
};

// out (16 rows of the warp, window columns [n_begin, n_end)) = a (16, 64) . window (rows n_begin.., 64)^T *
// scale, as fp16 with row stride kLd, stored at the window column. fp16 keeps 11 significant bits (bf16 8);
// the saturating conversion keeps a pathological term finite. kSteps > 0: exactly kSteps n16 steps, unrolled
// so that the next step's mma overlaps this step's stores (with two warps per scheduler nothing else hides
// the mma latency); 0: n_end decides, at run time.
template <class Tr, bool kScale, int kSteps, class T>
__device__ __forceinline__ void window_terms(__half* out, std::uint32_t const (&a)[4][4], T const* window, int n_begin,
                                             int n_end, float scale, int const (&row_offset)[4]) {
  int const lane = threadIdx.x % 32;
  int const g = lane / 4, t = lane % 4;
  // kCount n16 steps from n0 with independent accumulators: 2 kCount mma chains in flight instead of 2
  auto const steps = [&]<int kCount>(int n0) {
    float acc[kCount][2][4] = {};
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
      for (int i = 0; i < kCount; ++i) {
        std::uint32_t b[4];
        mma::ldmatrix_x4(b, window + (n0 + i * Tr::kWindowStep) * 64 + row_offset[kk]);
        mma::mma_16816<T>(acc[i][0], a[kk], b[0], b[1]);
        mma::mma_16816<T>(acc[i][1], a[kk], b[2], b[3]);
      }
    }
#pragma unroll
    for (int i = 0; i < kCount; ++i) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        int const col = n0 + i * Tr::kWindowStep + 8 * half + 2 * t;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          float lo = acc[i][half][2 * r], hi = acc[i][half][2 * r + 1];
          if constexpr (kScale) {
            lo *= scale;
            hi *= scale;
          }
          *reinterpret_cast<std::uint32_t*>(out + (g + 8 * r) * Tr::kTermLd + col) = mma::pack_half2_satfinite(lo, hi);
        }
      }
    }
  };
  if constexpr (kSteps > 0) {
#pragma unroll
    for (int i = 0; i + 1 < kSteps; i += 2) steps.template operator()<2>(n_begin + i * Tr::kWindowStep);
    if constexpr (kSteps % 2 == 1) steps.template operator()<1>(n_begin + (kSteps - 1) * Tr::kWindowStep);
  } else {
    for (int n0 = n_begin; n0 < n_end; n0 += Tr::kWindowStep) steps.template operator()<1>(n0);
  }
}

// Both by-diff windows of a warp at once (c2p: a = Q against the key window; p2c: a = K against the query
// window; neither scaled): kSteps n16 steps of each, two at a time, the mma of the four steps interleaved so
// that four independent accumulator chains are in flight where window_terms has two. c2p_frag / p2c_frag:
// the shared-memory addresses of the first step's B fragments per k16 step (the window's first row for this
// warp, swizzled as load_b_rows reads it); step s is 16 rows (2 KiB) further.
template <class Tr, int kSteps, class T>
__device__ __forceinline__ void window_pair_terms(__half* c2p_out, std::uint32_t const (&qa)[4][4],
                                                  std::uint32_t const (&c2p_frag)[4], int c2p_begin, __half* p2c_out,
                                                  std::uint32_t const (&ka)[4][4], std::uint32_t const (&p2c_frag)[4],
                                                  int p2c_begin) {
  int const lane = threadIdx.x % 32;
  int const g = lane / 4, t = lane % 4;
  constexpr int kStepBytes = Tr::kWindowStep * 64 * 2;
  auto const store = [&](__half* out, int col, float const(&acc)[4]) {
#pragma unroll
    for (int r = 0; r < 2; ++r)
      *reinterpret_cast<std::uint32_t*>(out + (g + 8 * r) * Tr::kTermLd + col) =
          mma::pack_half2_satfinite(acc[2 * r], acc[2 * r + 1]);
  };
  auto const steps = [&]<int kCount>(int i0) {
    float c2p[kCount][2][4], p2c[kCount][2][4];
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
      for (int i = 0; i < kCount; ++i) {
        std::uint32_t b[4], bq[4];
        mma::ldmatrix_x4(b, c2p_frag[kk] + (i0 + i) * kStepBytes);
        mma::ldmatrix_x4(bq, p2c_frag[kk] + (i0 + i) * kStepBytes);
        if (kk == 0) {
          mma::mma_16816_first<T>(c2p[i][0], qa[kk], b[0], b[1]);
          mma::mma_16816_first<T>(p2c[i][0], ka[kk], bq[0], bq[1]);
          mma::mma_16816_first<T>(c2p[i][1], qa[kk], b[2], b[3]);
          mma::mma_16816_first<T>(p2c[i][1], ka[kk], bq[2], bq[3]);
        } else {
          mma::mma_16816<T>(c2p[i][0], qa[kk], b[0], b[1]);
          mma::mma_16816<T>(p2c[i][0], ka[kk], bq[0], bq[1]);
          mma::mma_16816<T>(c2p[i][1], qa[kk], b[2], b[3]);
          mma::mma_16816<T>(p2c[i][1], ka[kk], bq[2], bq[3]);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kCount; ++i)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        int const step = (i0 + i) * Tr::kWindowStep + 8 * half + 2 * t;
        store(c2p_out, c2p_begin + step, c2p[i][half]);
        store(p2c_out, p2c_begin + step, p2c[i][half]);
      }
  };
#pragma unroll
  for (int i = 0; i + 1 < kSteps; i += 2) steps.template operator()<2>(i);
  if constexpr (kSteps % 2 == 1) steps.template operator()<1>(kSteps - 1);
}

// Two head columns (16kk + c, + 1) of a relative-table row as one register; zero past the head size.
template <class T>
__device__ __forceinline__ std::uint32_t load_pair(T const* row, int c, int d) {
  return c < d ? *reinterpret_cast<std::uint32_t const*>(row + c) : 0u;
}

}  // namespace flashdeberta::cuda_kernels::flash_mma

// The tensor-core flash kernel's online softmax (flash_mma_kernel.cuh): the state a warp carries across key
// tiles (its rows' output accumulator, running maximum and sum), the mask of the last tile's missing keys,
// and the update that turns a tile's scores into probabilities, rescaling the state when the maximum moves.
// Scores are in log2 units, so the exponentials are exp2.
#pragma once

#include <cmath>

#include "flashdeberta/cuda/attention/mma.cuh"

namespace flashdeberta::cuda_kernels::flash_mma {

// The state a warp carries across key tiles is the kernel's, three arrays per thread (rows g and g + 8 of
// its warp, r = 0, 1), passed by reference rather than kept in a struct (flash_mma_kernel.cuh says why).
//   o[8][4]      output columns 8nt + 2t (+1), rows g (o[nt][0..1]) and g + 8 (o[nt][2..3])
//   row_max[2]   the running maximum the probabilities are taken against, -inf at first
//   row_sum[4]   row sums of the probabilities as they enter P.V (rounded to T), accumulated by one more
//                mma per k16 step against a B fragment of ones (compute_pv): every column of the n8 tile
//                holds the full row sum, so no quad reduction is needed and 32 FADD per tile go
//                (c[0]: row g, c[2]: row g + 8)

// mask (the last tile only): keys at or past `cols` get -inf. Column 0 of every tile is a valid key, so
// each row's new maximum stays finite.
__device__ __forceinline__ void mask_keys(float (&sc)[8][4], int cols, int t) {
#pragma unroll
  for (int nt = 0; nt < 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (8 * nt + 2 * t + (e & 1) >= cols) sc[nt][e] = -INFINITY;
}

// The tile's maximum per row: a tree over the thread's 16 scores of the row, then across the quad.
__device__ __forceinline__ void tile_row_max(float const (&sc)[8][4], float (&tile_max)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float m8[8];  // a tree, 4 dependent maxima instead of a chain of 16
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) m8[nt] = fmaxf(sc[nt][2 * r], sc[nt][2 * r + 1]);
#pragma unroll
    for (int width = 4; width >= 1; width /= 2)
#pragma unroll
      for (int i = 0; i < width; ++i) m8[i] = fmaxf(m8[i], m8[i + width]);
    float m = m8[0];
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
    tile_max[r] = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
  }
}

// update_softmax_state: the state (o, row_max, row_sum) rescaled if the tile's maximum (tile_row_max) moved
// the running maximum, and the scores replaced by their probabilities exp2(s - max).
__device__ __forceinline__ void update_softmax_state(float (&sc)[8][4], float const (&tile_max)[2], float (&o)[8][4],
                                                     float (&row_max)[2], float (&row_sum)[4]) {
  // Lazy rescaling: the running maximum moves only when a row's tile maximum exceeds it by more than
  // kSlack (log2 units), decided for the whole warp, so most tiles skip the 34 multiplies of rescaling O
  // and the sums. Probabilities then reach 2^kSlack, exact in fp32 and as precise in T.
  constexpr float kSlack = 8.0f;
  bool const grows = tile_max[0] > row_max[0] + kSlack || tile_max[1] > row_max[1] + kSlack;
  if (__any_sync(0xffffffffu, grows)) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float const new_max = fmaxf(row_max[r], tile_max[r]);
      float const correction = mma::fast_exp2(row_max[r] - new_max);
      row_max[r] = new_max;
      row_sum[2 * r] *= correction;
      row_sum[2 * r + 1] *= correction;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        o[nt][2 * r] *= correction;
        o[nt][2 * r + 1] *= correction;
      }
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      sc[nt][2 * r] = mma::fast_exp2(sc[nt][2 * r] - row_max[r]);
      sc[nt][2 * r + 1] = mma::fast_exp2(sc[nt][2 * r + 1] - row_max[r]);
    }
}

}  // namespace flashdeberta::cuda_kernels::flash_mma

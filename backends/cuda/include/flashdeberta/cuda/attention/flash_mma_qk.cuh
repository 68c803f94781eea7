// The tensor-core flash kernel's scores (flash_mma_kernel.cuh), compute_qk: S = (Q log2(e) / scale) . K^T
// of one key tile in registers, and in an edge tile the p2c column bias Qr[edge] . k_j accumulated with it.
#pragma once

#include <cstdint>

#include "flashdeberta/cuda/attention/flash_mma_load.cuh"
#include "flashdeberta/cuda/attention/mma.cuh"
#include "flashdeberta/cuda/attention/window_terms.cuh"

namespace flashdeberta::cuda_kernels::flash_mma {

// sc: scores of rows g, g + 8 of the warp and key columns 8nt + 2t (+1), written by the first k-step.
// kEdgeP2c: an edge tile with p2c, whose term Qr[edge] . k_j is accumulated by a second mma on the same
// K fragments; qr_edge (edge_terms) holds Qr at both edge slots as A fragments, `edge` picks one. Two
// instantiations rather than a branch around every mma: the branch cost a warpsync per mma.
// k_frag: FragmentAddresses::k; kv_bytes: this tile's K / V buffer, from buffer 0.
template <class T, bool kEdgeP2c>
__device__ inline void compute_qk(float (&sc)[8][4], std::uint32_t const (&qf)[4][4],
                                  std::uint32_t const (&qr_edge)[2][4][2], WindowEdge edge,
                                  std::uint32_t const (&k_frag)[4], int kv_bytes) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    std::uint32_t qr[4] = {};
    if constexpr (kEdgeP2c) {
      bool const high = edge == WindowEdge::kHigh;  // selects, not a register-array index
      std::uint32_t const lo = high ? qr_edge[1][kk][0] : qr_edge[0][kk][0];
      std::uint32_t const hi = high ? qr_edge[1][kk][1] : qr_edge[0][kk][1];
      qr[0] = qr[1] = lo;
      qr[2] = qr[3] = hi;
    }
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      std::uint32_t kb[4];
      mma::ldmatrix_x4(kb, k_frag[kk] + kv_bytes + np * kStep16Bytes);
      if (kk == 0) {
        mma::mma_16816_first<T>(sc[2 * np], qf[kk], kb[0], kb[1]);
        mma::mma_16816_first<T>(sc[2 * np + 1], qf[kk], kb[2], kb[3]);
      } else {
        mma::mma_16816<T>(sc[2 * np], qf[kk], kb[0], kb[1]);
        mma::mma_16816<T>(sc[2 * np + 1], qf[kk], kb[2], kb[3]);
      }
      if constexpr (kEdgeP2c) {
        mma::mma_16816<T>(sc[2 * np], qr, kb[0], kb[1]);
        mma::mma_16816<T>(sc[2 * np + 1], qr, kb[2], kb[3]);
      }
    }
  }
}

}  // namespace flashdeberta::cuda_kernels::flash_mma

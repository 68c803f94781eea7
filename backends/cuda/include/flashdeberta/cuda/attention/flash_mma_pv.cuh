// The tensor-core flash kernel's output (flash_mma_kernel.cuh): compute_pv, O += P . V with P taken from the
// score registers as A fragments (and the row sums accumulated alongside), and write_o, out = O / sum.
#pragma once

#include <cstdint>

#include "flashdeberta/cuda/attention/flash_mma_cta.cuh"
#include "flashdeberta/cuda/attention/flash_mma_load.cuh"
#include "flashdeberta/cuda/attention/flash_mma_softmax.cuh"
#include "flashdeberta/cuda/attention/mma.cuh"

namespace flashdeberta::cuda_kernels::flash_mma {

// The probabilities of keys 16kk.. are the A fragment built from score tiles 2kk, 2kk + 1. v_frag:
// FragmentAddresses::v; kv_bytes: this tile's K / V buffer, from buffer 0; ones: pack2<T>(1, 1), the B
// fragment that sums the rows (row_sum, flash_mma_softmax.cuh).
template <class T>
__device__ __forceinline__ void compute_pv(float const (&sc)[8][4], float (&o)[8][4], float (&row_sum)[4],
                                           std::uint32_t const (&v_frag)[4], int kv_bytes, std::uint32_t ones) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    std::uint32_t const a[4] = {
        mma::pack2<T>(sc[2 * kk][0], sc[2 * kk][1]), mma::pack2<T>(sc[2 * kk][2], sc[2 * kk][3]),
        mma::pack2<T>(sc[2 * kk + 1][0], sc[2 * kk + 1][1]), mma::pack2<T>(sc[2 * kk + 1][2], sc[2 * kk + 1][3])};
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      std::uint32_t vb[4];
      mma::ldmatrix_x4_trans(vb, v_frag[np] + kv_bytes + kk * kStep16Bytes);
      mma::mma_16816<T>(o[2 * np], a, vb[0], vb[1]);
      mma::mma_16816<T>(o[2 * np + 1], a, vb[2], vb[3]);
    }
    mma::mma_16816<T>(row_sum, a, ones, ones);
  }
}

// write_o: this thread's rows g, g + 8 of its warp, divided by their sums; rows past the sequence and head
// columns past d are not written.
template <class Tr, bool kDiffWindows>
__device__ __forceinline__ void write_o(MmaCta<Tr, kDiffWindows> const& cta, float const (&o)[8][4],
                                        float const (&row_sum)[4]) {
  using T = typename Tr::Element;
  auto const& p = cta.p;
  int const d = cta.d;
  auto* out = static_cast<T*>(p.out) + static_cast<std::int64_t>(cta.h) * d;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float const total = row_sum[2 * r];
    int const row = 16 * cta.warp + cta.g + 8 * r;
    if (row >= cta.rows) continue;
    float const inv = 1.0f / total;
    T* out_row = out + static_cast<std::int64_t>(cta.first + cta.i0 + row) * p.out_ld;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      int const col = 8 * nt + 2 * cta.t;
      if (col < d)
        *reinterpret_cast<std::uint32_t*>(out_row + col) = mma::pack2<T>(o[nt][2 * r] * inv, o[nt][2 * r + 1] * inv);
    }
  }
}

}  // namespace flashdeberta::cuda_kernels::flash_mma

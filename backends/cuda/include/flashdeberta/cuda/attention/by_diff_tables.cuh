// The relative tables re-indexed by position difference, for the tensor-core kernel's by_diff windows.
//
// With contiguous positions, a key tile that is not saturated needs the Kr / Qr rows of slot(diff) for
// the BM + BN - 1 consecutive differences diff_min, diff_min + 1, ... (flash_mma_kernel.cuh, SlotWindow).
// Gathered from the slot-indexed tables, every row costs a relative_index lookup and its own address; in
// a table whose row r is the relative row of slot(r - offset) the window is 128 consecutive rows, copied
// like a key tile (fixed per-thread offsets). The Qr table is stored pre-scaled by log2(e) / scale, as the
// kernel scales q, so p2c needs no multiply per term. The tables depend only on the weights: CudaPolicy's
// prepare_relative builds them once per layer at load for every length (2 * (saturation + 256) rows of every
// head, about 2.4 MB per table for deberta-v3-base in bf16); a call that comes without them (the op used
// directly) builds 2 * (min(saturation, longest sequence) + 256) rows into its workspace first.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "flashdeberta/cuda/attention/mma.cuh"
#include "flashdeberta/cuda/cuda_check.hpp"
#include "flashdeberta/cuda/kernels/launch.hpp"

namespace flashdeberta::cuda_kernels {

// A non-saturated tile's window starts at diff_min >= -min(s, L) - (BM + BN) and ends below
// min(s, L) + 2 (BM + BN) (flash_mma_kernel.cuh); the margin of 2 window heights covers both ends.
inline ByDiffLayout by_diff_layout(std::int64_t saturation, std::int64_t max_seqlen, std::int64_t row_elements,
                                   int window_rows) {
  ByDiffLayout layout;
  layout.offset = static_cast<int>(std::min(saturation, max_seqlen)) + 2 * window_rows;
  layout.rows = 2 * std::int64_t{layout.offset};
  layout.ld = row_elements;
  return layout;
}

// out (layout.rows, layout.ld): row r = table row relative_index[clamp(r - offset, -s, s) + s] * scale,
// rounded to T. One block per row, 16-byte vectors (layout.ld and table_ld are multiples of 8 elements,
// rows 16-byte aligned).
template <class T>
__global__ void by_diff_table_kernel(T* out, T const* table, std::int64_t table_ld, std::int32_t const* relative_index,
                                     int saturation, ByDiffLayout layout, float scale) {
  int const diff = static_cast<int>(blockIdx.x) - layout.offset;
  int const slot = relative_index[min(max(diff, -saturation), saturation) + saturation];
  auto const* src = reinterpret_cast<uint4 const*>(table + slot * table_ld);
  auto* dst = reinterpret_cast<uint4*>(out + blockIdx.x * layout.ld);
  for (std::int64_t v = threadIdx.x; v < layout.ld / 8; v += blockDim.x) {
    uint4 chunk = src[v];
    if (scale != 1.0f) {
      auto* pairs = reinterpret_cast<std::uint32_t*>(&chunk);
#pragma unroll
      for (int i = 0; i < 4; ++i) pairs[i] = mma::scale_pair<T>(pairs[i], scale);
    }
    dst[v] = chunk;
  }
}

template <class T>
void build_by_diff_table(T* out, T const* table, std::int64_t table_ld, std::int32_t const* relative_index,
                         int saturation, ByDiffLayout const& layout, float scale, cudaStream_t stream) {
  by_diff_table_kernel<T><<<static_cast<unsigned>(layout.rows), 128, 0, stream>>>(out, table, table_ld, relative_index,
                                                                                  saturation, layout, scale);
  FLASHDEBERTA_CUDA_CHECK_LAUNCH();
}

}  // namespace flashdeberta::cuda_kernels

// What the training kernels share: float64 warp and block sums (the host backends add reductions in float64, and
// so do these), the dynamic shared memory opt-in past 48 KiB, and the grid of column reductions.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "flashdeberta/cuda/cuda_check.hpp"
#include "flashdeberta/cuda/training/launch.hpp"

namespace flashdeberta::cuda_kernels::training {

__device__ __forceinline__ double warp_sum_double(double v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// The block's sum, returned to every thread: warps' sums in lane order, then the warps' in warp order, so the
// result depends on blockDim.x (a multiple of 32) only. scratch holds 32 doubles; the leading barrier lets
// consecutive calls share it.
__device__ __forceinline__ double block_sum_double(double v, double* scratch) {
  int const lane = threadIdx.x % 32;
  int const warp = threadIdx.x / 32;
  v = warp_sum_double(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  double total = lane < static_cast<int>(blockDim.x / 32) ? scratch[lane] : 0.0;
  return warp_sum_double(total);
}

// Column reductions (add_column_sums, the LayerNorm parameter gradients), first stage: a block of kColumnsPerBlock
// columns x kRowLanes row lanes per chunk of kColumnRowChunk rows (launch.hpp); lane y adds the chunk's rows y,
// y + kRowLanes, ... in order, then one thread per column adds the lanes' sums in lane order into the chunk's partial.
// Second stage: one thread per column adds the chunks' partials in chunk order. One writer per value, no atomics.
inline constexpr int kColumnsPerBlock = 32;
inline constexpr int kRowLanes = 16;

inline dim3 column_chunk_grid(std::int64_t rows, std::int64_t cols) {
  return dim3(static_cast<unsigned>((cols + kColumnsPerBlock - 1) / kColumnsPerBlock),
              static_cast<unsigned>(column_chunks(rows)));
}

// Raises kernel's dynamic shared memory limit when it asks for more than the default 48 KiB (a per-device
// attribute, cheap to set again).
template <class Kernel>
void allow_shared_memory(Kernel* kernel, std::size_t bytes) {
  if (bytes > 48 * 1024)
    FLASHDEBERTA_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

}  // namespace flashdeberta::cuda_kernels::training

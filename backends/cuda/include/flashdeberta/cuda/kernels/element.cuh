// Element types of the CUDA kernels: loads widen to float, stores round once (round-to-nearest-even), so
// every kernel computes in fp32 whatever the storage dtype. Also the one run-time -> compile-time switch
// over the compute dtype, and the warp/block reductions the kernels share.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "flashdeberta/core/dtype.hpp"
#include "flashdeberta/core/error.hpp"

namespace flashdeberta::cuda_kernels {

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

template <class T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}

// fn.template operator()<T>() with T the storage type of dtype; the closed set is F32, BF16, F16.
template <class Fn>
void dispatch_float_type(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kF32:
      fn.template operator()<float>();
      return;
    case DType::kBF16:
      fn.template operator()<__nv_bfloat16>();
      return;
    case DType::kF16:
      fn.template operator()<__half>();
      return;
    default:
      FLASHDEBERTA_FAIL("CudaPolicy computes in F32, BF16 or F16, not " << dtype_name(dtype));
  }
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

__device__ __forceinline__ int warp_min_int(int v) {
  for (int offset = 16; offset > 0; offset /= 2) v = min(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

__device__ __forceinline__ int warp_max_int(int v) {
  for (int offset = 16; offset > 0; offset /= 2) v = max(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Sum (or max) over the block, returned to every thread. scratch holds 32 floats; blockDim.x is a
// multiple of 32. The leading barrier lets callers reuse scratch across consecutive reductions.
template <bool kMax>
__device__ __forceinline__ float block_reduce(float v, float* scratch) {
  int const lane = threadIdx.x % 32;
  int const warp = threadIdx.x / 32;
  int const warps = blockDim.x / 32;
  v = kMax ? warp_max(v) : warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = lane < warps ? scratch[lane] : (kMax ? -INFINITY : 0.0f);
  total = kMax ? warp_max(total) : warp_sum(total);
  return total;
}

__device__ __forceinline__ float block_sum(float v, float* scratch) { return block_reduce<false>(v, scratch); }
__device__ __forceinline__ float block_max(float v, float* scratch) { return block_reduce<true>(v, scratch); }

// A block's row of `length` scores (each thread its own j's, strided by blockDim.x, `local_max` the max of them)
// replaced by exp(score - row max), as a softmax's numerators: the eager attention forward and its backward
// recompute the same row alike. Returns the row's max and the sum of the exponentials.
struct RowExponents {
  float max;
  float sum;
};
__device__ __forceinline__ RowExponents row_exponents(float* row, int length, float local_max, float* scratch) {
  float const row_max = block_max(local_max, scratch);
  float local_sum = 0.0f;
  for (int j = threadIdx.x; j < length; j += blockDim.x) {
    float const e = expf(row[j] - row_max);
    row[j] = e;
    local_sum += e;
  }
  return {row_max, block_sum(local_sum, scratch)};
}

// Grid size for grid-stride loops over n items of `threads` each: enough blocks to fill the device.
inline unsigned grid_for(std::int64_t n, int threads, int max_blocks = 8192) {
  std::int64_t const blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > max_blocks ? max_blocks : blocks));
}

}  // namespace flashdeberta::cuda_kernels

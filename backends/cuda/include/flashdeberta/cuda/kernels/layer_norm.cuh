// LayerNorm with an optional residual: out = LayerNorm(x + residual) * gamma + beta over each row.
//
// One block per row: the row sum x + residual is formed once in fp32 and kept in shared memory, the mean
// and then the variance (two passes, as PyTorch) are block reductions in fp32, and out is written last,
// so out may alias x or residual.
#pragma once

#include <cuda_runtime_api.h>

#include "flashdeberta/cuda/cuda_check.hpp"
#include "flashdeberta/cuda/kernels/element.cuh"
#include "flashdeberta/policy/op_args.hpp"

namespace flashdeberta::cuda_kernels {

struct LayerNormParams {
  void const* x;
  void const* residual;  // or null
  void const* gamma;
  void const* beta;
  void* out;
  std::int64_t rows, cols, x_ld, residual_ld, out_ld;
  float eps;
};

template <class T>
__global__ void layer_norm_kernel(LayerNormParams p) {
  extern __shared__ float row[];  // (cols) x + residual of the current row
  __shared__ float scratch[32];
  auto const* x = static_cast<T const*>(p.x);
  auto const* residual = static_cast<T const*>(p.residual);
  auto const* gamma = static_cast<T const*>(p.gamma);
  auto const* beta = static_cast<T const*>(p.beta);
  auto* out = static_cast<T*>(p.out);
  float const inv_cols = 1.0f / static_cast<float>(p.cols);
  for (std::int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    float sum = 0.0f;
    for (std::int64_t c = threadIdx.x; c < p.cols; c += blockDim.x) {
      float v = to_float(x[r * p.x_ld + c]);
      if (residual != nullptr) v += to_float(residual[r * p.residual_ld + c]);
      row[c] = v;
      sum += v;
    }
    float const mean = block_sum(sum, scratch) * inv_cols;
    float squares = 0.0f;
    for (std::int64_t c = threadIdx.x; c < p.cols; c += blockDim.x) {
      float const d = row[c] - mean;
      squares += d * d;
    }
    float const variance = block_sum(squares, scratch) * inv_cols;
    float const inv_std = 1.0f / sqrtf(variance + p.eps);
    for (std::int64_t c = threadIdx.x; c < p.cols; c += blockDim.x)
      out[r * p.out_ld + c] = from_float<T>((row[c] - mean) * inv_std * to_float(gamma[c]) + to_float(beta[c]));
    __syncthreads();  // row is rewritten by the next iteration
  }
}

inline void layer_norm(LayerNormArgs const& n, cudaStream_t stream) {
  if (n.x.rows == 0) return;
  constexpr std::int64_t kMaxCols = 12 * 1024;  // the row must fit the default 48 KiB of shared memory
  FLASHDEBERTA_REQUIRE(n.x.cols <= kMaxCols,
                       "CudaPolicy layer_norm supports rows of up to " << kMaxCols << " values, not " << n.x.cols);
  LayerNormParams p{
      n.x.data, n.residual.empty() ? nullptr : n.residual.data, n.gamma,  n.beta, n.out.data, n.x.rows, n.x.cols,
      n.x.ld,   n.residual.empty() ? 0 : n.residual.ld,         n.out.ld, n.eps};
  dispatch_float_type(n.x.dtype, [&]<class T>() {
    // 4+ values per thread for BERT-sized rows, never fewer than one warp.
    int const threads = n.x.cols >= 1024 ? 256 : 128;
    std::size_t const smem = static_cast<std::size_t>(n.x.cols) * sizeof(float);
    layer_norm_kernel<T><<<grid_for(n.x.rows, 1, 65535), threads, smem, stream>>>(p);
    FLASHDEBERTA_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace flashdeberta::cuda_kernels

// The training ops' reductions: column sums (a linear layer's db, conv1d's dbias), the LayerNorm backward and the
// sums of squares of gradient clipping. Float64 sums, as the host backends form them, in an order fixed by the
// shapes and the launch constants (training/common.cuh): no atomics, the same bits run to run.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "flashdeberta/cuda/cuda_check.hpp"
#include "flashdeberta/cuda/kernels/element.cuh"
#include "flashdeberta/cuda/training/common.cuh"
#include "flashdeberta/cuda/training/launch.hpp"

namespace flashdeberta::cuda_kernels {

namespace training {

// sums[c] += sum_r m[r, c] for m (rows, cols) with row stride ld. Block (kColumnsPerBlock, kRowLanes).
__global__ void __launch_bounds__(kColumnsPerBlock* kRowLanes)
    add_column_sums_kernel(float const* m, std::int64_t rows, std::int64_t cols, std::int64_t ld, float* sums) {
  __shared__ double partial[kRowLanes][kColumnsPerBlock];
  std::int64_t const c = std::int64_t{blockIdx.x} * kColumnsPerBlock + threadIdx.x;
  double sum = 0.0;
  if (c < cols)
    for (std::int64_t r = threadIdx.y; r < rows; r += kRowLanes) sum += m[r * ld + c];
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y != 0 || c >= cols) return;
  double total = sums[c];
  for (int lane = 0; lane < kRowLanes; ++lane) total += partial[lane][threadIdx.x];
  sums[c] = static_cast<float>(total);
}

// With s = x + residual (one float32 add, as the forward forms it), per row: stats = (mean, 1 / sigma, mean(g),
// mean(g x_hat)) with g = dy gamma and x_hat = (s - mean) / sigma. One block per row (grid-stride).
__global__ void __launch_bounds__(256) layer_norm_stats_kernel(LayerNormBackwardArgs n, double* stats) {
  __shared__ double scratch[32];
  auto const* x = static_cast<float const*>(n.x.data);
  auto const* residual = static_cast<float const*>(n.residual.data);  // or null
  auto const* dy = static_cast<float const*>(n.dy.data);
  std::int64_t const cols = n.x.cols;
  double const inv_cols = 1.0 / static_cast<double>(cols);
  for (std::int64_t r = blockIdx.x; r < n.x.rows; r += gridDim.x) {
    auto const sum_at = [&](std::int64_t c) {
      return static_cast<double>(residual != nullptr ? x[r * n.x.ld + c] + residual[r * n.residual.ld + c]
                                                     : x[r * n.x.ld + c]);
    };
    double part = 0.0;
    for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) part += sum_at(c);
    double const mean = block_sum_double(part, scratch) * inv_cols;
    part = 0.0;
    for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) part += (sum_at(c) - mean) * (sum_at(c) - mean);
    double const inv_std = 1.0 / sqrt(block_sum_double(part, scratch) * inv_cols + static_cast<double>(n.eps));
    double g_part = 0.0;
    double g_x_hat_part = 0.0;
    for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      double const g = static_cast<double>(dy[r * n.dy.ld + c]) * static_cast<double>(n.gamma[c]);
      g_part += g;
      g_x_hat_part += g * ((sum_at(c) - mean) * inv_std);
    }
    double const g_sum = block_sum_double(g_part, scratch);
    double const g_x_hat_sum = block_sum_double(g_x_hat_part, scratch);
    if (threadIdx.x == 0) {
      stats[r * 4] = mean;
      stats[r * 4 + 1] = inv_std;
      stats[r * 4 + 2] = g_sum * inv_cols;
      stats[r * 4 + 3] = g_x_hat_sum * inv_cols;
    }
  }
}

// dgamma[c] += sum_r dy x_hat, dbeta[c] += sum_r dy (either may be null). Block (kColumnsPerBlock, kRowLanes).
__global__ void __launch_bounds__(kColumnsPerBlock* kRowLanes)
    layer_norm_parameters_kernel(LayerNormBackwardArgs n, double const* stats) {
  __shared__ double partial_gamma[kRowLanes][kColumnsPerBlock];
  __shared__ double partial_beta[kRowLanes][kColumnsPerBlock];
  auto const* x = static_cast<float const*>(n.x.data);
  auto const* residual = static_cast<float const*>(n.residual.data);
  auto const* dy = static_cast<float const*>(n.dy.data);
  std::int64_t const c = std::int64_t{blockIdx.x} * kColumnsPerBlock + threadIdx.x;
  double gamma_sum = 0.0;
  double beta_sum = 0.0;
  if (c < n.x.cols) {
    for (std::int64_t r = threadIdx.y; r < n.x.rows; r += kRowLanes) {
      float const s = residual != nullptr ? x[r * n.x.ld + c] + residual[r * n.residual.ld + c] : x[r * n.x.ld + c];
      double const g = dy[r * n.dy.ld + c];
      gamma_sum += g * ((static_cast<double>(s) - stats[r * 4]) * stats[r * 4 + 1]);
      beta_sum += g;
    }
  }
  partial_gamma[threadIdx.y][threadIdx.x] = gamma_sum;
  partial_beta[threadIdx.y][threadIdx.x] = beta_sum;
  __syncthreads();
  if (threadIdx.y != 0 || c >= n.x.cols) return;
  double dgamma = n.dgamma != nullptr ? n.dgamma[c] : 0.0;
  double dbeta = n.dbeta != nullptr ? n.dbeta[c] : 0.0;
  for (int lane = 0; lane < kRowLanes; ++lane) {
    dgamma += partial_gamma[lane][threadIdx.x];
    dbeta += partial_beta[lane][threadIdx.x];
  }
  if (n.dgamma != nullptr) n.dgamma[c] = static_cast<float>(dgamma);
  if (n.dbeta != nullptr) n.dbeta[c] = static_cast<float>(dbeta);
}

// dx = (1 / sigma) (g - mean(g) - x_hat mean(g x_hat)), written or added; each element reads its x, residual and dy
// before it writes, so dx may alias dy or x.
__global__ void layer_norm_dx_kernel(LayerNormBackwardArgs n, double const* stats) {
  auto const* x = static_cast<float const*>(n.x.data);
  auto const* residual = static_cast<float const*>(n.residual.data);
  auto const* dy = static_cast<float const*>(n.dy.data);
  auto* dx = static_cast<float*>(n.dx.data);
  std::int64_t const cols = n.x.cols;
  std::int64_t const count = n.x.rows * cols;
  for (std::int64_t idx = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; idx < count;
       idx += std::int64_t{gridDim.x} * blockDim.x) {
    std::int64_t const r = idx / cols;
    std::int64_t const c = idx - r * cols;
    double const* s = stats + r * 4;
    float const sum = residual != nullptr ? x[r * n.x.ld + c] + residual[r * n.residual.ld + c] : x[r * n.x.ld + c];
    double const x_hat = (static_cast<double>(sum) - s[0]) * s[1];
    double const g = static_cast<double>(dy[r * n.dy.ld + c]) * static_cast<double>(n.gamma[c]);
    double const grad = s[1] * (g - s[2] - x_hat * s[3]);
    float* out = dx + r * n.dx.ld + c;
    *out = static_cast<float>(n.accumulate_dx ? static_cast<double>(*out) + grad : grad);
  }
}

inline constexpr int kSquaresThreads = 256;

// partial[c] = the float64 sum of squares of chunk c of a list (FloatRun each, at most kSquaresChunk elements): each
// thread its strided elements in order, then the block's fixed tree. One block per chunk.
__global__ void __launch_bounds__(kSquaresThreads) sum_of_squares_list_kernel(FloatRun const* chunks, double* partial) {
  __shared__ double scratch[32];
  FloatRun const chunk = chunks[blockIdx.x];
  double sum = 0.0;
  for (std::int64_t i = threadIdx.x; i < chunk.count; i += kSquaresThreads)
    sum += static_cast<double>(chunk.data[i]) * static_cast<double>(chunk.data[i]);
  double const total = block_sum_double(sum, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

// Every element of every chunk of the list = value. One block per chunk.
__global__ void __launch_bounds__(kSquaresThreads) fill_list_kernel(FloatRun const* chunks, float value) {
  FloatRun const chunk = chunks[blockIdx.x];
  for (std::int64_t i = threadIdx.x; i < chunk.count; i += kSquaresThreads) chunk.data[i] = value;
}

}  // namespace training

void sum_of_squares_list(FloatRun const* chunks, std::int64_t count, double* partial, cudaStream_t stream) {
  if (count == 0) return;
  training::sum_of_squares_list_kernel<<<static_cast<unsigned>(count), training::kSquaresThreads, 0, stream>>>(chunks,
                                                                                                               partial);
  FLASHDEBERTA_CUDA_CHECK_LAUNCH();
}

void fill_list(FloatRun const* chunks, std::int64_t count, float value, cudaStream_t stream) {
  if (count == 0) return;
  training::fill_list_kernel<<<static_cast<unsigned>(count), training::kSquaresThreads, 0, stream>>>(chunks, value);
  FLASHDEBERTA_CUDA_CHECK_LAUNCH();
}

void add_column_sums(MatrixRef const& m, float* sums, cudaStream_t stream) {
  if (m.cols == 0) return;
  training::add_column_sums_kernel<<<training::column_grid(m.cols),
                                     dim3(training::kColumnsPerBlock, training::kRowLanes), 0, stream>>>(
      static_cast<float const*>(m.data), m.rows, m.cols, m.ld, sums);
  FLASHDEBERTA_CUDA_CHECK_LAUNCH();
}

void layer_norm_backward(LayerNormBackwardArgs const& n, double* stats, cudaStream_t stream) {
  std::int64_t const rows = n.x.rows;
  if (rows == 0 || n.x.cols == 0) return;
  training::layer_norm_stats_kernel<<<grid_for(rows, 1, 65535), 256, 0, stream>>>(n, stats);
  FLASHDEBERTA_CUDA_CHECK_LAUNCH();
  if (n.dgamma != nullptr || n.dbeta != nullptr) {
    training::layer_norm_parameters_kernel<<<training::column_grid(n.x.cols),
                                             dim3(training::kColumnsPerBlock, training::kRowLanes), 0, stream>>>(n,
                                                                                                                 stats);
    FLASHDEBERTA_CUDA_CHECK_LAUNCH();
  }
  constexpr int kThreads = 256;
  training::layer_norm_dx_kernel<<<grid_for(rows * n.x.cols, kThreads), kThreads, 0, stream>>>(n, stats);
  FLASHDEBERTA_CUDA_CHECK_LAUNCH();
}

}  // namespace flashdeberta::cuda_kernels

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

// The first stage's block reduction: value(r, c) summed over the block's chunk of rows (blockIdx.y) for column c,
// returned to the column's thread of row lane 0 (others: 0). partial: the block's (kRowLanes, kColumnsPerBlock)
// scratch.
template <class Value>
__device__ __forceinline__ double chunk_column_sum(std::int64_t rows, std::int64_t c, bool in_range,
                                                   double (&partial)[kRowLanes][kColumnsPerBlock], Value const& value) {
  std::int64_t const r0 = std::int64_t{blockIdx.y} * kColumnRowChunk;
  std::int64_t const r1 = min(rows, r0 + kColumnRowChunk);
  double sum = 0.0;
  if (in_range)
    for (std::int64_t r = r0 + threadIdx.y; r < r1; r += kRowLanes) sum += value(r);
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  double total = 0.0;
  if (threadIdx.y == 0)
    for (int lane = 0; lane < kRowLanes; ++lane) total += partial[lane][threadIdx.x];
  return total;
}

// Second stage: out[c] += the chunks' partials[k * cols + c] in chunk order, from out[c]'s value on, rounded once.
__global__ void add_column_partials_kernel(double const* partials, std::int64_t chunks, std::int64_t cols, float* out) {
  if (out == nullptr) return;
  for (std::int64_t c = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; c < cols;
       c += std::int64_t{gridDim.x} * blockDim.x) {
    double total = out[c];
    for (std::int64_t k = 0; k < chunks; ++k) total += partials[k * cols + c];
    out[c] = static_cast<float>(total);
  }
}

// partials[chunk, c] = sum over the chunk's rows r of m[r, c], m (rows, cols) with row stride ld.
__global__ void __launch_bounds__(kColumnsPerBlock* kRowLanes)
    column_chunk_sums_kernel(float const* m, std::int64_t rows, std::int64_t cols, std::int64_t ld, double* partials) {
  __shared__ double partial[kRowLanes][kColumnsPerBlock];
  std::int64_t const c = std::int64_t{blockIdx.x} * kColumnsPerBlock + threadIdx.x;
  double const total = chunk_column_sum(rows, c, c < cols, partial, [&](std::int64_t r) { return m[r * ld + c]; });
  if (threadIdx.y == 0 && c < cols) partials[blockIdx.y * cols + c] = total;
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

// The chunk's partials of dgamma[c] (sum_r dy x_hat) and dbeta[c] (sum_r dy): gamma_partials[chunk, c],
// beta_partials[chunk, c].
__global__ void __launch_bounds__(kColumnsPerBlock* kRowLanes)
    layer_norm_parameters_kernel(LayerNormBackwardArgs n, double const* stats, double* gamma_partials,
                                 double* beta_partials) {
  __shared__ double partial[kRowLanes][kColumnsPerBlock];
  auto const* x = static_cast<float const*>(n.x.data);
  auto const* residual = static_cast<float const*>(n.residual.data);
  auto const* dy = static_cast<float const*>(n.dy.data);
  std::int64_t const c = std::int64_t{blockIdx.x} * kColumnsPerBlock + threadIdx.x;
  bool const in_range = c < n.x.cols;
  double const gamma_sum = chunk_column_sum(n.x.rows, c, in_range, partial, [&](std::int64_t r) {
    float const s = residual != nullptr ? x[r * n.x.ld + c] + residual[r * n.residual.ld + c] : x[r * n.x.ld + c];
    return static_cast<double>(dy[r * n.dy.ld + c]) * ((static_cast<double>(s) - stats[r * 4]) * stats[r * 4 + 1]);
  });
  __syncthreads();  // the scratch is reused
  double const beta_sum =
      chunk_column_sum(n.x.rows, c, in_range, partial, [&](std::int64_t r) { return double{dy[r * n.dy.ld + c]}; });
  if (threadIdx.y != 0 || !in_range) return;
  gamma_partials[blockIdx.y * n.x.cols + c] = gamma_sum;
  beta_partials[blockIdx.y * n.x.cols + c] = beta_sum;
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

namespace training {

inline void add_column_partials(double const* partials, std::int64_t rows, std::int64_t cols, float* out,
                                cudaStream_t stream) {
  constexpr int kThreads = 256;
  add_column_partials_kernel<<<grid_for(cols, kThreads), kThreads, 0, stream>>>(partials, column_chunks(rows), cols,
                                                                                out);
  FLASHDEBERTA_CUDA_CHECK_LAUNCH();
}

}  // namespace training

void add_column_sums(MatrixRef const& m, float* sums, double* partials, cudaStream_t stream) {
  if (m.cols == 0) return;
  if (m.rows > 0) {
    training::column_chunk_sums_kernel<<<training::column_chunk_grid(m.rows, m.cols),
                                         dim3(training::kColumnsPerBlock, training::kRowLanes), 0, stream>>>(
        static_cast<float const*>(m.data), m.rows, m.cols, m.ld, partials);
    FLASHDEBERTA_CUDA_CHECK_LAUNCH();
  }
  training::add_column_partials(partials, m.rows, m.cols, sums, stream);
}

void layer_norm_backward(LayerNormBackwardArgs const& n, double* scratch, cudaStream_t stream) {
  std::int64_t const rows = n.x.rows;
  std::int64_t const cols = n.x.cols;
  if (rows == 0 || cols == 0) return;
  double* const stats = scratch;
  training::layer_norm_stats_kernel<<<grid_for(rows, 1, 65535), 256, 0, stream>>>(n, stats);
  FLASHDEBERTA_CUDA_CHECK_LAUNCH();
  if (n.dgamma != nullptr || n.dbeta != nullptr) {
    double* const gamma_partials = stats + rows * 4;
    double* const beta_partials = gamma_partials + column_partials(rows, cols);
    training::layer_norm_parameters_kernel<<<training::column_chunk_grid(rows, cols),
                                             dim3(training::kColumnsPerBlock, training::kRowLanes), 0, stream>>>(
        n, stats, gamma_partials, beta_partials);
    FLASHDEBERTA_CUDA_CHECK_LAUNCH();
    training::add_column_partials(gamma_partials, rows, cols, n.dgamma, stream);
    training::add_column_partials(beta_partials, rows, cols, n.dbeta, stream);
  }
  constexpr int kThreads = 256;
  training::layer_norm_dx_kernel<<<grid_for(rows * cols, kThreads), kThreads, 0, stream>>>(n, stats);
  FLASHDEBERTA_CUDA_CHECK_LAUNCH();
}

}  // namespace flashdeberta::cuda_kernels

// GemmArgs::accumulate_f64 on the GPU: float32 operands, float64 sums, one rounding. cuBLASLt multiplies
// float64 matrices only, so this small tiled kernel reads the float32 operands directly instead of converting
// a whole embedding table. The masked-LM decoder is its only user, over the rows the head computes.
#pragma once

#include <cuda_runtime_api.h>

#include "flashdeberta/cuda/cuda_check.hpp"
#include "flashdeberta/cuda/kernels/launch.hpp"
#include "flashdeberta/math/activation.hpp"
#include "flashdeberta/policy/op_args.hpp"

namespace flashdeberta::cuda_kernels {

inline constexpr int kGemmF64Tile = 16;

// out (M, N) = act(alpha * a (M, K) . b (N, K)^T + bias): one output per thread of a kTile x kTile block, the
// block's a and b tiles staged in shared memory along K.
template <int kTile>
__global__ void gemm_accumulate_f64_kernel(float const* a, std::int64_t lda, float const* b, std::int64_t ldb,
                                           float* out, std::int64_t ldo, std::int64_t m, std::int64_t n, std::int64_t k,
                                           double alpha, float const* bias, Activation act) {
  __shared__ float a_tile[kTile][kTile + 1];  // [row][k]
  __shared__ float b_tile[kTile][kTile + 1];  // [col][k]
  std::int64_t const row = std::int64_t{blockIdx.y} * kTile + threadIdx.y;
  std::int64_t const col = std::int64_t{blockIdx.x} * kTile + threadIdx.x;
  std::int64_t const b_row = std::int64_t{blockIdx.x} * kTile + threadIdx.y;
  double sum = 0.0;
  for (std::int64_t k0 = 0; k0 < k; k0 += kTile) {
    std::int64_t const kk = k0 + threadIdx.x;
    a_tile[threadIdx.y][threadIdx.x] = row < m && kk < k ? a[row * lda + kk] : 0.0f;
    b_tile[threadIdx.y][threadIdx.x] = b_row < n && kk < k ? b[b_row * ldb + kk] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kTile; ++i)
      sum += static_cast<double>(a_tile[threadIdx.y][i]) * static_cast<double>(b_tile[threadIdx.x][i]);
    __syncthreads();
  }
  if (row >= m || col >= n) return;
  sum *= alpha;
  if (bias != nullptr) sum += static_cast<double>(bias[col]);
  out[row * ldo + col] = apply_activation(act, static_cast<float>(sum));
}

void gemm_accumulate_f64(GemmArgs const& g, cudaStream_t stream) {
  FLASHDEBERTA_REQUIRE(g.a.dtype == DType::kF32 && g.b.dtype == DType::kF32 && g.out.dtype == DType::kF32,
                       "a float64-accumulated gemm takes float32 operands");
  std::int64_t const m = g.out.rows;
  std::int64_t const n = g.out.cols;
  if (m == 0 || n == 0) return;
  dim3 const block(kGemmF64Tile, kGemmF64Tile);
  dim3 const grid(static_cast<unsigned>((n + kGemmF64Tile - 1) / kGemmF64Tile),
                  static_cast<unsigned>((m + kGemmF64Tile - 1) / kGemmF64Tile));
  FLASHDEBERTA_REQUIRE(grid.y <= 65535u, "a float64-accumulated gemm of " << m << " rows (at most 65535 x 16)");
  gemm_accumulate_f64_kernel<kGemmF64Tile>
      <<<grid, block, 0, stream>>>(static_cast<float const*>(g.a.data), g.a.ld, static_cast<float const*>(g.b.data),
                                   g.b.ld, static_cast<float*>(g.out.data), g.out.ld, m, n, g.a.cols,
                                   static_cast<double>(g.alpha), static_cast<float const*>(g.bias), g.activation);
  FLASHDEBERTA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace flashdeberta::cuda_kernels

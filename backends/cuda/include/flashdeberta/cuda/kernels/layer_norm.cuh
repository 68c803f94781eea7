// LayerNorm with an optional residual: out = LayerNorm(x + residual) * gamma + beta over each row.
//
// Rows of the widths the warp kernel below is built for (768, 1024, ... with 16-byte alignment) take it;
// the others take one block per row: the row sum x + residual is formed once in fp32 and kept in shared
// memory, the mean and then the variance (two passes, as PyTorch) are block reductions in fp32, and out
// is written last. In both, out may alias x or residual.
#pragma once

#include <cuda_runtime_api.h>

#include "flashdeberta/cuda/cuda_check.hpp"
#include "flashdeberta/cuda/kernels/element.cuh"
#include "flashdeberta/cuda/kernels/launch.hpp"
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

// One warp per row for BERT-sized rows: each lane holds kVecs 16-byte vectors of the row in registers
// (768 columns of bf16: 3 per lane), loads and stores are 16 bytes wide and coalesced, and the two-pass
// statistics are warp shuffles; no shared memory and no block barrier.
template <class T, int kVecs>
__global__ void layer_norm_warp_kernel(LayerNormParams p) {
  constexpr int kPer = 16 / sizeof(T);  // elements per 16-byte vector
  using Vec = uint4;
  int const lane = threadIdx.x % 32;
  int const warps = blockDim.x / 32;
  float const inv_cols = 1.0f / static_cast<float>(p.cols);
  auto const gamma = static_cast<T const*>(p.gamma);
  auto const beta = static_cast<T const*>(p.beta);
  for (std::int64_t r = blockIdx.x * std::int64_t{warps} + threadIdx.x / 32; r < p.rows;
       r += std::int64_t{gridDim.x} * warps) {
    float v[kVecs][kPer];
    auto const x = static_cast<T const*>(p.x) + r * p.x_ld;
    auto const residual = p.residual == nullptr ? nullptr : static_cast<T const*>(p.residual) + r * p.residual_ld;
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      int const c = (i * 32 + lane) * kPer;
      Vec const xv = *reinterpret_cast<Vec const*>(x + c);
      T const* xs = reinterpret_cast<T const*>(&xv);
#pragma unroll
      for (int e = 0; e < kPer; ++e) v[i][e] = to_float(xs[e]);
      if (residual != nullptr) {
        Vec const rv = *reinterpret_cast<Vec const*>(residual + c);
        T const* rs = reinterpret_cast<T const*>(&rv);
#pragma unroll
        for (int e = 0; e < kPer; ++e) v[i][e] += to_float(rs[e]);
      }
#pragma unroll
      for (int e = 0; e < kPer; ++e) sum += v[i][e];
    }
    float const mean = warp_sum(sum) * inv_cols;
    float squares = 0.0f;
#pragma unroll
    for (int i = 0; i < kVecs; ++i)
#pragma unroll
      for (int e = 0; e < kPer; ++e) squares += (v[i][e] - mean) * (v[i][e] - mean);
    float const inv_std = 1.0f / sqrtf(warp_sum(squares) * inv_cols + p.eps);
    auto* out = static_cast<T*>(p.out) + r * p.out_ld;
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      int const c = (i * 32 + lane) * kPer;
      Vec const gv = *reinterpret_cast<Vec const*>(gamma + c);
      Vec const bv = *reinterpret_cast<Vec const*>(beta + c);
      T const* gs = reinterpret_cast<T const*>(&gv);
      T const* bs = reinterpret_cast<T const*>(&bv);
      Vec ov;
      T* os = reinterpret_cast<T*>(&ov);
#pragma unroll
      for (int e = 0; e < kPer; ++e)
        os[e] = from_float<T>((v[i][e] - mean) * inv_std * to_float(gs[e]) + to_float(bs[e]));
      *reinterpret_cast<Vec*>(out + c) = ov;
    }
  }
}

// fn.template operator()<kVecs>() for the row widths the warp kernel is instantiated for (16-byte vectors
// per lane: 3, 4, 6, 8 cover hidden sizes 768, 1024, 1536 and 2048 in 16-bit, 384 to 1024 in fp32);
// false when the width is not one of them.
template <class Fn>
bool dispatch_row_vectors(std::int64_t vectors, Fn&& fn) {
  switch (vectors) {
    case 3:
      fn.template operator()<3>();
      return true;
    case 4:
      fn.template operator()<4>();
      return true;
    case 6:
      fn.template operator()<6>();
      return true;
    case 8:
      fn.template operator()<8>();
      return true;
    default:
      return false;
  }
}

inline bool aligned16(void const* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

void layer_norm(LayerNormArgs const& n, cudaStream_t stream) {
  if (n.x.rows == 0) return;
  constexpr std::int64_t kMaxCols = 12 * 1024;  // the row must fit the default 48 KiB of shared memory
  FLASHDEBERTA_REQUIRE(n.x.cols <= kMaxCols,
                       "CudaPolicy layer_norm supports rows of up to " << kMaxCols << " values, not " << n.x.cols);
  LayerNormParams p{
      n.x.data, n.residual.empty() ? nullptr : n.residual.data, n.gamma,  n.beta, n.out.data, n.x.rows, n.x.cols,
      n.x.ld,   n.residual.empty() ? 0 : n.residual.ld,         n.out.ld, n.eps};
  dispatch_float_type(n.x.dtype, [&]<class T>() {
    constexpr std::int64_t kPer = 16 / sizeof(T);
    bool const vectorizable = n.x.cols % (32 * kPer) == 0 && n.x.ld % kPer == 0 && n.out.ld % kPer == 0 &&
                              p.residual_ld % kPer == 0 && aligned16(p.x) && aligned16(p.out) &&
                              (p.residual == nullptr || aligned16(p.residual)) && aligned16(p.gamma) &&
                              aligned16(p.beta);
    if (vectorizable && dispatch_row_vectors(n.x.cols / (32 * kPer), [&]<int kVecs>() {
          constexpr int kWarps = 4;  // 128 threads: small blocks keep every SM busy at a few thousand rows
          layer_norm_warp_kernel<T, kVecs><<<grid_for(n.x.rows, kWarps, 65535), 32 * kWarps, 0, stream>>>(p);
          FLASHDEBERTA_CUDA_CHECK_LAUNCH();
        }))
      return;
    // 4+ values per thread for BERT-sized rows, never fewer than one warp.
    int const threads = n.x.cols >= 1024 ? 256 : 128;
    std::size_t const smem = static_cast<std::size_t>(n.x.cols) * sizeof(float);
    layer_norm_kernel<T><<<grid_for(n.x.rows, 1, 65535), threads, smem, stream>>>(p);
    FLASHDEBERTA_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace flashdeberta::cuda_kernels

// The v2 conv layer as im2col + GEMM. im2col gathers, for every packed token t, the kernel_size
// neighbours of each channel into one row, (T, C * kernel), laid out [channel][tap] so that per group the
// row slice matches PyTorch's Conv1d weight (C, C / groups, kernel) read as (C, C / groups * kernel).
// A neighbour exists only inside the token's sequence and with no hole in positions between them
// (padding never reaches the conv: batches are packed; HF zero-pads the masked tokens).
#pragma once

#include <cuda_runtime_api.h>

#include "flashdeberta/cuda/cuda_check.hpp"
#include "flashdeberta/cuda/kernels/element.cuh"
#include "flashdeberta/cuda/kernels/launch.hpp"
#include "flashdeberta/policy/op_args.hpp"

namespace flashdeberta::cuda_kernels {

struct Im2colParams {
  void const* x;  // (T, C)
  void* columns;  // (T, C * kernel)
  std::int32_t const* cu_seqlens;
  std::int32_t const* positions;
  std::int64_t tokens, channels, x_ld;
  int batch, kernel_size, pad;
};

template <class T>
__global__ void im2col_kernel(Im2colParams p) {
  auto const* x = static_cast<T const*>(p.x);
  auto* columns = static_cast<T*>(p.columns);
  std::int64_t const width = p.channels * p.kernel_size;
  std::int64_t const n = p.tokens * width;
  for (std::int64_t idx = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; idx < n;
       idx += std::int64_t{gridDim.x} * blockDim.x) {
    std::int64_t const t = idx / width;
    std::int64_t const rest = idx - t * width;
    std::int64_t const c = rest / p.kernel_size;
    int const offset = static_cast<int>(rest - c * p.kernel_size) - p.pad;
    // The sequence holding t: the last b with cu_seqlens[b] <= t.
    int lo = 0, hi = p.batch - 1;
    while (lo < hi) {
      int const mid = (lo + hi + 1) / 2;
      if (p.cu_seqlens[mid] <= t) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    std::int64_t const s = t + offset;
    bool const valid = s >= p.cu_seqlens[lo] && s < p.cu_seqlens[lo + 1] && p.positions[s] - p.positions[t] == offset;
    columns[idx] = valid ? x[s * p.x_ld + c] : from_float<T>(0.0f);
  }
}

// columns (T, C * kernel_size), contiguous, in x's dtype.
void im2col(Conv1dArgs const& c, void* columns, cudaStream_t stream) {
  if (c.x.rows == 0) return;
  Im2colParams const p{c.x.data,
                       columns,
                       c.sequences.cu_seqlens,
                       c.sequences.positions,
                       c.x.rows,
                       c.x.cols,
                       c.x.ld,
                       static_cast<int>(c.sequences.batch),
                       static_cast<int>(c.kernel_size),
                       static_cast<int>((c.kernel_size - 1) / 2)};
  dispatch_float_type(c.x.dtype, [&]<class T>() {
    constexpr int kThreads = 256;
    im2col_kernel<T><<<grid_for(c.x.rows * c.x.cols * c.kernel_size, kThreads), kThreads, 0, stream>>>(p);
    FLASHDEBERTA_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace flashdeberta::cuda_kernels

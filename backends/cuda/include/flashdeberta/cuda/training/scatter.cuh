// The training ops that move rows by index: the embedding backward (a scatter-add into the tables' gradients) and
// the conv1d backward's unfold and fold around its GEMMs.
#pragma once

#include <cuda_runtime_api.h>

#include <climits>
#include <cstdint>

#include "flashdeberta/cuda/cuda_check.hpp"
#include "flashdeberta/cuda/kernels/element.cuh"
#include "flashdeberta/cuda/training/launch.hpp"

namespace flashdeberta::cuda_kernels {

namespace training {

__global__ void first_index_out_of_range_kernel(std::int32_t const* index, std::int64_t tokens, std::int64_t rows,
                                                int* first) {
  for (std::int64_t t = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; t < tokens;
       t += std::int64_t{gridDim.x} * blockDim.x)
    if (index[t] < 0 || index[t] >= rows) atomicMin(first, static_cast<int>(t));
}

// The tables whose gradients one embedding_backward call adds into: gradient (rows, E) with row stride ld, and the
// token's row in it.
struct EmbeddingGradients {
  float* grad[3];
  std::int64_t ld[3];
  std::int32_t const* index[3];
  int count;
};

// Block t (grid-stride over the tokens) adds dout row t into each table's row index[t]: threads along E, so each
// warp's reads and atomics are contiguous. Tokens sharing a row (a frequent word, position 0) add into it in an
// order that varies run to run: float32 sums of them differ in the last bits between runs.
__global__ void embedding_backward_kernel(float const* dout, std::int64_t tokens, std::int64_t width,
                                          std::int64_t dout_ld, EmbeddingGradients tables) {
  for (std::int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    float const* row = dout + t * dout_ld;
    for (int table = 0; table < tables.count; ++table) {
      float* target = tables.grad[table] + static_cast<std::int64_t>(tables.index[table][t]) * tables.ld[table];
      for (std::int64_t c = threadIdx.x; c < width; c += blockDim.x) atomicAdd(target + c, row[c]);
    }
  }
}

// Whether the forward read packed token t + offset as t's neighbour: both in t's sequence and their positions
// `offset` apart, no hole between them (the conv1d forward's test; kokkos/ops/training_conv_ops.hpp's ConvLinks).
__device__ __forceinline__ bool linked(std::int32_t const* bounds, std::int32_t const* positions, std::int64_t t,
                                       std::int64_t offset) {
  std::int64_t const s = t + offset;
  return s >= bounds[2 * t] && s < bounds[2 * t + 1] && positions[s] - positions[t] == offset;
}

__global__ void conv_sequence_bounds_kernel(std::int32_t const* cu_seqlens, std::int64_t batch, std::int64_t tokens,
                                            std::int32_t* bounds) {
  for (std::int64_t t = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; t < tokens;
       t += std::int64_t{gridDim.x} * blockDim.x) {
    bool const inside = batch > 0 && t >= cu_seqlens[0] && t < cu_seqlens[batch];
    std::int64_t lo = 0;  // the last b with cu_seqlens[b] <= t
    std::int64_t hi = batch - 1;
    while (inside && lo < hi) {
      std::int64_t const mid = (lo + hi + 1) / 2;
      if (cu_seqlens[mid] <= t) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    bounds[2 * t] = inside ? cu_seqlens[lo] : 0;
    bounds[2 * t + 1] = inside ? cu_seqlens[lo + 1] : 0;
  }
}

struct ConvShape {
  std::int64_t tokens, channels, kernel, pad;
  std::int32_t const* bounds;     // (T, 2)
  std::int32_t const* positions;  // (T)
};

// columns[t, c kernel + u] = x[t + u - pad, c] where linked, else 0: the forward's im2col ([channel][tap]).
__global__ void conv_unfold_kernel(ConvShape s, float const* x, std::int64_t x_ld, float* columns) {
  std::int64_t const width = s.channels * s.kernel;
  std::int64_t const count = s.tokens * width;
  for (std::int64_t idx = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; idx < count;
       idx += std::int64_t{gridDim.x} * blockDim.x) {
    std::int64_t const t = idx / width;
    std::int64_t const rest = idx - t * width;
    std::int64_t const c = rest / s.kernel;
    std::int64_t const offset = rest - c * s.kernel - s.pad;
    columns[idx] = linked(s.bounds, s.positions, t, offset) ? x[(t + offset) * x_ld + c] : 0.0f;
  }
}

// dx[r, c] = sum over taps u of dcolumns[r - offset_u, c kernel + u] where token r - offset_u linked r at offset_u:
// the transpose of the unfold, gathered by each dx element's one writer.
__global__ void conv_fold_kernel(ConvShape s, float const* dcolumns, float* dx, std::int64_t dx_ld) {
  std::int64_t const width = s.channels * s.kernel;
  std::int64_t const count = s.tokens * s.channels;
  for (std::int64_t idx = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; idx < count;
       idx += std::int64_t{gridDim.x} * blockDim.x) {
    std::int64_t const r = idx / s.channels;
    std::int64_t const c = idx - r * s.channels;
    float sum = 0.0f;
    for (std::int64_t u = 0; u < s.kernel; ++u) {
      std::int64_t const offset = u - s.pad;
      std::int64_t const t = r - offset;
      if (t >= 0 && t < s.tokens && linked(s.bounds, s.positions, t, offset))
        sum += dcolumns[t * width + c * s.kernel + u];
    }
    dx[r * dx_ld + c] = sum;
  }
}

inline ConvShape conv_shape(Conv1dBackwardArgs const& c, std::int32_t const* bounds) {
  return {c.dpre.rows, c.dpre.cols, c.kernel_size, (c.kernel_size - 1) / 2, bounds, c.sequences.positions};
}

inline constexpr int kScatterThreads = 256;

}  // namespace training

void first_index_out_of_range(std::int32_t const* index, std::int64_t tokens, std::int64_t rows, int* first,
                              cudaStream_t stream) {
  if (tokens == 0) return;
  FLASHDEBERTA_REQUIRE(tokens <= INT_MAX, "embedding_backward over " << tokens << " tokens exceeds 32-bit indices");
  training::first_index_out_of_range_kernel<<<grid_for(tokens, training::kScatterThreads), training::kScatterThreads, 0,
                                              stream>>>(index, tokens, rows, first);
  FLASHDEBERTA_CUDA_CHECK_LAUNCH();
}

void embedding_backward(EmbeddingBackwardArgs const& e, cudaStream_t stream) {
  training::EmbeddingGradients tables{};
  MatrixRef const* grads[] = {&e.dword, &e.dposition, &e.dtoken_type};
  std::int32_t const* indices[] = {e.ids, e.positions, e.token_types};
  for (int i = 0; i < 3; ++i) {
    if (grads[i]->empty()) continue;
    tables.grad[tables.count] = static_cast<float*>(grads[i]->data);
    tables.ld[tables.count] = grads[i]->ld;
    tables.index[tables.count] = indices[i];
    ++tables.count;
  }
  std::int64_t const tokens = e.dout.rows;
  if (tables.count == 0 || tokens == 0 || e.dout.cols == 0) return;
  training::embedding_backward_kernel<<<grid_for(tokens, 1, 65535), 128, 0, stream>>>(
      static_cast<float const*>(e.dout.data), tokens, e.dout.cols, e.dout.ld, tables);
  FLASHDEBERTA_CUDA_CHECK_LAUNCH();
}

void conv_sequence_bounds(SequenceLayout const& s, std::int64_t tokens, std::int32_t* bounds, cudaStream_t stream) {
  if (tokens == 0) return;
  training::conv_sequence_bounds_kernel<<<grid_for(tokens, training::kScatterThreads), training::kScatterThreads, 0,
                                          stream>>>(s.cu_seqlens, s.batch, tokens, bounds);
  FLASHDEBERTA_CUDA_CHECK_LAUNCH();
}

void conv_unfold(Conv1dBackwardArgs const& c, std::int32_t const* bounds, float* columns, cudaStream_t stream) {
  training::ConvShape const s = training::conv_shape(c, bounds);
  std::int64_t const count = s.tokens * s.channels * s.kernel;
  if (count == 0) return;
  training::conv_unfold_kernel<<<grid_for(count, training::kScatterThreads), training::kScatterThreads, 0, stream>>>(
      s, static_cast<float const*>(c.x.data), c.x.ld, columns);
  FLASHDEBERTA_CUDA_CHECK_LAUNCH();
}

void conv_fold(Conv1dBackwardArgs const& c, std::int32_t const* bounds, float const* dcolumns, cudaStream_t stream) {
  training::ConvShape const s = training::conv_shape(c, bounds);
  std::int64_t const count = s.tokens * s.channels;
  if (count == 0) return;
  training::conv_fold_kernel<<<grid_for(count, training::kScatterThreads), training::kScatterThreads, 0, stream>>>(
      s, dcolumns, static_cast<float*>(c.dx.data), c.dx.ld);
  FLASHDEBERTA_CUDA_CHECK_LAUNCH();
}

}  // namespace flashdeberta::cuda_kernels

// Eager disentangled-attention backward in float32, the reference path of the backward: per sequence, each head's
// (L, L) probabilities recomputed in the eager forward's order of operations (attention/eager_kernel.cuh), then dS,
// and every gradient from the materialized P * M and dS, as HF's autograd differentiates its materialized scores
// (attention_backward_common.cuh gives the terms). Slow by design.
//
// Two kernels per sequence: one CTA per (query row, head) forms the row of P and dS, the row's c2p band (one thread,
// in key order) and the content part of dQ; one CTA per (key, head) sums down its column for dV and dK and gathers
// the key's p2c band (one thread, in query order). Each output row has one CTA and every sum a fixed order.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "flashdeberta/cuda/training/attention_backward_common.cuh"

namespace flashdeberta::cuda_kernels::training {

inline constexpr int kEagerBackwardThreads = 128;

__global__ void __launch_bounds__(kEagerBackwardThreads) eager_backward_rows_kernel(BackwardParams const b, int seq) {
  __shared__ float scratch[32];
  __shared__ double scratch_double[32];
  AttentionParams const& p = b.p;
  int const h = blockIdx.y;
  int const i = blockIdx.x;
  int const first = p.cu_seqlens[seq];
  int const length = p.cu_seqlens[seq + 1] - first;
  if (i >= length) return;  // uniform over the CTA
  int const d = p.head_size;
  std::int64_t const max_len = p.max_seqlen;
  std::int64_t const ti = first + i;
  float* row = b.buffers.probabilities + (h * max_len + i) * max_len;  // (L) scores, then P * M of query i
  float* ds = b.buffers.ds + (h * max_len + i) * max_len;              // (L) dS / scale
  int const pos_i = p.positions[ti];

  // The eager forward's scores: content q . (k / scale), then c2p / scale + p2c / scale as one relative term.
  float local_max = -INFINITY;
  for (int j = threadIdx.x; j < length; j += blockDim.x) {
    float s = 0.0f;
    for (int c = 0; c < d; ++c) s += b.q(ti, h, c) * (b.k(first + j, h, c) / p.scale);
    if (p.c2p || p.p2c) {
      int const slot = b.slot(pos_i, p.positions[first + j]);
      float relative = 0.0f;
      if (p.c2p) relative = static_cast<float const*>(b.buffers.c2p_all)[b.band_row(ti, h) + slot] / p.scale;
      if (p.p2c) relative += static_cast<float const*>(b.buffers.p2c_all)[b.band_row(first + j, h) + slot] / p.scale;
      s += relative;
    }
    row[j] = s;
    local_max = fmaxf(local_max, s);
  }
  float const row_sum = row_exponents(row, length, local_max, scratch).sum;
  double part = 0.0;  // D = dO . O in float64, rounded once
  for (int c = threadIdx.x; c < d; c += blockDim.x)
    part += static_cast<double>(b.d_o(ti, h, c)) * static_cast<double>(b.o(ti, h, c));
  float const row_dot = static_cast<float>(block_sum_double(part, scratch_double));
  bool const dropped = p.dropout > 0.0f;
  for (int j = threadIdx.x; j < length; j += blockDim.x) {  // each thread its own j's, as above
    float const prob = row[j] / row_sum;
    float const m = dropped ? dropout_factor(p, h, ti, j) : 1.0f;
    float dp = 0.0f;
    for (int c = 0; c < d; ++c) dp += b.d_o(ti, h, c) * b.v(first + j, h, c);
    ds[j] = prob * (dp * m - row_dot) * p.inv_scale;
    row[j] = prob * m;  // the dropped probabilities, which dV reads
  }
  __syncthreads();  // ds is read across threads below
  if (p.c2p && threadIdx.x == 0) {
    float* band = b.buffers.band_c2p + b.band_row(ti, h);
    for (int j = 0; j < length; ++j) band[b.slot(pos_i, p.positions[first + j])] += ds[j];
  }
  for (int c = threadIdx.x; c < d; c += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < length; ++j) acc += ds[j] * b.k(first + j, h, c);
    b.dq[ti * b.dq_ld + h * p.head_stride + c] = acc;
  }
}

__global__ void __launch_bounds__(kEagerBackwardThreads)
    eager_backward_columns_kernel(BackwardParams const b, int seq) {
  AttentionParams const& p = b.p;
  int const h = blockIdx.y;
  int const j = blockIdx.x;
  int const first = p.cu_seqlens[seq];
  int const length = p.cu_seqlens[seq + 1] - first;
  if (j >= length) return;
  int const d = p.head_size;
  std::int64_t const max_len = p.max_seqlen;
  std::int64_t const tj = first + j;
  float const* column_p = b.buffers.probabilities + h * max_len * max_len + j;  // P * M [i, j] at i * L
  float const* column_ds = b.buffers.ds + h * max_len * max_len + j;
  if (p.p2c && threadIdx.x == 0) {
    float* band = b.buffers.band_p2c + b.band_row(tj, h);
    int const pos_j = p.positions[tj];
    for (int i = 0; i < length; ++i) band[b.slot(p.positions[first + i], pos_j)] += column_ds[i * max_len];
  }
  for (int c = threadIdx.x; c < d; c += blockDim.x) {
    float dv = 0.0f;
    float dk = 0.0f;
    for (int i = 0; i < length; ++i) {
      dv += column_p[i * max_len] * b.d_o(first + i, h, c);
      dk += column_ds[i * max_len] * b.q(first + i, h, c);
    }
    b.dv[tj * b.dv_ld + h * p.head_stride + c] = dv;
    b.dk[tj * b.dk_ld + h * p.head_stride + c] = dk;
  }
}

}  // namespace flashdeberta::cuda_kernels::training

namespace flashdeberta::cuda_kernels {

// buffers.probabilities and buffers.ds hold (heads, L, L) floats, reused by each sequence in turn: stream order
// keeps one sequence's column kernel before the next one's row kernel. Lengths stay in device memory: each launch
// covers the longest sequence and CTAs past the end of the current one return at once.
void attention_backward_eager(AttentionBackwardArgs const& g, AttentionBackwardBuffers const& buffers,
                              DeviceLimits const& /*limits*/, cudaStream_t stream) {
  AttentionArgs const& a = g.forward;
  if (a.sequences.batch == 0 || a.sequences.max_seqlen == 0 || a.sequences.total_tokens == 0) return;
  training::BackwardParams const params = training::backward_params(g, buffers);
  FLASHDEBERTA_REQUIRE(buffers.tables == DType::kF32, "the eager attention backward reads float32 position tables, not "
                                                          << dtype_name(buffers.tables));
  FLASHDEBERTA_REQUIRE(a.num_heads <= 65535, "the eager attention backward over " << a.num_heads << " heads");
  dim3 const grid(static_cast<unsigned>(a.sequences.max_seqlen), static_cast<unsigned>(a.num_heads));
  for (std::int64_t seq = 0; seq < a.sequences.batch; ++seq) {
    training::eager_backward_rows_kernel<<<grid, training::kEagerBackwardThreads, 0, stream>>>(params,
                                                                                               static_cast<int>(seq));
    FLASHDEBERTA_CUDA_CHECK_LAUNCH();
    training::eager_backward_columns_kernel<<<grid, training::kEagerBackwardThreads, 0, stream>>>(
        params, static_cast<int>(seq));
    FLASHDEBERTA_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace flashdeberta::cuda_kernels

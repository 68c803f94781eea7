// Eager disentangled attention, the reference path (AttentionImpl::kEager): HF's order of operations
// (deberta-spec 4.2) one query row at a time. The row's scores live in shared memory (the (L, L) matrix
// is formed row by row, never stored): content q . (k / scale), then c2p / scale and p2c / scale added as
// one relative term, softmax as exp(x - max) / sum, then probabilities . v. Slow by design (every key row
// is read once per query row); it is what the flash kernel is checked against. In training (float32) it also
// writes each row's log-sum-exp and drops out probabilities (AttentionParams::lse, dropout).
#pragma once

#include <cuda_runtime_api.h>

#include "flashdeberta/cuda/attention/attention_params.cuh"
#include "flashdeberta/cuda/attention/kernel_traits.cuh"
#include "flashdeberta/cuda/kernels/element.cuh"

namespace flashdeberta::cuda_kernels::eager {

template <class T>
__global__ void __launch_bounds__(EagerTraits::kThreads) eager_attention_kernel(AttentionParams const p) {
  extern __shared__ float smem[];
  __shared__ float scratch[32];
  int const b = blockIdx.z;
  int const h = blockIdx.y;
  int const i = blockIdx.x;
  int const first = p.cu_seqlens[b];
  int const length = p.cu_seqlens[b + 1] - first;
  if (i >= length) return;
  int const d = p.head_size;
  float* q_s = smem;         // (d) query row
  float* scores = smem + d;  // (length) scores, then probabilities
  auto const* q = static_cast<T const*>(p.q) + static_cast<std::int64_t>(first + i) * p.q_ld +
                  static_cast<std::int64_t>(h) * p.head_stride;
  auto const* k = static_cast<T const*>(p.k) + static_cast<std::int64_t>(first) * p.k_ld +
                  static_cast<std::int64_t>(h) * p.head_stride;
  auto const* v = static_cast<T const*>(p.v) + static_cast<std::int64_t>(first) * p.v_ld +
                  static_cast<std::int64_t>(h) * p.head_stride;
  for (int c = threadIdx.x; c < d; c += blockDim.x) q_s[c] = to_float(q[c]);
  __syncthreads();

  int const s = p.saturation;
  int const position_i = p.positions[first + i];
  float local_max = -INFINITY;
  for (int j = threadIdx.x; j < length; j += blockDim.x) {
    T const* key = k + static_cast<std::int64_t>(j) * p.k_ld;
    float content = 0.0f;
    for (int c = 0; c < d; ++c) content += q_s[c] * (to_float(key[c]) / p.scale);
    if (p.c2p || p.p2c) {
      int const diff = min(max(position_i - p.positions[first + j], -s), s);
      int const slot = p.relative_index[diff + s];
      float relative = 0.0f;
      if (p.c2p) {
        T const* kr = static_cast<T const*>(p.pos_key) + static_cast<std::int64_t>(slot) * p.pos_key_ld +
                      static_cast<std::int64_t>(h) * d;
        float c2p = 0.0f;
        for (int c = 0; c < d; ++c) c2p += q_s[c] * to_float(kr[c]);
        relative = c2p / p.scale;
      }
      if (p.p2c) {
        T const* qr = static_cast<T const*>(p.pos_query) + static_cast<std::int64_t>(slot) * p.pos_query_ld +
                      static_cast<std::int64_t>(h) * d;
        float p2c = 0.0f;
        for (int c = 0; c < d; ++c) p2c += to_float(key[c]) * to_float(qr[c]);
        relative += p2c / p.scale;
      }
      content += relative;
    }
    scores[j] = content;
    local_max = fmaxf(local_max, content);
  }
  auto const [row_max, row_sum] = row_exponents(scores, length, local_max, scratch);
  if (p.lse != nullptr && threadIdx.x == 0) p.lse[h * p.total_tokens + first + i] = row_max + logf(row_sum);
  // Training's dropout masks the normalized probabilities (the lse stays the undropped softmax's).
  bool const dropped = p.dropout > 0.0f;
  for (int j = threadIdx.x; j < length; j += blockDim.x) {
    scores[j] /= row_sum;
    if (dropped) scores[j] *= dropout_factor(p, h, first + i, j);
  }
  __syncthreads();

  auto* out =
      static_cast<T*>(p.out) + static_cast<std::int64_t>(first + i) * p.out_ld + static_cast<std::int64_t>(h) * d;
  for (int c = threadIdx.x; c < d; c += blockDim.x) {
    float o = 0.0f;
    for (int j = 0; j < length; ++j) o += scores[j] * to_float(v[static_cast<std::int64_t>(j) * p.v_ld + c]);
    out[c] = from_float<T>(o);
  }
}

}  // namespace flashdeberta::cuda_kernels::eager

// Flash disentangled-attention forward: tiled online softmax in fp32, no (L, L) buffer, no workspace.
//
// Per CTA: one sequence b, one head h, query rows [i0, i0 + BM). For each key tile [j0, j0 + BN):
//   load_kv        keys (and, after the softmax, values) into shared memory, zero-padded
//   slot_window    the slots the tile touches: delta is monotone in p_i - p_j, so they are the
//                  contiguous range [delta(min diff), delta(max diff)], at most BM + BN - 1 wide for
//                  contiguous positions and a single slot in saturated tiles
//   position_terms c2p (BM, window) = (q / scale) . Kr[window]^T and p2c (BN, window) = k . Qr[window]^T
//                  / scale, 32 relative rows at a time; tiles whose window is wider (holes in positions)
//                  take the per-element path, reading Kr/Qr rows from global memory
//   compute_qk     S = (q / scale) . k^T + c2p[i, delta] + p2c[j, delta]
//   softmax        running row max and sum per warp (rows) with shuffles over lanes (columns)
//   compute_pv     acc = acc * correction + P . V, acc in registers
// and at the end write_o: out = acc / sum. Training (AttentionParams::lse, dropout) adds the rows' log-sum-exp to
// write_o and the dropout mask to the probabilities compute_pv reads.
#pragma once

#include <cuda_runtime_api.h>

#include "flashdeberta/cuda/attention/attention_params.cuh"
#include "flashdeberta/cuda/attention/kernel_traits.cuh"
#include "flashdeberta/cuda/kernels/element.cuh"

namespace flashdeberta::cuda_kernels::flash {

// dst (rows_total, D) with row stride dst_ld = scale * src rows [0, rows) columns [0, d); zeros elsewhere.
template <int kD, int kThreads, class T>
__device__ __forceinline__ void load_rows(float* dst, int dst_ld, int rows_total, T const* src, std::int64_t src_ld,
                                          int rows, int d, float scale) {
  for (int idx = threadIdx.x; idx < rows_total * kD; idx += kThreads) {
    int const r = idx / kD;
    int const c = idx % kD;
    dst[r * dst_ld + c] = (r < rows && c < d) ? to_float(src[r * src_ld + c]) * scale : 0.0f;
  }
}

// out[rr] = rows_s[row0 + rr] . other (both length D in shared memory); rows are a warp broadcast.
template <int kD, int kR>
__device__ __forceinline__ void dot_rows(float const* rows_s, int ld, int row0, float const* other, float (&out)[kR]) {
#pragma unroll
  for (int rr = 0; rr < kR; ++rr) out[rr] = 0.0f;
#pragma unroll 8
  for (int k = 0; k < kD; ++k) {
    float const o = other[k];
#pragma unroll
    for (int rr = 0; rr < kR; ++rr) out[rr] += rows_s[(row0 + rr) * ld + k] * o;
  }
}

// row_s (D, shared) . global row g of length d.
template <class T>
__device__ __forceinline__ float dot_global(float const* row_s, T const* g, int d) {
  float sum = 0.0f;
  for (int k = 0; k < d; ++k) sum += row_s[k] * to_float(g[k]);
  return sum;
}

template <class Tr>
__global__ void __launch_bounds__(Tr::kThreads) flash_attention_kernel(AttentionParams const p) {
  using T = typename Tr::Element;
  constexpr int D = Tr::kHeadDim, BM = Tr::kBlockM, BN = Tr::kBlockN, R = Tr::kRowsPerWarp;
  constexpr int kThreads = Tr::kThreads, kChunk = Tr::kSlotChunk;
  extern __shared__ float smem[];
  float* q_s = smem + Tr::kQOffset;
  float* k_s = smem + Tr::kKOffset;
  float* rel_s = smem + Tr::kRelOffset;
  float* v_s = rel_s;  // the relative rows are consumed before the values of the same tile arrive
  float* c2p_s = smem + Tr::kC2pOffset;
  float* p2c_s = smem + Tr::kP2cOffset;
  float* p_s = smem + Tr::kPOffset;
  int* qpos_s = reinterpret_cast<int*>(smem + Tr::kPosOffset);
  int* kpos_s = qpos_s + BM;
  int* window_s = kpos_s + BN;  // [first slot, slot count]

  int const b = blockIdx.z;
  int const h = blockIdx.y;
  int const i0 = blockIdx.x * BM;
  int const first = p.cu_seqlens[b];
  int const length = p.cu_seqlens[b + 1] - first;
  if (i0 >= length) return;
  int const rows = min(BM, length - i0);
  int const warp = threadIdx.x / 32;
  int const lane = threadIdx.x % 32;
  int const row0 = warp * R;  // this warp's first query row
  int const d = p.head_size;
  int const s = p.saturation;
  bool const relative = p.c2p || p.p2c;
  auto const* q = static_cast<T const*>(p.q) + static_cast<std::int64_t>(h) * p.head_stride;
  auto const* k = static_cast<T const*>(p.k) + static_cast<std::int64_t>(h) * p.head_stride;
  auto const* v = static_cast<T const*>(p.v) + static_cast<std::int64_t>(h) * p.head_stride;
  auto const* pos_key = p.c2p ? static_cast<T const*>(p.pos_key) + static_cast<std::int64_t>(h) * d : nullptr;
  auto const* pos_query = p.p2c ? static_cast<T const*>(p.pos_query) + static_cast<std::int64_t>(h) * d : nullptr;

  // load_q: the scale is folded into q once, so c2p computed from it is scaled too.
  load_rows<D, kThreads>(q_s, Tr::kQLd, BM, q + static_cast<std::int64_t>(first + i0) * p.q_ld, p.q_ld, rows, d,
                         p.inv_scale);
  // Padding rows repeat the last valid position: they stay inside the tile's slot window.
  if (threadIdx.x < BM) qpos_s[threadIdx.x] = p.positions[first + i0 + min(static_cast<int>(threadIdx.x), rows - 1)];

  float acc[R][Tr::kColsPerLane];
  float row_max[R];
  float row_sum[R];
#pragma unroll
  for (int rr = 0; rr < R; ++rr) {
    row_max[rr] = -INFINITY;
    row_sum[rr] = 0.0f;
#pragma unroll
    for (int cc = 0; cc < Tr::kColsPerLane; ++cc) acc[rr][cc] = 0.0f;
  }

  for (int j0 = 0; j0 < length; j0 += BN) {
    int const cols = min(BN, length - j0);
    __syncthreads();  // the previous tile's keys, values and windows are consumed
    // load_kv (keys)
    load_rows<D, kThreads>(k_s, Tr::kKLd, BN, k + static_cast<std::int64_t>(first + j0) * p.k_ld, p.k_ld, cols, d,
                           1.0f);
    if (threadIdx.x < BN) kpos_s[threadIdx.x] = p.positions[first + j0 + min(static_cast<int>(threadIdx.x), cols - 1)];
    __syncthreads();

    // slot_window
    int window_first = 0;
    bool windowed = false;
    if (relative) {
      if (warp == 0) {
        int const qp = qpos_s[lane < BM ? lane : BM - 1];
        int const kp = kpos_s[lane];
        // Both ends clamped on both sides: in a saturated tile the whole range lies beyond +-s.
        int const diff_min = min(max(warp_min_int(qp) - warp_max_int(kp), -s), s);
        int const diff_max = min(max(warp_max_int(qp) - warp_min_int(kp), -s), s);
        if (lane == 0) {
          window_s[0] = p.relative_index[diff_min + s];
          window_s[1] = p.relative_index[diff_max + s] - window_s[0] + 1;
        }
      }
      __syncthreads();
      window_first = window_s[0];
      int const slots = window_s[1];
      windowed = slots <= Tr::kWindow;
      // position_terms, one chunk of 32 relative rows (one per lane) at a time
      if (windowed) {
        for (int c0 = 0; c0 < slots; c0 += kChunk) {
          int const chunk = min(kChunk, slots - c0);
          float terms[R];
          if (p.c2p) {
            load_rows<D, kThreads>(rel_s, Tr::kRelLd, kChunk, pos_key + (window_first + c0) * p.pos_key_ld,
                                   p.pos_key_ld, chunk, d, 1.0f);
            __syncthreads();
            dot_rows<D, R>(q_s, Tr::kQLd, row0, rel_s + lane * Tr::kRelLd, terms);
#pragma unroll
            for (int rr = 0; rr < R; ++rr) c2p_s[(row0 + rr) * Tr::kC2pLd + c0 + lane] = terms[rr];
            __syncthreads();
          }
          if (p.p2c) {
            load_rows<D, kThreads>(rel_s, Tr::kRelLd, kChunk, pos_query + (window_first + c0) * p.pos_query_ld,
                                   p.pos_query_ld, chunk, d, 1.0f);
            __syncthreads();
            dot_rows<D, R>(k_s, Tr::kKLd, row0, rel_s + lane * Tr::kRelLd, terms);  // warp's rows are keys here
#pragma unroll
            for (int rr = 0; rr < R; ++rr) p2c_s[(row0 + rr) * Tr::kP2cLd + c0 + lane] = terms[rr] * p.inv_scale;
            __syncthreads();
          }
        }
      }
    }

    // compute_qk + add the position terms + mask
    float score[R];
    dot_rows<D, R>(q_s, Tr::kQLd, row0, k_s + lane * Tr::kKLd, score);
    int const kp = kpos_s[lane];
#pragma unroll
    for (int rr = 0; rr < R; ++rr) {
      int const r = row0 + rr;
      if (relative) {
        int const diff = min(max(qpos_s[r] - kp, -s), s);
        int const slot = p.relative_index[diff + s];
        if (windowed) {
          if (p.c2p) score[rr] += c2p_s[r * Tr::kC2pLd + slot - window_first];
          if (p.p2c) score[rr] += p2c_s[lane * Tr::kP2cLd + slot - window_first];
        } else {
          if (p.c2p) score[rr] += dot_global(q_s + r * Tr::kQLd, pos_key + slot * p.pos_key_ld, d);
          if (p.p2c) score[rr] += dot_global(k_s + lane * Tr::kKLd, pos_query + slot * p.pos_query_ld, d) * p.inv_scale;
        }
      }
      if (lane >= cols) score[rr] = -INFINITY;
    }

    // softmax: column 0 of every tile is a valid key, so the new maximum is finite
#pragma unroll
    for (int rr = 0; rr < R; ++rr) {
      float const new_max = fmaxf(row_max[rr], warp_max(score[rr]));
      float const correction = expf(row_max[rr] - new_max);
      float const prob = expf(score[rr] - new_max);
      row_sum[rr] = row_sum[rr] * correction + warp_sum(prob);
      row_max[rr] = new_max;
#pragma unroll
      for (int cc = 0; cc < Tr::kColsPerLane; ++cc) acc[rr][cc] *= correction;
      // Training's dropout masks the tile after the row sum took it whole: lse and the normalization stay those of
      // the undropped softmax. A padding lane's probability is 0 whatever its factor.
      float const factor = p.dropout > 0.0f ? dropout_factor(p, h, first + i0 + row0 + rr, j0 + lane) : 1.0f;
      p_s[(row0 + rr) * Tr::kPLd + lane] = prob * factor;
    }

    // load_kv (values) into rel_s: its last readers, the window chunks, ended on a barrier, and p_s rows
    // are read back only by the warp that wrote them
    load_rows<D, kThreads>(v_s, Tr::kVLd, BN, v + static_cast<std::int64_t>(first + j0) * p.v_ld, p.v_ld, cols, d,
                           1.0f);
    __syncthreads();

    // compute_pv: P (warp's rows, BN) . V (BN, D); lane owns columns lane + 32 * cc
#pragma unroll 4
    for (int j = 0; j < BN; ++j) {
      float vj[Tr::kColsPerLane];
#pragma unroll
      for (int cc = 0; cc < Tr::kColsPerLane; ++cc) vj[cc] = v_s[j * Tr::kVLd + lane + 32 * cc];
#pragma unroll
      for (int rr = 0; rr < R; ++rr) {
        float const pj = p_s[(row0 + rr) * Tr::kPLd + j];
#pragma unroll
        for (int cc = 0; cc < Tr::kColsPerLane; ++cc) acc[rr][cc] += pj * vj[cc];
      }
    }
  }

  // write_o
  auto* out = static_cast<T*>(p.out) + static_cast<std::int64_t>(h) * d;
#pragma unroll
  for (int rr = 0; rr < R; ++rr) {
    int const r = row0 + rr;
    if (r >= rows) continue;
    float const inv_sum = 1.0f / row_sum[rr];
    if (p.lse != nullptr && lane == 0)  // row_max is of S itself: q carries 1 / scale
      p.lse[h * p.total_tokens + first + i0 + r] = row_max[rr] + logf(row_sum[rr]);
#pragma unroll
    for (int cc = 0; cc < Tr::kColsPerLane; ++cc) {
      int const col = lane + 32 * cc;
      if (col < d)
        out[static_cast<std::int64_t>(first + i0 + r) * p.out_ld + col] = from_float<T>(acc[rr][cc] * inv_sum);
    }
  }
}

}  // namespace flashdeberta::cuda_kernels::flash

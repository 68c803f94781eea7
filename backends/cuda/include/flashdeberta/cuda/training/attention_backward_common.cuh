// What the eager and flash attention backward kernels share (AttentionBackwardArgs, training_op_args.hpp): the
// argument struct, the slot look-up, the score of a pair from the projected tables, and the rows' D.
//
// With s = 1 / scale and the gradients of one head (docs: training-notes; both position terms of a pair read slot
// delta(i, j), as the forward does), M the forward's dropout mask redrawn (all ones without dropout) and O the output
// the forward wrote (dropped):
//   D_i = dO_i . O_i,   dP = (dO V^T) * M,   dS = P * (dP - D),   dV = (P * M)^T dO
//   Gc2p[i, r] = sum of dS[i, j] over the keys j with delta(i, j) = r,  Gp2c[j, r] = sum over the queries i alike
//   dQ = s (dS K + Gc2p Kr),   dK = s (dS^T Q + Gp2c Qr),   dKr += s Gc2p^T Q,   dQr += s Gp2c^T K
// The kernels form the content terms s dS K, s dS^T Q, s (P * M)^T dO and the bands s Gc2p, s Gp2c, (T, heads, 2k)
// over every token, each band row with one writer; the bands' products with the tables and with Q and K are GEMMs
// of the caller (cuda_training_attention.hpp), over all tokens in order: no atomics, no per-block partials.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "flashdeberta/cuda/attention/attention_params.cuh"
#include "flashdeberta/cuda/kernels/element.cuh"
#include "flashdeberta/cuda/training/common.cuh"
#include "flashdeberta/cuda/training/launch.hpp"

namespace flashdeberta::cuda_kernels::training {

struct BackwardParams {
  AttentionParams p;  // the forward's operands, float32; p.out is its output O; p.lse unused
  float const* dout;  // (T, A), head h at h * head_size
  std::int64_t dout_ld;
  float* dq;  // (T, *), head h at h * head_stride, as q, k, v
  float* dk;
  float* dv;
  std::int64_t dq_ld, dk_ld, dv_ld;
  AttentionBackwardBuffers buffers;
  float const* lse;  // (heads, T), the float32 kernels': the forward's, or buffers.lse once their row pass wrote it
  bool compute_lse;  // the float32 row pass writes buffers.lse in a first sweep (the tensor-core one always does)
  int heads;
  int span2;  // 2k rows of the relative tables; 0 without position terms

  // Element (row t, column c) of head h's operand.
  __device__ float q(std::int64_t t, int h, int c) const {
    return static_cast<float const*>(p.q)[t * p.q_ld + h * p.head_stride + c];
  }
  __device__ float k(std::int64_t t, int h, int c) const {
    return static_cast<float const*>(p.k)[t * p.k_ld + h * p.head_stride + c];
  }
  __device__ float v(std::int64_t t, int h, int c) const {
    return static_cast<float const*>(p.v)[t * p.v_ld + h * p.head_stride + c];
  }
  __device__ float o(std::int64_t t, int h, int c) const {
    return static_cast<float const*>(p.out)[t * p.out_ld + h * p.head_size + c];
  }
  __device__ float d_o(std::int64_t t, int h, int c) const { return dout[t * dout_ld + h * p.head_size + c]; }

  // The relative-table row of the pair (query at position pi, key at position pj).
  __device__ int slot(int pi, int pj) const {
    int const s = p.saturation;
    return p.relative_index[min(max(pi - pj, -s), s) + s];
  }
  // Row (t, h) of a (T, heads, 2k) table.
  __device__ std::int64_t band_row(std::int64_t t, int h) const { return (t * heads + h) * span2; }

  // c2p + p2c of the pair (query token ti, key token tj) at `slot`, unscaled (0 without position terms); float32
  // tables (the float32 kernels').
  __device__ float position_terms(std::int64_t ti, std::int64_t tj, int h, int slot) const {
    float term = 0.0f;
    if (p.c2p) term = static_cast<float const*>(buffers.c2p_all)[band_row(ti, h) + slot];
    if (p.p2c) term += static_cast<float const*>(buffers.p2c_all)[band_row(tj, h) + slot];
    return term;
  }
};

// A lane's open run of the band row it walks: the slot it is summing and the sum so far. With positions that increase
// along the sequence (no holes: the kernels check AttentionParams::contiguous), a row's slots are monotone in the
// swept index across the whole sweep (relative_position.hpp: slots are monotone in the distance), so each slot is one
// run: it is stored once, when the run ends, into the zeroed band, with no read of global memory. A global
// read-modify-write per run would put an L2 round trip on the walk's critical path for every slot.
struct BandRun {
  int slot = -1;
  float sum = 0.0f;

  __device__ __forceinline__ void add(float* band, int s, float value) {
    if (s != slot) {
      if (slot >= 0) band[slot] = sum;
      slot = s;
      sum = 0.0f;
    }
    sum += value;
  }
  __device__ __forceinline__ void finish(float* band) const {
    if (slot >= 0) band[slot] = sum;
  }
};

// D_t of head h: dO_t . O_t in float64, rounded once (a row's dS sums to zero only as far as D matches
// sum_j P_tj dP_tj), summed by one warp: lanes along the head, then the warp's fixed tree.
__device__ __forceinline__ float warp_row_dot(BackwardParams const& b, std::int64_t t, int h) {
  double sum = 0.0;
  for (int e = threadIdx.x % 32; e < b.p.head_size; e += 32)
    sum += static_cast<double>(b.d_o(t, h, e)) * static_cast<double>(b.o(t, h, e));
  return static_cast<float>(warp_sum_double(sum));
}

inline BackwardParams backward_params(AttentionBackwardArgs const& g, AttentionBackwardBuffers const& buffers) {
  AttentionArgs forward = g.forward;
  forward.lse = nullptr;  // the backward never writes the forward's lse
  BackwardParams b{};
  b.p = attention_params(forward);
  b.dout = static_cast<float const*>(g.dout.data);
  b.dout_ld = g.dout.ld;
  b.dq = static_cast<float*>(g.dq.data);
  b.dk = static_cast<float*>(g.dk.data);
  b.dv = static_cast<float*>(g.dv.data);
  b.dq_ld = g.dq.ld;
  b.dk_ld = g.dk.ld;
  b.dv_ld = g.dv.ld;
  b.buffers = buffers;
  b.compute_lse = g.lse == nullptr;
  b.lse = g.lse != nullptr ? g.lse : buffers.lse;
  b.heads = static_cast<int>(forward.num_heads);
  b.span2 = static_cast<int>(!forward.pos_key.empty() ? forward.pos_key.rows
                                                      : (!forward.pos_query.empty() ? forward.pos_query.rows : 0));
  return b;
}

}  // namespace flashdeberta::cuda_kernels::training

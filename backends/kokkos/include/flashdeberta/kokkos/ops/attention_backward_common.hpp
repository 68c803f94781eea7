// What the eager and flash Kokkos attention backward share (AttentionBackwardArgs, training_op_args.hpp): argument
// checks, the device-copyable problem, the projected relative tables and band gradients, and the tables' gradients.
//
// With s = 1 / scale and the gradients of one head (docs: training-notes; both position terms of a pair read slot
// delta(i, j), as the forward does):
//   D_i = dO_i . O_i,   dP = dO V^T,   dS = P * (dP - D),   dV = P^T dO
//   Gc2p[i, r] = sum of dS[i, j] over the keys j with delta(i, j) = r       (L, 2k), only with c2p
//   Gp2c[j, r] = sum of dS[i, j] over the queries i with delta(i, j) = r     (L, 2k), only with p2c
//   dQ = s (dS K + Gc2p Kr),   dK = s (dS^T Q + Gp2c Qr),   dKr += s Gc2p^T Q,   dQr += s Gp2c^T K
// With dropout on the probabilities (AttentionArgs::dropout; FlashAttention 2's backward), M = m / (1 - p) the
// forward's mask, redrawn, and O the dropped output the forward wrote:
//   dV = (P * M)^T dO,   dP = (dO V^T) * M,   D_i = dO_i . O_i,   dS = P * (dP - D)   (P undropped, from lse)
// The bands are kept for every token, (T, heads, 2k) like the forward's projected tables: a band row has one writer
// (its query's or its key's owner), and the tables' gradients are then one GEMM each over all tokens in order,
// without atomics or per-block partials.
#pragma once

#include "flashdeberta/kokkos/ops/attention_common.hpp"
#include "flashdeberta/kokkos/ops/training_elementwise_ops.hpp"
#include "flashdeberta/kokkos/ops/training_gemm.hpp"
#include "flashdeberta/policy/training_op_args.hpp"
#include "flashdeberta/policy/training_op_checks.hpp"

namespace flashdeberta::kokkos_ops {

// The forward's own checks, then the contract's (training_op_checks.hpp).
inline void check_attention_backward_args(AttentionBackwardArgs const& g) {
  attention_problem(g.forward);
  require_attention_backward_args(g);
}

// What the backward kernels read and write, as plain device-copyable values.
struct BackwardProblem {
  AttentionProblem p;                       // the forward's operands; p.out is its output O
  Strided<float const> dout;                // (T, A)
  Strided<float> dq, dk, dv;                // (T, *) head h at h * head_stride
  Strided<float const> pos_key, pos_query;  // (2k, A), head h at h * d
  float const* c2p_all = nullptr;           // (T, heads, 2k) q . Kr^T, the forward's unscaled products
  float const* p2c_all = nullptr;           // (T, heads, 2k) k . Qr^T
  float* band_c2p = nullptr;                // (T, heads, 2k) Gc2p / scale, row of query t
  float* band_p2c = nullptr;                // (T, heads, 2k) Gp2c / scale, row of key t
  std::int64_t tokens = 0;

  KOKKOS_INLINE_FUNCTION std::int64_t band_row(std::int64_t t, std::int64_t h) const {
    return (t * p.heads + h) * p.span2;
  }

  // D_t of head h: dO_t . O_t summed in float64 and rounded once (the row's dS sums to zero only as far as D
  // matches sum_j P_tj dP_tj).
  KOKKOS_INLINE_FUNCTION float row_dot(std::int64_t t, std::int64_t h) const {
    double sum = 0.0;
    for (std::int64_t e = 0; e < p.d; ++e)
      sum += static_cast<double>(dout(t, h * p.d + e)) * static_cast<double>(p.out(t, h * p.d + e));
    return static_cast<float>(sum);
  }

  // sum_r band[t, h, r] table[r, h * d + e]: a row's band gradient through its head's relative table.
  KOKKOS_INLINE_FUNCTION float band_product(float const* band, Strided<float const> const& table, std::int64_t t,
                                            std::int64_t h, std::int64_t e) const {
    float const* row = band + band_row(t, h);
    float sum = 0.0f;
    for (std::int64_t r = 0; r < p.span2; ++r) sum += row[r] * table(r, h * p.d + e);
    return sum;
  }
};

// The device buffers behind a BackwardProblem. The bands start at zero: a token outside every sequence adds
// nothing to the tables.
template <class ExecSpace>
struct BackwardBuffers {
  using DeviceFloats = Kokkos::View<float*, typename ExecSpace::memory_space>;
  DeviceFloats c2p_all, p2c_all, band_c2p, band_p2c;
};

template <class ExecSpace>
BackwardProblem backward_problem(ExecSpace const& space, AttentionBackwardArgs const& g,
                                 BackwardBuffers<ExecSpace>& buffers) {
  using DeviceFloats = typename BackwardBuffers<ExecSpace>::DeviceFloats;
  BackwardProblem t;
  t.p = attention_problem(g.forward);
  t.dout = cstrided(g.dout, "attention_backward dout");
  t.dq = strided(g.dq, "attention_backward dq");
  t.dk = strided(g.dk, "attention_backward dk");
  t.dv = strided(g.dv, "attention_backward dv");
  t.tokens = g.forward.sequences.total_tokens;
  auto const band_size = static_cast<std::size_t>(t.tokens * t.p.heads * t.p.span2);
  if (t.p.c2p) {
    t.pos_key = cstrided(g.forward.pos_key, "relative key table");
    buffers.c2p_all = project_relative(space, t.p, t.p.q, g.forward.pos_key);
    buffers.band_c2p = DeviceFloats("flashdeberta::attention_backward_band_c2p", band_size);
    t.c2p_all = buffers.c2p_all.data();
    t.band_c2p = buffers.band_c2p.data();
  }
  if (t.p.p2c) {
    t.pos_query = cstrided(g.forward.pos_query, "relative query table");
    buffers.p2c_all = project_relative(space, t.p, t.p.k, g.forward.pos_query);
    buffers.band_p2c = DeviceFloats("flashdeberta::attention_backward_band_p2c", band_size);
    t.p2c_all = buffers.p2c_all.data();
    t.band_p2c = buffers.band_p2c.data();
  }
  return t;
}

// dKr[r, h d + e] += sum_t Gc2p[t, h, r] q[t, h stride + e] / scale and dQr alike with Gp2c and k: per head a
// (2k, T) . (T, d) GEMM whose sums run over the tokens in order.
template <class ExecSpace>
void add_table_gradients(ExecSpace const& space, BackwardProblem const& t, AttentionBackwardArgs const& g) {
  GemmShape const shape{t.p.heads, t.p.span2, t.p.d, t.tokens};
  std::int64_t const heads = t.p.heads;
  std::int64_t const span2 = t.p.span2;
  std::int64_t const d = t.p.d;
  std::int64_t const stride = t.p.head_stride;
  auto const add = [&](char const* label, float const* band, Strided<float const> const& x, MatrixRef const& table) {
    Strided<float> const grad = strided(table, label);
    batched_gemm(
        space, label, shape,
        KOKKOS_LAMBDA(std::int64_t h, std::int64_t r, std::int64_t tok) { return band[(tok * heads + h) * span2 + r]; },
        KOKKOS_LAMBDA(std::int64_t h, std::int64_t tok, std::int64_t e) { return x(tok, h * stride + e); },
        KOKKOS_LAMBDA(std::int64_t h, std::int64_t r, std::int64_t e, float sum) { grad(r, h * d + e) += sum; });
  };
  if (t.p.c2p) add("flashdeberta::attention_backward_dpos_key", t.band_c2p, t.p.q, g.dpos_key);
  if (t.p.p2c) add("flashdeberta::attention_backward_dpos_query", t.band_p2c, t.p.k, g.dpos_query);
}

}  // namespace flashdeberta::kokkos_ops

// Checks and per-head views shared by the eager and flash host attention backward (training_op_args.hpp).
//
// With s = 1 / scale and the gradients of one head (docs: training-notes, "The backward of the disentangled
// attention"; both position terms of a pair read slot delta(i, j), as the forward does):
//   D_i = dO_i . O_i,   dP = dO V^T,   dS = P * (dP - D),   dV = P^T dO
//   Gc2p[i, r] = sum of dS[i, j] over the keys j with delta(i, j) = r       (L, 2k), only with c2p
//   Gp2c[j, r] = sum of dS[i, j] over the queries i with delta(i, j) = r     (L, 2k), only with p2c
//   dQ = s (dS K + Gc2p Kr),   dK = s (dS^T Q + Gp2c Qr),   dKr += s Gc2p^T Q,   dQr += s Gp2c^T K
// With dropout on the probabilities (AttentionArgs::dropout; FlashAttention 2's backward), M = m / (1 - p) the
// forward's mask (ProbsDropout, redrawn) and O the dropped output the forward wrote:
//   dV = (P * M)^T dO,   dP = (dO V^T) * M,   D_i = dO_i . O_i,   dS = P * (dP - D)   (P undropped, from lse)
#pragma once

#include <cstdint>

#include "flashdeberta/eigen/ops/attention_common.hpp"
#include "flashdeberta/policy/training_op_args.hpp"
#include "flashdeberta/policy/training_op_checks.hpp"

namespace flashdeberta::eigen_ops {

struct HeadGradients {
  ConstMatrixMap dout;  // (L, d)
  MatrixMap dq;         // (L, d)
  MatrixMap dk;         // (L, d)
  MatrixMap dv;         // (L, d)
};

// dout, out and the tables at h * head_size; dq, dk, dv at the forward's h * head_stride.
inline HeadGradients head_gradients(AttentionBackwardArgs const& g, std::int64_t first_token, std::int64_t length,
                                    std::int64_t head) {
  std::int64_t const d = g.forward.head_size;
  std::int64_t const col = head * g.forward.head_stride;
  return {cmap(g.dout.as<float>() + first_token * g.dout.ld + head * d, length, d, g.dout.ld),
          map(g.dq.as<float>() + first_token * g.dq.ld + col, length, d, g.dq.ld),
          map(g.dk.as<float>() + first_token * g.dk.ld + col, length, d, g.dk.ld),
          map(g.dv.as<float>() + first_token * g.dv.ld + col, length, d, g.dv.ld)};
}

// (rows, d) columns of a relative table's gradient belonging to one head.
inline MatrixMap relative_head_gradient(MatrixRef const& table, std::int64_t head, std::int64_t d) {
  return map(table.as<float>() + head * d, table.rows, d, table.ld);
}

// D_i = dO_i . O_i, summed in float64: it is subtracted from every dP_ij of the row, and the row's dS sums to
// zero only as far as D matches sum_j P_ij dP_ij.
inline float output_dot(ConstMatrixMap const& dout, ConstMatrixMap const& out, std::int64_t row) {
  double sum = 0.0;
  for (std::int64_t e = 0; e < dout.cols(); ++e) sum += double{dout(row, e)} * double{out(row, e)};
  return static_cast<float>(sum);
}

// The forward's own checks, then the contract's (training_op_checks.hpp).
inline void check_attention_backward_args(AttentionBackwardArgs const& g) {
  check_attention_args(g.forward);
  require_attention_backward_args(g);
}

}  // namespace flashdeberta::eigen_ops

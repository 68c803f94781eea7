// The checks of the training ops' arguments every backend shares (training_op_args.hpp): what the contract says
// of dtypes and shapes, refused with the names and sizes, before a backend looks at its own limits.
#pragma once

#include <cstdint>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/policy/training_op_args.hpp"

namespace flashdeberta {

inline void require_training_f32(MatrixRef const& m, char const* what) {
  FLASHDEBERTA_REQUIRE(m.dtype == DType::kF32,
                       what << " is " << dtype_name(m.dtype) << "; the training ops compute in float32 only");
}

// `name` of `op` is a float32 matrix of (rows, cols): what every training op checks of its operands.
inline void require_training_matrix(char const* op, char const* name, MatrixRef const& m, std::int64_t rows,
                                    std::int64_t cols) {
  FLASHDEBERTA_REQUIRE(!m.empty(), op << ": " << name << " is missing, expected (" << rows << ", " << cols << ")");
  FLASHDEBERTA_REQUIRE(m.dtype == DType::kF32, op << ": " << name << " is " << dtype_name(m.dtype)
                                                  << "; the training ops compute in float32 only");
  FLASHDEBERTA_REQUIRE(m.rows == rows && m.cols == cols && m.ld >= cols,
                       op << ": " << name << " is (" << m.rows << ", " << m.cols << ") with row stride " << m.ld
                          << ", expected (" << rows << ", " << cols << ")");
}

// LayerNormBackwardArgs: x, dy, dx (and residual where given) all (rows, cols) of x, gamma given.
inline void require_layer_norm_backward_args(LayerNormBackwardArgs const& n) {
  char const* op = "layer_norm_backward";
  std::int64_t const rows = n.x.rows;
  std::int64_t const cols = n.x.cols;
  require_training_matrix(op, "x", n.x, rows, cols);
  require_training_matrix(op, "dy", n.dy, rows, cols);
  require_training_matrix(op, "dx", n.dx, rows, cols);
  if (!n.residual.empty()) require_training_matrix(op, "residual", n.residual, rows, cols);
  FLASHDEBERTA_REQUIRE(n.gamma != nullptr, op << ": gamma is missing");
}

// DropoutArgs: x and out of one shape, 0 <= p < 1.
inline void require_dropout_args(DropoutArgs const& d) {
  require_training_matrix("dropout", "x", d.x, d.x.rows, d.x.cols);
  require_training_matrix("dropout", "out", d.out, d.x.rows, d.x.cols);
  FLASHDEBERTA_REQUIRE(d.probability >= 0.0f && d.probability < 1.0f,
                       "dropout: probability " << d.probability << " is outside [0, 1)");
}

// AdamWArgs: a count, a step from 1, betas in [0, 1), the four arrays given.
inline void require_adamw_args(AdamWArgs const& a) {
  FLASHDEBERTA_REQUIRE(a.count >= 0, "adamw: count " << a.count << " is negative");
  FLASHDEBERTA_REQUIRE(a.step >= 1, "adamw: step " << a.step << " counts from 1");
  FLASHDEBERTA_REQUIRE(a.beta1 >= 0.0 && a.beta1 < 1.0 && a.beta2 >= 0.0 && a.beta2 < 1.0,
                       "adamw: betas (" << a.beta1 << ", " << a.beta2 << ") are outside [0, 1)");
  FLASHDEBERTA_REQUIRE(
      a.count == 0 || (a.weights != nullptr && a.grads != nullptr && a.exp_avg != nullptr && a.exp_avg_sq != nullptr),
      "adamw: weights, grads, exp_avg and exp_avg_sq must all be given for " << a.count << " values");
}

// LinearBackwardArgs: dy (M, N) and w (N, K); x and dw with dw, dx with dx.
inline void require_linear_backward_args(LinearBackwardArgs const& l) {
  char const* op = "linear_backward";
  std::int64_t const rows = l.dy.rows;     // M
  std::int64_t const outputs = l.dy.cols;  // N
  std::int64_t const inputs = l.w.cols;    // K
  require_training_matrix(op, "dy", l.dy, rows, outputs);
  require_training_matrix(op, "w", l.w, outputs, inputs);
  if (!l.dw.empty()) {
    require_training_matrix(op, "x", l.x, rows, inputs);
    require_training_matrix(op, "dw", l.dw, outputs, inputs);
  }
  if (!l.dx.empty()) require_training_matrix(op, "dx", l.dx, rows, inputs);
}

// Conv1dBackwardArgs but their sequence layout, which each backend reads where it lies: dpre and x (T, C), dx with
// dx, groups that split C, a kernel and a weight.
inline void require_conv1d_backward_args(Conv1dBackwardArgs const& c) {
  char const* op = "conv1d_backward";
  std::int64_t const tokens = c.dpre.rows;
  std::int64_t const channels = c.dpre.cols;
  require_training_matrix(op, "dpre", c.dpre, tokens, channels);
  require_training_matrix(op, "x", c.x, tokens, channels);
  if (!c.dx.empty()) require_training_matrix(op, "dx", c.dx, tokens, channels);
  FLASHDEBERTA_REQUIRE(c.groups >= 1 && channels % c.groups == 0,
                       op << ": " << channels << " channels do not split into " << c.groups << " groups");
  FLASHDEBERTA_REQUIRE(c.kernel_size >= 1, op << ": kernel size " << c.kernel_size);
  FLASHDEBERTA_REQUIRE(c.weight != nullptr, op << ": weight is missing");
}

// AttentionBackwardArgs beyond the forward's own checks (each backend runs those on g.forward first): the output and
// dout cover (T, heads x d), dq, dk and dv the forward's q, k, v columns, and a table's gradient is given exactly
// when the forward has the table, with its rows.
inline void require_attention_backward_args(AttentionBackwardArgs const& g) {
  AttentionArgs const& a = g.forward;
  FLASHDEBERTA_REQUIRE(a.impl == AttentionImpl::kEager || a.impl == AttentionImpl::kFlash,
                       "attention_backward: unknown attention implementation " << static_cast<int>(a.impl));
  FLASHDEBERTA_REQUIRE(
      a.num_heads > 0 && a.head_size > 0 && a.head_stride >= a.head_size,
      "attention_backward: " << a.num_heads << " heads of size " << a.head_size << ", head stride " << a.head_stride);
  require_training_f32(g.dout, "attention_backward dout");
  require_training_f32(g.dq, "attention_backward dq");
  require_training_f32(g.dk, "attention_backward dk");
  require_training_f32(g.dv, "attention_backward dv");
  std::int64_t const tokens = a.sequences.total_tokens;
  std::int64_t const width = a.num_heads * a.head_size;                       // columns of out, dout, tables
  std::int64_t const span = (a.num_heads - 1) * a.head_stride + a.head_size;  // columns of q, k, v, dq, dk, dv
  auto const covers = [&](MatrixRef const& m, std::int64_t cols) {
    return !m.empty() && m.rows >= tokens && m.cols >= cols;
  };
  FLASHDEBERTA_REQUIRE(covers(a.out, width) && covers(g.dout, width),
                       "attention_backward needs the forward's output and dout of ("
                           << tokens << ", " << width << "): out (" << a.out.rows << ", " << a.out.cols << "), dout ("
                           << g.dout.rows << ", " << g.dout.cols << ")");
  FLASHDEBERTA_REQUIRE(covers(g.dq, span) && covers(g.dk, span) && covers(g.dv, span),
                       "attention_backward: dq, dk, dv must cover ("
                           << tokens << ", " << span << "): dq (" << g.dq.rows << ", " << g.dq.cols << "), dk ("
                           << g.dk.rows << ", " << g.dk.cols << "), dv (" << g.dv.rows << ", " << g.dv.cols << ")");
  auto const check_table = [&](MatrixRef const& table, MatrixRef const& grad, char const* name) {
    FLASHDEBERTA_REQUIRE(table.empty() == grad.empty(), "attention_backward: d" << name
                                                                                << " must be given exactly when "
                                                                                << "the forward has " << name);
    if (grad.empty()) return;
    require_training_f32(table, name);
    require_training_f32(grad, name);
    FLASHDEBERTA_REQUIRE(grad.rows == table.rows && grad.cols >= width && table.cols >= width,
                         "attention_backward: d" << name << " (" << grad.rows << ", " << grad.cols << ") for " << name
                                                 << " (" << table.rows << ", " << table.cols << "), " << width
                                                 << " columns used");
  };
  check_table(a.pos_key, g.dpos_key, "pos_key");
  check_table(a.pos_query, g.dpos_query, "pos_query");
}

}  // namespace flashdeberta

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

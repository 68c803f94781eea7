// Eigen/OpenMP implementations of the training ops of training_op_args.hpp other than attention's backward
// (attention_backward.hpp): the linear, LayerNorm and embedding backwards here, conv1d's in
// training_conv_ops.hpp, the elementwise ops and reductions in training_elementwise_ops.hpp. Float32 only.
//
// Every reduction over rows (parameter gradients) adds its parts in an order that depends on the shapes only,
// never on the thread count or the threads' timing, so a step's gradients are bit-identical run to run.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <Eigen/Core>

#include "flashdeberta/eigen/ops/eigen_maps.hpp"
#include "flashdeberta/eigen/ops/op_threads.hpp"
#include "flashdeberta/eigen/ops/training_conv_ops.hpp"
#include "flashdeberta/eigen/ops/training_elementwise_ops.hpp"
#include "flashdeberta/policy/training_op_args.hpp"
#include "flashdeberta/policy/training_op_checks.hpp"

#if defined(FLASHDEBERTA_EIGEN_WITH_ONEDNN)
#include "flashdeberta/onednn/sgemm.hpp"
#endif

namespace flashdeberta::eigen_ops {

// dx = dy . w and dw += dy^T . x as oneDNN's sgemm where `on_onednn` (EigenOptions::f32_linear: float32 linear
// layers on oneDNN, the default in a build with it), else Eigen GEMMs (threads: the OpenMP count the policy set,
// as the forward's); db summed in float64 and rounded once (add_column_sums), however many rows.
inline void linear_backward(LinearBackwardArgs const& l, int threads, [[maybe_unused]] bool on_onednn) {
  char const* op = "linear_backward";
  std::int64_t const rows = l.dy.rows;     // M
  std::int64_t const outputs = l.dy.cols;  // N
  std::int64_t const inputs = l.w.cols;    // K
  FLASHDEBERTA_REQUIRE(
      l.w.rows == outputs && (l.dx.empty() || (l.dx.rows == rows && l.dx.cols == inputs)) &&
          (l.dw.empty() || (l.x.rows == rows && l.x.cols == inputs && l.dw.rows == outputs && l.dw.cols == inputs)),
      op << " shapes do not agree: x " << shape_text(l.x) << ", w " << shape_text(l.w) << ", dy " << shape_text(l.dy)
         << ", dx " << shape_text(l.dx) << ", dw " << shape_text(l.dw));
  require_training_matrix(op, "dy", l.dy, rows, outputs);
  require_training_matrix(op, "w", l.w, outputs, inputs);
  if (!l.dw.empty()) {
    require_training_matrix(op, "x", l.x, rows, inputs);
    require_training_matrix(op, "dw", l.dw, outputs, inputs);
  }
  if (!l.dx.empty()) {
    require_training_matrix(op, "dx", l.dx, rows, inputs);
#if defined(FLASHDEBERTA_EIGEN_WITH_ONEDNN)
    if (on_onednn) {
      onednn::sgemm({l.dy}, {l.w}, l.dx, 1.0f, l.accumulate_dx ? 1.0f : 0.0f);
    } else
#endif
    {
      auto dx = map(l.dx);
      if (l.accumulate_dx) {
        dx.noalias() += cmap(l.dy) * cmap(l.w);
      } else {
        dx.noalias() = cmap(l.dy) * cmap(l.w);
      }
    }
  }
  if (!l.dw.empty()) {
#if defined(FLASHDEBERTA_EIGEN_WITH_ONEDNN)
    if (on_onednn) {
      onednn::sgemm({l.dy, true}, {l.x}, l.dw, 1.0f, 1.0f);
    } else
#endif
    {
      map(l.dw).noalias() += cmap(l.dy).transpose() * cmap(l.x);
    }
  }
  if (l.db != nullptr) add_column_sums(l.dy, l.db, threads);
}

// Rows of one block of layer_norm_backward: the blocks' dgamma and dbeta partial sums are added in block order.
// At least 32 rows a block (a partial sum is 2 N doubles) and at most 256 blocks, whatever the thread count.
inline std::int64_t layer_norm_backward_block_rows(std::int64_t rows) {
  return std::max<std::int64_t>(32, (rows + 255) / 256);
}

// Each row's statistics again from x (+ residual), the sum formed in float32 as the forward forms it, then the
// forward's two-pass formulas (mean, then centred squares, eps inside the square root) in float64, where the
// forward reduces in float32 (within about 1e-7 relative of these: dense_ops' layer_norm). Per row, with
// g = dy * gamma and x_hat = (s - mean) / sigma:
//   dx = (1 / sigma) (g - mean(g) - x_hat mean(g x_hat)),   dgamma += sum dy x_hat,   dbeta += sum dy
// in float64 throughout. A row is read whole before its dx is written, so dx may alias dy or x.
inline void layer_norm_backward(LayerNormBackwardArgs const& n, int threads) {
  require_layer_norm_backward_args(n);
  std::int64_t const rows = n.x.rows;
  std::int64_t const cols = n.x.cols;
  bool const has_residual = !n.residual.empty();
  bool const has_parameter_grads = n.dgamma != nullptr || n.dbeta != nullptr;

  std::int64_t const block_rows = layer_norm_backward_block_rows(rows);
  std::int64_t const blocks = (rows + block_rows - 1) / block_rows;
  // (blocks, 2, N): each block's sum of dy x_hat, then its sum of dy.
  std::vector<double> partial(has_parameter_grads ? static_cast<std::size_t>(blocks * 2 * cols) : 0, 0.0);
  Eigen::ArrayXd const gamma = Eigen::Map<Eigen::ArrayXf const>(n.gamma, cols).cast<double>();
  double const eps = n.eps;
  OpThreads const team = threads_for(static_cast<double>(rows * cols), kMinElementsPerThread, threads, blocks);
  for_each_index(team, blocks, [&](std::int64_t block) {
    Eigen::ArrayXd x_hat(cols);  // (N) s, then (s - mean) / sigma
    Eigen::ArrayXd dy(cols);     // (N)
    Eigen::ArrayXd g(cols);      // (N) dy * gamma
    for (std::int64_t r = block * block_rows; r < std::min(rows, (block + 1) * block_rows); ++r) {
      Eigen::Map<Eigen::ArrayXf const> const x(n.x.as<float>() + r * n.x.ld, cols);
      if (has_residual) {
        x_hat = (x + Eigen::Map<Eigen::ArrayXf const>(n.residual.as<float>() + r * n.residual.ld, cols)).cast<double>();
      } else {
        x_hat = x.cast<double>();
      }
      double const mean = x_hat.sum() / static_cast<double>(cols);
      x_hat -= mean;
      double const variance = x_hat.square().sum() / static_cast<double>(cols);
      double const inv_std = 1.0 / std::sqrt(variance + eps);
      x_hat *= inv_std;
      dy = Eigen::Map<Eigen::ArrayXf const>(n.dy.as<float>() + r * n.dy.ld, cols).cast<double>();
      g = dy * gamma;
      double const mean_g = g.sum() / static_cast<double>(cols);
      double const mean_g_x_hat = (g * x_hat).sum() / static_cast<double>(cols);
      Eigen::Map<Eigen::ArrayXf> dx(n.dx.as<float>() + r * n.dx.ld, cols);
      if (n.accumulate_dx) {
        dx = (dx.cast<double>() + inv_std * (g - mean_g - x_hat * mean_g_x_hat)).cast<float>();
      } else {
        dx = (inv_std * (g - mean_g - x_hat * mean_g_x_hat)).cast<float>();
      }
      if (has_parameter_grads) {
        Eigen::Map<Eigen::ArrayXd> dgamma_part(partial.data() + block * 2 * cols, cols);
        Eigen::Map<Eigen::ArrayXd> dbeta_part(partial.data() + (block * 2 + 1) * cols, cols);
        dgamma_part += dy * x_hat;
        dbeta_part += dy;
      }
    }
  });
  if (!has_parameter_grads) return;
  // Columns split across threads; each column adds its blocks in order onto its previous value, rounded once.
  OpThreads const combine =
      threads_for(static_cast<double>(blocks * cols), kMinElementsPerThread, threads, (cols + 15) / 16);
  for_each_index(combine, cols, [&](std::int64_t c) {
    double dgamma = n.dgamma != nullptr ? n.dgamma[c] : 0.0;
    double dbeta = n.dbeta != nullptr ? n.dbeta[c] : 0.0;
    for (std::int64_t block = 0; block < blocks; ++block) {
      dgamma += partial[static_cast<std::size_t>(block * 2 * cols + c)];
      dbeta += partial[static_cast<std::size_t>((block * 2 + 1) * cols + c)];
    }
    if (n.dgamma != nullptr) n.dgamma[c] = static_cast<float>(dgamma);
    if (n.dbeta != nullptr) n.dbeta[c] = static_cast<float>(dbeta);
  });
}

// Scatter-add with each thread owning whole columns of every table (16 at a time, a cache line): a table row
// that many tokens share (a frequent word, position 0) has one writer per column, which adds the tokens in
// order, in float32 as PyTorch's embedding backward does. No atomics; the same sums for any thread count.
inline void embedding_backward(EmbeddingBackwardArgs const& e, int threads) {
  char const* op = "embedding_backward";
  std::int64_t const tokens = e.dout.rows;
  std::int64_t const width = e.dout.cols;
  require_training_matrix(op, "dout", e.dout, tokens, width);
  struct Table {
    char const* name;
    MatrixRef const& grad;
    std::int32_t const* index;
  };
  Table const tables[] = {{"dword", e.dword, e.ids},
                          {"dposition", e.dposition, e.positions},
                          {"dtoken_type", e.dtoken_type, e.token_types}};
  for (Table const& table : tables) {
    if (table.grad.empty()) continue;
    require_training_matrix(op, table.name, table.grad, table.grad.rows, width);
    FLASHDEBERTA_REQUIRE(tokens == 0 || table.index != nullptr, op << ": " << table.name << " has no indices");
    for (std::int64_t t = 0; t < tokens; ++t) {
      FLASHDEBERTA_REQUIRE(table.index[t] >= 0 && table.index[t] < table.grad.rows,
                           op << ": token " << t << " indexes row " << table.index[t] << " of " << table.name
                              << ", which has " << table.grad.rows << " rows");
    }
  }
  constexpr std::int64_t kColumnsPerTask = 16;
  std::int64_t const tasks = (width + kColumnsPerTask - 1) / kColumnsPerTask;
  OpThreads const team = threads_for(static_cast<double>(tokens * width), kMinElementsPerThread, threads, tasks);
  run_workers(team, [&](int worker, int workers) {
    std::int64_t const c0 = tasks * worker / workers * kColumnsPerTask;
    std::int64_t const c1 = std::min(width, tasks * (worker + 1) / workers * kColumnsPerTask);
    if (c1 <= c0) return;
    for (std::int64_t t = 0; t < tokens; ++t) {
      Eigen::Map<Eigen::ArrayXf const> const dout(e.dout.as<float>() + t * e.dout.ld + c0, c1 - c0);
      for (Table const& table : tables) {
        if (table.grad.empty()) continue;
        float* row = table.grad.as<float>() + static_cast<std::int64_t>(table.index[t]) * table.grad.ld + c0;
        Eigen::Map<Eigen::ArrayXf>(row, c1 - c0) += dout;
      }
    }
  });
}

}  // namespace flashdeberta::eigen_ops

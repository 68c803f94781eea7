// Kokkos kernels of the training ops of training_op_args.hpp other than attention's backward
// (attention_backward.hpp): the linear, LayerNorm and embedding backwards here, conv1d's in training_conv_ops.hpp,
// the elementwise ops and reductions in training_elementwise_ops.hpp. Float32 storage, eigen_ops' formulas.
//
// No atomics: every output element has one writer, which adds its terms in an order fixed by the shapes (GEMM
// sums along K in training_gemm.hpp's order, column sums over the rows in order, the scatter-add over the tokens
// in order). A step's gradients are the same bits run to run, whatever the team sizes Kokkos picks.
#pragma once

#include <cstdint>

#include "flashdeberta/kokkos/ops/training_conv_ops.hpp"
#include "flashdeberta/kokkos/ops/training_elementwise_ops.hpp"
#include "flashdeberta/kokkos/ops/training_gemm.hpp"
#include "flashdeberta/policy/training_op_args.hpp"
#include "flashdeberta/policy/training_op_checks.hpp"

namespace flashdeberta::kokkos_ops {

// dx (M, K) = dy (M, N) . w (N, K) and dw (N, K) += dy^T . x (M, K) as batched_gemm's, db += column sums of dy in
// float64 (add_column_sums). dx is written before dw is formed, as eigen_ops does.
template <class ExecSpace>
void linear_backward(ExecSpace const& space, LinearBackwardArgs const& l) {
  require_linear_backward_args(l);
  std::int64_t const rows = l.dy.rows;     // M
  std::int64_t const outputs = l.dy.cols;  // N
  std::int64_t const inputs = l.w.cols;    // K
  Strided<float const> const dy = cstrided(l.dy, "linear_backward dy");
  if (!l.dx.empty()) {
    Strided<float const> const w = cstrided(l.w, "linear_backward w");
    Strided<float> const dx = strided(l.dx, "linear_backward dx");
    bool const accumulate = l.accumulate_dx;
    batched_gemm(
        space, "flashdeberta::linear_backward_dx", GemmShape{1, rows, inputs, outputs},
        KOKKOS_LAMBDA(std::int64_t, std::int64_t i, std::int64_t n) { return dy(i, n); },
        KOKKOS_LAMBDA(std::int64_t, std::int64_t n, std::int64_t j) { return w(n, j); },
        KOKKOS_LAMBDA(std::int64_t, std::int64_t i, std::int64_t j, float sum) {
          dx(i, j) = accumulate ? dx(i, j) + sum : sum;
        });
  }
  if (!l.dw.empty()) {
    Strided<float const> const x = cstrided(l.x, "linear_backward x");
    Strided<float> const dw = strided(l.dw, "linear_backward dw");
    batched_gemm(
        space, "flashdeberta::linear_backward_dw", GemmShape{1, outputs, inputs, rows},
        KOKKOS_LAMBDA(std::int64_t, std::int64_t n, std::int64_t r) { return dy(r, n); },
        KOKKOS_LAMBDA(std::int64_t, std::int64_t r, std::int64_t j) { return x(r, j); },
        KOKKOS_LAMBDA(std::int64_t, std::int64_t n, std::int64_t j, float sum) { dw(n, j) += sum; });
  }
  if (l.db != nullptr) add_column_sums(space, dy, l.db);
}

// Three kernels, so that dx may alias dy or x: the row statistics (one work item per row), the parameter gradients
// (one per column, over the rows in order), then dx (one per element, reading its x and dy before writing). Each
// row's statistics again from x (+ residual), the sum formed in float32 as the forward forms it, in float64 from
// there on; with g = dy * gamma and x_hat = (s - mean) / sigma:
//   dx = (1 / sigma) (g - mean(g) - x_hat mean(g x_hat)),   dgamma += sum dy x_hat,   dbeta += sum dy
template <class ExecSpace>
void layer_norm_backward(ExecSpace const& space, LayerNormBackwardArgs const& n) {
  require_layer_norm_backward_args(n);
  std::int64_t const rows = n.x.rows;
  std::int64_t const cols = n.x.cols;
  bool const has_residual = !n.residual.empty();
  if (rows == 0 || cols == 0) return;
  Strided<float const> const x = cstrided(n.x, "layer_norm_backward x");
  Strided<float const> const residual = has_residual ? cstrided(n.residual, "layer_norm_backward residual") : x;
  Strided<float const> const dy = cstrided(n.dy, "layer_norm_backward dy");
  Strided<float> const dx = strided(n.dx, "layer_norm_backward dx");
  float const* gamma = n.gamma;  // (N)
  double const eps = n.eps;
  double const inv_cols = 1.0 / static_cast<double>(cols);
  auto const sum_at = KOKKOS_LAMBDA(std::int64_t r, std::int64_t c) {
    return static_cast<double>(has_residual ? x(r, c) + residual(r, c) : x(r, c));
  };

  // (M, 4): mean, 1 / sigma, mean(g), mean(g x_hat) of each row.
  Kokkos::View<double*, typename ExecSpace::memory_space> stats_view(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, "flashdeberta::layer_norm_backward_stats"),
      static_cast<std::size_t>(rows * 4));
  double* stats = stats_view.data();
  Kokkos::parallel_for(
      "flashdeberta::layer_norm_backward_stats", Kokkos::RangePolicy<ExecSpace>(space, 0, rows),
      KOKKOS_LAMBDA(std::int64_t r) {
        double sum = 0.0;
        for (std::int64_t c = 0; c < cols; ++c) sum += sum_at(r, c);
        double const mean = sum * inv_cols;
        double squares = 0.0;
        for (std::int64_t c = 0; c < cols; ++c) squares += (sum_at(r, c) - mean) * (sum_at(r, c) - mean);
        double const inv_std = 1.0 / math::sqrt(squares * inv_cols + eps);
        double g_sum = 0.0;
        double g_x_hat_sum = 0.0;
        for (std::int64_t c = 0; c < cols; ++c) {
          double const g = static_cast<double>(dy(r, c)) * static_cast<double>(gamma[c]);
          g_sum += g;
          g_x_hat_sum += g * ((sum_at(r, c) - mean) * inv_std);
        }
        stats[r * 4] = mean;
        stats[r * 4 + 1] = inv_std;
        stats[r * 4 + 2] = g_sum * inv_cols;
        stats[r * 4 + 3] = g_x_hat_sum * inv_cols;
      });
  float* dgamma = n.dgamma;
  float* dbeta = n.dbeta;
  if (dgamma != nullptr || dbeta != nullptr) {
    Kokkos::parallel_for(
        "flashdeberta::layer_norm_backward_parameters", Kokkos::RangePolicy<ExecSpace>(space, 0, cols),
        KOKKOS_LAMBDA(std::int64_t c) {
          double dgamma_sum = dgamma != nullptr ? dgamma[c] : 0.0;
          double dbeta_sum = dbeta != nullptr ? dbeta[c] : 0.0;
          for (std::int64_t r = 0; r < rows; ++r) {
            double const g = dy(r, c);
            dgamma_sum += g * ((sum_at(r, c) - stats[r * 4]) * stats[r * 4 + 1]);
            dbeta_sum += g;
          }
          if (dgamma != nullptr) dgamma[c] = static_cast<float>(dgamma_sum);
          if (dbeta != nullptr) dbeta[c] = static_cast<float>(dbeta_sum);
        });
  }
  bool const accumulate = n.accumulate_dx;
  Kokkos::parallel_for(
      "flashdeberta::layer_norm_backward_dx", Kokkos::RangePolicy<ExecSpace>(space, 0, rows * cols),
      KOKKOS_LAMBDA(std::int64_t idx) {
        std::int64_t const r = idx / cols;
        std::int64_t const c = idx % cols;
        double const* s = stats + r * 4;
        double const x_hat = (sum_at(r, c) - s[0]) * s[1];
        double const g = static_cast<double>(dy(r, c)) * static_cast<double>(gamma[c]);
        double const grad = s[1] * (g - s[2] - x_hat * s[3]);
        dx(r, c) = static_cast<float>(accumulate ? static_cast<double>(dx(r, c)) + grad : grad);
      });
}

// The first token whose index lies outside [0, rows), or `tokens` when none does.
template <class ExecSpace>
std::int64_t first_index_out_of_range(ExecSpace const& space, std::int32_t const* index, std::int64_t tokens,
                                      std::int64_t rows) {
  std::int64_t first = tokens;
  Kokkos::parallel_reduce(
      "flashdeberta::check_indices", Kokkos::RangePolicy<ExecSpace>(space, 0, tokens),
      KOKKOS_LAMBDA(std::int64_t t, std::int64_t & lowest) {
        if ((index[t] < 0 || index[t] >= rows) && t < lowest) lowest = t;
      },
      Kokkos::Min<std::int64_t>(first));
  return first < tokens ? first : tokens;
}

// One work item per (table, column) adds the tokens' rows in token order, in float32 as PyTorch's embedding
// backward does: a table row that many tokens share (a frequent word, position 0) has one writer per column.
template <class ExecSpace>
void embedding_backward(ExecSpace const& space, EmbeddingBackwardArgs const& e) {
  char const* op = "embedding_backward";
  std::int64_t const tokens = e.dout.rows;
  std::int64_t const width = e.dout.cols;
  require_training_matrix(op, "dout", e.dout, tokens, width);
  struct Tables {
    Strided<float> grad[3];
    std::int32_t const* index[3];
    int count = 0;
  } tables;
  char const* const names[] = {"dword", "dposition", "dtoken_type"};
  MatrixRef const* grads[] = {&e.dword, &e.dposition, &e.dtoken_type};
  std::int32_t const* indices[] = {e.ids, e.positions, e.token_types};
  for (int i = 0; i < 3; ++i) {
    MatrixRef const& grad = *grads[i];
    if (grad.empty()) continue;
    require_training_matrix(op, names[i], grad, grad.rows, width);
    FLASHDEBERTA_REQUIRE(tokens == 0 || indices[i] != nullptr, op << ": " << names[i] << " has no indices");
    std::int64_t const bad = first_index_out_of_range(space, indices[i], tokens, grad.rows);
    FLASHDEBERTA_REQUIRE(bad == tokens, op << ": token " << bad << " indexes row "
                                           << (bad < tokens ? read_element(space, indices[i], bad) : 0) << " of "
                                           << names[i] << ", which has " << grad.rows << " rows");
    tables.grad[tables.count] = strided(grad, names[i]);
    tables.index[tables.count] = indices[i];
    ++tables.count;
  }
  Strided<float const> const dout = cstrided(e.dout, "embedding_backward dout");
  Kokkos::parallel_for(
      "flashdeberta::embedding_backward", Kokkos::RangePolicy<ExecSpace>(space, 0, tables.count * width),
      KOKKOS_LAMBDA(std::int64_t idx) {
        std::int64_t const table = idx / width;
        std::int64_t const c = idx % width;
        Strided<float> const grad = tables.grad[table];
        std::int32_t const* index = tables.index[table];
        for (std::int64_t t = 0; t < tokens; ++t) grad(index[t], c) += dout(t, c);
      });
}

}  // namespace flashdeberta::kokkos_ops

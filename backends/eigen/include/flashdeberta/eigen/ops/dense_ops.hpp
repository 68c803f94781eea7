// Eigen/OpenMP implementations of the dense operations: GEMM with epilogue, LayerNorm, embedding, conv1d, the
// LSTM cell.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

#include <unsupported/Eigen/SpecialFunctions>

#include "flashdeberta/core/float_convert.hpp"
#include "flashdeberta/eigen/ops/eigen_maps.hpp"
#include "flashdeberta/eigen/ops/op_threads.hpp"
#include "flashdeberta/eigen/ops/skinny_gemm.hpp"
#include "flashdeberta/math/activation.hpp"
#include "flashdeberta/policy/op_args.hpp"

#if defined(FLASHDEBERTA_EIGEN_WITH_ONEDNN)
#include "flashdeberta/onednn/matmul_primitive.hpp"
#include "flashdeberta/onednn/sgemm.hpp"
#endif

namespace flashdeberta::eigen_ops {

// Bias and activation in one pass over the output, rows split across threads. The activation is chosen
// once per row, not per element, so each row is one vectorized Eigen expression; GELU and tanh use
// Eigen's vectorized erf/tanh (rational approximations within a few ulp of libm's erff/tanhf). Measured on
// the T x 768 -> 3072 GEMM it follows (T = 512, one thread): 4% of the GEMM's time, against 47% for a
// per-element switch calling libm.
inline void activate_row(float* data, std::int64_t cols, Activation act) {
  Eigen::Map<Eigen::ArrayXf> row(data, cols);
  switch (act) {
    case Activation::kIdentity:
      break;
    case Activation::kGelu:  // exact erf form, PyTorch's default
      row = 0.5f * row * (1.0f + (row * 0.70710678118654752440f).erf());
      break;
    case Activation::kTanh:
      row = row.tanh();
      break;
    default:
      for (std::int64_t c = 0; c < cols; ++c) row[c] = apply_activation(act, row[c]);
  }
}

inline void apply_bias_activation(MatrixRef const& out, float const* bias, Activation act, int threads) {
  if (bias == nullptr && act == Activation::kIdentity) return;
  float* data = out.as<float>();
  std::int64_t const cols = out.cols;
  OpThreads const team = threads_for(static_cast<double>(out.rows * cols), kMinElementsPerThread, threads, out.rows);
  for_each_index(team, out.rows, [&](std::int64_t r) {
    float* row = data + r * out.ld;
    if (bias != nullptr) Eigen::Map<Eigen::ArrayXf>(row, cols) += Eigen::Map<Eigen::ArrayXf const>(bias, cols);
    activate_row(row, cols, act);
  });
}

// GemmArgs::accumulate_f64: b converted to float64 a block of rows at a time, by every thread on its own
// blocks, so that the conversion runs in parallel and each block stays in cache (converting a whole 128k-word
// embedding table would also write 0.8 GB); the block's products, alpha and bias in float64, one rounding.
inline void gemm_accumulate_f64(GemmArgs const& g, int threads) {
  constexpr std::int64_t kBlockRows = 128;  // 128 x 768 doubles: 0.8 MB
  using RowMajorXd = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;  // as the maps
  RowMajorXd const a = cmap(g.a).cast<double>();
  auto const* bias = static_cast<float const*>(g.bias);
  std::int64_t const blocks = (g.b.rows + kBlockRows - 1) / kBlockRows;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t block = 0; block < blocks; ++block) {
    std::int64_t const n0 = block * kBlockRows;
    std::int64_t const rows = std::min(kBlockRows, g.b.rows - n0);
    RowMajorXd const b = cmap(g.b).middleRows(n0, rows).cast<double>();
    RowMajorXd product = static_cast<double>(g.alpha) * (a * b.transpose());  // (M, rows)
    if (bias != nullptr)
      product.rowwise() += Eigen::Map<Eigen::VectorXf const>(bias + n0, rows).cast<double>().transpose();
    map(g.out).middleCols(n0, rows) = product.cast<float>();
  }
  apply_bias_activation(g.out, nullptr, g.activation, threads);
}

// out = act(alpha a . b^T + bias): the skinny kernel for few rows, else oneDNN where `on_onednn` (float32 linear
// layers on oneDNN, EigenOptions::f32_linear: a matmul primitive on b where it lies, sgemm for alpha != 1) or Eigen.
inline void gemm(GemmArgs const& g, int threads, [[maybe_unused]] bool on_onednn = false) {
  require_f32(g.a, "gemm input");
  require_f32(g.b, "gemm weight");
  require_f32(g.out, "gemm output");
  FLASHDEBERTA_REQUIRE(g.a.cols == g.b.cols && g.out.rows == g.a.rows && g.out.cols == g.b.rows,
                       "gemm shapes do not agree: a (" << g.a.rows << ", " << g.a.cols << "), b (" << g.b.rows << ", "
                                                       << g.b.cols << "), out (" << g.out.rows << ", " << g.out.cols
                                                       << ")");
  if (g.accumulate_f64) {
    gemm_accumulate_f64(g, threads);
    return;
  }
#if defined(__AVX512F__)
  if (g.a.rows <= skinny_max_rows(threads)) {
    auto const* bias = static_cast<float const*>(g.bias);
    Activation const act = g.activation;
    skinny_gemm(g.a.as<float>(), g.a.ld, g.b.as<float>(), g.b.ld, g.out.as<float>(), g.out.ld, g.a.rows, g.b.rows,
                g.a.cols, g.alpha, threads, [bias, act](float* row, std::int64_t c0, std::int64_t cols) {
                  if (bias != nullptr)
                    Eigen::Map<Eigen::ArrayXf>(row + c0, cols) += Eigen::Map<Eigen::ArrayXf const>(bias + c0, cols);
                  activate_row(row + c0, cols, act);
                });
    return;
  }
#endif
#if defined(FLASHDEBERTA_EIGEN_WITH_ONEDNN)
  if (on_onednn && g.alpha == 1.0f) {
    Activation const act = g.activation;
    onednn::plain_gemm(g, threads, [act](float* row, std::int64_t cols) { activate_row(row, cols, act); });
    return;
  }
  if (on_onednn) {
    onednn::sgemm({g.a}, {g.b, true}, g.out, g.alpha, 0.0f);
  } else
#endif
  {
    auto out = map(g.out);
    if (g.alpha == 1.0f) {
      out.noalias() = cmap(g.a) * cmap(g.b).transpose();
    } else {
      out.noalias() = g.alpha * (cmap(g.a) * cmap(g.b).transpose());
    }
  }
  apply_bias_activation(g.out, static_cast<float const*>(g.bias), g.activation, threads);
}

// Two-pass statistics (mean, then centred squares) over each row as vectorized Eigen reductions. The
// per-element double accumulation this replaces ran 5x slower than reading the data; the float
// reductions keep 16 partial sums, so for rows of ~1e3 values their relative error stays near 1e-7.
inline void layer_norm(LayerNormArgs const& n, int threads) {
  require_f32(n.x, "layer_norm input");
  require_f32(n.out, "layer_norm output");
  bool const has_residual = !n.residual.empty();
  std::int64_t const cols = n.x.cols;
  Eigen::Map<Eigen::ArrayXf const> const gamma(static_cast<float const*>(n.gamma), cols);
  Eigen::Map<Eigen::ArrayXf const> const beta(static_cast<float const*>(n.beta), cols);
  OpThreads const team = threads_for(static_cast<double>(n.x.rows * cols), kMinElementsPerThread, threads, n.x.rows);
  for_each_index(team, n.x.rows, [&](std::int64_t r) {
    Eigen::Map<Eigen::ArrayXf const> const x(n.x.as<float>() + r * n.x.ld, cols);
    Eigen::Map<Eigen::ArrayXf> y(n.out.as<float>() + r * n.out.ld, cols);
    // The sum is formed in float32 as PyTorch does (x + residual).
    if (has_residual) {
      y = x + Eigen::Map<Eigen::ArrayXf const>(n.residual.as<float>() + r * n.residual.ld, cols);
    } else {
      y = x;
    }
    float const mean = y.sum() / static_cast<float>(cols);
    float const variance = (y - mean).square().sum() / static_cast<float>(cols);
    float const inv_std = 1.0f / std::sqrt(variance + n.eps);
    y = (y - mean) * inv_std * gamma + beta;
  });
}

// The word table may be a checkpoint's float16 / bfloat16 table as stored (EigenPolicy::adopt_host_table): each
// gathered row is widened exactly, as the loader would have converted it.
inline void embedding(EmbeddingArgs const& e, int threads) {
  require_f32(e.out, "embedding output");
  FLASHDEBERTA_REQUIRE(
      e.word.dtype == DType::kF32 || e.word.dtype == DType::kF16 || e.word.dtype == DType::kBF16,
      "word embeddings in " << dtype_name(e.word.dtype) << ": the embedding op reads F32, F16 or BF16");
  std::int64_t const tokens = e.out.rows;
  std::int64_t const width = e.out.cols;
  std::size_t const row_bytes = static_cast<std::size_t>(e.word.ld) * dtype_size(e.word.dtype);
  OpThreads const team = threads_for(static_cast<double>(tokens * width), kMinElementsPerThread, threads, tokens);
  for_each_index(team, tokens, [&](std::int64_t t) {
    float* y = e.out.as<float>() + t * e.out.ld;
    auto const* row = static_cast<std::byte const*>(e.word.data) + static_cast<std::size_t>(e.ids[t]) * row_bytes;
    if (e.word.dtype == DType::kF32) {
      float const* w = reinterpret_cast<float const*>(row);
      for (std::int64_t c = 0; c < width; ++c) y[c] = w[c];
    } else {
      flashdeberta::detail::floats_to_f32(e.word.dtype, row, 0, std::span<float>(y, static_cast<std::size_t>(width)));
    }
    if (!e.position.empty()) {
      float const* p = e.position.as<float>() + static_cast<std::int64_t>(e.positions[t]) * e.position.ld;
      for (std::int64_t c = 0; c < width; ++c) y[c] += p[c];
    }
    if (!e.token_type.empty()) {
      float const* p = e.token_type.as<float>() + static_cast<std::int64_t>(e.token_types[t]) * e.token_type.ld;
      for (std::int64_t c = 0; c < width; ++c) y[c] += p[c];
    }
    if (e.relu) Eigen::Map<Eigen::ArrayXf>(y, width) = Eigen::Map<Eigen::ArrayXf>(y, width).max(0.0f);
  });
}

// For each tap u of the kernel: out += shift_u(x) . W[:, :, u]^T, per group; shift_u takes the token at
// position p + u - (kernel - 1) / 2 of the same sequence, or zero where there is none.
inline void conv1d(Conv1dArgs const& c, int threads) {
  require_f32(c.x, "conv input");
  std::int64_t const tokens = c.x.rows;
  std::int64_t const channels = c.x.cols;
  std::int64_t const group_width = channels / c.groups;
  std::int64_t const pad = (c.kernel_size - 1) / 2;
  auto const* weight = static_cast<float const*>(c.weight);  // (C, C / groups, kernel)
  auto out = map(c.out);
  out.setZero();
  RowMatrix shifted(tokens, channels);
  RowMatrix tap(channels, group_width);
  for (std::int64_t u = 0; u < c.kernel_size; ++u) {
    std::int64_t const offset = u - pad;
    for (std::int64_t b = 0; b < c.sequences.batch; ++b) {
      std::int64_t const begin = c.sequences.cu_seqlens[b];
      std::int64_t const end = c.sequences.cu_seqlens[b + 1];
      for (std::int64_t t = begin; t < end; ++t) {
        // Positions increase within a sequence, so the neighbour at distance `offset` in the original row
        // can only be the packed token `offset` away, and only if no hole lies between them.
        std::int64_t const s = t + offset;
        bool const valid = s >= begin && s < end && c.sequences.positions[s] - c.sequences.positions[t] == offset;
        if (valid) {
          shifted.row(t) = cmap(c.x).row(s);
        } else {
          shifted.row(t).setZero();
        }
      }
    }
    for (std::int64_t o = 0; o < channels; ++o)
      for (std::int64_t i = 0; i < group_width; ++i) tap(o, i) = weight[(o * group_width + i) * c.kernel_size + u];
    for (std::int64_t g = 0; g < c.groups; ++g) {
      out.middleCols(g * group_width, group_width).noalias() +=
          shifted.middleCols(g * group_width, group_width) * tap.middleRows(g * group_width, group_width).transpose();
    }
  }
  apply_bias_activation(c.out, static_cast<float const*>(c.bias), c.activation, threads);
}

// Rows split across threads; libm's expf and tanhf, as PyTorch's CPU LSTM cell.
inline void lstm_cell(LstmCellArgs const& a, int threads) {
  std::int64_t const units = lstm_cell_units(a);
  require_f32(a.gates_in, "lstm_cell gates");
  require_f32(a.hidden, "lstm_cell hidden state");
  bool const has_rec = !a.gates_rec.empty();
  bool const has_prev = !a.cell_prev.empty();
  auto const sigmoid = [](float x) { return 1.0f / (1.0f + std::exp(-x)); };
  // One step of a BiLSTM over a few texts is a few thousand gates: sized like the elementwise passes.
  OpThreads const team = threads_for(static_cast<double>(a.gates_in.rows * a.gates_in.cols), kMinElementsPerThread,
                                     threads, a.hidden.rows);
  for_each_index(team, a.hidden.rows, [&](std::int64_t r) {
    float const* in = a.gates_in.as<float>() + r * a.gates_in.ld;
    float const* rec = has_rec ? a.gates_rec.as<float>() + r * a.gates_rec.ld : nullptr;
    float const* prev = has_prev ? a.cell_prev.as<float>() + r * a.cell_prev.ld : nullptr;
    float* cell = a.cell.as<float>() + r * a.cell.ld;
    float* hidden = a.hidden.as<float>() + r * a.hidden.ld;
    for (std::int64_t d = 0; d < a.directions; ++d) {
      for (std::int64_t j = 0; j < units; ++j) {
        std::int64_t const g = 4 * units * d + j;
        auto const z = [&](std::int64_t gate) {
          std::int64_t const c = g + gate * units;
          return rec != nullptr ? in[c] + rec[c] : in[c];
        };
        std::int64_t const u = units * d + j;
        float const c_prev = prev != nullptr ? prev[u] : 0.0f;
        float const c = sigmoid(z(1)) * c_prev + sigmoid(z(0)) * std::tanh(z(2));
        cell[u] = c;
        hidden[u] = sigmoid(z(3)) * std::tanh(c);
      }
    }
  });
}

}  // namespace flashdeberta::eigen_ops

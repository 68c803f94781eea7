// The training ops of training_op_args.hpp as plain float64 loops over dense row-major matrices: the reference
// every backend's training-op test compares with (training_op_suite.hpp). Written from the formulas, not from
// any backend: no Eigen, no threads, every sum in the obvious order. Parameter gradients are returned as the
// gradient alone; the tests add what a buffer held before, to check that an op accumulates.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "flashdeberta/core/model_config.hpp"
#include "flashdeberta/policy/training_op_args.hpp"

namespace flashdeberta::training_reference {

struct Dense {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<double> values;  // (rows, cols) row-major

  Dense() = default;
  Dense(std::int64_t rows_, std::int64_t cols_) : rows(rows_), cols(cols_), values(std::size_t(rows_ * cols_), 0.0) {}
  double& operator()(std::int64_t r, std::int64_t c) { return values[std::size_t(r * cols + c)]; }
  double operator()(std::int64_t r, std::int64_t c) const { return values[std::size_t(r * cols + c)]; }
};

struct LinearGradients {
  Dense dx;                // (M, K)
  Dense dw;                // (N, K)
  std::vector<double> db;  // (N)
};

// out = x . w^T + b: dx = dy . w, dw = dy^T . x, db = column sums of dy.
inline LinearGradients linear_backward(Dense const& x, Dense const& w, Dense const& dy) {
  LinearGradients grads{Dense(x.rows, x.cols), Dense(w.rows, w.cols), std::vector<double>(std::size_t(w.rows), 0.0)};
  for (std::int64_t m = 0; m < dy.rows; ++m) {
    for (std::int64_t n = 0; n < dy.cols; ++n) {
      double const g = dy(m, n);
      grads.db[std::size_t(n)] += g;
      for (std::int64_t k = 0; k < x.cols; ++k) {
        grads.dx(m, k) += g * w(n, k);
        grads.dw(n, k) += g * x(m, k);
      }
    }
  }
  return grads;
}

struct LayerNormGradients {
  Dense dx;                    // (M, N)
  std::vector<double> dgamma;  // (N)
  std::vector<double> dbeta;   // (N)
};

// y = (s - mean) / sqrt(var + eps) * gamma + beta with s = x + residual, var the biased variance of the row.
// s is given already summed: the forward forms x + residual in float32, which the caller reproduces.
inline LayerNormGradients layer_norm_backward(Dense const& s, std::vector<double> const& gamma, double eps,
                                              Dense const& dy) {
  std::int64_t const n = s.cols;
  LayerNormGradients grads{Dense(s.rows, n), std::vector<double>(std::size_t(n), 0.0),
                           std::vector<double>(std::size_t(n), 0.0)};
  std::vector<double> x_hat(static_cast<std::size_t>(n));
  std::vector<double> g(static_cast<std::size_t>(n));
  for (std::int64_t r = 0; r < s.rows; ++r) {
    double mean = 0.0;
    for (std::int64_t c = 0; c < n; ++c) mean += s(r, c);
    mean /= double(n);
    double variance = 0.0;
    for (std::int64_t c = 0; c < n; ++c) variance += (s(r, c) - mean) * (s(r, c) - mean);
    variance /= double(n);
    double const inv_std = 1.0 / std::sqrt(variance + eps);
    double mean_g = 0.0;
    double mean_g_x_hat = 0.0;
    for (std::int64_t c = 0; c < n; ++c) {
      auto const i = std::size_t(c);
      x_hat[i] = (s(r, c) - mean) * inv_std;
      g[i] = dy(r, c) * gamma[i];
      mean_g += g[i] / double(n);
      mean_g_x_hat += g[i] * x_hat[i] / double(n);
      grads.dgamma[i] += dy(r, c) * x_hat[i];
      grads.dbeta[i] += dy(r, c);
    }
    for (std::int64_t c = 0; c < n; ++c) {
      auto const i = std::size_t(c);
      grads.dx(r, c) = inv_std * (g[i] - mean_g - x_hat[i] * mean_g_x_hat);
    }
  }
  return grads;
}

// math/activation.hpp's formulas, constant for constant, in float64.
inline double activation(Activation act, double x) {
  auto const sigmoid = [](double z) { return 1.0 / (1.0 + std::exp(-z)); };
  switch (act) {
    case Activation::kIdentity:
      return x;
    case Activation::kGelu:
      return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case Activation::kGeluTanh:
      return 0.5 * x * (1.0 + std::tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
    case Activation::kGeluFast:
      return 0.5 * x * (1.0 + std::tanh(0.7978845608 * x * (1.0 + 0.044715 * x * x)));
    case Activation::kQuickGelu:
      return x * sigmoid(1.702 * x);
    case Activation::kRelu:
      return x > 0.0 ? x : 0.0;
    case Activation::kTanh:
      return std::tanh(x);
    case Activation::kSigmoid:
      return sigmoid(x);
    case Activation::kSilu:
      return x * sigmoid(x);
    case Activation::kMish:
      return x * std::tanh(x > 20.0 ? x : std::log1p(std::exp(x)));
  }
  return x;
}

// d activation(act, x) / dx, term by term from the formulas above.
inline double activation_derivative(Activation act, double x) {
  constexpr double kPi = 3.14159265358979323846;
  auto const sigmoid = [](double z) { return 1.0 / (1.0 + std::exp(-z)); };
  switch (act) {
    case Activation::kIdentity:
      return 1.0;
    case Activation::kGelu:
      return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * kPi);
    case Activation::kGeluTanh:
    case Activation::kGeluFast: {
      double const a = act == Activation::kGeluTanh ? 0.79788456080286535588 : 0.7978845608;
      double const t = std::tanh(a * (x + 0.044715 * x * x * x));
      return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * a * (1.0 + 3.0 * 0.044715 * x * x);
    }
    case Activation::kQuickGelu: {
      double const s = sigmoid(1.702 * x);
      return s + 1.702 * x * s * (1.0 - s);
    }
    case Activation::kRelu:
      return x > 0.0 ? 1.0 : 0.0;
    case Activation::kTanh: {
      double const t = std::tanh(x);
      return 1.0 - t * t;
    }
    case Activation::kSigmoid: {
      double const s = sigmoid(x);
      return s * (1.0 - s);
    }
    case Activation::kSilu: {
      double const s = sigmoid(x);
      return s + x * s * (1.0 - s);
    }
    case Activation::kMish: {
      double const softplus = x > 20.0 ? x : std::log1p(std::exp(x));
      double const softplus_slope = x > 20.0 ? 1.0 : sigmoid(x);
      double const t = std::tanh(softplus);
      return t + x * (1.0 - t * t) * softplus_slope;
    }
  }
  return 1.0;
}

// Packed sequences as SequenceLayout describes them.
struct Sequences {
  std::vector<std::int32_t> cu_seqlens;  // (B + 1)
  std::vector<std::int32_t> positions;   // (T)
};

// The neighbour of token t at `offset`, as every backend's conv1d defines it: the token `offset` places away in
// the packing, if it is in t's sequence and `offset` positions away in the original row; otherwise zero (the
// sequence's edges, a hole between the two). With a hole in between, a kernel wider than 3 thus also drops a
// token that lies at the right distance beyond the hole (positions 0, 2: the token at 2 is not the offset-2
// neighbour of the one at 0); DeBERTa-v2's conv layers have kernel 3, where no such token exists.
inline std::optional<std::int64_t> conv_neighbour(Sequences const& seqs, std::int64_t t, std::int64_t offset) {
  for (std::size_t b = 0; b + 1 < seqs.cu_seqlens.size(); ++b) {
    if (t < seqs.cu_seqlens[b] || t >= seqs.cu_seqlens[b + 1]) continue;
    std::int64_t const s = t + offset;
    bool const linked = s >= seqs.cu_seqlens[b] && s < seqs.cu_seqlens[b + 1] &&
                        seqs.positions[std::size_t(s)] - seqs.positions[std::size_t(t)] == offset;
    return linked ? std::optional<std::int64_t>(s) : std::nullopt;
  }
  return std::nullopt;
}

struct Conv1dGradients {
  Dense dx;                     // (T, C)
  std::vector<double> dweight;  // (C, C / groups, kernel)
  std::vector<double> dbias;    // (C)
};

// pre[t, o] = bias[o] + sum over taps u and the inputs i of o's group of W[o, i, u] x[neighbour(t, u - pad), i].
inline Dense conv1d_forward(Dense const& x, std::vector<double> const& weight, std::vector<double> const& bias,
                            std::int64_t kernel, std::int64_t groups, Sequences const& seqs) {
  std::int64_t const channels = x.cols;
  std::int64_t const width = channels / groups;
  Dense pre(x.rows, channels);
  for (std::int64_t t = 0; t < x.rows; ++t) {
    for (std::int64_t o = 0; o < channels; ++o) {
      pre(t, o) = bias.empty() ? 0.0 : bias[std::size_t(o)];
      for (std::int64_t u = 0; u < kernel; ++u) {
        auto const s = conv_neighbour(seqs, t, u - (kernel - 1) / 2);
        if (!s) continue;
        for (std::int64_t i = 0; i < width; ++i)
          pre(t, o) += weight[std::size_t((o * width + i) * kernel + u)] * x(*s, o / width * width + i);
      }
    }
  }
  return pre;
}

inline Conv1dGradients conv1d_backward(Dense const& x, std::vector<double> const& weight, std::int64_t kernel,
                                       std::int64_t groups, Sequences const& seqs, Dense const& dpre) {
  std::int64_t const channels = x.cols;
  std::int64_t const width = channels / groups;
  Conv1dGradients grads{Dense(x.rows, channels), std::vector<double>(weight.size(), 0.0),
                        std::vector<double>(std::size_t(channels), 0.0)};
  for (std::int64_t t = 0; t < x.rows; ++t) {
    for (std::int64_t o = 0; o < channels; ++o) {
      double const g = dpre(t, o);
      grads.dbias[std::size_t(o)] += g;
      for (std::int64_t u = 0; u < kernel; ++u) {
        auto const s = conv_neighbour(seqs, t, u - (kernel - 1) / 2);
        if (!s) continue;
        for (std::int64_t i = 0; i < width; ++i) {
          std::size_t const w = std::size_t((o * width + i) * kernel + u);
          grads.dx(*s, o / width * width + i) += g * weight[w];
          grads.dweight[w] += g * x(*s, o / width * width + i);
        }
      }
    }
  }
  return grads;
}

// dout's rows summed into the rows their indices name; a table of 0 rows is skipped.
inline Dense embedding_backward(std::vector<std::int32_t> const& index, Dense const& dout, std::int64_t table_rows) {
  Dense grad(table_rows, dout.cols);
  if (table_rows == 0) return grad;
  for (std::int64_t t = 0; t < dout.rows; ++t)
    for (std::int64_t c = 0; c < dout.cols; ++c) grad(index[std::size_t(t)], c) += dout(t, c);
  return grad;
}

// DropoutArgs' mask and scale; the mask is dropout_uniform's, which every backend shares.
inline Dense dropout(Dense const& x, float probability, std::uint64_t seed, std::uint64_t offset) {
  Dense out(x.rows, x.cols);
  for (std::int64_t r = 0; r < x.rows; ++r) {
    for (std::int64_t c = 0; c < x.cols; ++c) {
      bool const keep = dropout_uniform(seed, offset + std::uint64_t(r * x.cols + c)) >= probability;
      out(r, c) = keep ? x(r, c) / (1.0 - double(probability)) : 0.0;
    }
  }
  return out;
}

// One torch.optim.AdamW step (_single_tensor_adamw) on float32 storage, each value computed in float64 from the
// stored ones and rounded once when stored.
inline void adamw_step(AdamWArgs const& a, std::vector<float>& weights, std::vector<float> const& grads,
                       std::vector<float>& exp_avg, std::vector<float>& exp_avg_sq) {
  double const bias_correction1 = 1.0 - std::pow(a.beta1, double(a.step));
  double const bias_correction2 = 1.0 - std::pow(a.beta2, double(a.step));
  for (std::size_t i = 0; i < weights.size(); ++i) {
    double const decayed = double(weights[i]) * (1.0 - a.learning_rate * a.weight_decay);
    double const g = double(grads[i]) * a.grad_scale;
    exp_avg[i] = float(a.beta1 * exp_avg[i] + (1.0 - a.beta1) * g);
    exp_avg_sq[i] = float(a.beta2 * exp_avg_sq[i] + (1.0 - a.beta2) * g * g);
    double const denom = std::sqrt(double(exp_avg_sq[i])) / std::sqrt(bias_correction2) + a.eps;
    weights[i] = float(decayed - a.learning_rate / bias_correction1 * double(exp_avg[i]) / denom);
  }
}

// In long double (x87's 64-bit mantissa where there is one), so that the reference's own rounding stays below
// what a float64 sum of 300k terms may lose.
inline double sum_of_squares(std::vector<float> const& values) {
  long double total = 0.0L;
  for (float v : values) total += static_cast<long double>(v) * static_cast<long double>(v);
  return static_cast<double>(total);
}

}  // namespace flashdeberta::training_reference

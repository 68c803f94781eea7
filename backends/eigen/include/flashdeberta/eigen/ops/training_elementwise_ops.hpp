// Eigen/OpenMP implementations of training's elementwise ops and reductions (training_op_args.hpp): activation
// forward and backward, dropout, the AdamW update, fill, sums of squares and column sums, and the argument
// checks every training op shares.
//
// Reductions split their input at boundaries that depend on its size only, never on the thread count, and add
// the parts in a fixed order: results are bit-identical run to run and for any thread count.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>

#include "flashdeberta/eigen/ops/dense_ops.hpp"
#include "flashdeberta/eigen/ops/eigen_maps.hpp"
#include "flashdeberta/eigen/ops/op_threads.hpp"
#include "flashdeberta/math/activation.hpp"
#include "flashdeberta/policy/training_op_args.hpp"
#include "flashdeberta/policy/training_op_checks.hpp"

namespace flashdeberta::eigen_ops {

// "(rows, cols)", or "empty", for error messages.
inline std::string shape_text(MatrixRef const& m) {
  return m.empty() ? "empty" : "(" + std::to_string(m.rows) + ", " + std::to_string(m.cols) + ")";
}

// sums[c] += the sum over rows of m[r, c], formed in float64 from the previous value and rounded once. Each
// thread owns whole columns (16 at a time, a cache line) and adds the rows in order.
inline void add_column_sums(MatrixRef const& m, float* sums, int threads) {
  constexpr std::int64_t kColumnsPerTask = 16;
  std::int64_t const tasks = (m.cols + kColumnsPerTask - 1) / kColumnsPerTask;
  OpThreads const team = threads_for(static_cast<double>(m.rows * m.cols), kMinElementsPerThread, threads, tasks);
  run_workers(team, [&](int worker, int workers) {
    std::int64_t const c0 = tasks * worker / workers * kColumnsPerTask;
    std::int64_t const c1 = std::min(m.cols, tasks * (worker + 1) / workers * kColumnsPerTask);
    if (c1 <= c0) return;
    Eigen::Map<Eigen::ArrayXf> out(sums + c0, c1 - c0);
    Eigen::ArrayXd total = out.cast<double>();
    for (std::int64_t r = 0; r < m.rows; ++r)
      total += Eigen::Map<Eigen::ArrayXf const>(m.as<float>() + r * m.ld + c0, c1 - c0).cast<double>();
    out = total.cast<float>();
  });
}

// out = dy * act'(x) over one row, with the derivative of math/activation.hpp's formula for each activation.
// The logistic-based ones (the tanh forms of GELU, tanh, sigmoid, SiLU, quick GELU) are written with
// s = 1 / (1 + e), e = exp(-z), and 1 - s = e s, tanh(u) = 2 s - 1 for z = 2u: 1 - tanh^2 and 1 - s formed as
// differences keep no relative accuracy where tanh and s saturate (gelu_tanh's derivative was up to 6.5e-6 off
// the float64 one that way, 1.7e-7 this way). e (cols) is the caller's scratch; every expression reads x[c], dy[c] and
// e[c] before it writes out[c], so out may alias dy (or x).
inline void activation_backward_row(float const* x_data, float const* dy_data, float* out_data, std::int64_t cols,
                                    Activation act, Eigen::ArrayXf& e) {
  Eigen::Map<Eigen::ArrayXf const> const x(x_data, cols);
  Eigen::Map<Eigen::ArrayXf const> const dy(dy_data, cols);
  Eigen::Map<Eigen::ArrayXf> out(out_data, cols);
  // z at least -80, where e s stays finite (exp(80) < FLT_MAX) and s (1.8e-35) is 0 for every purpose.
  auto const set_e = [&](auto const& z) { e = (-z.max(-80.0f)).exp(); };
  auto const s = (1.0f + e).inverse();
  switch (act) {
    case Activation::kIdentity:
      out = dy;
      return;
    case Activation::kGelu: {  // Phi(x) + x phi(x)
      constexpr float kInvSqrt2 = 0.70710678118654752440f;
      constexpr float kInvSqrt2Pi = 0.39894228040143267794f;
      out = dy * (0.5f * (1.0f + (x * kInvSqrt2).erf()) + x * kInvSqrt2Pi * (-0.5f * x.square()).exp());
      return;
    }
    case Activation::kGeluTanh:
    case Activation::kGeluFast: {
      // 0.5 x (1 + tanh(u)), u = a (x + b x^3) (both forms; their a agree in float32): with s = logistic(2u),
      // the derivative 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) u' is s + 2 x s (1 - s) u'.
      constexpr float kA = 0.79788456080286535588f;
      constexpr float kB = 0.044715f;
      set_e(2.0f * kA * (x + kB * x.cube()));
      out = dy * (s + 2.0f * x * s * (e * s) * kA * (1.0f + 3.0f * kB * x.square()));
      return;
    }
    case Activation::kQuickGelu:  // x s(1.702 x)
      set_e(1.702f * x);
      out = dy * s * (1.0f + 1.702f * x * (e * s));
      return;
    case Activation::kRelu:  // 0 at x = 0, as PyTorch's threshold_backward
      out = (x > 0.0f).select(dy, 0.0f);
      return;
    case Activation::kTanh:  // 1 - tanh^2 x = 4 s (1 - s), s = logistic(2 x)
      set_e(2.0f * x);
      out = dy * 4.0f * s * (e * s);
      return;
    case Activation::kSigmoid:
      set_e(x);
      out = dy * s * (e * s);
      return;
    case Activation::kSilu:  // x s(x)
      set_e(x);
      out = dy * s * (1.0f + x * (e * s));
      return;
    case Activation::kMish:  // x tanh(softplus(x)); the forward takes softplus(x) = x above 20, whose slope is 1
      for (std::int64_t c = 0; c < cols; ++c) {
        float const v = x[c];
        float const t = std::tanh(v > 20.0f ? v : std::log1p(std::exp(v)));
        float const softplus_slope = v > 20.0f ? 1.0f : 1.0f / (1.0f + std::exp(-v));
        out[c] = dy[c] * (t + v * (1.0f - t * t) * softplus_slope);
      }
      return;
  }
}

// The forward evaluates as dense_ops' GEMM epilogue does (activate_row), so an activation run on its own and
// one fused into a GEMM agree bit for bit. With accumulate each row's result goes to a scratch row first and is
// then added to out, so out may still alias x or dy.
inline void activation(ActivationArgs const& a, int threads) {
  char const* op = a.dy.empty() ? "activation forward" : "activation backward";
  bool const backward = !a.dy.empty();
  std::int64_t const rows = a.x.rows;
  std::int64_t const cols = a.x.cols;
  require_training_matrix(op, "x", a.x, rows, cols);
  require_training_matrix(op, "out", a.out, rows, cols);
  if (backward) require_training_matrix(op, "dy", a.dy, rows, cols);
  OpThreads const team = threads_for(static_cast<double>(rows * cols), kMinElementsPerThread, threads, rows);
  run_workers(team, [&](int worker, int workers) {
    Eigen::ArrayXf exp_scratch(backward ? cols : 0);
    Eigen::ArrayXf result(a.accumulate ? cols : 0);
    for (std::int64_t r = rows * worker / workers; r < rows * (worker + 1) / workers; ++r) {
      float const* x = a.x.as<float>() + r * a.x.ld;
      float* out = a.out.as<float>() + r * a.out.ld;
      float* const target = a.accumulate ? result.data() : out;
      if (backward) {
        activation_backward_row(x, a.dy.as<float>() + r * a.dy.ld, target, cols, a.activation, exp_scratch);
      } else {
        if (target != x) std::copy_n(x, cols, target);
        activate_row(target, cols, a.activation);
      }
      if (a.accumulate) Eigen::Map<Eigen::ArrayXf>(out, cols) += result;
    }
  });
}

// factor[c] = scale where element `first + c` is kept, else 0. With its arguments by value and factor restrict,
// the loop vectorizes, hash included (AVX-512DQ multiplies 64-bit lanes): 2048 x 3072 on one core in 2.5 ms,
// against 3.6 ms for the hash and the product in one loop, and 21 ms when p and scale were read through the
// lambda's references (a float store through factor might change them, so the loop did not vectorize).
inline void dropout_factors(float* __restrict factor, std::int64_t cols, std::uint64_t seed, std::uint64_t first,
                            float probability, float scale) {
  for (std::int64_t c = 0; c < cols; ++c)
    factor[c] = dropout_uniform(seed, first + static_cast<std::uint64_t>(c)) >= probability ? scale : 0.0f;
}

// out = keep ? x / (1 - p) : 0, keep = dropout_uniform(seed, offset + r * cols + c) >= p: the counter counts
// the view's elements, not its row stride, so a backend's layout never changes the mask. The scale is
// 1 / (1 - p) in float64 rounded once to float32, the product one float32 rounding.
inline void dropout(DropoutArgs const& d, int threads) {
  std::int64_t const rows = d.x.rows;
  std::int64_t const cols = d.x.cols;
  require_dropout_args(d);
  float const p = d.probability;
  float const scale = static_cast<float>(1.0 / (1.0 - static_cast<double>(p)));
  OpThreads const team = threads_for(static_cast<double>(rows * cols), kMinElementsPerThread, threads, rows);
  run_workers(team, [&](int worker, int workers) {
    Eigen::ArrayXf factor(p == 0.0f ? 0 : cols);
    for (std::int64_t r = rows * worker / workers; r < rows * (worker + 1) / workers; ++r) {
      Eigen::Map<Eigen::ArrayXf const> const x(d.x.as<float>() + r * d.x.ld, cols);
      Eigen::Map<Eigen::ArrayXf> out(d.out.as<float>() + r * d.out.ld, cols);
      if (p == 0.0f) {
        if (out.data() != x.data()) out = x;
        continue;
      }
      dropout_factors(factor.data(), cols, d.seed, d.offset + static_cast<std::uint64_t>(r * cols), p, scale);
      out = x * factor;  // reads x[c] before writing out[c]: out may alias x
    }
  });
}

// The constants of one AdamW step.
struct AdamWStep {
  double beta1, beta2, eps, grad_scale;
  double decay;                  // 1 - lr wd
  double step_size;              // lr / (1 - beta1^step)
  double bias_correction2_sqrt;  // sqrt(1 - beta2^step)
};

// AdamW over n values, by value and restrict so that the compiler keeps the constants in registers. Chunk by
// chunk: the moments first, then the float64 square roots through Eigen's array sqrt (std::sqrt may set errno,
// which keeps a loop around it scalar; both are IEEE's correctly rounded root, so the results are the same bits),
// then the update. Each value reads the moments as stored, rounded.
inline void adamw_values(float* __restrict weights, float const* __restrict grads, float* __restrict exp_avg,
                         float* __restrict exp_avg_sq, std::int64_t n, AdamWStep const k) {
  constexpr std::int64_t kChunk = 256;
  alignas(64) double roots[kChunk];
  for (std::int64_t start = 0; start < n; start += kChunk) {
    std::int64_t const count = std::min(kChunk, n - start);
    for (std::int64_t j = 0; j < count; ++j) {
      std::int64_t const i = start + j;
      double const g = static_cast<double>(grads[i]) * k.grad_scale;
      double const m_old = exp_avg[i];
      // lerp(m, g, 1 - beta1) as PyTorch evaluates it for a weight below 0.5: m + (1 - beta1) (g - m)
      exp_avg[i] = static_cast<float>(m_old + (1.0 - k.beta1) * (g - m_old));
      float const v = static_cast<float>(k.beta2 * static_cast<double>(exp_avg_sq[i]) + (1.0 - k.beta2) * g * g);
      exp_avg_sq[i] = v;
      roots[j] = static_cast<double>(v);
    }
    Eigen::Map<Eigen::ArrayXd> root(roots, count);
    root = root.sqrt();
    for (std::int64_t j = 0; j < count; ++j) {
      std::int64_t const i = start + j;
      double const denom = roots[j] / k.bias_correction2_sqrt + k.eps;
      weights[i] = static_cast<float>(static_cast<double>(weights[i]) * k.decay -
                                      k.step_size * static_cast<double>(exp_avg[i]) / denom);
    }
  }
}

// torch.optim.AdamW's _single_tensor_adamw in its order of operations, on float32 storage with each element's
// arithmetic in float64 and one rounding per stored value (PyTorch rounds after every float32 op: the two
// differ by about an ulp per step):
//   w *= 1 - lr wd;  m = lerp(m, g, 1 - beta1);  v = beta2 v + (1 - beta2) g^2     (g = grad * grad_scale)
//   w -= (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps)                                 (bc_i = 1 - beta_i^step)
// The four arrays must not overlap.
inline void adamw(AdamWArgs const& a, int threads) {
  require_adamw_args(a);
  double const step = static_cast<double>(a.step);
  AdamWStep const k{a.beta1,
                    a.beta2,
                    a.eps,
                    a.grad_scale,
                    1.0 - a.learning_rate * a.weight_decay,
                    a.learning_rate / (1.0 - std::pow(a.beta1, step)),
                    std::sqrt(1.0 - std::pow(a.beta2, step))};
  OpThreads const team = threads_for(static_cast<double>(a.count), kMinElementsPerThread, threads, a.count);
  run_workers(team, [&](int worker, int workers) {
    std::int64_t const begin = a.count * worker / workers;
    std::int64_t const end = a.count * (worker + 1) / workers;
    adamw_values(a.weights + begin, a.grads + begin, a.exp_avg + begin, a.exp_avg_sq + begin, end - begin, k);
  });
}

// The elements split evenly across threads whatever the shape: the optimizer zeroes a whole block of gradients as
// one (1, count) matrix.
inline void fill(MatrixRef const& out, float value, int threads) {
  if (out.rows == 0 || out.cols == 0) return;
  require_training_matrix("fill", "out", out, out.rows, out.cols);
  std::int64_t const total = out.rows * out.cols;
  OpThreads const team = threads_for(static_cast<double>(total), kMinElementsPerThread, threads);
  run_workers(team, [&](int worker, int workers) {
    std::int64_t const end = total * (worker + 1) / workers;
    for (std::int64_t i = total * worker / workers; i < end;) {
      std::int64_t const r = i / out.cols;
      std::int64_t const c = i % out.cols;
      std::int64_t const n = std::min(out.cols - c, end - i);
      std::fill_n(out.as<float>() + r * out.ld + c, n, value);
      i += n;
    }
  });
}

// Sum of squares in float64 (float32 squares are exact in it), over fixed chunks added in order.
// The sum of squares of n values in float64 over 16 independent lanes, added at the end: the compiler vectorizes the
// lanes (no reassociation asked), where Eigen's cast-square-sum ran a scalar chain at ~6 GB/s (~45 GB/s here, 2-core
// EPYC, from L3); the gradient norm reads every gradient once a step.
inline double squares_in_lanes(float const* __restrict values, std::int64_t n) {
  constexpr std::int64_t kLanes = 16;
  double lanes[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (std::int64_t j = 0; j < kLanes; ++j) {
      double const x = values[i + j];
      lanes[j] += x * x;
    }
  }
  double sum = 0.0;
  for (double lane : lanes) sum += lane;
  for (; i < n; ++i) sum += static_cast<double>(values[i]) * static_cast<double>(values[i]);
  return sum;
}

inline double sum_of_squares(float const* values, std::int64_t count, int threads) {
  FLASHDEBERTA_REQUIRE(count >= 0 && (count == 0 || values != nullptr),
                       "sum_of_squares: " << count << " values at " << static_cast<void const*>(values));
  constexpr std::int64_t kChunk = std::int64_t{1} << 16;
  std::int64_t const chunks = (count + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<std::size_t>(chunks));
  OpThreads const team = threads_for(static_cast<double>(count), kMinElementsPerThread, threads, chunks);
  for_each_index(team, chunks, [&](std::int64_t chunk) {
    std::int64_t const begin = chunk * kChunk;
    partial[static_cast<std::size_t>(chunk)] = squares_in_lanes(values + begin, std::min(kChunk, count - begin));
  });
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

}  // namespace flashdeberta::eigen_ops

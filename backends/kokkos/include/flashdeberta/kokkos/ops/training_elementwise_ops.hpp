// Kokkos kernels of training's elementwise ops and reductions (training_op_args.hpp): activation forward and
// backward, dropout, the AdamW update, fill, sums of squares and column sums, and the argument checks every
// training op shares. Float32 storage; the formulas are eigen_ops' (training_elementwise_ops.hpp) term for term.
//
// Elementwise kernels give each element one work item. Reductions never depend on the team size or schedule:
// a column sum is one work item's loop over the rows in order, a sum of squares adds fixed-size chunks' sums in
// chunk order. Results are the same bits run to run on a given execution space.
#pragma once

#include <cmath>
#include <cstdint>

#include "flashdeberta/kokkos/ops/common.hpp"
#include "flashdeberta/math/activation.hpp"
#include "flashdeberta/policy/training_op_args.hpp"
#include "flashdeberta/policy/training_op_checks.hpp"

namespace flashdeberta::kokkos_ops {

// The functions the backward formulas add to common.hpp's (Kokkos 3.7 moved them out of Experimental).
namespace math {
#if KOKKOS_VERSION >= 30700
using Kokkos::erf;
using Kokkos::log;
using Kokkos::log1p;
#else
using Kokkos::Experimental::erf;
using Kokkos::Experimental::log;
using Kokkos::Experimental::log1p;
#endif
}  // namespace math

// Element `at` of a device array, read on the host.
template <class ExecSpace, class T>
T read_element(ExecSpace const& space, T const* values, std::int64_t at) {
  T value{};
  Kokkos::parallel_reduce(
      "flashdeberta::read_element", Kokkos::RangePolicy<ExecSpace>(space, at, at + 1),
      KOKKOS_LAMBDA(std::int64_t i, T & sum) { sum += values[i]; }, value);
  return value;
}

// sums[c] += the sum over rows of m[r, c]: one work item per column adds the rows in order in float64, onto the
// previous value, rounded once.
template <class ExecSpace>
void add_column_sums(ExecSpace const& space, Strided<float const> const& m, float* sums) {
  std::int64_t const rows = m.rows;
  Kokkos::parallel_for(
      "flashdeberta::add_column_sums", Kokkos::RangePolicy<ExecSpace>(space, 0, m.cols), KOKKOS_LAMBDA(std::int64_t c) {
        double total = sums[c];
        for (std::int64_t r = 0; r < rows; ++r) total += m(r, c);
        sums[c] = static_cast<float>(total);
      });
}

// dy * act'(x), the derivative of math/activation.hpp's formula. The logistic-based forms use s = 1 / (1 + e),
// e = exp(-z), with 1 - s = e s and 1 - tanh^2(u) = 4 s (1 - s) for z = 2u: differences of saturated values keep
// no relative accuracy (eigen_ops::activation_backward_row measured 6.5e-6 against 1.7e-7 for gelu_tanh).
KOKKOS_INLINE_FUNCTION float activation_backward_value(Activation act, float x, float dy) {
  // z at least -80: e s stays finite (exp(80) < FLT_MAX) and s (1.8e-35) is 0 for every purpose.
  auto const exp_neg = [](float z) { return math::exp(-(z > -80.0f ? z : -80.0f)); };
  switch (act) {
    case Activation::kIdentity:
      return dy;
    case Activation::kGelu: {  // Phi(x) + x phi(x)
      constexpr float kInvSqrt2 = 0.70710678118654752440f;
      constexpr float kInvSqrt2Pi = 0.39894228040143267794f;
      return dy * (0.5f * (1.0f + math::erf(x * kInvSqrt2)) + x * kInvSqrt2Pi * math::exp(-0.5f * x * x));
    }
    case Activation::kGeluTanh:
    case Activation::kGeluFast: {  // 0.5 x (1 + tanh u), u = a (x + b x^3): s + 2 x s (1 - s) u', s = logistic(2u)
      constexpr float kA = 0.79788456080286535588f;
      constexpr float kB = 0.044715f;
      float const e = exp_neg(2.0f * kA * (x + kB * x * x * x));
      float const s = 1.0f / (1.0f + e);
      return dy * (s + 2.0f * x * s * (e * s) * kA * (1.0f + 3.0f * kB * x * x));
    }
    case Activation::kQuickGelu: {  // x s(1.702 x)
      float const e = exp_neg(1.702f * x);
      float const s = 1.0f / (1.0f + e);
      return dy * s * (1.0f + 1.702f * x * (e * s));
    }
    case Activation::kRelu:  // 0 at x = 0, as PyTorch's threshold_backward
      return x > 0.0f ? dy : 0.0f;
    case Activation::kTanh: {  // 4 s (1 - s), s = logistic(2 x)
      float const e = exp_neg(2.0f * x);
      float const s = 1.0f / (1.0f + e);
      return dy * 4.0f * s * (e * s);
    }
    case Activation::kSigmoid: {
      float const e = exp_neg(x);
      float const s = 1.0f / (1.0f + e);
      return dy * s * (e * s);
    }
    case Activation::kSilu: {  // x s(x)
      float const e = exp_neg(x);
      float const s = 1.0f / (1.0f + e);
      return dy * s * (1.0f + x * (e * s));
    }
    case Activation::kMish: {  // x tanh(softplus(x)); the forward takes softplus(x) = x above 20, whose slope is 1
      float const t = math::tanh(x > 20.0f ? x : math::log1p(math::exp(x)));
      float const softplus_slope = x > 20.0f ? 1.0f : 1.0f / (1.0f + math::exp(-x));
      return dy * (t + x * (1.0f - t * t) * softplus_slope);
    }
  }
  return dy;
}

// One work item per element. The forward is apply_activation, as gemm.hpp's epilogue applies it, so an activation
// run on its own and one fused into a GEMM agree bit for bit. Each item reads x and dy before it writes out, so out
// may alias either; with accumulate the result is added to out.
template <class ExecSpace>
void activation(ExecSpace const& space, ActivationArgs const& a) {
  bool const backward = !a.dy.empty();
  char const* op = backward ? "activation backward" : "activation forward";
  std::int64_t const rows = a.x.rows;
  std::int64_t const cols = a.x.cols;
  require_training_matrix(op, "x", a.x, rows, cols);
  require_training_matrix(op, "out", a.out, rows, cols);
  if (backward) require_training_matrix(op, "dy", a.dy, rows, cols);
  Strided<float const> const x = cstrided(a.x, "activation input");
  Strided<float const> const dy = backward ? cstrided(a.dy, "activation dy") : x;
  Strided<float> const out = strided(a.out, "activation output");
  Activation const act = a.activation;
  bool const accumulate = a.accumulate;
  Kokkos::parallel_for(
      "flashdeberta::activation", Kokkos::RangePolicy<ExecSpace>(space, 0, rows * cols),
      KOKKOS_LAMBDA(std::int64_t idx) {
        std::int64_t const r = idx / cols;
        std::int64_t const c = idx % cols;
        float const v = backward ? activation_backward_value(act, x(r, c), dy(r, c)) : apply_activation(act, x(r, c));
        out(r, c) = accumulate ? out(r, c) + v : v;
      });
}

// out = keep ? x * scale : 0 with keep = dropout_uniform(seed, offset + r * cols + c) >= p: the counter counts
// the view's elements, not its row stride, so the mask is every backend's. scale = 1 / (1 - p) in float64 rounded
// once, the product one float32 rounding (x * 0 for a dropped element, as eigen_ops). out may alias x.
template <class ExecSpace>
void dropout(ExecSpace const& space, DropoutArgs const& d) {
  std::int64_t const rows = d.x.rows;
  std::int64_t const cols = d.x.cols;
  require_training_matrix("dropout", "x", d.x, rows, cols);
  require_training_matrix("dropout", "out", d.out, rows, cols);
  FLASHDEBERTA_REQUIRE(d.probability >= 0.0f && d.probability < 1.0f,
                       "dropout: probability " << d.probability << " is outside [0, 1)");
  Strided<float const> const x = cstrided(d.x, "dropout input");
  Strided<float> const out = strided(d.out, "dropout output");
  float const p = d.probability;
  float const scale = static_cast<float>(1.0 / (1.0 - static_cast<double>(p)));
  std::uint64_t const seed = d.seed;
  std::uint64_t const offset = d.offset;
  Kokkos::parallel_for(
      "flashdeberta::dropout", Kokkos::RangePolicy<ExecSpace>(space, 0, rows * cols), KOKKOS_LAMBDA(std::int64_t idx) {
        std::int64_t const r = idx / cols;
        std::int64_t const c = idx % cols;
        if (p == 0.0f) {
          out(r, c) = x(r, c);
          return;
        }
        bool const keep = dropout_uniform(seed, offset + static_cast<std::uint64_t>(idx)) >= p;
        out(r, c) = x(r, c) * (keep ? scale : 0.0f);
      });
}

// torch.optim.AdamW's _single_tensor_adamw as eigen_ops::adamw evaluates it: each element's arithmetic in float64
// with one rounding per stored value, one work item per element. The four arrays must not overlap.
template <class ExecSpace>
void adamw(ExecSpace const& space, AdamWArgs const& a) {
  FLASHDEBERTA_REQUIRE(a.count >= 0, "adamw: count " << a.count << " is negative");
  FLASHDEBERTA_REQUIRE(a.step >= 1, "adamw: step " << a.step << " counts from 1");
  FLASHDEBERTA_REQUIRE(a.beta1 >= 0.0 && a.beta1 < 1.0 && a.beta2 >= 0.0 && a.beta2 < 1.0,
                       "adamw: betas (" << a.beta1 << ", " << a.beta2 << ") are outside [0, 1)");
  FLASHDEBERTA_REQUIRE(
      a.count == 0 || (a.weights != nullptr && a.grads != nullptr && a.exp_avg != nullptr && a.exp_avg_sq != nullptr),
      "adamw: weights, grads, exp_avg and exp_avg_sq must all be given for " << a.count << " values");
  double const step = static_cast<double>(a.step);
  double const beta1 = a.beta1;
  double const beta2 = a.beta2;
  double const eps = a.eps;
  double const grad_scale = a.grad_scale;
  double const decay = 1.0 - a.learning_rate * a.weight_decay;
  double const step_size = a.learning_rate / (1.0 - std::pow(beta1, step));
  double const bias_correction2_sqrt = std::sqrt(1.0 - std::pow(beta2, step));
  float* weights = a.weights;
  float const* grads = a.grads;
  float* exp_avg = a.exp_avg;
  float* exp_avg_sq = a.exp_avg_sq;
  Kokkos::parallel_for(
      "flashdeberta::adamw", Kokkos::RangePolicy<ExecSpace>(space, 0, a.count), KOKKOS_LAMBDA(std::int64_t i) {
        double const g = static_cast<double>(grads[i]) * grad_scale;
        double const m_old = exp_avg[i];
        // lerp(m, g, 1 - beta1) as PyTorch evaluates it for a weight below 0.5: m + (1 - beta1) (g - m)
        float const m = static_cast<float>(m_old + (1.0 - beta1) * (g - m_old));
        float const v = static_cast<float>(beta2 * static_cast<double>(exp_avg_sq[i]) + (1.0 - beta2) * g * g);
        double const denom = math::sqrt(static_cast<double>(v)) / bias_correction2_sqrt + eps;
        weights[i] =
            static_cast<float>(static_cast<double>(weights[i]) * decay - step_size * static_cast<double>(m) / denom);
        exp_avg[i] = m;
        exp_avg_sq[i] = v;
      });
}

template <class ExecSpace>
void fill(ExecSpace const& space, MatrixRef const& m, float value) {
  if (m.rows == 0 || m.cols == 0) return;
  require_training_matrix("fill", "out", m, m.rows, m.cols);
  Strided<float> const out = strided(m, "fill output");
  std::int64_t const cols = m.cols;
  Kokkos::parallel_for(
      "flashdeberta::fill", Kokkos::RangePolicy<ExecSpace>(space, 0, m.rows * cols),
      KOKKOS_LAMBDA(std::int64_t idx) { out(idx / cols, idx % cols) = value; });
}

// Elements per chunk of sum_of_squares: a constant, so the partial sums and their order depend on the count only.
inline constexpr std::int64_t kSquaresChunk = std::int64_t{1} << 14;

// Sum of squares in float64 (float32 squares are exact in it): each chunk summed in order by one work item, the
// chunks' sums added in order on the host.
template <class ExecSpace>
double sum_of_squares(ExecSpace const& space, float const* values, std::int64_t count) {
  FLASHDEBERTA_REQUIRE(count >= 0 && (count == 0 || values != nullptr),
                       "sum_of_squares: " << count << " values at " << static_cast<void const*>(values));
  if (count == 0) return 0.0;
  std::int64_t const chunks = (count + kSquaresChunk - 1) / kSquaresChunk;
  Kokkos::View<double*, typename ExecSpace::memory_space> partial(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, "flashdeberta::sum_of_squares"),
      static_cast<std::size_t>(chunks));
  double* sums = partial.data();
  std::int64_t const chunk_size = kSquaresChunk;
  Kokkos::parallel_for(
      "flashdeberta::sum_of_squares", Kokkos::RangePolicy<ExecSpace>(space, 0, chunks),
      KOKKOS_LAMBDA(std::int64_t chunk) {
        std::int64_t const begin = chunk * chunk_size;
        std::int64_t const end = begin + chunk_size < count ? begin + chunk_size : count;
        double sum = 0.0;
        for (std::int64_t i = begin; i < end; ++i)
          sum += static_cast<double>(values[i]) * static_cast<double>(values[i]);
        sums[chunk] = sum;
      });
  auto const host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), partial);
  double total = 0.0;
  for (std::int64_t chunk = 0; chunk < chunks; ++chunk) total += host(chunk);
  return total;
}

}  // namespace flashdeberta::kokkos_ops

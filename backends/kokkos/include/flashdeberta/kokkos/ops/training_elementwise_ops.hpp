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

// The function the attention backward's log-sum-exp adds to common.hpp's (Kokkos 3.7 moved it out of
// Experimental).
namespace math {
#if KOKKOS_VERSION >= 30700
using Kokkos::log;
#else
using Kokkos::Experimental::log;
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
        float const v = backward ? activation_backward(act, x(r, c), dy(r, c)) : apply_activation(act, x(r, c));
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
  require_dropout_args(d);
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
  require_adamw_args(a);
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

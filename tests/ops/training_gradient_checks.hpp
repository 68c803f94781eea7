// Checks of the training ops that need no reference: the backward ops against finite differences of the runner's
// own forward ops (gemm, layer_norm, activation, conv1d), so that a backward is tied to the forward the model
// runs and not only to a reference written by the same hand; the argument checks; and a run of every op whose
// outputs a test compares between runs or thread counts. Generic over the runner (training_test_support.hpp).
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "training_op_suite.hpp"
#include "training_test_support.hpp"

namespace flashdeberta::training_tests {

// One operand's gradient against the loss L(p) = sum R * forward(p) in float64 over the forward's float32 output,
// along two directions: the gradient itself, where the first-order change is ||grad||^2 and the error is a plain
// relative one, and a random direction, where the error is taken relative to ||grad|| ||step||. The change is
// measured over the steps p + h v and p - h v as float32 rounds them, so only the forward's rounding and the
// curvature (h^2) remain. Returns the larger error.
inline double directional_error(Host const& operand, Host const& grad, double h, std::uint32_t seed,
                                std::function<double(Host const&)> const& loss) {
  double worst = 0.0;
  Host const random = random_values(operand.size(), 1.0f, seed);
  double grad_norm = 0.0;
  for (float g : grad) grad_norm += double(g) * double(g);
  grad_norm = std::sqrt(grad_norm);
  for (Host const* direction : {&grad, &random}) {
    double direction_norm = 0.0;
    for (float v : *direction) direction_norm += double(v) * double(v);
    double const scale = h / std::sqrt(std::max(direction_norm, 1e-300));  // unit direction, length h
    Host above = operand;
    Host below = operand;
    double predicted = 0.0;
    double step_norm = 0.0;
    for (std::size_t i = 0; i < operand.size(); ++i) {
      above[i] = float(double(operand[i]) + scale * (*direction)[i]);
      below[i] = float(double(operand[i]) - scale * (*direction)[i]);
      double const step = double(above[i]) - double(below[i]);
      predicted += double(grad[i]) * step;
      step_norm += step * step;
    }
    double const change = loss(above) - loss(below);
    double const normalizer = direction == &grad ? std::abs(predicted) : grad_norm * std::sqrt(step_norm);
    worst = std::max(worst, std::abs(change - predicted) / std::max(normalizer, 1e-300));
  }
  return worst;
}

// sum R * out in float64.
inline double weighted_sum(Host const& out, Host const& weights) {
  double total = 0.0;
  for (std::size_t i = 0; i < out.size(); ++i) total += double(out[i]) * double(weights[i]);
  return total;
}

template <TrainingOpRunner R>
void linear_finite_differences(R const& r, std::uint32_t seed, double bound) {
  std::int64_t const rows = 9, outputs = 5, inputs = 6;
  Host const x = random_values(std::size_t(rows * inputs), 1.0f, seed++);
  Host const w = random_values(std::size_t(outputs * inputs), 0.5f, seed++);
  Host const b = random_values(std::size_t(outputs), 0.5f, seed++);
  Host const dy = random_values(std::size_t(rows * outputs), 1.0f, seed++);
  auto const forward = [&](Host const& xv, Host const& wv, Host const& bv) {
    auto const x_d = upload(r, xv);
    auto const w_d = upload(r, wv);
    auto const b_d = upload(r, bv);
    auto const out = upload(r, Host(std::size_t(rows * outputs), kNaN));
    GemmArgs args;
    args.a = {x_d.data(), DType::kF32, rows, inputs, inputs};
    args.b = {w_d.data(), DType::kF32, outputs, inputs, inputs};
    args.bias = b_d.data();
    args.out = {out.data(), DType::kF32, rows, outputs, outputs};
    r.gemm(args);
    return weighted_sum(download(r, out), dy);
  };
  auto const x_d = upload(r, x);
  auto const w_d = upload(r, w);
  auto const dy_d = upload(r, dy);
  auto const dx = upload(r, Host(x.size(), kNaN));
  auto const dw = upload(r, Host(w.size(), 0.0f));
  auto const db = upload(r, Host(b.size(), 0.0f));
  r.linear_backward({{x_d.data(), DType::kF32, rows, inputs, inputs},
                     {w_d.data(), DType::kF32, outputs, inputs, inputs},
                     {dy_d.data(), DType::kF32, rows, outputs, outputs},
                     {dx.data(), DType::kF32, rows, inputs, inputs},
                     {dw.data(), DType::kF32, outputs, inputs, inputs},
                     floats(db)});
  // The loss is linear in each operand: any step is exact but for rounding.
  check_error("linear_backward finite differences dx",
              directional_error(x, download(r, dx), 1.0, seed++, [&](Host const& v) { return forward(v, w, b); }),
              bound);
  check_error("linear_backward finite differences dw",
              directional_error(w, download(r, dw), 1.0, seed++, [&](Host const& v) { return forward(x, v, b); }),
              bound);
  check_error("linear_backward finite differences db",
              directional_error(b, download(r, db), 1.0, seed++, [&](Host const& v) { return forward(x, w, v); }),
              bound);
}

template <TrainingOpRunner R>
void layer_norm_finite_differences(R const& r, std::uint32_t seed, double h, double bound) {
  std::int64_t const rows = 5, cols = 24;
  Host const x = random_values(std::size_t(rows * cols), 1.0f, seed++, 0.5f);
  Host const residual = random_values(x.size(), 1.0f, seed++);
  Host const gamma = random_values(std::size_t(cols), 0.3f, seed++, 1.0f);
  Host const beta = random_values(std::size_t(cols), 0.3f, seed++);
  Host const dy = random_values(x.size(), 1.0f, seed++);
  float const eps = 1e-5f;
  auto const matrix = [&](auto const& buffer) { return MatrixRef{buffer.data(), DType::kF32, rows, cols, cols}; };
  auto const forward = [&](Host const& xv, Host const& rv, Host const& gv, Host const& bv) {
    auto const x_d = upload(r, xv);
    auto const r_d = upload(r, rv);
    auto const g_d = upload(r, gv);
    auto const b_d = upload(r, bv);
    auto const out = upload(r, Host(x.size(), kNaN));
    r.layer_norm({matrix(x_d), matrix(r_d), g_d.data(), b_d.data(), eps, matrix(out)});
    return weighted_sum(download(r, out), dy);
  };
  auto const x_d = upload(r, x);
  auto const r_d = upload(r, residual);
  auto const g_d = upload(r, gamma);
  auto const dy_d = upload(r, dy);
  auto const dx = upload(r, Host(x.size(), kNaN));
  auto const dgamma = upload(r, Host(gamma.size(), 0.0f));
  auto const dbeta = upload(r, Host(beta.size(), 0.0f));
  r.layer_norm_backward(
      {matrix(x_d), matrix(r_d), floats(g_d), eps, matrix(dy_d), matrix(dx), floats(dgamma), floats(dbeta)});
  Host const dx_host = download(r, dx);
  auto const check = [&](char const* what, Host const& operand, Host const& grad, double step, auto const& loss) {
    check_error(std::string("layer_norm_backward finite differences ") + what,
                directional_error(operand, grad, step, seed++, loss), bound);
  };
  check("dx", x, dx_host, h, [&](Host const& v) { return forward(v, residual, gamma, beta); });
  check("d residual (dx)", residual, dx_host, h, [&](Host const& v) { return forward(x, v, gamma, beta); });
  check("dgamma", gamma, download(r, dgamma), 1.0, [&](Host const& v) { return forward(x, residual, v, beta); });
  check("dbeta", beta, download(r, dbeta), 1.0, [&](Host const& v) { return forward(x, residual, gamma, v); });
}

// Inputs kept 0.05 away from 0, where relu bends.
template <TrainingOpRunner R>
void activation_finite_differences(R const& r, std::uint32_t seed, double h, double bound) {
  std::int64_t const rows = 6, cols = 40;
  for (Activation act : kEveryActivation) {
    Host x = random_values(std::size_t(rows * cols), 2.0f, seed++);
    for (float& v : x) v = std::copysign(std::max(std::abs(v), 0.05f), v);
    Host const dy = random_values(x.size(), 1.0f, seed++);
    auto const matrix = [&](auto const& buffer) { return MatrixRef{buffer.data(), DType::kF32, rows, cols, cols}; };
    auto const forward = [&](Host const& xv) {
      auto const x_d = upload(r, xv);
      auto const out = upload(r, Host(x.size(), kNaN));
      r.activation({matrix(x_d), MatrixRef{}, matrix(out), act});
      return weighted_sum(download(r, out), dy);
    };
    auto const x_d = upload(r, x);
    auto const dy_d = upload(r, dy);
    auto const dx = upload(r, Host(x.size(), kNaN));
    r.activation({matrix(x_d), matrix(dy_d), matrix(dx), act});
    check_error("activation finite differences " + activation_name(act),
                directional_error(x, download(r, dx), h, seed++, forward), bound);
  }
}

// conv1d's forward (identity activation, with bias) over the small layout's holes and edges; linear in each
// operand.
template <TrainingOpRunner R>
void conv1d_finite_differences(R const& r, std::uint32_t seed, double bound) {
  std::int64_t const channels = 12, kernel = 5, groups = 2;
  PackedLayout const layout = small_layout();
  std::int64_t const tokens = layout.tokens();
  DeviceLayout<R> const sequences(r, layout);
  Host const x = random_values(std::size_t(tokens * channels), 1.0f, seed++);
  Host const weight = random_values(std::size_t(channels * channels / groups * kernel), 0.3f, seed++);
  Host const bias = random_values(std::size_t(channels), 0.3f, seed++);
  Host const dpre = random_values(x.size(), 1.0f, seed++);
  auto const matrix = [&](auto const& buffer) {
    return MatrixRef{buffer.data(), DType::kF32, tokens, channels, channels};
  };
  auto const forward = [&](Host const& xv, Host const& wv, Host const& bv) {
    auto const x_d = upload(r, xv);
    auto const w_d = upload(r, wv);
    auto const b_d = upload(r, bv);
    auto const out = upload(r, Host(x.size(), kNaN));
    r.conv1d(
        {matrix(x_d), w_d.data(), b_d.data(), kernel, groups, Activation::kIdentity, matrix(out), sequences.layout});
    return weighted_sum(download(r, out), dpre);
  };
  auto const x_d = upload(r, x);
  auto const w_d = upload(r, weight);
  auto const dpre_d = upload(r, dpre);
  auto const dx = upload(r, Host(x.size(), kNaN));
  auto const dweight = upload(r, Host(weight.size(), 0.0f));
  auto const dbias = upload(r, Host(bias.size(), 0.0f));
  r.conv1d_backward({matrix(x_d), floats(w_d), kernel, groups, matrix(dpre_d), matrix(dx), floats(dweight),
                     floats(dbias), sequences.layout});
  check_error(
      "conv1d_backward finite differences dx",
      directional_error(x, download(r, dx), 1.0, seed++, [&](Host const& v) { return forward(v, weight, bias); }),
      bound);
  check_error(
      "conv1d_backward finite differences dweight",
      directional_error(weight, download(r, dweight), 1.0, seed++, [&](Host const& v) { return forward(x, v, bias); }),
      bound);
  check_error(
      "conv1d_backward finite differences dbias",
      directional_error(bias, download(r, dbias), 1.0, seed++, [&](Host const& v) { return forward(x, weight, v); }),
      bound);
}

// Wrong dtypes, shapes that do not agree and out-of-range arguments throw Error before anything runs.
template <TrainingOpRunner R>
void rejects_bad_arguments(R const& r) {
  auto const buffer = upload(r, Host(64 * 64, 1.0f));
  auto const ids = upload(r, Indices(8, 0));
  auto const m = [&](std::int64_t rows, std::int64_t cols) {
    return MatrixRef{buffer.data(), DType::kF32, rows, cols, cols};
  };
  MatrixRef half = m(4, 3);
  half.dtype = DType::kF16;
  float* const values = floats(buffer);
  CHECK_THROWS_AS(r.linear_backward({m(4, 5), m(3, 5), half, m(4, 5), MatrixRef{}, nullptr}), Error);
  CHECK_THROWS_AS(r.linear_backward({m(4, 5), m(3, 6), m(4, 3), m(4, 5), MatrixRef{}, nullptr}), Error);
  CHECK_THROWS_AS(r.linear_backward({m(4, 5), m(3, 5), m(4, 3), MatrixRef{}, m(3, 4), nullptr}), Error);
  CHECK_THROWS_AS(r.layer_norm_backward({m(4, 8), MatrixRef{}, values, 1e-5f, m(5, 8), m(4, 8), values, values}),
                  Error);
  CHECK_THROWS_AS(r.layer_norm_backward({m(4, 8), m(4, 7), values, 1e-5f, m(4, 8), m(4, 8), values, values}), Error);
  CHECK_THROWS_AS(r.activation({m(4, 8), MatrixRef{}, m(4, 9), Activation::kGelu}), Error);
  CHECK_THROWS_AS(r.activation({m(4, 8), half, m(4, 8), Activation::kGelu}), Error);
  auto const index = static_cast<std::int32_t const*>(ids.data());
  CHECK_THROWS_AS(r.embedding_backward({index, index, index, m(8, 6), m(10, 5), MatrixRef{}, MatrixRef{}}), Error);
  auto const out_of_range = upload(r, Indices{0, 3, 10, 1});
  CHECK_THROWS_AS(r.embedding_backward({static_cast<std::int32_t const*>(out_of_range.data()), nullptr, nullptr,
                                        m(4, 6), m(10, 6), MatrixRef{}, MatrixRef{}}),
                  Error);
  PackedLayout const layout = small_layout();
  DeviceLayout<R> const sequences(r, layout);
  std::int64_t const tokens = layout.tokens();
  CHECK_THROWS_AS(
      r.conv1d_backward({m(tokens, 12), values, 3, 5, m(tokens, 12), m(tokens, 12), values, values, sequences.layout}),
      Error);
  CHECK_THROWS_AS(
      r.conv1d_backward({m(tokens, 12), values, 3, 1, m(tokens, 12), m(tokens, 11), values, values, sequences.layout}),
      Error);
  CHECK_THROWS_AS(r.dropout({m(4, 8), m(8, 4), 0.1f, 0, 0}), Error);
  CHECK_THROWS_AS(r.fill(half, 0.0f), Error);
  CHECK_THROWS_AS(r.sum_of_squares(values, -1), Error);
}

// Every op once on inputs from `seed` at sizes that split over several threads, for a test to compare the
// outputs bit for bit between runs or thread counts. Accumulated outputs start from the same random values.
struct NamedOutput {
  std::string name;
  std::vector<double> values;  // float32 results, exactly; sum_of_squares's float64
};

template <TrainingOpRunner R>
std::vector<NamedOutput> run_every_op(R const& r, std::uint32_t seed) {
  std::vector<NamedOutput> outputs;
  auto const keep = [&](std::string name, Host const& values) {
    outputs.push_back({std::move(name), as_double(values)});
  };
  std::int64_t const tokens = 600, hidden = 768, outputs_n = 256;
  auto const random_matrix = [&](std::int64_t rows, std::int64_t cols) {
    return upload(r, make_matrix(rows, cols, 0, 1.0f, seed++));
  };
  auto const x = random_matrix(tokens, hidden);
  auto const dy = random_matrix(tokens, hidden);
  auto const w = random_matrix(outputs_n, hidden);
  auto const dy_linear = random_matrix(tokens, outputs_n);
  {
    auto const dx = random_matrix(tokens, hidden);
    auto const dw = random_matrix(outputs_n, hidden);
    auto const db = upload(r, random_values(std::size_t(outputs_n), 1.0f, seed++));
    r.linear_backward({x.ref(), w.ref(), dy_linear.ref(), dx.ref(), dw.ref(), floats(db), true});
    keep("linear dx", download(r, dx).values);
    keep("linear dw", download(r, dw).values);
    keep("linear db", download(r, db));
  }
  {
    auto const residual = random_matrix(tokens, hidden);
    auto const gamma = upload(r, random_values(std::size_t(hidden), 0.3f, seed++, 1.0f));
    auto const dx = random_matrix(tokens, hidden);
    auto const dgamma = upload(r, random_values(std::size_t(hidden), 1.0f, seed++));
    auto const dbeta = upload(r, random_values(std::size_t(hidden), 1.0f, seed++));
    r.layer_norm_backward(
        {x.ref(), residual.ref(), floats(gamma), 1e-7f, dy.ref(), dx.ref(), floats(dgamma), floats(dbeta)});
    keep("layer_norm dx", download(r, dx).values);
    keep("layer_norm dgamma", download(r, dgamma));
    keep("layer_norm dbeta", download(r, dbeta));
  }
  {
    auto const out = random_matrix(tokens, hidden);
    r.activation({x.ref(), dy.ref(), out.ref(), Activation::kGelu});
    keep("activation gelu backward", download(r, out).values);
  }
  {
    std::mt19937 gen(seed++);
    auto const size = static_cast<std::size_t>(tokens);
    Indices ids(size), positions(size), types(size);
    for (std::size_t t = 0; t < ids.size(); ++t) {
      ids[t] = std::int32_t(gen() % 100);
      positions[t] = std::int32_t(t % 512);
      types[t] = std::int32_t(gen() % 2);
    }
    auto const ids_d = upload(r, ids), positions_d = upload(r, positions), types_d = upload(r, types);
    auto const dword = random_matrix(100, hidden), dposition = random_matrix(512, hidden),
               dtype = random_matrix(2, hidden);
    auto const index = [](auto const& b) { return static_cast<std::int32_t const*>(b.data()); };
    r.embedding_backward(
        {index(ids_d), index(positions_d), index(types_d), dy.ref(), dword.ref(), dposition.ref(), dtype.ref()});
    keep("embedding dword", download(r, dword).values);
    keep("embedding dposition", download(r, dposition).values);
    keep("embedding dtoken_type", download(r, dtype).values);
  }
  {
    PackedLayout const layout = large_layout();
    DeviceLayout<R> const sequences(r, layout);
    std::int64_t const channels = 128, kernel = 3;
    auto const conv_x = random_matrix(layout.tokens(), channels);
    auto const dpre = random_matrix(layout.tokens(), channels);
    auto const weight = upload(r, random_values(std::size_t(channels * channels * kernel), 0.1f, seed++));
    auto const dx = random_matrix(layout.tokens(), channels);
    auto const dweight = upload(r, random_values(std::size_t(channels * channels * kernel), 1.0f, seed++));
    auto const dbias = upload(r, random_values(std::size_t(channels), 1.0f, seed++));
    r.conv1d_backward({conv_x.ref(), floats(weight), kernel, 1, dpre.ref(), dx.ref(), floats(dweight), floats(dbias),
                       sequences.layout});
    keep("conv1d dx", download(r, dx).values);
    keep("conv1d dweight", download(r, dweight));
    keep("conv1d dbias", download(r, dbias));
  }
  {
    auto const out = random_matrix(tokens, hidden);
    r.dropout({x.ref(), out.ref(), 0.1f, 1234, 99});
    keep("dropout", download(r, out).values);
  }
  {
    std::size_t const count = std::size_t(tokens * hidden);
    auto const weights = upload(r, random_values(count, 1.0f, seed++));
    auto const grads = upload(r, random_values(count, 0.1f, seed++));
    auto const exp_avg = upload(r, Host(count, 0.0f));
    auto const exp_avg_sq = upload(r, Host(count, 0.0f));
    AdamWArgs args;
    args.weights = floats(weights);
    args.grads = floats(grads);
    args.exp_avg = floats(exp_avg);
    args.exp_avg_sq = floats(exp_avg_sq);
    args.count = std::int64_t(count);
    args.weight_decay = 0.01;
    for (args.step = 1; args.step <= 2; ++args.step) r.adamw(args);
    keep("adamw weights", download(r, weights));
    keep("adamw exp_avg_sq", download(r, exp_avg_sq));
    outputs.push_back({"sum_of_squares", {r.sum_of_squares(floats(grads), std::int64_t(count))}});
  }
  return outputs;
}

}  // namespace flashdeberta::training_tests

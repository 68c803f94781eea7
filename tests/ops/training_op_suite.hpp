// The training ops against training_reference.hpp, one body per op, generic over the runner
// (training_test_support.hpp). Each body draws its inputs from `seed`, covers views, odd sizes, accumulation into
// pre-filled gradients and the aliasing the contract allows, and checks every output at `bound`
// (max_error's measure: relative above 1, absolute below).
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "training_test_support.hpp"

namespace flashdeberta::training_tests {

inline constexpr Activation kEveryActivation[] = {
    Activation::kIdentity, Activation::kGelu, Activation::kGeluTanh, Activation::kGeluFast, Activation::kQuickGelu,
    Activation::kRelu,     Activation::kTanh, Activation::kSigmoid,  Activation::kSilu,     Activation::kMish};

inline std::string activation_name(Activation act) {
  char const* const names[] = {"identity", "gelu", "gelu_tanh", "gelu_fast", "quick_gelu",
                               "relu",     "tanh", "sigmoid",   "silu",      "mish"};
  return names[int(act)];
}

inline std::string shape_text(std::int64_t a, std::int64_t b) {
  return "(" + std::to_string(a) + ", " + std::to_string(b) + ")";
}

struct LinearCase {
  std::int64_t rows, outputs, inputs, pad;  // M, N, K; extra columns of every matrix's row stride
  bool dx, accumulate_dx, dw, db;
};

template <TrainingOpRunner R>
void linear_backward_cases(R const& r, std::uint32_t seed, double bound) {
  for (LinearCase const& c :
       {LinearCase{1, 1, 1, 0, true, false, true, true}, LinearCase{7, 13, 5, 3, true, true, true, true},
        LinearCase{130, 70, 100, 5, true, false, true, true},
        LinearCase{2050, 5, 33, 0, true, true, true, true},  // db over many rows
        LinearCase{64, 48, 40, 1, true, false, false, false}, LinearCase{9, 11, 6, 2, false, false, true, true}}) {
    std::string const label = "linear_backward M N K " + std::to_string(c.rows) + " " + std::to_string(c.outputs) +
                              " " + std::to_string(c.inputs);
    HostMatrix const x = make_matrix(c.rows, c.inputs, c.pad, 1.0f, seed++);
    HostMatrix const w = make_matrix(c.outputs, c.inputs, c.pad, 0.5f, seed++);
    HostMatrix const dy = make_matrix(c.rows, c.outputs, c.pad, 1.0f, seed++);
    HostMatrix const dx_before = c.accumulate_dx ? make_matrix(c.rows, c.inputs, c.pad + 1, 1.0f, seed++, kSentinel)
                                                 : poisoned_matrix(c.rows, c.inputs, c.pad + 1);
    HostMatrix const dw_before = make_matrix(c.outputs, c.inputs, c.pad + 2, 1.0f, seed++, kSentinel);
    Host const db_before = random_values(std::size_t(c.outputs), 1.0f, seed++);
    auto const x_d = upload(r, x);
    auto const w_d = upload(r, w);
    auto const dy_d = upload(r, dy);
    auto const dx = upload(r, dx_before);
    auto const dw = upload(r, dw_before);
    auto const db = upload(r, db_before);
    r.linear_backward({x_d.ref(), w_d.ref(), dy_d.ref(), c.dx ? dx.ref() : MatrixRef{}, c.dw ? dw.ref() : MatrixRef{},
                       c.db ? floats(db) : nullptr, c.accumulate_dx});
    ref::LinearGradients const want = ref::linear_backward(x.dense(), w.dense(), dy.dense());
    if (c.dx)
      check_matrix(label + " dx", download(r, dx), want.dx, c.accumulate_dx ? &dx_before : nullptr, Scale::kOutput,
                   bound);
    if (c.dw) {
      check_matrix(label + " dw", download(r, dw), want.dw, &dw_before, Scale::kOutput, bound);
    } else {
      CHECK_MESSAGE(download(r, dw).values == dw_before.values, label << ": dw was written though not asked for");
    }
    if (c.db) {
      check_error(label + " db", max_error(download(r, db), plus(want.db, db_before), Scale::kOutput), bound);
    } else {
      CHECK_MESSAGE(download(r, db) == db_before, label << ": db was written though not asked for");
    }
  }
}

struct LayerNormCase {
  std::int64_t rows, cols, pad;
  bool residual, accumulate_dx, parameter_grads;
  float eps, mean;  // mean: of x's values, where the statistics' cancellation shows
};

template <TrainingOpRunner R>
void layer_norm_backward_cases(R const& r, std::uint32_t seed, double bound) {
  for (LayerNormCase const& c :
       {LayerNormCase{1, 7, 0, false, false, true, 1e-7f, 0.0f}, LayerNormCase{7, 13, 2, true, true, true, 1e-5f, 0.0f},
        LayerNormCase{130, 70, 3, true, false, true, 1e-7f, 5.0f},
        LayerNormCase{40, 33, 1, false, false, false, 1e-12f, 0.0f},
        LayerNormCase{571, 768, 0, true, false, true, 1e-7f, 0.0f}}) {
    std::string const label = "layer_norm_backward " + shape_text(c.rows, c.cols) + (c.residual ? " residual" : "") +
                              (c.accumulate_dx ? " accumulate_dx" : "");
    HostMatrix x = make_matrix(c.rows, c.cols, c.pad, 1.0f, seed++);
    for (std::int64_t i = 0; i < c.rows; ++i)
      for (std::int64_t j = 0; j < c.cols; ++j) x.at(i, j) += c.mean;
    HostMatrix const residual = make_matrix(c.rows, c.cols, c.pad + 1, 1.0f, seed++);
    Host const gamma = random_values(std::size_t(c.cols), 0.3f, seed++, 1.0f);
    HostMatrix const dy = make_matrix(c.rows, c.cols, c.pad, 1.0f, seed++);
    HostMatrix const dx_before = c.accumulate_dx ? make_matrix(c.rows, c.cols, c.pad + 2, 1.0f, seed++, kSentinel)
                                                 : poisoned_matrix(c.rows, c.cols, c.pad + 2);
    Host const dgamma_before = random_values(std::size_t(c.cols), 1.0f, seed++);
    Host const dbeta_before = random_values(std::size_t(c.cols), 1.0f, seed++);
    auto const x_d = upload(r, x);
    auto const residual_d = upload(r, residual);
    auto const gamma_d = upload(r, gamma);
    auto const dy_d = upload(r, dy);
    auto const dx = upload(r, dx_before);
    auto const dgamma = upload(r, dgamma_before);
    auto const dbeta = upload(r, dbeta_before);
    r.layer_norm_backward({x_d.ref(), c.residual ? residual_d.ref() : MatrixRef{}, floats(gamma_d), c.eps, dy_d.ref(),
                           dx.ref(), c.parameter_grads ? floats(dgamma) : nullptr,
                           c.parameter_grads ? floats(dbeta) : nullptr, c.accumulate_dx});
    ref::Dense sum(c.rows, c.cols);  // x + residual in float32, as the forward forms it
    for (std::int64_t i = 0; i < c.rows; ++i)
      for (std::int64_t j = 0; j < c.cols; ++j) sum(i, j) = c.residual ? x.at(i, j) + residual.at(i, j) : x.at(i, j);
    ref::LayerNormGradients const want = ref::layer_norm_backward(sum, as_double(gamma), c.eps, dy.dense());
    check_matrix(label + " dx", download(r, dx), want.dx, c.accumulate_dx ? &dx_before : nullptr, Scale::kOutput,
                 bound);
    if (c.parameter_grads) {
      check_error(label + " dgamma", max_error(download(r, dgamma), plus(want.dgamma, dgamma_before), Scale::kOutput),
                  bound);
      check_error(label + " dbeta", max_error(download(r, dbeta), plus(want.dbeta, dbeta_before), Scale::kOutput),
                  bound);
    } else {
      CHECK(download(r, dgamma) == dgamma_before);
      CHECK(download(r, dbeta) == dbeta_before);
    }
  }
}

// Normal inputs of stddev 3 and, in the first row, the saturated regions: mish's softplus switch at 20, the
// logistic's exp overflowing at -90.
inline HostMatrix activation_input(std::int64_t rows, std::int64_t cols, std::int64_t pad, std::uint32_t seed,
                                   float padding) {
  HostMatrix x = make_matrix(rows, cols, pad, 3.0f, seed, padding);
  float const extremes[] = {25.0f, -25.0f, 90.0f, -90.0f, 19.99f, 20.01f};
  for (std::int64_t c = 0; c < std::min<std::int64_t>(cols, 6); ++c) x.at(0, c) = extremes[c];
  return x;
}

// How activation_cases writes each result: into an output of its own, in place (out = x forward, out = dy
// backward), or added to an output holding random values (accumulate).
enum class ActivationOutput { kSeparate, kInPlace, kAccumulate };

// Forward and backward of every activation, each into every kind of output.
template <TrainingOpRunner R>
void activation_cases(R const& r, std::uint32_t seed, double bound) {
  char const* const output_names[] = {"", " in place", " accumulate"};
  for (Activation act : kEveryActivation) {
    for (ActivationOutput output :
         {ActivationOutput::kSeparate, ActivationOutput::kInPlace, ActivationOutput::kAccumulate}) {
      bool const in_place = output == ActivationOutput::kInPlace;
      bool const accumulate = output == ActivationOutput::kAccumulate;
      std::int64_t const rows = in_place ? 130 : 7;
      std::int64_t const cols = in_place ? 70 : 13;
      std::string const label = "activation " + activation_name(act) + output_names[int(output)];
      float const padding = in_place ? kSentinel : kNaN;
      HostMatrix const x = activation_input(rows, cols, 2, seed++, padding);
      HostMatrix const dy = make_matrix(rows, cols, 3, 1.0f, seed++, padding);
      ref::Dense forward(rows, cols);
      ref::Dense backward(rows, cols);
      for (std::int64_t i = 0; i < rows; ++i) {
        for (std::int64_t j = 0; j < cols; ++j) {
          forward(i, j) = ref::activation(act, x.at(i, j));
          backward(i, j) = dy.at(i, j) * ref::activation_derivative(act, x.at(i, j));
        }
      }
      HostMatrix const forward_before =
          accumulate ? make_matrix(rows, cols, 1, 1.0f, seed++, kSentinel) : poisoned_matrix(rows, cols, 1);
      HostMatrix const backward_before =
          accumulate ? make_matrix(rows, cols, 4, 1.0f, seed++, kSentinel) : poisoned_matrix(rows, cols, 4);
      auto const x_d = upload(r, x);
      auto const dy_d = upload(r, dy);
      auto const out_forward = upload(r, forward_before);
      auto const out_backward = upload(r, backward_before);
      auto const& forward_out = in_place ? x_d : out_forward;
      ActivationArgs args{x_d.ref(), MatrixRef{}, forward_out.ref(), act};
      args.accumulate = accumulate;
      r.activation(args);
      check_matrix(label + " forward", download(r, forward_out), forward, accumulate ? &forward_before : nullptr,
                   Scale::kElement, bound);
      auto const x_again = upload(r, x);  // the forward in place overwrote x_d
      auto const& backward_out = in_place ? dy_d : out_backward;
      args = ActivationArgs{x_again.ref(), dy_d.ref(), backward_out.ref(), act};
      args.accumulate = accumulate;
      r.activation(args);
      check_matrix(label + " backward", download(r, backward_out), backward, accumulate ? &backward_before : nullptr,
                   Scale::kElement, bound);
    }
  }
}

struct EmbeddingCase {
  std::int64_t tokens, width, words, positions, types, pad;  // positions, types: 0 for no such table
};

// Repeated ids (300 tokens over 50 words), every table or only the words, tables as views.
template <TrainingOpRunner R>
void embedding_backward_cases(R const& r, std::uint32_t seed, double bound) {
  for (EmbeddingCase const& c :
       {EmbeddingCase{1, 5, 3, 4, 2, 0}, EmbeddingCase{300, 37, 50, 64, 2, 3}, EmbeddingCase{300, 200, 50, 0, 0, 1}}) {
    std::string const label = "embedding_backward T " + std::to_string(c.tokens) + " E " + std::to_string(c.width);
    std::mt19937 gen(seed++);
    auto const draw = [&](std::int64_t n) {
      Indices v(std::size_t(c.tokens), 0);
      for (auto& i : v) i = n > 0 ? std::int32_t(gen() % std::uint32_t(n)) : 0;
      return v;
    };
    Indices const ids = draw(c.words);
    Indices const positions = draw(c.positions);
    Indices const types = draw(c.types);
    HostMatrix const dout = make_matrix(c.tokens, c.width, c.pad, 1.0f, seed++);
    HostMatrix const word_before = make_matrix(c.words, c.width, c.pad + 1, 1.0f, seed++, kSentinel);
    HostMatrix const position_before = make_matrix(c.positions, c.width, c.pad, 1.0f, seed++, kSentinel);
    HostMatrix const type_before = make_matrix(c.types, c.width, c.pad + 2, 1.0f, seed++, kSentinel);
    auto const ids_d = upload(r, ids);
    auto const positions_d = upload(r, positions);
    auto const types_d = upload(r, types);
    auto const dout_d = upload(r, dout);
    auto const dword = upload(r, word_before);
    auto const dposition = upload(r, position_before);
    auto const dtype = upload(r, type_before);
    auto const indices = [](auto const& buffer) { return static_cast<std::int32_t const*>(buffer.data()); };
    r.embedding_backward({indices(ids_d), indices(positions_d), indices(types_d), dout_d.ref(), dword.ref(),
                          c.positions > 0 ? dposition.ref() : MatrixRef{}, c.types > 0 ? dtype.ref() : MatrixRef{}});
    check_matrix(label + " dword", download(r, dword), ref::embedding_backward(ids, dout.dense(), c.words),
                 &word_before, Scale::kOutput, bound);
    if (c.positions > 0) {
      check_matrix(label + " dposition", download(r, dposition),
                   ref::embedding_backward(positions, dout.dense(), c.positions), &position_before, Scale::kOutput,
                   bound);
    }
    if (c.types > 0) {
      check_matrix(label + " dtoken_type", download(r, dtype), ref::embedding_backward(types, dout.dense(), c.types),
                   &type_before, Scale::kOutput, bound);
    }
  }
}

struct ConvCase {
  std::int64_t channels, kernel, groups;
  bool large;  // large_layout(), else small_layout()
  bool dx, parameter_grads;
};

template <TrainingOpRunner R>
void conv1d_backward_cases(R const& r, std::uint32_t seed, double bound) {
  for (ConvCase const& c : {ConvCase{12, 1, 1, false, true, true}, ConvCase{12, 3, 1, false, true, true},
                            ConvCase{12, 3, 3, false, true, true}, ConvCase{12, 5, 4, false, true, true},
                            ConvCase{12, 5, 2, false, true, false}, ConvCase{12, 3, 2, false, false, true},
                            ConvCase{64, 3, 2, true, true, true}, ConvCase{24, 7, 1, true, true, true}}) {
    std::string const label = "conv1d_backward C " + std::to_string(c.channels) + " kernel " +
                              std::to_string(c.kernel) + " groups " + std::to_string(c.groups) +
                              (c.large ? " (271 tokens)" : " (30 tokens)");
    PackedLayout const layout = c.large ? large_layout() : small_layout();
    std::int64_t const tokens = layout.tokens();
    std::size_t const weights = std::size_t(c.channels * (c.channels / c.groups) * c.kernel);
    HostMatrix const x = make_matrix(tokens, c.channels, 2, 1.0f, seed++);
    Host const weight = random_values(weights, 0.3f, seed++);
    HostMatrix const dpre = make_matrix(tokens, c.channels, 1, 1.0f, seed++);
    Host const dweight_before = random_values(weights, 1.0f, seed++);
    Host const dbias_before = random_values(std::size_t(c.channels), 1.0f, seed++);
    DeviceLayout<R> const sequences(r, layout);
    auto const x_d = upload(r, x);
    auto const weight_d = upload(r, weight);
    auto const dpre_d = upload(r, dpre);
    auto const dx = upload(r, poisoned_matrix(tokens, c.channels, 3));
    auto const dweight = upload(r, dweight_before);
    auto const dbias = upload(r, dbias_before);
    r.conv1d_backward({x_d.ref(), floats(weight_d), c.kernel, c.groups, dpre_d.ref(), c.dx ? dx.ref() : MatrixRef{},
                       c.parameter_grads ? floats(dweight) : nullptr, c.parameter_grads ? floats(dbias) : nullptr,
                       sequences.layout});
    ref::Conv1dGradients const want =
        ref::conv1d_backward(x.dense(), as_double(weight), c.kernel, c.groups, layout.sequences, dpre.dense());
    if (c.dx) check_matrix(label + " dx", download(r, dx), want.dx, nullptr, Scale::kOutput, bound);
    if (c.parameter_grads) {
      check_error(label + " dweight",
                  max_error(download(r, dweight), plus(want.dweight, dweight_before), Scale::kOutput), bound);
      check_error(label + " dbias", max_error(download(r, dbias), plus(want.dbias, dbias_before), Scale::kOutput),
                  bound);
    } else {
      CHECK(download(r, dweight) == dweight_before);
      CHECK(download(r, dbias) == dbias_before);
    }
  }
}

// Which elements a dropout output kept (non-zero: the inputs are never zero).
inline std::vector<bool> kept(Host const& out) {
  std::vector<bool> mask(out.size());
  for (std::size_t i = 0; i < out.size(); ++i) mask[i] = out[i] != 0.0f;
  return mask;
}

inline double agreement(std::vector<bool> const& a, std::vector<bool> const& b) {
  std::size_t same = 0;
  for (std::size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
  return double(same) / double(a.size());
}

// Dropout's values against the reference, its mask's statistics, the forward and backward drawing one mask, seeds
// and offsets drawing different ones, the counter of a row range, in place, p = 0, and p outside [0, 1).
template <TrainingOpRunner R>
void dropout_cases(R const& r, std::uint32_t seed, double bound) {
  std::int64_t const rows = 300;
  std::int64_t const cols = 200;
  auto const run = [&](HostMatrix const& x, float p, std::uint64_t mask_seed, std::uint64_t offset) {
    auto const x_d = upload(r, x);
    auto const out = upload(r, poisoned_matrix(x.rows, x.cols, 2));
    r.dropout({x_d.ref(), out.ref(), p, mask_seed, offset});
    return download(r, out);
  };
  HostMatrix x = make_matrix(rows, cols, 3, 0.25f, seed++);
  for (float& v : x.values) v = std::isnan(v) ? v : 1.0f + std::abs(v);  // never zero
  HostMatrix const dy = make_matrix(rows, cols, 1, 1.0f, seed++);
  for (float p : {0.1f, 0.5f, 0.9f}) {
    std::string const label = "dropout p " + std::to_string(p);
    HostMatrix const out = run(x, p, 42, 1000);
    check_matrix(label, out, ref::dropout(x.dense(), p, 42, 1000), nullptr, Scale::kElement, bound);
    auto const mask = kept(out.view());
    double const n = double(mask.size());
    double const kept_fraction = agreement(mask, std::vector<bool>(mask.size(), true));
    double const sigma = std::sqrt(p * (1.0 - p) / n);
    MESSAGE(label << ": kept " << kept_fraction << ", expected " << 1.0 - p << " +- " << sigma);
    CHECK(std::abs(kept_fraction - (1.0 - p)) <= 5.0 * sigma);
    CHECK_MESSAGE(kept(run(dy, p, 42, 1000).view()) == mask, label << ": the backward drew another mask");
    double const chance = p * p + (1.0 - p) * (1.0 - p);  // two independent masks agree this often
    for (auto const& other : {kept(run(x, p, 43, 1000).view()), kept(run(x, p, 42, 1001).view())}) {
      double const same = agreement(mask, other);
      MESSAGE(label << ": another seed or offset agrees on " << same << " (independent: " << chance << ")");
      CHECK(std::abs(same - chance) <= 5.0 * std::sqrt(chance * (1.0 - chance) / n));
    }
  }
  // Rows [100, 200) as a view of their own, at offset + 100 cols: the counter counts elements, not ld.
  HostMatrix rows_view{100, cols, x.ld, Host(x.values.begin() + 100 * x.ld, x.values.begin() + 200 * x.ld)};
  HostMatrix const whole = run(x, 0.3f, 7, 5);
  HostMatrix const part = run(rows_view, 0.3f, 7, 5 + 100 * cols);
  Host const whole_view = whole.view();
  Host const whole_rows(whole_view.begin() + 100 * cols, whole_view.begin() + 200 * cols);
  CHECK_MESSAGE(part.view() == whole_rows, "dropout of a row range drew another mask than the whole");
  // In place, and p = 0 copying exactly.
  HostMatrix in_place_input = x;
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = x.cols; j < x.ld; ++j) in_place_input.at(i, j) = kSentinel;
  auto const in_place = upload(r, in_place_input);
  r.dropout({in_place.ref(), in_place.ref(), 0.3f, 7, 5});
  CHECK_MESSAGE(download(r, in_place).view() == whole.view(), "dropout in place differs");
  CHECK(run(x, 0.0f, 7, 5).view() == x.view());
  auto const x_d = upload(r, x);
  auto const out = upload(r, poisoned_matrix(rows, cols, 0));
  for (float p : {1.0f, -0.1f, 1.5f}) CHECK_THROWS_AS(r.dropout({x_d.ref(), out.ref(), p, 0, 0}), Error);
}

// Three AdamW steps against the reference, which stores float32 like the op: the results should agree to the
// float32 rounding of the last operation. `max_ulps`: in units of the float32 spacing at the reference value.
template <TrainingOpRunner R>
void adamw_cases(R const& r, std::uint32_t seed, double max_ulps) {
  struct Case {
    std::int64_t count;
    double learning_rate, weight_decay, grad_scale;
  };
  for (Case const& c : {Case{1037, 1e-3, 0.01, 0.5}, Case{1, 5e-5, 0.0, 1.0}, Case{4099, 2e-2, 0.1, 0.25}}) {
    std::string const label = "adamw " + std::to_string(c.count) + " values, lr " + std::to_string(c.learning_rate) +
                              " wd " + std::to_string(c.weight_decay) + " grad_scale " + std::to_string(c.grad_scale);
    std::vector<float> weights = random_values(std::size_t(c.count), 1.0f, seed++);
    std::vector<float> exp_avg(weights.size(), 0.0f);
    std::vector<float> exp_avg_sq(weights.size(), 0.0f);
    auto const weights_d = upload(r, weights);
    auto const exp_avg_d = upload(r, exp_avg);
    auto const exp_avg_sq_d = upload(r, exp_avg_sq);
    double worst = 0.0;
    for (std::int64_t step = 1; step <= 3; ++step) {
      Host grads = random_values(weights.size(), 0.1f, seed++);
      grads[0] = 0.0f;  // a zero gradient: the update runs on the moments alone
      auto const grads_d = upload(r, grads);
      AdamWArgs args;
      args.weights = floats(weights_d);
      args.grads = floats(grads_d);
      args.exp_avg = floats(exp_avg_d);
      args.exp_avg_sq = floats(exp_avg_sq_d);
      args.count = c.count;
      args.learning_rate = c.learning_rate;
      args.weight_decay = c.weight_decay;
      args.grad_scale = c.grad_scale;
      args.step = step;
      r.adamw(args);
      ref::adamw_step(args, weights, grads, exp_avg, exp_avg_sq);
      for (auto const& [ours, want] :
           {std::pair{download(r, weights_d), weights}, std::pair{download(r, exp_avg_d), exp_avg},
            std::pair{download(r, exp_avg_sq_d), exp_avg_sq}}) {
        for (std::size_t i = 0; i < want.size(); ++i) {
          double const ulp = std::max(double(std::nextafter(std::abs(want[i]), INFINITY)) - std::abs(want[i]),
                                      double(std::numeric_limits<float>::denorm_min()));
          double const ulps = std::abs(double(ours[i]) - double(want[i])) / ulp;
          if (!(ulps <= worst)) worst = std::isnan(ulps) ? INFINITY : ulps;
        }
      }
    }
    MESSAGE(label << ": 3 steps, weights and moments within " << worst << " float32 ulp of the reference");
    CHECK(worst <= max_ulps);
  }
  AdamWArgs step_zero;
  step_zero.step = 0;
  CHECK_THROWS_AS(r.adamw(step_zero), Error);
}

template <TrainingOpRunner R>
void fill_cases(R const& r) {
  // The last two split over threads: one long row (the optimizer zeroes a block of gradients so), and a view
  // whose threads' ranges start and end inside rows.
  for (auto [rows, cols, pad] : {std::tuple{7, 13, 3}, std::tuple{130, 70, 0}, std::tuple{1, 1, 1},
                                 std::tuple{1, 300001, 0}, std::tuple{257, 1000, 5}}) {
    auto const m = upload(r, poisoned_matrix(rows, cols, pad));
    r.fill(m.ref(), 2.5f);
    ref::Dense want(rows, cols);
    for (double& v : want.values) v = 2.5;
    check_matrix("fill " + shape_text(rows, cols), download(r, m), want, nullptr, Scale::kElement, 0.0);
  }
}

template <TrainingOpRunner R>
void sum_of_squares_cases(R const& r, std::uint32_t seed, double bound) {
  for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{1037}, std::size_t{300001}}) {
    Host const values = random_values(count, 2.0f, seed++);
    auto const buffer = upload(r, values);
    double const ours = r.sum_of_squares(count > 0 ? floats(buffer) : nullptr, std::int64_t(count));
    double const want = ref::sum_of_squares(values);
    check_error("sum_of_squares " + std::to_string(count), std::abs(ours - want) / std::max(1.0, want), bound);
  }
}

}  // namespace flashdeberta::training_tests

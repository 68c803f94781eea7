// The host attention backward (eager and flash, eigen_ops::attention_backward) against a float64 reference of the
// op's definition (attention_backward_reference.hpp), and against central differences of the forward we ship.
// Also the forwards' log-sum-exp output. Calls the ops directly with a thread count (no policy).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "attention_backward_errors.hpp"
#include "attention_backward_inputs.hpp"
#include "attention_backward_reference.hpp"
#include "flashdeberta/eigen/ops/attention_backward.hpp"
#include "flashdeberta/eigen/ops/attention_eager.hpp"
#include "flashdeberta/eigen/ops/attention_flash.hpp"
#include "flashdeberta/math/relative_position.hpp"

namespace {

using namespace flashdeberta;
using Floats = std::vector<float>;
using Doubles = std::vector<double>;

using attention_tests::Errors;
using attention_tests::relative_error;
using attention_tests::Spec;

MatrixRef matrix(Floats& v, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  return {v.data(), DType::kF32, rows, cols, ld};
}

// Sets the calling thread's OpenMP count (what Eigen's own GEMM threads read) for one call, as EigenPolicy does.
struct OmpThreads {
  int previous = 1;
  explicit OmpThreads([[maybe_unused]] int threads) {
#if defined(_OPENMP)
    previous = omp_get_max_threads();
    omp_set_num_threads(threads);
#endif
  }
  ~OmpThreads() {
#if defined(_OPENMP)
    omp_set_num_threads(previous);
#endif
  }
};

// One case's inputs (attention_backward_inputs.hpp), the buffers the ops write, and the args pointing at them.
struct Problem : attention_tests::Inputs {
  Floats out, lse, dqkv, dpos_key, dpos_query;
  static constexpr float kTableStart = attention_tests::kTableStart;

  explicit Problem(Spec const& s) : Inputs(s) { out.assign(static_cast<std::size_t>(tokens * width), 0.0f); }

  AttentionArgs forward(AttentionImpl impl, bool write_lse = false) {
    AttentionArgs a =
        args(qkv.data(), pos_key.data(), pos_query.data(), out.data(), cu.data(), positions.data(), index.data());
    a.impl = impl;
    if (write_lse) {
      lse.assign(static_cast<std::size_t>(spec.heads * tokens), std::numeric_limits<float>::quiet_NaN());
      a.lse = lse.data();
    }
    return a;
  }

  // The forward (writing out and lse), then the backward of `impl` into fresh gradient buffers.
  void run(AttentionImpl impl, bool use_lse, int threads) {
    OmpThreads const scope(threads);
    AttentionArgs const a = forward(impl, true);
    if (impl == AttentionImpl::kEager) {
      eigen_ops::attention_eager(a, threads);
    } else {
      eigen_ops::attention_flash(a, threads);
    }
    dqkv.assign(static_cast<std::size_t>(tokens * 3 * width), std::numeric_limits<float>::quiet_NaN());
    dpos_key.assign(static_cast<std::size_t>(slots * width), kTableStart);
    dpos_query.assign(static_cast<std::size_t>(slots * width), kTableStart);
    AttentionBackwardArgs g;
    g.forward = a;
    g.forward.lse = nullptr;
    g.dout = matrix(dout, tokens, width, dout_ld);
    g.lse = use_lse ? lse.data() : nullptr;
    AttentionArgs grads;
    view_fused_qkv(grads, matrix(dqkv, tokens, 3 * width, 3 * width), spec.head_size, spec.layout);
    g.dq = grads.q;
    g.dk = grads.k;
    g.dv = grads.v;
    if (spec.c2p) g.dpos_key = matrix(dpos_key, slots, width, width);
    if (spec.p2c) g.dpos_query = matrix(dpos_query, slots, width, width);
    eigen_ops::attention_backward(g, threads);
  }

  attention_reference::Result reference() {
    return attention_reference::run(forward(AttentionImpl::kFlash), dout.data(), dout_ld);
  }

  // Gradient `which` (0 q, 1 k, 2 v) of the fused buffer as a compact (T, A).
  Doubles gradient(int which) {
    AttentionArgs grads;
    view_fused_qkv(grads, matrix(dqkv, tokens, 3 * width, 3 * width), spec.head_size, spec.layout);
    MatrixRef const m = which == 0 ? grads.q : (which == 1 ? grads.k : grads.v);
    Doubles r(static_cast<std::size_t>(tokens * width));
    for (std::int64_t t = 0; t < tokens; ++t)
      for (std::int64_t h = 0; h < spec.heads; ++h)
        for (std::int64_t e = 0; e < spec.head_size; ++e)
          r[t * width + h * spec.head_size + e] = m.as<float>()[t * m.ld + h * grads.head_stride + e];
    return r;
  }

  static Doubles added(Floats const& table) {
    Doubles r(table.size());
    for (std::size_t x = 0; x < table.size(); ++x) r[x] = double{table[x]} - kTableStart;
    return r;
  }
};

Doubles widen(Floats const& v) { return Doubles(v.begin(), v.end()); }

constexpr double kTolerance = 1e-5;

// The backward of `impl` (flash: with and without the forward's lse) at 1 and 3 threads against the reference.
Errors check_case(Spec const& spec, AttentionImpl impl, Errors errors = {}) {
  Problem p(spec);
  attention_reference::Result const want = p.reference();
  for (int threads : {1, 3}) {
    for (bool use_lse : {false, true}) {
      if (impl == AttentionImpl::kEager && use_lse) continue;
      p.run(impl, use_lse, threads);
      Errors e;
      e.out = relative_error(widen(p.out), want.out);
      e.dq = relative_error(p.gradient(0), want.dq);
      e.dk = relative_error(p.gradient(1), want.dk);
      e.dv = relative_error(p.gradient(2), want.dv);
      if (spec.c2p) e.dpos_key = relative_error(Problem::added(p.dpos_key), want.dpos_key);
      if (spec.p2c) e.dpos_query = relative_error(Problem::added(p.dpos_query), want.dpos_query);
      INFO(spec.name(), impl == AttentionImpl::kEager ? " eager" : " flash", use_lse ? " lse" : "", " threads ",
           threads, ": ", e.text());
      CHECK(e.worst() < kTolerance);
      auto const untouched = [](Floats const& table) {  // a table the forward did not have gets no gradient
        return std::all_of(table.begin(), table.end(), [](float x) { return x == Problem::kTableStart; });
      };
      if (!spec.c2p) CHECK(untouched(p.dpos_key));
      if (!spec.p2c) CHECK(untouched(p.dpos_query));
      errors.take_max(e);
    }
  }
  return errors;
}

void check_cases(std::vector<Spec> const& specs, char const* what) {
  for (AttentionImpl impl : {AttentionImpl::kEager, AttentionImpl::kFlash}) {
    Errors errors;
    for (Spec const& spec : specs) errors = check_case(spec, impl, errors);
    MESSAGE(std::string(what) << (impl == AttentionImpl::kEager ? ", eager" : ", flash") << ": worst relative errors "
                              << errors.text());
  }
}

}  // namespace

TEST_CASE("attention backward: head sizes 8 to 64 and lengths 1 to 130 against the float64 reference") {
  std::vector<Spec> specs;
  std::uint32_t seed = 10;
  for (std::int64_t d : {8, 16, 32, 64}) {
    for (std::int32_t length : {1, 5, 37, 130}) {
      Spec s;
      s.lengths = {length};
      s.head_size = d;
      s.seed = seed++;
      specs.push_back(s);
    }
  }
  check_cases(specs, "head sizes x lengths");
}

TEST_CASE("attention backward: packed sequences with holes, v1 interleaved, each set of position terms") {
  std::vector<Spec> const specs = attention_tests::packed_position_term_specs(40);
  check_cases(specs, "packed, holes, interleaved");
}

TEST_CASE("attention backward: a short relative window saturates most pairs") {
  std::vector<Spec> specs;
  std::uint32_t seed = 60;
  for (bool holes : {false, true}) {
    for (QkvLayout layout : {QkvLayout::kStacked, QkvLayout::kInterleavedPerHead}) {
      Spec s;
      s.lengths = {130, 37, 66};
      s.heads = 2;
      s.head_size = 32;
      s.holes = holes;
      s.layout = layout;
      s.span = 4;
      s.log_buckets = false;
      s.seed = seed++;
      specs.push_back(s);
    }
  }
  check_cases(specs, "short window");
}

TEST_CASE("attention forward: the log-sum-exp output matches the reference and leaves out unchanged") {
  for (std::int64_t d : {16, 64}) {
    Spec s;
    s.lengths = {130, 5, 1, 70};
    s.heads = 3;
    s.head_size = d;
    s.holes = d == 16;
    Problem p(s);
    attention_reference::Result const want = p.reference();
    for (AttentionImpl impl : {AttentionImpl::kEager, AttentionImpl::kFlash}) {
      auto const forward = [&](bool write_lse) {
        AttentionArgs const a = p.forward(impl, write_lse);
        if (impl == AttentionImpl::kEager) {
          eigen_ops::attention_eager(a, 1);
        } else {
          eigen_ops::attention_flash(a, 1);
        }
        return p.out;
      };
      Floats const plain = forward(false);
      Floats const with_lse = forward(true);
      CHECK(plain == with_lse);
      double err = 0.0;
      for (std::size_t x = 0; x < want.lse.size(); ++x) err = std::max(err, std::abs(double{p.lse[x]} - want.lse[x]));
      MESSAGE("lse d " << d << (impl == AttentionImpl::kEager ? " eager" : " flash") << ": max abs error " << err);
      CHECK(err < 2e-5);
    }
  }
}

TEST_CASE("attention backward: repeated runs are bit-identical at a given thread count") {
  Spec s;
  s.lengths = {130, 37, 200, 5};
  s.heads = 3;
  s.head_size = 64;
  s.holes = true;
  s.span = 8;
  for (AttentionImpl impl : {AttentionImpl::kEager, AttentionImpl::kFlash}) {
    for (int threads : {1, 3}) {
      Problem p(s);
      p.run(impl, false, threads);
      Floats const dqkv = p.dqkv, dpos_key = p.dpos_key, dpos_query = p.dpos_query;
      for (int repeat = 0; repeat < 3; ++repeat) {
        p.run(impl, false, threads);
        INFO((impl == AttentionImpl::kEager ? "eager" : "flash"), " threads ", threads, " repeat ", repeat);
        CHECK(std::memcmp(dqkv.data(), p.dqkv.data(), dqkv.size() * sizeof(float)) == 0);
        CHECK(std::memcmp(dpos_key.data(), p.dpos_key.data(), dpos_key.size() * sizeof(float)) == 0);
        CHECK(std::memcmp(dpos_query.data(), p.dpos_query.data(), dpos_query.size() * sizeof(float)) == 0);
      }
    }
  }
}

// Central differences, in float32, of loss = sum(out * dout) through the shipped forward, against the backward.
// With dropout on, the mask is a fixed function of (seed, offset), so the op stays differentiable.
TEST_CASE("attention backward: central differences of the forward op") {
  for (auto const& setting : {std::pair{AttentionImpl::kEager, 0.0f},
                              {AttentionImpl::kFlash, 0.0f},
                              {AttentionImpl::kEager, 0.1f},
                              {AttentionImpl::kFlash, 0.1f},
                              {AttentionImpl::kEager, 0.5f},
                              {AttentionImpl::kFlash, 0.5f}}) {
    AttentionImpl const impl = setting.first;  // named copies: doctest's macros capture them, bindings they cannot
    float const dropout = setting.second;
    Spec s;
    s.dropout = dropout;
    s.dropout_seed = 1234;
    s.dropout_offset = 99;
    s.lengths = {7, 12};
    s.heads = 2;
    s.head_size = 8;
    s.holes = true;
    s.span = 4;
    s.log_buckets = false;
    s.layout = QkvLayout::kInterleavedPerHead;
    s.seed = 77;
    Problem p(s);
    p.run(impl, impl == AttentionImpl::kFlash, 1);
    Floats const dqkv = p.dqkv;
    Doubles const dpos_key = Problem::added(p.dpos_key), dpos_query = Problem::added(p.dpos_query);
    auto const loss = [&] {
      AttentionArgs const a = p.forward(impl);
      if (impl == AttentionImpl::kEager) {
        eigen_ops::attention_eager(a, 1);
      } else {
        eigen_ops::attention_flash(a, 1);
      }
      double sum = 0.0;
      for (std::int64_t t = 0; t < p.tokens; ++t)
        for (std::int64_t c = 0; c < p.width; ++c) sum += double{p.out[t * p.width + c]} * p.dout[t * p.dout_ld + c];
      return sum;
    };
    std::mt19937 gen(5);
    double worst = 0.0;
    auto const probe = [&](Floats& values, double analytic, std::size_t at, char const* what) {
      float const kept = values[at];
      float const eps = 1e-2f;
      values[at] = kept + eps;
      double const up = loss();
      values[at] = kept - eps;
      double const down = loss();
      values[at] = kept;
      double const numeric = (up - down) / (double{kept + eps} - double{kept - eps});
      double const err = std::abs(numeric - analytic) / (1.0 + std::abs(analytic));
      worst = std::max(worst, err);
      INFO(what, " element ", at, ": numeric ", numeric, ", backward ", analytic);
      CHECK(err < 2e-3);
    };
    for (int n = 0; n < 12; ++n) {  // q, k and v entries alike: all live in the fused buffer
      std::size_t const at = gen() % p.qkv.size();
      probe(p.qkv, dqkv[at], at, "qkv");
    }
    for (int n = 0; n < 6; ++n) {
      std::size_t const at = gen() % p.pos_key.size();
      probe(p.pos_key, dpos_key[at], at, "pos_key");
      probe(p.pos_query, dpos_query[at], at, "pos_query");
    }
    MESSAGE("central differences, " << (impl == AttentionImpl::kEager ? "eager" : "flash") << ", dropout " << dropout
                                    << ": worst |numeric - backward| / (1 + |backward|) " << worst);
  }
}

TEST_CASE("attention backward: unsupported dtypes and shapes are refused by name") {
  Spec s;
  Problem p(s);
  p.run(AttentionImpl::kFlash, false, 1);
  AttentionBackwardArgs g;
  g.forward = p.forward(AttentionImpl::kFlash);
  g.dout = matrix(p.dout, p.tokens, p.width, p.dout_ld);
  AttentionArgs grads;
  view_fused_qkv(grads, matrix(p.dqkv, p.tokens, 3 * p.width, 3 * p.width), s.head_size, s.layout);
  g.dq = grads.q;
  g.dk = grads.k;
  g.dv = grads.v;
  g.dpos_key = matrix(p.dpos_key, p.slots, p.width, p.width);
  g.dpos_query = matrix(p.dpos_query, p.slots, p.width, p.width);
  for (AttentionImpl impl : {AttentionImpl::kEager, AttentionImpl::kFlash}) {
    g.forward.impl = impl;
    AttentionBackwardArgs bad = g;
    bad.dq.dtype = DType::kBF16;
    CHECK_THROWS_WITH_AS(eigen_ops::attention_backward(bad, 1), doctest::Contains("dq is BF16"), Error);
    bad = g;
    bad.dpos_key.rows -= 1;
    CHECK_THROWS_WITH_AS(eigen_ops::attention_backward(bad, 1), doctest::Contains("dpos_key"), Error);
    bad = g;
    bad.dpos_query = {};
    CHECK_THROWS_WITH_AS(eigen_ops::attention_backward(bad, 1), doctest::Contains("dpos_query"), Error);
    bad = g;
    bad.dout.rows = p.tokens - 1;
    CHECK_THROWS_WITH_AS(eigen_ops::attention_backward(bad, 1), doctest::Contains("dout"), Error);
  }
}

// Dropout on the probabilities (AttentionArgs::dropout): the reference draws the documented mask itself.
TEST_CASE("attention dropout: eager and flash against the float64 reference at p = 0.1 and 0.5") {
  std::vector<Spec> specs;
  std::uint32_t seed = 100;
  for (float dropout : {0.1f, 0.5f}) {
    for (std::int64_t d : {16, 64}) {  // 64: the flash forward's micro-kernels where AVX-512 is on
      Spec s;
      s.lengths = {130, 5, 1, 70, 200};
      s.heads = 3;
      s.head_size = d;
      s.holes = d == 16;
      s.layout = d == 16 ? QkvLayout::kInterleavedPerHead : QkvLayout::kStacked;
      s.dropout = dropout;
      s.dropout_seed = 7 + seed;
      s.dropout_offset = 1000 * seed;
      s.seed = seed++;
      specs.push_back(s);
    }
    for (auto [c2p, p2c] : {std::pair{true, false}, {false, true}, {false, false}}) {
      Spec s;
      s.lengths = {66, 37};
      s.head_size = 32;
      s.c2p = c2p;
      s.p2c = p2c;
      s.span = 4;
      s.log_buckets = false;
      s.dropout = dropout;
      s.dropout_seed = seed;
      s.seed = seed++;
      specs.push_back(s);
    }
  }
  check_cases(specs, "dropout");
}

TEST_CASE("attention dropout: eager and flash agree on the output and every gradient") {
  for (float dropout : {0.1f, 0.5f}) {
    for (std::int64_t d : {16, 64}) {
      Spec s;
      s.lengths = {130, 37, 200};
      s.heads = 2;
      s.head_size = d;
      s.holes = d == 16;
      s.dropout = dropout;
      s.dropout_seed = 3;
      s.dropout_offset = 5;
      Problem eager(s), flash(s);
      eager.run(AttentionImpl::kEager, false, 2);
      flash.run(AttentionImpl::kFlash, true, 2);
      Errors e;
      e.out = relative_error(widen(flash.out), widen(eager.out));
      e.dq = relative_error(flash.gradient(0), eager.gradient(0));
      e.dk = relative_error(flash.gradient(1), eager.gradient(1));
      e.dv = relative_error(flash.gradient(2), eager.gradient(2));
      e.dpos_key = relative_error(Problem::added(flash.dpos_key), Problem::added(eager.dpos_key));
      e.dpos_query = relative_error(Problem::added(flash.dpos_query), Problem::added(eager.dpos_query));
      MESSAGE("dropout " << dropout << " d " << d << ", flash vs eager: " << e.text());
      CHECK(e.worst() < kTolerance);
    }
  }
}

// q = k = 0 and zero tables make every row of P uniform, 1 / L; v_j = e_(j - first_j) then writes the pair's mask
// into the output: out[h, i, c] = m[h, i, c] / ((1 - p) L), which must be the documented draw at every pair.
TEST_CASE("attention dropout: the mask is the documented draw and keeps about 1 - p") {
  for (float dropout : {0.1f, 0.5f}) {
    for (AttentionImpl impl : {AttentionImpl::kEager, AttentionImpl::kFlash}) {
      Spec s;
      s.lengths = {16, 16, 9, 16, 16, 12, 16, 16};
      s.heads = 4;
      s.head_size = 16;
      s.dropout = dropout;
      s.dropout_seed = 42;
      s.dropout_offset = 12345;
      Problem p(s);
      std::fill(p.qkv.begin(), p.qkv.end(), 0.0f);
      std::fill(p.pos_key.begin(), p.pos_key.end(), 0.0f);
      std::fill(p.pos_query.begin(), p.pos_query.end(), 0.0f);
      AttentionArgs const a = p.forward(impl);
      for (std::int64_t b = 0; b + 1 < static_cast<std::int64_t>(p.cu.size()); ++b)
        for (std::int64_t t = p.cu[b]; t < p.cu[b + 1]; ++t)
          for (std::int64_t h = 0; h < s.heads; ++h)
            a.v.as<float>()[t * a.v.ld + h * a.head_stride + t - p.cu[b]] = 1.0f;
      if (impl == AttentionImpl::kEager) {
        eigen_ops::attention_eager(a, 2);
      } else {
        eigen_ops::attention_flash(a, 2);
      }
      std::int64_t pairs = 0, kept = 0, mismatches = 0;
      for (std::int64_t b = 0; b + 1 < static_cast<std::int64_t>(p.cu.size()); ++b) {
        std::int64_t const first = p.cu[b], length = p.cu[b + 1] - first;
        double const kept_value = 1.0 / ((1.0 - double{dropout}) * static_cast<double>(length));
        for (std::int64_t i = first; i < first + length; ++i) {
          for (std::int64_t h = 0; h < s.heads; ++h) {
            for (std::int64_t c = 0; c < length; ++c) {
              std::uint64_t const counter =
                  s.dropout_offset + static_cast<std::uint64_t>((h * p.tokens + i) * p.max_length + c);
              bool const want = dropout_uniform(s.dropout_seed, counter) >= dropout;
              double const got = p.out[i * p.width + h * s.head_size + c];
              bool const got_kept = std::abs(got - kept_value) < 1e-6 * kept_value;
              if (got_kept != want || (!got_kept && got != 0.0)) ++mismatches;
              kept += got_kept ? 1 : 0;
              ++pairs;
            }
          }
        }
      }
      double const fraction = static_cast<double>(kept) / static_cast<double>(pairs);
      double const sigma = std::sqrt(dropout * (1.0 - dropout) / static_cast<double>(pairs));
      MESSAGE("dropout " << dropout << (impl == AttentionImpl::kEager ? " eager" : " flash") << ": kept " << kept
                         << " of " << pairs << " pairs (" << fraction << "), " << mismatches << " off the draw");
      CHECK(mismatches == 0);
      CHECK(std::abs(fraction - (1.0 - dropout)) < 4.0 * sigma);
    }
  }
}

TEST_CASE("attention dropout: the seed and the offset choose the mask, p = 0 ignores both") {
  Spec s;
  s.lengths = {70, 37};
  s.heads = 2;
  s.head_size = 64;
  for (AttentionImpl impl : {AttentionImpl::kEager, AttentionImpl::kFlash}) {
    auto const output = [&](float dropout, std::uint64_t seed, std::uint64_t offset) {
      Spec t = s;
      t.dropout = dropout;
      t.dropout_seed = seed;
      t.dropout_offset = offset;
      Problem p(t);
      AttentionArgs const a = p.forward(impl);
      if (impl == AttentionImpl::kEager) {
        eigen_ops::attention_eager(a, 2);
      } else {
        eigen_ops::attention_flash(a, 2);
      }
      return p.out;
    };
    Floats const base = output(0.1f, 1, 0);
    CHECK(output(0.1f, 1, 0) == base);  // a pure function of (seed, offset)
    CHECK(output(0.1f, 2, 0) != base);
    CHECK(output(0.1f, 1, 1) != base);
    CHECK(output(0.0f, 0, 0) == output(0.0f, 9, 77));
    CHECK(output(0.0f, 0, 0) != base);
  }
}

TEST_CASE("attention dropout: a probability outside 0 <= p < 1 is refused by name") {
  Spec s;
  Problem p(s);
  p.run(AttentionImpl::kFlash, false, 1);
  for (AttentionImpl impl : {AttentionImpl::kEager, AttentionImpl::kFlash}) {
    for (float bad : {1.0f, -0.1f, 1.5f, std::numeric_limits<float>::quiet_NaN()}) {
      AttentionArgs a = p.forward(impl);
      a.dropout = bad;
      INFO("dropout ", bad);
      if (impl == AttentionImpl::kEager) {
        CHECK_THROWS_WITH_AS(eigen_ops::attention_eager(a, 1), doctest::Contains("attention dropout"), Error);
      } else {
        CHECK_THROWS_WITH_AS(eigen_ops::attention_flash(a, 1), doctest::Contains("attention dropout"), Error);
      }
      AttentionBackwardArgs g;
      g.forward = a;
      g.dout = matrix(p.dout, p.tokens, p.width, p.dout_ld);
      AttentionArgs grads;
      view_fused_qkv(grads, matrix(p.dqkv, p.tokens, 3 * p.width, 3 * p.width), s.head_size, s.layout);
      g.dq = grads.q;
      g.dk = grads.k;
      g.dv = grads.v;
      g.dpos_key = matrix(p.dpos_key, p.slots, p.width, p.width);
      g.dpos_query = matrix(p.dpos_query, p.slots, p.width, p.width);
      CHECK_THROWS_WITH_AS(eigen_ops::attention_backward(g, 1), doctest::Contains("attention dropout"), Error);
    }
  }
}

// The host draws a row 16 counters at a time with an integer threshold (attention_common.hpp): the same mask as
// dropout_uniform's float comparison, at any probability, any tail length and across the counter's wrap-around.
TEST_CASE("attention dropout: the vectorized draw is dropout_uniform's, bit for bit") {
  std::int64_t mismatches = 0, checked = 0;
  for (float dropout : {1e-7f, 0.1f, 0.3f, 0.5f, 0.9f, std::nextafter(1.0f, 0.0f)}) {
    for (std::uint64_t seed : {0ull, 1ull, 0x123456789abcdefull}) {
      for (std::uint64_t start : {0ull, 1000003ull, ~0ull - 40}) {
        AttentionArgs a;
        a.dropout = dropout;
        a.dropout_seed = seed;
        eigen_ops::ProbsDropout const drop(a);
        for (std::int64_t n : {1, 15, 16, 17, 64, 100}) {
          Floats factors(static_cast<std::size_t>(n)), row(static_cast<std::size_t>(n), 3.0f);
          drop.factors(factors.data(), n, start);
          drop.apply(row.data(), n, start);
          for (std::int64_t c = 0; c < n; ++c) {
            bool const keep = dropout_uniform(seed, start + static_cast<std::uint64_t>(c)) >= dropout;
            float const want = keep ? drop.keep_scale : 0.0f;
            mismatches += factors[c] != want || row[c] != (keep ? 3.0f * drop.keep_scale : 0.0f);
            ++checked;
          }
        }
      }
    }
  }
  MESSAGE(checked << " draws, " << mismatches << " off dropout_uniform");
  CHECK(mismatches == 0);
}

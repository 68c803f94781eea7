// Training through CudaPolicy in float32, in one executable (one compile of the model templates), mirroring
// tests/train/test_training_kokkos.cpp: the dense training ops on the generic bodies of training_op_suite.hpp and
// training_gradient_checks.hpp; the attention backward (eager and flash, with and without the forward's lse, every
// set of position terms, dropout) and the forwards' log-sum-exp against the float64 reference of
// attention_backward_reference.hpp; then the whole model's gradients against HF autograd, one AdamW step and the
// 20-step Trainer replay (gradient_suite.hpp, optimizer_suite.hpp). The bounds are the Kokkos test's: the CUDA
// kernels sum in float32 (attention, cuBLASLt's products) or float64 (column sums, LayerNorm, D) as the host ones do,
// in other orders whose rounding stays well inside them.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "../ops/attention_backward_inputs.hpp"
#include "../ops/attention_backward_reference.hpp"
#include "../ops/training_gradient_checks.hpp"
#include "../ops/training_op_suite.hpp"
#include "../train/gradient_suite.hpp"
#include "../train/optimizer_suite.hpp"
#include "flashdeberta/cuda/cuda_policy.hpp"

namespace fd = flashdeberta;
namespace tt = fd::training_tests;

namespace {

using Policy = fd::CudaPolicy;
static_assert(tt::TrainingOpRunner<Policy>);

constexpr std::uint32_t kSeed = 20261207;

// One float32 policy for every case; copies share its stream, cuBLASLt handle and cache.
Policy const& policy() {
  static Policy const p(fd::CudaOptions{.dtype = fd::DType::kF32});
  return p;
}

bool bit_identical(std::vector<double> const& a, std::vector<double> const& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

}  // namespace

TEST_CASE("cuda training: dense ops against the reference") {
  Policy const& r = policy();
  tt::linear_backward_cases(r, kSeed, 2e-6);
  tt::layer_norm_backward_cases(r, kSeed, 2e-6);
  tt::activation_cases(r, kSeed, 2e-6);
  tt::embedding_backward_cases(r, kSeed, 2e-6);
  tt::conv1d_backward_cases(r, kSeed, 2e-6);
  tt::dropout_cases(r, kSeed, 2e-7);
  // nvcc contracts the moment updates into FMAs (one rounding where the reference has two): 2 ulps.
  tt::adamw_cases(r, kSeed, 2.0);
  tt::fill_cases(r);
  tt::sum_of_squares_cases(r, kSeed, 1e-12);
}

TEST_CASE("cuda training: backward ops against finite differences of the forward ops") {
  Policy const& r = policy();
  tt::linear_finite_differences(r, kSeed, 1e-6);
  tt::layer_norm_finite_differences(r, kSeed, 1e-2, 1e-4);
  tt::activation_finite_differences(r, kSeed, 1e-2, 1e-4);
  tt::conv1d_finite_differences(r, kSeed, 1e-6);
}

TEST_CASE("cuda training: bad arguments throw") { tt::rejects_bad_arguments(policy()); }

// embedding_backward scatters with atomicAdd: a row many tokens share adds in an order that varies run to run, so
// only its outputs may differ between runs (within the reference bound above); every other op is the same bits.
TEST_CASE("cuda training: every dense op but the embedding scatter is bit-identical between two runs") {
  Policy const& r = policy();
  auto const first = tt::run_every_op(r, kSeed);
  auto const second = tt::run_every_op(r, kSeed);
  REQUIRE(first.size() == second.size());
  for (std::size_t i = 0; i < first.size(); ++i) {
    if (first[i].name.rfind("embedding", 0) == 0) continue;
    CHECK_MESSAGE(bit_identical(first[i].values, second[i].values), first[i].name << " differs between runs");
  }
}

// The attention backward's cases: one problem's inputs on the host (for the reference) and in device memory.
namespace {

using Floats = std::vector<float>;
using Doubles = std::vector<double>;
using AttentionSpec = fd::attention_tests::Spec;
using fd::attention_tests::kTableStart;

struct AttentionCase : fd::attention_tests::Inputs {
  Policy policy = ::policy();
  Policy::Buffer qkv_d, pos_key_d, pos_query_d, dout_d, cu_d, positions_d, index_d;
  Policy::Buffer out_d, lse_d, dqkv_d, dpos_key_d, dpos_query_d;

  explicit AttentionCase(AttentionSpec const& s) : Inputs(s) {
    qkv_d = tt::upload(policy, qkv);
    pos_key_d = tt::upload(policy, pos_key);
    pos_query_d = tt::upload(policy, pos_query);
    dout_d = tt::upload(policy, dout);
    cu_d = tt::upload(policy, cu);
    positions_d = tt::upload(policy, positions);
    index_d = tt::upload(policy, index);
    out_d = policy.allocate(tokens * width, fd::DType::kF32);
    lse_d = tt::upload(policy, Floats(static_cast<std::size_t>(s.heads * tokens), tt::kNaN));
  }

  fd::AttentionArgs device_args(fd::AttentionImpl impl, bool write_lse) const {
    fd::AttentionArgs a =
        args(tt::floats(qkv_d), tt::floats(pos_key_d), tt::floats(pos_query_d), tt::floats(out_d),
             static_cast<std::int32_t const*>(cu_d.data()), static_cast<std::int32_t const*>(positions_d.data()),
             static_cast<std::int32_t const*>(index_d.data()));
    a.impl = impl;
    if (write_lse) a.lse = tt::floats(lse_d);
    return a;
  }

  fd::attention_reference::Result reference() {
    Floats out(static_cast<std::size_t>(tokens * width));
    return fd::attention_reference::run(
        args(qkv.data(), pos_key.data(), pos_query.data(), out.data(), cu.data(), positions.data(), index.data()),
        dout.data(), dout_ld);
  }

  fd::AttentionBackwardArgs backward_args(fd::AttentionArgs const& forward, bool use_lse) const {
    fd::AttentionBackwardArgs g;
    g.forward = forward;
    g.forward.lse = nullptr;
    g.dout = {tt::floats(dout_d), fd::DType::kF32, tokens, width, dout_ld};
    g.lse = use_lse ? tt::floats(lse_d) : nullptr;
    fd::AttentionArgs grads;
    fd::view_fused_qkv(grads, {tt::floats(dqkv_d), fd::DType::kF32, tokens, 3 * width, 3 * width}, spec.head_size,
                       spec.layout);
    g.dq = grads.q;
    g.dk = grads.k;
    g.dv = grads.v;
    if (spec.c2p) g.dpos_key = {tt::floats(dpos_key_d), fd::DType::kF32, slots, width, width};
    if (spec.p2c) g.dpos_query = {tt::floats(dpos_query_d), fd::DType::kF32, slots, width, width};
    return g;
  }

  // The forward (writing out and lse), then the backward of `impl` into fresh gradient buffers: dq, dk, dv NaN (an
  // unwritten element fails), the tables' gradients at kTableStart (`=` instead of `+=` fails).
  void run(fd::AttentionImpl impl, bool use_lse) {
    fd::AttentionArgs const a = device_args(impl, true);
    policy.disentangled_attention(a);
    dqkv_d = tt::upload(policy, Floats(static_cast<std::size_t>(tokens * 3 * width), tt::kNaN));
    dpos_key_d = tt::upload(policy, Floats(static_cast<std::size_t>(slots * width), kTableStart));
    dpos_query_d = tt::upload(policy, Floats(static_cast<std::size_t>(slots * width), kTableStart));
    policy.disentangled_attention_backward(backward_args(a, use_lse));
  }

  // Gradient `which` (0 q, 1 k, 2 v) of the fused buffer as a compact (T, A).
  Doubles gradient(int which) const {
    Floats host = tt::download(policy, dqkv_d);
    fd::AttentionArgs grads;
    fd::view_fused_qkv(grads, {host.data(), fd::DType::kF32, tokens, 3 * width, 3 * width}, spec.head_size,
                       spec.layout);
    fd::MatrixRef const m = which == 0 ? grads.q : (which == 1 ? grads.k : grads.v);
    Doubles r(static_cast<std::size_t>(tokens * width));
    for (std::int64_t t = 0; t < tokens; ++t)
      for (std::int64_t h = 0; h < spec.heads; ++h)
        for (std::int64_t e = 0; e < spec.head_size; ++e)
          r[t * width + h * spec.head_size + e] = m.as<float>()[t * m.ld + h * grads.head_stride + e];
    return r;
  }

  Doubles added(Policy::Buffer const& table) const {
    Floats const host = tt::download(policy, table);
    Doubles r(host.size());
    for (std::size_t x = 0; x < host.size(); ++x) r[x] = double{host[x]} - kTableStart;
    return r;
  }
};

// max |got - want| / max |want|: the error relative to the tensor's scale (NaN, an unwritten element, fails).
double relative_error(Doubles const& got, Doubles const& want) {
  REQUIRE(got.size() == want.size());
  double err = 0.0, scale = 0.0;
  for (std::size_t x = 0; x < got.size(); ++x) {
    double const e = std::abs(got[x] - want[x]);
    err = std::isnan(e) ? INFINITY : std::max(err, e);
    scale = std::max(scale, std::abs(want[x]));
  }
  return scale > 0.0 ? err / scale : err;
}

struct Errors {
  double out = 0, dq = 0, dk = 0, dv = 0, dpos_key = 0, dpos_query = 0;

  double worst() const { return std::max({out, dq, dk, dv, dpos_key, dpos_query}); }
  void take_max(Errors const& e) {
    out = std::max(out, e.out);
    dq = std::max(dq, e.dq);
    dk = std::max(dk, e.dk);
    dv = std::max(dv, e.dv);
    dpos_key = std::max(dpos_key, e.dpos_key);
    dpos_query = std::max(dpos_query, e.dpos_query);
  }
  std::string text() const {
    std::ostringstream os;
    os.precision(2);
    os << std::scientific << "out " << out << ", dq " << dq << ", dk " << dk << ", dv " << dv << ", dpos_key "
       << dpos_key << ", dpos_query " << dpos_query;
    return os.str();
  }
};

// The forward and the backward of `impl` (flash: with and without the forward's lse) against the reference, at
// 1e-5 of each tensor's largest value, as the host tests.
void check_attention_cases(std::vector<AttentionSpec> const& specs, char const* what) {
  for (fd::AttentionImpl impl : {fd::AttentionImpl::kEager, fd::AttentionImpl::kFlash}) {
    Errors worst;
    for (AttentionSpec const& spec : specs) {
      AttentionCase c(spec);
      fd::attention_reference::Result const want = c.reference();
      for (bool use_lse : {false, true}) {
        if (impl == fd::AttentionImpl::kEager && use_lse) continue;
        c.run(impl, use_lse);
        Errors e;
        Floats const out = tt::download(c.policy, c.out_d);
        e.out = relative_error(Doubles(out.begin(), out.end()), want.out);
        e.dq = relative_error(c.gradient(0), want.dq);
        e.dk = relative_error(c.gradient(1), want.dk);
        e.dv = relative_error(c.gradient(2), want.dv);
        Doubles const dpos_key = c.added(c.dpos_key_d), dpos_query = c.added(c.dpos_query_d);
        if (spec.c2p) e.dpos_key = relative_error(dpos_key, want.dpos_key);
        if (spec.p2c) e.dpos_query = relative_error(dpos_query, want.dpos_query);
        INFO(spec.name(), impl == fd::AttentionImpl::kEager ? " eager" : " flash", use_lse ? " lse" : "", ": ",
             e.text());
        CHECK(e.worst() < 1e-5);
        auto const untouched = [](Doubles const& table) {  // a table the forward did not have gets no gradient
          return std::all_of(table.begin(), table.end(), [](double x) { return x == 0.0; });
        };
        if (!spec.c2p) CHECK(untouched(dpos_key));
        if (!spec.p2c) CHECK(untouched(dpos_query));
        worst.take_max(e);
      }
    }
    MESSAGE(std::string(what) << (impl == fd::AttentionImpl::kEager ? ", eager" : ", flash")
                              << ": worst relative errors " << worst.text());
  }
}

}  // namespace

// Head sizes 8 to 64 run the kernels' 32- and 64-wide instantiations zero-padded; 100 the 128-wide one.
TEST_CASE("cuda training: attention backward against the float64 reference") {
  std::vector<AttentionSpec> sizes;
  std::uint32_t seed = 10;
  for (std::int64_t d : {8, 32, 64, 100}) {
    for (std::int32_t length : {1, 37, 130}) {
      AttentionSpec s;
      s.lengths = {length};
      s.head_size = d;
      s.seed = seed++;
      sizes.push_back(s);
    }
  }
  check_attention_cases(sizes, "head sizes x lengths");
  std::vector<AttentionSpec> packed;
  for (std::int64_t d : {16, 64}) {
    for (auto [c2p, p2c] : {std::pair{true, true}, {true, false}, {false, true}, {false, false}}) {
      AttentionSpec s;
      s.lengths = {5, 130, 1, 37, 70};
      s.heads = 3;
      s.head_size = d;
      s.c2p = c2p;
      s.p2c = p2c;
      s.layout = fd::QkvLayout::kInterleavedPerHead;
      s.holes = true;
      s.seed = seed++;
      packed.push_back(s);
    }
  }
  check_attention_cases(packed, "packed, holes, interleaved, each set of position terms");
  std::vector<AttentionSpec> short_window;
  for (bool holes : {false, true}) {
    AttentionSpec s;
    s.lengths = {130, 37, 66};
    s.head_size = 32;
    s.holes = holes;
    s.layout = holes ? fd::QkvLayout::kInterleavedPerHead : fd::QkvLayout::kStacked;
    s.span = 4;
    s.log_buckets = false;
    s.seed = seed++;
    short_window.push_back(s);
  }
  check_attention_cases(short_window, "short window");
}

// Dropout on the probabilities (AttentionArgs::dropout): the reference draws the documented mask itself.
TEST_CASE("cuda training: attention dropout against the float64 reference at p = 0.1 and 0.5") {
  std::vector<AttentionSpec> specs;
  std::uint32_t seed = 100;
  for (float dropout : {0.1f, 0.5f}) {
    AttentionSpec packed;
    packed.lengths = {130, 5, 1, 70};
    packed.heads = 3;
    packed.head_size = 16;
    packed.holes = true;
    packed.layout = fd::QkvLayout::kInterleavedPerHead;
    packed.dropout = dropout;
    packed.dropout_seed = 7 + seed;
    packed.dropout_offset = 1000 * seed;
    packed.seed = seed++;
    specs.push_back(packed);
    AttentionSpec c2p_only;
    c2p_only.lengths = {66, 37};
    c2p_only.head_size = 32;
    c2p_only.p2c = false;
    c2p_only.span = 4;
    c2p_only.log_buckets = false;
    c2p_only.dropout = dropout;
    c2p_only.dropout_seed = seed;
    c2p_only.seed = seed++;
    specs.push_back(c2p_only);
  }
  check_attention_cases(specs, "dropout");
}

TEST_CASE("cuda training: the forwards' log-sum-exp matches the reference and leaves out unchanged") {
  for (std::int64_t d : {16, 64}) {
    AttentionSpec s;
    s.lengths = {130, 5, 1, 70};
    s.heads = 3;
    s.head_size = d;
    s.holes = d == 16;
    AttentionCase c(s);
    fd::attention_reference::Result const want = c.reference();
    for (fd::AttentionImpl impl : {fd::AttentionImpl::kEager, fd::AttentionImpl::kFlash}) {
      c.policy.disentangled_attention(c.device_args(impl, false));
      Floats const plain = tt::download(c.policy, c.out_d);
      c.policy.disentangled_attention(c.device_args(impl, true));
      CHECK(plain == tt::download(c.policy, c.out_d));
      Floats const lse = tt::download(c.policy, c.lse_d);
      double err = 0.0;
      for (std::size_t x = 0; x < want.lse.size(); ++x) err = std::max(err, std::abs(double{lse[x]} - want.lse[x]));
      MESSAGE("lse d " << d << (impl == fd::AttentionImpl::kEager ? " eager" : " flash") << ": max abs error " << err);
      CHECK(err < 2e-5);
    }
  }
}

// The 16-bit kernels have neither the log-sum-exp output nor the dropout yet: refused by name before any launch.
TEST_CASE("cuda training: the 16-bit attention forwards refuse training's lse and dropout") {
  AttentionSpec s;
  AttentionCase c(s);
  for (fd::AttentionImpl impl : {fd::AttentionImpl::kEager, fd::AttentionImpl::kFlash}) {
    for (bool lse : {false, true}) {
      fd::AttentionArgs a = c.device_args(impl, lse);
      if (!lse) a.dropout = 0.1f;
      for (fd::MatrixRef* m : {&a.q, &a.k, &a.v, &a.out, &a.pos_key, &a.pos_query}) m->dtype = fd::DType::kBF16;
      CHECK_THROWS_WITH_AS(c.policy.disentangled_attention(a), doctest::Contains("float32 only"), fd::Error);
    }
  }
}

TEST_CASE("cuda training: the attention backward is bit-identical between runs") {
  AttentionSpec s;
  s.lengths = {130, 37, 200, 5};
  s.heads = 3;
  s.head_size = 64;
  s.holes = true;
  s.span = 8;
  for (fd::AttentionImpl impl : {fd::AttentionImpl::kEager, fd::AttentionImpl::kFlash}) {
    AttentionCase c(s);
    c.run(impl, false);
    Floats const dqkv = tt::download(c.policy, c.dqkv_d);
    Floats const dpos_key = tt::download(c.policy, c.dpos_key_d);
    Floats const dpos_query = tt::download(c.policy, c.dpos_query_d);
    for (int repeat = 0; repeat < 2; ++repeat) {
      c.run(impl, false);
      INFO((impl == fd::AttentionImpl::kEager ? "eager" : "flash"), " repeat ", repeat);
      CHECK(tt::download(c.policy, c.dqkv_d) == dqkv);
      CHECK(tt::download(c.policy, c.dpos_key_d) == dpos_key);
      CHECK(tt::download(c.policy, c.dpos_query_d) == dpos_query);
    }
  }
}

TEST_CASE("cuda training: the attention backward refuses unsupported dtypes and shapes by name") {
  AttentionSpec s;
  AttentionCase c(s);
  c.run(fd::AttentionImpl::kFlash, false);
  for (fd::AttentionImpl impl : {fd::AttentionImpl::kEager, fd::AttentionImpl::kFlash}) {
    fd::AttentionBackwardArgs const g = c.backward_args(c.device_args(impl, false), false);
    fd::AttentionBackwardArgs bad = g;
    bad.dq.dtype = fd::DType::kBF16;
    CHECK_THROWS_WITH_AS(c.policy.disentangled_attention_backward(bad), doctest::Contains("dq is BF16"), fd::Error);
    bad = g;
    bad.dpos_key.rows -= 1;
    CHECK_THROWS_WITH_AS(c.policy.disentangled_attention_backward(bad), doctest::Contains("dpos_key"), fd::Error);
    bad = g;
    bad.dpos_query = {};
    CHECK_THROWS_WITH_AS(c.policy.disentangled_attention_backward(bad), doctest::Contains("dpos_query"), fd::Error);
    bad = g;
    bad.dout.rows = c.tokens - 1;
    CHECK_THROWS_WITH_AS(c.policy.disentangled_attention_backward(bad), doctest::Contains("dout"), fd::Error);
    bad = g;
    bad.forward.q.dtype = fd::DType::kF16;
    CHECK_THROWS_WITH_AS(c.policy.disentangled_attention_backward(bad), doctest::Contains("q is F16"), fd::Error);
  }
}

TEST_CASE("cuda training: gradients of every fixture case against HF autograd") {
  fd::testing::run_gradient_suite(policy());
}

TEST_CASE("cuda training: the last layer over the head's rows only matches every row") {
  fd::testing::run_head_rows_cases(policy());
}

TEST_CASE("cuda training: one AdamW step against torch.optim.AdamW") { fd::testing::run_adamw_step_case(policy()); }

TEST_CASE("cuda training: 20 steps of HF's Trainer replayed") {
  for (auto impl : {fd::AttentionImpl::kFlash, fd::AttentionImpl::kEager})
    fd::testing::run_trainer_replay(policy(), impl);
}

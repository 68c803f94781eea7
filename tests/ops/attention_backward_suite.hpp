// The attention backward's cases every training policy runs (tests/train/test_training_kokkos.cpp,
// tests/cuda/test_training_cuda.cpp): one problem's inputs on the host, for the float64 reference of
// attention_backward_reference.hpp, and in the policy's memory; the forward and the backward of eager and flash
// attention (flash with and without the forward's log-sum-exp) against it at 1e-5 of each tensor's largest value (or
// a bound the caller passes, for 16-bit products), over head sizes, packed batches with holes, each set of position
// terms, short windows and dropout; the forwards' log-sum-exp; bit-identical reruns; and the refusals of bad gradient
// shapes and dtypes by name.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "attention_backward_errors.hpp"
#include "attention_backward_inputs.hpp"
#include "attention_backward_reference.hpp"
#include "flashdeberta/policy/training_concepts.hpp"
#include "training_op_suite.hpp"

namespace flashdeberta::attention_tests {

namespace fd = flashdeberta;
namespace tt = fd::training_tests;
using Floats = std::vector<float>;
using Doubles = std::vector<double>;

// One problem's inputs, uploaded to `policy`, and the buffers its forward and backward write.
template <TrainingPolicy Policy>
struct AttentionCase : Inputs {
  Policy policy;
  typename Policy::Buffer qkv_d, pos_key_d, pos_query_d, dout_d, cu_d, positions_d, index_d;
  typename Policy::Buffer out_d, lse_d, dqkv_d, dpos_key_d, dpos_query_d;

  AttentionCase(Policy const& p, Spec const& s) : Inputs(s), policy(p) {
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

  Doubles added(typename Policy::Buffer const& table) const {
    Floats const host = tt::download(policy, table);
    Doubles r(host.size());
    for (std::size_t x = 0; x < host.size(); ++x) r[x] = double{host[x]} - kTableStart;
    return r;
  }
};

// The forward and the backward of `impl` (flash: with and without the forward's lse) against the reference, at
// `bound` of each tensor's largest value: 1e-5 for float32 products, as test_attention_backward_eigen.cpp; a policy
// with 16-bit products passes its own bound (tests/cuda/test_training_cuda.cpp says how it is chosen).
template <TrainingPolicy Policy>
void check_attention_cases(Policy const& policy, std::vector<Spec> const& specs, char const* what,
                           double bound = 1e-5) {
  for (fd::AttentionImpl impl : {fd::AttentionImpl::kEager, fd::AttentionImpl::kFlash}) {
    Errors worst;
    for (Spec const& spec : specs) {
      AttentionCase<Policy> c(policy, spec);
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
        CHECK(e.worst() < bound);
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

// Head sizes (the CUDA kernels pad 8 to 64 to their 32- and 64-wide instantiations, and 100 to the 128-wide one),
// packed batches with holes and every set of position terms, short windows; at `bound` (check_attention_cases).
template <TrainingPolicy Policy>
void run_attention_backward_cases(Policy const& policy, std::vector<std::int64_t> const& head_sizes,
                                  double bound = 1e-5) {
  std::vector<Spec> sizes;
  std::uint32_t seed = 10;
  for (std::int64_t d : head_sizes) {
    for (std::int32_t length : {1, 37, 130}) {
      Spec s;
      s.lengths = {length};
      s.head_size = d;
      s.seed = seed++;
      sizes.push_back(s);
    }
  }
  check_attention_cases(policy, sizes, "head sizes x lengths", bound);
  std::vector<Spec> const packed = packed_position_term_specs(seed);
  seed += static_cast<std::uint32_t>(packed.size());
  check_attention_cases(policy, packed, "packed, holes, interleaved, each set of position terms", bound);
  std::vector<Spec> short_window;
  for (bool holes : {false, true}) {
    Spec s;
    s.lengths = {130, 37, 66};
    s.head_size = 32;
    s.holes = holes;
    s.layout = holes ? fd::QkvLayout::kInterleavedPerHead : fd::QkvLayout::kStacked;
    s.span = 4;
    s.log_buckets = false;
    s.seed = seed++;
    short_window.push_back(s);
  }
  check_attention_cases(policy, short_window, "short window", bound);
}

// Dropout on the probabilities (AttentionArgs::dropout): the reference draws the documented mask itself. At `bound`
// (check_attention_cases).
template <TrainingPolicy Policy>
void run_attention_dropout_cases(Policy const& policy, double bound = 1e-5) {
  std::vector<Spec> specs;
  std::uint32_t seed = 100;
  for (float dropout : {0.1f, 0.5f}) {
    Spec packed;
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
    Spec c2p_only;
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
  check_attention_cases(policy, specs, "dropout", bound);
}

// The forward's log-sum-exp output, and the same `out` with or without it. relative_bound 0: within 2e-5 (float32
// products); else within relative_bound of the largest |lse| (at least 1), a policy with 16-bit products.
template <TrainingPolicy Policy>
void run_attention_lse_cases(Policy const& policy, double relative_bound = 0.0) {
  for (std::int64_t d : {16, 64}) {
    Spec s;
    s.lengths = {130, 5, 1, 70};
    s.heads = 3;
    s.head_size = d;
    s.holes = d == 16;
    AttentionCase<Policy> c(policy, s);
    fd::attention_reference::Result const want = c.reference();
    for (fd::AttentionImpl impl : {fd::AttentionImpl::kEager, fd::AttentionImpl::kFlash}) {
      c.policy.disentangled_attention(c.device_args(impl, false));
      Floats const plain = tt::download(c.policy, c.out_d);
      c.policy.disentangled_attention(c.device_args(impl, true));
      CHECK(plain == tt::download(c.policy, c.out_d));
      Floats const lse = tt::download(c.policy, c.lse_d);
      double err = 0.0, largest = 1.0;
      for (std::size_t x = 0; x < want.lse.size(); ++x) {
        err = std::max(err, std::abs(double{lse[x]} - want.lse[x]));
        largest = std::max(largest, std::abs(want.lse[x]));
      }
      MESSAGE("lse d " << d << (impl == fd::AttentionImpl::kEager ? " eager" : " flash") << ": max abs error " << err
                       << " of largest " << largest);
      if (relative_bound == 0.0) {
        CHECK(err < 2e-5);
      } else {
        CHECK(err / largest < relative_bound);
      }
    }
  }
}

template <TrainingPolicy Policy>
void run_attention_bit_identity_cases(Policy const& policy) {
  Spec s;
  s.lengths = {130, 37, 200, 5};
  s.heads = 3;
  s.head_size = 64;
  s.holes = true;
  s.span = 8;
  for (fd::AttentionImpl impl : {fd::AttentionImpl::kEager, fd::AttentionImpl::kFlash}) {
    AttentionCase<Policy> c(policy, s);
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

template <TrainingPolicy Policy>
void run_attention_backward_refusals(Policy const& policy) {
  Spec s;
  AttentionCase<Policy> c(policy, s);
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
    bad.forward.q.dtype = fd::DType::kF16;  // "q is F16" (CUDA), "attention query is F16" (Kokkos)
    CHECK_THROWS_WITH_AS(c.policy.disentangled_attention_backward(bad), doctest::Contains("is F16"), fd::Error);
  }
}

}  // namespace flashdeberta::attention_tests

// The op tests' bodies, one per op, shared by every backend's test executable (test_ops_kokkos_vs_eigen.cpp,
// tests/cuda/test_ops_cuda.cpp). Each *_cases function builds that op's cases from `seed` and hands each one
// to `check(case)`; the backend's check runs it on its policy and compares with reference_run(case) through
// check_close, at the tolerance measured for that backend and op.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "op_cases.hpp"

namespace flashdeberta::op_tests {

// Largest |ours - reference| over every element; NaN anywhere counts as infinite.
inline double max_abs_error(Host const& ours, Host const& reference) {
  REQUIRE(ours.size() == reference.size());
  double worst = 0.0;
  for (std::size_t i = 0; i < ours.size(); ++i) {
    double const err = std::abs(static_cast<double>(ours[i]) - reference[i]);
    if (!(err <= worst)) worst = std::isnan(err) ? INFINITY : err;
  }
  return worst;
}

// Checks ours against the reference at `tolerance` x max(1, max |reference|) and reports the error.
inline void check_close(Host const& ours, Host const& reference, double tolerance, std::string const& label) {
  double scale = 1.0;
  for (float x : reference) scale = std::max(scale, static_cast<double>(std::abs(x)));
  double const err = max_abs_error(ours, reference);
  double const bound = tolerance * scale;
  MESSAGE(label << ": max abs error " << err << " (bound " << bound << ")");
  CHECK(err <= bound);
}

// What every policy's buffers promise: index uploads are int32 of their count, and a moved-from buffer is empty.
template <ExecutionPolicy P>
void check_buffer_contract(P const& p) {
  auto const indices = up(p, HostIndices{3, -1, 7});
  CHECK(indices.dtype() == DType::kI32);
  CHECK(indices.size() == 3);
  auto moved = p.allocate(5, DType::kF32);
  auto target = std::move(moved);
  CHECK(target.size() == 5);
  CHECK(moved.size() == 0);
}

template <class Check>
void gemm_cases(std::uint32_t seed, Check&& check) {
  for (auto const& c : {GemmCase(1, 1, 1, false, Activation::kIdentity, 1.0f, seed),
                        GemmCase(7, 13, 5, true, Activation::kGelu, 1.0f, seed + 10),
                        GemmCase(130, 70, 100, true, Activation::kTanh, 0.5f, seed + 20),
                        GemmCase(271, 192, 64, true, Activation::kRelu, 1.0f, seed + 30),
                        GemmCase(64, 64, 768, false, Activation::kGeluTanh, 1.0f, seed + 40),
                        GemmCase(571, 3072, 768, true, Activation::kGelu, 1.0f, seed + 50)}) {
    check(c);
  }
}

// GemmArgs::accumulate_f64 (the masked-LM decoder): large sums, where float32 accumulation is visibly off,
// with and without bias and alpha; the vocabulary-sized one spans several of Eigen's float64 blocks.
template <class Check>
void gemm_accumulate_f64_cases(std::uint32_t seed, Check&& check) {
  for (auto const& c : {GemmCase(3, 5, 7, false, Activation::kIdentity, 1.0f, seed, true),
                        GemmCase(33, 4100, 256, true, Activation::kIdentity, 1.0f, seed + 10, true),
                        GemmCase(17, 300, 768, true, Activation::kIdentity, 0.5f, seed + 20, true)}) {
    check(c);
  }
}

// A float64-accumulated gemm is its exact result rounded once: within 1.2 float32 ulp of it everywhere (a
// float32 sum over K = 256 drifts well past that).
template <ExecutionPolicy P>
void check_rounded_once(P const& p, GemmCase const& c) {
  Host const ours = c.run(p);
  std::vector<double> const exact = c.exact();
  REQUIRE(ours.size() == exact.size());
  double worst_ulps = 0.0;
  for (std::size_t i = 0; i < ours.size(); ++i) {
    double const ulp = std::max(std::ldexp(std::abs(exact[i]), -23), 1e-30);
    double const ulps = std::abs(double(ours[i]) - exact[i]) / ulp;
    if (!(ulps <= worst_ulps)) worst_ulps = std::isnan(ulps) ? INFINITY : ulps;
  }
  MESSAGE(c.name() << ": worst error " << worst_ulps << " float32 ulp of the float64 result");
  CHECK(worst_ulps <= 1.2);
}

template <class Check>
void layer_norm_cases(std::uint32_t seed, Check&& check) {
  for (std::int64_t cols : {96, 768, 1536}) {
    for (bool residual : {false, true}) check(LayerNormCase(571, cols, residual, seed++));
  }
}

template <class Check>
void embedding_cases(std::uint32_t seed, Check&& check) {
  for (bool with_tables : {false, true}) check(EmbeddingCase(with_tables, seed));
  check(EmbeddingCase(true, seed + 5, true));  // values of both signs: the clamp matters
}

template <class Check>
void conv1d_cases(std::uint32_t seed, Check&& check) {
  check(ConvCase(64, 3, 1, Activation::kTanh, seed));
  check(ConvCase(64, 3, 2, Activation::kGelu, seed + 10));
  check(ConvCase(48, 5, 4, Activation::kIdentity, seed + 20));
}

// Both implementations, head sizes that are and are not multiples of 32, every combination of position
// terms, the three relative regimes, and the v1 interleaved q/k/v layout.
template <class Check>
void lstm_cell_cases(std::uint32_t seed, Check&& check) {
  check(LstmCellCase(5, 7, 1, true, seed));
  check(LstmCellCase(37, 24, 2, false, seed + 10));
  check(LstmCellCase(64, 256, 2, false, seed + 20));  // GLiNER medium's BiLSTM step at 64 texts
}

template <class Check>
void attention_cases(std::uint32_t seed, Check&& check) {
  struct Terms {
    bool c2p, p2c;
  };
  for (AttentionImpl impl : {AttentionImpl::kFlash, AttentionImpl::kEager}) {
    for (std::int64_t d : {16, 32, 48, 64, 128}) {
      for (Terms const terms : {Terms{true, false}, Terms{false, true}, Terms{true, true}, Terms{false, false}})
        check(AttentionCase(d, terms.c2p, terms.p2c, false, RelativeRegime::kSmallBuckets, impl, seed += 10));
    }
    for (RelativeRegime regime : {RelativeRegime::kV1Span128, RelativeRegime::kV3Base})
      check(AttentionCase(64, true, true, false, regime, impl, seed += 10));
    check(AttentionCase(64, true, true, true, RelativeRegime::kV1Span128, impl, seed += 10));
  }
}

// Flash attention on sequences flagged contiguous. In 16 bits, head size 64, the CUDA tensor-core kernel reads
// Kr / Qr re-indexed by position difference (tables built per call here; the model builds them at load), one
// window per key tile, and saturated tiles as edge tiles; head size 48 takes the window path without tables.
template <class Check>
void contiguous_attention_cases(std::uint32_t seed, Check&& check) {
  constexpr AttentionImpl kFlash = AttentionImpl::kFlash;
  for (RelativeRegime regime : {RelativeRegime::kSmallBuckets, RelativeRegime::kV1Span128, RelativeRegime::kV3Base})
    check(AttentionCase(64, true, true, false, regime, kFlash, seed += 10, true));
  check(AttentionCase(64, true, false, false, RelativeRegime::kV3Base, kFlash, seed += 10, true));
  check(AttentionCase(64, false, true, false, RelativeRegime::kV3Base, kFlash, seed += 10, true));
  check(AttentionCase(48, true, true, false, RelativeRegime::kV3Base, kFlash, seed += 10, true));
}

}  // namespace flashdeberta::op_tests

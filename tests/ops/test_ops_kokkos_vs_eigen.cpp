// Every operation of KokkosPolicy against EigenPolicy (the reference, eigen_reference.cpp) on the cases of
// op_suite.hpp, the same the CUDA op test runs, from a fixed seed. Outputs are poisoned with NaN before each
// call, so an element a kernel forgets to write fails the comparison.
#include <doctest/doctest.h>

#include <cstdint>
#include <span>
#include <string>

#include "flashdeberta/eigen/eigen_policy.hpp"
#include "flashdeberta/kokkos/kokkos_policy.hpp"
#include "op_suite.hpp"

namespace fd = flashdeberta;
namespace ops = fd::op_tests;
using ops::Host;

namespace {

constexpr std::uint32_t kSeed = 11;

fd::KokkosPolicy<> const& kokkos_policy() {
  static fd::KokkosPolicy<> const policy;
  return policy;
}

// The check of each op_suite.hpp body: the case on KokkosPolicy against the reference, both fp32, at a
// tolerance relative to max(1, max |reference|) that allows a different summation order.
auto compare_at(double tolerance) {
  return [tolerance](auto const& c) {
    ops::check_close(c.run(kokkos_policy()), ops::reference_run(c), tolerance, c.name());
  };
}

}  // namespace

TEST_CASE("kokkos: KokkosPolicy satisfies the policy contract") {
  auto const& p = kokkos_policy();
  CHECK(std::string(fd::KokkosPolicy<>::name()) == "kokkos");
  CHECK(p.compute_dtype() == fd::DType::kF32);
  Host const values = ops::random_values(37, 1.0f, kSeed);
  CHECK(ops::down(p, ops::up(p, values)) == values);
  CHECK_THROWS_AS(p.upload(std::span<float const>(values), fd::DType::kF16), fd::Error);
  ops::check_buffer_contract(p);
}

TEST_CASE("kokkos vs eigen: gemm with bias and activation epilogue") { ops::gemm_cases(kSeed, compare_at(2e-6)); }

TEST_CASE("kokkos and eigen: gemm with float64 sums is the exact result rounded once") {
  fd::EigenPolicy const eigen(2);
  ops::gemm_accumulate_f64_cases(kSeed, [&](ops::GemmCase const& c) {
    ops::check_rounded_once(kokkos_policy(), c);
    ops::check_rounded_once(eigen, c);
  });
}

TEST_CASE("kokkos vs eigen: layer_norm with and without residual") { ops::layer_norm_cases(kSeed, compare_at(1e-6)); }

// The same three additions in the same order: exact.
TEST_CASE("kokkos vs eigen: embedding gather") { ops::embedding_cases(kSeed, compare_at(0.0)); }

TEST_CASE("kokkos vs eigen: conv1d over packed sequences with holes") { ops::conv1d_cases(kSeed, compare_at(2e-6)); }

// Flash and eager both against Eigen's eager path, HF's order of operations.
TEST_CASE("kokkos vs eigen: lstm_cell, one and two directions") { ops::lstm_cell_cases(kSeed, compare_at(1e-6)); }

TEST_CASE("kokkos vs eigen: disentangled attention, eager and flash") { ops::attention_cases(kSeed, compare_at(2e-6)); }

TEST_CASE("kokkos vs eigen: flash attention on contiguous positions") {
  ops::contiguous_attention_cases(kSeed + 1000, compare_at(2e-6));
}

// Training through KokkosPolicy, in one executable (one compile of the model templates): the dense training ops on
// the generic bodies of training_op_suite.hpp and training_gradient_checks.hpp; the attention backward (eager and
// flash) and the forwards' log-sum-exp against the float64 reference of attention_backward_reference.hpp; then the
// whole model's gradients against HF autograd, one AdamW step and the 20-step Trainer replay (gradient_suite.hpp,
// optimizer_suite.hpp). Every buffer lives in the policy's memory space; the host sees it through upload/download.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "../ops/attention_backward_suite.hpp"
#include "../ops/training_gradient_checks.hpp"
#include "../ops/training_op_suite.hpp"
#include "flashdeberta/kokkos/kokkos_policy.hpp"
#include "flashdeberta/math/relative_position.hpp"
#include "gradient_suite.hpp"
#include "optimizer_suite.hpp"

namespace fd = flashdeberta;
namespace tt = fd::training_tests;

namespace {

using Policy = fd::KokkosPolicy<>;
static_assert(tt::TrainingOpRunner<Policy>);

constexpr std::uint32_t kSeed = 20261207;

bool bit_identical(std::vector<double> const& a, std::vector<double> const& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

}  // namespace

// The Eigen test's bounds (test_training_ops_eigen.cpp), which hold for these kernels' summation orders too.
TEST_CASE("kokkos training: dense ops against the reference") {
  Policy const r;
  tt::linear_backward_cases(r, kSeed, 2e-6);
  tt::layer_norm_backward_cases(r, kSeed, 2e-6);
  tt::activation_cases(r, kSeed, 2e-6);
  tt::embedding_backward_cases(r, kSeed, 2e-6);
  tt::conv1d_backward_cases(r, kSeed, 2e-6);
  tt::dropout_cases(r, kSeed, 2e-7);
  tt::adamw_cases(r, kSeed, 1.0);
  tt::fill_cases(r);
  tt::sum_of_squares_cases(r, kSeed, 1e-12);
}

TEST_CASE("kokkos training: backward ops against finite differences of the forward ops") {
  Policy const r;
  tt::linear_finite_differences(r, kSeed, 1e-6);
  tt::layer_norm_finite_differences(r, kSeed, 1e-2, 1e-4);
  tt::activation_finite_differences(r, kSeed, 1e-2, 1e-4);
  tt::conv1d_finite_differences(r, kSeed, 1e-6);
}

TEST_CASE("kokkos training: bad arguments throw") { tt::rejects_bad_arguments(Policy()); }

TEST_CASE("kokkos training: every dense op is bit-identical between two runs") {
  Policy const r;
  auto const first = tt::run_every_op(r, kSeed);
  auto const second = tt::run_every_op(r, kSeed);
  REQUIRE(first.size() == second.size());
  for (std::size_t i = 0; i < first.size(); ++i)
    CHECK_MESSAGE(bit_identical(first[i].values, second[i].values), first[i].name << " differs between runs");
}

TEST_CASE("kokkos training: attention backward against the float64 reference") {
  fd::attention_tests::run_attention_backward_cases(Policy(), {8, 32, 64});
}

TEST_CASE("kokkos training: attention dropout against the float64 reference at p = 0.1 and 0.5") {
  fd::attention_tests::run_attention_dropout_cases(Policy());
}

TEST_CASE("kokkos training: the forwards' log-sum-exp matches the reference and leaves out unchanged") {
  fd::attention_tests::run_attention_lse_cases(Policy());
}

TEST_CASE("kokkos training: the attention backward is bit-identical between runs") {
  fd::attention_tests::run_attention_bit_identity_cases(Policy());
}

TEST_CASE("kokkos training: the attention backward refuses unsupported dtypes and shapes by name") {
  fd::attention_tests::run_attention_backward_refusals(Policy());
}

TEST_CASE("kokkos training: gradients of every fixture case against HF autograd") {
  fd::testing::run_gradient_suite(Policy());
}

TEST_CASE("kokkos training: the last layer over the head's rows only matches every row") {
  fd::testing::run_head_rows_cases(Policy());
}

TEST_CASE("kokkos training: one AdamW step against torch.optim.AdamW") { fd::testing::run_adamw_step_case(Policy()); }

TEST_CASE("kokkos training: 20 steps of HF's Trainer replayed") {
  for (auto impl : {fd::AttentionImpl::kFlash, fd::AttentionImpl::kEager})
    fd::testing::run_trainer_replay(Policy(), impl);
}

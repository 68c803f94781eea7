// Training through CudaPolicy in float32, in one executable (one compile of the model templates), mirroring
// tests/train/test_training_kokkos.cpp: the dense training ops on the generic bodies of training_op_suite.hpp and
// training_gradient_checks.hpp; the attention backward (eager and flash, with and without the forward's lse, every
// set of position terms, dropout) and the forwards' log-sum-exp against the float64 reference of
// attention_backward_reference.hpp; then the whole model's gradients against HF autograd, one AdamW step and the
// 20-step Trainer replay (gradient_suite.hpp, optimizer_suite.hpp), and bf16 / fp16 mixed precision against HF's own
// autocast error (mixed_precision_suite.hpp). The bounds are the Kokkos test's: the CUDA
// kernels sum in float32 (attention, cuBLASLt's products) or float64 (column sums, LayerNorm, D) as the host ones do,
// in other orders whose rounding stays well inside them.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "../ops/attention_backward_suite.hpp"
#include "../ops/training_gradient_checks.hpp"
#include "../ops/training_op_suite.hpp"
#include "../train/gradient_suite.hpp"
#include "../train/mixed_precision_suite.hpp"
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

namespace {

using fd::attention_tests::AttentionCase;
using fd::attention_tests::Spec;

}  // namespace

TEST_CASE("cuda training: attention backward against the float64 reference") {
  fd::attention_tests::run_attention_backward_cases(policy(), {8, 32, 64, 100});
}

// The flash forward and backward with bf16 / fp16 products (CudaPolicy's tensor-core kernels,
// training/attention_forward_mma.cuh and attention_backward_mma.cuh) on the float32 tape, against the float64
// reference: head sizes 32, 48, 64 and 80 (the float32 kernels: above 64),
// packed batches with holes, each set of position terms, short windows (saturated tiles), dropout 0.1 and 0.5. Bound:
// 20 unit roundoffs u of the product type (bf16 2^-9, fp16 2^-12) of each tensor's largest magnitude. Each gradient
// sums products of two operands rounded to the type (2u each), one of which (P or dS) already carries the error of a
// product of rounded operands (S, dP: about 2u of the row's scale, amplified in dS by the cancellation in dP - D); the
// largest error over thousands of elements is a few standard deviations of that, about 10u. Flash runs the tensor-core
// passes with and without the forward's lse (they form their own); eager attention runs the float32 kernels and
// passes far inside it.
TEST_CASE("cuda training: attention backward with 16-bit products against the float64 reference") {
  for (fd::DType dtype : {fd::DType::kBF16, fd::DType::kF16}) {
    Policy const p(fd::CudaOptions{.dtype = dtype});
    double const bound = 20.0 * (dtype == fd::DType::kBF16 ? 0x1p-9 : 0x1p-12);
    INFO(std::string(fd::dtype_name(dtype)), " products, bound ", bound);
    fd::attention_tests::run_attention_backward_cases(p, {32, 48, 64, 80}, bound);
    fd::attention_tests::run_attention_dropout_cases(p, bound);
  }
}

// A bf16 policy's flash backward runs the tensor-core passes at head size 64, with or without the forward's lse, so
// its gradients differ from the float32 policy's (with its own forward's lse the row pass takes the statistics from
// it, without it the pass forms them: both within the bound of the case above). At 80 it runs the float32 kernels:
// the float32 policy's bits (bf16 needs sm_80, as the passes do).
TEST_CASE("cuda training: the 16-bit flash backward falls back to the float32 kernels above head size 64") {
  for (std::int64_t d : {64, 80}) {
    for (bool use_lse : {false, true}) {
      Spec s;
      s.lengths = {130, 37};
      s.head_size = d;
      s.holes = true;
      AttentionCase<Policy> f32(policy(), s);
      AttentionCase<Policy> bf16(Policy(fd::CudaOptions{.dtype = fd::DType::kBF16}), s);
      f32.run(fd::AttentionImpl::kFlash, use_lse);
      bf16.run(fd::AttentionImpl::kFlash, use_lse);
      INFO("head size ", d, use_lse ? " with" : " without", " the forward's lse");
      CHECK((tt::download(f32.policy, f32.dqkv_d) == tt::download(bf16.policy, bf16.dqkv_d)) == (d > 64));
    }
  }
}

// The tensor-core passes' tiles from FLASHDEBERTA_BWD_* (and the per-pass FLASHDEBERTA_BWD_Q_*, _KV_*): every compiled
// BLOCK_M runs the bf16 cases within their bound, the two passes apart too; a partial group, a value not compiled and
// NUM_WARPS other than BLOCK_M / 16 are refused by name at the backward.
namespace {
struct TileEnvironment {
  std::vector<std::string> names;
  void set(std::string const& group, int block_m, int block_n, int stages, int warps) {
    std::pair<char const*, int> const fields[] = {
        {"_BLOCK_M", block_m}, {"_BLOCK_N", block_n}, {"_NUM_STAGES", stages}, {"_NUM_WARPS", warps}};
    for (auto const& [field, value] : fields) {
      if (value == 0) continue;  // left unset: a partial group
      names.push_back(group + field);
      setenv(names.back().c_str(), std::to_string(value).c_str(), 1);
    }
  }
  ~TileEnvironment() {
    for (std::string const& name : names) unsetenv(name.c_str());
  }
};
}  // namespace

TEST_CASE("cuda training: the tensor-core backward's tiles from FLASHDEBERTA_BWD_*") {
  Policy const p(fd::CudaOptions{.dtype = fd::DType::kBF16});
  double const bound = 20.0 * 0x1p-9;
  for (int block_m : {32, 128}) {
    TileEnvironment env;
    env.set("FLASHDEBERTA_BWD", block_m, 64, 1, block_m / 16);
    INFO("FLASHDEBERTA_BWD_BLOCK_M=", block_m);
    fd::attention_tests::run_attention_backward_cases(p, {64}, bound);
  }
  {
    TileEnvironment env;
    env.set("FLASHDEBERTA_BWD_Q", 128, 64, 1, 8);
    env.set("FLASHDEBERTA_BWD_KV", 32, 64, 1, 2);
    INFO("row pass 128, column pass 32");
    fd::attention_tests::run_attention_dropout_cases(p, bound);
  }
  struct Refusal {
    char const* group;
    int block_m, block_n, stages, warps;
    char const* names;
  };
  for (Refusal const& r : {Refusal{"FLASHDEBERTA_BWD", 64, 64, 1, 8, "NUM_WARPS 4, not 8"},
                           Refusal{"FLASHDEBERTA_BWD_KV", 64, 32, 1, 4, "FLASHDEBERTA_BWD_KV_BLOCK_N=32"},
                           Refusal{"FLASHDEBERTA_BWD_Q", 64, 64, 2, 4, "FLASHDEBERTA_BWD_Q_NUM_STAGES=2"},
                           Refusal{"FLASHDEBERTA_BWD", 64, 64, 0, 4, "FLASHDEBERTA_BWD_NUM_STAGES too"}}) {
    TileEnvironment env;
    env.set(r.group, r.block_m, r.block_n, r.stages, r.warps);
    Spec s;
    s.head_size = 64;
    AttentionCase<Policy> c(p, s);
    CHECK_THROWS_WITH_AS(c.run(fd::AttentionImpl::kFlash, false), doctest::Contains(r.names), fd::Error);
  }
}

TEST_CASE("cuda training: attention dropout against the float64 reference at p = 0.1 and 0.5") {
  fd::attention_tests::run_attention_dropout_cases(policy());
}

TEST_CASE("cuda training: the forwards' log-sum-exp matches the reference and leaves out unchanged") {
  fd::attention_tests::run_attention_lse_cases(policy());
}

// Float32 operands under a bf16 / fp16 compute dtype (mixed-precision training) run the tensor-core forward
// (training/attention_forward_mma.cuh) at head sizes up to 64, whose output the 16-bit backward cases above check
// against the reference; its lse at the same 20 unit roundoffs, of the largest |lse|.
TEST_CASE("cuda training: the mixed-precision forward's log-sum-exp matches the reference") {
  for (fd::DType dtype : {fd::DType::kBF16, fd::DType::kF16}) {
    INFO(std::string(fd::dtype_name(dtype)), " products");
    fd::attention_tests::run_attention_lse_cases(Policy(fd::CudaOptions{.dtype = dtype}),
                                                 20.0 * (dtype == fd::DType::kBF16 ? 0x1p-9 : 0x1p-12));
  }
}

// The 16-bit kernels of 16-bit operands have neither the log-sum-exp output nor the dropout: refused by name before
// any launch.
TEST_CASE("cuda training: the 16-bit attention forwards refuse training's lse and dropout") {
  AttentionCase<Policy> c(policy(), Spec{});
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
  fd::attention_tests::run_attention_bit_identity_cases(policy());
}

TEST_CASE("cuda training: the attention backward refuses unsupported dtypes and shapes by name") {
  fd::attention_tests::run_attention_backward_refusals(policy());
}

TEST_CASE("cuda training: gradients of every fixture case against HF autograd") {
  fd::testing::run_gradient_suite(policy());
}

TEST_CASE("cuda training: the last layer over the head's rows only matches every row") {
  fd::testing::run_head_rows_cases(policy());
}

// BatchesFloatRuns (ParameterSet's zero_grads and grad_norm in one call): runs of 0, 1, 768 and 40,000 floats (three
// chunks of kSquaresChunk) over one buffer with gaps; the sum against float64 on the host, the fill leaving the gaps.
TEST_CASE("cuda training: a fill and a sum of squares over many runs in one call") {
  std::vector<float> host(50000);
  for (std::size_t x = 0; x < host.size(); ++x) host[x] = static_cast<float>((x * 7919) % 1000) / 997.0f - 0.5f;
  auto const buffer = tt::upload(policy(), host);
  auto* const base = static_cast<float*>(buffer.data());
  std::vector<fd::FloatRun> const runs{{base + 3, 0}, {base + 5, 1}, {base + 100, 768}, {base + 9000, 40000}};
  double want = 0.0;
  for (fd::FloatRun const& r : runs)
    for (std::int64_t x = 0; x < r.count; ++x) {
      double const v = host[static_cast<std::size_t>(r.data - base + x)];
      want += v * v;
    }
  double const got = policy().sum_of_squares(std::span<fd::FloatRun const>(runs));
  CHECK(std::abs(got - want) <= 1e-12 * want);
  policy().fill(std::span<fd::FloatRun const>(runs), 2.0f);
  std::vector<float> const after = tt::download(policy(), buffer);
  std::vector<bool> in_run(host.size(), false);
  for (fd::FloatRun const& r : runs)
    for (std::int64_t x = 0; x < r.count; ++x) in_run[static_cast<std::size_t>(r.data - base + x)] = true;
  std::size_t wrong = 0;
  for (std::size_t x = 0; x < host.size(); ++x) wrong += after[x] != (in_run[x] ? 2.0f : host[x]) ? 1 : 0;
  CHECK(wrong == 0);
}

TEST_CASE("cuda training: one AdamW step against torch.optim.AdamW") { fd::testing::run_adamw_step_case(policy()); }

TEST_CASE("cuda training: a loss-scaled AdamW step, and one skipped on overflow") {
  fd::testing::run_loss_scaled_step_case(policy());
}

TEST_CASE("cuda training: 20 steps of HF's Trainer replayed") {
  for (auto impl : {fd::AttentionImpl::kFlash, fd::AttentionImpl::kEager})
    fd::testing::run_trainer_replay(policy(), impl);
}

TEST_CASE("cuda training: mixed-precision gradients within HF autocast's own error against float64") {
  for (fd::DType dtype : {fd::DType::kBF16, fd::DType::kF16}) {
    Policy const p(fd::CudaOptions{.dtype = dtype});
    fd::testing::run_mixed_precision_suite(p, dtype == fd::DType::kBF16 ? "bf16" : "fp16");
  }
}

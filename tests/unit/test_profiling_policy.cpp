// ProfilingPolicy<EigenPolicy>: forwards every operation unchanged and counts calls and time per kind.
#include <doctest/doctest.h>

#include <vector>

#include "flashdeberta/eigen/eigen_policy.hpp"
#include "flashdeberta/policy/profiling_policy.hpp"

namespace flashdeberta {
namespace {

static_assert(ExecutionPolicy<ProfilingPolicy<EigenPolicy>>);

// out (2, 3) = a (2, 4) . b (3, 4)^T + bias, small enough to check by hand.
struct TinyGemm {
  std::vector<float> a{1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<float> b{1, 0, 0, 0, 0, 1, 0, 0, 1, 1, 1, 1};
  std::vector<float> bias{0.5f, -1.0f, 2.0f};
  std::vector<float> expected{1.5f, 1.0f, 12.0f, 5.5f, 5.0f, 28.0f};
};

template <class P>
std::vector<float> run_gemm(P const& policy, TinyGemm const& g, int repeats) {
  auto a = policy.upload(std::span<float const>(g.a), DType::kF32);
  auto b = policy.upload(std::span<float const>(g.b), DType::kF32);
  auto bias = policy.upload(std::span<float const>(g.bias), DType::kF32);
  auto out = policy.allocate(6, DType::kF32);
  for (int r = 0; r < repeats; ++r) {
    policy.gemm({.a = matrix_ref(a.data(), DType::kF32, 2, 4),
                 .b = matrix_ref(b.data(), DType::kF32, 3, 4),
                 .bias = bias.data(),
                 .out = matrix_ref(out.data(), DType::kF32, 2, 3)});
  }
  std::vector<float> host(6);
  policy.download(out, std::span<float>(host));
  return host;
}

TEST_CASE("ProfilingPolicy forwards gemm and counts its calls and time") {
  ProfilingPolicy<EigenPolicy> const policy{EigenPolicy(1)};
  TinyGemm const g;
  std::vector<float> const out = run_gemm(policy, g, 3);
  for (std::size_t i = 0; i < out.size(); ++i) CHECK(out[i] == doctest::Approx(g.expected[i]));

  ProfileReport const report = policy.report();
  CHECK(report[ProfiledOp::kGemm].calls == 3);
  CHECK(report[ProfiledOp::kGemm].seconds > 0.0);
  CHECK(report[ProfiledOp::kGemm].flops == doctest::Approx(3 * 2.0 * 2 * 3 * 4));
  CHECK(report[ProfiledOp::kLayerNorm].calls == 0);
  CHECK(report[ProfiledOp::kAttention].seconds == 0.0);
  CHECK(report.share(ProfiledOp::kGemm) == doctest::Approx(1.0));
  CHECK(report.format().find("gemm") != std::string::npos);
}

TEST_CASE("ProfilingPolicy copies share counters, and reset clears them") {
  ProfilingPolicy<EigenPolicy> const policy{EigenPolicy(1)};
  ProfilingPolicy<EigenPolicy> const copy = policy;  // as a model keeps its own copy
  TinyGemm const g;
  run_gemm(copy, g, 2);
  CHECK(policy.report()[ProfiledOp::kGemm].calls == 2);

  std::vector<float> const x{1, 2, 3, 4};
  std::vector<float> const gamma{1, 1, 1, 1};
  std::vector<float> const beta{0, 0, 0, 0};
  auto xb = policy.upload(std::span<float const>(x), DType::kF32);
  auto gb = policy.upload(std::span<float const>(gamma), DType::kF32);
  auto bb = policy.upload(std::span<float const>(beta), DType::kF32);
  auto yb = policy.allocate(4, DType::kF32);
  policy.layer_norm({.x = matrix_ref(xb.data(), DType::kF32, 1, 4),
                     .gamma = gb.data(),
                     .beta = bb.data(),
                     .out = matrix_ref(yb.data(), DType::kF32, 1, 4)});
  ProfileReport const report = copy.report();
  CHECK(report[ProfiledOp::kLayerNorm].calls == 1);
  CHECK(report.total_seconds() >= report[ProfiledOp::kGemm].seconds);

  policy.reset();
  CHECK(copy.report()[ProfiledOp::kGemm].calls == 0);
  CHECK(copy.report().total_seconds() == 0.0);
}

}  // namespace
}  // namespace flashdeberta

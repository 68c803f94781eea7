// ProfilingPolicy<EigenPolicy>: forwards every operation unchanged and counts calls and time per kind, the training
// ops included.
#include <doctest/doctest.h>

#include <filesystem>
#include <vector>

#include "flashdeberta/eigen/eigen_policy.hpp"
#include "flashdeberta/policy/profiling_policy.hpp"
#include "flashdeberta/train/optimizer.hpp"
#include "flashdeberta/train/training_model.hpp"

namespace flashdeberta {
namespace {

static_assert(ExecutionPolicy<ProfilingPolicy<EigenPolicy>>);
static_assert(TrainingPolicy<ProfilingPolicy<EigenPolicy>>);
static_assert(ReportsAttentionBackwardWorkspace<ProfilingPolicy<EigenPolicy>> ==
              ReportsAttentionBackwardWorkspace<EigenPolicy>);

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

// One training step (forward, loss, backward, AdamW) of a fixture: the profiled policy gives the plain one's loss and
// updated weights bit for bit and counts each training op it ran.
template <class P>
std::pair<double, std::vector<std::pair<std::string, std::vector<float>>>> training_step(P const& policy) {
  std::filesystem::path const dir = std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR) / "training" / "v3_seqcls";
  auto model = TrainingModel<V3, P>::load(policy, dir, {});
  Batch batch;
  batch.add_sequence(std::vector<std::int32_t>{1, 5, 6, 7, 2});
  batch.add_sequence(std::vector<std::int32_t>{1, 8, 9, 2});
  DropoutRates const dropout{.hidden = 0.1f, .attention = 0.1f};
  double const loss = model.forward_backward(batch, {.classes = {1, 0}}, dropout, 3).loss;
  AdamW<P> optimizer({.learning_rate = 1e-3, .weight_decay = 0.01});
  optimizer.step(model.parameters());
  return {loss, model.parameters().download_values()};
}

TEST_CASE("ProfilingPolicy profiles a training step and changes nothing in it") {
  auto const plain = training_step(EigenPolicy(1));
  ProfilingPolicy<EigenPolicy> const policy{EigenPolicy(1)};
  auto const profiled = training_step(policy);
  CHECK(profiled.first == plain.first);
  CHECK(profiled.second == plain.second);
  ProfileReport const report = policy.report();
  for (ProfiledOp op : {ProfiledOp::kGemm, ProfiledOp::kAttention, ProfiledOp::kLinearBackward,
                        ProfiledOp::kLayerNormBackward, ProfiledOp::kAttentionBackward, ProfiledOp::kEmbeddingBackward,
                        ProfiledOp::kDropout, ProfiledOp::kAdamW, ProfiledOp::kSumOfSquares}) {
    INFO(profiled_op_name(op));
    CHECK(report[op].calls > 0);
  }
  CHECK(report[ProfiledOp::kLinearBackward].flops > 0.0);
  CHECK(report.format().find("attention_backward") != std::string::npos);
}

}  // namespace
}  // namespace flashdeberta

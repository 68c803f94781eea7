#include "flashdeberta/eigen/eigen_policy.hpp"
#include "gradient_suite.hpp"
#include "optimizer_suite.hpp"

TEST_CASE("training: gradients of every fixture case against HF autograd through EigenPolicy") {
  flashdeberta::testing::run_gradient_suite(flashdeberta::EigenPolicy(2));
}

TEST_CASE("training: one AdamW step against torch.optim.AdamW through EigenPolicy") {
  flashdeberta::testing::run_adamw_step_case(flashdeberta::EigenPolicy(2));
}

TEST_CASE("training: a loss-scaled AdamW step, and one skipped on overflow, through EigenPolicy") {
  flashdeberta::testing::run_loss_scaled_step_case(flashdeberta::EigenPolicy(2));
}

TEST_CASE("training: 20 steps of HF's Trainer replayed through EigenPolicy") {
  for (auto impl : {flashdeberta::AttentionImpl::kFlash, flashdeberta::AttentionImpl::kEager})
    flashdeberta::testing::run_trainer_replay(flashdeberta::EigenPolicy(2), impl);
}

TEST_CASE("training: the last layer over the head's rows only matches every row through EigenPolicy") {
  flashdeberta::testing::run_head_rows_cases(flashdeberta::EigenPolicy(2));
}

TEST_CASE("training: activation checkpointing and the memory refusal through EigenPolicy") {
  flashdeberta::testing::run_checkpointing_and_memory_cases(flashdeberta::EigenPolicy(2));
}

namespace {

// EigenPolicy reporting a large backward workspace for attention, as CudaPolicy's (T, heads, 2k) bands are.
struct ReportingBackwardPolicy : flashdeberta::EigenPolicy {
  using flashdeberta::EigenPolicy::EigenPolicy;
  std::int64_t attention_backward_workspace_bytes(flashdeberta::AttentionShape const& s) const {
    return s.total_tokens * (std::int64_t{1} << 20);
  }
};
static_assert(flashdeberta::ReportsAttentionBackwardWorkspace<ReportingBackwardPolicy>);
static_assert(!flashdeberta::ReportsAttentionBackwardWorkspace<flashdeberta::EigenPolicy>);

}  // namespace

// A policy's own backward workspace (ReportsAttentionBackwardWorkspace) replaces the default's partials in the step
// estimate, so a step that fits on the host is refused where the backward would allocate 1 MiB per token.
TEST_CASE("training: the step estimate counts the policy's attention backward workspace") {
  namespace fd = flashdeberta;
  fd::ModelConfig const config = fd::load_model_config(fd::testing::training_fixture_dir() / "v3_seqcls");
  fd::testing::TrainingCase const c =
      fd::testing::read_training_case(fd::testing::training_fixture_dir() / "v3_seqcls");
  fd::EigenPolicy const host(2);
  ReportingBackwardPolicy const reporting(2);
  auto const estimate = [&](auto const& policy) {
    return fd::estimate_training_memory(policy, config, c.batch, fd::AttentionImpl::kFlash, false, 1, 2);
  };
  fd::TrainingMemory const plain = estimate(host), reported = estimate(reporting);
  CHECK(reported.tape == plain.tape);
  CHECK(reported.attention_workspace >= c.batch.total_tokens() * (std::int64_t{1} << 20));
  CHECK(reported.total - plain.total == reported.attention_workspace - plain.attention_workspace);
}

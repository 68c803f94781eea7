#include "flashdeberta/eigen/eigen_policy.hpp"
#include "gradient_suite.hpp"
#include "optimizer_suite.hpp"

TEST_CASE("training: gradients of every fixture case against HF autograd through EigenPolicy") {
  flashdeberta::testing::run_gradient_suite(flashdeberta::EigenPolicy(2));
}

TEST_CASE("training: one AdamW step against torch.optim.AdamW through EigenPolicy") {
  flashdeberta::testing::run_adamw_step_case(flashdeberta::EigenPolicy(2));
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

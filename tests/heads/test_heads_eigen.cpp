#include "flashdeberta/eigen/eigen_policy.hpp"
#include "heads_bin_suite.hpp"
#include "heads_suite.hpp"

TEST_CASE("heads: HF fixtures through EigenPolicy") {
  flashdeberta::testing::run_head_golden_suite(flashdeberta::EigenPolicy(2));
}

TEST_CASE("heads: errors through EigenPolicy") {
  flashdeberta::testing::run_head_error_suite(flashdeberta::EigenPolicy(2));
}

TEST_CASE("heads: HF fixtures from pytorch_model.bin through EigenPolicy") {
  flashdeberta::testing::run_head_torch_bin_suite(flashdeberta::EigenPolicy(2));
}

#include "flashdeberta/eigen/eigen_policy.hpp"
#include "golden_suite.hpp"

TEST_CASE("HF fixtures through EigenPolicy") { flashdeberta::testing::run_golden_suite(flashdeberta::EigenPolicy(2)); }

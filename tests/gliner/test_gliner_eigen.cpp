#include "flashdeberta/eigen/eigen_policy.hpp"
#include "gliner_suite.hpp"

TEST_CASE("gliner: GLiNER fixtures through EigenPolicy") {
  flashdeberta::testing::run_gliner_fixture_suite(flashdeberta::EigenPolicy(2));
}

TEST_CASE("gliner: a missing tensor is refused through EigenPolicy") {
  flashdeberta::testing::run_gliner_missing_tensor(flashdeberta::EigenPolicy(2));
}

TEST_CASE("gliner: refused configs") { flashdeberta::testing::run_gliner_refusals(); }

TEST_CASE("gliner: word splitter") { flashdeberta::testing::run_gliner_word_splitter(); }

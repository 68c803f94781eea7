#include "flashdeberta/eigen/eigen_policy.hpp"
#include "gliner_batch_suite.hpp"
#include "gliner_long_text_suite.hpp"
#include "gliner_suite.hpp"

TEST_CASE("gliner: GLiNER fixtures through EigenPolicy") {
  flashdeberta::testing::run_gliner_fixture_suite(flashdeberta::EigenPolicy(2));
}

TEST_CASE("gliner: a missing tensor is refused through EigenPolicy") {
  flashdeberta::testing::run_gliner_missing_tensor(flashdeberta::EigenPolicy(2));
}

TEST_CASE("gliner: num_hidden_layers past the checkpoint's layers and FIFOs as files are refused") {
  flashdeberta::testing::run_gliner_unreadable_files(flashdeberta::EigenPolicy(2));
}

TEST_CASE("gliner: a class_token_index other than ent_token's id is refused") {
  flashdeberta::testing::run_gliner_class_token_index(flashdeberta::EigenPolicy(2));
}

// Eigen sizes its GEMM blocks from the row count, so a text's sums may run in another order in a batch: its
// results agree to a few float32 ulps of the logits (6.7e-6 measured), not bit for bit as KokkosPolicy's.
TEST_CASE("gliner: a batch with per-text label sets gives each text its result alone, through EigenPolicy") {
  flashdeberta::testing::run_gliner_batch_matches_single(flashdeberta::EigenPolicy(2), 2e-5);
}

TEST_CASE("gliner: refused configs") { flashdeberta::testing::run_gliner_refusals(); }

TEST_CASE("gliner: word splitter") { flashdeberta::testing::run_gliner_word_splitter(); }

TEST_CASE("gliner: long texts, window planning and merging") {
  flashdeberta::testing::run_gliner_window_planning();
  flashdeberta::testing::run_gliner_window_merge();
  flashdeberta::testing::run_gliner_long_text_option_checks();
}

TEST_CASE("gliner: long texts through EigenPolicy") {
  flashdeberta::EigenPolicy const policy(2);
  flashdeberta::testing::run_gliner_long_text_short_texts(policy);
  flashdeberta::testing::run_gliner_long_text_repeats(policy);
  flashdeberta::testing::run_gliner_long_text_token_level(policy);
  flashdeberta::testing::run_gliner_long_text_token_limit(policy);
  flashdeberta::testing::run_gliner_prompt_fills_window(policy);
}

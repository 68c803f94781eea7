// The pair tasks' post-processing on hand-made logits: zero-shot classification as HF's
// ZeroShotClassificationPipeline (transformers 5.17), rerank as TEI's /rerank, and embedding pooling. The CLI
// tests (tests/cli/test_cli_pair_tasks.cpp) check them end to end against HF's outputs.
#include <doctest/doctest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/pipelines/pipelines.hpp"

namespace fp = flashdeberta::pipelines;

namespace {

using Labels = std::vector<std::string>;

double logistic(double x) { return 1.0 / (1.0 + std::exp(-x)); }

}  // namespace

TEST_CASE("zero-shot: the entailment column by name, the contradiction column by position (HF's rule)") {
  auto const nli = fp::nli_label_ids(Labels{"entailment", "neutral", "contradiction"});
  REQUIRE(nli.has_value());
  CHECK(nli->entailment == 0);
  CHECK(nli->contradiction == 2);  // entailment is label 0: the last label
  auto const cross_encoder = fp::nli_label_ids(Labels{"contradiction", "ENTAILMENT", "neutral"});
  REQUIRE(cross_encoder.has_value());
  CHECK(cross_encoder->entailment == 1);  // case-insensitive
  CHECK(cross_encoder->contradiction == 0);
  auto const two = fp::nli_label_ids(Labels{"entailment", "not_entailment"});
  REQUIRE(two.has_value());
  CHECK(two->contradiction == 1);  // no label is named contradiction; HF reads the last one
  // The first label starting with "entail" wins; "Entails" counts, "not_entailment" does not.
  auto const first = fp::nli_label_ids(Labels{"neutral", "not_entailment", "Entails", "entailment"});
  REQUIRE(first.has_value());
  CHECK(first->entailment == 2);
  CHECK(first->contradiction == 0);
  CHECK_FALSE(fp::nli_label_ids(Labels{"LABEL_0", "LABEL_1", "LABEL_2"}).has_value());
  CHECK_FALSE(fp::nli_label_ids(Labels{}).has_value());
}

TEST_CASE("zero-shot: candidate labels from a string, as HF's _parse_labels") {
  CHECK(fp::parse_candidate_labels("sports, weather ,politics") == Labels{"sports", "weather", "politics"});
  CHECK(fp::parse_candidate_labels("one") == Labels{"one"});
  CHECK(fp::parse_candidate_labels(" a ,, b,\t,") == Labels{"a", "b"});
  CHECK(fp::parse_candidate_labels(" , ").empty());
  CHECK(fp::parse_candidate_labels("").empty());
  CHECK(fp::parse_candidate_labels("not urgent,K\u00fcche") == Labels{"not urgent", "K\u00fcche"});
}

TEST_CASE("zero-shot: hypotheses as Python's str.format with one label") {
  CHECK(fp::format_hypothesis(fp::kDefaultHypothesisTemplate, "sports") == "This example is sports.");
  CHECK(fp::format_hypothesis("{0} or {}?", "x") == "x or x?");
  CHECK(fp::format_hypothesis("{{literal}} {}", "x") == "{literal} x");
  CHECK_THROWS_WITH_AS(fp::format_hypothesis("about {label}", "x"),
                       doctest::Contains("only {} (or {0}) may stand for the label"), flashdeberta::Error);
  CHECK_THROWS_WITH_AS(fp::format_hypothesis("open { brace", "x"), doctest::Contains("\"open { brace\""),
                       flashdeberta::Error);
  CHECK_THROWS_WITH_AS(fp::format_hypothesis("close } brace", "x"), doctest::Contains("single '}'"),
                       flashdeberta::Error);
  Labels const labels = {"a", "b"};
  CHECK(fp::hypotheses("It is {}.", labels) == Labels{"It is a.", "It is b."});
  // HF's two refusals: no label, and a template the label does not change.
  CHECK_THROWS_WITH_AS(fp::hypotheses("It is {}.", Labels{}), doctest::Contains("at least one candidate label"),
                       flashdeberta::Error);
  CHECK_THROWS_WITH_AS(fp::hypotheses("No placeholder.", labels),
                       doctest::Contains("\"No placeholder.\" has no {} where the candidate label should go"),
                       flashdeberta::Error);
}

TEST_CASE("zero-shot scores: softmax of the entailment logits, or entailment vs contradiction per label") {
  fp::NliLabelIds const ids{0, 2};
  // Three candidates x (entailment, neutral, contradiction).
  std::vector<float> const logits = {1.0f, 0.0f, -1.0f,  //
                                     2.0f, 5.0f, 0.5f,   //
                                     0.0f, 0.0f, 3.0f};
  std::vector<float> const single = fp::zero_shot_scores(logits, 3, ids, false);
  double const sum = std::exp(1.0) + std::exp(2.0) + std::exp(0.0);
  CHECK(single[0] == doctest::Approx(std::exp(1.0) / sum).epsilon(1e-6));
  CHECK(single[1] == doctest::Approx(std::exp(2.0) / sum).epsilon(1e-6));
  CHECK(single[2] == doctest::Approx(1.0 / sum).epsilon(1e-6));
  std::vector<float> const multi = fp::zero_shot_scores(logits, 3, ids, true);
  CHECK(multi[0] == doctest::Approx(logistic(1.0 - -1.0)).epsilon(1e-6));  // neutral plays no part
  CHECK(multi[1] == doctest::Approx(logistic(2.0 - 0.5)).epsilon(1e-6));
  CHECK(multi[2] == doctest::Approx(logistic(0.0 - 3.0)).epsilon(1e-6));
  // One candidate: HF scores it alone whatever multi_label says (a softmax over one label would be 1).
  std::vector<float> const one(logits.begin(), logits.begin() + 3);
  CHECK(fp::zero_shot_scores(one, 3, ids, false)[0] == doctest::Approx(logistic(2.0)).epsilon(1e-6));
  // Large logits do not overflow.
  std::vector<float> const big = {1000.0f, 0.0f, -1000.0f, 999.0f, 0.0f, 0.0f};
  std::vector<float> const big_scores = fp::zero_shot_scores(big, 3, ids, false);
  CHECK(big_scores[0] == doctest::Approx(logistic(1.0)).epsilon(1e-6));
  CHECK(fp::zero_shot_scores(big, 3, ids, true)[0] == doctest::Approx(1.0));
  CHECK_THROWS_AS(fp::zero_shot_scores(std::vector<float>(4, 0.0f), 3, ids, false), flashdeberta::Error);
  CHECK_THROWS_AS(fp::zero_shot_scores(std::vector<float>(4, 0.0f), 2, ids, false), flashdeberta::Error);
}

TEST_CASE("zero-shot order: best first, and of equal scores the later candidate first (reversed argsort)") {
  std::vector<float> const scores = {0.2f, 0.5f, 0.2f, 0.1f};
  CHECK(fp::zero_shot_order(scores) == std::vector<std::size_t>{1, 2, 0, 3});
  Labels const candidates = {"a", "b", "c", "d"};
  fp::ZeroShotResult const r = fp::rank_candidates(candidates, scores);
  CHECK(r.labels == Labels{"b", "c", "a", "d"});
  CHECK(r.scores == std::vector<float>{0.5f, 0.2f, 0.2f, 0.1f});
  CHECK_THROWS_AS(fp::rank_candidates(Labels{"a"}, scores), flashdeberta::Error);
}

TEST_CASE("rerank: by descending logit, ties in request order, top_n, sigmoid or raw scores") {
  std::vector<float> const logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  CHECK(fp::rerank_order(logits) == std::vector<std::size_t>{1, 3, 4, 0, 2});
  auto const all = fp::rerank(logits, std::nullopt, false);
  REQUIRE(all.size() == 5);
  CHECK(all[0].index == 1);
  CHECK(all[1].index == 3);
  CHECK(all[0].score == doctest::Approx(logistic(2.0)).epsilon(1e-7));
  CHECK(all[4].index == 2);
  CHECK(all[4].score == doctest::Approx(logistic(-1.0)).epsilon(1e-7));
  auto const top = fp::rerank(logits, 2, true);
  REQUIRE(top.size() == 2);
  CHECK(top[0].score == 2.0f);
  CHECK(top[1].index == 3);
  CHECK(fp::rerank(logits, 10, false).size() == 5);
  CHECK(fp::rerank(logits, 0, false).empty());
  CHECK(fp::rerank(std::vector<float>{}, 3, false).empty());
  // Logits whose sigmoids round to the same float keep their own order.
  std::vector<float> const saturated = {20.0f, 30.0f};
  auto const s = fp::rerank(saturated, std::nullopt, false);
  CHECK(s[0].index == 1);
  CHECK(s[0].score == s[1].score);
}

TEST_CASE("embedding: [CLS] or mean pooling, L2 normalization") {
  // Three tokens x hidden 2.
  std::vector<float> const hidden = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 9.0f};
  CHECK(fp::pool(hidden, 2, fp::Pooling::kCls) == std::vector<float>{1.0f, 2.0f});
  CHECK(fp::pool(hidden, 2, fp::Pooling::kMean) == std::vector<float>{3.0f, 5.0f});
  std::vector<float> v = {3.0f, 4.0f};
  fp::l2_normalize(v);
  CHECK(v[0] == doctest::Approx(0.6));
  CHECK(v[1] == doctest::Approx(0.8));
  std::vector<float> zero = {0.0f, 0.0f};
  fp::l2_normalize(zero);  // stays zero, not NaN
  CHECK(zero == std::vector<float>{0.0f, 0.0f});
  CHECK_THROWS_AS(fp::pool(std::vector<float>{1.0f, 2.0f, 3.0f}, 2, fp::Pooling::kMean), flashdeberta::Error);
  CHECK_THROWS_AS(fp::pool(std::vector<float>{}, 2, fp::Pooling::kCls), flashdeberta::Error);
}

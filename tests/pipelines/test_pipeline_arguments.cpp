// The pipelines' call arguments on hand-made logits (HF's rules, one at a time): token classification's
// aggregation strategies and ignore_labels, fill-mask targets, function_to_apply, question answering's top_k,
// null score and the merge of windows.
#include <doctest/doctest.h>

#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "flashdeberta/pipelines/pipelines.hpp"
#include "hand_encoding.hpp"

namespace fp = flashdeberta::pipelines;
using flashdeberta::tokenizer::Encoding;
using flashdeberta::tokenizer::Span;

namespace {

std::string const kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's word mark

// Joins token strings as SentencePiece's decoder does (▁ -> space, the first one's dropped).
std::string join(std::span<std::string const> tokens) {
  std::string out;
  for (std::string const& t : tokens) {
    std::string piece = t;
    for (std::size_t at; (at = piece.find(kSpace)) != std::string::npos;) piece.replace(at, kSpace.size(), " ");
    out += piece;
  }
  return !out.empty() && out.front() == ' ' ? out.substr(1) : out;
}

// Pre-entities of "Microsoft Corp went" as ▁Micro soft ▁Corp ▁went with per-token label probabilities.
std::vector<fp::PreEntity> microsoft(std::vector<std::vector<float>> const& probabilities) {
  Encoding const e = flashdeberta::test::hand_encoding({kSpace + "Micro", "soft", kSpace + "Corp", kSpace + "went"},
                                                       {{0, 5}, {5, 9}, {10, 14}, {15, 19}});
  std::u32string const text = U"Microsoft Corp went";
  std::vector<fp::TokenPrediction> predictions;
  for (std::size_t t = 0; t < probabilities.size(); ++t) {
    std::int64_t const best = fp::top_k(probabilities[t], 1).front();
    predictions.push_back({t + 1, best, probabilities[t][best], probabilities[t]});
  }
  return fp::gather_pre_entities(e, text, predictions, -1);
}

std::vector<std::string> const kLabels = {"O", "B-ORG", "I-ORG", "B-PER"};

}  // namespace

TEST_CASE("token classification: is_subword from the text around each token's start, as HF's heuristic") {
  auto const pre = microsoft({{1, 0, 0, 0}, {1, 0, 0, 0}, {1, 0, 0, 0}, {1, 0, 0, 0}});
  REQUIRE(pre.size() == 4);
  CHECK_FALSE(pre[0].is_subword);  // the text's start
  CHECK(pre[1].is_subword);        // "soft": no space before or at its start
  CHECK_FALSE(pre[2].is_subword);  // a space before "Corp"
  CHECK(pre[0].word == kSpace + "Micro");
  // An unknown token takes the text it covers as its word and always starts one.
  Encoding e = flashdeberta::test::hand_encoding({"a", "[UNK]"}, {{0, 1}, {1, 3}});
  std::vector<fp::TokenPrediction> p = {{1, 0, 1.0f, {1.0f}}, {2, 0, 1.0f, {1.0f}}};
  e.input_ids[2] = 3;
  auto const unk = fp::gather_pre_entities(e, U"a\u00e9b", p, 3);
  CHECK(unk[1].word ==
        "\xC3\xA9"
        "b");
  CHECK_FALSE(unk[1].is_subword);
}

TEST_CASE("token classification: none, simple, first, average and max on one word split by the model") {
  // "Micro" B-ORG (0.6), "soft" B-PER (0.7), "Corp" I-ORG, "went" O.
  std::vector<std::vector<float>> const p = {
      {0.1f, 0.6f, 0.1f, 0.2f}, {0.1f, 0.1f, 0.1f, 0.7f}, {0.1f, 0.1f, 0.8f, 0.0f}, {0.9f, 0.0f, 0.1f, 0.0f}};
  auto const pre = microsoft(p);
  std::vector<std::string> const o = {"O"};
  auto const run = [&](fp::Aggregation a) { return fp::entities_of(pre, a, kLabels, o, join); };

  auto const none = run(fp::Aggregation::kNone);
  REQUIRE(none.size() == 3);  // "went" is O
  CHECK(none[1].entity_group == "B-PER");
  CHECK(none[1].index == 2u);
  CHECK(none[1].word == "soft");
  CHECK(none[1].score == doctest::Approx(0.7f));

  auto const simple = run(fp::Aggregation::kSimple);  // Micro | soft | Corp: the word is split
  REQUIRE(simple.size() == 3);
  CHECK(simple[0].word == "Micro");
  CHECK(simple[1].entity_group == "PER");
  CHECK_FALSE(simple[0].index.has_value());

  auto const first = run(fp::Aggregation::kFirst);  // Microsoft takes B-ORG, Corp I-ORG joins it
  REQUIRE(first.size() == 1);
  CHECK(first[0].entity_group == "ORG");
  CHECK(first[0].word == "MicrosoftCorp");  // HF joins the words' strings, which lost their marks
  CHECK(first[0].start == 0);
  CHECK(first[0].end == 14);
  CHECK(first[0].score == doctest::Approx((0.6 + 0.8) / 2).epsilon(1e-6));

  auto const max = run(fp::Aggregation::kMax);  // "soft" is the surer token: Microsoft is B-PER
  REQUIRE(max.size() == 2);
  CHECK(max[0].entity_group == "PER");
  CHECK(max[0].score == doctest::Approx(0.7f));
  CHECK(max[1].entity_group == "ORG");  // I-ORG after B-PER opens a new entity

  auto const average = run(fp::Aggregation::kAverage);  // (0.6 + 0.1) / 2 vs (0.2 + 0.7) / 2: B-PER
  REQUIRE(average.size() == 2);
  CHECK(average[0].entity_group == "PER");
  CHECK(average[0].score == doctest::Approx(0.45f));

  std::vector<std::string> const more = {"O", "PER"};  // ignore_labels names entity groups
  CHECK(fp::entities_of(pre, fp::Aggregation::kMax, kLabels, more, join).size() == 1);
  std::vector<std::string> const none_ignored;
  CHECK(fp::entities_of(pre, fp::Aggregation::kNone, kLabels, none_ignored, join).size() == 4);
  CHECK(fp::parse_aggregation("FIRST") == fp::Aggregation::kFirst);
  CHECK_THROWS_WITH(fp::parse_aggregation("mean"), doctest::Contains("'mean' is not one of"));
}

TEST_CASE("text classification: function_to_apply names and the regression default") {
  CHECK(fp::parse_score_function("SIGMOID") == fp::ScoreFunction::kSigmoid);
  CHECK(fp::parse_score_function("none") == fp::ScoreFunction::kNone);
  CHECK_FALSE(fp::parse_score_function("default").has_value());
  CHECK_THROWS_WITH(fp::parse_score_function("relu"), doctest::Contains("'relu'"));
  CHECK(fp::classification_function("regression", 1) == fp::ScoreFunction::kNone);
  CHECK(fp::classification_function("", 1) == fp::ScoreFunction::kSigmoid);
}

TEST_CASE("fill-mask targets: softmax over the vocabulary, only the targets ranked") {
  std::vector<std::int64_t> const ids = {1, 4, 2};
  std::vector<std::size_t> const masks = {1};
  std::vector<float> const logits = {0, 1, 2, 3, 4};
  auto const decode = [](std::span<std::int64_t const> s, bool) { return std::to_string(s.size()); };
  std::vector<std::int64_t> const targets = {1, 2};
  auto const out = fp::fill_mask(ids, masks, logits, 5, 5, 0, decode, targets);
  REQUIRE(out[0].size() == 2);  // top_k capped at the targets
  CHECK(out[0][0].token == 2);
  CHECK(out[0][1].token == 1);
  double const z = 1 + std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + std::exp(4.0);
  CHECK(out[0][0].score == doctest::Approx(std::exp(2.0) / z));
  std::vector<std::int64_t> const outside = {7};
  CHECK_THROWS_WITH(fp::fill_mask(ids, masks, logits, 5, 1, 0, decode, outside), doctest::Contains("target id 7"));
}

TEST_CASE("question answering: top_k spans best first, the null score, align_to_words off") {
  // [CLS] ▁Who [SEP] ▁Sarah ▁Con nor [SEP]
  Encoding const e = flashdeberta::test::hand_encoding(
      {kSpace + "Who"}, {{0, 3}}, {kSpace + "Sarah", kSpace + "Con", "nor"}, {{0, 5}, {5, 9}, {9, 12}});
  std::vector<float> const start = {1.0f, 5.0f, 0.0f, 2.0f, 1.0f, 0.0f, 0.0f};
  std::vector<float> const end = {1.0f, 5.0f, 0.0f, 0.0f, 1.0f, 2.0f, 0.0f};
  float null = 0.0f;
  auto const spans = fp::window_answer_spans(e, start, end, 1, 3, 15, true, &null);
  REQUIRE(spans.size() == 3);
  // start p: CLS, Sarah, Con, nor over e^1, e^2, e^1, e^0; end p: e^1, e^0, e^1, e^2.
  double const zs = 2 * std::exp(1.0) + std::exp(2.0) + 1;
  double const ze = std::exp(1.0) + 1 + std::exp(1.0) + std::exp(2.0);
  CHECK(null == doctest::Approx(std::exp(1.0) / zs * std::exp(1.0) / ze).epsilon(1e-5));
  CHECK(spans[0].start_token == 3);  // Sarah..nor: e^2 * e^2
  CHECK(spans[0].end_token == 5);
  // Then Sarah..Con (e^2 * e^1) and Con..nor (e^1 * e^2), equal but for rounding.
  CHECK(spans[1].start_token + spans[2].start_token == 7);
  CHECK(spans[0].score >= spans[1].score);
  CHECK(spans[1].score >= spans[2].score);
  CHECK(spans[0].score == doctest::Approx(std::exp(2.0) / zs * std::exp(2.0) / ze).epsilon(1e-5));
  // align_to_words off: the start token's own offset ("nor" alone, not "Connor").
  std::vector<float> const s2 = {0, 0, 0, 0, 0, 9, 0};
  auto const raw = fp::window_answer_spans(e, s2, s2, 1, 1, 15, false);
  CHECK(raw[0].start == 9);
  auto const aligned = fp::window_answer_spans(e, s2, s2, 1, 1, 15, true);
  CHECK(aligned[0].start == 5);
  CHECK(fp::window_answer_spans(e, s2, s2, 1, 100, 1).size() == 3);  // only positive-score spans
}

TEST_CASE("question answering: windows' answers merged by text (any case), the impossible answer, top_k") {
  std::string const context = "Paris is in France. paris!";
  std::vector<std::vector<fp::AnswerSpan>> const spans = {{{0.5f, 0, 0, 0, 5}, {0.2f, 0, 0, 12, 18}},
                                                          {{0.25f, 0, 0, 20, 25}, {0.1f, 0, 0, 9, 11}}};
  auto const merged = fp::merge_window_answers(spans, context, 5, true, 0.3f);
  REQUIRE(merged.size() == 4);
  CHECK(merged[0].answer == "Paris");  // 0.5 + 0.25: "paris" of the second window added to it
  CHECK(merged[0].score == doctest::Approx(0.75f));
  CHECK(merged[1].answer.empty());  // the impossible answer: 0.3
  CHECK(merged[1].end == 0);
  CHECK(merged[2].answer == "France");
  CHECK(fp::merge_window_answers(spans, context, 2, false, 0.3f).size() == 2);
  CHECK(fp::lower_text("\xC3\x89T\xC3\x89") == U"\u00e9t\u00e9");
}

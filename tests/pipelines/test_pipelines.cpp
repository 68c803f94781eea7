// The pipelines' post-processing on hand-made logits: HF's rules, one at a time.
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

}  // namespace

TEST_CASE("softmax, sigmoid and top_k") {
  std::vector<float> const logits = {1.0f, 3.0f, 2.0f, 3.0f};
  std::vector<float> const p = fp::softmax(logits);
  double sum = 0.0;
  for (float v : p) sum += v;
  CHECK(sum == doctest::Approx(1.0).epsilon(1e-6));
  CHECK(p[1] == doctest::Approx(std::exp(3.0) / (std::exp(1.0) + 2 * std::exp(3.0) + std::exp(2.0))).epsilon(1e-6));
  CHECK(fp::top_k(p, 3) == std::vector<std::int64_t>{1, 3, 2});  // a tie keeps index order
  CHECK(fp::top_k(p, 10).size() == 4);
  std::vector<float> const big = {1000.0f, 999.0f};  // no overflow: the maximum is subtracted first
  CHECK(fp::softmax(big)[0] == doctest::Approx(1.0 / (1.0 + std::exp(-1.0))).epsilon(1e-6));
  CHECK(fp::sigmoid(std::vector<float>{0.0f})[0] == doctest::Approx(0.5));
}

TEST_CASE("text classification: all labels, highest first, with sigmoid for multi-label or one label") {
  std::vector<std::string> const labels = {"negative", "neutral", "positive"};
  std::vector<float> const logits = {0.5f, -1.0f, 2.0f};
  auto const soft = fp::classify(logits, labels, fp::classification_function("", 3));
  REQUIRE(soft.size() == 3);
  CHECK(soft[0].label == "positive");
  CHECK(soft[1].label == "negative");
  CHECK(soft[2].label == "neutral");
  CHECK(soft[0].score + soft[1].score + soft[2].score == doctest::Approx(1.0f));
  CHECK(fp::classification_function("multi_label_classification", 3) == fp::ScoreFunction::kSigmoid);
  CHECK(fp::classification_function("single_label_classification", 1) == fp::ScoreFunction::kSigmoid);
  CHECK(fp::classification_function("single_label_classification", 2) == fp::ScoreFunction::kSoftmax);
  auto const sig = fp::classify(logits, labels, fp::ScoreFunction::kSigmoid);
  CHECK(sig[0].score == doctest::Approx(1.0 / (1.0 + std::exp(-2.0))));
  // Equal scores keep label order (Python's stable sort).
  auto const tie = fp::classify(std::vector<float>{1.0f, 1.0f, 0.0f}, labels, fp::ScoreFunction::kSoftmax);
  CHECK(tie[0].label == "negative");
  CHECK(tie[1].label == "neutral");
  CHECK_THROWS(fp::classify(std::vector<float>{1.0f}, labels, fp::ScoreFunction::kSoftmax));
}

TEST_CASE("token classification, simple aggregation: B-/I- grouping, O dropped, mean score, offsets") {
  std::vector<std::string> const labels = {"O", "B-PER", "I-PER", "B-LOC", "I-LOC", "MISC"};
  // Tokens: ▁Sarah ▁Con nor ▁went ▁to ▁New ▁York ▁Paris ▁X ▁Y
  Encoding const e = flashdeberta::test::hand_encoding(
      {kSpace + "Sarah", kSpace + "Con", "nor", kSpace + "went", kSpace + "to", kSpace + "New", kSpace + "York",
       kSpace + "Paris", kSpace + "X", kSpace + "Y"},
      {{0, 5}, {5, 9}, {9, 12}, {12, 17}, {17, 20}, {20, 24}, {24, 29}, {29, 35}, {35, 37}, {37, 39}});
  // label per token (CLS and SEP get logits too, and are skipped): B-PER I-PER I-PER O O B-LOC I-LOC B-LOC MISC MISC
  std::vector<int> const want = {1, 1, 2, 2, 0, 0, 3, 4, 3, 5, 5, 1};
  std::vector<float> logits;
  for (std::size_t t = 0; t < e.size(); ++t) {
    for (std::size_t l = 0; l < labels.size(); ++l) logits.push_back(static_cast<int>(l) == want[t] ? 2.0f : 0.0f);
  }
  logits[2 * labels.size() + 2] = 3.0f;  // "Con": I-PER with a different score
  auto const predictions = fp::token_predictions(e, logits, labels.size());
  REQUIRE(predictions.size() == 10);  // specials left out
  CHECK(predictions.front().token == 1);
  std::vector<std::vector<std::int64_t>> decoded;
  auto const groups = fp::group_entities_simple(e, predictions, labels, [&](std::span<std::int64_t const> ids) {
    decoded.emplace_back(ids.begin(), ids.end());
    return std::to_string(ids.size()) + " tokens";
  });
  REQUIRE(groups.size() == 4);
  CHECK(groups[0].entity_group == "PER");
  CHECK(groups[0].start == 0);
  CHECK(groups[0].end == 12);
  CHECK(groups[0].word == "3 tokens");
  CHECK(decoded[0] == std::vector<std::int64_t>{10, 11, 12});
  double const p2 = std::exp(2.0) / (std::exp(2.0) + 5.0);
  double const p3 = std::exp(3.0) / (std::exp(3.0) + 5.0);
  CHECK(groups[0].score == doctest::Approx((p2 + p3 + p2) / 3.0).epsilon(1e-6));
  CHECK(groups[1].entity_group == "LOC");  // B-LOC I-LOC
  CHECK(groups[1].start == 20);
  CHECK(groups[1].end == 29);
  CHECK(groups[2].entity_group == "LOC");  // a new B- starts a new entity
  CHECK(groups[2].start == 29);
  CHECK(groups[3].entity_group == "MISC");  // labels without a prefix join like I-
  CHECK(groups[3].tokens == std::vector<std::size_t>{9, 10});
}

TEST_CASE("token classification: an I- after O opens an entity, a tag change closes one") {
  std::vector<std::string> const labels = {"O", "I-PER", "I-LOC"};
  Encoding const e = flashdeberta::test::hand_encoding({"a", "b", "c", "d"}, {{0, 1}, {1, 2}, {2, 3}, {3, 4}});
  std::vector<fp::TokenPrediction> const p = {{1, 0, 0.9f}, {2, 1, 0.8f}, {3, 2, 0.7f}, {4, 2, 0.6f}};
  auto const groups = fp::group_entities_simple(e, p, labels, [](auto) { return std::string(); });
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].entity_group == "PER");
  CHECK(groups[1].entity_group == "LOC");
  CHECK(groups[1].score == doctest::Approx(0.65f));
  CHECK(groups[1].start == 2);
  CHECK(groups[1].end == 4);
}

TEST_CASE("question answering: context-only spans, [CLS] in the softmax, max_answer_len, whole words") {
  // [CLS] ▁Who ? [SEP] ▁Sarah ▁Con nor ▁went [SEP]
  Encoding const e = flashdeberta::test::hand_encoding({kSpace + "Who", "?"}, {{0, 3}, {3, 4}},
                                                       {kSpace + "Sarah", kSpace + "Con", "nor", kSpace + "went"},
                                                       {{0, 5}, {5, 9}, {9, 12}, {12, 17}});
  REQUIRE(e.size() == 9);
  //                              CLS   Who  ?    SEP  Sarah Con  nor  went SEP
  std::vector<float> const start = {5.0f, 9.0f, 0.0f, 9.0f, 1.0f, 2.0f, 3.0f, 0.0f, 9.0f};
  std::vector<float> const end = {5.0f, 9.0f, 0.0f, 9.0f, 0.0f, 4.0f, 1.0f, 0.5f, 9.0f};
  auto const span = fp::best_answer_span(e, start, end, 1);
  REQUIRE(span.has_value());
  // Best product over context spans start <= end: start "nor" (3) x end "went" (0.5) vs start "Con" (2)
  // x end "Con" (4): exp(2 + 4) > exp(3 + 0.5), so the answer is "Con", widened to the word "Connor".
  CHECK(span->start_token == 5);
  CHECK(span->end_token == 5);
  CHECK(span->start == 5);
  CHECK(span->end == 12);
  // Probabilities: softmax over CLS and the context (question and SEP masked), CLS zeroed afterwards.
  double const zs = std::exp(5.0) + std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + std::exp(0.0);
  double const ze = std::exp(5.0) + std::exp(0.0) + std::exp(4.0) + std::exp(1.0) + std::exp(0.5);
  CHECK(span->score == doctest::Approx(std::exp(2.0) / zs * std::exp(4.0) / ze).epsilon(1e-5));

  // max_answer_len 1: only single tokens.
  std::vector<float> const end2 = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 6.0f, 0.0f};
  std::vector<float> const start2 = {0.0f, 0.0f, 0.0f, 0.0f, 6.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  auto const one = fp::best_answer_span(e, start2, end2, 1, 1);
  REQUIRE(one.has_value());
  CHECK(one->end_token == one->start_token);
  auto const long_span = fp::best_answer_span(e, start2, end2, 1);
  CHECK(long_span->start_token == 4);
  CHECK(long_span->end_token == 7);
  CHECK(long_span->start == 0);
  CHECK(long_span->end == 17);
}

TEST_CASE("fill-mask: top-k per mask, sequences with the mask replaced") {
  std::vector<std::int64_t> const ids = {1, 7, 4, 9, 4, 2, 0};  // [CLS] a [MASK] b [MASK] [SEP] [PAD]
  std::vector<std::size_t> const masks = {2, 4};
  std::size_t const vocab = 5;
  std::vector<float> const logits = {0, 1, 2, 3, 4,  //
                                     4, 3, 2, 1, 0};
  std::vector<std::pair<std::vector<std::int64_t>, bool>> calls;
  auto const decode = [&](std::span<std::int64_t const> s, bool skip) {
    calls.emplace_back(std::vector<std::int64_t>(s.begin(), s.end()), skip);
    std::string out;
    for (auto v : s) out += std::to_string(v);
    return out;
  };
  auto const out = fp::fill_mask(ids, masks, logits, vocab, 2, 0, decode);
  REQUIRE(out.size() == 2);
  CHECK(out[0][0].token == 4);
  CHECK(out[0][1].token == 3);
  CHECK(out[1][0].token == 0);
  CHECK(out[0][0].token_str == "4");
  CHECK(out[0][0].sequence == "174942");  // the other mask kept, padding dropped
  CHECK(out[1][0].sequence == "17492");   // token 0 is the pad id: dropped with the padding, as HF does
  CHECK(out[0][0].score ==
        doctest::Approx(std::exp(4.0) / (1 + std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + std::exp(4.0))));
  CHECK_FALSE(calls[1].second);  // several masks: special tokens kept
  auto const single = fp::fill_mask(std::vector<std::int64_t>{1, 4, 2}, std::vector<std::size_t>{1},
                                    std::span<float const>(logits).first(5), vocab, 1, 0, decode);
  CHECK(calls.back().second);  // one mask: special tokens skipped
  CHECK(single[0][0].sequence == "142");
}

TEST_CASE("substr_code_points counts code points") {
  std::string const text = "Jos\xC3\xA9 Z\xC3\xBCrich";  // "José Zürich"
  CHECK(fp::substr_code_points(text, 0, 4) == "Jos\xC3\xA9");
  CHECK(fp::substr_code_points(text, 5, 11) == "Z\xC3\xBCrich");
  CHECK(fp::substr_code_points(text, 4, 4).empty());
  CHECK(fp::substr_code_points(text, 9, 100) == "ch");
}

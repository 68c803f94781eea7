// HF's question-answering pipeline after the model (transformers 4.x QuestionAnsweringPipeline: its
// select_starts_ends, decode_spans and get_indices), for one window ([CLS] question [SEP] part of the
// context [SEP]; qa_windows.hpp cuts a long context into such windows and merges their answers):
//
//   start and end logits of every token that is neither in the context nor [CLS] are set to -10000; both
//   are softmaxed over the window; the window's null score (the impossible answer's) is then start_p * end_p
//   of position 0, whose probabilities are zeroed next. A span start <= end < start + max_answer_len scores
//   start_p * end_p; the top_k best spans of context tokens are the window's answers, best first (equal
//   scores in (start, end) order). With align_to_words its characters run from the start of the word holding
//   the start token to the end of the word holding the end token (code points of the context), else from the
//   start token's offset to the end token's.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/pipelines/scores.hpp"
#include "flashdeberta/tokenizer/encoding.hpp"

namespace flashdeberta::pipelines {

struct AnswerSpan {
  float score = 0.0f;
  std::size_t start_token = 0;  // indices in the encoding
  std::size_t end_token = 0;
  std::int64_t start = 0;  // code points of the context
  std::int64_t end = 0;
};

// The context characters of a span (get_indices): widened to whole words of the window with align_to_words.
inline void span_characters(tokenizer::Encoding const& e, AnswerSpan& span, bool align_to_words) {
  std::size_t first = span.start_token;
  std::size_t last = span.end_token;
  if (align_to_words) {
    while (!tokenizer::starts_word(e, first)) --first;
    while (last + 1 < e.size() && e.sequence_ids[last + 1] == 1 && !tokenizer::starts_word(e, last + 1)) ++last;
  }
  span.start = e.offsets[first].begin;
  span.end = e.offsets[last].end;
}

// One window's answers, best first: at most top_k spans of context tokens with a score above zero (HF's
// decode_spans fills top_k from the zero-score spans too, in an order numpy leaves undefined; those are
// left out). `null_score`, when given, receives the window's impossible-answer score.
inline std::vector<AnswerSpan> window_answer_spans(tokenizer::Encoding const& e, std::span<float const> start_logits,
                                                   std::span<float const> end_logits, std::int64_t cls_id,
                                                   std::size_t top_k, std::size_t max_answer_len,
                                                   bool align_to_words = true, float* null_score = nullptr) {
  std::size_t const n = e.size();
  FLASHDEBERTA_REQUIRE(start_logits.size() == n && end_logits.size() == n,
                       "question answering: " << start_logits.size() << " start and " << end_logits.size()
                                              << " end logits for " << n << " tokens");
  FLASHDEBERTA_REQUIRE(max_answer_len >= 1, "question answering: max_answer_len must be at least 1, not 0");
  auto const context = [&](std::size_t t) {
    return e.sequence_ids[t] == 1 && (e.attention_mask.empty() || e.attention_mask[t] != 0);
  };
  std::vector<float> s(start_logits.begin(), start_logits.end());
  std::vector<float> en(end_logits.begin(), end_logits.end());
  for (std::size_t t = 0; t < n; ++t) {
    if (!context(t) && e.input_ids[t] != cls_id) s[t] = en[t] = -10000.0f;
  }
  s = softmax(s);
  en = softmax(en);
  if (n > 0) {
    if (null_score != nullptr) *null_score = s[0] * en[0];
    s[0] = en[0] = 0.0f;
  }
  std::vector<AnswerSpan> spans;  // every candidate, in (start, end) order
  for (std::size_t a = 0; a < n; ++a) {
    if (!context(a)) continue;
    for (std::size_t b = a; b < n && b - a < max_answer_len; ++b) {
      if (!context(b)) break;
      float const score = s[a] * en[b];
      if (score > 0.0f) spans.push_back(AnswerSpan{score, a, b, 0, 0});
    }
  }
  std::size_t const k = std::min(top_k, spans.size());
  std::partial_sort(spans.begin(), spans.begin() + static_cast<std::ptrdiff_t>(k), spans.end(),
                    [](AnswerSpan const& x, AnswerSpan const& y) {
                      if (x.score != y.score) return x.score > y.score;
                      return x.start_token != y.start_token ? x.start_token < y.start_token : x.end_token < y.end_token;
                    });
  spans.resize(k);
  for (AnswerSpan& span : spans) span_characters(e, span, align_to_words);
  return spans;
}

// The best span of one window with HF's defaults (top_k 1, align_to_words); nullopt when the context has no
// token.
inline std::optional<AnswerSpan> best_answer_span(tokenizer::Encoding const& e, std::span<float const> start_logits,
                                                  std::span<float const> end_logits, std::int64_t cls_id,
                                                  std::size_t max_answer_len = 15) {
  auto spans = window_answer_spans(e, start_logits, end_logits, cls_id, 1, max_answer_len);
  if (spans.empty()) return std::nullopt;
  return spans.front();
}

}  // namespace flashdeberta::pipelines

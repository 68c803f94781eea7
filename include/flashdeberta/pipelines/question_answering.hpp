// HF's question-answering pipeline after the model, for one window holding the question and the whole
// context ([CLS] question [SEP] context [SEP]), with its defaults: top_k 1, max_answer_len 15, no
// impossible answer, align_to_words.
//
//   start and end logits of every token that is neither in the context nor [CLS] are set to -10000; both
//   are softmaxed over the window; [CLS]'s probabilities are then zeroed; the answer is the span
//   start <= end < start + max_answer_len of context tokens with the largest start_p * end_p (the first
//   in (start, end) order on a tie), and that product is its score. The characters run from the start of
//   the word holding the start token to the end of the word holding the end token (code points of the
//   context).
#pragma once

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

// Whether token t of `e` begins a word of its sequence, as HF's pre-tokenizers split words: the
// sequence's first token, a SentencePiece piece starting with U+2581 or a byte-level BPE token starting
// with U+0120 (the space marks), or a token that does not touch the previous one.
inline bool starts_word(tokenizer::Encoding const& e, std::size_t t) {
  if (t == 0 || e.sequence_ids[t - 1] != e.sequence_ids[t]) return true;
  std::string_view const token = e.tokens[t];
  if (token.starts_with("\xE2\x96\x81") || token.starts_with("\xC4\xA0")) return true;
  return e.offsets[t].begin > e.offsets[t - 1].end;
}

// `start_logits`, `end_logits`: one per token of `e` (question then context, sequence ids 0 and 1).
// nullopt when the context has no token.
inline std::optional<AnswerSpan> best_answer_span(tokenizer::Encoding const& e, std::span<float const> start_logits,
                                                  std::span<float const> end_logits, std::int64_t cls_id,
                                                  std::size_t max_answer_len = 15) {
  std::size_t const n = e.size();
  FLASHDEBERTA_REQUIRE(start_logits.size() == n && end_logits.size() == n,
                       "question answering: " << start_logits.size() << " start and " << end_logits.size()
                                              << " end logits for " << n << " tokens");
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
  s[0] = en[0] = 0.0f;
  std::optional<AnswerSpan> best;
  for (std::size_t a = 0; a < n; ++a) {
    if (!context(a)) continue;
    for (std::size_t b = a; b < n && b - a < max_answer_len; ++b) {
      if (!context(b)) break;
      float const score = s[a] * en[b];
      if (!best || score > best->score) best = AnswerSpan{score, a, b, 0, 0};
    }
  }
  if (!best) return best;
  std::size_t first = best->start_token;
  while (!starts_word(e, first)) --first;
  std::size_t last = best->end_token;
  while (last + 1 < n && e.sequence_ids[last + 1] == 1 && !starts_word(e, last + 1)) ++last;
  best->start = e.offsets[first].begin;
  best->end = e.offsets[last].end;
  return best;
}

}  // namespace flashdeberta::pipelines

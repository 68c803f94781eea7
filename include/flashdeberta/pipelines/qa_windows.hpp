// HF's question-answering pipeline around the model for a context longer than one window (transformers
// 4.x QuestionAnsweringPipeline.preprocess and postprocess with a fast tokenizer):
//
//   windows  tokenizer(question, context, truncation="only_second", max_length=max_seq_len,
//            stride=doc_stride, return_overflowing_tokens=True): the question whole in every window, the
//            context's tokens cut as the tokenizers library cuts an overflowing sequence
//            (overflow_windows.hpp), L = max_seq_len - the question - the special tokens at a time.
//   merge    every window's answers in window order; an answer whose text equals an earlier one's (Python's
//            str.lower() on both) adds its score to that one instead of standing alone; the impossible
//            answer {"score": the least null score of the windows, 0, 0, ""} joins when asked; then the
//            top_k by score (a stable sort: the earlier of equal scores first).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/pipelines/overflow_windows.hpp"
#include "flashdeberta/pipelines/question_answering.hpp"
#include "flashdeberta/pipelines/text_span.hpp"
#include "flashdeberta/tokenizer/tokenizer_base.hpp"
#include "flashdeberta/tokenizer/unicode.hpp"

namespace flashdeberta::pipelines {

// The windows of (question, context). `token_limit`: the most tokens either text may make (tokenizing stops
// past it and TokenLimitError is thrown). Errors as HF's: a question that leaves no room for the context
// (the tokenizers library's "second sequence not long enough"), a doc_stride not below the context's room
// (its "stride must be strictly less than max_len").
inline std::vector<tokenizer::Encoding> question_context_windows(tokenizer::Tokenizer const& tok,
                                                                 std::string_view question, std::string_view context,
                                                                 std::size_t max_seq_len, std::size_t doc_stride,
                                                                 std::size_t token_limit) {
  tokenizer::TokenList const q = tok.tokenize(question, "question", token_limit);
  if (q.size() > token_limit) throw tokenizer::TokenLimitError(token_limit);
  tokenizer::TokenList const c = tok.tokenize(context, "context", token_limit);
  if (c.size() > token_limit) throw tokenizer::TokenLimitError(token_limit);
  std::size_t const specials = tokenizer::special_token_count(tok.special_ids(), true, true);
  std::size_t const total = q.size() + c.size() + specials;
  if (total <= max_seq_len) return {tokenizer::build_encoding(q, &c, tok.special_ids(), true)};
  std::size_t const to_remove = total - max_seq_len;
  FLASHDEBERTA_REQUIRE(c.size() > to_remove, "question answering: the question takes "
                                                 << q.size() << " tokens, which with the " << specials
                                                 << " special tokens leave no room for the context in max_seq_len "
                                                 << max_seq_len
                                                 << " (HF's tokenizer refuses it too: raise max_seq_len)");
  std::size_t const room = c.size() - to_remove;
  FLASHDEBERTA_REQUIRE(doc_stride < room, "question answering: doc_stride "
                                              << doc_stride << " is not below the " << room
                                              << " context tokens a window of max_seq_len " << max_seq_len
                                              << " holds with this question (HF's "
                                                 "tokenizer refuses it too)");
  std::vector<tokenizer::Encoding> windows;
  for (auto const [first, last] : overflow_ranges(c.size(), room, doc_stride)) {
    tokenizer::TokenList const part = token_range(c, first, last);
    windows.push_back(tokenizer::build_encoding(q, &part, tok.special_ids(), true));
  }
  return windows;
}

struct ScoredAnswer {
  float score = 0.0f;
  std::int64_t start = 0;  // code points of the context
  std::int64_t end = 0;
  std::string answer;  // that part of the context
};

// Python's str.lower() of a UTF-8 text (no context rules: the final sigma lowers as any sigma).
inline std::u32string lower_text(std::string_view text) {
  std::u32string out;
  for (char32_t c : tokenizer::decode_utf8(text, "answer").chars) tokenizer::append_lowercase(out, c);
  return out;
}

// HF's postprocess over the windows' spans (`spans[w]`: window w's, best first) of `context`; `null_score`:
// the least of the windows' null scores, used with handle_impossible_answer.
inline std::vector<ScoredAnswer> merge_window_answers(std::vector<std::vector<AnswerSpan>> const& spans,
                                                      std::string_view context, std::size_t top_k,
                                                      bool handle_impossible_answer, float null_score) {
  std::vector<ScoredAnswer> answers;
  std::vector<std::u32string> lowered;
  std::vector<double> sums;  // Python adds the scores as floats (double)
  for (auto const& window : spans) {
    for (AnswerSpan const& span : window) {
      std::string text = substr_code_points(context, span.start, span.end);
      std::u32string low = lower_text(text);
      auto const same = std::find(lowered.begin(), lowered.end(), low);
      if (same != lowered.end()) {
        sums[static_cast<std::size_t>(same - lowered.begin())] += span.score;
        continue;
      }
      answers.push_back({span.score, span.start, span.end, std::move(text)});
      lowered.push_back(std::move(low));
      sums.push_back(span.score);
    }
  }
  for (std::size_t i = 0; i < answers.size(); ++i) answers[i].score = static_cast<float>(sums[i]);
  if (handle_impossible_answer) answers.push_back({null_score, 0, 0, ""});
  std::stable_sort(answers.begin(), answers.end(),
                   [](ScoredAnswer const& a, ScoredAnswer const& b) { return a.score > b.score; });
  if (answers.size() > top_k) answers.resize(top_k);
  return answers;
}

}  // namespace flashdeberta::pipelines

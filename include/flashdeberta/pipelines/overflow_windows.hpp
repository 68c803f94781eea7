// The windows HF's tokenizers library cuts an overflowing sequence into (truncation with a stride and
// return_overflowing_tokens): a window holds `room` of the sequence's tokens, consecutive windows start
// room - stride tokens apart, so that neighbours share `stride` tokens, and the last ends with the sequence.
// Question answering windows the context after its question (qa_windows.hpp); token classification with
// stride= windows the text (text_windows).
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>
#include <utility>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/tokenizer/tokenizer_base.hpp"

namespace flashdeberta::pipelines {

// The [first, last) token ranges of the windows over `count` tokens; stride < room (the library asserts it).
inline std::vector<std::pair<std::size_t, std::size_t>> overflow_ranges(std::size_t count, std::size_t room,
                                                                        std::size_t stride) {
  FLASHDEBERTA_REQUIRE(
      stride < room, "overflowing windows: stride " << stride << " is not below the " << room << " tokens of a window");
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  for (std::size_t first = 0;; first += room - stride) {
    std::size_t const last = std::min(first + room, count);
    ranges.emplace_back(first, last);
    if (last == count) break;
  }
  return ranges;
}

// Tokens [first, last) of `list`.
inline tokenizer::TokenList token_range(tokenizer::TokenList const& list, std::size_t first, std::size_t last) {
  tokenizer::TokenList part;
  for (std::size_t t = first; t < last; ++t)
    part.push_back(list.ids[t], list.tokens[t], list.offsets[t], list.positions[t]);
  return part;
}

// HF's tokenizer(text, truncation=True, max_length=max_length, stride=stride, return_overflowing_tokens=True):
// one encoding when the text fits max_length with its special tokens, else its windows, each with the special
// tokens. `token_limit`: the most tokens the text may make (TokenLimitError past it). An error (naming
// stride= and max_length) where stride leaves windows no progress, as the tokenizers library refuses it.
inline std::vector<tokenizer::Encoding> text_windows(tokenizer::Tokenizer const& tok, std::string_view text,
                                                     std::size_t max_length, std::size_t stride,
                                                     std::size_t token_limit) {
  tokenizer::TokenList const tokens = tok.tokenize(text, "text", token_limit);
  if (tokens.size() > token_limit) throw tokenizer::TokenLimitError(token_limit);
  std::size_t const specials = tokenizer::special_token_count(tok.special_ids(), false, true);
  if (tokens.size() + specials <= max_length)
    return {tokenizer::build_encoding(tokens, nullptr, tok.special_ids(), true)};
  FLASHDEBERTA_REQUIRE(max_length > specials && stride < max_length - specials,
                       "token classification: stride="
                           << stride << " must be less than the " << (max_length > specials ? max_length - specials : 0)
                           << " text tokens a window of max_length " << max_length << " holds besides its " << specials
                           << " special tokens (HF's tokenizer refuses it too)");
  std::vector<tokenizer::Encoding> windows;
  for (auto const [first, last] : overflow_ranges(tokens.size(), max_length - specials, stride)) {
    tokenizer::TokenList const part = token_range(tokens, first, last);
    windows.push_back(tokenizer::build_encoding(part, nullptr, tok.special_ids(), true));
  }
  return windows;
}

}  // namespace flashdeberta::pipelines

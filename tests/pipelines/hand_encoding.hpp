// Encodings written by hand for the pipelines' post-processing tests: [CLS] a [SEP] (and b [SEP]), ids 10.. for
// a and 50.. for b, with the pre-token positions SentencePiece would give (a word starts at a piece marked
// U+2581, at a text's first piece, and at a piece that does not touch the one before).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flashdeberta/tokenizer/encoding.hpp"

namespace flashdeberta::test {

inline tokenizer::Encoding hand_encoding(std::vector<std::string> const& a,
                                         std::vector<tokenizer::Span> const& a_offsets,
                                         std::vector<std::string> const& b = {},
                                         std::vector<tokenizer::Span> const& b_offsets = {}) {
  using tokenizer::PreTokenPosition;
  tokenizer::Encoding e;
  auto add = [&](std::int64_t id, std::string token, tokenizer::Span span, std::int32_t seq) {
    bool const first = e.sequence_ids.empty() || e.sequence_ids.back() != seq || token.starts_with("\xE2\x96\x81") ||
                       span.begin > e.offsets.back().end;
    e.positions.push_back(seq < 0 ? PreTokenPosition::kAddedToken
                                  : (first ? PreTokenPosition::kFirst : PreTokenPosition::kInside));
    e.input_ids.push_back(id);
    e.token_type_ids.push_back(seq == 1 ? 1 : 0);
    e.attention_mask.push_back(1);
    e.offsets.push_back(span);
    e.tokens.push_back(std::move(token));
    e.sequence_ids.push_back(seq);
  };
  add(1, "[CLS]", {}, -1);
  for (std::size_t i = 0; i < a.size(); ++i) add(10 + static_cast<std::int64_t>(i), a[i], a_offsets[i], 0);
  add(2, "[SEP]", {}, -1);
  for (std::size_t i = 0; i < b.size(); ++i) add(50 + static_cast<std::int64_t>(i), b[i], b_offsets[i], 1);
  if (!b.empty()) add(2, "[SEP]", {}, -1);
  return e;
}

}  // namespace flashdeberta::test

// Tokenizer: a vocabulary model (SentencePiece or GPT-2 byte-level BPE) behind one value type, plus the
// steps every DeBERTa tokenizer shares: added/special tokens matched in the raw text, truncation, the
// [CLS] A [SEP] B [SEP] template, padding, batches and decoding.
//
// Thread safety: a Tokenizer is immutable after construction; copies share the model and any number of
// threads may encode with one at the same time. The one mutable state behind it, the BPE model's cache
// of recent words, is guarded by mutexes (word_cache.hpp) and never changes a result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/tokenizer/added_token_matcher.hpp"
#include "flashdeberta/tokenizer/encoding.hpp"
#include "flashdeberta/tokenizer/tokenizer_config.hpp"
#include "flashdeberta/tokenizer/unicode.hpp"

namespace flashdeberta::tokenizer {

// The vocabulary-specific half of a tokenizer.
class TokenizerModel {
 public:
  virtual ~TokenizerModel() = default;
  // Tokens of text.chars[begin, end), a stretch without added tokens; offsets in code points of `text`.
  // May stop early once it has made more than max_tokens tokens (the caller then refuses the text).
  virtual TokenList encode(DecodedText const& text, std::size_t begin, std::size_t end,
                           std::size_t max_tokens) const = 0;
  // A lower bound on the tokens encode() makes of text.chars[begin, end), found without encoding it (0 where
  // the model proves none): a text over its token limit is refused before the work (Tokenizer::encode).
  virtual std::size_t min_tokens(DecodedText const&, std::size_t, std::size_t) const { return 0; }
  virtual std::optional<std::int64_t> token_to_id(std::string_view token) const = 0;
  virtual std::optional<std::string> id_to_token(std::int64_t id) const = 0;
  virtual std::size_t vocab_size() const = 0;
  // Text of a token sequence, as HF's decoder joins it; added[i] marks tokens that are added tokens.
  virtual std::string decode(std::vector<std::string> const& tokens, std::vector<bool> const& added) const = 0;
  virtual char const* kind() const = 0;
};

// A stretch of the input: text for the model (added < 0) or one added token (index into the table).
struct TextSegment {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::int64_t added = -1;
};

namespace detail {

inline bool is_word_char(char32_t c) { return is_letter(c) || is_number(c) || c == U'_'; }

// HF's added-vocabulary split: leftmost-longest matches of the added tokens in the raw text (a
// single_word token only where no word character touches it), each widened over the whitespace before
// it (lstrip, not past the previous match) and after it (rstrip).
inline std::vector<TextSegment> split_added_tokens(DecodedText const& text, std::vector<AddedToken> const& added,
                                                   AddedTokenMatcher const& matcher) {
  std::vector<TextSegment> out;
  std::u32string_view const chars(text.chars);
  std::size_t const n = chars.size();
  auto const accept = [&](std::size_t k, std::size_t begin, std::size_t end) {
    return !added[k].single_word ||
           !((begin > 0 && is_word_char(chars[begin - 1])) || (end < n && is_word_char(chars[end])));
  };
  std::size_t plain_begin = 0;
  while (auto const match = matcher.find(chars, plain_begin, accept)) {
    std::size_t start = match->begin;
    std::size_t stop = match->end;
    if (added[match->token].lstrip) {
      while (start > plain_begin && is_whitespace(chars[start - 1])) --start;
    }
    if (added[match->token].rstrip) {
      while (stop < n && is_whitespace(chars[stop])) ++stop;
    }
    if (start > plain_begin) out.push_back({plain_begin, start, -1});
    out.push_back({start, stop, static_cast<std::int64_t>(match->token)});
    plain_begin = stop;
  }
  if (plain_begin < n) out.push_back({plain_begin, n, -1});
  return out;
}

}  // namespace detail

class Tokenizer {
 public:
  Tokenizer(std::shared_ptr<TokenizerModel const> model, std::vector<AddedToken> added, SpecialIds specials,
            std::int64_t mask_id, std::optional<std::int64_t> model_max_length = std::nullopt)
      : model_(std::move(model)),
        added_(std::move(added)),
        specials_(std::move(specials)),
        mask_id_(mask_id),
        model_max_length_(model_max_length) {
    std::vector<std::u32string> contents;
    for (std::size_t k = 0; k < added_.size(); ++k) {
      // A normalized added token is the model's to find (AddedToken::normalized); empty patterns never match.
      contents.push_back(added_[k].normalized ? std::u32string{} : decode_utf8(added_[k].content, "added token").chars);
      by_id_[added_[k].id] = k;
      by_content_[added_[k].content] = k;
    }
    matcher_ = std::make_shared<AddedTokenMatcher const>(contents);
  }

  // One text: [CLS] tokens [SEP] (with add_special_tokens), truncated and padded as `options` say.
  Encoding encode(std::string_view text, EncodeOptions const& options = {}) const {
    std::size_t const room = room_for_text(options, special_token_count(specials_, false, true));
    TokenList a = tokenize_within(text, "text", room, options);
    if (a.size() > room) throw TokenLimitError(*options.token_limit);
    return finish(a, nullptr, options);
  }

  // A pair: [CLS] text [SEP] pair [SEP], token types 0 then 1.
  Encoding encode(std::string_view text, std::string_view pair, EncodeOptions const& options = {}) const {
    std::size_t const room = room_for_text(options, special_token_count(specials_, true, true));
    TokenList a = tokenize_within(text, "text", room, options);
    if (a.size() > room) throw TokenLimitError(*options.token_limit);
    TokenList b = tokenize_within(pair, "pair text", room - a.size(), options);
    if (b.size() > room - a.size()) throw TokenLimitError(*options.token_limit);
    return finish(a, &b, options);
  }

  // Words given one by one as one text (HF's is_split_into_words, as GLiNER calls it): each word is
  // tokenized on its own, with its own offsets (code points within the word).
  Encoding encode_words(std::span<std::string const> words, EncodeOptions const& options = {}) const {
    std::size_t const room = room_for_text(options, special_token_count(specials_, false, true));
    TokenList a;
    for (std::string const& word : words) {
      if (a.size() > room) break;
      a.append(tokenize_within(word, "word", room - a.size(), options));
    }
    if (a.size() > room) throw TokenLimitError(*options.token_limit);
    return finish(a, nullptr, options);
  }

  std::vector<Encoding> encode_batch(std::span<std::string const> texts, EncodeOptions const& options = {}) const {
    std::vector<Encoding> rows;
    EncodeOptions row_options = options;
    row_options.padding = Padding::kNone;
    for (auto const& t : texts) rows.push_back(encode(t, row_options));
    pad_batch(rows, options, specials_);
    return rows;
  }

  std::vector<Encoding> encode_batch(std::span<std::string const> texts, std::span<std::string const> pairs,
                                     EncodeOptions const& options = {}) const {
    FLASHDEBERTA_REQUIRE(texts.size() == pairs.size(),
                         "encode_batch: " << texts.size() << " texts but " << pairs.size() << " pair texts");
    std::vector<Encoding> rows;
    EncodeOptions row_options = options;
    row_options.padding = Padding::kNone;
    for (std::size_t i = 0; i < texts.size(); ++i) rows.push_back(encode(texts[i], pairs[i], row_options));
    pad_batch(rows, options, specials_);
    return rows;
  }

  // The tokens of one text, added tokens included, without the template; offsets in code points.
  // `what` names the text in the message of an invalid UTF-8 error. Stops once it holds more than
  // max_tokens tokens (so a result longer than max_tokens is incomplete).
  TokenList tokenize(std::string_view text, std::string_view what = "text",
                     std::size_t max_tokens = std::numeric_limits<std::size_t>::max()) const {
    return tokenize_segments(text, what, max_tokens, std::nullopt);
  }

 private:
  // tokenize() for an encode under options.token_limit: a stretch the model proves would take the text
  // past max_tokens (TokenizerModel::min_tokens) throws TokenLimitError before it is encoded. A text within
  // the limit is tokenized exactly as by tokenize().
  TokenList tokenize_within(std::string_view text, std::string_view what, std::size_t max_tokens,
                            EncodeOptions const& options) const {
    return tokenize_segments(text, what, max_tokens, options.token_limit);
  }

  TokenList tokenize_segments(std::string_view text, std::string_view what, std::size_t max_tokens,
                              std::optional<std::size_t> token_limit) const {
    DecodedText const decoded = decode_utf8(text, what);
    TokenList out;
    for (auto const& seg : detail::split_added_tokens(decoded, added_, *matcher_)) {
      if (out.size() > max_tokens) break;
      if (token_limit && seg.added < 0 && model_->min_tokens(decoded, seg.begin, seg.end) > max_tokens - out.size())
        throw TokenLimitError(*token_limit);
      if (seg.added >= 0) {
        auto const& tok = added_[static_cast<std::size_t>(seg.added)];
        out.push_back(tok.id, tok.content, {static_cast<std::int64_t>(seg.begin), static_cast<std::int64_t>(seg.end)},
                      PreTokenPosition::kAddedToken);
      } else {
        out.append(model_->encode(decoded, seg.begin, seg.end, max_tokens - out.size()));
      }
    }
    return out;
  }

 public:
  // Text of `ids` as HF's decode() gives it; ids outside the vocabulary are an error.
  std::string decode(std::span<std::int64_t const> ids, bool skip_special_tokens = false) const {
    std::vector<std::string> tokens;
    std::vector<bool> added;
    for (std::int64_t id : ids) {
      if (auto it = by_id_.find(id); it != by_id_.end()) {
        if (skip_special_tokens && added_[it->second].special) continue;
        tokens.push_back(added_[it->second].content);
        added.push_back(true);
        continue;
      }
      auto token = model_->id_to_token(id);
      FLASHDEBERTA_REQUIRE(token.has_value(),
                           "decode: token id " << id << " is outside the vocabulary of " << vocab_size() << " tokens");
      tokens.push_back(std::move(*token));
      added.push_back(false);
    }
    return model_->decode(tokens, added);
  }

  // HF's convert_tokens_to_string: token strings (an added token's content passes as it is) through the
  // decoder. The token-classification pipeline joins its entities' words with it, so a string that is not
  // a token (the text an unknown token covers) is taken as given too.
  std::string tokens_to_string(std::span<std::string const> tokens) const {
    std::vector<std::string> strings(tokens.begin(), tokens.end());
    std::vector<bool> added;
    for (std::string const& t : strings) added.push_back(by_content_.contains(t));
    return model_->decode(strings, added);
  }

  // decode() for ids a model produced: its output layer may have more rows than the tokenizer has tokens
  // (DeBERTa-v3: 128,100 against 128,001). Ids without a token are dropped, as HF's decode (the tokenizers
  // library) drops them.
  std::string decode_dropping_unknown(std::span<std::int64_t const> ids, bool skip_special_tokens = false) const {
    std::vector<std::int64_t> known;
    known.reserve(ids.size());
    for (std::int64_t id : ids)
      if (id_to_token(id).has_value()) known.push_back(id);
    return decode(known, skip_special_tokens);
  }

  std::optional<std::int64_t> token_to_id(std::string_view token) const {
    if (auto it = by_content_.find(std::string(token)); it != by_content_.end()) return added_[it->second].id;
    return model_->token_to_id(token);
  }
  std::optional<std::string> id_to_token(std::int64_t id) const {
    if (auto it = by_id_.find(id); it != by_id_.end()) return added_[it->second].content;
    return model_->id_to_token(id);
  }

  // HF's tokenizer.vocab_size: the model's vocabulary, without added tokens.
  std::size_t base_vocab_size() const { return model_->vocab_size(); }
  // HF's len(tokenizer): the model's vocabulary plus the added tokens that are not part of it.
  std::size_t vocab_size() const {
    std::size_t n = model_->vocab_size();
    for (auto const& t : added_) {
      if (!model_->id_to_token(t.id)) ++n;
    }
    return n;
  }
  std::int64_t mask_token_id() const { return mask_id_; }
  // tokenizer_config.json's model_max_length: where HF truncates when asked to without a max_length.
  std::optional<std::int64_t> model_max_length() const { return model_max_length_; }
  SpecialIds const& special_ids() const { return specials_; }
  std::vector<AddedToken> const& added_tokens() const { return added_; }
  char const* kind() const { return model_->kind(); }

 private:
  // The tokens the text (and pair) may make under options.token_limit besides `specials` special tokens.
  static std::size_t room_for_text(EncodeOptions const& options, std::size_t specials) {
    if (!options.token_limit) return std::numeric_limits<std::size_t>::max();
    if (!options.add_special_tokens) return *options.token_limit;
    return *options.token_limit > specials ? *options.token_limit - specials : 0;
  }

  Encoding finish(TokenList& a, TokenList* b, EncodeOptions const& options) const {
    truncate_tokens(a, b, options, specials_);
    Encoding e = build_encoding(a, b, specials_, options.add_special_tokens);
    if (options.padding == Padding::kMaxLength) {
      std::vector<Encoding> one{std::move(e)};
      pad_batch(one, options, specials_);
      return std::move(one.front());
    }
    return e;
  }

  std::shared_ptr<TokenizerModel const> model_;
  std::vector<AddedToken> added_;
  std::shared_ptr<AddedTokenMatcher const> matcher_;  // shared by copies, like the model
  SpecialIds specials_;
  std::int64_t mask_id_ = -1;
  std::optional<std::int64_t> model_max_length_;
  std::unordered_map<std::int64_t, std::size_t> by_id_;
  std::unordered_map<std::string, std::size_t> by_content_;
};

}  // namespace flashdeberta::tokenizer

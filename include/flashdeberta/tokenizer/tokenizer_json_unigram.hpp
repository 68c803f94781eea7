// The Unigram model of a tokenizer.json with its normalizer and pre-tokenizer: what HF's tokenizers runs on
// each stretch of text between the added tokens it matches in the raw text (DeBERTa v2/v3 and mDeBERTa as
// transformers saves them, GLiNER's directories among them).
//
// Per stretch, as tokenizers' encode does it (AddedVocabulary::extract_and_normalize, then
// pre-tokenization and the model):
//  1. the normalizer runs over the stretch (tokenizer_json_normalizers.hpp);
//  2. added tokens marked "normalized" (transformers' add_tokens makes GLiNER's <<ENT>> and <<SEP>> so) are
//     matched in the normalized text, by their own normalized content (lower-cased under Lowercase);
//  3. the pre-tokenizer cuts the rest into pre-tokens (tokenizer_json_pre_tokenizers.hpp);
//  4. each pre-token is segmented by the Unigram Viterbi (unigram_viterbi.hpp), unknown characters fused.
// Offsets come from the normalized characters' spans (normalized_text.hpp). No libsentencepiece is involved:
// the Viterbi is tokenizers' own, and the normalizer is whatever the file says.
//
// Cost: a long stretch is normalized and tokenized in pieces of about chunk_chars characters, and the work
// stops once the tokens pass the caller's limit, so a text refused at a token limit costs time and memory
// in proportion to the limit. A piece ends before a space that has an ASCII letter or digit on each side
// (and no prepended-concatenation mark two before), where the result is provably the one of the whole
// stretch: every normalizer step maps the space to itself and the letters to no whitespace (checked on the
// file's normalizer), so no whitespace run, composition or grapheme cluster spans the cut; Strip acts only
// at the stretch's two ends; the space becomes the Metaspace replacement that starts a pre-token either
// way; and no normalized added token holds a space or takes the space after it (rstrip). Where these do
// not hold (a pre-tokenizer that does not split at spaces, say), the stretch is taken whole.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/tokenizer/added_token_matcher.hpp"
#include "flashdeberta/tokenizer/grapheme_clusters.hpp"
#include "flashdeberta/tokenizer/normalized_text.hpp"
#include "flashdeberta/tokenizer/tokenizer_base.hpp"
#include "flashdeberta/tokenizer/tokenizer_config.hpp"
#include "flashdeberta/tokenizer/tokenizer_json_normalizers.hpp"
#include "flashdeberta/tokenizer/tokenizer_json_pre_tokenizers.hpp"
#include "flashdeberta/tokenizer/unigram_viterbi.hpp"

namespace flashdeberta::tokenizer {

// tokenizers' Metaspace decoder ("▁" to a space, none in the first token unless prepend_scheme is never),
// or none (tokens joined with a space).
struct MetaspaceDecoder {
  bool present = false;
  char32_t replacement = U'\u2581';
  bool keep_first = false;  // prepend_scheme "never"
};

class UnigramPipelineModel final : public TokenizerModel {
 public:
  UnigramPipelineModel(std::vector<std::pair<std::string, double>> vocab, std::optional<int> unk_id,
                       TextNormalizer normalizer, PreTokenizer pre_tokenizer, MetaspaceDecoder decoder,
                       std::string source, std::size_t chunk_chars = 4096)
      : vocab_(std::move(vocab)),
        unk_id_(unk_id),
        normalizer_(std::move(normalizer)),
        pre_tokenizer_(std::move(pre_tokenizer)),
        decoder_(decoder),
        source_(std::move(source)),
        chunk_chars_(std::max<std::size_t>(chunk_chars, 1)) {
    viterbi_ = detail::UnigramViterbi::from_vocab(vocab_);
    for (std::size_t id = 0; id < vocab_.size(); ++id) ids_.insert_or_assign(vocab_[id].first, std::int64_t(id));
    cuts_ = normalizer_.keeps_spaces_between_ascii_words() && pre_tokenizer_.splits_at_spaces();
  }

  // The added tokens matched in the normalized text (step 2); their patterns are their normalized contents.
  void set_normalized_added_tokens(std::vector<AddedToken> const& tokens) {
    normalized_added_.clear();
    std::vector<std::u32string> patterns;
    for (AddedToken token : tokens) {
      DecodedText const content = decode_utf8(token.content, "added token");
      NormalizedText text = NormalizedText::of(content.chars, 0, content.size());
      normalizer_.apply(text);
      std::string normalized = encode_utf8(text.chars());
      if (normalized != token.content) decoded_as_.insert_or_assign(token.content, normalized);
      token.content = std::move(normalized);
      bool const spaced = std::any_of(text.chars().begin(), text.chars().end(), is_whitespace);
      cuts_ = cuts_ && !token.rstrip && !spaced;
      patterns.push_back(text.chars());
      normalized_added_.push_back(std::move(token));
    }
    matcher_ = std::make_shared<AddedTokenMatcher const>(patterns);
  }

  TokenList encode(DecodedText const& text, std::size_t begin, std::size_t end, std::size_t max_tokens) const override {
    TokenList out;
    for (std::size_t start = begin; start < end && out.size() <= max_tokens;) {
      std::size_t const stop = next_cut(text.chars, start, end);
      encode_piece(text.chars, start, stop, start == begin, stop == end, max_tokens, out);
      start = stop;
    }
    return out;
  }

  std::optional<std::int64_t> token_to_id(std::string_view token) const override {
    auto it = ids_.find(std::string(token));
    if (it == ids_.end()) return std::nullopt;
    return it->second;
  }
  std::optional<std::string> id_to_token(std::int64_t id) const override {
    if (id < 0 || static_cast<std::size_t>(id) >= vocab_.size()) return std::nullopt;
    return vocab_[static_cast<std::size_t>(id)].first;
  }
  std::size_t vocab_size() const override { return vocab_.size(); }
  char const* kind() const override { return "unigram"; }

  // tokenizers' decode: a normalized added token reads as its normalized content ("<<ent>>" under
  // Lowercase), then the decoder.
  std::string decode(std::vector<std::string> const& tokens, std::vector<bool> const& added) const override {
    std::string out;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      auto const normalized = added[i] ? decoded_as_.find(tokens[i]) : decoded_as_.end();
      std::string const& token = normalized != decoded_as_.end() ? normalized->second : tokens[i];
      if (!decoder_.present) {
        out += (i == 0 ? "" : " ") + token;
        continue;
      }
      for (char32_t c : decode_utf8(token, "token").chars) {
        if (c != decoder_.replacement) {
          append_utf8(out, c);
        } else if (i != 0 || decoder_.keep_first) {
          out += ' ';
        }
      }
    }
    return out;
  }

 private:
  // Where the piece that starts at `start` ends (see the top of this header): the last cut within
  // chunk_chars, else the first one after, else the end of the stretch.
  std::size_t next_cut(std::u32string const& chars, std::size_t start, std::size_t end) const {
    if (!cuts_ || end - start <= chunk_chars_) return end;
    auto const ascii_word = [&](std::size_t i) {
      char32_t const c = chars[i];
      return (c >= U'0' && c <= U'9') || (c >= U'a' && c <= U'z') || (c >= U'A' && c <= U'Z');
    };
    auto const cut = [&](std::size_t i) {
      return chars[i] == U' ' && i > start && i + 1 < end && ascii_word(i - 1) && ascii_word(i + 1) &&
             (i < start + 2 || grapheme_class(chars[i - 2]) != GraphemeClass::kPrepend);
    };
    for (std::size_t i = start + chunk_chars_; i > start; --i) {
      if (cut(i)) return i;
    }
    for (std::size_t i = start + chunk_chars_ + 1; i < end; ++i) {
      if (cut(i)) return i;
    }
    return end;
  }

  // Steps 1 and 2 on chars[begin, end), which starts / ends the stretch where at_start / at_end.
  void encode_piece(std::u32string const& chars, std::size_t begin, std::size_t end, bool at_start, bool at_end,
                    std::size_t max_tokens, TokenList& out) const {
    NormalizedText normalized = NormalizedText::of(chars, begin, end);
    normalizer_.apply(normalized, at_start, at_end);
    if (normalized_added_.empty()) {
      encode_stretch(normalized, max_tokens, out);
      return;
    }
    DecodedText text;
    text.chars = normalized.chars();
    for (TextSegment const& seg : detail::split_added_tokens(text, normalized_added_, *matcher_)) {
      if (out.size() > max_tokens) break;
      if (seg.added < 0) {
        encode_stretch(normalized.slice(seg.begin, seg.end), max_tokens, out);
        continue;
      }
      AddedToken const& token = normalized_added_[static_cast<std::size_t>(seg.added)];
      out.push_back(token.id, token.content, normalized.span_of(seg.begin, seg.end), PreTokenPosition::kAddedToken);
    }
  }

  // Steps 3 and 4 on one normalized stretch; stops once `out` holds more than max_tokens tokens.
  void encode_stretch(NormalizedText const& stretch, std::size_t max_tokens, TokenList& out) const {
    for (NormalizedText const& pre_token : pre_tokenizer_.apply(stretch)) {
      if (out.size() > max_tokens) return;
      std::string utf8;
      std::vector<std::size_t> char_at;  // byte -> character of the pre-token
      for (std::size_t i = 0; i < pre_token.size(); ++i) {
        append_utf8(utf8, pre_token.chars()[i]);
        char_at.resize(utf8.size(), i);
      }
      std::size_t byte = 0;
      bool first = true;
      for (auto const& piece : viterbi_.encode(utf8, unk_id_.value_or(-1))) {
        // Named copies, not structured bindings: the error macro's lambda cannot capture those (C++20, clang 14).
        auto const id = piece.first;
        std::size_t const length = piece.second;
        FLASHDEBERTA_REQUIRE(id >= 0, source_ << ": the Unigram model has no unk_id, and the text holds a "
                                              << "character no piece covers: '" << utf8.substr(byte, length) << "'");
        std::size_t const first_char = char_at[byte];
        std::size_t const last_char = char_at[byte + length - 1];
        out.push_back(id, utf8.substr(byte, length), pre_token.span_of(first_char, last_char + 1),
                      first ? PreTokenPosition::kFirst : PreTokenPosition::kInside);
        byte += length;
        first = false;
      }
    }
  }

  std::vector<std::pair<std::string, double>> vocab_;
  std::optional<int> unk_id_;
  TextNormalizer normalizer_;
  PreTokenizer pre_tokenizer_;
  MetaspaceDecoder decoder_;
  std::string source_;
  std::size_t chunk_chars_;
  bool cuts_ = false;  // whether long stretches may be cut (see the top of this header)
  detail::UnigramViterbi viterbi_;
  std::unordered_map<std::string, std::int64_t> ids_;  // a piece listed twice: its last id, as tokenizers
  std::vector<AddedToken> normalized_added_;
  std::unordered_map<std::string, std::string> decoded_as_;  // added token content -> normalized content
  std::shared_ptr<AddedTokenMatcher const> matcher_;
};

}  // namespace flashdeberta::tokenizer

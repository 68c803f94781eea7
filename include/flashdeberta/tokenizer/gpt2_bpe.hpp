// DeBERTa v1's tokenizer model: GPT-2 byte-level BPE from vocab.json + merges.txt (deberta-spec.md 8.2).
//
//  1. Pre-tokenization with GPT-2's pattern, written out by hand (no regex engine):
//       's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//     No prefix space is added and nothing is normalized, as in HF (add_prefix_space=false).
//  2. Each pre-token's UTF-8 bytes map through GPT-2's byte -> printable character table.
//  3. BPE: repeatedly merge the adjacent pair of lowest rank (its line in merges.txt).
// Offsets: a token covers the code points its bytes come from (a token holding part of a character's
// bytes gets the whole character, as in HF). HF's DebertaTokenizer has no ByteLevel post-processor, so a
// token's leading space is part of its span; trim_offsets=true leaves spaces at the ends out (RoBERTa's).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/io/json.hpp"
#include "flashdeberta/tokenizer/tokenizer_base.hpp"
#include "flashdeberta/tokenizer/tokenizer_config.hpp"
#include "flashdeberta/tokenizer/unicode.hpp"

namespace flashdeberta::tokenizer {

namespace detail {

// GPT-2's bytes_to_unicode(): printable bytes map to themselves, the other 68 to U+0100, U+0101, ...
inline std::array<char32_t, 256> const& byte_to_char_table() {
  static std::array<char32_t, 256> const table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool const printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[static_cast<std::size_t>(b)] = printable ? static_cast<char32_t>(b) : next++;
    }
    return t;
  }();
  return table;
}

// Inverse table; -1 for characters that are not byte symbols.
inline int char_to_byte(char32_t c) {
  static std::unordered_map<char32_t, int> const inverse = [] {
    std::unordered_map<char32_t, int> m;
    for (int b = 0; b < 256; ++b) m[byte_to_char_table()[static_cast<std::size_t>(b)]] = b;
    return m;
  }();
  auto it = inverse.find(c);
  return it == inverse.end() ? -1 : it->second;
}

enum class CharClass { kLetter, kNumber, kSpace, kOther };

inline CharClass classify(char32_t c) {
  if (is_letter(c)) return CharClass::kLetter;
  if (is_number(c)) return CharClass::kNumber;
  if (is_whitespace(c)) return CharClass::kSpace;
  return CharClass::kOther;
}

// Length of the GPT-2 pattern's match at chars[i] (i < end); always at least 1.
inline std::size_t gpt2_match(std::u32string_view chars, std::size_t i, std::size_t end) {
  if (chars[i] == U'\'') {
    for (std::u32string_view suffix : {U"s", U"t", U"re", U"ve", U"m", U"ll", U"d"}) {
      if (chars.substr(i + 1, std::min(end - i - 1, suffix.size())) == suffix) return 1 + suffix.size();
    }
  }
  std::size_t j = i;
  if (chars[j] == U' ' && j + 1 < end && classify(chars[j + 1]) != CharClass::kSpace) ++j;
  CharClass const cls = classify(chars[j]);
  if (cls != CharClass::kSpace) {  // ' ?\p{L}+', ' ?\p{N}+' or ' ?[^\s\p{L}\p{N}]+'
    while (j < end && classify(chars[j]) == cls) ++j;
    return j - i;
  }
  std::size_t run = i;
  while (run < end && classify(chars[run]) == CharClass::kSpace) ++run;
  // '\s+(?!\S)' leaves the last space for the next word; a single space before a word is '\s+'.
  if (run < end && run - i >= 2) return run - i - 1;
  return run - i;
}

}  // namespace detail

class Gpt2BpeModel final : public TokenizerModel {
 public:
  // Reads `dir`/vocab.json and `dir`/merges.txt; every merge must join two vocabulary tokens into one.
  static std::shared_ptr<Gpt2BpeModel> load(std::filesystem::path const& dir, bool trim_offsets = false) {
    auto m = std::make_shared<Gpt2BpeModel>();
    m->trim_offsets_ = trim_offsets;
    auto const vocab_file = dir / "vocab.json";
    io::Json const vocab = detail::read_json_file(vocab_file, "BPE vocabulary");
    FLASHDEBERTA_REQUIRE(vocab.is_object() && !vocab.empty(),
                         vocab_file.string() << ": the BPE vocabulary must be a non-empty object of token -> id");
    for (auto const& [token, value] : vocab.items()) {
      std::int64_t const id = io::json_as_int64(value, vocab_file.string(), io::JsonFields::describe_key(token));
      FLASHDEBERTA_REQUIRE(id >= 0 && id <= std::numeric_limits<std::int32_t>::max(),
                           vocab_file.string() << ": token '" << token << "' has id " << id << " out of range");
      auto [it, fresh] = m->id_to_token_.emplace(id, token);
      FLASHDEBERTA_REQUIRE(fresh, vocab_file.string() << ": id " << id << " is used by both '" << it->second
                                                      << "' and '" << token << "'");
      m->token_to_id_[token] = id;
    }
    auto const merges_file = dir / "merges.txt";
    std::istringstream lines(detail::read_text_file(merges_file, "BPE merges"));
    std::size_t line_no = 0;
    for (std::string line; std::getline(lines, line);) {
      ++line_no;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty() || (line_no == 1 && line.starts_with("#version"))) continue;
      std::size_t const space = line.find(' ');
      FLASHDEBERTA_REQUIRE(space != std::string::npos && space > 0 && space + 1 < line.size() &&
                               line.find(' ', space + 1) == std::string::npos,
                           merges_file.string() << ": line " << line_no << " is not 'LEFT RIGHT': '" << line << "'");
      std::string const left = line.substr(0, space);
      std::string const right = line.substr(space + 1);
      for (std::string const& part : {left, right, left + right}) {
        FLASHDEBERTA_REQUIRE(m->token_to_id_.contains(part), merges_file.string()
                                                                 << ": line " << line_no << " uses '" << part
                                                                 << "', which is not in vocab.json");
      }
      m->ranks_.emplace(left + ' ' + right, static_cast<std::int64_t>(m->ranks_.size()));
    }
    return m;
  }

  TokenList encode(DecodedText const& text, std::size_t begin, std::size_t end) const override {
    TokenList out;
    std::u32string_view const chars(text.chars);
    for (std::size_t i = begin; i < end;) {
      std::size_t const len = detail::gpt2_match(chars, i, end);
      encode_word(text, i, i + len, out);
      i += len;
    }
    return out;
  }

  std::optional<std::int64_t> token_to_id(std::string_view token) const override {
    auto it = token_to_id_.find(std::string(token));
    if (it == token_to_id_.end()) return std::nullopt;
    return it->second;
  }
  std::optional<std::string> id_to_token(std::int64_t id) const override {
    auto it = id_to_token_.find(id);
    if (it == id_to_token_.end()) return std::nullopt;
    return it->second;
  }
  std::size_t vocab_size() const override { return token_to_id_.size(); }
  char const* kind() const override { return "gpt2-bpe"; }

  // HF's ByteLevel decoder: the byte symbols of all tokens back to bytes (a token holding any other
  // character is copied as it is), then invalid UTF-8 becomes U+FFFD.
  std::string decode(std::vector<std::string> const& tokens, std::vector<bool> const&) const override {
    std::string bytes;
    for (auto const& token : tokens) {
      DecodedText const chars = decode_utf8(token, "token");
      std::string mapped;
      bool all_bytes = true;
      for (char32_t c : chars.chars) {
        int const b = detail::char_to_byte(c);
        if (b < 0) {
          all_bytes = false;
          break;
        }
        mapped += static_cast<char>(b);
      }
      bytes += all_bytes ? mapped : token;
    }
    return detail::utf8_lossy(bytes);
  }

 private:
  // BPE of the pre-token chars[begin, end); appends its tokens.
  void encode_word(DecodedText const& text, std::size_t begin, std::size_t end, TokenList& out) const {
    struct Symbol {
      std::string text;        // byte-symbol characters, UTF-8
      std::size_t first_byte;  // byte range of the original text it stands for
      std::size_t last_byte;   // one past
    };
    std::vector<Symbol> symbols;
    auto const& table = detail::byte_to_char_table();
    std::string utf8;
    for (std::size_t c = begin; c < end; ++c) {
      utf8.clear();
      append_utf8(utf8, text.chars[c]);
      std::size_t const base = text.byte_offsets[c];
      for (std::size_t k = 0; k < utf8.size(); ++k) {
        std::string s;
        append_utf8(s, table[static_cast<unsigned char>(utf8[k])]);
        symbols.push_back({std::move(s), base + k, base + k + 1});
      }
    }
    while (symbols.size() > 1) {
      std::int64_t best_rank = std::numeric_limits<std::int64_t>::max();
      std::string best;
      for (std::size_t k = 0; k + 1 < symbols.size(); ++k) {
        auto it = ranks_.find(symbols[k].text + ' ' + symbols[k + 1].text);
        if (it != ranks_.end() && it->second < best_rank) {
          best_rank = it->second;
          best = it->first;
        }
      }
      if (best.empty()) break;
      std::size_t const space = best.find(' ');
      std::string_view const left(best.data(), space);
      std::string_view const right(best.data() + space + 1, best.size() - space - 1);
      std::vector<Symbol> merged;
      for (std::size_t k = 0; k < symbols.size(); ++k) {
        if (k + 1 < symbols.size() && symbols[k].text == left && symbols[k + 1].text == right) {
          merged.push_back({symbols[k].text + symbols[k + 1].text, symbols[k].first_byte, symbols[k + 1].last_byte});
          ++k;
        } else {
          merged.push_back(std::move(symbols[k]));
        }
      }
      symbols = std::move(merged);
    }
    for (auto& s : symbols) {
      auto it = token_to_id_.find(s.text);
      FLASHDEBERTA_REQUIRE(it != token_to_id_.end(), "BPE: token '" << s.text << "' is not in vocab.json");
      out.push_back(it->second, s.text, span_of(text, s.text, s.first_byte, s.last_byte));
    }
  }

  Span span_of(DecodedText const& text, std::string const& token, std::size_t first_byte, std::size_t last_byte) const {
    auto const& offs = text.byte_offsets;
    // The characters holding the first and the last byte.
    auto const first = std::upper_bound(offs.begin(), offs.end(), first_byte) - offs.begin() - 1;
    auto const last = std::upper_bound(offs.begin(), offs.end(), last_byte - 1) - offs.begin();
    Span span{first, last};
    if (trim_offsets_) {
      std::size_t leading = 0;
      std::size_t trailing = 0;
      DecodedText const chars = decode_utf8(token, "token");
      char32_t const space = detail::byte_to_char_table()[' '];
      while (leading < chars.size() && chars.chars[leading] == space) ++leading;
      while (trailing < chars.size() && chars.chars[chars.size() - 1 - trailing] == space) ++trailing;
      span.begin = std::min(span.begin + static_cast<std::int64_t>(leading), span.end);
      if (trailing > 0 && span.end >= static_cast<std::int64_t>(trailing)) {
        span.end = std::max(span.end - static_cast<std::int64_t>(trailing), span.begin);
      }
    }
    return span;
  }

  std::unordered_map<std::string, std::int64_t> token_to_id_;
  std::unordered_map<std::int64_t, std::string> id_to_token_;
  std::unordered_map<std::string, std::int64_t> ranks_;  // "LEFT RIGHT" -> line order
  bool trim_offsets_ = false;
};

}  // namespace flashdeberta::tokenizer

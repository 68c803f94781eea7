// DeBERTa v1's tokenizer model: GPT-2 byte-level BPE from vocab.json + merges.txt (deberta-spec.md 8.2).
//
//  1. Pre-tokenization with GPT-2's pattern, written out by hand (no regex engine):
//       's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//     No prefix space is added and nothing is normalized, as in HF (add_prefix_space=false).
//  2. Each pre-token's UTF-8 bytes map through GPT-2's byte -> printable character table.
//  3. BPE: repeatedly merge the adjacent pair of lowest rank (its line in merges.txt), the leftmost first,
//     in O(n log n) per word as HF's tokenizers does it (merge_word below); results of words under 256
//     bytes are kept in a bounded cache shared by all threads (word_cache.hpp).
// Offsets: a token covers the code points its bytes come from (a token holding part of a character's
// bytes gets the whole character, as in HF). HF's DebertaTokenizer has no ByteLevel post-processor, so a
// token's leading space is part of its span; trim_offsets=true leaves spaces at the ends out (RoBERTa's).
// A tokenizer.json builds the same model from its own vocabulary and merges (build), with ByteLevel's
// add_prefix_space when the file sets it.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
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
#include "flashdeberta/tokenizer/word_cache.hpp"

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

// The symbol of one byte, UTF-8.
inline std::string byte_symbol(unsigned char byte) {
  std::string s;
  append_utf8(s, byte_to_char_table()[byte]);
  return s;
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
  // One line of merges.txt, or one entry of a tokenizer.json's model.merges; `where` names it in errors.
  struct MergeRule {
    std::string left;
    std::string right;
    std::string where;
  };

  // Options a tokenizer.json can set (vocab.json + merges.txt directories use the defaults).
  struct Options {
    bool trim_offsets = false;
    bool add_prefix_space = false;  // ByteLevel's: a space before each stretch that does not start with one
  };

  // Reads `dir`/vocab.json and `dir`/merges.txt; every id must lie in [0, 2^31) and belong to one token,
  // and every merge must join two vocabulary tokens into one.
  static std::shared_ptr<Gpt2BpeModel> load(std::filesystem::path const& dir, bool trim_offsets = false) {
    auto const vocab_file = dir / "vocab.json";
    io::Json const vocab = detail::read_json_file(vocab_file, "BPE vocabulary");
    auto const merges_file = dir / "merges.txt";
    std::istringstream lines(detail::read_text_file(merges_file, "BPE merges"));
    std::vector<MergeRule> merges;
    std::size_t line_no = 0;
    for (std::string line; std::getline(lines, line);) {
      ++line_no;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty() || (line_no == 1 && line.starts_with("#version"))) continue;
      std::size_t const space = line.find(' ');
      FLASHDEBERTA_REQUIRE(space != std::string::npos && space > 0 && space + 1 < line.size() &&
                               line.find(' ', space + 1) == std::string::npos,
                           merges_file.string() << ": line " << line_no << " is not 'LEFT RIGHT': '" << line << "'");
      merges.push_back({line.substr(0, space), line.substr(space + 1), "line " + std::to_string(line_no)});
    }
    return build(vocab, vocab_file.string(), "vocab.json", merges, merges_file.string(),
                 {.trim_offsets = trim_offsets});
  }

  // The model from a vocabulary (an object of token -> id) and merge rules in rank order; the sources name
  // the vocabulary's file, the vocabulary itself and the merges' file in errors.
  static std::shared_ptr<Gpt2BpeModel> build(io::Json const& vocab, std::string const& vocab_source,
                                             std::string const& vocab_name, std::vector<MergeRule> const& merges,
                                             std::string const& merges_source, Options options) {
    auto m = std::make_shared<Gpt2BpeModel>();
    m->trim_offsets_ = options.trim_offsets;
    m->add_prefix_space_ = options.add_prefix_space;
    FLASHDEBERTA_REQUIRE(vocab.is_object() && !vocab.empty(),
                         vocab_source << ": the BPE vocabulary must be a non-empty object of token -> id");
    for (auto const& item : vocab.items()) {  // no structured bindings: clang < 16 cannot capture them
      std::string const& token = item.key();
      std::int64_t const id = io::json_as_int64(item.value(), vocab_source, io::JsonFields::describe_key(token));
      detail::require_token_id(id, vocab_source, token);
      auto const placed = m->id_to_token_.emplace(id, token);  // (where, inserted)
      FLASHDEBERTA_REQUIRE(placed.second, vocab_source << ": id " << id << " is used by both '" << placed.first->second
                                                       << "' and '" << token << "'");
      m->token_to_id_[token] = id;
      m->max_token_bytes_ = std::max(m->max_token_bytes_, decode_utf8(token, "vocab token").chars.size());
    }
    for (std::size_t b = 0; b < 256; ++b) {
      auto it = m->token_to_id_.find(detail::byte_symbol(static_cast<unsigned char>(b)));
      m->byte_ids_[b] = it == m->token_to_id_.end() ? -1 : static_cast<std::int32_t>(it->second);
    }
    std::int64_t rank = 0;
    for (MergeRule const& rule : merges) {
      std::int64_t ids[3] = {};
      std::string const parts[3] = {rule.left, rule.right, rule.left + rule.right};
      for (int k = 0; k < 3; ++k) {
        auto it = m->token_to_id_.find(parts[k]);
        FLASHDEBERTA_REQUIRE(it != m->token_to_id_.end(), merges_source << ": " << rule.where << " uses '" << parts[k]
                                                                        << "', which is not in " << vocab_name);
        ids[k] = it->second;
      }
      // A pair listed twice takes its last rank, as in HF (the merges become a map, later lines winning).
      m->merges_.insert_or_assign(pair_key(ids[0], ids[1]), Merge{rank++, static_cast<std::int32_t>(ids[2])});
    }
    return m;
  }

  TokenList encode(DecodedText const& text, std::size_t begin, std::size_t end, std::size_t max_tokens) const override {
    if (add_prefix_space_ && begin < end && text.chars[begin] != U' ')
      return encode_with_prefix(text, begin, end, max_tokens);
    return encode_plain(text, begin, end, max_tokens);
  }

  // Every token stands for at most max_token_bytes_ bytes of the text and byte-level BPE knows every byte,
  // so a stretch of n bytes makes at least n / max_token_bytes_ tokens: one long word is refused before its
  // merges.
  std::size_t min_tokens(DecodedText const& text, std::size_t begin, std::size_t end) const override {
    if (max_token_bytes_ == 0 || begin >= end) return 0;
    std::size_t const bytes = text.byte_offsets[end] - text.byte_offsets[begin];
    return (bytes + max_token_bytes_ - 1) / max_token_bytes_;
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
  TokenList encode_plain(DecodedText const& text, std::size_t begin, std::size_t end, std::size_t max_tokens) const {
    TokenList out;
    std::u32string_view const chars(text.chars);
    for (std::size_t i = begin; i < end && out.size() <= max_tokens;) {
      std::size_t const len = detail::gpt2_match(chars, i, end);
      encode_word(text, i, i + len, out);
      i += len;
    }
    return out;
  }

  // ByteLevel's add_prefix_space: the stretch is encoded with a space in front, and that space stands for
  // the stretch's first character (tokenizers' NormalizedString::prepend gives it that character's span).
  TokenList encode_with_prefix(DecodedText const& text, std::size_t begin, std::size_t end,
                               std::size_t max_tokens) const {
    DecodedText const prefixed =
        decode_utf8(" " + encode_utf8(std::u32string_view(text.chars).substr(begin, end - begin)));
    TokenList out = encode_plain(prefixed, 0, prefixed.size(), max_tokens);
    auto const original = [&](std::int64_t i) {
      return static_cast<std::int64_t>(begin) + std::max<std::int64_t>(i - 1, 0);
    };
    for (Span& span : out.offsets) {
      if (span.end <= span.begin) continue;
      span = {original(span.begin), original(span.end - 1) + 1};
    }
    return out;
  }

  // What merging a pair of tokens gives: its rank (order in merges.txt, lower first) and the new token.
  struct Merge {
    std::int64_t rank;
    std::int32_t id;
  };
  // One token of a merged word and the number of the word's UTF-8 bytes it stands for.
  struct Piece {
    std::int32_t id;
    std::size_t bytes;
  };
  // Pre-tokens shorter than this are cached (HF's MAX_LENGTH): long ones rarely repeat.
  static constexpr std::size_t kMaxCachedBytes = 256;

  static std::uint64_t pair_key(std::int64_t left, std::int64_t right) {
    return (static_cast<std::uint64_t>(left) << 32) | static_cast<std::uint64_t>(right);
  }

  // BPE of the pre-token chars[begin, end); appends its tokens.
  void encode_word(DecodedText const& text, std::size_t begin, std::size_t end, TokenList& out) const {
    std::string utf8;
    for (std::size_t c = begin; c < end; ++c) append_utf8(utf8, text.chars[c]);
    bool const cacheable = utf8.size() < kMaxCachedBytes;
    std::optional<std::vector<Piece>> cached = cacheable ? cache_.find(utf8) : std::nullopt;
    std::vector<Piece> const pieces = cached ? std::move(*cached) : merge_word(utf8);
    if (cacheable && !cached) cache_.insert(utf8, pieces);
    std::size_t first_byte = text.byte_offsets[begin];
    for (std::size_t k = 0; k < pieces.size(); ++k) {
      Piece const& p = pieces[k];
      std::string const& token = id_to_token_.at(p.id);
      out.push_back(p.id, token, span_of(text, token, first_byte, first_byte + p.bytes),
                    k == 0 ? PreTokenPosition::kFirst : PreTokenPosition::kInside);
      first_byte += p.bytes;
    }
  }

  // HF's BPE merge loop (tokenizers' Word::merge_all): the word is a linked list of symbols, one per
  // byte to start with, and a min-heap holds the candidate merges of adjacent symbols keyed by (rank,
  // position). The top is applied unless a merge before it changed its symbols: the left one is gone,
  // or the pair it now forms merges into another token; then the merged symbol's new pairs with its
  // neighbours go on the heap. A word of n bytes takes O(n log n).
  std::vector<Piece> merge_word(std::string const& utf8) const {
    struct Symbol {
      std::int32_t id;
      std::size_t bytes;  // 0: merged into the symbol before it
      std::size_t prev;   // kNone at the ends
      std::size_t next;
    };
    struct Candidate {
      std::int64_t rank;
      std::size_t pos;  // the left symbol of the pair
      std::int32_t id;  // what the pair merges into
      bool operator>(Candidate const& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
    std::vector<Symbol> symbols;
    symbols.reserve(utf8.size());
    for (std::size_t k = 0; k < utf8.size(); ++k) {
      auto const byte = static_cast<unsigned char>(utf8[k]);
      std::int32_t const id = byte_ids_[byte];
      FLASHDEBERTA_REQUIRE(id >= 0, "BPE: token '" << detail::byte_symbol(byte) << "' (the symbol of byte 0x"
                                                   << std::hex << static_cast<int>(byte) << ") is not in vocab.json");
      symbols.push_back({id, 1, k == 0 ? kNone : k - 1, k + 1 < utf8.size() ? k + 1 : kNone});
    }
    std::vector<Candidate> heap;
    auto const push = [&](std::size_t pos, std::size_t right) {
      auto it = merges_.find(pair_key(symbols[pos].id, symbols[right].id));
      if (it == merges_.end()) return;
      heap.push_back({it->second.rank, pos, it->second.id});
      std::push_heap(heap.begin(), heap.end(), std::greater<>{});
    };
    for (std::size_t k = 0; k + 1 < symbols.size(); ++k) push(k, k + 1);
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), std::greater<>{});
      Candidate const top = heap.back();
      heap.pop_back();
      Symbol& left = symbols[top.pos];
      if (left.bytes == 0 || left.next == kNone) continue;
      Symbol& right = symbols[left.next];
      auto it = merges_.find(pair_key(left.id, right.id));
      if (it == merges_.end() || it->second.id != top.id) continue;  // stale: the pair has changed
      left.id = top.id;
      left.bytes += right.bytes;
      right.bytes = 0;
      left.next = right.next;
      if (left.next != kNone) symbols[left.next].prev = top.pos;
      if (left.prev != kNone) push(left.prev, top.pos);
      if (left.next != kNone) push(top.pos, left.next);
    }
    std::vector<Piece> pieces;
    for (Symbol const& s : symbols) {
      if (s.bytes != 0) pieces.push_back({s.id, s.bytes});
    }
    return pieces;
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
  std::unordered_map<std::uint64_t, Merge> merges_;  // pair_key(left id, right id) -> merge
  std::size_t max_token_bytes_ = 0;                  // bytes of the longest token (one byte per symbol of vocab.json)
  std::array<std::int32_t, 256> byte_ids_{};         // id of each byte's symbol, -1 where vocab.json lacks it
  bool trim_offsets_ = false;
  bool add_prefix_space_ = false;
  WordCache<std::vector<Piece>> cache_;  // pre-token UTF-8 -> pieces; shared by threads, see word_cache.hpp
};

}  // namespace flashdeberta::tokenizer

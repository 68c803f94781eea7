// HF's Precompiled normalizer: sentencepiece's character map (normalizer_spec.precompiled_charsmap of an
// spm.model, base64 in tokenizer.json), applied the way tokenizers applies it.
//
// Why our own lookup and not libsentencepiece: tokenizers does not apply the map as sentencepiece does.
// It walks the text by grapheme cluster; a cluster of fewer than 6 UTF-8 bytes is replaced by the value of
// the SHORTEST key that is a prefix of it (so "Ａ" + U+0301 becomes "A", the accent gone), and otherwise
// each character by its own key; sentencepiece takes the longest key at each position, across clusters,
// and folds whitespace as well. Only the map itself is shared, and it is small to read: a double-array
// trie over UTF-8 bytes whose values index a blob of NUL-terminated replacement strings
//   [u32 LE: trie size in bytes] [trie: u32 LE units] [replacement strings]
// with each unit packing a label byte, a leaf flag and an offset to the children (sentencepiece's
// Darts-clone layout, read by tokenizers' spm_precompiled crate).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/tokenizer/grapheme_clusters.hpp"
#include "flashdeberta/tokenizer/normalized_text.hpp"
#include "flashdeberta/tokenizer/unicode.hpp"

namespace flashdeberta::tokenizer {

namespace detail {

// Standard base64 (RFC 4648, '=' padding, no line breaks), as serde writes Vec<u8>; nullopt if malformed.
inline std::optional<std::string> decode_base64(std::string_view text) {
  auto const value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    int v[4];
    int padding = 0;
    for (int k = 0; k < 4; ++k) {
      char const c = text[i + static_cast<std::size_t>(k)];
      bool const last_group = i + 4 == text.size();
      if (c == '=' && last_group && k >= 2 && (k == 3 || text[i + 3] == '=')) {
        v[k] = 0;
        ++padding;
        continue;
      }
      v[k] = value(c);
      if (v[k] < 0 || padding > 0) return std::nullopt;
    }
    std::uint32_t const bits =
        (std::uint32_t(v[0]) << 18) | (std::uint32_t(v[1]) << 12) | (std::uint32_t(v[2]) << 6) | std::uint32_t(v[3]);
    out += static_cast<char>(bits >> 16);
    if (padding < 2) out += static_cast<char>((bits >> 8) & 0xFF);
    if (padding < 1) out += static_cast<char>(bits & 0xFF);
  }
  return out;
}

}  // namespace detail

class PrecompiledCharsmap {
 public:
  // Parses the decoded charsmap; `source` names it in errors.
  static PrecompiledCharsmap parse(std::string_view bytes, std::string const& source) {
    FLASHDEBERTA_REQUIRE(bytes.size() >= 4, source << ": the precompiled_charsmap is too short (" << bytes.size()
                                                   << " bytes) to hold its trie size");
    std::uint32_t const trie_bytes = read_u32(bytes, 0);
    FLASHDEBERTA_REQUIRE(trie_bytes % 4 == 0 && trie_bytes <= bytes.size() - 4,
                         source << ": the precompiled_charsmap's trie size " << trie_bytes << " does not fit its "
                                << bytes.size() << " bytes");
    FLASHDEBERTA_REQUIRE(trie_bytes > 0, source << ": the precompiled_charsmap's trie is empty");
    PrecompiledCharsmap m;
    m.units_.reserve(trie_bytes / 4);
    for (std::size_t at = 4; at < 4 + std::size_t{trie_bytes}; at += 4) m.units_.push_back(read_u32(bytes, at));
    m.normalized_ = std::string(bytes.substr(4 + std::size_t{trie_bytes}));
    decode_utf8(m.normalized_, source + ": the precompiled_charsmap's replacement strings");  // throws if invalid
    return m;
  }

  // The replacement of the shortest key that is a prefix of `key` (tokenizers' Precompiled::transform).
  std::optional<std::string_view> transform(std::string_view key) const {
    std::size_t node = offset(units_[0]);
    for (char ch : key) {
      auto const c = static_cast<unsigned char>(ch);
      if (c == 0) break;
      node ^= c;
      if (node >= units_.size()) return std::nullopt;
      std::uint32_t const unit = units_[node];
      if (label(unit) != c) return std::nullopt;
      node ^= offset(unit);
      if (has_leaf(unit)) {
        if (node >= units_.size()) return std::nullopt;
        return normalized_at(units_[node] & 0x7FFFFFFFu);
      }
    }
    return std::nullopt;
  }

  // HF's Precompiled::normalize as changes for NormalizedText::transform; nullopt when nothing changes.
  std::optional<std::vector<CharChange>> changes(std::u32string_view chars) const {
    std::vector<CharChange> out;
    out.reserve(chars.size());
    bool modified = false;
    // tokenizers' replace(): the new characters replace the old ones one for one; extra new characters are
    // insertions at the end, and when fewer come out, the last change so far (an earlier character's when
    // the replacement is empty; none at the very start) removes the rest.
    auto const replace = [&](std::string_view replacement, std::size_t old_count) {
      DecodedText const rep = decode_utf8(replacement, "precompiled_charsmap replacement");
      auto const diff = static_cast<std::ptrdiff_t>(rep.size()) - static_cast<std::ptrdiff_t>(old_count);
      for (char32_t c : rep.chars) out.push_back({c, 0});
      if (diff > 0) {
        for (std::size_t k = 0; k < static_cast<std::size_t>(diff); ++k) out[out.size() - 1 - k].change = 1;
      } else if (diff < 0 && !out.empty()) {
        out.back().change += diff;
      }
      modified = true;
    };
    std::size_t at = 0;
    for (std::size_t const length : grapheme_cluster_lengths(chars)) {
      std::u32string_view const cluster = chars.substr(at, length);
      at += length;
      std::string const utf8 = encode_utf8(cluster);
      if (utf8.size() < 6) {
        if (auto const rep = transform(utf8)) {
          replace(*rep, cluster.size());
          continue;
        }
      }
      for (char32_t c : cluster) {
        std::string one;
        append_utf8(one, c);
        if (auto const rep = transform(one)) {
          replace(*rep, 1);
        } else {
          out.push_back({c, 0});
        }
      }
    }
    if (!modified) return std::nullopt;
    return out;
  }

  void apply(NormalizedText& text) const {
    if (auto const c = changes(text.chars())) text.transform(*c, 0);
  }

 private:
  static std::uint32_t read_u32(std::string_view bytes, std::size_t at) {
    return std::uint32_t(static_cast<unsigned char>(bytes[at])) |
           std::uint32_t(static_cast<unsigned char>(bytes[at + 1])) << 8 |
           std::uint32_t(static_cast<unsigned char>(bytes[at + 2])) << 16 |
           std::uint32_t(static_cast<unsigned char>(bytes[at + 3])) << 24;
  }
  static bool has_leaf(std::uint32_t unit) { return ((unit >> 8) & 1u) == 1u; }
  static std::uint32_t label(std::uint32_t unit) { return unit & ((1u << 31) | 0xFFu); }
  static std::size_t offset(std::uint32_t unit) { return std::size_t{unit >> 10} << ((unit & (1u << 9)) >> 6); }

  // The NUL-terminated string at `index` of the replacement blob; nullopt outside it or inside a character.
  std::optional<std::string_view> normalized_at(std::size_t index) const {
    if (index > normalized_.size()) return std::nullopt;
    std::size_t end = index;
    while (end < normalized_.size() && normalized_[end] != '\0') ++end;
    auto const continuation = [&](std::size_t i) {
      return i < normalized_.size() && (static_cast<unsigned char>(normalized_[i]) & 0xC0) == 0x80;
    };
    if (continuation(index) || continuation(end)) return std::nullopt;
    return std::string_view(normalized_).substr(index, end - index);
  }

  std::vector<std::uint32_t> units_;
  std::string normalized_;
};

}  // namespace flashdeberta::tokenizer

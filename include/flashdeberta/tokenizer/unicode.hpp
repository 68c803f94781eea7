// UTF-8 decoding and encoding with validation, and the few Unicode properties the tokenizers need.
//
// Text enters the tokenizers as UTF-8 and is worked on as code points: offsets are reported in code
// points of the input (Python's str indices, which is what HF's offset_mapping counts). Invalid UTF-8
// is an error naming the byte offset: HF cannot receive it at all (a Python str is always valid, and
// the Rust tokenizers take &str), so there is no behaviour of theirs to copy, and silently replacing
// bytes would shift every offset after them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/tokenizer/unicode_tables.hpp"

namespace flashdeberta::tokenizer {

// Code points of a UTF-8 string plus, for each, the byte offset where it starts (byte_offsets has one
// extra entry: the total size), so spans can be converted both ways.
struct DecodedText {
  std::u32string chars;
  std::vector<std::size_t> byte_offsets;

  std::size_t size() const { return chars.size(); }
};

namespace detail {
inline std::size_t utf8_sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;  // 0xC0 and 0xC1 only start overlong forms
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}
}  // namespace detail

// Decodes `text`; throws flashdeberta::Error "<what>: invalid UTF-8 at byte N (...)" on a stray
// continuation byte, a truncated sequence, an overlong form, a surrogate or a value past U+10FFFF.
inline DecodedText decode_utf8(std::string_view text, std::string_view what = "text") {
  DecodedText out;
  out.chars.reserve(text.size());
  out.byte_offsets.reserve(text.size() + 1);
  std::size_t i = 0;
  while (i < text.size()) {
    auto const lead = static_cast<unsigned char>(text[i]);
    std::size_t const n = detail::utf8_sequence_length(lead);
    FLASHDEBERTA_REQUIRE(n != 0, what << ": invalid UTF-8 at byte " << i << " (byte 0x" << std::hex
                                      << static_cast<int>(lead) << " cannot start a character)");
    FLASHDEBERTA_REQUIRE(i + n <= text.size(), what << ": invalid UTF-8 at byte " << i << " (the text ends inside a "
                                                    << n << "-byte character)");
    char32_t cp = n == 1 ? lead : n == 2 ? (lead & 0x1F) : n == 3 ? (lead & 0x0F) : (lead & 0x07);
    for (std::size_t k = 1; k < n; ++k) {
      auto const c = static_cast<unsigned char>(text[i + k]);
      FLASHDEBERTA_REQUIRE((c & 0xC0) == 0x80, what << ": invalid UTF-8 at byte " << i << " (byte " << i + k
                                                    << " is not a continuation byte)");
      cp = (cp << 6) | (c & 0x3F);
    }
    bool const overlong = (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
    FLASHDEBERTA_REQUIRE(!overlong, what << ": invalid UTF-8 at byte " << i << " (overlong encoding)");
    FLASHDEBERTA_REQUIRE(cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF),
                         what << ": invalid UTF-8 at byte " << i << " (U+" << std::hex << static_cast<std::uint32_t>(cp)
                              << " is not a Unicode scalar value)");
    out.chars.push_back(cp);
    out.byte_offsets.push_back(i);
    i += n;
  }
  out.byte_offsets.push_back(text.size());
  return out;
}

inline void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

inline std::string encode_utf8(std::u32string_view chars) {
  std::string out;
  out.reserve(chars.size());
  for (char32_t c : chars) append_utf8(out, c);
  return out;
}

namespace detail {
// `bytes` with every maximal invalid UTF-8 subsequence replaced by U+FFFD (Rust's String::from_utf8_lossy,
// which HF's byte-level decoder calls).
inline std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  std::size_t i = 0;
  while (i < bytes.size()) {
    auto const lead = static_cast<unsigned char>(bytes[i]);
    std::size_t const n = utf8_sequence_length(lead);
    std::size_t k = 1;
    if (n > 1) {
      for (; k < n && i + k < bytes.size(); ++k) {
        auto const c = static_cast<unsigned char>(bytes[i + k]);
        unsigned char lo = 0x80;
        unsigned char hi = 0xBF;
        if (k == 1) {  // the second byte rules out overlong forms, surrogates and values past U+10FFFF
          if (lead == 0xE0) lo = 0xA0;
          if (lead == 0xED) hi = 0x9F;
          if (lead == 0xF0) lo = 0x90;
          if (lead == 0xF4) hi = 0x8F;
        }
        if (c < lo || c > hi) break;
      }
    }
    if (n != 0 && k == n) {
      out.append(bytes.substr(i, n));
    } else {
      out += "\xEF\xBF\xBD";
    }
    i += k;
  }
  return out;
}

inline bool in_ranges(std::span<unicode_tables::CodeRange const> table, char32_t cp) {
  auto it = std::upper_bound(table.begin(), table.end(), cp,
                             [](char32_t value, unicode_tables::CodeRange const& r) { return value < r.first; });
  return it != table.begin() && cp <= std::prev(it)->last;
}
}  // namespace detail

// General category L* (\p{L}).
inline bool is_letter(char32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  return detail::in_ranges(unicode_tables::kLetterRanges, cp);
}

// General category N* (\p{N}).
inline bool is_number(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return detail::in_ranges(unicode_tables::kNumberRanges, cp);
}

// The White_Space property: what the regex \s of HF's pre-tokenizers and Rust's char::is_whitespace
// match (Python's str.isspace adds U+001C..U+001F, which neither of those does).
inline bool is_whitespace(char32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

// General category M* (combining marks).
inline bool is_mark(char32_t cp) { return cp >= 0x300 && detail::in_ranges(unicode_tables::kMarkRanges, cp); }

// DeBERTa's split_by_punct punctuation: the ASCII symbol ranges or general category P*.
inline bool is_punctuation(char32_t cp) {
  if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126)) {
    return true;
  }
  return cp >= 0x80 && detail::in_ranges(unicode_tables::kPunctuationRanges, cp);
}

// Appends the full lower-case mapping of `cp` (Python's str.lower() applied to one character; Rust's
// char::to_lowercase, which HF's Lowercase normalizer uses, agrees): one code point except U+0130.
inline void append_lowercase(std::u32string& out, char32_t cp) {
  if (cp < 0x80) {
    out += (cp >= 'A' && cp <= 'Z') ? static_cast<char32_t>(cp + 32) : cp;
    return;
  }
  if (cp == 0x130) {  // LATIN CAPITAL LETTER I WITH DOT ABOVE -> i + COMBINING DOT ABOVE
    out += U'i';
    out += char32_t{0x307};
    return;
  }
  auto const& runs = unicode_tables::kLowercaseRuns;
  auto it = std::upper_bound(std::begin(runs), std::end(runs), cp,
                             [](char32_t value, unicode_tables::CaseRun const& r) { return value < r.first; });
  if (it != std::begin(runs)) {
    auto const& run = *std::prev(it);
    if (cp <= run.last && (cp - run.first) % run.stride == 0) {
      out += static_cast<char32_t>(static_cast<std::int64_t>(cp) + run.delta);
      return;
    }
  }
  out += cp;
}

}  // namespace flashdeberta::tokenizer

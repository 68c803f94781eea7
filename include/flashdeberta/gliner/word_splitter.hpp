// GLiNER's WhitespaceTokenSplitter (docs/gliner.md section 3.1): the words of a text are the matches of
// Python's re.compile(r"\w+(?:[-_]\w+)*|\S") over the text as a str, each with its start and end (exclusive)
// in code points, as Python's str indices count them.
//
// Python's \w on str is Unicode: str.isalnum() (letters L*, numbers N*) or '_'; combining marks are not \w.
// \S is any character but str.isspace() ones: the White_Space property plus U+001C..U+001F.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flashdeberta/tokenizer/unicode.hpp"

namespace flashdeberta {

struct GlinerWord {
  std::string text;    // UTF-8
  std::int64_t start;  // code points
  std::int64_t end;    // exclusive, code points
};

namespace detail {

inline bool python_word_char(char32_t cp) { return cp == U'_' || tokenizer::is_letter(cp) || tokenizer::is_number(cp); }

inline bool python_space(char32_t cp) { return (cp >= 0x1C && cp <= 0x1F) || tokenizer::is_whitespace(cp); }

// The end of \w+ at `i` (i itself when chars[i] is not \w).
inline std::size_t word_run_end(std::u32string const& chars, std::size_t i) {
  while (i < chars.size() && python_word_char(chars[i])) ++i;
  return i;
}

}  // namespace detail

// Words of decoded text, as (start, end) code-point spans.
inline std::vector<std::pair<std::int64_t, std::int64_t>> gliner_word_spans(std::u32string const& chars) {
  std::vector<std::pair<std::int64_t, std::int64_t>> spans;
  std::size_t i = 0;
  while (i < chars.size()) {
    if (detail::python_space(chars[i])) {
      ++i;
      continue;
    }
    std::size_t end = detail::word_run_end(chars, i);
    if (end == i) {
      end = i + 1;  // \S: one character
    } else {
      // (?:[-_]\w+)*, greedy: a joiner counts only when a word character follows it.
      while (end + 1 < chars.size() && (chars[end] == U'-' || chars[end] == U'_') &&
             detail::python_word_char(chars[end + 1])) {
        end = detail::word_run_end(chars, end + 1);
      }
    }
    spans.emplace_back(static_cast<std::int64_t>(i), static_cast<std::int64_t>(end));
    i = end;
  }
  return spans;
}

// The words of a UTF-8 text (invalid UTF-8 is an Error naming the byte), at most max_words of them when
// max_words >= 0 (GLiNER's max_len truncation).
inline std::vector<GlinerWord> split_gliner_words(std::string_view text, std::int64_t max_words = -1) {
  tokenizer::DecodedText const decoded = tokenizer::decode_utf8(text, "GLiNER text");
  std::vector<GlinerWord> words;
  for (auto const& [start, end] : gliner_word_spans(decoded.chars)) {
    if (max_words >= 0 && static_cast<std::int64_t>(words.size()) >= max_words) break;
    auto const b = decoded.byte_offsets[static_cast<std::size_t>(start)];
    auto const e = decoded.byte_offsets[static_cast<std::size_t>(end)];
    words.push_back({std::string(text.substr(b, e - b)), start, end});
  }
  return words;
}

// Python's text.strip() == "": empty or only str.isspace() characters.
inline bool gliner_blank_text(std::string_view text) {
  tokenizer::DecodedText const decoded = tokenizer::decode_utf8(text, "GLiNER text");
  for (char32_t cp : decoded.chars) {
    if (!detail::python_space(cp)) return false;
  }
  return true;
}

}  // namespace flashdeberta

// A client's text quoted in an error message, bounded: a 100 KB label must not come back as a 100 KB error
// (every front end echoes its refusals to the client that sent them, and logs them).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace flashdeberta {

// The most code points of a client's text an error message quotes.
inline constexpr std::size_t kQuotedChars = 64;

// `text` between `quote` characters; a text of more than kQuotedChars code points is cut there (at a code
// point boundary) and its size follows: 'aaaa...' (100000 bytes).
inline std::string quoted_excerpt(std::string_view text, char quote = '\'') {
  std::size_t end = 0;
  std::size_t chars = 0;
  while (end < text.size() && chars < kQuotedChars) {
    ++end;
    while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
    ++chars;
  }
  if (end == text.size()) return quote + std::string(text) + quote;
  return quote + std::string(text.substr(0, end)) + "..." + quote + " (" + std::to_string(text.size()) + " bytes)";
}

}  // namespace flashdeberta

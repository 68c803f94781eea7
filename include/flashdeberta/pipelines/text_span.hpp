// Character spans of a UTF-8 text. The tokenizer's offsets, and HF's, count Unicode code points.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace flashdeberta::pipelines {

// The code points [begin, end) of `text` as UTF-8 (clamped to the text).
inline std::string substr_code_points(std::string_view text, std::int64_t begin, std::int64_t end) {
  auto const byte_of = [&](std::int64_t index) {
    std::size_t byte = 0;
    for (std::int64_t seen = 0; byte < text.size(); ++byte) {
      if ((static_cast<unsigned char>(text[byte]) & 0xC0) == 0x80) continue;  // continuation byte
      if (seen++ == index) return byte;
    }
    return text.size();
  };
  if (end <= begin) return {};
  std::size_t const b = byte_of(begin);
  return std::string(text.substr(b, byte_of(end) - b));
}

}  // namespace flashdeberta::pipelines

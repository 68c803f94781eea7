// Extended grapheme clusters (UAX #29), which HF's Precompiled normalizer works on
// (unicode-segmentation's graphemes(true)).
//
// Rules GB3 to GB13 except GB9c (Indic conjuncts: consonant, linker, consonant). GB9c joins only clusters
// of three or more Indic characters of three UTF-8 bytes each, and the normalizer treats any cluster of six
// bytes or more character by character, as it does single characters; leaving GB9c out can only change a
// result where a charsmap key starts with an Indic consonant followed by a two-byte combining mark.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "flashdeberta/tokenizer/unicode_normalization.hpp"
#include "flashdeberta/tokenizer/unicode_normalization_tables.hpp"

namespace flashdeberta::tokenizer {

// Grapheme_Cluster_Break values, numbered as in unicode_normalization_tables.hpp (kOther: none of them).
enum class GraphemeClass : std::uint8_t {
  kOther,
  kCR,
  kLF,
  kControl,
  kExtend,
  kZwj,
  kRegionalIndicator,
  kPrepend,
  kSpacingMark,
  kL,
  kV,
  kT,
  kLV,
  kLVT
};

inline GraphemeClass grapheme_class(char32_t c) {
  if (c >= 0x20 && c < 0x7F) return GraphemeClass::kOther;
  return static_cast<GraphemeClass>(detail::lookup_class(unicode_tables::kGraphemeBreakRuns, c));
}

inline bool is_extended_pictographic(char32_t c) {
  return c >= 0xA9 && detail::lookup_class(unicode_tables::kExtendedPictographicRuns, c) != 0;
}

// The lengths (in characters) of the grapheme clusters of `chars`, in order.
inline std::vector<std::size_t> grapheme_cluster_lengths(std::u32string_view chars) {
  using G = GraphemeClass;
  enum class Emoji : std::uint8_t { kNone, kPictographic, kPictographicZwj };  // for GB11
  auto const control = [](G g) { return g == G::kCR || g == G::kLF || g == G::kControl; };
  std::vector<std::size_t> out;
  if (chars.empty()) return out;
  std::size_t start = 0;
  G prev = grapheme_class(chars[0]);
  Emoji emoji = is_extended_pictographic(chars[0]) ? Emoji::kPictographic : Emoji::kNone;
  std::size_t regional_run = prev == G::kRegionalIndicator ? 1 : 0;  // regional indicators just before
  for (std::size_t j = 1; j < chars.size(); ++j) {
    G const cur = grapheme_class(chars[j]);
    bool const pictographic = is_extended_pictographic(chars[j]);
    bool join = false;
    if (prev == G::kCR && cur == G::kLF) {
      join = true;  // GB3
    } else if (control(prev) || control(cur)) {
      join = false;  // GB4, GB5
    } else if (prev == G::kL && (cur == G::kL || cur == G::kV || cur == G::kLV || cur == G::kLVT)) {
      join = true;  // GB6
    } else if ((prev == G::kLV || prev == G::kV) && (cur == G::kV || cur == G::kT)) {
      join = true;  // GB7
    } else if ((prev == G::kLVT || prev == G::kT) && cur == G::kT) {
      join = true;  // GB8
    } else if (cur == G::kExtend || cur == G::kZwj || cur == G::kSpacingMark || prev == G::kPrepend) {
      join = true;  // GB9, GB9a, GB9b
    } else if (prev == G::kZwj && pictographic && emoji == Emoji::kPictographicZwj) {
      join = true;  // GB11
    } else if (prev == G::kRegionalIndicator && cur == G::kRegionalIndicator && regional_run % 2 == 1) {
      join = true;  // GB12, GB13
    }
    if (!join) {
      out.push_back(j - start);
      start = j;
    }
    if (pictographic) {
      emoji = Emoji::kPictographic;
    } else if (emoji == Emoji::kPictographic && cur == G::kExtend) {
      emoji = Emoji::kPictographic;
    } else if (emoji == Emoji::kPictographic && cur == G::kZwj) {
      emoji = Emoji::kPictographicZwj;
    } else {
      emoji = Emoji::kNone;
    }
    regional_run = cur == G::kRegionalIndicator ? regional_run + 1 : 0;
    prev = cur;
  }
  out.push_back(chars.size() - start);
  return out;
}

}  // namespace flashdeberta::tokenizer

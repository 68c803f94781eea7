// NFC as HF's tokenizers computes it for its NFC normalizer (unicode-normalization-alignments 0.1.12,
// Unicode 9.0 data): the composed characters together with the change each makes, for
// NormalizedText::transform, so that offsets come out as HF's.
//
// The algorithm is the crate's, step by step, because its changes depend on it:
//  1. each character is decomposed canonically (recursively; Hangul syllables algorithmically): the first
//     character of a decomposition replaces it (change 0), the others are insertions (change 1);
//  2. each run of non-starters is sorted by combining class, stably, the changes moving with the characters;
//  3. recomposition keeps one "composee" (the last starter) and a buffer of the marks after it: a mark that is
//     not blocked and composes with the composee replaces it, the result's change being the sum of both
//     minus one; a starter that does not compose ends the composee's run, which is emitted with its marks.
// A change belongs to its position in the output, not to the character: after reordering, a mark can take
// the span of the mark that stood there before (as in HF).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "flashdeberta/tokenizer/normalized_text.hpp"
#include "flashdeberta/tokenizer/unicode_normalization_tables.hpp"

namespace flashdeberta::tokenizer {

namespace detail {

inline constexpr char32_t kHangulS = 0xAC00, kHangulL = 0x1100, kHangulV = 0x1161, kHangulT = 0x11A7;
inline constexpr char32_t kHangulLCount = 19, kHangulVCount = 21, kHangulTCount = 28;
inline constexpr char32_t kHangulNCount = kHangulVCount * kHangulTCount;
inline constexpr char32_t kHangulSCount = kHangulLCount * kHangulNCount;

inline std::uint8_t lookup_class(std::span<unicode_tables::ClassRange const> runs, char32_t c) {
  auto it = std::upper_bound(runs.begin(), runs.end(), c,
                             [](char32_t value, unicode_tables::ClassRange const& r) { return value < r.first; });
  if (it == runs.begin()) return 0;
  --it;
  return c <= it->last ? it->value : 0;
}

// The decomposition and composition tables as hash maps, built once.
struct CanonicalMaps {
  std::unordered_map<char32_t, std::pair<char32_t, char32_t>> decompose;  // cp -> (first, second or 0)
  std::unordered_map<std::uint64_t, char32_t> compose;                    // (first << 21 | second) -> cp

  static std::uint64_t key(char32_t a, char32_t b) { return (std::uint64_t{a} << 21) | std::uint64_t{b}; }

  static CanonicalMaps const& get() {
    static CanonicalMaps const maps = [] {
      CanonicalMaps m;
      for (auto const& d : unicode_tables::kCanonicalDecompositions) {
        m.decompose.emplace(d.cp, std::pair{d.first, d.second});
        if (d.composes) m.compose.emplace(key(d.first, d.second), d.cp);
      }
      return m;
    }();
    return maps;
  }
};

// Appends the full canonical decomposition of c.
inline void decompose_canonical(char32_t c, std::u32string& out) {
  if (c >= kHangulS && c < kHangulS + kHangulSCount) {
    char32_t const s = c - kHangulS;
    out.push_back(kHangulL + s / kHangulNCount);
    out.push_back(kHangulV + (s % kHangulNCount) / kHangulTCount);
    if (s % kHangulTCount != 0) out.push_back(kHangulT + s % kHangulTCount);
    return;
  }
  auto const& maps = CanonicalMaps::get().decompose;
  auto it = maps.find(c);
  if (it == maps.end()) {
    out.push_back(c);
    return;
  }
  decompose_canonical(it->second.first, out);
  if (it->second.second != 0) decompose_canonical(it->second.second, out);
}

inline std::optional<char32_t> compose_pair(char32_t a, char32_t b) {
  if (a >= kHangulL && a < kHangulL + kHangulLCount && b >= kHangulV && b < kHangulV + kHangulVCount)
    return kHangulS + ((a - kHangulL) * kHangulNCount + (b - kHangulV) * kHangulTCount);
  if (a >= kHangulS && a < kHangulS + kHangulSCount && (a - kHangulS) % kHangulTCount == 0 && b > kHangulT &&
      b < kHangulT + kHangulTCount)
    return a + (b - kHangulT);
  auto const& maps = CanonicalMaps::get().compose;
  auto it = maps.find(CanonicalMaps::key(a, b));
  if (it == maps.end()) return std::nullopt;
  return it->second;
}

}  // namespace detail

// Canonical combining class, Unicode 9.0 (0 for starters and code points unknown to 9.0).
inline std::uint8_t combining_class(char32_t c) {
  if (c < 0x300) return 0;
  return detail::lookup_class(unicode_tables::kCombiningClassRuns, c);
}

// NFC of `chars` as (character, change) pairs (see the top of this header).
inline std::vector<CharChange> nfc_changes(std::u32string_view chars) {
  // 1. Decomposition with changes; 2. stable sort of each run of non-starters.
  std::vector<CharChange> decomposed;
  decomposed.reserve(chars.size());
  std::u32string parts;
  for (char32_t c : chars) {
    parts.clear();
    detail::decompose_canonical(c, parts);
    for (std::size_t k = 0; k < parts.size(); ++k) decomposed.push_back({parts[k], k == 0 ? 0 : 1});
  }
  auto const by_class = [](CharChange const& a, CharChange const& b) {
    return combining_class(a.c) < combining_class(b.c);
  };
  for (std::size_t i = 0; i < decomposed.size();) {
    if (combining_class(decomposed[i].c) == 0) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < decomposed.size() && combining_class(decomposed[j].c) != 0) ++j;
    std::stable_sort(decomposed.begin() + static_cast<std::ptrdiff_t>(i),
                     decomposed.begin() + static_cast<std::ptrdiff_t>(j), by_class);
    i = j;
  }
  // 3. Recomposition.
  std::vector<CharChange> out;
  out.reserve(decomposed.size());
  std::optional<CharChange> composee;
  std::vector<CharChange> marks;  // the buffer: marks after the composee that did not compose
  std::optional<std::uint8_t> last_class;
  auto const flush = [&] {
    out.push_back(*composee);
    out.insert(out.end(), marks.begin(), marks.end());
    marks.clear();
  };
  for (CharChange const& d : decomposed) {
    std::uint8_t const cls = combining_class(d.c);
    if (!composee) {
      if (cls != 0) {
        out.push_back(d);
      } else {
        composee = d;
      }
      continue;
    }
    bool const blocked = last_class && *last_class >= cls;
    if (!blocked) {
      if (auto const r = detail::compose_pair(composee->c, d.c)) {
        composee = CharChange{*r, composee->change + d.change - 1};
        continue;
      }
    }
    if (cls == 0) {
      flush();
      composee = d;
      last_class.reset();
      continue;
    }
    marks.push_back(d);
    last_class = cls;
  }
  if (composee) flush();
  return out;
}

// Applies HF's NFC normalizer.
inline void apply_nfc(NormalizedText& text) { text.transform(nfc_changes(text.chars()), 0); }

}  // namespace flashdeberta::tokenizer

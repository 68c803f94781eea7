// NormalizedText: a stretch of the input as HF's tokenizers normalizes it (its NormalizedString), each
// character with the span of the input it stands for, so that tokens made from the normalized text get
// HF's offsets.
//
// HF keeps one alignment per byte of the normalized string; every byte of a character carries the same
// one, and it is always a run of whole input characters, so one span per character in code points of
// the input says the same. The edits below follow NormalizedString's rules exactly, including where they
// are odd: an inserted character takes the span of the input character before it, and a character that
// replaces several takes the span of the first (transform), a replacement takes the span of the last
// character it replaces (replace), and stripping keeps the spans of the characters left.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flashdeberta/tokenizer/encoding.hpp"
#include "flashdeberta/tokenizer/unicode.hpp"

namespace flashdeberta::tokenizer {

// One character of a new normalized text and how it relates to the old one (NormalizedString::transform):
// change 0 replaces the next old character, -n replaces it and removes the n after it, and a positive
// change inserts a character that consumes nothing.
struct CharChange {
  char32_t c;
  std::ptrdiff_t change;
};

// A matched stretch [begin, end) of the normalized characters.
struct CharRange {
  std::size_t begin = 0;
  std::size_t end = 0;
};

class NormalizedText {
 public:
  NormalizedText() = default;

  // text.chars[begin, end) as it is; origin: where it starts in the input (HF's original_shift).
  static NormalizedText of(std::u32string_view chars, std::size_t begin, std::size_t end) {
    NormalizedText t;
    t.origin_ = begin;
    t.chars_.assign(chars.substr(begin, end - begin));
    t.spans_.reserve(end - begin);
    for (std::size_t i = begin; i < end; ++i)
      t.spans_.push_back({static_cast<std::int64_t>(i), static_cast<std::int64_t>(i + 1)});
    return t;
  }

  std::u32string const& chars() const { return chars_; }
  std::vector<Span> const& spans() const { return spans_; }
  std::size_t size() const { return chars_.size(); }
  bool empty() const { return chars_.empty(); }
  // Where this text starts in the input, before any normalization (HF's offsets_original().0).
  std::size_t origin() const { return origin_; }

  // The input span of normalized characters [begin, end) (begin < end): from the first one's start to
  // the last one's end, as HF's expand_alignments.
  Span span_of(std::size_t begin, std::size_t end) const { return {spans_[begin].begin, spans_[end - 1].end}; }

  // NormalizedString::transform over the whole text, the first `removed_first` characters dropped.
  void transform(std::vector<CharChange> const& dest, std::size_t removed_first) {
    std::u32string chars;
    std::vector<Span> spans;
    chars.reserve(dest.size());
    spans.reserve(dest.size());
    std::size_t next = removed_first;  // the next old character a change consumes
    auto const origin_span = Span{static_cast<std::int64_t>(origin_), static_cast<std::int64_t>(origin_)};
    for (CharChange const& d : dest) {
      Span span{};
      if (d.change > 0) {  // inserted: the span of the old character before it (HF's (0, 0) at the start)
        span = next == 0 ? origin_span : spans_[std::min(next, spans_.size()) - 1];
      } else {
        // HF indexes past its alignments (and panics) on a change list that consumes more than there is;
        // the last span stands in for that.
        span = spans_.empty() ? origin_span : spans_[std::min(next, spans_.size() - 1)];
        next += 1 + static_cast<std::size_t>(-d.change);
      }
      chars.push_back(d.c);
      spans.push_back(span);
    }
    chars_ = std::move(chars);
    spans_ = std::move(spans);
  }

  // NormalizedString::replace: each match (in order, not overlapping) becomes `content`, every character
  // of which takes the span of the last character of the match.
  void replace(std::vector<CharRange> const& matches, std::u32string_view content) {
    if (matches.empty()) return;
    std::u32string chars;
    std::vector<Span> spans;
    std::size_t last = 0;
    for (CharRange const& m : matches) {
      chars.append(chars_, last, m.begin - last);
      spans.insert(spans.end(), spans_.begin() + static_cast<std::ptrdiff_t>(last),
                   spans_.begin() + static_cast<std::ptrdiff_t>(m.begin));
      chars.append(content);
      spans.insert(spans.end(), content.size(), spans_[m.end - 1]);
      last = m.end;
    }
    chars.append(chars_, last, std::u32string::npos);
    spans.insert(spans.end(), spans_.begin() + static_cast<std::ptrdiff_t>(last), spans_.end());
    chars_ = std::move(chars);
    spans_ = std::move(spans);
  }

  // Every occurrence of `c` becomes `content` (replace with a one-character pattern).
  void replace_char(char32_t c, std::u32string_view content) {
    std::vector<CharRange> matches;
    for (std::size_t i = 0; i < chars_.size(); ++i) {
      if (chars_[i] == c) matches.push_back({i, i + 1});
    }
    replace(matches, content);
  }

  // NormalizedString::lstrip / rstrip: whitespace (White_Space, Rust's char::is_whitespace) at the ends
  // goes; the characters left keep their spans.
  void strip(bool left, bool right) {
    std::size_t begin = 0;
    std::size_t end = chars_.size();
    while (left && begin < end && is_whitespace(chars_[begin])) ++begin;
    while (right && end > begin && is_whitespace(chars_[end - 1])) --end;
    chars_ = chars_.substr(begin, end - begin);
    spans_ = std::vector<Span>(spans_.begin() + static_cast<std::ptrdiff_t>(begin),
                               spans_.begin() + static_cast<std::ptrdiff_t>(end));
  }

  // NormalizedString::lowercase: Rust's char::to_lowercase; the extra characters of a longer mapping
  // are insertions, with the span of the character they come from.
  void lowercase() {
    std::vector<CharChange> dest;
    dest.reserve(chars_.size());
    std::u32string lower;
    for (char32_t c : chars_) {
      lower.clear();
      append_lowercase(lower, c);
      for (std::size_t k = 0; k < lower.size(); ++k) dest.push_back({lower[k], k == 0 ? 0 : 1});
    }
    transform(dest, 0);
  }

  // NormalizedString::prepend: `c` in front, with the span of the first character; nothing on an empty text.
  void prepend(char32_t c) {
    if (chars_.empty()) return;
    chars_.insert(chars_.begin(), c);
    spans_.insert(spans_.begin(), spans_.front());
  }

  // Characters [begin, end) as a text of their own (NormalizedString::slice by normalized range): its
  // origin is where the first of them starts in the input.
  NormalizedText slice(std::size_t begin, std::size_t end) const {
    NormalizedText t;
    t.chars_ = chars_.substr(begin, end - begin);
    t.spans_.assign(spans_.begin() + static_cast<std::ptrdiff_t>(begin),
                    spans_.begin() + static_cast<std::ptrdiff_t>(end));
    t.origin_ = begin < end ? static_cast<std::size_t>(spans_[begin].begin) : origin_;
    return t;
  }

 private:
  std::u32string chars_;
  std::vector<Span> spans_;  // one per character of chars_, in code points of the input
  std::size_t origin_ = 0;
};

// How a split keeps the matches of its pattern (HF's SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// NormalizedString::split with a pattern that matches single characters (`is_delimiter`): each matching
// character is one match. The pieces, empty ones dropped, as HF's PreTokenizedString::split keeps them.
template <class IsDelimiter>
std::vector<NormalizedText> split_text(NormalizedText const& text, IsDelimiter const& is_delimiter,
                                       SplitBehavior behavior) {
  struct Piece {
    CharRange range;
    bool delimiter;
  };
  std::vector<Piece> pieces;  // HF's find_matches: delimiters and the runs between them
  std::u32string const& chars = text.chars();
  for (std::size_t i = 0; i < chars.size();) {
    if (is_delimiter(chars[i])) {
      pieces.push_back({{i, i + 1}, true});
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < chars.size() && !is_delimiter(chars[j])) ++j;
    pieces.push_back({{i, j}, false});
    i = j;
  }
  std::vector<CharRange> kept;
  switch (behavior) {
    case SplitBehavior::kRemoved:
    case SplitBehavior::kIsolated:
      for (Piece const& p : pieces) {
        if (!(p.delimiter && behavior == SplitBehavior::kRemoved)) kept.push_back(p.range);
      }
      break;
    case SplitBehavior::kContiguous:
    case SplitBehavior::kMergedWithPrevious: {
      bool previous_delimiter = false;
      for (Piece const& p : pieces) {
        bool const joins = behavior == SplitBehavior::kContiguous ? p.delimiter == previous_delimiter
                                                                  : p.delimiter && !previous_delimiter;
        if (joins && !kept.empty()) {
          kept.back().end = p.range.end;
        } else {
          kept.push_back(p.range);
        }
        previous_delimiter = p.delimiter;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool next_delimiter = false;  // walked from the end, as HF does
      for (std::size_t k = pieces.size(); k-- > 0;) {
        Piece const& p = pieces[k];
        if (p.delimiter && !next_delimiter && !kept.empty()) {
          kept.back().begin = p.range.begin;
        } else {
          kept.push_back(p.range);
        }
        next_delimiter = p.delimiter;
      }
      std::reverse(kept.begin(), kept.end());
      break;
    }
  }
  std::vector<NormalizedText> out;
  out.reserve(kept.size());
  for (CharRange const& r : kept) {
    if (r.begin < r.end) out.push_back(text.slice(r.begin, r.end));
  }
  return out;
}

}  // namespace flashdeberta::tokenizer

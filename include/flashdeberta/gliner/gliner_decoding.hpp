// GLiNER's decoding (docs/gliner.md section 6) from one text's logits to entities: sigmoid in float32 as
// torch computes it, candidates compared with the threshold in float32 (torch casts the Python threshold to
// the tensor's dtype) in row-major order, the greedy search with its stable ordering (flat_ner / nested,
// multi_label), the kept spans sorted by start word, and character offsets from the words.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "flashdeberta/gliner/word_splitter.hpp"
#include "flashdeberta/tokenizer/unicode.hpp"

namespace flashdeberta {

// What happens to a text longer than max_len words or the tokenizer's model_max_length (docs/gliner.md
// section 11): kTruncate is GLiNER 0.2.27's cut; kWindows encodes overlapping windows of the words and merges
// their spans; kSinglePass encodes every word in one sequence, which GLiNER never does.
enum class GlinerLongText { kTruncate, kWindows, kSinglePass };

struct GlinerOptions {
  double threshold = 0.5;
  bool flat_ner = true;
  bool multi_label = false;
  GlinerLongText long_text = GlinerLongText::kTruncate;
  // Words two neighbouring windows share (kWindows only); unset: max_len / 4.
  std::optional<std::int64_t> window_overlap;
};

// One entity: start and end (exclusive) in code points of the text (Python str indices), as GLiNER gives them.
struct GlinerEntity {
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::string text;
  std::string label;
  double score = 0.0;
};

// A candidate span over words start .. end (inclusive).
struct GlinerSpan {
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::int64_t label = 0;
  double score = 0.0;
};

// torch.sigmoid in float32.
inline float gliner_sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

namespace detail {

inline bool gliner_conflict(GlinerSpan const& a, GlinerSpan const& b, GlinerOptions const& o) {
  if (a.start == b.start && a.end == b.end) return !o.multi_label;
  bool const disjoint = a.start > b.end || b.start > a.end;
  if (o.flat_ner) return !disjoint;
  bool const nested = (a.start <= b.start && a.end >= b.end) || (b.start <= a.start && b.end >= a.end);
  return !(disjoint || nested);
}

}  // namespace detail

// greedy_search: candidates in GLiNER's candidate order -> the kept spans, sorted by start word.
inline std::vector<GlinerSpan> gliner_greedy(std::vector<GlinerSpan> candidates, GlinerOptions const& o) {
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](GlinerSpan const& a, GlinerSpan const& b) { return a.score > b.score; });
  std::vector<GlinerSpan> kept;
  for (GlinerSpan const& c : candidates) {
    bool conflict = false;
    for (GlinerSpan const& k : kept) conflict = conflict || detail::gliner_conflict(c, k, o);
    if (!conflict) kept.push_back(c);
  }
  std::stable_sort(kept.begin(), kept.end(),
                   [](GlinerSpan const& a, GlinerSpan const& b) { return a.start < b.start; });
  return kept;
}

// Span models' candidates, in GLiNER's candidate order (s, k, c): logits (n K, C), row s K + k for the span
// s .. s+k; spans with s + k >= n are skipped.
inline std::vector<GlinerSpan> gliner_span_candidates(std::vector<float> const& logits, std::int64_t n,
                                                      std::int64_t k_max, std::int64_t labels, GlinerOptions const& o) {
  auto const threshold = static_cast<float>(o.threshold);
  std::vector<GlinerSpan> candidates;
  for (std::int64_t s = 0; s < n; ++s) {
    for (std::int64_t k = 0; k < k_max && s + k < n; ++k) {
      for (std::int64_t c = 0; c < labels; ++c) {
        float const p = gliner_sigmoid(logits[static_cast<std::size_t>((s * k_max + k) * labels + c)]);
        if (p > threshold) candidates.push_back({s, s + k, c, static_cast<double>(p)});
      }
    }
  }
  return candidates;
}

// Span models: the kept spans.
inline std::vector<GlinerSpan> decode_gliner_spans(std::vector<float> const& logits, std::int64_t n, std::int64_t k_max,
                                                   std::int64_t labels, GlinerOptions const& o) {
  return gliner_greedy(gliner_span_candidates(logits, n, k_max, labels, o), o);
}

// Token-level models' candidates, in GLiNER's candidate order (start, label, end): logits (n C, 3) = start,
// end, inside for word w and label c at row w C + c.
inline std::vector<GlinerSpan> gliner_token_candidates(std::vector<float> const& logits, std::int64_t n,
                                                       std::int64_t labels, GlinerOptions const& o) {
  auto const threshold = static_cast<float>(o.threshold);
  auto const prob = [&](std::int64_t w, std::int64_t c, int which) {
    return gliner_sigmoid(logits[static_cast<std::size_t>((w * labels + c) * 3 + which)]);
  };
  std::vector<std::pair<std::int64_t, std::int64_t>> starts;
  std::vector<std::pair<std::int64_t, std::int64_t>> ends;
  for (std::int64_t w = 0; w < n; ++w) {
    for (std::int64_t c = 0; c < labels; ++c) {
      if (prob(w, c, 0) > threshold) starts.emplace_back(w, c);
      if (prob(w, c, 1) > threshold) ends.emplace_back(w, c);
    }
  }
  std::vector<GlinerSpan> candidates;
  for (auto const& [s, c] : starts) {
    for (auto const& [e, ce] : ends) {
      if (e < s || ce != c) continue;
      // A float64 compare of the float32 inside probabilities: equal to the threshold passes.
      float score = std::min(prob(s, c, 0), prob(e, c, 1));
      bool ok = true;
      for (std::int64_t w = s; w <= e && ok; ++w) {
        float const inside = prob(w, c, 2);
        ok = !(static_cast<double>(inside) < o.threshold);
        score = std::min(score, inside);
      }
      if (ok) candidates.push_back({s, e, c, static_cast<double>(score)});
    }
  }
  return candidates;
}

// Token-level models: the kept spans.
inline std::vector<GlinerSpan> decode_gliner_tokens(std::vector<float> const& logits, std::int64_t n,
                                                    std::int64_t labels, GlinerOptions const& o) {
  return gliner_greedy(gliner_token_candidates(logits, n, labels, o), o);
}

// Spans over words -> entities with code-point offsets into `text` and the label names.
inline std::vector<GlinerEntity> gliner_entities(std::string_view text, std::vector<GlinerWord> const& words,
                                                 std::vector<GlinerSpan> const& spans,
                                                 std::vector<std::string> const& labels) {
  tokenizer::DecodedText const decoded = tokenizer::decode_utf8(text, "GLiNER text");
  std::vector<GlinerEntity> out;
  for (GlinerSpan const& s : spans) {
    GlinerEntity e;
    e.start = words[static_cast<std::size_t>(s.start)].start;
    e.end = words[static_cast<std::size_t>(s.end)].end;
    auto const b = decoded.byte_offsets[static_cast<std::size_t>(e.start)];
    auto const f = decoded.byte_offsets[static_cast<std::size_t>(e.end)];
    e.text = std::string(text.substr(b, f - b));
    e.label = labels[static_cast<std::size_t>(s.label)];
    e.score = s.score;
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace flashdeberta

// Texts longer than GLiNER's max_len words (docs/gliner.md section 11), as GlinerOptions::long_text asks:
//   - kTruncate: GLiNER 0.2.27's behaviour, its first max_len words in one sequence cut at model_max_length.
//   - kWindows: every word, in windows of at most max_len words whose prompt and words fit model_max_length,
//     neighbours sharing window_overlap words. Each window is its own encoder input; a span seen by several
//     windows is decided by the one where it lies farthest from a cut edge, and GLiNER's greedy decoding then
//     runs once over the merged candidates, so the output follows the rules of one pass.
//   - kSinglePass: every word in one sequence, no max_len and no model_max_length cut (our attention's memory
//     is linear in the length; DeBERTa's bucketed relative positions define any length). GLiNER never sees
//     such inputs, so its results differ from GLiNER's on long texts.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/gliner/gliner_config.hpp"
#include "flashdeberta/gliner/gliner_decoding.hpp"
#include "flashdeberta/gliner/gliner_inputs.hpp"
#include "flashdeberta/gliner/word_splitter.hpp"
#include "flashdeberta/tokenizer/tokenizer.hpp"

namespace flashdeberta {

inline constexpr char const* kGlinerLongTextValues = "truncate, windows or single_pass";

inline char const* gliner_long_text_name(GlinerLongText mode) {
  switch (mode) {
    case GlinerLongText::kWindows:
      return "windows";
    case GlinerLongText::kSinglePass:
      return "single_pass";
    case GlinerLongText::kTruncate:
      break;
  }
  return "truncate";
}

// "truncate", "windows", "single_pass" (or "single-pass", the CLI's spelling); nullopt for anything else.
inline std::optional<GlinerLongText> parse_gliner_long_text(std::string_view name) {
  if (name == "truncate") return GlinerLongText::kTruncate;
  if (name == "windows") return GlinerLongText::kWindows;
  if (name == "single_pass" || name == "single-pass") return GlinerLongText::kSinglePass;
  return std::nullopt;
}

// The words neighbouring windows share: options.window_overlap, or max_len / 4.
inline std::int64_t gliner_window_overlap(GlinerOptions const& o, GlinerConfig const& c) {
  return o.window_overlap.value_or(c.max_len / 4);
}

// What is wrong with the long-text options for `config`, naming the option and what it takes; empty if nothing.
inline std::string gliner_long_text_problem(GlinerOptions const& o, GlinerConfig const& c) {
  if (!o.window_overlap) return {};
  if (o.long_text != GlinerLongText::kWindows) {
    return "window_overlap applies to long_text windows only (long_text is " +
           std::string(gliner_long_text_name(o.long_text)) + ")";
  }
  if (*o.window_overlap < 0 || *o.window_overlap >= c.max_len) {
    return "window_overlap " + std::to_string(*o.window_overlap) + " is outside [0, " + std::to_string(c.max_len - 1) +
           "] (it must be less than the model's max_len, " + std::to_string(c.max_len) + " words)";
  }
  return {};
}

// Text words first .. first + count - 1, encoded as one sequence.
struct GlinerWindow {
  std::int64_t first = 0;
  std::int64_t count = 0;
  std::int64_t last() const { return first + count - 1; }
};

// Windows over n words of word_tokens[w] tokens each (n >= 1): each window starts where its predecessor's
// last `overlap` words start (at most half the predecessor, so windows always advance), then takes words
// while it holds at most max_words of them and prompt_tokens plus theirs fit `room` (a window holds at least
// one word). Ordered by first; first strictly and last() weakly increase.
inline std::vector<GlinerWindow> plan_gliner_windows(std::span<std::int64_t const> word_tokens,
                                                     std::int64_t prompt_tokens, std::optional<std::int64_t> room,
                                                     std::int64_t max_words, std::int64_t overlap) {
  auto const n = static_cast<std::int64_t>(word_tokens.size());
  std::vector<GlinerWindow> windows;
  std::int64_t first = 0;
  while (first < n) {
    std::int64_t count = 1;
    std::int64_t tokens = prompt_tokens + word_tokens[static_cast<std::size_t>(first)];
    while (first + count < n && count < max_words) {
      std::int64_t const next = word_tokens[static_cast<std::size_t>(first + count)];
      if (room && tokens + next > *room) break;
      tokens += next;
      ++count;
    }
    windows.push_back({first, count});
    if (first + count == n) break;
    first += count - std::min(overlap, count / 2);
  }
  return windows;
}

// One text's plan: the words its inputs read and the windows over them (one window, all of `words`, except
// under kWindows).
struct GlinerTextPlan {
  std::vector<GlinerWord> words;      // (n) the first max_len words under kTruncate, else all of them
  std::vector<GlinerWindow> windows;  // one encoder input each
};

// `labels` deduplicated and non-empty; `text` not blank. An Error names a bad window_overlap.
inline GlinerTextPlan plan_gliner_text(tokenizer::Tokenizer const& tok, GlinerConfig const& config,
                                       std::string_view text, std::vector<std::string> const& labels,
                                       GlinerOptions const& options) {
  std::string const problem = gliner_long_text_problem(options, config);
  FLASHDEBERTA_REQUIRE(problem.empty(), "GLiNER: " << problem);
  GlinerTextPlan plan;
  bool const truncate = options.long_text == GlinerLongText::kTruncate;
  plan.words = split_gliner_words(text, truncate ? config.max_len : -1);
  auto const n = static_cast<std::int64_t>(plan.words.size());
  if (options.long_text != GlinerLongText::kWindows || n == 0) {
    plan.windows.push_back({0, n});
    return plan;
  }
  // The tokens each word gives alone, as prepare_gliner_words_input tokenizes them (is_split_into_words).
  std::optional<std::int64_t> room;
  if (auto const max_length = tok.model_max_length()) room = std::max<std::int64_t>(*max_length - 2, 0);
  std::size_t const cap = room ? static_cast<std::size_t>(*room) : std::numeric_limits<std::size_t>::max();
  auto const count = [&](std::string const& word) {
    return static_cast<std::int64_t>(tok.tokenize(word, "GLiNER word", cap).size());
  };
  std::int64_t prompt_tokens = count(config.sep_token);
  for (auto const& label : labels) prompt_tokens += count(config.ent_token) + count(label);
  std::vector<std::int64_t> word_tokens;
  word_tokens.reserve(plan.words.size());
  for (auto const& w : plan.words) word_tokens.push_back(count(w.text));
  plan.windows =
      plan_gliner_windows(word_tokens, prompt_tokens, room, config.max_len, gliner_window_overlap(options, config));
  return plan;
}

// The encoder input of each of the plan's windows, appended to `inputs`; their words keep the text's offsets.
inline void append_gliner_inputs(tokenizer::Tokenizer const& tok, GlinerConfig const& config,
                                 GlinerTextPlan const& plan, std::vector<std::string> const& labels,
                                 GlinerOptions const& options, std::vector<GlinerInput>& inputs) {
  bool const cut = options.long_text != GlinerLongText::kSinglePass;
  for (GlinerWindow const& w : plan.windows) {
    auto const begin = plan.words.begin() + w.first;
    inputs.push_back(
        prepare_gliner_words_input(tok, config, std::vector<GlinerWord>(begin, begin + w.count), labels, cut));
  }
}

namespace detail {

// How far words start .. end lie from the nearest edge of `w` that cuts the text (a window edge at the
// text's own start or end is no cut: it loses no context).
inline std::int64_t gliner_edge_margin(GlinerWindow const& w, std::int64_t n, std::int64_t start, std::int64_t end) {
  std::int64_t const none = std::numeric_limits<std::int64_t>::max();
  std::int64_t const left = w.first == 0 ? none : start - w.first;
  std::int64_t const right = w.last() == n - 1 ? none : w.last() - end;
  return std::min(left, right);
}

// The window that decides the span start .. end, found by window `from`: among the windows holding the whole
// span (neighbours of `from`, since first and last() increase), the one where it lies farthest from a cut
// edge; the earlier one on a tie.
inline std::size_t gliner_deciding_window(std::span<GlinerWindow const> windows, std::int64_t n, std::size_t from,
                                          std::int64_t start, std::int64_t end) {
  std::size_t best = from;
  std::int64_t best_margin = gliner_edge_margin(windows[from], n, start, end);
  for (std::size_t j = from; j-- > 0 && windows[j].last() >= end;) {
    std::int64_t const m = gliner_edge_margin(windows[j], n, start, end);
    if (m >= best_margin) best = j, best_margin = m;
  }
  for (std::size_t j = from + 1; j < windows.size() && windows[j].first <= start; ++j) {
    std::int64_t const m = gliner_edge_margin(windows[j], n, start, end);
    if (m > best_margin) best = j, best_margin = m;
  }
  return best;
}

}  // namespace detail

// The text's candidates from each window's (in window word indices): each span kept from the window that
// decides it (so a span two windows find counts once, with that window's score, and a span its deciding
// window rejects stays rejected), moved to text word indices and put in the candidate order one pass would
// give: (start, end, label) for span models, (start, label, end) for token-level ones.
inline std::vector<GlinerSpan> merge_gliner_windows(std::span<GlinerWindow const> windows, std::int64_t n,
                                                    std::span<std::vector<GlinerSpan> const> window_candidates,
                                                    bool token_level) {
  FLASHDEBERTA_REQUIRE(window_candidates.size() == windows.size(), "GLiNER: " << window_candidates.size()
                                                                              << " candidate lists for "
                                                                              << windows.size() << " windows");
  std::vector<GlinerSpan> merged;
  for (std::size_t w = 0; w < windows.size(); ++w) {
    for (GlinerSpan span : window_candidates[w]) {
      span.start += windows[w].first;
      span.end += windows[w].first;
      if (detail::gliner_deciding_window(windows, n, w, span.start, span.end) == w) merged.push_back(span);
    }
  }
  auto const key = [token_level](GlinerSpan const& s) {
    return token_level ? std::array<std::int64_t, 3>{s.start, s.label, s.end}
                       : std::array<std::int64_t, 3>{s.start, s.end, s.label};
  };
  std::sort(merged.begin(), merged.end(), [&](GlinerSpan const& a, GlinerSpan const& b) { return key(a) < key(b); });
  return merged;
}

// One text's entities from the logits of its windows (each with .values, .words, .labels, as GlinerLogits):
// candidates per window, merged, then GLiNER's greedy search over them all.
template <class Logits>
std::vector<GlinerEntity> gliner_text_entities(GlinerConfig const& config, std::string_view text,
                                               GlinerTextPlan const& plan, std::span<Logits const> logits,
                                               std::vector<std::string> const& labels, GlinerOptions const& options) {
  std::vector<std::vector<GlinerSpan>> candidates;
  for (Logits const& l : logits) {
    candidates.push_back(config.token_level()
                             ? gliner_token_candidates(l.values, l.words, l.labels, options)
                             : gliner_span_candidates(l.values, l.words, config.max_width, l.labels, options));
  }
  auto const n = static_cast<std::int64_t>(plan.words.size());
  std::vector<GlinerSpan> const spans =
      gliner_greedy(merge_gliner_windows(plan.windows, n, candidates, config.token_level()), options);
  return gliner_entities(text, plan.words, spans, labels);
}

}  // namespace flashdeberta

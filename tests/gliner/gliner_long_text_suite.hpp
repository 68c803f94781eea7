// GLiNER's long-text options (docs/gliner.md section 11), written once for any policy: the window planner and
// merge rule on made-up inputs; windows and single_pass equal truncate on every fixture input that fits
// max_len and model_max_length; on a fixture text repeated past max_len, windows finds the first copy's
// entity in every copy while truncate stops at max_len words, and single_pass reads past max_len; windows
// stay under model_max_length; a batch equals its texts alone; bad options are refused naming them.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "flashdeberta/gliner/gliner.hpp"
#include "gliner_suite.hpp"

namespace flashdeberta::testing {

inline std::vector<std::pair<std::int64_t, std::int64_t>> window_ranges(std::vector<GlinerWindow> const& windows) {
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (auto const& w : windows) out.emplace_back(w.first, w.last());
  return out;
}

using Ranges = std::vector<std::pair<std::int64_t, std::int64_t>>;

inline void run_gliner_window_planning() {
  std::vector<std::int64_t> const ten(10, 1);
  CHECK(window_ranges(plan_gliner_windows(ten, 0, std::nullopt, 4, 1)) == Ranges{{0, 3}, {3, 6}, {6, 9}});
  // An overlap above half a window shrinks to half, so windows advance.
  CHECK(window_ranges(plan_gliner_windows(ten, 0, std::nullopt, 4, 3)) == Ranges{{0, 3}, {2, 5}, {4, 7}, {6, 9}});
  CHECK(window_ranges(plan_gliner_windows(ten, 0, std::nullopt, 10, 3)) == Ranges{{0, 9}});
  // Tokens: the prompt (2) and the words fit room 6; a word alone over it still gets a window.
  std::vector<std::int64_t> const tokens{1, 1, 5, 1, 1};
  CHECK(window_ranges(plan_gliner_windows(tokens, 2, 6, 10, 0)) == Ranges{{0, 1}, {2, 2}, {3, 4}});
  CHECK(window_ranges(plan_gliner_windows(tokens, 2, std::nullopt, 10, 0)) == Ranges{{0, 4}});
}

inline void run_gliner_window_merge() {
  // Windows over words 0..5 and 3..8 of 9 words (overlap 3).
  std::vector<GlinerWindow> const windows{{0, 6}, {3, 6}};
  std::vector<std::vector<GlinerSpan>> const found{
      {{3, 3, 0, 0.9}, {4, 4, 0, 0.5}, {5, 5, 0, 0.8}, {4, 5, 1, 0.95}},  // window 0, its word indices
      {{0, 0, 0, 0.7}, {1, 1, 0, 0.4}, {2, 2, 0, 0.6}}};                  // window 1: text words 3, 4, 5
  std::vector<GlinerSpan> const merged = merge_gliner_windows(windows, 9, found, false);
  // Word 3 lies 2 words from window 0's cut, 0 from window 1's: window 0 decides; word 4 is a tie (1 and 1):
  // the earlier window; word 5 and span 4..5 belong to window 1, which does not find 4..5.
  REQUIRE(merged.size() == 3);
  CHECK((merged[0].start == 3 && merged[0].end == 3 && merged[0].score == 0.9));
  CHECK((merged[1].start == 4 && merged[1].end == 4 && merged[1].score == 0.5));
  CHECK((merged[2].start == 5 && merged[2].end == 5 && merged[2].score == 0.6));
  // Candidate order of one pass: (start, end, label) for spans, (start, label, end) for token-level.
  std::vector<GlinerWindow> const one{{0, 4}};
  std::vector<std::vector<GlinerSpan>> const unordered{{{0, 2, 0, 0.5}, {0, 1, 1, 0.5}, {0, 1, 0, 0.5}}};
  auto const order = [](std::vector<GlinerSpan> const& spans) {
    std::vector<std::pair<std::int64_t, std::int64_t>> out;
    for (auto const& s : spans) out.emplace_back(s.end, s.label);
    return out;
  };
  CHECK(order(merge_gliner_windows(one, 4, unordered, false)) == Ranges{{1, 0}, {1, 1}, {2, 0}});
  CHECK(order(merge_gliner_windows(one, 4, unordered, true)) == Ranges{{1, 0}, {2, 0}, {1, 1}});
}

inline void run_gliner_long_text_option_checks() {
  CHECK(parse_gliner_long_text("truncate") == GlinerLongText::kTruncate);
  CHECK(parse_gliner_long_text("windows") == GlinerLongText::kWindows);
  CHECK(parse_gliner_long_text("single_pass") == GlinerLongText::kSinglePass);
  CHECK(parse_gliner_long_text("single-pass") == GlinerLongText::kSinglePass);
  CHECK(!parse_gliner_long_text("window").has_value());
  CHECK(!parse_gliner_long_text("").has_value());
  GlinerConfig config;
  config.max_len = 64;
  CHECK(gliner_long_text_problem({.long_text = GlinerLongText::kWindows, .window_overlap = 63}, config).empty());
  CHECK(gliner_long_text_problem({.long_text = GlinerLongText::kWindows}, config).empty());
  CHECK(gliner_window_overlap({.long_text = GlinerLongText::kWindows}, config) == 16);
  std::string const over =
      gliner_long_text_problem({.long_text = GlinerLongText::kWindows, .window_overlap = 64}, config);
  CHECK(over.find("window_overlap 64 is outside [0, 63]") != std::string::npos);
  CHECK(!gliner_long_text_problem({.long_text = GlinerLongText::kWindows, .window_overlap = -1}, config).empty());
  std::string const where = gliner_long_text_problem({.window_overlap = 4}, config);
  CHECK(where.find("window_overlap applies to long_text windows only (long_text is truncate)") != std::string::npos);
}

inline bool same_entities(std::vector<GlinerEntity> const& a, std::vector<GlinerEntity> const& b, double tolerance) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].start != b[i].start || a[i].end != b[i].end || a[i].label != b[i].label || a[i].text != b[i].text ||
        std::abs(a[i].score - b[i].score) > tolerance)
      return false;
  }
  return true;
}

// Every entity's offsets lie on word boundaries of `text` and its text is that slice.
inline void check_offsets(std::string const& text, std::vector<GlinerEntity> const& entities) {
  std::vector<GlinerWord> const words = split_gliner_words(text);
  tokenizer::DecodedText const decoded = tokenizer::decode_utf8(text, "text");
  for (GlinerEntity const& e : entities) {
    INFO("entity " << e.start << ".." << e.end << " '" << e.text << "'");
    bool starts = false;
    bool ends = false;
    for (auto const& w : words) starts = starts || w.start == e.start, ends = ends || w.end == e.end;
    CHECK(starts);
    CHECK(ends);
    REQUIRE(e.start < e.end);
    REQUIRE(static_cast<std::size_t>(e.end) < decoded.byte_offsets.size());
    auto const b = decoded.byte_offsets[static_cast<std::size_t>(e.start)];
    CHECK(e.text == text.substr(b, decoded.byte_offsets[static_cast<std::size_t>(e.end)] - b));
  }
}

// windows and single_pass give exactly truncate's entities on every fixture text that fits in one window.
template <ExecutionPolicy P>
void run_gliner_long_text_short_texts(P const& policy) {
  int compared = 0;
  for (auto const& dir : gliner_cases()) {
    INFO("case " << dir.filename().string());
    io::Json const expected = read_json_file(dir / "expected.json");
    GLiNER<P> const model = GLiNER<P>::load(policy, dir);
    for (io::Json const& rec : expected["inputs"]) {
      if (rec["api"] != "predict_entities") continue;
      INFO("input " << rec["name"].get<std::string>());
      std::string const text = rec["per_text"][0]["text"].get<std::string>();
      std::vector<std::string> const labels = dedup_gliner_labels(string_list(rec["labels"]));
      GlinerInput const in = model.prepare(text, labels);
      std::int64_t const encoded = *std::max_element(in.words_mask.begin(), in.words_mask.end());
      if (static_cast<std::int64_t>(split_gliner_words(text).size()) > model.config().max_len ||
          encoded != in.num_words())
        continue;  // longer than max_len words or cut at model_max_length: not one window
      GlinerOptions o{rec["threshold"].get<double>(), rec["flat_ner"].get<bool>(), rec["multi_label"].get<bool>()};
      std::vector<GlinerEntity> const truncated = model.predict_entities(text, labels, o);
      o.long_text = GlinerLongText::kWindows;
      CHECK(same_entities(model.predict_entities(text, labels, o), truncated, 0.0));
      o.long_text = GlinerLongText::kSinglePass;
      CHECK(same_entities(model.predict_entities(text, labels, o), truncated, 0.0));
      ++compared;
    }
  }
  CHECK(compared >= 40);
}

inline std::string repeat_text(std::string const& text, int copies) {
  std::string out = text;
  for (int r = 1; r < copies; ++r) out += " " + text;
  return out;
}

// span_markerV0 (max_len 64): "The European Space Agency ..." (14 words, 80 code points) 8 times, 112 words.
template <ExecutionPolicy P>
void run_gliner_long_text_repeats(P const& policy) {
  std::filesystem::path const dir = gliner_fixture_dir() / "span_markerV0";
  GLiNER<P> const model = GLiNER<P>::load(policy, dir);
  REQUIRE(model.config().max_len == 64);
  std::string const base = "The European Space Agency launched the Rosetta probe from Kourou in March 2004 .";
  std::vector<std::string> const labels{"organization", "location", "date"};
  std::vector<GlinerEntity> const alone = model.predict_entities(base, labels, {.threshold = 0.5});
  REQUIRE(!alone.empty());
  GlinerEntity const top =
      *std::max_element(alone.begin(), alone.end(), [](auto const& a, auto const& b) { return a.score < b.score; });
  std::int64_t const shift = 81;  // code points of a copy and its space
  int const copies = 8;
  std::string const text = repeat_text(base, copies);
  std::int64_t const cut = split_gliner_words(text)[64].start;  // where truncate stops reading
  auto const find = [&](std::vector<GlinerEntity> const& entities, int r) -> GlinerEntity const* {
    for (auto const& e : entities)
      if (e.start == top.start + r * shift && e.end == top.end + r * shift && e.label == top.label) return &e;
    return nullptr;
  };

  std::vector<GlinerEntity> const truncated = model.predict_entities(text, labels, {.threshold = 0.5});
  check_offsets(text, truncated);
  for (auto const& e : truncated) CHECK(e.end <= cut);
  CHECK(find(truncated, 0) != nullptr);
  CHECK(find(truncated, copies - 1) == nullptr);

  GlinerOptions const windows{.threshold = 0.5, .long_text = GlinerLongText::kWindows};
  std::vector<GlinerEntity> const found = model.predict_entities(text, labels, windows);
  check_offsets(text, found);
  for (int r = 0; r < copies; ++r) {
    INFO("copy " << r << " of '" << top.text << "' (" << top.label << ", " << top.score << ")");
    GlinerEntity const* e = find(found, r);
    REQUIRE(e != nullptr);
    CHECK(e->text == top.text);
    CHECK(std::abs(e->score - top.score) <= 0.01);
  }
  CHECK(found.size() > truncated.size());

  GlinerOptions const single{.threshold = 0.5, .long_text = GlinerLongText::kSinglePass};
  std::vector<GlinerEntity> const whole = model.predict_entities(text, labels, single);
  check_offsets(text, whole);
  CHECK(std::any_of(whole.begin(), whole.end(), [&](auto const& e) { return e.start >= cut; }));

  // A batch (a long text, a blank one, a short one) gives each text's own result, windows and all.
  std::vector<std::string> const batch{text, "  ", base};
  auto const results = model.predict_entities(batch, labels, windows);
  CHECK(same_entities(results[0], found, kGlinerScoreTolerance));
  CHECK(results[1].empty());
  CHECK(same_entities(results[2], alone, kGlinerScoreTolerance));

  GlinerOptions bad = windows;
  bad.window_overlap = 64;
  CHECK_THROWS_WITH_AS(model.predict_entities(text, labels, bad), doctest::Contains("window_overlap 64"), Error);
}

// token_level (max_len 384): 26 copies of a 17-word text; truncate reads 384 words, windows all 442.
template <ExecutionPolicy P>
void run_gliner_long_text_token_level(P const& policy) {
  GLiNER<P> const model = GLiNER<P>::load(policy, gliner_fixture_dir() / "token_level");
  std::string const text =
      repeat_text("The quick brown fox met Anna Smith in Berlin on Monday near the old river bank .", 26);
  std::vector<std::string> const labels{"person", "location", "organization", "date"};
  std::int64_t const cut = split_gliner_words(text)[static_cast<std::size_t>(model.config().max_len)].start;
  GlinerOptions o{.threshold = 0.675417};
  std::vector<GlinerEntity> const truncated = model.predict_entities(text, labels, o);
  o.long_text = GlinerLongText::kWindows;
  std::vector<GlinerEntity> const found = model.predict_entities(text, labels, o);
  check_offsets(text, found);
  CHECK(std::none_of(truncated.begin(), truncated.end(), [&](auto const& e) { return e.end > cut; }));
  CHECK(std::any_of(found.begin(), found.end(), [&](auto const& e) { return e.start >= cut; }));
}

// span_token_truncation (model_max_length 40): truncate encodes 3 of 28 words; every window fits the limit.
template <ExecutionPolicy P>
void run_gliner_long_text_token_limit(P const& policy) {
  GLiNER<P> const model = GLiNER<P>::load(policy, gliner_fixture_dir() / "span_token_truncation");
  io::Json const expected = read_json_file(gliner_fixture_dir() / "span_token_truncation" / "expected.json");
  io::Json const& rec = expected["inputs"][0];
  std::string const text = rec["per_text"][0]["text"].get<std::string>();
  std::vector<std::string> const labels = dedup_gliner_labels(string_list(rec["labels"]));
  GlinerOptions const o{.threshold = 0.5, .long_text = GlinerLongText::kWindows};
  GlinerTextPlan const plan = plan_gliner_text(model.tokenizer(), model.config(), text, labels, o);
  std::vector<GlinerInput> inputs;
  append_gliner_inputs(model.tokenizer(), model.config(), plan, labels, o, inputs);
  REQUIRE(inputs.size() > 1);
  CHECK(plan.windows.front().first == 0);
  CHECK(plan.windows.back().last() == static_cast<std::int64_t>(plan.words.size()) - 1);
  for (std::size_t w = 0; w < inputs.size(); ++w) {
    INFO("window " << w);
    CHECK(inputs[w].input_ids.size() <= 40);
    CHECK(*std::max_element(inputs[w].words_mask.begin(), inputs[w].words_mask.end()) == inputs[w].num_words());
    if (w > 0) CHECK(plan.windows[w].first <= plan.windows[w - 1].last() + 1);
  }
  check_offsets(text, model.predict_entities(text, labels, o));
}

// span_token_truncation (model_max_length 40): labels whose prompt fills the 38 tokens of the window leave
// the text no token; GLiNER would score its words from nothing (0.9997), so it is refused in every mode,
// naming the prompt's tokens and the window.
template <ExecutionPolicy P>
void run_gliner_prompt_fills_window(P const& policy) {
  GLiNER<P> const model = GLiNER<P>::load(policy, gliner_fixture_dir() / "span_token_truncation");
  std::vector<std::string> labels;
  for (int i = 0; i < 20; ++i) labels.push_back("label" + std::to_string(i));
  std::string const text = "Ada Lovelace worked in London.";
  for (GlinerLongText mode : {GlinerLongText::kTruncate, GlinerLongText::kWindows}) {
    GlinerOptions const o{.threshold = 0.5, .long_text = mode};
    CHECK_THROWS_WITH_AS(
        model.predict_entities(text, labels, o),
        doctest::Contains("GLiNER: the labels' prompt (20 labels, each after <<ENT>>, then <<SEP>>) "
                          "takes more than 38 tokens, the whole window of 38 tokens "
                          "(model_max_length 40 less [CLS] and [SEP]), which leaves the text no token"),
        Error);
  }
  // Two labels leave room: the text is read.
  CHECK_NOTHROW(model.predict_entities(text, {labels[0], labels[1]}, GlinerOptions{.threshold = 0.5}));
}

}  // namespace flashdeberta::testing

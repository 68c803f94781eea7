// GLiNER's layers run over all texts of a call together (gliner_model.hpp): a batch of texts of different lengths,
// each with its own label set, must give each text what it gets alone. Over every fixture model (every span mode,
// the BiLSTM of one and two layers, token-level, fuse_layers), the texts of its expected.json in one call, text i
// with its own rotation and number of labels.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gliner_suite.hpp"

namespace flashdeberta::testing {

struct GlinerBatchCase {
  std::vector<std::string> texts;
  std::vector<std::vector<std::string>> labels;
};

// The fixture's texts (each once) and, for text i, 1 + i % L of its L distinct labels, starting at label i.
inline GlinerBatchCase gliner_batch_case(io::Json const& expected) {
  GlinerBatchCase c;
  std::vector<std::string> all_labels;
  for (io::Json const& rec : expected["inputs"]) {
    for (io::Json const& d : rec["per_text"]) {
      if (!d["valid"].get<bool>()) continue;
      std::string const text = d["text"].get<std::string>();
      if (std::find(c.texts.begin(), c.texts.end(), text) == c.texts.end()) c.texts.push_back(text);
      for (std::string const& label : string_list(d["labels_used"]))
        if (std::find(all_labels.begin(), all_labels.end(), label) == all_labels.end()) all_labels.push_back(label);
    }
  }
  std::size_t const l = all_labels.size();
  for (std::size_t i = 0; i < c.texts.size(); ++i) {
    std::vector<std::string> mine;
    for (std::size_t j = 0; j < 1 + i % l; ++j) mine.push_back(all_labels[(i + j) % l]);
    c.labels.push_back(std::move(mine));
  }
  return c;
}

// logits of all texts in one call equal each text's own call within `tolerance` (0: bit for bit); with
// `entities`, predict_entities of the batch equals each text's own call too (spans and labels exactly, scores
// within `tolerance`).
template <ExecutionPolicy P>
void run_gliner_batch_matches_single(P const& policy, double tolerance, bool entities = true) {
  for (auto const& dir : gliner_cases()) {
    INFO("case " << dir.filename().string());
    GLiNER<P> const model = GLiNER<P>::load(policy, dir);
    GlinerBatchCase const c = gliner_batch_case(read_json_file(dir / "expected.json"));
    REQUIRE(c.texts.size() >= 2);
    std::vector<GlinerInput> inputs;
    for (std::size_t i = 0; i < c.texts.size(); ++i) inputs.push_back(model.prepare(c.texts[i], c.labels[i]));
    std::vector<GlinerLogits> const together = model.logits(inputs);
    REQUIRE(together.size() == inputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      INFO("text " << i << " of " << inputs.size() << ", " << inputs[i].num_words() << " words, " << c.labels[i].size()
                   << " labels");
      GlinerLogits const alone = model.logits({inputs[i]}).front();
      CHECK(together[i].words == alone.words);
      CHECK(together[i].labels == alone.labels);
      REQUIRE(together[i].values.size() == alone.values.size());
      double worst = 0.0;
      bool finite = true;
      for (std::size_t k = 0; k < alone.values.size(); ++k) {
        finite = finite && std::isfinite(together[i].values[k]);
        worst = std::max(worst, std::abs(double(together[i].values[k]) - double(alone.values[k])));
      }
      INFO("largest difference " << worst);
      CHECK(finite);
      CHECK(worst <= tolerance);
    }
    if (!entities) continue;
    auto const batch = model.predict_entities(c.texts, c.labels);
    for (std::size_t i = 0; i < c.texts.size(); ++i) {
      INFO("entities of text " << i);
      auto const alone = model.predict_entities(c.texts[i], c.labels[i]);
      REQUIRE(batch[i].size() == alone.size());
      for (std::size_t e = 0; e < alone.size(); ++e) {
        CHECK(batch[i][e].start == alone[e].start);
        CHECK(batch[i][e].end == alone[e].end);
        CHECK(batch[i][e].label == alone[e].label);
        CHECK(std::abs(batch[i][e].score - alone[e].score) <= tolerance);
      }
    }
  }
}

// The batch of run_gliner_batch_matches_single through a 16-bit policy against the same batch through a float32
// one: every text's logits within `tolerance` of float32's, relative to the largest float32 logit (at least 1).
template <ExecutionPolicy P>
void run_gliner_batch_low_precision(P const& f32, P const& low, double tolerance) {
  for (auto const& dir : gliner_cases()) {
    INFO("case " << dir.filename().string());
    GLiNER<P> const reference = GLiNER<P>::load(f32, dir);
    GLiNER<P> const model = GLiNER<P>::load(low, dir);
    GlinerBatchCase const c = gliner_batch_case(read_json_file(dir / "expected.json"));
    std::vector<GlinerInput> inputs;
    for (std::size_t i = 0; i < c.texts.size(); ++i) inputs.push_back(model.prepare(c.texts[i], c.labels[i]));
    std::vector<GlinerLogits> const expected = reference.logits(inputs);
    std::vector<GlinerLogits> const ours = model.logits(inputs);
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      INFO("text " << i);
      REQUIRE(ours[i].values.size() == expected[i].values.size());
      double scale = 1.0;
      double worst = 0.0;
      for (float v : expected[i].values) scale = std::max(scale, std::abs(double(v)));
      for (std::size_t k = 0; k < ours[i].values.size(); ++k) {
        double const diff = std::abs(double(ours[i].values[k]) - double(expected[i].values[k]));
        worst = std::isfinite(ours[i].values[k]) ? std::max(worst, diff) : INFINITY;
      }
      INFO("largest difference " << worst << ", largest float32 logit " << scale);
      CHECK(worst <= tolerance * scale);
    }
  }
}

}  // namespace flashdeberta::testing

// HF's token-classification pipeline with aggregation_strategy="simple", after the model: each token
// (special tokens left out) takes its highest-scoring label (softmax); neighbours merge into one entity
// while the label's tag stays the same and the next one is not a B- (labels without a B-/I- prefix count
// as I-); groups tagged O are dropped. An entity's score is the mean of its tokens' scores, start/end are
// the first token's start and the last token's end (code points of the text), and word is the group's
// tokens decoded.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/pipelines/scores.hpp"
#include "flashdeberta/tokenizer/encoding.hpp"

namespace flashdeberta::pipelines {

struct TokenPrediction {
  std::size_t token = 0;  // index in the encoding
  std::int64_t label = 0;
  float score = 0.0f;
};

struct Entity {
  std::string entity_group;
  float score = 0.0f;
  std::string word;
  std::int64_t start = 0;  // code points of the text
  std::int64_t end = 0;
  std::vector<std::size_t> tokens;  // indices in the encoding
};

// "B-PER" -> {"B", "PER"}, "I-PER" -> {"I", "PER"}, anything else -> {"I", label} (HF's get_tag).
inline std::pair<std::string_view, std::string_view> entity_tag(std::string_view label) {
  if (label.starts_with("B-")) return {"B", label.substr(2)};
  if (label.starts_with("I-")) return {"I", label.substr(2)};
  return {"I", label};
}

// The argmax label and its softmax score of every token that came from the text (not [CLS], [SEP] or
// padding). `logits`: (encoding size, num_labels) row-major, a row per token of `e`.
inline std::vector<TokenPrediction> token_predictions(tokenizer::Encoding const& e, std::span<float const> logits,
                                                      std::size_t num_labels) {
  FLASHDEBERTA_REQUIRE(num_labels > 0 && logits.size() == e.size() * num_labels,
                       "token classification: " << logits.size() << " logits for " << e.size() << " tokens and "
                                                << num_labels << " labels");
  std::vector<TokenPrediction> out;
  for (std::size_t t = 0; t < e.size(); ++t) {
    if (e.sequence_ids[t] < 0 || (!e.attention_mask.empty() && e.attention_mask[t] == 0)) continue;
    std::vector<float> const p = softmax(logits.subspan(t * num_labels, num_labels));
    std::int64_t const best = top_k(p, 1).front();
    out.push_back({t, best, p[best]});
  }
  return out;
}

// Groups `predictions` into entities. `decode(ids)` gives a group's word (Tokenizer::decode).
template <class Decode>
std::vector<Entity> group_entities_simple(tokenizer::Encoding const& e, std::vector<TokenPrediction> const& predictions,
                                          std::vector<std::string> const& labels, Decode&& decode) {
  std::vector<std::vector<TokenPrediction const*>> groups;
  for (TokenPrediction const& p : predictions) {
    FLASHDEBERTA_REQUIRE(p.label >= 0 && static_cast<std::size_t>(p.label) < labels.size(),
                         "token classification: label " << p.label << " of " << labels.size());
    if (!groups.empty()) {
      auto const [bi, tag] = entity_tag(labels[p.label]);
      auto const last_tag = entity_tag(labels[groups.back().back()->label]).second;
      if (tag == last_tag && bi != "B") {
        groups.back().push_back(&p);
        continue;
      }
    }
    groups.push_back({&p});
  }
  std::vector<Entity> out;
  for (auto const& g : groups) {
    std::string_view const label = labels[g.front()->label];
    std::size_t const dash = label.find('-');
    std::string name(dash == std::string_view::npos ? label : label.substr(dash + 1));  // split("-", 1)[-1]
    if (name == "O") continue;
    Entity entity;
    entity.entity_group = std::move(name);
    double sum = 0.0;
    std::vector<std::int64_t> ids;
    for (TokenPrediction const* p : g) {
      sum += p->score;
      entity.tokens.push_back(p->token);
      ids.push_back(e.input_ids[p->token]);
    }
    entity.score = static_cast<float>(sum / static_cast<double>(g.size()));
    entity.start = e.offsets[g.front()->token].begin;
    entity.end = e.offsets[g.back()->token].end;
    entity.word = decode(std::span<std::int64_t const>(ids));
    out.push_back(std::move(entity));
  }
  return out;
}

}  // namespace flashdeberta::pipelines

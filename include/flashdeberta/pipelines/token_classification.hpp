// HF's token-classification pipeline after the model (TokenClassificationPipeline.postprocess), for every
// aggregation_strategy:
//
//   Each token from the text (not [CLS], [SEP] or padding) becomes a pre-entity: its softmax scores over the
//   labels, its token string (the text it covers for an unknown token), its offsets and whether it continues
//   the word before it (is_subword, below). "none" gives every token's argmax label and score as an entity
//   with its index; "simple" groups those neighbours; "first", "average" and "max" first fuse each word's
//   tokens into one entity (word_aggregation.hpp), then group the words as "simple" groups tokens. A group
//   continues while the label's tag stays the same and the next one is not a B- (labels without a B-/I-
//   prefix count as I-); its entity_group is the first label after its first "-", its score the mean, its
//   word the tokens (or words) joined by the tokenizer's convert_tokens_to_string, start/end the first's
//   start and the last's end (code points of the text). Entities whose label (none) or entity_group (the
//   others) is in ignore_labels (default ["O"]) are dropped.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/pipelines/scores.hpp"
#include "flashdeberta/tokenizer/encoding.hpp"
#include "flashdeberta/tokenizer/unicode.hpp"

namespace flashdeberta::pipelines {

// HF's AggregationStrategy.
enum class Aggregation { kNone, kSimple, kFirst, kAverage, kMax };

inline char const* aggregation_name(Aggregation a) {
  switch (a) {
    case Aggregation::kNone:
      return "none";
    case Aggregation::kSimple:
      return "simple";
    case Aggregation::kFirst:
      return "first";
    case Aggregation::kAverage:
      return "average";
    case Aggregation::kMax:
      return "max";
  }
  return "?";
}

// "none" | "simple" | "first" | "average" | "max" (HF accepts any case: AggregationStrategy[name.upper()]).
inline Aggregation parse_aggregation(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  for (Aggregation a :
       {Aggregation::kNone, Aggregation::kSimple, Aggregation::kFirst, Aggregation::kAverage, Aggregation::kMax}) {
    if (lower == aggregation_name(a)) return a;
  }
  FLASHDEBERTA_FAIL("aggregation_strategy '" << name << "' is not one of none, simple, first, average, max");
}

struct TokenPrediction {
  std::size_t token = 0;  // index in the encoding
  std::int64_t label = 0;
  float score = 0.0f;
  std::vector<float> scores;  // softmax over every label (the word strategies need them all)
};

// A token from the text, ready for aggregation (HF's pre_entity).
struct PreEntity {
  TokenPrediction prediction;
  std::string word;  // the token string, or the text it covers for the unknown token
  std::int64_t start = 0;
  std::int64_t end = 0;
  bool is_subword = false;
};

struct Entity {
  std::string entity_group;  // the label itself for aggregation "none" (HF's "entity")
  float score = 0.0f;
  std::string word;
  std::int64_t start = 0;  // code points of the text
  std::int64_t end = 0;
  std::vector<std::size_t> tokens;   // indices in the encoding
  std::optional<std::size_t> index;  // aggregation "none": the token's index in the encoding (HF's "index")
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
    std::vector<float> p = softmax(logits.subspan(t * num_labels, num_labels));
    std::int64_t const best = top_k(p, 1).front();
    float const score = p[best];
    out.push_back({t, best, score, std::move(p)});
  }
  return out;
}

// HF's gather_pre_entities for the DeBERTa tokenizers. None of them has a continuing_subword_prefix (v2/v3
// are Unigram, v1 byte-level BPE without one), so HF takes its fallback heuristic for words: a token
// continues the word before it unless it starts the text or a space (U+0020) is just before or at its
// start. `text`: the text as code points; `unk_id`: the unknown token's id (-1: none).
inline std::vector<PreEntity> gather_pre_entities(tokenizer::Encoding const& e, std::u32string_view text,
                                                  std::vector<TokenPrediction> predictions, std::int64_t unk_id) {
  std::vector<PreEntity> out;
  out.reserve(predictions.size());
  auto const at = [&](std::int64_t i) { return i >= 0 && static_cast<std::size_t>(i) < text.size() ? text[i] : 0; };
  for (TokenPrediction& p : predictions) {
    PreEntity pre;
    pre.start = e.offsets[p.token].begin;
    pre.end = e.offsets[p.token].end;
    pre.word = e.tokens[p.token];
    pre.is_subword = pre.start > 0 && at(pre.start - 1) != U' ' && at(pre.start) != U' ';
    if (unk_id >= 0 && e.input_ids[p.token] == unk_id) {  // HF: word = sentence[start:end], not a subword
      std::u32string_view const covered = pre.end > pre.start && static_cast<std::size_t>(pre.end) <= text.size()
                                              ? text.substr(pre.start, pre.end - pre.start)
                                              : std::u32string_view();
      pre.word = tokenizer::encode_utf8(covered);
      pre.is_subword = false;
    }
    pre.prediction = std::move(p);
    out.push_back(std::move(pre));
  }
  return out;
}

// Aggregation "none": one entity per token, its label in entity_group and its index set.
inline std::vector<Entity> token_entities(std::vector<PreEntity> const& pre, std::vector<std::string> const& labels) {
  std::vector<Entity> out;
  for (PreEntity const& p : pre) {
    FLASHDEBERTA_REQUIRE(p.prediction.label >= 0 && static_cast<std::size_t>(p.prediction.label) < labels.size(),
                         "token classification: label " << p.prediction.label << " of " << labels.size());
    out.push_back({labels[p.prediction.label],
                   p.prediction.score,
                   p.word,
                   p.start,
                   p.end,
                   {p.prediction.token},
                   p.prediction.token});
  }
  return out;
}

// HF's group_entities over entities whose entity_group holds the full label (tokens for "simple", words for
// the word strategies). `word_of(group)` gives a group's word from its items (std::span<Entity const* const>).
template <class WordOf>
std::vector<Entity> group_entities_by(std::vector<Entity> const& items, WordOf&& word_of) {
  std::vector<std::vector<Entity const*>> groups;
  for (Entity const& item : items) {
    if (!groups.empty()) {
      auto const [bi, tag] = entity_tag(item.entity_group);
      if (tag == entity_tag(groups.back().back()->entity_group).second && bi != "B") {
        groups.back().push_back(&item);
        continue;
      }
    }
    groups.push_back({&item});
  }
  std::vector<Entity> out;
  for (auto const& g : groups) {
    std::string_view const label = g.front()->entity_group;
    std::size_t const dash = label.find('-');
    Entity entity;
    entity.entity_group = std::string(dash == std::string_view::npos ? label : label.substr(dash + 1));
    double sum = 0.0;
    for (Entity const* item : g) {
      sum += item->score;
      entity.tokens.insert(entity.tokens.end(), item->tokens.begin(), item->tokens.end());
    }
    entity.score = static_cast<float>(sum / static_cast<double>(g.size()));
    entity.start = g.front()->start;
    entity.end = g.back()->end;
    entity.word = word_of(std::span<Entity const* const>(g));
    out.push_back(std::move(entity));
  }
  return out;
}

// group_entities_by with HF's word: the items' words joined by `to_string(words)`, the tokenizer's
// convert_tokens_to_string.
template <class ToString>
std::vector<Entity> group_entities(std::vector<Entity> const& items, ToString&& to_string) {
  return group_entities_by(items, [&](std::span<Entity const* const> group) {
    std::vector<std::string> words;
    for (Entity const* item : group) words.push_back(item->word);
    return to_string(std::span<std::string const>(words));
  });
}

// Drops the entities whose entity_group (the label itself for "none") is one of `ignore`.
inline std::vector<Entity> drop_ignored(std::vector<Entity> entities, std::span<std::string const> ignore) {
  std::erase_if(entities, [&](Entity const& e) {
    for (std::string const& label : ignore)
      if (e.entity_group == label) return true;
    return false;
  });
  return entities;
}

// HF's aggregate_overlapping_entities, applied to a text's entities when stride= cut it into more than one
// window (overflow_windows.hpp): in order of start (a stable sort), an entity that starts inside the one kept
// last replaces it when it is longer, or as long with a higher score, and is dropped otherwise.
inline std::vector<Entity> merge_overlapping_entities(std::vector<Entity> entities) {
  if (entities.empty()) return entities;
  std::stable_sort(entities.begin(), entities.end(),
                   [](Entity const& a, Entity const& b) { return a.start < b.start; });
  std::vector<Entity> kept;
  std::size_t previous = 0;
  for (std::size_t i = 0; i < entities.size(); ++i) {  // from the first, as HF's loop: an empty first span stays twice
    Entity const& entity = entities[i];
    Entity const& before = entities[previous];
    if (before.start <= entity.start && entity.start < before.end) {
      std::int64_t const length = entity.end - entity.start;
      std::int64_t const previous_length = before.end - before.start;
      if (length > previous_length || (length == previous_length && entity.score > before.score)) previous = i;
    } else {
      kept.push_back(before);
      previous = i;
    }
  }
  kept.push_back(entities[previous]);
  return kept;
}

// "simple" grouping of `predictions` with each entity's word from `decode(ids)` (Tokenizer::decode of its
// tokens) and the "O" groups dropped: the library's form from before the aggregation strategies.
template <class Decode>
std::vector<Entity> group_entities_simple(tokenizer::Encoding const& e, std::vector<TokenPrediction> const& predictions,
                                          std::vector<std::string> const& labels, Decode&& decode) {
  std::vector<Entity> items;
  for (TokenPrediction const& p : predictions) {
    FLASHDEBERTA_REQUIRE(p.label >= 0 && static_cast<std::size_t>(p.label) < labels.size(),
                         "token classification: label " << p.label << " of " << labels.size());
    items.push_back({labels[p.label], p.score, {}, e.offsets[p.token].begin, e.offsets[p.token].end, {p.token}, {}});
  }
  std::string const ignore[] = {"O"};
  auto groups = group_entities_by(items, [&](std::span<Entity const* const> group) {
    std::vector<std::int64_t> ids;
    for (Entity const* item : group) ids.push_back(e.input_ids[item->tokens.front()]);
    return decode(std::span<std::int64_t const>(ids));
  });
  return drop_ignored(std::move(groups), ignore);
}

}  // namespace flashdeberta::pipelines

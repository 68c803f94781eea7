// HF's token-classification aggregation by words ("first", "average", "max": aggregate_words and
// aggregate_word): consecutive pre-entities form a word while each next one is a subword; a word takes one
// label so that it can never be split between entities:
//   first    the first token's argmax label and its score;
//   max      the argmax label and score of the token whose best score is highest (the first on a tie);
//   average  the argmax of the scores averaged over the word's tokens, and that average.
// Its word is its tokens joined by convert_tokens_to_string, its start the first token's, its end the last's.
// The words are then grouped as "simple" groups tokens (group_entities), and then "simple" and the word
// strategies end alike: a whole-word entity list (entities_of below runs every strategy).
#pragma once

#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/pipelines/token_classification.hpp"

namespace flashdeberta::pipelines {

// One word's pre-entities -> one entity whose entity_group is the chosen full label (for group_entities).
template <class ToString>
Entity aggregate_word(std::span<PreEntity const> word, Aggregation strategy, std::vector<std::string> const& labels,
                      ToString&& to_string) {
  FLASHDEBERTA_REQUIRE(!word.empty(), "token classification: an empty word");
  std::size_t const n = labels.size();
  std::vector<float> scores;
  if (strategy == Aggregation::kFirst) {
    scores = word.front().prediction.scores;
  } else if (strategy == Aggregation::kMax) {
    // Python's max() keeps the first of equal keys; each key is that token's best score.
    PreEntity const* best = &word.front();
    for (PreEntity const& p : word)
      if (p.prediction.score > best->prediction.score) best = &p;
    scores = best->prediction.scores;
  } else {
    FLASHDEBERTA_REQUIRE(strategy == Aggregation::kAverage,
                         "aggregate_word: aggregation_strategy " << aggregation_name(strategy) << " is not by words");
    std::vector<double> sum(n, 0.0);
    for (PreEntity const& p : word)
      for (std::size_t k = 0; k < n; ++k) sum[k] += p.prediction.scores[k];
    scores.resize(n);
    for (std::size_t k = 0; k < n; ++k) scores[k] = static_cast<float>(sum[k] / static_cast<double>(word.size()));
  }
  FLASHDEBERTA_REQUIRE(scores.size() == n,
                       "token classification: " << scores.size() << " scores for " << n << " labels");
  std::int64_t const label = top_k(scores, 1).front();  // numpy's argmax: the first of equal maxima
  Entity entity;
  entity.entity_group = labels[label];
  entity.score = scores[label];
  std::vector<std::string> tokens;
  for (PreEntity const& p : word) {
    tokens.push_back(p.word);
    entity.tokens.push_back(p.prediction.token);
  }
  entity.word = to_string(std::span<std::string const>(tokens));
  entity.start = word.front().start;
  entity.end = word.back().end;
  return entity;
}

// HF's aggregate_words: the words of `pre` (a word runs on over the pre-entities marked is_subword; the
// first one always starts a word), each aggregated by `strategy`.
template <class ToString>
std::vector<Entity> aggregate_words(std::vector<PreEntity> const& pre, Aggregation strategy,
                                    std::vector<std::string> const& labels, ToString&& to_string) {
  std::vector<Entity> out;
  std::span<PreEntity const> const all(pre);
  for (std::size_t first = 0; first < all.size();) {
    std::size_t last = first + 1;
    while (last < all.size() && all[last].is_subword) ++last;
    out.push_back(aggregate_word(all.subspan(first, last - first), strategy, labels, to_string));
    first = last;
  }
  return out;
}

// The entities of one text for any strategy, ignore_labels applied: HF's aggregate + the filter of postprocess.
template <class ToString>
std::vector<Entity> entities_of(std::vector<PreEntity> const& pre, Aggregation strategy,
                                std::vector<std::string> const& labels, std::span<std::string const> ignore_labels,
                                ToString&& to_string) {
  std::vector<Entity> items;
  if (strategy == Aggregation::kNone || strategy == Aggregation::kSimple) {
    items = token_entities(pre, labels);
    if (strategy == Aggregation::kNone) return drop_ignored(std::move(items), ignore_labels);
    for (Entity& e : items) e.index.reset();
  } else {
    items = aggregate_words(pre, strategy, labels, to_string);
  }
  return drop_ignored(group_entities(items, to_string), ignore_labels);
}

}  // namespace flashdeberta::pipelines

// From one text (or a window of its words, docs/gliner.md section 11) and its labels to the encoder's input
// (sections 3.2 to 3.5): the words kept (max_len), the prompt `<<ENT>> l_0 ... <<ENT>> l_{C-1} <<SEP>>`
// followed by the text's words, every word tokenized on its own (HF's is_split_into_words), [CLS] ... [SEP],
// truncation to the tokenizer's model_max_length keeping the final [SEP], the words mask (first subword of
// each text word) and the label positions (the <<ENT>> tokens, or the token after each with embed_ent_token
// false).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "flashdeberta/gliner/gliner_config.hpp"
#include "flashdeberta/gliner/word_splitter.hpp"
#include "flashdeberta/tokenizer/tokenizer.hpp"

namespace flashdeberta {

struct GlinerInput {
  std::vector<GlinerWord> words;           // the text's words kept (at most max_len)
  std::vector<std::int64_t> input_ids;     // (L) [CLS] prompt text [SEP], truncated
  std::vector<std::int64_t> words_mask;    // (L) 1-based word slot at a word's first token, else 0
  std::vector<std::int64_t> label_tokens;  // (C) token index of each label's vector
  std::int64_t num_words() const { return static_cast<std::int64_t>(words.size()); }
};

// Labels as GLiNER uses them: duplicates dropped, first occurrences kept (dict.fromkeys).
inline std::vector<std::string> dedup_gliner_labels(std::vector<std::string> const& labels) {
  std::vector<std::string> out;
  for (auto const& label : labels) {
    bool seen = false;
    for (auto const& o : out) seen = seen || o == label;
    if (!seen) out.push_back(label);
  }
  return out;
}

// The input of `words` (a text's words, or a window of them, with their offsets in the text). `labels`
// already deduplicated and non-empty. cut_at_model_max_length false keeps every token (our single-pass mode;
// GLiNER always cuts).
inline GlinerInput prepare_gliner_words_input(tokenizer::Tokenizer const& tok, GlinerConfig const& config,
                                              std::vector<GlinerWord> words, std::vector<std::string> const& labels,
                                              bool cut_at_model_max_length = true) {
  FLASHDEBERTA_REQUIRE(!labels.empty(), "GLiNER: no labels given");
  GlinerInput in;
  in.words = std::move(words);
  auto const num_labels = static_cast<std::int64_t>(labels.size());
  std::int64_t const prompt_words = 2 * num_labels + 1;

  std::vector<std::string> all_words;
  all_words.reserve(static_cast<std::size_t>(prompt_words) + in.words.size());
  for (auto const& label : labels) {
    all_words.push_back(config.ent_token);
    all_words.push_back(label);
  }
  all_words.push_back(config.sep_token);
  for (auto const& w : in.words) all_words.push_back(w.text);

  // Tokens of every word, with the word's index (HF's word_ids).
  std::optional<std::int64_t> const max_length =
      cut_at_model_max_length ? tok.model_max_length() : std::optional<std::int64_t>();
  std::size_t const room =
      max_length ? static_cast<std::size_t>(std::max<std::int64_t>(*max_length - 2, 0)) : static_cast<std::size_t>(-1);
  std::vector<std::int64_t> ids;
  std::vector<std::int64_t> word_ids;
  for (std::size_t w = 0; w < all_words.size() && ids.size() < room; ++w) {
    tokenizer::TokenList const t = tok.tokenize(all_words[w], "GLiNER word", room - ids.size());
    for (std::int64_t id : t.ids) {
      if (ids.size() >= room) break;  // truncation=True: the final [SEP] stays
      ids.push_back(id);
      word_ids.push_back(static_cast<std::int64_t>(w));
    }
  }

  // A prompt that fills the window leaves the text no token. GLiNER 0.2.27 (truncation=True) would still
  // score the text's words, from empty word embeddings, and return entities with confident scores; refused.
  bool const text_kept = !word_ids.empty() && word_ids.back() >= prompt_words;
  if (max_length && ids.size() >= room && !in.words.empty() && !text_kept) {
    std::size_t prompt_tokens = 0;  // counted up to room + 1: "more than the window" is all that matters
    for (std::int64_t w = 0; w < prompt_words && prompt_tokens <= room; ++w) {
      prompt_tokens += tok.tokenize(all_words[static_cast<std::size_t>(w)], "GLiNER word", room - prompt_tokens).size();
    }
    FLASHDEBERTA_FAIL("GLiNER: the labels' prompt ("
                      << num_labels << " labels, each after " << config.ent_token << ", then " << config.sep_token
                      << ") takes " << (prompt_tokens > room ? "more than " : "") << std::min(prompt_tokens, room)
                      << " tokens, the whole window of " << room << " tokens (model_max_length " << *max_length
                      << " less [CLS] and [SEP]), which leaves the text no token; "
                         "send fewer or shorter labels");
  }

  tokenizer::SpecialIds const& specials = tok.special_ids();
  in.input_ids.push_back(specials.cls);
  in.words_mask.push_back(0);
  std::int64_t count = 0;  // distinct word ids met (prepare_word_mask's counter)
  std::int64_t previous = -1;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    in.input_ids.push_back(ids[i]);
    std::int64_t slot = 0;
    if (word_ids[i] != previous) {
      ++count;
      if (count > prompt_words) slot = count - prompt_words;
    }
    previous = word_ids[i];
    in.words_mask.push_back(slot);
  }
  in.input_ids.push_back(specials.sep);
  in.words_mask.push_back(0);

  std::int64_t const offset = config.embed_ent_token ? 0 : 1;
  for (std::size_t i = 0; i < in.input_ids.size(); ++i) {
    if (in.input_ids[i] == config.class_token_index) in.label_tokens.push_back(static_cast<std::int64_t>(i) + offset);
  }
  FLASHDEBERTA_REQUIRE(static_cast<std::int64_t>(in.label_tokens.size()) == num_labels,
                       "GLiNER: the prompt of " << num_labels << " labels holds " << in.label_tokens.size() << " '"
                                                << config.ent_token << "' tokens after truncation to "
                                                << (max_length ? *max_length : 0)
                                                << " tokens (labels cut off, or a label containing the marker)");
  for (std::int64_t t : in.label_tokens) {
    FLASHDEBERTA_REQUIRE(t < static_cast<std::int64_t>(in.input_ids.size()),
                         "GLiNER: a label's first token lies past the truncated sequence");
  }
  return in;
}

// GLiNER's input of one text: its first max_len words. `text` not blank (gliner_blank_text).
inline GlinerInput prepare_gliner_input(tokenizer::Tokenizer const& tok, GlinerConfig const& config,
                                        std::string_view text, std::vector<std::string> const& labels) {
  return prepare_gliner_words_input(tok, config, split_gliner_words(text, config.max_len), labels);
}

}  // namespace flashdeberta

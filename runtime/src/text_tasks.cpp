// The tasks over one text per forward row: fill-mask, text classification (texts and pairs) and token
// classification (question answering, which may take several windows per input, is answer_task.cpp). Each encodes its
// inputs with the run's names and bounds, runs them through the run's HeadRunner and finishes the head's rows with the
// library's pipelines/ functions.
#include <algorithm>
#include <string>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/pipelines/overflow_windows.hpp"
#include "flashdeberta/runtime/pipeline.hpp"
#include "flashdeberta/tokenizer/unicode.hpp"

namespace flashdeberta::runtime {

namespace {

// Refuses a text whose fill-mask answer would write more than kMaxFillMaskAnswerTokens tokens: `masks`
// masks of `predictions` predictions each, every one the text's `tokens` tokens decoded.
void require_fill_mask_answer(std::size_t masks, std::size_t predictions, std::size_t tokens, std::string const& name) {
  std::size_t const limit = kMaxFillMaskAnswerTokens;
  // masks <= tokens <= the read bound and predictions <= the vocabulary: the product fits 64 bits.
  std::size_t const all = masks * predictions;
  if (all <= limit / std::max<std::size_t>(tokens, 1)) return;
  throw InputError(InputError::Kind::kTooLong,
                   name + ": " + std::to_string(masks) + (masks == 1 ? " mask" : " masks") + " x top_k " +
                       std::to_string(predictions) + " = " + std::to_string(all) +
                       " predictions, each writing the text's " + std::to_string(tokens) +
                       " tokens, are more than the " + std::to_string(limit) +
                       " tokens one text's answer may hold; ask for a smaller top_k or fewer masks");
}

}  // namespace

std::vector<MaskPredictions> Pipeline::fill_mask(std::span<std::string const> texts, FillMaskOptions const& options,
                                                 TaskRun const& run) const {
  FLASHDEBERTA_REQUIRE(mask_token_id_.has_value(), "fill-mask needs a masked-LM checkpoint");
  tokenizer::Tokenizer const& tok = *tokenizer_;
  std::int64_t const mask_id = *mask_token_id_;
  std::vector<tokenizer::Encoding> encodings;
  std::vector<std::vector<std::size_t>> masks;  // per text, where its masks are
  std::vector<std::size_t> starts = {0};        // per text, its first token among all of them
  for (std::size_t i = 0; i < texts.size(); ++i) {
    encodings.push_back(encode(texts[i], nullptr, run.names(i), run.limit, options.truncate));
    std::vector<std::size_t> at;
    for (std::size_t t = 0; t < encodings.back().size(); ++t)
      if (encodings.back().input_ids[t] == mask_id) at.push_back(t);
    if (at.empty()) {
      throw InputError(InputError::Kind::kInvalid, run.names(i) + ": no mask token (" + *tok.id_to_token(mask_id) +
                                                       ") in the text; fill-mask needs one");
    }
    // A top_k past the model's rows gives every row (pipelines::fill_mask).
    std::size_t const predictions = std::min<std::size_t>(
        options.top_k, options.targets.empty() ? static_cast<std::size_t>(config_.vocab_size) : options.targets.size());
    require_fill_mask_answer(at.size(), predictions, encodings.back().size(), run.names(i));
    masks.push_back(std::move(at));
    starts.push_back(starts.back() + encodings.back().size());
  }
  if (texts.empty()) return {};
  HeadOutput const out = run.forward(encodings);
  // The logits rows of the mask tokens only ([M, V], in token order): each goes to its text.
  HostHeadTensor const& logits = out["logits"];
  auto const vocab = static_cast<std::size_t>(logits.width);
  std::vector<std::vector<float>> rows(texts.size());  // per text: (masks, V)
  for (std::int64_t r = 0; r < logits.row_count; ++r) {
    auto const token = static_cast<std::size_t>(logits.tokens[r]);
    std::size_t const i =
        static_cast<std::size_t>(std::upper_bound(starts.begin(), starts.end(), token) - starts.begin()) - 1;
    FLASHDEBERTA_REQUIRE(i < texts.size(), "fill-mask: logits row " << r << " names token " << token);
    rows[i].insert(rows[i].end(), logits.values.begin() + r * vocab, logits.values.begin() + (r + 1) * vocab);
  }
  // A large top_k reaches model rows without a token (past the tokenizer's vocabulary): their token_str is
  // empty, as HF's decode drops unknown ids.
  auto const decode = [&](std::span<std::int64_t const> ids, bool skip) {
    return tok.decode_dropping_unknown(ids, skip);
  };
  std::vector<MaskPredictions> results;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    results.push_back(pipelines::fill_mask(encodings[i].input_ids, masks[i], rows[i], vocab, options.top_k,
                                           tok.special_ids().pad, decode, options.targets));
  }
  return results;
}

std::vector<std::int64_t> Pipeline::target_ids(std::span<std::string const> targets,
                                               std::vector<std::string>& notes) const {
  tokenizer::Tokenizer const& tok = *tokenizer_;
  std::vector<std::int64_t> ids;
  for (std::string const& target : targets) {
    std::optional<std::int64_t> id = tok.token_to_id(target);  // HF: tokenizer.get_vocab().get(target)
    if (!id) {
      // HF: tokenizer(target, add_special_tokens=False, max_length=1, truncation=True)["input_ids"][0].
      tokenizer::TokenList const pieces = tok.tokenize(target, "target", 1);
      if (pieces.size() == 0) {
        notes.push_back("The specified target token `" + target +
                        "` does not exist in the model vocabulary. We cannot replace it with anything meaningful, "
                        "ignoring it");
        continue;
      }
      id = pieces.ids.front();
      notes.push_back("The specified target token `" + target +
                      "` does not exist in the model vocabulary. Replacing with `" + pieces.tokens.front() + "`.");
    }
    if (*id < 0 || *id >= config_.vocab_size) {
      throw UsageError("fill-mask target '" + target + "' is token id " + std::to_string(*id) +
                       ", outside the model's vocabulary (vocab_size " + std::to_string(config_.vocab_size) + ")");
    }
    if (std::find(ids.begin(), ids.end(), *id) == ids.end()) ids.push_back(*id);
  }
  if (ids.empty()) throw UsageError("At least one target must be provided when passed.");
  return ids;
}

std::vector<std::vector<pipelines::LabelScore>> Pipeline::classify(std::span<TextInput const> inputs,
                                                                   ClassifyOptions const& options,
                                                                   TaskRun const& run) const {
  pipelines::ScoreFunction const function = options.function.value_or(score_function());
  std::vector<tokenizer::Encoding> encodings;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    TextInput const& input = inputs[i];
    encodings.push_back(
        encode(input.text, input.pair ? &*input.pair : nullptr, run.names(i), run.limit, options.truncate));
  }
  if (inputs.empty()) return {};
  std::vector<std::size_t> const sizes = sequence_sizes(encodings);
  HeadOutput const out = run.forward(encodings);
  std::vector<std::vector<float>> const logits = rows_by_sequence(out["logits"], sizes);
  std::vector<std::vector<pipelines::LabelScore>> results;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    results.push_back(pipelines::classify(logits[i], labels_, function));
    if (options.top_k && *options.top_k < results.back().size()) results.back().resize(*options.top_k);
  }
  return results;
}

std::vector<std::vector<pipelines::Entity>> Pipeline::ner(std::span<std::string const> texts, NerOptions const& options,
                                                          TaskRun const& run) const {
  tokenizer::Tokenizer const& tok = *tokenizer_;
  // Every text's encodings: one, or its stride= windows; first_window[i] is text i's first.
  std::vector<tokenizer::Encoding> encodings;
  std::vector<std::size_t> first_window;
  // HF windows only where the tokenizer has a model_max_length; without one stride= changes nothing.
  std::optional<std::int64_t> const max_length = tok.model_max_length();
  bool const windowed = options.stride && max_length && *max_length > 0;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    first_window.push_back(encodings.size());
    if (!windowed) {
      encodings.push_back(encode(texts[i], nullptr, run.names(i), run.limit, options.truncate));
      continue;
    }
    for (tokenizer::Encoding& window :
         stride_windows(texts[i], static_cast<std::size_t>(*max_length), *options.stride, run.names(i), run.limit))
      encodings.push_back(std::move(window));
  }
  first_window.push_back(encodings.size());
  if (texts.empty()) return {};
  std::vector<std::size_t> const sizes = sequence_sizes(encodings);
  HeadOutput const out = run.forward(encodings);
  std::vector<std::vector<float>> const logits = rows_by_sequence(out["logits"], sizes);
  // HF joins an entity's tokens (or words) with convert_tokens_to_string.
  auto const to_string = [&](std::span<std::string const> tokens) { return tok.tokens_to_string(tokens); };
  std::vector<std::vector<pipelines::Entity>> results;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    tokenizer::DecodedText const text = tokenizer::decode_utf8(texts[i], run.names(i));
    std::vector<pipelines::Entity> entities;
    for (std::size_t w = first_window[i]; w < first_window[i + 1]; ++w) {
      auto predictions = pipelines::token_predictions(encodings[w], logits[w], labels_.size());
      auto const pre =
          pipelines::gather_pre_entities(encodings[w], text.chars, std::move(predictions), tok.special_ids().unk);
      std::vector<pipelines::Entity> found =
          pipelines::entities_of(pre, options.aggregation, labels_, options.ignore_labels, to_string);
      entities.insert(entities.end(), std::make_move_iterator(found.begin()), std::make_move_iterator(found.end()));
    }
    if (first_window[i + 1] - first_window[i] > 1)
      entities = pipelines::merge_overlapping_entities(std::move(entities));
    results.push_back(std::move(entities));
  }
  return results;
}

std::vector<tokenizer::Encoding> Pipeline::stride_windows(std::string const& text, std::size_t max_length,
                                                          std::size_t stride, std::string const& name,
                                                          InputLimit const& limit) const {
  if (stride >= max_length) {
    throw UsageError("stride=" + std::to_string(stride) + " must be less than the tokenizer's model_max_length " +
                     std::to_string(max_length) + " (or even lower: the special tokens take part of each window)");
  }
  require_text_bytes(text.size(), name, limit.read);
  return checked_windows(name, limit, config_, "token classification:", [&](std::size_t token_limit) {
    return pipelines::text_windows(*tokenizer_, text, max_length, stride, token_limit);
  });
}

Truncate Pipeline::model_max_length_cut() const {
  Truncate truncate;
  std::optional<std::int64_t> const length = tokenizer_->model_max_length();
  if (length && *length > 0) truncate.max_length = static_cast<std::size_t>(*length);
  return truncate;
}

}  // namespace flashdeberta::runtime

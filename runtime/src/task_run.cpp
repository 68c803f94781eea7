#include "flashdeberta/runtime/task_run.hpp"

#include <algorithm>
#include <utility>

#include "flashdeberta/runtime/loaded_model.hpp"

namespace flashdeberta::runtime {

std::string InputNames::operator()(std::size_t index) const {
  switch (style_) {
    case Style::kNumbered:
      return word_ + " " + std::to_string(first_ + index);
    case Style::kIndexed:
      return word_ + "[" + std::to_string(first_ + index) + "]";
    case Style::kSingle:
      return word_;
  }
  return word_;
}

InputLimit InputLimit::of(std::int64_t max_tokens, TokenLimitNames const& names) {
  TokenBound const bound{max_tokens, names.max_tokens, "raise " + names.max_tokens};
  return {bound, bound};
}

HeadOutput TaskRun::forward(std::vector<tokenizer::Encoding>& sequences) const {
  FLASHDEBERTA_REQUIRE(runner != nullptr, "a task run needs a HeadRunner");
  return runner->run(sequences);
}

std::vector<std::size_t> sequence_sizes(std::vector<tokenizer::Encoding> const& encodings) {
  std::vector<std::size_t> sizes;
  for (tokenizer::Encoding const& e : encodings) sizes.push_back(e.size());
  return sizes;
}

namespace {

[[noreturn]] void refuse(InputError::Kind kind, std::string const& name, std::string const& message) {
  throw InputError(kind, name + ": " + message);
}

}  // namespace

void require_text_bytes(std::size_t bytes, std::string const& name, TokenBound const& read) {
  std::int64_t const limit = max_text_bytes(read.tokens);
  if (static_cast<std::int64_t>(bytes) <= limit) return;
  refuse(InputError::Kind::kTooLong, name,
         "the text holds " + std::to_string(bytes) + " bytes, more than the " + std::to_string(limit) + " (" +
             std::to_string(kMaxTextBytesPerToken) + " per token) of " + read.option + " " +
             std::to_string(read.tokens) + "; it is refused before tokenizing (" + read.remedy + ")");
}

void refuse_token_limit(std::string const& name, TokenBound const& bound) {
  refuse(InputError::Kind::kTooLong, name,
         "the text holds more than " + std::to_string(bound.tokens) + " tokens, more than " + bound.option + " " +
             std::to_string(bound.tokens) + " (tokenizing stopped there; " + bound.remedy + ")");
}

void require_run_bound(std::size_t tokens, std::string const& name, InputLimit const& limit) {
  if (static_cast<std::int64_t>(tokens) <= limit.run.tokens) return;
  refuse(InputError::Kind::kTooLong, name,
         "the text holds " + std::to_string(tokens) + " tokens, more than " + limit.run.option + " " +
             std::to_string(limit.run.tokens) + " (" + limit.run.remedy + ")");
}

tokenizer::Encoding encode_input(tokenizer::Tokenizer const& tokenizer, ModelConfig const& config,
                                 std::string const& text, std::string const* pair, std::string const& name,
                                 InputLimit const& limit, Truncate const& truncate) {
  require_text_bytes(text.size() + (pair != nullptr ? pair->size() : 0), name, limit.read);
  // Without a cut the text runs as it reads, so tokenizing can stop at the run bound already.
  bool const cuts = truncate.max_length.has_value() && truncate.strategy != tokenizer::Truncation::kNone;
  TokenBound const& stop = cuts || limit.run.tokens > limit.read.tokens ? limit.read : limit.run;
  tokenizer::EncodeOptions options;
  options.token_limit = static_cast<std::size_t>(stop.tokens);
  options.max_length = truncate.max_length;
  options.truncation = truncate.strategy;
  options.side = truncate.side;
  tokenizer::Encoding e;
  try {
    e = pair != nullptr ? tokenizer.encode(text, *pair, options) : tokenizer.encode(text, options);
  } catch (tokenizer::TokenLimitError const&) {
    refuse_token_limit(name, stop);
  } catch (Error const& error) {
    refuse(InputError::Kind::kTokenizer, name, error.what());
  }
  require_run_bound(e.size(), name, limit);
  require_in_vocabulary(e, config, name);
  return e;
}

void require_in_vocabulary(tokenizer::Encoding const& e, ModelConfig const& config, std::string const& name) {
  for (std::size_t t = 0; t < e.size(); ++t) {
    std::int64_t const id = e.input_ids[t];
    if (id < 0 || id >= config.vocab_size) {
      refuse(InputError::Kind::kVocabulary, name,
             "token '" + e.tokens[t] + "' has id " + std::to_string(id) +
                 ", outside the model's vocabulary (vocab_size " + std::to_string(config.vocab_size) +
                 "); is the tokenizer the checkpoint's own?");
    }
  }
}

Batch pack_sequences(std::vector<tokenizer::Encoding> const& sequences, ModelConfig const& config) {
  Batch batch;
  bool const types = config.type_vocab_size > 0;  // HF ignores token_type_ids otherwise; so does the batch
  std::vector<std::int32_t> ids, type_ids;
  for (tokenizer::Encoding const& e : sequences) {
    ids.clear();
    type_ids.clear();
    for (std::size_t t = 0; t < e.size(); ++t) {
      ids.push_back(static_cast<std::int32_t>(e.input_ids[t]));
      if (types) {
        type_ids.push_back(
            static_cast<std::int32_t>(std::min<std::int64_t>(e.token_type_ids[t], config.type_vocab_size - 1)));
      }
    }
    batch.add_sequence(ids, type_ids);
  }
  return batch;
}

void append_head_rows(HeadOutput& into, HeadOutput const& from, std::size_t first, std::size_t last,
                      std::int64_t first_token, std::int64_t last_token, std::int64_t token_base) {
  for (HostHeadTensor const& t : from.tensors) {
    auto it = std::find_if(into.tensors.begin(), into.tensors.end(), [&](auto const& x) { return x.name == t.name; });
    if (it == into.tensors.end()) {
      into.tensors.push_back(HostHeadTensor{t.name, t.rows, {}, 0, t.width, t.squeeze, {}});
      it = into.tensors.end() - 1;
    }
    auto const width = static_cast<std::ptrdiff_t>(t.width);
    std::int64_t begin = static_cast<std::int64_t>(first);
    std::int64_t end = static_cast<std::int64_t>(last);
    if (t.rows == HeadRows::kTokens) {  // rows come in token order
      begin = std::lower_bound(t.tokens.begin(), t.tokens.end(), first_token) - t.tokens.begin();
      end = std::lower_bound(t.tokens.begin(), t.tokens.end(), last_token) - t.tokens.begin();
      for (std::int64_t r = begin; r < end; ++r) it->tokens.push_back(t.tokens[r] - first_token + token_base);
    }
    it->values.insert(it->values.end(), t.values.begin() + begin * width, t.values.begin() + end * width);
    it->row_count += end - begin;
  }
}

HeadOutput DirectRunner::forward(std::vector<tokenizer::Encoding> const& sequences) const {
  Batch const batch = pack_sequences(sequences, config_);
  if (output_ == RunnerOutput::kHead) return model_.forward_head(batch, mask_token_id_);
  return HeadOutput{{last_hidden_state_tensor(model_.forward_to_host(batch), config_.hidden_size)}};
}

HeadOutput DirectRunner::run(std::vector<tokenizer::Encoding>& sequences) const {
  if (sequences.empty()) return {};
  std::vector<std::int64_t> starts = {0};  // each sequence's first token among all of them
  for (tokenizer::Encoding const& e : sequences) starts.push_back(starts.back() + static_cast<std::int64_t>(e.size()));
  if (starts.back() <= max_tokens_) return forward(sequences);
  // More than one forward holds: the sequences in order, as many as fit each forward (one at least: encode_input
  // has bounded each by itself).
  HeadOutput whole;
  for (std::size_t first = 0; first < sequences.size();) {
    std::size_t last = first + 1;
    while (last < sequences.size() && starts[last + 1] - starts[first] <= max_tokens_) ++last;
    std::vector<tokenizer::Encoding> part(std::make_move_iterator(sequences.begin() + first),
                                          std::make_move_iterator(sequences.begin() + last));
    HeadOutput out;
    try {
      out = forward(part);
    } catch (...) {
      std::move(part.begin(), part.end(), sequences.begin() + first);
      throw;
    }
    std::move(part.begin(), part.end(), sequences.begin() + first);
    append_head_rows(whole, out, 0, last - first, 0, starts[last] - starts[first], starts[first]);
    first = last;
  }
  return whole;
}

}  // namespace flashdeberta::runtime

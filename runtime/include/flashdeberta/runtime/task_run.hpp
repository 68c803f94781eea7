// How a front end runs a task: what its inputs are called in messages, how long they may be, and what runs
// their forward passes. The tasks (pipeline.hpp, gliner.hpp) are written once against these; the CLI and
// Python run the forwards directly (DirectRunner), the server through its batching queue, and each front
// end answers a refusal in its own terms from InputError::kind (the CLI: exit 1, Python: ValueError, the
// server: 422 Validation, 422 Tokenizer or 424 Backend).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/core/model_config.hpp"
#include "flashdeberta/heads/head_output.hpp"
#include "flashdeberta/runtime/options.hpp"
#include "flashdeberta/tokenizer/tokenizer.hpp"

namespace flashdeberta::runtime {

class LoadedModel;

// An input a task refuses, and why: the front ends map the kind to their answer.
class InputError : public Error {
 public:
  enum class Kind {
    kInvalid,     // not what the task takes (a fill-mask text without [MASK], an empty question)
    kTooLong,     // more tokens (or bytes) than the front end's limit
    kTokenizer,   // the tokenizer refuses the text
    kVocabulary,  // a token id outside the model's vocabulary: the tokenizer is not the checkpoint's own
  };
  InputError(Kind kind, std::string const& message) : Error(message), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

// What input i is called in messages: "text 3" (the CLI and Python number texts from 1), "inputs[2]" (the
// server names the JSON path of the request body), "inputs" (a request of one input).
class InputNames {
 public:
  static InputNames numbered(std::string word = "text", std::size_t first = 1) {
    return InputNames(std::move(word), first, Style::kNumbered);
  }
  static InputNames indexed(std::string field) { return InputNames(std::move(field), 0, Style::kIndexed); }
  static InputNames single(std::string field) { return InputNames(std::move(field), 0, Style::kSingle); }

  std::string operator()(std::size_t index) const;

 private:
  enum class Style { kNumbered, kIndexed, kSingle };
  InputNames(std::string word, std::size_t first, Style style) : word_(std::move(word)), first_(first), style_(style) {}
  std::string word_;
  std::size_t first_;
  Style style_;
};

// A bound on the tokens of one input and what the refusal tells its user to change.
struct TokenBound {
  std::int64_t tokens = kDefaultMaxTokens;
  std::string option = "--max-tokens";        // the setting named in the refusal
  std::string remedy = "raise --max-tokens";  // what to do about it
};

// The bounds on one input. `read` bounds it as given: tokenizing stops there, and a text of more than
// kMaxTextBytesPerToken bytes per token of it is refused before any tokenizing. `run` bounds it as it
// runs, after any cut the task makes (truncation): the server refuses past --max-input-length unless the
// request asks to truncate, while reading up to --max-batch-tokens. The CLI and Python bound both by
// max_tokens.
struct InputLimit {
  TokenBound run;
  TokenBound read;

  // Both bounds `max_tokens`, named as the front end names it (TokenLimitNames).
  static InputLimit of(std::int64_t max_tokens, TokenLimitNames const& names);
};

// How a pair (or a text) is cut to fit, as HF's tokenizer(..., truncation=strategy, max_length=N): the
// default (no max_length) cuts nothing.
struct Truncate {
  std::optional<std::size_t> max_length;  // special tokens included; unset: no truncation
  tokenizer::Truncation strategy = tokenizer::Truncation::kLongestFirst;
  tokenizer::TruncationSide side = tokenizer::TruncationSide::kRight;  // which end is cut
};

// The longest text tokenized for a read bound of N tokens: kMaxTextBytesPerToken x N bytes. No tokenizer
// of these checkpoints makes tokens that long on average (English averages about 4 bytes per token), so a
// longer text cannot fit and is refused before any of it is tokenized or even read.
inline constexpr std::int64_t kMaxTextBytesPerToken = 64;
inline std::int64_t max_text_bytes(std::int64_t max_tokens) { return kMaxTextBytesPerToken * max_tokens; }

// Runs the head over encoded sequences. The outputs are numbered as if the sequences ran as one batch
// (per-sequence rows in order, per-token rows by their index among all the sequences' tokens), however
// the runner splits them into forward passes. `sequences` are as given on return.
class HeadRunner {
 public:
  virtual ~HeadRunner() = default;
  virtual HeadOutput run(std::vector<tokenizer::Encoding>& sequences) const = 0;
};

// What a DirectRunner's forwards return: the checkpoint's head, or the backbone's last_hidden_state alone
// (embeddings, from a checkpoint of any head).
enum class RunnerOutput { kHead, kBackbone };

// The CLI's and Python's runner: forwards of at most `max_tokens` tokens, the sequences taken in order, on
// the calling thread. `mask_token_id`: a masked LM computes the logits of those tokens only (fill-mask).
class DirectRunner final : public HeadRunner {
 public:
  DirectRunner(LoadedModel const& model, ModelConfig const& config, std::optional<std::int64_t> mask_token_id,
               std::int64_t max_tokens, RunnerOutput output = RunnerOutput::kHead)
      : model_(model), config_(config), mask_token_id_(mask_token_id), max_tokens_(max_tokens), output_(output) {}
  HeadOutput run(std::vector<tokenizer::Encoding>& sequences) const override;

 private:
  HeadOutput forward(std::vector<tokenizer::Encoding> const& sequences) const;

  LoadedModel const& model_;
  ModelConfig const& config_;
  std::optional<std::int64_t> mask_token_id_;
  std::int64_t max_tokens_;
  RunnerOutput output_;
};

// What a task call runs with: its inputs' names and bounds, and the runner of its forwards.
struct TaskRun {
  InputNames names = InputNames::numbered();
  InputLimit limit;
  HeadRunner const* runner = nullptr;

  HeadOutput forward(std::vector<tokenizer::Encoding>& sequences) const;  // through `runner`
};

// The number of tokens of each encoding.
std::vector<std::size_t> sequence_sizes(std::vector<tokenizer::Encoding> const& encodings);

// The packed batch of `sequences` (ids, and token types clamped below type_vocab_size when the model has
// them); ids are checked by encode_input.
Batch pack_sequences(std::vector<tokenizer::Encoding> const& sequences, ModelConfig const& config);

// Appends to `into` the rows of `from` that belong to its sequences [first, last), whose tokens are
// [first_token, last_token) of `from`'s batch, renumbering those tokens to start at `token_base`.
void append_head_rows(HeadOutput& into, HeadOutput const& from, std::size_t first, std::size_t last,
                      std::int64_t first_token, std::int64_t last_token, std::int64_t token_base);

// `text` (with `pair`) encoded for a task: refused as InputError, naming `name`, when it is longer than
// limit.read (its bytes before tokenizing, then its tokens), when the tokenizer refuses it, when it holds
// more than limit.run tokens after `truncate` cut it, or when a token id is outside config's vocabulary.
tokenizer::Encoding encode_input(tokenizer::Tokenizer const& tokenizer, ModelConfig const& config,
                                 std::string const& text, std::string const* pair, std::string const& name,
                                 InputLimit const& limit, Truncate const& truncate = {});

// Refuses (InputError kVocabulary), naming `name`, an encoding with a token id outside config's vocabulary
// (the tokenizer is not the checkpoint's own).
void require_in_vocabulary(tokenizer::Encoding const& e, ModelConfig const& config, std::string const& name);

// Refuses (InputError kTooLong), naming `name`, a text of more than max_text_bytes(read.tokens) bytes.
void require_text_bytes(std::size_t bytes, std::string const& name, TokenBound const& read);
// The refusal of a text once tokenizing it stopped at `bound` (tokenizer::TokenLimitError).
[[noreturn]] void refuse_token_limit(std::string const& name, TokenBound const& bound);

// Refuses, naming `name`, an input of more than limit.run tokens (what encode_input checks after its cut,
// for a task that cuts on its own).
void require_run_bound(std::size_t tokens, std::string const& name, InputLimit const& limit);

// The windows `cut(token_limit)` makes of a task's text (question answering's, token classification's stride=),
// refused as encode_input refuses a text: tokenizing past limit.read; an Error whose message holds
// `settings_prefix` (the call's settings, e.g. a stride the windows cannot take) as a UsageError, any other as the
// tokenizer's InputError; then each window past limit.run or outside the vocabulary.
template <class Cut>
std::vector<tokenizer::Encoding> checked_windows(std::string const& name, InputLimit const& limit,
                                                 ModelConfig const& config, std::string const& settings_prefix,
                                                 Cut&& cut) {
  std::vector<tokenizer::Encoding> windows;
  try {
    windows = cut(static_cast<std::size_t>(limit.read.tokens));
  } catch (tokenizer::TokenLimitError const&) {
    refuse_token_limit(name, limit.read);
  } catch (Error const& error) {
    std::string const what = error.what();
    if (what.find(settings_prefix) != std::string::npos) throw UsageError(name + ": " + what);
    throw InputError(InputError::Kind::kTokenizer, name + ": " + what);
  }
  for (tokenizer::Encoding const& w : windows) {
    require_run_bound(w.size(), name, limit);
    require_in_vocabulary(w, config, name);
  }
  return windows;
}

}  // namespace flashdeberta::runtime

// What the pipeline commands (fill-mask, classify, ner, qa) share: their options, the checkpoint with
// its tokenizer and the head they need, texts from the command line or stdin in batches, the progress
// bar, and the forward pass over a batch of encodings. The post-processing itself is the library's
// (include/flashdeberta/pipelines/).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <istream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "args.hpp"
#include "flashdeberta/heads/head_kind.hpp"
#include "flashdeberta/heads/head_output.hpp"
#include "flashdeberta/core/model_config.hpp"
#include "flashdeberta/tokenizer/tokenizer.hpp"
#include "model_dispatch.hpp"

namespace flashdeberta::cli {

struct PipelineOptions {
  CommonOptions common;
  std::optional<std::filesystem::path> tokenizer;  // default: --model
  std::vector<std::string> texts;                  // empty: one text per line of stdin
  bool progress = false;                           // --progress
  bool timing = false;                             // --timing: load and run times on stderr
  std::int64_t batch_size = 8;
  std::optional<std::int64_t> top_k;    // fill-mask (default 5), classify (default: every label)
  std::optional<std::string> question;  // qa
  std::optional<std::string> context;   // qa
};

// One extra option of a command: its name (without "--") and whether it needs a value.
struct ExtraOption {
  std::string_view name;
  bool required = false;
};

// Parses `args` (after the command name). nullopt: --help was given. Texts are the positional arguments
// (after "--" even those starting with '-'); `takes_texts` false makes any positional argument an error.
std::optional<PipelineOptions> parse_pipeline_options(std::string_view command, std::span<char const* const> args,
                                                      std::span<ExtraOption const> extras, bool takes_texts);

// The usage lines every pipeline command shares (backend, dtype, ...), for the help texts.
std::string pipeline_common_help();

// A loaded checkpoint: config, tokenizer and the model with the head `command` needs.
class Pipeline {
 public:
  // Checks config.json's architectures against `head` first (a usage error naming what the checkpoint
  // holds), then loads the tokenizer and the model.
  Pipeline(PipelineOptions const& options, HeadKind head, std::string_view command);
  ~Pipeline();

  ModelConfig const& config() const { return config_; }
  tokenizer::Tokenizer const& tokenizer() const { return *tokenizer_; }
  std::filesystem::path const& config_path() const { return config_path_; }
  // config.json's problem_type, "" when absent.
  std::string const& problem_type() const { return problem_type_; }

  // `text` (and `pair`, for question answering) encoded, refused as "text <index>: ..." when it is longer than
  // --max-tokens admits: by its bytes before it is tokenized (max_text_bytes), then by its tokens.
  tokenizer::Encoding encode(std::string const& text, std::size_t index, std::string const* pair = nullptr) const;

  // The head over `encodings` as one packed batch; per-token outputs come back as one vector per
  // encoding (rows in token order, `width` values each), per-sequence outputs as one row per encoding.
  // `mask_token_id`: a masked LM computes only those tokens' rows. `first_text`: the number of the first
  // encoding's text, for messages. A batch of more than --max-tokens tokens is refused.
  HeadOutput forward(std::vector<tokenizer::Encoding> const& encodings, std::optional<std::int64_t> mask_token_id,
                     std::size_t first_text) const;

 private:
  ModelConfig config_;
  std::filesystem::path config_path_;
  std::string problem_type_;
  std::int64_t max_tokens_ = kDefaultMaxTokens;
  std::optional<tokenizer::Tokenizer> tokenizer_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<LoadedModel> model_;  // destroyed before backend_ (declared after it)
};

// The longest text (or stdin line) the pipeline commands tokenize for --max-tokens N: kMaxTextBytesPerToken x N
// bytes. No tokenizer of these checkpoints makes tokens that long on average (English averages about 4 bytes
// per token), so a longer text cannot fit and is refused before any of it is tokenized or even read.
inline constexpr std::int64_t kMaxTextBytesPerToken = 64;
inline std::int64_t max_text_bytes(std::int64_t max_tokens) { return kMaxTextBytesPerToken * max_tokens; }

// A head tensor's rows for each sequence of the batch built from `sizes` (encoding lengths): per token
// rows become [size * width] (zeros for tokens the head did not compute), per sequence rows [width].
std::vector<std::vector<float>> rows_by_sequence(HostHeadTensor const& t, std::span<std::size_t const> sizes);

// Calls `run(texts, first)` for batches of `batch_size` texts from options.texts or stdin lines (first:
// the 1-based number of the batch's first text), drawing a progress bar on stderr when asked (--progress)
// or, for texts given as arguments, when stdin and stderr are terminals. A stdin line longer than
// max_text_bytes(--max-tokens) is refused before the rest of it is read.
void for_each_batch(PipelineOptions const& options,
                    std::function<void(std::vector<std::string> const& texts, std::size_t first)> const& run);

// std::getline that stops at `limit` bytes: a longer line is refused (as text `index`, naming --max-tokens
// max_tokens) before the rest of it is read, so a huge input without newlines cannot fill memory. False at
// the end of the input.
bool read_bounded_line(std::istream& in, std::string& line, std::size_t limit, std::size_t index,
                       std::int64_t max_tokens);

// Refuses (as text `index`) a text, with its pair, longer than max_text_bytes(max_tokens), before it is tokenized.
void require_text_bytes(std::size_t bytes, std::size_t index, std::int64_t max_tokens);

// The refusal of text `index` once tokenizing it stopped at --max-tokens (tokenizer::TokenLimitError).
[[noreturn]] void fail_over_max_tokens(std::size_t index, std::int64_t max_tokens);

// "text 3: <message>" for an error while handling text number `index`.
[[noreturn]] void fail_text(std::size_t index, std::string const& message);

}  // namespace flashdeberta::cli

// A loaded checkpoint with its tokenizer and the head a task needs, and the tasks over a batch of texts:
// what the CLI's pipeline commands, the Python package's pipeline() and the server share. Each task
// tokenizes, runs one packed forward pass and post-processes with the library's pipelines/ functions;
// the front ends only render the results (JSON lines, Python objects, HTTP bodies).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "flashdeberta/core/batch.hpp"
#include "flashdeberta/core/model_config.hpp"
#include "flashdeberta/heads/head_kind.hpp"
#include "flashdeberta/heads/head_output.hpp"
#include "flashdeberta/pipelines/embedding.hpp"
#include "flashdeberta/pipelines/fill_mask.hpp"
#include "flashdeberta/pipelines/rerank.hpp"
#include "flashdeberta/pipelines/text_classification.hpp"
#include "flashdeberta/pipelines/token_classification.hpp"
#include "flashdeberta/pipelines/zero_shot.hpp"
#include "flashdeberta/runtime/loaded_model.hpp"
#include "flashdeberta/runtime/options.hpp"
#include "flashdeberta/tokenizer/tokenizer.hpp"

namespace flashdeberta::runtime {

// The longest question + context the question-answering task takes at once (HF's pipeline would split a
// longer context into overlapping windows of this many tokens).
inline constexpr std::size_t kMaxAnswerWindow = 384;

struct Answer {
  float score = 0.0f;
  std::int64_t start = 0;  // code points of the context
  std::int64_t end = 0;
  std::string answer;  // that part of the context
};

// zero-shot classification of one text: the candidate labels best first with their scores.
using ZeroShotResult = pipelines::ZeroShotResult;

// One passage of a rerank: its index in the request and its score (sigmoid of the cross-encoder's logit,
// or the logit itself with raw_scores).
using RerankScore = pipelines::RerankScore;

// How a text (or pair) is cut to fit, as HF's tokenizer(..., truncation=strategy, max_length=N): the
// default (no max_length) cuts nothing.
struct Truncate {
  std::optional<std::size_t> max_length;  // special tokens included; unset: no truncation
  tokenizer::Truncation strategy = tokenizer::Truncation::kLongestFirst;
};

// embed's pooling: the [CLS] row, or the mean over the text's tokens (special tokens included).
using Pooling = pipelines::Pooling;

class Pipeline {
 public:
  // Checks config.json's architectures against `head` first (a UsageError naming what the checkpoint
  // holds and `task`), then loads the tokenizer (from `tokenizer_dir`, default options.model) and the model.
  Pipeline(RuntimeOptions const& options, std::optional<std::filesystem::path> const& tokenizer_dir, HeadKind head,
           std::string_view task);
  ~Pipeline();
  Pipeline(Pipeline const&) = delete;
  Pipeline& operator=(Pipeline const&) = delete;

  ModelConfig const& config() const { return config_; }
  tokenizer::Tokenizer const& tokenizer() const { return *tokenizer_; }
  std::filesystem::path const& config_path() const { return config_path_; }
  std::string const& problem_type() const { return problem_type_; }  // config.json's, "" when absent
  std::int64_t max_tokens() const { return max_tokens_; }
  int threads() const { return backend_->threads(); }
  LoadedModel const& model() const { return *model_; }

  // `text` (with `pair`, when given) encoded, refused as "text <index>: ..." when it is longer than
  // max_tokens admits: by its bytes before it is tokenized (max_text_bytes), then by its tokens, both
  // counted before `truncate` cuts it (by default it cuts nothing).
  tokenizer::Encoding encode(std::string const& text, std::size_t index, std::string const* pair = nullptr,
                             Truncate const& truncate = {}) const;

  // The head over `encodings` as one packed batch. `mask_token_id`: a masked LM computes only those
  // tokens' rows. `first_text`: the number of the first encoding's text, for messages. A batch of more
  // than max_tokens tokens is refused.
  HeadOutput forward(std::vector<tokenizer::Encoding> const& encodings, std::optional<std::int64_t> mask_token_id,
                     std::size_t first_text) const;

  // The tasks, over texts[i] numbered first + i in messages. Every call may come from any thread.
  //
  // fill-mask: per text, per [MASK] in it, the top_k predictions (HF's fill-mask pipeline).
  std::vector<std::vector<std::vector<pipelines::MaskPrediction>>> fill_mask(std::span<std::string const> texts,
                                                                             std::size_t top_k,
                                                                             std::size_t first = 1) const;
  // text-classification: per text (with pairs[i] as its second sequence when `pairs` is not empty), the
  // labels best first, the top_k best only when given (softmax, or sigmoid for multi-label / one label).
  std::vector<std::vector<pipelines::LabelScore>> classify(std::span<std::string const> texts,
                                                           std::span<std::string const> pairs,
                                                           std::optional<std::size_t> top_k,
                                                           std::size_t first = 1) const;
  // token-classification with HF's "simple" aggregation: per text, its entities.
  std::vector<std::vector<pipelines::Entity>> ner(std::span<std::string const> texts, std::size_t first = 1) const;
  // question-answering with HF's defaults (one answer of at most 15 tokens, widened to whole words).
  Answer answer(std::string const& question, std::string const& context, std::size_t index = 1) const;

  // zero-shot-classification as HF's ZeroShotClassificationPipeline: each text paired with
  // hypothesis_template.format(label) for every candidate label, all pairs of a call in one packed batch;
  // the entailment and contradiction ids from the config's id2label. multi_label: each label scored alone
  // (softmax over contradiction/entailment); otherwise softmax of the entailment logits over the labels.
  // The premise is cut (only_first) to the tokenizer's model_max_length when it has one, as HF. A checkpoint
  // without an entailment label, no candidate label or a template without {} is a UsageError, checked
  // before the texts (so a call with no text checks them alone).
  std::vector<ZeroShotResult> zero_shot(std::span<std::string const> texts,
                                        std::span<std::string const> candidate_labels,
                                        std::string const& hypothesis_template, bool multi_label,
                                        std::size_t first = 1) const;
  // rerank with a cross-encoder (a sequence-classification checkpoint of one label): (query, passage)
  // pairs in one batch, cut by `truncate`, sorted by score, the top_n best when given; passages[i] is
  // "text first + i" in messages. A checkpoint of more labels is a UsageError, even with no passage.
  std::vector<RerankScore> rerank(std::string const& query, std::span<std::string const> passages,
                                  std::optional<std::size_t> top_n, bool raw_scores, Truncate const& truncate,
                                  std::size_t first = 1) const;
  // Pooled last hidden states (the [CLS] row or the mean over the text's tokens), L2-normalized when asked;
  // the backbone's states whatever head the checkpoint was loaded with.
  std::vector<std::vector<float>> embed(std::span<std::string const> texts, Pooling pooling, bool normalize,
                                        std::size_t first = 1) const;

 private:
  // `encodings` as one packed batch, refused when they hold more than max_tokens tokens together or a
  // token outside the vocabulary. text_numbers[i]: the number of the text encodings[i] holds, for messages.
  Batch pack(std::vector<tokenizer::Encoding> const& encodings, std::span<std::size_t const> text_numbers) const;

  ModelConfig config_;
  std::filesystem::path config_path_;
  std::string problem_type_;
  std::int64_t max_tokens_ = kDefaultMaxTokens;
  TokenLimitNames limit_names_;
  std::optional<tokenizer::Tokenizer> tokenizer_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<LoadedModel> model_;  // destroyed before backend_ (declared after it)
};

// What a checkpoint with this head is, in messages: "backbone", "masked-LM", "sequence-classification", ...
std::string_view head_description(HeadKind head);

// The longest text the pipelines tokenize for max_tokens N: kMaxTextBytesPerToken x N bytes. No tokenizer
// of these checkpoints makes tokens that long on average (English averages about 4 bytes per token), so a
// longer text cannot fit and is refused before any of it is tokenized or even read.
inline constexpr std::int64_t kMaxTextBytesPerToken = 64;
inline std::int64_t max_text_bytes(std::int64_t max_tokens) { return kMaxTextBytesPerToken * max_tokens; }

// A head tensor's rows for each sequence of the batch built from `sizes` (encoding lengths): per token
// rows become [size * width] (zeros for tokens the head did not compute), per sequence rows [width].
std::vector<std::vector<float>> rows_by_sequence(HostHeadTensor const& t, std::span<std::size_t const> sizes);

// Refuses (as text `index`) a text, with its pair, longer than max_text_bytes(max_tokens), before it is tokenized.
void require_text_bytes(std::size_t bytes, std::size_t index, std::int64_t max_tokens,
                        TokenLimitNames const& names = {});

// The refusal of text `index` once tokenizing it stopped at max_tokens (tokenizer::TokenLimitError).
[[noreturn]] void fail_over_max_tokens(std::size_t index, std::int64_t max_tokens, TokenLimitNames const& names = {});

// "text 3: <message>" for an error while handling text number `index`.
[[noreturn]] void fail_text(std::size_t index, std::string const& message);

}  // namespace flashdeberta::runtime

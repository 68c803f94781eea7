// The tasks over text, each written once: a loaded checkpoint with its tokenizer and head, and per task
// its encoding, its forward passes (through the call's HeadRunner) and its post-processing with the
// library's pipelines/ functions into typed results (task_json.hpp writes them). The CLI's commands, the
// server's routes and the Python package's pipeline() call these and keep only their own I/O.
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

#include "flashdeberta/core/model_config.hpp"
#include "flashdeberta/heads/head_kind.hpp"
#include "flashdeberta/pipelines/embedding.hpp"
#include "flashdeberta/pipelines/fill_mask.hpp"
#include "flashdeberta/pipelines/qa_windows.hpp"
#include "flashdeberta/pipelines/rerank.hpp"
#include "flashdeberta/pipelines/text_classification.hpp"
#include "flashdeberta/pipelines/token_classification.hpp"
#include "flashdeberta/pipelines/word_aggregation.hpp"
#include "flashdeberta/pipelines/zero_shot.hpp"
#include "flashdeberta/runtime/loaded_model.hpp"
#include "flashdeberta/runtime/options.hpp"
#include "flashdeberta/runtime/task_run.hpp"
#include "flashdeberta/runtime/text_input.hpp"
#include "flashdeberta/tokenizer/tokenizer.hpp"

namespace flashdeberta::runtime {

// HF's question-answering max_seq_len when not given: min(the tokenizer's model_max_length, 384) tokens per
// window of question + context; a longer context is split into overlapping windows (qa_windows.hpp).
inline constexpr std::size_t kMaxAnswerWindow = 384;

// fill-mask: per mask of a text, its predictions best first.
using MaskPredictions = std::vector<std::vector<pipelines::MaskPrediction>>;

// The most tokens one text's fill-mask answer may write, checked before the forward: each prediction carries
// the whole text decoded with its mask filled (HF's "sequence"), so masks x top_k x the text's tokens is both
// the answer's size and the work of decoding it (4 texts of 510 masks at top_k 100: 641 MB over 85 s). One
// mask of a 512-token text at top_k 100 writes 51,200; 2^18 is about 1.3 MB of text per input.
inline constexpr std::size_t kMaxFillMaskAnswerTokens = std::size_t{1} << 18;

struct FillMaskOptions {
  std::size_t top_k = 5;
  std::vector<std::int64_t> targets;  // HF's targets as ids (Pipeline::target_ids); empty: the whole vocabulary
  Truncate truncate;                  // HF's tokenizer_kwargs truncation / max_length
};

struct ClassifyOptions {
  std::optional<std::size_t> top_k;                  // unset: every label (HF's top_k=None)
  std::optional<pipelines::ScoreFunction> function;  // unset: HF's default for the config (score_function())
  Truncate truncate;
};

// token-classification: HF's aggregation_strategy and ignore_labels, and the cut of each text.
struct NerOptions {
  pipelines::Aggregation aggregation = pipelines::Aggregation::kSimple;
  std::vector<std::string> ignore_labels = {"O"};
  Truncate truncate;  // HF's pipeline cuts at the tokenizer's model_max_length (Pipeline::model_max_length_cut)
  // HF's stride=: a text longer than the tokenizer's model_max_length runs as overlapping windows sharing
  // `stride` tokens (overflow_windows.hpp) instead of being cut, and the windows' entities are merged
  // (merge_overlapping_entities).
  std::optional<std::size_t> stride;
};

// question-answering: {score, start, end, answer}.
using Answer = pipelines::ScoredAnswer;

// HF's question-answering arguments (transformers 4.x; max_question_len only matters to HF's slow tokenizers,
// so it has no counterpart here).
struct AnswerOptions {
  std::size_t top_k = 1;
  std::size_t max_answer_len = 15;
  bool handle_impossible_answer = false;
  bool align_to_words = true;
  std::optional<std::size_t> max_seq_len;  // unset: min(model_max_length, 384)
  std::optional<std::size_t> doc_stride;   // unset: min(max_seq_len / 2, 128)
};

// The most candidate labels a zero-shot call takes by default: each label is one more (text, hypothesis) pair
// per text to tokenize and run, so the labels bound the work and the answer as the texts do. The server
// bounds them by --max-client-batch-size instead, as TEI bounds a request's inputs.
inline constexpr std::size_t kMaxCandidateLabels = 1024;

struct ZeroShotOptions {
  std::vector<std::string> candidate_labels;
  std::string hypothesis_template = std::string(pipelines::kDefaultHypothesisTemplate);
  bool multi_label = false;
  std::size_t max_candidate_labels = kMaxCandidateLabels;
  std::string max_labels_option = "the zero-shot task's limit";  // what the refusal names as the limit
};
using ZeroShotResult = pipelines::ZeroShotResult;

struct RerankOptions {
  std::optional<std::size_t> top_n;  // unset: every passage
  bool raw_scores = false;           // the logit instead of its sigmoid
  Truncate truncate;                 // of each (query, passage) pair
};
using RerankScore = pipelines::RerankScore;

using Pooling = pipelines::Pooling;
struct EmbedOptions {
  Pooling pooling = Pooling::kMean;
  bool normalize = true;  // L2
  Truncate truncate;
};

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
  HeadKind head() const { return head_; }
  tokenizer::Tokenizer const& tokenizer() const { return *tokenizer_; }
  std::filesystem::path const& config_path() const { return config_path_; }
  std::string const& problem_type() const { return problem_type_; }   // config.json's, "" when absent
  std::vector<std::string> const& labels() const { return labels_; }  // id2label (HF's LABEL_<i> without one)
  pipelines::ScoreFunction score_function() const;                    // HF's default for this config
  std::optional<pipelines::NliLabelIds> nli_labels() const;           // zero-shot's columns, when present
  // The mask token a masked LM's forwards compute the logits of (fill-mask); nullopt for other heads.
  std::optional<std::int64_t> mask_token_id() const { return mask_token_id_; }
  std::int64_t max_tokens() const { return max_tokens_; }
  int threads() const { return backend_->threads(); }
  LoadedModel const& model() const { return *model_; }

  // HF's tokenizer(..., truncation=strategy, max_length=N) as a Truncate: max_length alone cuts
  // longest_first; a strategy without max_length cuts to the tokenizer's model_max_length, and is a
  // UsageError when it has none. `strategy_option` and `length_option` name the two settings as the front
  // end calls them ("--truncation", "--max-length"; Python's truncation=, max_length=).
  Truncate truncation(std::optional<tokenizer::Truncation> strategy, std::optional<std::size_t> max_length,
                      std::string const& strategy_option, std::string const& length_option) const;

  // The CLI's and Python's run of a task: inputs named by `names`, bounded by --max-tokens (as
  // RuntimeOptions names it), forwards run here of at most that many tokens.
  TaskRun local_run(InputNames names = InputNames::numbered()) const;

  // The tasks. Every call may come from any thread.
  //
  // fill-mask (HF's pipeline): per text, per [MASK] in it, the top_k predictions. A text whose answer would
  // write more than kMaxFillMaskAnswerTokens tokens is refused (InputError kTooLong) before any forward.
  std::vector<MaskPredictions> fill_mask(std::span<std::string const> texts, FillMaskOptions const& options,
                                         TaskRun const& run) const;
  // HF's fill-mask targets as ids: a target that is a token of the vocabulary is its id, else the first token
  // of its tokenization, and `notes` gets HF's warning about it (or about a target that makes no token, which
  // is left out); ids in first-seen order without repeats. UsageError when no target is left.
  std::vector<std::int64_t> target_ids(std::span<std::string const> targets, std::vector<std::string>& notes) const;
  // text-classification: per input, the labels best first (the top_k best when given).
  std::vector<std::vector<pipelines::LabelScore>> classify(std::span<TextInput const> inputs,
                                                           ClassifyOptions const& options, TaskRun const& run) const;
  // token-classification: per text, its entities (HF's "simple" aggregation by default).
  std::vector<std::vector<pipelines::Entity>> ner(std::span<std::string const> texts, NerOptions const& options,
                                                  TaskRun const& run) const;
  std::vector<std::vector<pipelines::Entity>> ner(std::span<std::string const> texts, TaskRun const& run) const {
    return ner(texts, NerOptions{}, run);
  }
  // The cut HF's token-classification pipeline makes: at the tokenizer's model_max_length when it has one.
  Truncate model_max_length_cut() const;
  // question-answering: the top_k answers best first (qa_windows.hpp), over as many windows as the context
  // needs. UsageError for options HF refuses (top_k or max_answer_len 0, doc_stride above max_seq_len).
  std::vector<Answer> answers(std::string const& question, std::string const& context, AnswerOptions const& options,
                              TaskRun const& run) const;
  // The best answer with HF's defaults (one answer of at most 15 tokens, widened to whole words).
  Answer answer(std::string const& question, std::string const& context, TaskRun const& run) const;
  // zero-shot-classification as HF's ZeroShotClassificationPipeline: each text paired with the hypothesis
  // of every candidate label; multi_label scores each label alone (softmax over contradiction and
  // entailment), else the softmax of the entailment logits over the labels. The premise is cut (only_first)
  // to the tokenizer's model_max_length when it has one, as HF. check_zero_shot's refusals come first.
  std::vector<ZeroShotResult> zero_shot(std::span<std::string const> texts, ZeroShotOptions const& options,
                                        TaskRun const& run) const;
  // UsageError for a checkpoint without an entailment label, no candidate label or a template without {};
  // InputError (kTooLong) for more than options.max_candidate_labels labels.
  void check_zero_shot(ZeroShotOptions const& options) const;
  // rerank with a cross-encoder: (query, passage) pairs, sorted by score (pipelines::rerank); passages are
  // the run's inputs. A front end that streams its passages in parts collects each part's rerank_logits and
  // ranks them all at the end with pipelines::rerank.
  std::vector<RerankScore> rerank(std::string const& query, std::span<std::string const> passages,
                                  RerankOptions const& options, TaskRun const& run) const;
  std::vector<float> rerank_logits(std::string const& query, std::span<std::string const> passages,
                                   Truncate const& truncate, TaskRun const& run) const;
  // UsageError unless the checkpoint is a cross-encoder (a sequence classifier of one label).
  void check_rerank() const;
  // Pooled last hidden states (the [CLS] row or the mean over the text's tokens), L2-normalized when asked.
  std::vector<std::vector<float>> embed(std::span<std::string const> texts, EmbedOptions const& options,
                                        TaskRun const& run) const;

 private:
  tokenizer::Encoding encode(std::string const& text, std::string const* pair, std::string const& name,
                             InputLimit const& limit, Truncate const& truncate = {}) const {
    return encode_input(*tokenizer_, config_, text, pair, name, limit, truncate);
  }
  // token-classification's stride= windows of one text (NerOptions::stride), each checked as encode checks.
  std::vector<tokenizer::Encoding> stride_windows(std::string const& text, std::size_t max_length, std::size_t stride,
                                                  std::string const& name, InputLimit const& limit) const;

  ModelConfig config_;
  HeadKind head_ = HeadKind::kBase;
  std::filesystem::path config_path_;
  std::filesystem::path tokenizer_dir_;
  std::string problem_type_;
  std::vector<std::string> labels_;
  std::optional<std::int64_t> mask_token_id_;
  std::int64_t max_tokens_ = kDefaultMaxTokens;
  TokenLimitNames limit_names_;
  std::optional<tokenizer::Tokenizer> tokenizer_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<LoadedModel> model_;      // destroyed before backend_ (declared after it)
  std::unique_ptr<DirectRunner> direct_;    // over model_
  std::unique_ptr<DirectRunner> backbone_;  // over model_'s backbone: embed on a checkpoint with a head
};

// A head tensor's rows for each sequence of the batch built from `sizes` (encoding lengths): per token
// rows become [size * width] (zeros for tokens the head did not compute), per sequence rows [width].
std::vector<std::vector<float>> rows_by_sequence(HostHeadTensor const& t, std::span<std::size_t const> sizes);

}  // namespace flashdeberta::runtime

// Fine-tuning as Hugging Face's Trainer does it, over any backend's TrainingSession (flashdeberta train, and any
// front end that trains): JSON lines read and checked before the first step (training_data.cpp), HF's epoch order
// (torch.randperm seeded seed + epoch), batches, gradient accumulation, AdamW with its schedule, dropout from
// config.json, evaluation each epoch, and checkpoints a run can resume from bit-identically (trainer.cpp,
// training_checkpoint.cpp). The output directory is an HF checkpoint of the task's head class.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flashdeberta/core/batch.hpp"
#include "flashdeberta/runtime/options.hpp"
#include "flashdeberta/runtime/training_session.hpp"
#include "flashdeberta/tokenizer/tokenizer.hpp"

namespace flashdeberta::runtime {

enum class TrainingTask { kTextClassification, kTokenClassification, kMaskedLM, kMultipleChoice, kQuestionAnswering };

// "text-classification", "token-classification", "masked-lm", "multiple-choice", "question-answering".
std::string_view training_task_name(TrainingTask task);
// The task of a name above; UsageError for any other.
TrainingTask parse_training_task(std::string_view name);
HeadKind training_head(TrainingTask task);

struct TrainerOptions {
  TrainingTask task = TrainingTask::kTextClassification;
  RuntimeOptions runtime;  // runtime.model: the checkpoint to start from (its tokenizer too)
  std::filesystem::path train_file;
  std::optional<std::filesystem::path> eval_file;
  std::filesystem::path output;
  double epochs = 3.0;                    // HF num_train_epochs
  std::optional<std::int64_t> max_steps;  // HF max_steps: overrides epochs
  std::int64_t batch_size = 8;            // HF per_device_train_batch_size
  std::int64_t gradient_accumulation_steps = 1;
  std::optional<std::int64_t> max_length;  // default: 512 or the tokenizer's model_max_length, the smaller
  std::uint64_t seed = 42;
  OptimizerOptions optimizer;   // learning rate, weight decay, clipping, schedule, warmup steps (total: computed)
  double warmup_ratio = 0.0;    // used when optimizer.warmup_steps is 0
  std::int64_t save_steps = 0;  // 0: no checkpoint-<step>/ during the run
  std::int64_t logging_steps = 500;
  bool resume = false;                              // continue from the newest OUT/checkpoint-<step>/
  std::optional<std::vector<std::string>> labels;   // the label set, in id order
  ProblemType problem = ProblemType::kSingleLabel;  // text classification
  bool label_all_tokens = false;                    // token classification
  double mlm_probability = 0.15;                    // masked LM
  std::int64_t doc_stride = 128;                    // question answering
};

// ---- Data (training_data.cpp) ----

// One sequence of a model input: ids and token types (empty for a model without token types).
struct TrainingSequence {
  std::vector<std::int32_t> ids;
  std::vector<std::int32_t> token_types;
  std::vector<std::uint8_t> special;  // 1 at the special tokens (masked LM never masks them)
};

// One example as a batch takes it: its sequences (a multiple-choice example has one per choice) and targets.
struct TrainingExample {
  std::vector<TrainingSequence> sequences;
  std::int64_t label = -100;         // a class, a choice
  std::vector<float> values;         // regression target, or multi-hot (num_labels)
  std::vector<std::int64_t> tokens;  // token classification: a label per token, -100 where not scored
  std::size_t line = 0;              // 1-based line of its file
  // Question answering: one example per window of a context; the answer's first and last token in it (both 0,
  // [CLS], when the window does not hold the whole answer), the reference it came from, and each token's code
  // points of that context ({-1, -1} outside the context).
  std::int64_t answer_start = 0, answer_end = 0;
  std::size_t reference = 0;
  std::vector<tokenizer::Span> context_offsets;
};

// Question answering: what SQuAD's metrics compare a prediction with, one per line.
struct AnswerReference {
  std::string context;
  std::vector<std::string> answers;  // empty: the context holds no answer
};

struct TrainingData {
  std::vector<TrainingExample> examples;
  std::size_t max_tokens = 0;               // the longest example's tokens (all its sequences)
  std::vector<AnswerReference> references;  // question answering, by line
};

// What a run decided before reading the examples: the labels, the tokenizer and the truncation length.
struct DataPlan {
  TrainingTask task = TrainingTask::kTextClassification;
  ProblemType problem = ProblemType::kSingleLabel;
  std::vector<std::string> labels;  // id order; empty for masked LM, multiple choice, QA
  std::int64_t max_length = 512;
  bool label_all_tokens = false;
  bool token_types = false;       // the model has token types (type_vocab_size > 0)
  std::size_t choices = 0;        // multiple choice: every example's choice count
  std::int64_t doc_stride = 128;  // question answering: the tokens neighbouring windows share
};

// The label set of a classification run: `given` (--labels), else the checkpoint's id2label unless it holds
// HF's default LABEL_<i> names, else the sorted distinct names of the training file (integer labels: 0..max).
std::vector<std::string> decide_labels(TrainerOptions const& options, ModelConfig const& config);

// Reads `file` (JSON lines) into examples; every refusal names the file and the 1-based line.
TrainingData read_training_data(std::filesystem::path const& file, DataPlan& plan, tokenizer::Tokenizer const& tok);

// A batch of examples with their targets; `mask_seed` draws masked LM's masking (the targets depend on it).
struct TrainingBatch {
  Batch batch;
  TrainingTargets targets;
  std::int64_t tokens = 0;
};
TrainingBatch make_training_batch(std::vector<TrainingExample const*> const& examples, DataPlan const& plan,
                                  std::int64_t mask_id, std::int64_t vocab_size, double mlm_probability,
                                  std::uint64_t mask_seed);

// PyTorch's CPU torch.randperm(n, generator=torch.Generator().manual_seed(seed)), exactly (torch 1.13-2.x for n
// below 2^32 / 20: mt19937 seeded with the seed's low 32 bits, then for i in [0, n - 1) swap r[i] and
// r[i + mt() % (n - i)]). HF's SeedableRandomSampler orders epoch e by it with seed + e.
std::vector<std::int64_t> torch_randperm(std::int64_t n, std::uint64_t seed);

// ---- Question answering's metric (training_qa.cpp) ----

struct SquadScores {
  double exact_match = 0.0;  // percent, as the squad metric reports them
  double f1 = 0.0;
};
// The squad metric: per prediction the best exact match and token F1 against its reference's answers, after
// normalize_answer (lower case, ASCII punctuation and the articles a / an / the removed, whitespace collapsed).
// A reference without answers counts the empty answer.
SquadScores squad_scores(std::vector<std::string> const& predictions, std::vector<AnswerReference> const& references);

// ---- The loop (trainer.cpp) ----

struct TrainingProgress {
  std::int64_t step = 0;
  std::int64_t total_steps = 0;
  double epoch = 0.0;
  double loss = 0.0;  // the mean loss of the steps since the last report
  double learning_rate = 0.0;
  double grad_norm = 0.0;
  double tokens_per_second = 0.0;
  bool logging_step = false;  // a --logging-steps boundary (or the last step): `loss` covers the steps since the last
};

struct TrainerHooks {
  std::function<void(TrainingProgress const&)> on_step;       // after every optimizer step
  std::function<void(std::string const& json_line)> on_eval;  // each evaluation's metrics
  std::function<void(std::string const& message)> on_note;    // a line for the user (resuming, stopping)
  std::function<bool()> should_stop;  // checked after each optimizer step: true writes a checkpoint and ends
};

struct TrainingResult {
  std::int64_t global_step = 0;
  double epoch = 0.0;
  double train_loss = 0.0;  // the mean loss over every optimizer step of the run (resumed ones included)
  bool interrupted = false;
  std::filesystem::path checkpoint;  // interrupted: the checkpoint written
};

// Decides the labels, reads and checks the data, probes the output directory, then trains; every refusal of the
// input comes before the first step. Every backend trains in float32 (eigen, kokkos, cuda).
TrainingResult train(TrainerOptions const& options, TrainerHooks const& hooks = {});

// ---- Checkpoints (training_checkpoint.cpp) ----

// Where a run stands, as trainer_state.json keeps it.
struct TrainerPosition {
  std::int64_t global_step = 0;
  std::int64_t epoch = 0;          // the epoch under way
  std::int64_t micro_batches = 0;  // its micro-batches already trained
  double loss_sum = 0.0;           // the sum of every step's loss so far
  std::uint64_t seed = 42;
  std::int64_t batch_size = 0;
  std::int64_t gradient_accumulation_steps = 0;
  std::int64_t examples = 0;
};

// What every model directory written holds beside the weights: config.json's text, the tokenizer files' directory,
// and each tensor's shape (TrainingSession::weights() gives flat values).
struct ModelFiles {
  std::string config_json;
  std::filesystem::path tokenizer_dir;
  std::map<std::string, std::vector<std::int64_t>> shapes;  // TrainingSession::shapes(), under HF names
};

// Writes config.json, model.safetensors (every weight under its HF name) and the tokenizer files into `directory`,
// each file replaced atomically.
void write_model_files(std::filesystem::path const& directory, ModelFiles const& files,
                       std::vector<std::pair<std::string, std::vector<float>>> const& weights);

// config.json of the trained model: the source's text with architectures, labels, problem type and dtype set.
std::string trained_config_json(std::string const& source_config, ModelConfig const& config, DataPlan const& plan);

// OUT/checkpoint-<step>/: the model files, training_state.safetensors and trainer_state.json, built in a
// temporary sibling and renamed into place, so that a failed write leaves the previous checkpoints as they were.
std::filesystem::path write_training_checkpoint(std::filesystem::path const& output, ModelFiles const& files,
                                                TrainingSession const& session, TrainerPosition const& position);

// The newest OUT/checkpoint-<step>/ holding trainer_state.json, if any.
std::optional<std::filesystem::path> newest_checkpoint(std::filesystem::path const& output);
TrainerPosition read_trainer_position(std::filesystem::path const& checkpoint);
TrainingState read_training_state(std::filesystem::path const& checkpoint);

// Creates `output` when missing and checks that a file can be made in it (before any training).
void probe_output_directory(std::filesystem::path const& output);

}  // namespace flashdeberta::runtime

// What the training sources of runtime/src share, private to them: the JSON-lines reading of every task
// (training_data.cpp defines it; training_qa.cpp reads question answering with it; every refusal names the file
// and the 1-based line), the seed mixing, and the evaluation (training_evaluation.cpp, training_qa.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/io/json.hpp"
#include "flashdeberta/runtime/trainer.hpp"

namespace flashdeberta::runtime {

// splitmix64: decorrelates the seeds drawn from one run seed (dropout, masked LM's masks, per example).
inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// ---- Evaluation (training_evaluation.cpp) ----

struct Evaluation {
  double loss = 0.0;
  std::size_t examples = 0;
  nlohmann::ordered_json metrics = nlohmann::ordered_json::object();  // HF's names: eval_loss, eval_accuracy, ...
};

// The loss and the task's metrics over `data`, batch by batch without dropout: accuracy and macro-F1
// (classification, multiple choice), seqeval's entity scores (token classification), perplexity (masked LM),
// SQuAD's exact match and F1 (question answering).
Evaluation evaluate(TrainingSession& session, TrainingData const& data, DataPlan const& plan,
                    TrainerOptions const& options, std::int64_t mask_id, std::int64_t vocab);

// ---- Question answering's evaluation (training_qa.cpp) ----

// One window's start and end logits over its tokens, and each token's code points of the context.
struct WindowLogits {
  std::vector<float> start, end;
  std::vector<tokenizer::Span> const* offsets = nullptr;  // {-1, -1} outside the context
};

// run_qa's postprocess_qa_predictions: the best-scoring span (start logit + end logit; the 20 best starts and
// ends of each window, end >= start, at most 30 tokens) over an example's windows, as text of its context.
std::string best_answer(std::vector<WindowLogits> const& windows, std::string const& context);

}  // namespace flashdeberta::runtime

namespace flashdeberta::runtime::detail {

struct Line {
  std::size_t number = 0;  // 1-based
  io::Json doc;
};

// "train.jsonl line 3: <message>"
[[noreturn]] void refuse(std::filesystem::path const& file, std::size_t line, std::string const& message);

// Every non-blank line of `file` as a JSON object; an empty file is refused.
std::vector<Line> read_json_lines(std::filesystem::path const& file);

// The column `name` of a line; its absence (or null) is refused, naming what was `expected`.
io::Json const& column(std::filesystem::path const& file, Line const& line, std::string const& name,
                       std::string const& expected);
std::string const& string_column(std::filesystem::path const& file, Line const& line, std::string const& name);

// Tokenizer refusals (invalid UTF-8, too many tokens) named by file and line.
template <class Fn>
auto tokenize_at(std::filesystem::path const& file, std::size_t line, Fn&& fn) {
  try {
    return fn();
  } catch (Error const& e) {
    refuse(file, line, std::string("the tokenizer refuses the text: ") + e.what());
  }
}

// An encoding as a model input: ids, token types when the model has them, the special tokens marked.
TrainingSequence sequence_of(tokenizer::Encoding const& e, bool token_types);

// Question answering (training_qa.cpp): HF's run_qa features of one line, a window per doc_stride step, each with
// its answer's token positions; the line's context and answers go to `data.references` for SQuAD's metrics.
void read_question_answering(std::filesystem::path const& file, Line const& line, DataPlan const& plan,
                             tokenizer::Tokenizer const& tok, TrainingData& data);

}  // namespace flashdeberta::runtime::detail

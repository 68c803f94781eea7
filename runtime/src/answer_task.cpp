// The question-answering task: HF's (transformers 4.x) QuestionAnsweringPipeline with a fast tokenizer. The
// question and context are cut into windows (qa_windows.hpp), every window runs through the run's HeadRunner
// in one call, and each window's spans (question_answering.hpp) are merged into the answers.
#include <algorithm>
#include <string>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/pipelines/qa_windows.hpp"
#include "flashdeberta/runtime/pipeline.hpp"

namespace flashdeberta::runtime {

namespace {

bool blank(std::string const& s) { return s.find_first_not_of(" \t\r\n") == std::string::npos; }

}  // namespace

std::vector<Answer> Pipeline::answers(std::string const& question, std::string const& context,
                                      AnswerOptions const& options, TaskRun const& run) const {
  std::string const name = run.names(0);
  if (options.top_k < 1) throw UsageError("top_k parameter should be >= 1 (got 0)");
  if (options.max_answer_len < 1) throw UsageError("max_answer_len parameter should be >= 1 (got 0)");
  std::size_t max_seq_len = kMaxAnswerWindow;
  if (std::optional<std::int64_t> const m = tokenizer_->model_max_length(); m && *m > 0)
    max_seq_len = std::min<std::size_t>(max_seq_len, static_cast<std::size_t>(*m));
  max_seq_len = options.max_seq_len.value_or(max_seq_len);
  if (max_seq_len < 1) throw UsageError("max_seq_len must be at least 1, not 0");
  std::size_t const doc_stride = options.doc_stride.value_or(std::min<std::size_t>(max_seq_len / 2, 128));
  if (doc_stride > max_seq_len) {
    throw UsageError("`doc_stride` (" + std::to_string(doc_stride) + ") is larger than `max_seq_len` (" +
                     std::to_string(max_seq_len) + ")");
  }
  if (blank(question)) throw InputError(InputError::Kind::kInvalid, name + ": the question is empty");
  if (blank(context)) throw InputError(InputError::Kind::kInvalid, name + ": the context is empty");
  require_text_bytes(question.size() + context.size(), name, run.limit.read);

  // A question too long for max_seq_len, or a doc_stride the windows cannot take: the call's settings.
  std::vector<tokenizer::Encoding> windows =
      checked_windows(name, run.limit, config_, "question answering:", [&](std::size_t token_limit) {
        return pipelines::question_context_windows(*tokenizer_, question, context, max_seq_len, doc_stride,
                                                   token_limit);
      });
  std::vector<std::size_t> const sizes = sequence_sizes(windows);
  HeadOutput const out = run.forward(windows);
  std::vector<std::vector<float>> const start = rows_by_sequence(out["start_logits"], sizes);
  std::vector<std::vector<float>> const end = rows_by_sequence(out["end_logits"], sizes);
  std::vector<std::vector<pipelines::AnswerSpan>> spans;
  float null_score = 1000000.0f;  // HF's min_null_score starts "large and positive"
  for (std::size_t w = 0; w < windows.size(); ++w) {
    float window_null = 0.0f;
    spans.push_back(pipelines::window_answer_spans(windows[w], start[w], end[w], tokenizer_->special_ids().cls,
                                                   options.top_k, options.max_answer_len, options.align_to_words,
                                                   &window_null));
    null_score = std::min(null_score, window_null);
  }
  return pipelines::merge_window_answers(spans, context, options.top_k, options.handle_impossible_answer, null_score);
}

Answer Pipeline::answer(std::string const& question, std::string const& context, TaskRun const& run) const {
  std::vector<Answer> const best = answers(question, context, AnswerOptions{}, run);
  FLASHDEBERTA_REQUIRE(!best.empty(), run.names(0) << ": the context has no token to answer with");
  return best.front();
}

}  // namespace flashdeberta::runtime

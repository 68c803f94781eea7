// flashdeberta qa: HF's question-answering pipeline with its defaults (top_k 1, max_answer_len 15, no
// impossible answer): the best answer span of the context, its score and its characters.
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "flashdeberta/pipelines/question_answering.hpp"
#include "flashdeberta/pipelines/text_span.hpp"
#include "pipeline_common.hpp"

namespace flashdeberta::cli {

namespace {

// HF's pipeline splits longer inputs into overlapping windows of 384 tokens (stride 128); this one
// window is all qa handles.
constexpr std::size_t kMaxWindow = 384;

}  // namespace

std::string qa_help() {
  return "usage: flashdeberta qa --model DIR --question Q --context C [options]\n"
         "\n"
         "Answers Q from C with a question-answering checkpoint (architectures Deberta*ForQuestionAnswering),\n"
         "as HF's question-answering pipeline with its defaults (top_k 1, max_answer_len 15, no impossible\n"
         "answer). Prints {\"question\": ..., \"score\", \"start\", \"end\", \"answer\"}: the span of at most 15\n"
         "context tokens with the largest start x end probability (softmax over the context tokens and\n"
         "[CLS]), widened to whole words; start and end count Unicode code points of C and answer is that\n"
         "part of C. Question and context together may take at most 384 tokens (HF would split a longer\n"
         "context into windows).\n"
         "\n"
         "  --question Q         the question\n"
         "  --context C          the text holding the answer\n" +
         pipeline_common_help();
}

int qa_command(std::span<char const* const> args) {
  ExtraOption const extras[] = {{"question", true}, {"context", true}};
  auto const options = parse_pipeline_options("qa", args, extras, false);
  if (!options) {
    std::cout << qa_help();
    return 0;
  }
  if (options->question->find_first_not_of(" \t\r\n") == std::string::npos) {
    throw UsageError("--question is empty (see 'flashdeberta qa --help')");
  }
  if (options->context->find_first_not_of(" \t\r\n") == std::string::npos) {
    throw UsageError("--context is empty (see 'flashdeberta qa --help')");
  }
  Pipeline const pipeline(*options, HeadKind::kQuestionAnswering, "qa");
  tokenizer::Tokenizer const& tok = pipeline.tokenizer();
  tokenizer::Encoding const e = pipeline.encode(*options->question, 1, &*options->context);
  FLASHDEBERTA_REQUIRE(e.size() <= kMaxWindow, "the question and context take "
                                                   << e.size() << " tokens, more than the " << kMaxWindow
                                                   << " of one window (HF's pipeline would split the context "
                                                      "into overlapping windows, which qa does not do yet)");
  std::vector<tokenizer::Encoding> const encodings = {e};
  std::size_t const sizes[] = {e.size()};
  HeadOutput const out = pipeline.forward(encodings, std::nullopt, 1);
  std::vector<float> const start = rows_by_sequence(out["start_logits"], sizes).front();
  std::vector<float> const end = rows_by_sequence(out["end_logits"], sizes).front();
  auto const span = pipelines::best_answer_span(e, start, end, tok.special_ids().cls);
  FLASHDEBERTA_REQUIRE(span.has_value(), "the context has no token to answer with");
  nlohmann::ordered_json line;
  line["question"] = *options->question;
  line["score"] = span->score;
  line["start"] = span->start;
  line["end"] = span->end;
  line["answer"] = pipelines::substr_code_points(*options->context, span->start, span->end);
  std::cout << line.dump() << '\n';
  return 0;
}

}  // namespace flashdeberta::cli

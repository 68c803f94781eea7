// flashdeberta qa: HF's question-answering pipeline with its defaults (top_k 1, max_answer_len 15, no
// impossible answer): the best answer span of the context, its score and its characters.
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "pipeline_common.hpp"

namespace flashdeberta::cli {

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
  auto const pipeline = load_pipeline(*options, HeadKind::kQuestionAnswering, "qa");
  runtime::Answer const a = pipeline->answer(*options->question, *options->context, text_run(*pipeline, 1));
  JsonOut line = {{"question", *options->question}};
  line.update(runtime::answer_json(a));
  print_line(line);
  return 0;
}

}  // namespace flashdeberta::cli

// flashdeberta qa: HF's question-answering pipeline with its defaults (top_k 1, max_answer_len 15, no
// impossible answer, windows of 384 tokens sharing 128): the best answer span of the context, its score and
// its characters.
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "pipeline_common.hpp"

namespace flashdeberta::cli {

int qa_command(std::span<char const* const> args) {
  auto const options = parse_pipeline_options("qa", args);
  if (!options) return 0;  // --help printed the help
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

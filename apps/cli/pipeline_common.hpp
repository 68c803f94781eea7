// What the pipeline commands (fill-mask, classify, ner, qa, zero-shot, rerank, gliner) share: their options
// (pipeline_options.cpp), the checkpoint loaded with --timing, texts from the command line or stdin in
// batches, and the progress bar.
// The tasks themselves are the runtime's (runtime/include/flashdeberta/runtime/pipeline.hpp), shared with
// the Python package and the server.
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
#include "flashdeberta/core/model_config.hpp"
#include "flashdeberta/gliner/gliner_decoding.hpp"
#include "flashdeberta/heads/head_kind.hpp"
#include "flashdeberta/heads/head_output.hpp"
#include "flashdeberta/runtime/pipeline.hpp"
#include "flashdeberta/runtime/task_json.hpp"
#include "flashdeberta/tokenizer/tokenizer.hpp"

namespace flashdeberta::cli {

struct PipelineOptions {
  CommonOptions common;
  std::optional<std::filesystem::path> tokenizer;  // default: --model
  std::vector<std::string> texts;                  // empty: one text per line of stdin
  bool progress = false;                           // --progress
  bool timing = false;                             // --timing: load and run times on stderr
  bool stop_on_error = false;                      // --on-error stop: the first text refused ends the command
  std::int64_t batch_size = 8;
  std::optional<std::int64_t> top_k;                  // fill-mask (default 5), classify (default: every label)
  std::optional<pipelines::Aggregation> aggregation;  // ner --aggregation-strategy (default simple)
  std::optional<std::string> question;                // qa
  std::optional<std::string> context;                 // qa
  // The pair tasks' options.
  std::optional<std::string> pair;                  // classify --pair: every text's second sequence
  bool jsonl = false;                               // classify --jsonl: stdin lines are {"text", "text_pair"}
  std::optional<std::string> labels;                // zero-shot --labels, as given (comma-separated)
  std::optional<std::string> hypothesis_template;   // zero-shot
  bool multi_label = false;                         // zero-shot
  std::optional<std::string> query;                 // rerank
  std::optional<std::int64_t> top_n;                // rerank
  bool raw_scores = false;                          // rerank
  bool return_text = false;                         // rerank
  std::optional<std::int64_t> max_length;           // rerank: pair truncation
  std::optional<tokenizer::Truncation> truncation;  // rerank
  std::optional<double> threshold;                  // gliner (default 0.5)
  bool nested = false;                              // gliner --nested: flat_ner false
  std::optional<GlinerLongText> long_text;          // gliner --long-text
  std::optional<std::int64_t> window_overlap;       // gliner --window-overlap
};

// Parses `args` (after the name of `command`, "fill-mask"): the options every pipeline command takes, the
// command's own, and its TEXT arguments. nullopt: --help was given and the help printed.
std::optional<PipelineOptions> parse_pipeline_options(std::string_view command, std::span<char const* const> args);

using runtime::JsonOut;
using runtime::kMaxTextBytesPerToken;
using runtime::max_text_bytes;
using runtime::Pipeline;

// Refuses text (line) `index` with `message`: "text 3: <message>", exit status 1.
[[noreturn]] void fail_text(std::size_t index, std::string const& message);

// The run of a task over texts numbered from `first` ("text 3" in messages), bounded by --max-tokens.
inline runtime::TaskRun text_run(Pipeline const& pipeline, std::size_t first) {
  return pipeline.local_run(runtime::InputNames::numbered("text", first));
}

// Prints one JSON line on stdout.
void print_line(JsonOut const& line);

// The checkpoint of `options` with its tokenizer and the head `command` needs (runtime::Pipeline), the
// load time on stderr with --timing.
std::unique_ptr<Pipeline const> load_pipeline(PipelineOptions const& options, HeadKind head, std::string_view command);

// Calls `run(texts, first)` for batches of `batch_size` texts from options.texts or stdin lines (first:
// the 1-based number of the batch's first text). A text the task refuses (runtime::InputError) fails its
// batch; unless options.stop_on_error, the batch's texts then run one by one and each refused one is
// answered on stdout, in its place, with {"line": N, "error": "text N: ..."}, the others as usual. Returns
// how many texts were refused, after one line on stderr saying so (the command then exits 1); with
// stop_on_error the first refusal is thrown. Draws a progress bar on stderr when asked (--progress)
// or, for texts given as arguments, when stdin and stderr are terminals; with stderr not a terminal (a log
// file), --progress prints a line per update instead (progress_line). A stdin line longer than
// max_text_bytes(--max-tokens) is refused before the rest of it is read.
std::size_t for_each_batch(PipelineOptions const& options,
                           std::function<void(std::vector<std::string> const& texts, std::size_t first)> const& run);

// A pipeline command's exit status once its texts ran: 1 when any was refused.
inline int exit_status(std::size_t refused) { return refused > 0 ? 1 : 0; }

// The line --progress prints when stderr is not a terminal, at most once a second and at the end:
// "flashdeberta: 16/40 texts, 123.4 texts/s" (total 0, for stdin: "flashdeberta: 16 texts, 123.4 texts/s").
std::string progress_line(std::size_t done, std::size_t total, double texts_per_second);

// std::getline that stops at `limit` bytes: a longer line is refused (as text `index`, naming --max-tokens
// max_tokens) before the rest of it is read, so a huge input without newlines cannot fill memory. False at
// the end of the input.
bool read_bounded_line(std::istream& in, std::string& line, std::size_t limit, std::size_t index,
                       std::int64_t max_tokens);

}  // namespace flashdeberta::cli

// flashdeberta rerank: passages ordered by their relevance to a query, scored by a cross-encoder (a
// sequence-classification checkpoint of one label run on (query, passage) pairs), printed as
// text-embeddings-inference's /rerank answers: [{"index", "score"}, ...] best first.
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "pipeline_common.hpp"

namespace flashdeberta::cli {

int rerank_command(std::span<char const* const> args) {
  auto const options = parse_pipeline_options("rerank", args);
  if (!options) return 0;  // --help printed the help
  auto const pipeline = load_pipeline(*options, HeadKind::kSequenceClassification, "rerank");
  std::optional<std::size_t> const max_length =
      options->max_length ? std::optional<std::size_t>(static_cast<std::size_t>(*options->max_length)) : std::nullopt;
  runtime::Truncate const truncate =
      pipeline->truncation(options->truncation, max_length, "--truncation", "--max-length");
  std::string const& query = *options->query;
  pipeline->check_rerank();  // a cross-encoder, before any input is read

  // Batches of passages run one forward pass each; the order is over all of them, so it comes at the end.
  std::vector<float> logits;
  std::vector<std::string> passages;  // kept for --return-text only
  for_each_batch(*options, [&](std::vector<std::string> const& batch, std::size_t first) {
    std::vector<float> const part = pipeline->rerank_logits(query, batch, truncate, text_run(*pipeline, first));
    logits.insert(logits.end(), part.begin(), part.end());
    if (options->return_text) passages.insert(passages.end(), batch.begin(), batch.end());
  });
  std::optional<std::size_t> const top_n =
      options->top_n ? std::optional<std::size_t>(static_cast<std::size_t>(*options->top_n)) : std::nullopt;
  print_line(
      runtime::rerank_json(pipelines::rerank(logits, top_n, options->raw_scores), passages, options->return_text));
  return 0;
}

}  // namespace flashdeberta::cli

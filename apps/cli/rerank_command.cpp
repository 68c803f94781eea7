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

std::string rerank_help() {
  return "usage: flashdeberta rerank --model DIR --query Q [--top-n N] [--raw-scores] [--return-text]\n"
         "                           [--max-length N [--truncation S]] [options] [PASSAGE...]\n"
         "\n"
         "Orders the PASSAGEs (or, without them, the lines of stdin) by relevance to Q with a cross-encoder:\n"
         "a sequence-classification checkpoint with one label, run on the pairs [CLS] Q [SEP] PASSAGE [SEP]\n"
         "(HF's tokenizer(query, passage)). Prints one line once every passage is scored, the JSON array\n"
         "text-embeddings-inference's /rerank returns: [{\"index\": I, \"score\": S}, ...], best first, I\n"
         "counting passages from 0 and S the sigmoid of the logit (HF's text-classification score for one\n"
         "label). Passages of equal score keep their order. Errors name passage I as 'text I+1'.\n"
         "\n"
         "  --query Q            the query\n"
         "  --top-n N            the N best passages only (default: all)\n"
         "  --raw-scores         the logits themselves as scores\n"
         "  --return-text        each entry holds its passage too: {\"index\", \"text\", \"score\"}\n"
         "  --max-length N       cut each pair to N tokens (special tokens included), as HF's tokenizer with\n"
         "                       truncation and max_length; default: no cut\n"
         "  --truncation S       how: longest_first (default), only_second (the passage only), only_first\n"
         "                       (the query only) or do_not_truncate; without --max-length, to the\n"
         "                       tokenizer's model_max_length\n" +
         pipeline_common_help();
}

int rerank_command(std::span<char const* const> args) {
  ExtraOption const extras[] = {
      {.name = "query", .required = true},   {.name = "top-n"},      {.name = "raw-scores", .flag = true},
      {.name = "return-text", .flag = true}, {.name = "max-length"}, {.name = "truncation"}};
  auto const options = parse_pipeline_options("rerank", args, extras, true);
  if (!options) {
    std::cout << rerank_help();
    return 0;
  }
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

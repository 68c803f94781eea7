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

namespace {

// --max-length N [--truncation S]: N tokens per pair, cut by S (default longest_first). --truncation alone
// cuts to the tokenizer's model_max_length, as HF's tokenizer does with truncation and no max_length.
runtime::Truncate truncation_of(PipelineOptions const& options, Pipeline const& pipeline) {
  runtime::Truncate truncate;
  if (options.truncation) truncate.strategy = *options.truncation;
  if (options.max_length) {
    truncate.max_length = static_cast<std::size_t>(*options.max_length);
  } else if (options.truncation && *options.truncation != tokenizer::Truncation::kNone) {
    std::optional<std::int64_t> const model_max_length = pipeline.tokenizer().model_max_length();
    if (!model_max_length) {
      throw UsageError("--truncation " + std::string(tokenizer::truncation_name(*options.truncation)) +
                       " without --max-length cuts to the tokenizer's model_max_length, but " +
                       (options.tokenizer.value_or(options.common.model) / "tokenizer_config.json").string() +
                       " gives none (add --max-length N)");
    }
    truncate.max_length = static_cast<std::size_t>(*model_max_length);
  }
  return truncate;
}

}  // namespace

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
  runtime::Truncate const truncate = truncation_of(*options, *pipeline);
  std::string const& query = *options->query;
  // No passage yet: this checks that the checkpoint is a cross-encoder before any input is read.
  pipeline->rerank(query, {}, std::nullopt, true, truncate);

  // Batches of passages run one forward pass each; the order is over all of them, so it comes at the end.
  std::vector<float> logits;
  std::vector<std::string> passages;  // kept for --return-text only
  for_each_batch(*options, [&](std::vector<std::string> const& batch, std::size_t first) {
    std::vector<runtime::RerankScore> const scores =
        pipeline->rerank(query, batch, std::nullopt, true, truncate, first);
    logits.resize(first - 1 + batch.size());
    for (runtime::RerankScore const& s : scores) logits[first - 1 + s.index] = s.score;
    if (options->return_text) passages.insert(passages.end(), batch.begin(), batch.end());
  });
  std::optional<std::size_t> const top_n =
      options->top_n ? std::optional<std::size_t>(static_cast<std::size_t>(*options->top_n)) : std::nullopt;
  nlohmann::ordered_json ranked = nlohmann::ordered_json::array();
  for (pipelines::RerankScore const& r : pipelines::rerank(logits, top_n, options->raw_scores)) {
    nlohmann::ordered_json entry;
    entry["index"] = r.index;
    if (options->return_text) entry["text"] = passages[r.index];
    entry["score"] = r.score;
    ranked.push_back(std::move(entry));
  }
  std::cout << ranked.dump() << '\n';
  return 0;
}

}  // namespace flashdeberta::cli

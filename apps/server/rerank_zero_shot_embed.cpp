// The routes whose forward rows are pairs or pooled states: /rerank (a query paired with each passage),
// /zero-shot (each text paired with a hypothesis per candidate label) and /embed (pooled last hidden
// states). Each mirrors the runtime's task of the same name (runtime/src/pair_tasks.cpp, what the CLI's
// rerank and zero-shot commands run), with the library's post-processing (pipelines/rerank.hpp,
// zero_shot.hpp, embedding.hpp), so the answers are the CLI's.
#include <algorithm>

#include "flashdeberta/pipelines/rerank.hpp"
#include "server/api_error.hpp"
#include "server/model_service.hpp"

namespace flashdeberta::cli::server {

namespace {

std::string indexed(std::string_view field, std::size_t i) {
  return std::string(field) + "[" + std::to_string(i) + "]";
}

std::vector<std::size_t> sizes_of(std::vector<tokenizer::Encoding> const& encodings) {
  std::vector<std::size_t> sizes;
  for (tokenizer::Encoding const& e : encodings) sizes.push_back(e.size());
  return sizes;
}

}  // namespace

JsonOut ModelService::rerank(RerankRequest const& request) const {
  require(ModelRoute::kRerank);
  std::vector<tokenizer::Encoding> encodings;  // (query, passage) pairs, as TEI and the CLI's rerank
  for (std::size_t i = 0; i < request.texts.size(); ++i)
    encodings.push_back(encode(request.query, &request.texts[i], request.truncate, indexed("texts", i)));
  std::vector<std::size_t> const sizes = sizes_of(encodings);
  HeadOutput const out = forward(encodings);
  std::vector<float> logits;
  for (std::vector<float> const& row : runtime::rows_by_sequence(out["logits"], sizes)) logits.push_back(row.at(0));
  JsonOut ranks = JsonOut::array();
  for (pipelines::RerankScore const& r : pipelines::rerank(logits, request.top_n, request.raw_scores)) {
    JsonOut rank;
    rank["index"] = r.index;
    if (request.return_text) rank["text"] = request.texts[r.index];
    rank["score"] = r.score;
    ranks.push_back(std::move(rank));
  }
  return ranks;
}

JsonOut ModelService::zero_shot(ZeroShotRequest const& request) const {
  require(ModelRoute::kZeroShot);
  std::vector<std::string> const labels = request.labels_as_text
                                              ? pipelines::parse_candidate_labels(request.candidate_labels.at(0))
                                              : request.candidate_labels;
  if (labels.empty()) fail_empty("candidate_labels names no label; send at least one");
  std::vector<std::string> hypotheses;
  try {
    hypotheses = pipelines::hypotheses(
        request.hypothesis_template.value_or(std::string(pipelines::kDefaultHypothesisTemplate)), labels);
  } catch (Error const& e) {
    fail_validation(e.what());
  }
  // HF tokenizes each pair with truncation only_first and no max_length: the premise is cut to the
  // tokenizer's model_max_length when it has one and the premise can give up enough tokens; otherwise the
  // pair runs whole (here: within --max-input-length).
  std::optional<std::int64_t> const model_max_length = pipeline_->tokenizer().model_max_length();
  std::vector<tokenizer::Encoding> encodings;
  for (std::size_t i = 0; i < request.inputs.size(); ++i) {
    std::string const name = request.batch ? indexed("inputs", i) : std::string("inputs");
    for (std::size_t c = 0; c < hypotheses.size(); ++c) {
      tokenizer::Encoding e =
          encode(request.inputs[i], &hypotheses[c], false, name, tokenizer::Truncation::kNone, kUnbounded);
      std::size_t const premise = static_cast<std::size_t>(std::count(e.sequence_ids.begin(), e.sequence_ids.end(), 0));
      if (model_max_length && e.size() > static_cast<std::size_t>(*model_max_length) &&
          premise > e.size() - static_cast<std::size_t>(*model_max_length)) {
        e = encode(request.inputs[i], &hypotheses[c], true, name, tokenizer::Truncation::kOnlyFirst,
                   static_cast<std::size_t>(*model_max_length));
      }
      if (static_cast<std::int64_t>(e.size()) > max_input_length_) {
        fail_validation(name + " with the hypothesis of candidate label '" + labels[c] + "' holds " +
                        std::to_string(e.size()) + " tokens, more than --max-input-length " +
                        std::to_string(max_input_length_));
      }
      encodings.push_back(std::move(e));
    }
  }
  std::vector<std::size_t> const sizes = sizes_of(encodings);
  HeadOutput const out = forward(encodings);
  std::vector<std::vector<float>> const rows = runtime::rows_by_sequence(out["logits"], sizes);
  JsonOut all = JsonOut::array();
  for (std::size_t i = 0; i < request.inputs.size(); ++i) {
    std::vector<float> logits;  // (candidates, num_labels) of this text
    for (std::size_t c = 0; c < hypotheses.size(); ++c) {
      std::vector<float> const& row = rows[i * hypotheses.size() + c];
      logits.insert(logits.end(), row.begin(), row.end());
    }
    std::vector<float> const scores =
        pipelines::zero_shot_scores(logits, labels_.size(), *nli_labels_, request.multi_label);
    pipelines::ZeroShotResult const ranked = pipelines::rank_candidates(labels, scores);
    JsonOut result;
    result["sequence"] = request.inputs[i];
    result["labels"] = ranked.labels;
    result["scores"] = ranked.scores;
    all.push_back(std::move(result));
  }
  return request.batch ? all : all.at(0);
}

JsonOut ModelService::embed(EmbedRequest const& request) const {
  require(ModelRoute::kEmbed);
  std::vector<tokenizer::Encoding> encodings;
  for (std::size_t i = 0; i < request.inputs.size(); ++i) {
    std::string const name = request.inputs.size() > 1 ? indexed("inputs", i) : std::string("inputs");
    encodings.push_back(encode(request.inputs[i], nullptr, request.truncate, name));
  }
  std::vector<std::size_t> const sizes = sizes_of(encodings);
  HeadOutput const out = forward(encodings);
  HostHeadTensor const& hidden = out["last_hidden_state"];
  auto const width = static_cast<std::size_t>(hidden.width);
  JsonOut all = JsonOut::array();
  for (std::vector<float> const& states : runtime::rows_by_sequence(hidden, sizes)) {
    std::vector<float> vector = pipelines::pool(states, width, options_.pooling);
    if (request.normalize) pipelines::l2_normalize(vector);
    all.push_back(vector);
  }
  return all;  // TEI answers a list of vectors whatever the input
}

}  // namespace flashdeberta::cli::server

// The tasks beyond one text per forward row: zero-shot classification (a text paired with a hypothesis per
// candidate label) and reranking (a query paired with each passage) on a sequence-classification
// checkpoint, and embeddings from the backbone's hidden states. The post-processing is the library's
// (pipelines/zero_shot.hpp, rerank.hpp, embedding.hpp); this is the encoding and batching around it.
#include <algorithm>
#include <string>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/core/quoted_excerpt.hpp"
#include "flashdeberta/runtime/pipeline.hpp"

namespace flashdeberta::runtime {

namespace {

std::string joined(std::vector<std::string> const& labels) {
  std::string out;
  for (std::string const& label : labels) out += (out.empty() ? "" : ", ") + label;
  return out;
}

// "id2label in DIR/config.json holds a, b" (or, without id2label, HF's default names).
std::string labels_description(ModelConfig const& config, std::vector<std::string> const& labels,
                               std::filesystem::path const& config_path) {
  if (config.id2label.empty())
    return config_path.string() + " has no id2label (HF's default labels " + joined(labels) + ")";
  return "id2label in " + config_path.string() + " holds " + joined(labels);
}

std::size_t count_first_sequence(tokenizer::Encoding const& e) {
  return static_cast<std::size_t>(std::count(e.sequence_ids.begin(), e.sequence_ids.end(), 0));
}

}  // namespace

void Pipeline::check_zero_shot(ZeroShotOptions const& options) const {
  if (!nli_labels()) {
    throw UsageError(
        "zero-shot classification needs an NLI checkpoint with an entailment label (one starting with "
        "'entail'), but " +
        labels_description(config_, labels_, config_path_));
  }
  if (options.candidate_labels.size() > options.max_candidate_labels) {
    throw InputError(
        InputError::Kind::kTooLong,
        "candidate_labels holds " + std::to_string(options.candidate_labels.size()) + " labels, more than the " +
            std::to_string(options.max_candidate_labels) + " of " + options.max_labels_option +
            " (each label is one more text-hypothesis pair per text; split the labels over several calls)");
  }
  try {
    (void)pipelines::hypotheses(options.hypothesis_template, options.candidate_labels);
  } catch (Error const& e) {
    throw UsageError(e.what());
  }
}

std::vector<ZeroShotResult> Pipeline::zero_shot(std::span<std::string const> texts, ZeroShotOptions const& options,
                                                TaskRun const& run) const {
  check_zero_shot(options);
  std::vector<std::string> const hypotheses =
      pipelines::hypotheses(options.hypothesis_template, options.candidate_labels);
  if (texts.empty()) return {};

  // HF tokenizes each pair with truncation only_first and no max_length, which cuts the premise to the
  // tokenizer's model_max_length when it has one; when the premise is too short to give up enough tokens,
  // its tokenizer refuses and the pipeline runs the pair whole. So each pair is read uncut (up to the read
  // bound) and bounded as it runs, after that cut.
  InputLimit const read_only{run.limit.read, run.limit.read};
  std::optional<std::int64_t> const model_max_length = tokenizer_->model_max_length();
  std::vector<tokenizer::Encoding> encodings;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    for (std::size_t c = 0; c < hypotheses.size(); ++c) {
      std::string const name = run.names(i) + " with the hypothesis of " + quoted_excerpt(options.candidate_labels[c]);
      tokenizer::Encoding e = encode(texts[i], &hypotheses[c], name, read_only);
      if (model_max_length && e.size() > static_cast<std::size_t>(*model_max_length) &&
          count_first_sequence(e) > e.size() - static_cast<std::size_t>(*model_max_length)) {
        Truncate const cut{static_cast<std::size_t>(*model_max_length), tokenizer::Truncation::kOnlyFirst};
        e = encode(texts[i], &hypotheses[c], name, read_only, cut);
      }
      require_run_bound(e.size(), name, run.limit);
      encodings.push_back(std::move(e));
    }
  }
  std::vector<std::size_t> const sizes = sequence_sizes(encodings);
  HeadOutput const out = run.forward(encodings);
  std::vector<std::vector<float>> const rows = rows_by_sequence(out["logits"], sizes);
  pipelines::NliLabelIds const ids = *nli_labels();
  std::vector<ZeroShotResult> results;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    std::vector<float> logits;  // (candidates, num_labels) of this text
    for (std::size_t c = 0; c < hypotheses.size(); ++c) {
      std::vector<float> const& row = rows[i * hypotheses.size() + c];
      logits.insert(logits.end(), row.begin(), row.end());
    }
    std::vector<float> const scores = pipelines::zero_shot_scores(logits, labels_.size(), ids, options.multi_label);
    results.push_back(pipelines::rank_candidates(options.candidate_labels, scores));
  }
  return results;
}

void Pipeline::check_rerank() const {
  if (config_.num_labels == 1) return;
  throw UsageError(
      "rerank needs a cross-encoder, a sequence-classification checkpoint with one label (one score per query "
      "and passage), but " +
      labels_description(config_, labels_, config_path_) + " (" + std::to_string(config_.num_labels) + " labels)");
}

std::vector<float> Pipeline::rerank_logits(std::string const& query, std::span<std::string const> passages,
                                           Truncate const& truncate, TaskRun const& run) const {
  check_rerank();
  if (passages.empty()) return {};
  // A query too long by itself is refused as the query, not as the first passage it would be paired with: a
  // pair holds every token of its query (and one more special token), so this refuses no pair that fits.
  // Under a cut only the read bound holds (the cut may take its tokens from the query).
  bool const cuts = truncate.max_length.has_value() && truncate.strategy != tokenizer::Truncation::kNone;
  (void)encode(query, nullptr, "query", cuts ? InputLimit{run.limit.read, run.limit.read} : run.limit);
  std::vector<tokenizer::Encoding> encodings;
  for (std::size_t i = 0; i < passages.size(); ++i)
    encodings.push_back(encode(query, &passages[i], run.names(i), run.limit, truncate));
  std::vector<std::size_t> const sizes = sequence_sizes(encodings);
  HeadOutput const out = run.forward(encodings);
  std::vector<float> logits;
  for (std::vector<float> const& row : rows_by_sequence(out["logits"], sizes)) logits.push_back(row.at(0));
  return logits;
}

std::vector<RerankScore> Pipeline::rerank(std::string const& query, std::span<std::string const> passages,
                                          RerankOptions const& options, TaskRun const& run) const {
  return pipelines::rerank(rerank_logits(query, passages, options.truncate, run), options.top_n, options.raw_scores);
}

std::vector<std::vector<float>> Pipeline::embed(std::span<std::string const> texts, EmbedOptions const& options,
                                                TaskRun const& run) const {
  std::vector<tokenizer::Encoding> encodings;
  for (std::size_t i = 0; i < texts.size(); ++i)
    encodings.push_back(encode(texts[i], nullptr, run.names(i), run.limit, options.truncate));
  if (texts.empty()) return {};
  std::vector<std::size_t> const sizes = sequence_sizes(encodings);
  // Embeddings are the backbone's states whatever head the checkpoint has: a pipeline over a head runs its
  // backbone alone, with the call's names and bounds (the server's embedding models have the base head).
  TaskRun const backbone_run{run.names, run.limit, backbone_.get()};
  HeadOutput const out = (head_ == HeadKind::kBase ? run : backbone_run).forward(encodings);
  HostHeadTensor const& hidden = out["last_hidden_state"];
  auto const width = static_cast<std::size_t>(hidden.width);
  std::vector<std::vector<float>> vectors;
  for (std::vector<float> const& states : rows_by_sequence(hidden, sizes)) {
    vectors.push_back(pipelines::pool(states, width, options.pooling));
    if (options.normalize) pipelines::l2_normalize(vectors.back());
  }
  return vectors;
}

}  // namespace flashdeberta::runtime

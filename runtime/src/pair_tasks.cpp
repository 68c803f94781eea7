// The runtime's tasks beyond one text per forward row: zero-shot classification (a text paired with a
// hypothesis per candidate label) and reranking (a query paired with each passage) on a sequence-
// classification checkpoint, and embeddings from the backbone's hidden states. The post-processing is the
// library's (pipelines/zero_shot.hpp, rerank.hpp, embedding.hpp); this is the batching around it.
#include <algorithm>
#include <numeric>
#include <string>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/heads/sequence_classification.hpp"
#include "flashdeberta/runtime/pipeline.hpp"

namespace flashdeberta::runtime {

namespace {

std::string joined(std::vector<std::string> const& labels) {
  std::string out;
  for (std::string const& label : labels) out += (out.empty() ? "" : ", ") + label;
  return out;
}

// "id2label in DIR/config.json holds a, b" (or, without id2label, HF's default names).
std::string labels_description(ModelConfig const& config, std::filesystem::path const& config_path) {
  std::vector<std::string> const labels = label_names(config);
  if (config.id2label.empty())
    return config_path.string() + " has no id2label (HF's default labels " + joined(labels) + ")";
  return "id2label in " + config_path.string() + " holds " + joined(labels);
}

std::size_t count_first_sequence(tokenizer::Encoding const& e) {
  return static_cast<std::size_t>(std::count(e.sequence_ids.begin(), e.sequence_ids.end(), 0));
}

}  // namespace

std::vector<ZeroShotResult> Pipeline::zero_shot(std::span<std::string const> texts,
                                                std::span<std::string const> candidate_labels,
                                                std::string const& hypothesis_template, bool multi_label,
                                                std::size_t first) const {
  std::optional<pipelines::NliLabelIds> const ids = pipelines::nli_label_ids(label_names(config_));
  if (!ids) {
    throw UsageError(
        "zero-shot classification needs an NLI checkpoint with an entailment label (one starting with "
        "'entail'), but " +
        labels_description(config_, config_path_));
  }
  std::vector<std::string> hypotheses;
  try {
    hypotheses = pipelines::hypotheses(hypothesis_template, candidate_labels);
  } catch (Error const& e) {
    throw UsageError(e.what());
  }
  if (texts.empty()) return {};

  // HF tokenizes each pair with truncation only_first and no max_length, which cuts the premise to the
  // tokenizer's model_max_length when it has one; when the premise is too short to give up enough tokens,
  // its tokenizer refuses and the pipeline runs the pair whole.
  std::optional<std::int64_t> const model_max_length = tokenizer_->model_max_length();
  std::size_t const per_text = hypotheses.size();
  std::vector<tokenizer::Encoding> encodings;
  std::vector<std::size_t> numbers;
  std::int64_t total = 0;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    for (std::string const& hypothesis : hypotheses) {
      tokenizer::Encoding e = encode(texts[i], first + i, &hypothesis);
      if (model_max_length && e.size() > static_cast<std::size_t>(*model_max_length) &&
          count_first_sequence(e) > e.size() - static_cast<std::size_t>(*model_max_length)) {
        Truncate const cut{static_cast<std::size_t>(*model_max_length), tokenizer::Truncation::kOnlyFirst};
        e = encode(texts[i], first + i, &hypothesis, cut);
      }
      total += static_cast<std::int64_t>(e.size());
      encodings.push_back(std::move(e));
      numbers.push_back(first + i);
    }
  }
  FLASHDEBERTA_REQUIRE(total <= max_tokens_, "texts " << first << " to " << first + texts.size() - 1 << " with their "
                                                      << per_text << " hypotheses hold " << total
                                                      << " tokens together (each text is run once per candidate "
                                                         "label), more than "
                                                      << limit_names_.max_tokens << " " << max_tokens_
                                                      << limit_names_.remedy(texts.size() > 1));
  HeadOutput const out = model_->forward_head(pack(encodings, numbers), std::nullopt);
  HostHeadTensor const& logits = out["logits"];
  auto const num_labels = static_cast<std::size_t>(config_.num_labels);
  FLASHDEBERTA_REQUIRE(logits.rows == HeadRows::kSequences &&
                           logits.row_count == static_cast<std::int64_t>(encodings.size()) &&
                           logits.width == config_.num_labels,
                       "zero-shot: the logits are " << logits.row_count << " x " << logits.width << ", not "
                                                    << encodings.size() << " pairs x " << num_labels << " labels");
  std::vector<ZeroShotResult> results;
  std::size_t const stride = per_text * num_labels;  // one text's rows: (candidates, num_labels)
  for (std::size_t i = 0; i < texts.size(); ++i) {
    std::span<float const> const rows(logits.values.data() + i * stride, stride);
    std::vector<float> const scores = pipelines::zero_shot_scores(rows, num_labels, *ids, multi_label);
    results.push_back(pipelines::rank_candidates(candidate_labels, scores));
  }
  return results;
}

std::vector<RerankScore> Pipeline::rerank(std::string const& query, std::span<std::string const> passages,
                                          std::optional<std::size_t> top_n, bool raw_scores, Truncate const& truncate,
                                          std::size_t first) const {
  if (config_.num_labels != 1) {
    throw UsageError(
        "rerank needs a cross-encoder, a sequence-classification checkpoint with one label (one score "
        "per query and passage), but " +
        labels_description(config_, config_path_) + " (" + std::to_string(config_.num_labels) + " labels)");
  }
  if (passages.empty()) return {};
  std::vector<tokenizer::Encoding> encodings;
  for (std::size_t i = 0; i < passages.size(); ++i)
    encodings.push_back(encode(query, first + i, &passages[i], truncate));
  HeadOutput const out = forward(encodings, std::nullopt, first);
  HostHeadTensor const& logits = out["logits"];
  FLASHDEBERTA_REQUIRE(logits.rows == HeadRows::kSequences &&
                           logits.row_count == static_cast<std::int64_t>(passages.size()) && logits.width == 1,
                       "rerank: the logits are " << logits.row_count << " x " << logits.width << ", not "
                                                 << passages.size() << " passages x 1");
  return pipelines::rerank(logits.values, top_n, raw_scores);
}

std::vector<std::vector<float>> Pipeline::embed(std::span<std::string const> texts, Pooling pooling, bool normalize,
                                                std::size_t first) const {
  std::vector<tokenizer::Encoding> encodings;
  std::vector<std::size_t> numbers;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    encodings.push_back(encode(texts[i], first + i));
    numbers.push_back(first + i);
  }
  if (texts.empty()) return {};
  std::vector<float> const hidden = model_->forward_to_host(pack(encodings, numbers));  // (total tokens, H)
  auto const width = static_cast<std::size_t>(config_.hidden_size);
  std::size_t tokens = 0;
  for (tokenizer::Encoding const& e : encodings) tokens += e.size();
  FLASHDEBERTA_REQUIRE(tokens * width == hidden.size(),
                       "embed: " << hidden.size() << " hidden values for " << tokens << " tokens of width " << width);
  std::vector<std::vector<float>> vectors;
  std::size_t row = 0;  // the text's first packed token
  for (tokenizer::Encoding const& e : encodings) {
    std::span<float const> const states(hidden.data() + row * width, e.size() * width);
    vectors.push_back(pipelines::pool(states, width, pooling));
    if (normalize) pipelines::l2_normalize(vectors.back());
    row += e.size();
  }
  return vectors;
}

}  // namespace flashdeberta::runtime

#include "flashdeberta/runtime/pipeline.hpp"

#include <algorithm>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/heads/sequence_classification.hpp"
#include "flashdeberta/io/json.hpp"
#include "flashdeberta/io/mapped_file.hpp"

namespace flashdeberta::runtime {

namespace {

// The same strict reader as the model's config (the model has loaded it by now); HF writes null when unset.
std::string read_problem_type(std::filesystem::path const& config_path) {
  io::MappedFile const file = io::MappedFile::open(config_path, "model config");
  std::string_view const text(reinterpret_cast<char const*>(file.bytes().data()), file.size());
  io::Json const root = io::parse_json(text, config_path.string(), "config");
  auto const it = root.is_object() ? root.find("problem_type") : root.end();
  return it != root.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

Pipeline::Pipeline(RuntimeOptions const& options, std::optional<std::filesystem::path> const& tokenizer_dir,
                   HeadKind head, std::string_view task)
    : head_(head) {
  config_ = read_model_config(options.model);
  config_path_ = model_config_file(options.model);
  HeadKind const found = head_kind_from_config(config_);
  if (found != head) {
    std::string names;
    for (std::string const& a : config_.architectures) names += (names.empty() ? "" : ", ") + a;
    throw UsageError(std::string(task) + " needs a " + std::string(head_description(head)) +
                     " checkpoint (architectures " + "Deberta*" + std::string(head_kind_class_suffix(head)) +
                     "), but " + config_path_.string() +
                     (names.empty() ? std::string(" names no architectures (the backbone alone)") : " names " + names));
  }
  max_tokens_ = options.max_tokens;
  limit_names_ = options.limit_names;
  problem_type_ = read_problem_type(config_path_);
  labels_ = label_names(config_);
  tokenizer_dir_ = tokenizer_dir.value_or(options.model);
  tokenizer_.emplace(tokenizer::load_tokenizer(tokenizer_dir_));
  if (head == HeadKind::kMaskedLM) {
    std::int64_t const mask_id = tokenizer_->mask_token_id();
    if (mask_id < 0) {
      throw UsageError(std::string(task) +
                       ": the tokenizer has no mask token ([MASK]), so fill-mask would have nothing to fill");
    }
    mask_token_id_ = mask_id;
  }
  backend_ = std::make_unique<Backend>(options);
  model_ = backend_->load(options.model, config_, head);
  direct_ = std::make_unique<DirectRunner>(*model_, config_, mask_token_id_, max_tokens_);
  backbone_ = std::make_unique<DirectRunner>(*model_, config_, std::nullopt, max_tokens_, RunnerOutput::kBackbone);
}

Pipeline::~Pipeline() {
  direct_.reset();
  backbone_.reset();
  model_.reset();
  backend_.reset();
}

pipelines::ScoreFunction Pipeline::score_function() const {
  return pipelines::classification_function(problem_type_, labels_.size());
}

std::optional<pipelines::NliLabelIds> Pipeline::nli_labels() const { return pipelines::nli_label_ids(labels_); }

Truncate Pipeline::truncation(std::optional<tokenizer::Truncation> strategy, std::optional<std::size_t> max_length,
                              std::string const& strategy_option, std::string const& length_option) const {
  Truncate truncate;
  if (strategy) truncate.strategy = *strategy;
  if (max_length) {
    truncate.max_length = max_length;
  } else if (strategy && *strategy != tokenizer::Truncation::kNone) {
    std::optional<std::int64_t> const model_max_length = tokenizer_->model_max_length();
    if (!model_max_length) {
      throw UsageError(strategy_option + " '" + tokenizer::truncation_name(*strategy) + "' without " + length_option +
                       " cuts to the tokenizer's model_max_length, but " +
                       (tokenizer_dir_ / "tokenizer_config.json").string() + " gives none (add " + length_option +
                       " N)");
    }
    truncate.max_length = static_cast<std::size_t>(*model_max_length);
  }
  return truncate;
}

TaskRun Pipeline::local_run(InputNames names) const {
  return TaskRun{std::move(names), InputLimit::of(max_tokens_, limit_names_), direct_.get()};
}

std::vector<std::vector<float>> rows_by_sequence(HostHeadTensor const& t, std::span<std::size_t const> sizes) {
  std::vector<std::vector<float>> out(sizes.size());
  std::size_t const width = static_cast<std::size_t>(t.width);
  if (t.rows == HeadRows::kSequences) {
    FLASHDEBERTA_REQUIRE(t.row_count == static_cast<std::int64_t>(sizes.size()),
                         t.name << ": " << t.row_count << " rows for " << sizes.size() << " sequences");
    for (std::size_t b = 0; b < sizes.size(); ++b)
      out[b].assign(t.values.begin() + b * width, t.values.begin() + (b + 1) * width);
    return out;
  }
  std::vector<std::size_t> starts(sizes.size() + 1, 0);
  for (std::size_t b = 0; b < sizes.size(); ++b) {
    starts[b + 1] = starts[b] + sizes[b];
    out[b].assign(sizes[b] * width, 0.0f);
  }
  for (std::int64_t r = 0; r < t.row_count; ++r) {
    std::size_t const token = static_cast<std::size_t>(t.tokens[r]);
    auto const next = std::upper_bound(starts.begin(), starts.end(), token);
    std::size_t const b = static_cast<std::size_t>(next - starts.begin()) - 1;
    FLASHDEBERTA_REQUIRE(b < sizes.size(), t.name << ": row " << r << " names token " << token);
    std::copy_n(t.values.begin() + r * width, width, out[b].begin() + (token - starts[b]) * width);
  }
  return out;
}

}  // namespace flashdeberta::runtime

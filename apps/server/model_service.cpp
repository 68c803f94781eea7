#include "server/model_service.hpp"

#include <algorithm>

#include "flashdeberta/config.hpp"
#include "flashdeberta/core/error.hpp"
#include "flashdeberta/heads/sequence_classification.hpp"
#include "server/api_error.hpp"

namespace flashdeberta::cli::server {

using runtime::head_description;

namespace {

std::string joined(std::vector<std::string> const& items) {
  std::string out;
  for (std::string const& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

// A forward holds at most --max-batch-tokens; the server forms the batches itself, so a client's refusal names
// only that limit, never a batch size.
runtime::TokenLimitNames server_limit_names() { return {"--max-batch-tokens", ""}; }

}  // namespace

std::string_view route_path(ModelRoute route) {
  switch (route) {
    case ModelRoute::kPredict:
      return "/predict";
    case ModelRoute::kRerank:
      return "/rerank";
    case ModelRoute::kEmbed:
      return "/embed";
    case ModelRoute::kZeroShot:
      return "/zero-shot";
    case ModelRoute::kFillMask:
      return "/fill-mask";
    case ModelRoute::kNer:
      return "/ner";
    case ModelRoute::kGliner:
      return "/gliner";
  }
  return "?";
}

ModelService::ModelService(ServeOptions const& options, Metrics& metrics)
    : options_(options), gate_(options.max_concurrent_requests) {
  if (runtime::is_gliner_directory(options.runtime.model)) {
    if (options.tokenizer)
      throw runtime::UsageError("--tokenizer: a GLiNER model reads the tokenizer of its directory");
    runtime::RuntimeOptions runtime = options.runtime;
    runtime.max_tokens = options.max_batch_tokens;  // the most tokens one forward holds
    runtime.limit_names = server_limit_names();
    gliner_ = std::make_unique<runtime::GlinerModel>(runtime);
    return;
  }
  ModelConfig const config = runtime::read_model_config(options.runtime.model);
  head_ = head_kind_from_config(config);
  // A forward holds at most --max-batch-tokens tokens; the runtime refuses anything larger.
  runtime::RuntimeOptions runtime = options.runtime;
  runtime.max_tokens = options.max_batch_tokens;
  runtime.limit_names = server_limit_names();
  pipeline_ = std::make_unique<runtime::Pipeline>(runtime, options.tokenizer, head_, "serve");
  max_input_length_ = options.max_input_length.value_or(config.max_position_embeddings);
  if (max_input_length_ > options.max_batch_tokens) {
    throw runtime::UsageError("--max-input-length " + std::to_string(max_input_length_) +
                              (options.max_input_length ? "" : " (max_position_embeddings of config.json)") +
                              " is more than --max-batch-tokens " + std::to_string(options.max_batch_tokens) +
                              ", so one input could not fit a batch; raise --max-batch-tokens or lower it");
  }
  if (head_ == HeadKind::kSequenceClassification || head_ == HeadKind::kTokenClassification) {
    labels_ = label_names(config);
    score_function_ = pipelines::classification_function(pipeline_->problem_type(), labels_.size());
  }
  if (head_ == HeadKind::kSequenceClassification) nli_labels_ = pipelines::nli_label_ids(labels_);
  std::optional<std::int64_t> mask_token_id;
  if (head_ == HeadKind::kMaskedLM) {
    mask_token_id = pipeline_->tokenizer().mask_token_id();
    if (*mask_token_id < 0)
      throw runtime::UsageError("the tokenizer has no mask token ([MASK]), so /fill-mask would have nothing to fill");
  }
  queue_ = std::make_unique<BatchQueue>(*pipeline_, mask_token_id, options.max_batch_tokens, metrics);
}

ModelService::~ModelService() { queue_.reset(); }

bool ModelService::serves(ModelRoute route) const {
  if (gliner_) return route == ModelRoute::kGliner;
  switch (route) {
    case ModelRoute::kPredict:
      return head_ == HeadKind::kSequenceClassification;
    case ModelRoute::kRerank:
      return head_ == HeadKind::kSequenceClassification && labels_.size() == 1;
    case ModelRoute::kZeroShot:
      return head_ == HeadKind::kSequenceClassification && nli_labels_.has_value();
    case ModelRoute::kEmbed:
      return head_ == HeadKind::kBase;
    case ModelRoute::kFillMask:
      return head_ == HeadKind::kMaskedLM;
    case ModelRoute::kNer:
      return head_ == HeadKind::kTokenClassification;
    case ModelRoute::kGliner:
      return false;
  }
  return false;
}

void ModelService::require(ModelRoute route) const {
  if (serves(route)) return;
  std::string need;
  switch (route) {
    case ModelRoute::kPredict:
      need = "a sequence-classification checkpoint (architectures Deberta*ForSequenceClassification)";
      break;
    case ModelRoute::kRerank:
      need = "a cross-encoder: a sequence-classification checkpoint of one label";
      break;
    case ModelRoute::kZeroShot:
      need = "an NLI checkpoint: sequence classification with an id2label label starting with 'entail'";
      break;
    case ModelRoute::kEmbed:
      need = "the backbone alone (architectures DebertaModel or DebertaV2Model, or none)";
      break;
    case ModelRoute::kFillMask:
      need = "a masked-LM checkpoint (architectures Deberta*ForMaskedLM)";
      break;
    case ModelRoute::kNer:
      need = "a token-classification checkpoint (architectures Deberta*ForTokenClassification)";
      break;
    case ModelRoute::kGliner:
      need = "a GLiNER model (a directory with gliner_config.json: flashdeberta serve --model GLINER_DIR)";
      break;
  }
  throw ApiError(kFailedDependency, ErrorType::kBackend,
                 std::string(route_path(route)) + " needs " + need + "; this server runs " + describe());
}

std::vector<std::string> ModelService::routes() const {
  std::vector<std::string> out;
  for (ModelRoute route : {ModelRoute::kPredict, ModelRoute::kRerank, ModelRoute::kZeroShot, ModelRoute::kEmbed,
                           ModelRoute::kFillMask, ModelRoute::kNer, ModelRoute::kGliner}) {
    if (serves(route)) out.emplace_back(route_path(route));
  }
  if (!gliner_) out.emplace_back("/tokenize");
  for (char const* always : {"/info", "/health", "/metrics"}) out.emplace_back(always);
  return out;
}

std::string ModelService::describe() const {
  if (gliner_) return gliner_->describe() + " " + options_.runtime.model.string();
  ModelConfig const& config = pipeline_->config();
  std::string out = std::string(runtime::variant_name(config)) + " " + std::string(head_description(head_)) +
                    " checkpoint " + options_.runtime.model.string() + " (architectures " +
                    (config.architectures.empty() ? std::string("none") : joined(config.architectures));
  if (!labels_.empty()) out += "; labels " + joined(labels_);
  return out + ")";
}

QueueGauges ModelService::gauges() const {
  return {gate_.in_flight(), gate_.limit(), queue_ ? queue_->queued_sequences() : 0};
}

tokenizer::Encoding ModelService::encode(std::string const& text, std::string const* pair, bool truncate,
                                         std::string const& what, tokenizer::Truncation strategy,
                                         std::size_t length) const {
  tokenizer::EncodeOptions options;
  std::size_t const limit = length == 0 ? static_cast<std::size_t>(max_input_length_) : length;
  if (truncate) {
    options.max_length = limit;
    options.truncation = strategy;
  } else if (limit != kUnbounded) {
    options.token_limit = limit;  // tokenizing stops as soon as the input is sure to be too long
  }
  tokenizer::Encoding e;
  try {
    e = pair != nullptr ? pipeline_->tokenizer().encode(text, *pair, options)
                        : pipeline_->tokenizer().encode(text, options);
  } catch (tokenizer::TokenLimitError const&) {
    fail_validation(what + " holds more than " + std::to_string(limit) +
                    " tokens, the most an input may hold (--max-input-length); send \"truncate\": true to cut it");
  } catch (Error const& error) {
    throw ApiError(kUnprocessable, ErrorType::kTokenizer, what + ": " + error.what());
  }
  std::int64_t const vocab = pipeline_->config().vocab_size;
  for (std::size_t t = 0; t < e.size(); ++t) {
    if (e.input_ids[t] < 0 || e.input_ids[t] >= vocab) {
      throw ApiError(kFailedDependency, ErrorType::kBackend,
                     what + ": token '" + e.tokens[t] + "' has id " + std::to_string(e.input_ids[t]) +
                         ", outside the model's vocabulary (vocab_size " + std::to_string(vocab) +
                         "); the server's tokenizer is not the checkpoint's own");
    }
  }
  return e;
}

HeadOutput ModelService::forward(std::vector<tokenizer::Encoding>& encodings) const { return queue_->run(encodings); }

JsonOut ModelService::info() const {
  if (gliner_) return gliner_info();
  ModelConfig const& config = pipeline_->config();
  JsonOut info;
  info["model_id"] = options_.model_id;
  info["model_sha"] = nullptr;
  info["model_dtype"] = options_.runtime.dtype == DType::kBF16  ? "bfloat16"
                        : options_.runtime.dtype == DType::kF16 ? "float16"
                                                                : "float32";
  JsonOut type;
  if (head_ == HeadKind::kSequenceClassification || head_ == HeadKind::kTokenClassification) {
    JsonOut id2label = JsonOut::object(), label2id = JsonOut::object();
    for (std::size_t i = 0; i < labels_.size(); ++i) {
      id2label[std::to_string(i)] = labels_[i];
      label2id[labels_[i]] = i;
    }
    std::string const kind = head_ == HeadKind::kTokenClassification ? "token_classifier"
                             : labels_.size() == 1                   ? "reranker"
                                                                     : "classifier";
    type[kind] = {{"id2label", id2label}, {"label2id", label2id}};
  } else if (head_ == HeadKind::kBase) {
    type["embedding"] = {{"pooling", options_.pooling == pipelines::Pooling::kCls ? "cls" : "mean"}};
  } else {
    type[std::string(head_description(head_))] = JsonOut::object();
  }
  info["model_type"] = type;
  info["max_concurrent_requests"] = options_.max_concurrent_requests;
  info["max_input_length"] = max_input_length_;
  info["max_batch_tokens"] = options_.max_batch_tokens;
  info["max_batch_requests"] = nullptr;
  info["max_client_batch_size"] = options_.max_client_batch_size;
  info["payload_limit"] = options_.payload_limit;
  info["auto_truncate"] = false;
  info["tokenization_workers"] = options_.http_threads;
  info["version"] = FLASHDEBERTA_VERSION_STRING;
  info["sha"] = nullptr;
  info["docker_label"] = nullptr;
  // Beyond TEI's fields: what runs the model, and what it serves.
  info["model_dir"] = options_.runtime.model.string();
  info["variant"] = runtime::variant_name(config);
  info["architectures"] = config.architectures;
  info["head"] = std::string(head_description(head_));
  info["labels"] = labels_;
  info["routes"] = routes();
  info["backend"] = runtime::backend_name(options_.runtime.backend);
  info["attention"] = runtime::attention_name(options_.runtime.attention);
  info["dtype"] = runtime::dtype_option_name(options_.runtime.dtype);
  info["threads"] = pipeline_->threads();
  return info;
}

}  // namespace flashdeberta::cli::server

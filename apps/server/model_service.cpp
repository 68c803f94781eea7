#include "server/model_service.hpp"

#include <algorithm>

#include "flashdeberta/config.hpp"
#include "flashdeberta/core/error.hpp"
#include "flashdeberta/heads/sequence_classification.hpp"
#include "server/api_error.hpp"

namespace flashdeberta::cli::server {

namespace {

std::string joined(std::vector<std::string> const& items) {
  std::string out;
  for (std::string const& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

// A forward holds at most --max-batch-tokens; the server forms the batches itself, so a client's refusal names
// only that limit, never a batch size.
runtime::TokenLimitNames server_limit_names() { return {"--max-batch-tokens"}; }

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
  // On the GPU a request that finds the model idle runs its batch itself (batch_queue.hpp); the host backends'
  // forwards all stay on the worker.
  ForwardThread const forward_thread = options.forward_thread.value_or(
      options.runtime.backend == runtime::BackendKind::kCuda ? ForwardThread::kCaller : ForwardThread::kDedicated);
  queue_ = std::make_unique<BatchQueue>(*pipeline_, options.max_batch_tokens, metrics, forward_thread);
}

ModelService::~ModelService() { queue_.reset(); }

bool ModelService::has_labels() const {
  return head_ == HeadKind::kSequenceClassification || head_ == HeadKind::kTokenClassification;
}

bool ModelService::serves(ModelRoute route) const {
  if (gliner_) return route == ModelRoute::kGliner;
  switch (route) {
    case ModelRoute::kPredict:
      return head_ == HeadKind::kSequenceClassification;
    case ModelRoute::kRerank:
      return head_ == HeadKind::kSequenceClassification && pipeline_->labels().size() == 1;
    case ModelRoute::kZeroShot:
      return head_ == HeadKind::kSequenceClassification && pipeline_->nli_labels().has_value();
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
    if (!serves(route)) continue;
    out.emplace_back(route_path(route));
    for (std::string_view path : companion_paths(route)) out.emplace_back(path);
  }
  if (!gliner_) {
    out.emplace_back("/tokenize");
    out.emplace_back("/decode");
  }
  for (char const* always : {"/", "/invocations", "/info", "/health", "/ping", "/metrics"}) out.emplace_back(always);
  return out;
}

std::string ModelService::describe() const {
  if (gliner_) return gliner_->describe() + " " + options_.runtime.model.string();
  ModelConfig const& config = pipeline_->config();
  std::string out = std::string(runtime::variant_name(config)) + " " + std::string(head_description(head_)) +
                    " checkpoint " + options_.runtime.model.string() + " (architectures " +
                    (config.architectures.empty() ? std::string("none") : joined(config.architectures));
  if (has_labels()) out += "; labels " + joined(pipeline_->labels());
  return out + ")";
}

QueueGauges ModelService::gauges() const {
  return {gate_.in_flight(), gate_.limit(), queue_ ? queue_->queued_sequences() : 0};
}

runtime::TaskRun ModelService::request_run(runtime::InputNames names) const {
  runtime::TokenBound const run{max_input_length_, "--max-input-length", "send \"truncate\": true to cut it"};
  runtime::TokenBound const read{options_.max_batch_tokens, "--max-batch-tokens", "raise --max-batch-tokens"};
  return runtime::TaskRun{std::move(names), {run, read}, queue_.get()};
}

runtime::Truncate ModelService::truncation(bool truncate, tokenizer::TruncationSide side) const {
  if (!truncate) return {};
  return {static_cast<std::size_t>(max_input_length_), tokenizer::Truncation::kLongestFirst, side};
}

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
  std::vector<std::string> const labels = has_labels() ? pipeline_->labels() : std::vector<std::string>();
  if (has_labels()) {
    JsonOut id2label = JsonOut::object(), label2id = JsonOut::object();
    for (std::size_t i = 0; i < labels.size(); ++i) {
      id2label[std::to_string(i)] = labels[i];
      label2id[labels[i]] = i;
    }
    std::string const kind = head_ == HeadKind::kTokenClassification ? "token_classifier"
                             : labels.size() == 1                    ? "reranker"
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
  info["labels"] = labels;
  info["routes"] = routes();
  info["backend"] = runtime::backend_name(options_.runtime.backend);
  info["attention"] = runtime::attention_name(options_.runtime.attention);
  info["dtype"] = runtime::dtype_option_name(options_.runtime.dtype);
  info["threads"] = pipeline_->threads();
  return info;
}

JsonOut ModelService::gliner_info() const {
  GlinerConfig const& config = gliner_->config();
  JsonOut info;
  info["model_id"] = options_.model_id;
  info["model_sha"] = nullptr;
  info["model_dtype"] = "float32";
  JsonOut gliner;
  gliner["span_mode"] = std::string(span_mode_name(config.span_mode));
  gliner["max_width"] = config.max_width;
  gliner["max_len"] = config.max_len;
  info["model_type"] = {{"gliner", gliner}};
  info["max_concurrent_requests"] = options_.max_concurrent_requests;
  info["max_batch_tokens"] = options_.max_batch_tokens;
  info["max_client_batch_size"] = options_.max_client_batch_size;
  info["payload_limit"] = options_.payload_limit;
  info["version"] = FLASHDEBERTA_VERSION_STRING;
  info["model_dir"] = options_.runtime.model.string();
  info["variant"] = runtime::variant_name(config.encoder);
  info["head"] = "gliner";
  info["routes"] = routes();
  info["backend"] = runtime::backend_name(options_.runtime.backend);
  info["attention"] = runtime::attention_name(options_.runtime.attention);
  info["dtype"] = runtime::dtype_option_name(options_.runtime.dtype);
  info["threads"] = gliner_->threads();
  return info;
}

}  // namespace flashdeberta::cli::server

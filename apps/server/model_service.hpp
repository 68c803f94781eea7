// The model behind the server: the checkpoint loaded once with its tokenizer (runtime::Pipeline), the
// routes its head serves, the batching queue in front of it, and each route's work from a parsed request
// to its JSON answer: tokenize on the calling HTTP thread (with the request's truncation and the size
// limits), run the forward through the queue, post-process with the library's pipelines/ functions, the
// same ones the CLI's commands use, so the server's answers are the CLI's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flashdeberta/heads/head_kind.hpp"
#include "flashdeberta/pipelines/embedding.hpp"
#include "flashdeberta/runtime/gliner.hpp"
#include "flashdeberta/runtime/options.hpp"
#include "flashdeberta/runtime/pipeline.hpp"
#include "flashdeberta/runtime/task_json.hpp"
#include "server/batch_queue.hpp"
#include "server/metrics.hpp"
#include "server/requests.hpp"
#include "server/tei_requests.hpp"

namespace flashdeberta::cli::server {

using runtime::JsonOut;

// What `flashdeberta serve` was asked for (serve_command.cpp parses it).
struct ServeOptions {
  runtime::RuntimeOptions runtime;                 // --model, --backend, --attention, --dtype, --threads
  std::optional<std::filesystem::path> tokenizer;  // default: --model
  std::string host = "127.0.0.1";
  int port = 8080;                                          // 0: any free port (printed at start)
  std::string model_id;                                     // --model-id; default: the model directory's name
  std::int64_t max_batch_tokens = 16384;                    // tokens per forward (TEI's default)
  std::size_t max_concurrent_requests = 512;                // admitted at once; beyond: 429 (TEI's default)
  std::size_t max_client_batch_size = 32;                   // inputs per request (TEI's default)
  std::optional<std::int64_t> max_input_length;             // tokens per input; default: max_position_embeddings
  std::size_t payload_limit = 2000000;                      // request body bytes (TEI's default)
  std::size_t max_buffered_bytes = std::size_t{128} << 20;  // request bodies held at once, all connections
  std::size_t http_threads = 0;                             // handlers run at once; parsing sets the default
  int idle_timeout_s = 60;                                  // a keep-alive connection's wait for its next request
  int header_timeout_s = 10;                                // a request's header, from its first byte
  int body_timeout_s = 30;                                  // a request's body, from the end of its header
  pipelines::Pooling pooling = pipelines::Pooling::kMean;   // /embed's
  std::optional<ForwardThread> forward_thread;              // default: kCaller on the GPU, else kDedicated
};

// Default handler threads beyond --max-concurrent-requests, so a full server still answers 429, /health and
// /metrics at once (an admitted request holds a handler thread while it waits for the model).
inline constexpr std::size_t kSpareHttpThreads = 8;

// The routes a model may serve, beside /tokenize, /info, /health and /metrics, which every model serves.
enum class ModelRoute { kPredict, kRerank, kEmbed, kZeroShot, kFillMask, kNer, kGliner };
// The routes each model serves beside its ModelRoute: TEI's embedding routes with /embed, HF's
// text-classification with /predict (tei_routes.cpp).
std::vector<std::string_view> companion_paths(ModelRoute route);
std::string_view route_path(ModelRoute route);  // "/predict", ...

class ModelService {
 public:
  // Loads the checkpoint (its head from config.json's architectures) and starts the batching worker; a
  // GLiNER directory (gliner_config.json) is loaded as a GLiNER model instead, which serves /gliner alone.
  ModelService(ServeOptions const& options, Metrics& metrics);
  ~ModelService();
  ModelService(ModelService const&) = delete;
  ModelService& operator=(ModelService const&) = delete;

  // Refuses (424, naming what the checkpoint is and what the route needs) a route this model does not serve.
  void require(ModelRoute route) const;
  std::vector<std::string> routes() const;  // every path served, for /info and the start line
  std::string describe() const;             // "DeBERTa v3 sequence-classification (labels negative, ...)"

  RequestGate& gate() { return gate_; }
  QueueGauges gauges() const;
  void stop_batching() {
    if (queue_) queue_->stop();
  }
  std::int64_t max_input_length() const { return max_input_length_; }

  JsonOut predict(PredictRequest const& request) const;
  JsonOut rerank(RerankRequest const& request) const;
  JsonOut tokenize(TokenizeRequest const& request) const;
  JsonOut zero_shot(ZeroShotRequest const& request) const;
  JsonOut fill_mask(FillMaskRequest const& request) const;
  JsonOut ner(NerRequest const& request) const;
  JsonOut gliner(GlinerRequest const& request) const;
  JsonOut info() const;

  // TEI's other routes (tei_routes.cpp): the embedding model's routes, /decode, HF's text-classification,
  // and what POST / and /invocations run for this model (TEI's route for its kind).
  JsonOut embed(EmbedRequest const& request) const;
  JsonOut embed_all(EmbedAllRequest const& request) const;
  JsonOut similarity(SimilarityRequest const& request) const;
  JsonOut openai_embeddings(OpenAiEmbeddingsRequest const& request) const;
  JsonOut decode(DecodeRequest const& request) const;
  JsonOut text_classification(TextClassificationRequest const& request) const;
  JsonOut default_route(std::string_view body, RequestLimits const& limits) const;

 private:
  // Each input's last hidden states (tokens x hidden_size, row-major) and its number of tokens: texts
  // encoded as every task encodes them, token ids run as given (tei_routes.cpp).
  struct TokenStates {
    std::vector<std::vector<float>> rows;
    std::size_t hidden_size = 0;
    std::size_t tokens = 0;  // over all inputs
  };
  TokenStates token_states(std::vector<EmbedInput> const& inputs, std::vector<std::string> const& names, bool truncate,
                           tokenizer::TruncationSide side) const;
  tokenizer::Encoding ids_encoding(std::vector<std::int64_t> ids, std::string const& name, bool truncate,
                                   tokenizer::TruncationSide side, runtime::InputLimit const& limit) const;

  // A request's run of its task: its inputs named as the request body names them, each bounded by
  // --max-input-length as it runs (and by --max-batch-tokens as it is read), the forwards through the
  // batching queue. A task's refusals (runtime::InputError, UsageError) become the route's ApiError.
  runtime::TaskRun request_run(runtime::InputNames names) const;
  // Truncation to --max-input-length (longest_first, on `side`) when the request asks for it.
  runtime::Truncate truncation(bool truncate, tokenizer::TruncationSide side = tokenizer::TruncationSide::kRight) const;
  bool serves(ModelRoute route) const;
  bool has_labels() const;  // a classification head: labels in /info and the start line

  JsonOut gliner_info() const;

  ServeOptions options_;
  std::unique_ptr<runtime::Pipeline> pipeline_;  // null for a GLiNER model
  // A GLiNER model (null otherwise): no batching queue, one request's forward at a time (gliner_mutex_).
  std::unique_ptr<runtime::GlinerModel> gliner_;
  mutable std::mutex gliner_mutex_;
  HeadKind head_ = HeadKind::kBase;
  std::int64_t max_input_length_ = 0;
  RequestGate gate_;
  std::unique_ptr<BatchQueue> queue_;  // destroyed (worker joined) before pipeline_
};

}  // namespace flashdeberta::cli::server

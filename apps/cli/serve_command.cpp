// flashdeberta serve: the checkpoint behind an HTTP endpoint (apps/server/): text-embeddings-
// inference's routes where it has them (/predict, /rerank, /embed, /tokenize, /info, /health, /metrics) and
// HF's pipelines for the others (/zero-shot, /fill-mask, /ner), GLiNER's entities (/gliner), with dynamic batching, a
// bounded queue and a graceful stop on SIGTERM or SIGINT.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <thread>

#include "args.hpp"
#include "commands.hpp"
#include "server/http_server.hpp"
#include "server/metrics.hpp"
#include "server/model_service.hpp"

namespace flashdeberta::cli {

namespace {

using server::ServeOptions;

[[noreturn]] void serve_usage_fail(std::string const& message) {
  throw UsageError(message + " (see 'flashdeberta serve --help')");
}

std::size_t parse_count(std::string_view option, std::string_view value, std::int64_t min, std::int64_t max) {
  return static_cast<std::size_t>(parse_integer_option("serve", option, value, min, max));
}

// nullopt: --help was given.
std::optional<ServeOptions> parse_serve_options(std::span<char const* const> args) {
  ServeOptions o;
  std::set<std::string> seen;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view const arg = args[i];
    if (arg == "-h" || arg == "--help") return std::nullopt;
  }
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view const arg = args[i];
    if (!arg.starts_with("--")) serve_usage_fail("unexpected argument '" + std::string(arg) + "'");
    std::size_t const eq = arg.find('=');
    std::string const name(arg.substr(2, eq == std::string_view::npos ? std::string_view::npos : eq - 2));
    if (!seen.insert(name).second) serve_usage_fail("option --" + name + " is given twice");
    std::string value;
    if (eq != std::string_view::npos) {
      value = std::string(arg.substr(eq + 1));
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      serve_usage_fail("option --" + name + " needs a value");
    }
    if (value.empty()) serve_usage_fail("option --" + name + " has an empty value");
    // --max-tokens is the CLI's bound on one input; the server has --max-input-length and --max-batch-tokens.
    if (name != "max-tokens" && apply_common_option("serve", o.runtime, name, value)) continue;
    std::int64_t const int32_max = std::numeric_limits<std::int32_t>::max();
    if (name == "tokenizer") {
      o.tokenizer = std::filesystem::path(value);
    } else if (name == "host") {
      o.host = value;
    } else if (name == "port") {
      o.port = static_cast<int>(parse_count(name, value, 0, 65535));
    } else if (name == "model-id") {
      o.model_id = value;
    } else if (name == "max-batch-tokens") {
      o.max_batch_tokens = static_cast<std::int64_t>(parse_count(name, value, 1, int32_max));
    } else if (name == "max-concurrent-requests") {
      o.max_concurrent_requests = parse_count(name, value, 1, 65536);
    } else if (name == "max-client-batch-size") {
      o.max_client_batch_size = parse_count(name, value, 1, 1 << 20);
    } else if (name == "max-input-length") {
      o.max_input_length = static_cast<std::int64_t>(parse_count(name, value, 8, int32_max));
    } else if (name == "payload-limit") {
      o.payload_limit = parse_count(name, value, 64, int32_max);
    } else if (name == "http-threads") {
      o.http_threads = parse_count(name, value, 1, 65536);
    } else if (name == "pooling") {
      if (value != "mean" && value != "cls") serve_usage_fail("unknown pooling '" + value + "' (expected mean or cls)");
      o.pooling = value == "cls" ? pipelines::Pooling::kCls : pipelines::Pooling::kMean;
    } else {
      serve_usage_fail("unknown option '--" + name + "' for 'serve'");
    }
  }
  if (!seen.contains("model")) serve_usage_fail("missing --model");
  if (o.model_id.empty())
    o.model_id = std::filesystem::absolute(o.runtime.model).lexically_normal().filename().string();
  if (o.model_id.empty()) o.model_id = o.runtime.model.string();
  if (o.http_threads == 0) o.http_threads = o.max_concurrent_requests + server::kSpareHttpThreads;
  if (o.http_threads <= o.max_concurrent_requests) {
    serve_usage_fail("--http-threads " + std::to_string(o.http_threads) + " must exceed --max-concurrent-requests " +
                     std::to_string(o.max_concurrent_requests) +
                     ": a thread must be left to answer 429 when every admitted request is busy");
  }
  return o;
}

// SIGTERM and SIGINT, taken by a thread of its own (sigwait), so the server is stopped from outside a signal
// handler. The signals are blocked in every thread: the constructor runs before any other thread starts, and
// threads inherit the mask. While the model loads a signal ends the process at once; once watch() is called
// it stops the server (requests in flight finish); a second signal ends the process without waiting.
class SignalWatcher {
 public:
  SignalWatcher() {
    sigemptyset(&signals_);
    sigaddset(&signals_, SIGTERM);
    sigaddset(&signals_, SIGINT);
    pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
    // A client that hangs up before its answer is written must not end the server.
    std::signal(SIGPIPE, SIG_IGN);
    thread_ = std::thread([this] { wait(); });
  }
  ~SignalWatcher() { finish(); }
  SignalWatcher(SignalWatcher const&) = delete;
  SignalWatcher& operator=(SignalWatcher const&) = delete;

  void watch(server::HttpServer* http) { http_ = http; }

  // Ends the thread (once the server has stopped); whether a signal stopped it.
  bool finish() {
    if (thread_.joinable()) {
      finished_ = true;
      pthread_kill(thread_.native_handle(), SIGTERM);  // wakes the thread's sigwait; the mask keeps it there
      thread_.join();
    }
    return signalled_;
  }

 private:
  void wait() {
    int number = 0;
    if (sigwait(&signals_, &number) != 0 || finished_) return;
    signalled_ = true;
    char const* const name = number == SIGINT ? "SIGINT" : "SIGTERM";
    server::HttpServer* const http = http_;
    if (http == nullptr) {
      std::fprintf(stderr, "flashdeberta: %s before the server started: exiting\n", name);
      std::_Exit(0);
    }
    std::fprintf(stderr, "flashdeberta: %s: answering the requests in flight, then exiting\n", name);
    std::fflush(stderr);
    http->stop();
    if (sigwait(&signals_, &number) == 0 && !finished_) {
      std::fprintf(stderr, "flashdeberta: second signal: exiting without waiting for the requests in flight\n");
      std::_Exit(1);
    }
  }

  sigset_t signals_;
  std::atomic<server::HttpServer*> http_ = nullptr;
  std::atomic<bool> finished_ = false;
  std::atomic<bool> signalled_ = false;
  std::thread thread_;
};

}  // namespace

std::string serve_help() {
  return "usage: flashdeberta serve --model DIR [--host 127.0.0.1] [--port 8080] [options]\n"
         "\n"
         "Serves the checkpoint over HTTP until SIGTERM or SIGINT (then stops accepting, answers the requests\n"
         "in flight and exits 0). Routes follow text-embeddings-inference's API where it has one; the head in\n"
         "config.json's architectures decides which model routes are served:\n"
         "  POST /predict    sequence classification: {\"inputs\": \"text\" | [\"text\", \"pair\"] | [[...], ...],\n"
         "                   \"raw_scores\", \"truncate\"} -> [{\"label\", \"score\"}, ...] per input\n"
         "  POST /rerank     one-label cross-encoders: {\"query\", \"texts\", \"raw_scores\", \"return_text\",\n"
         "                   \"truncate\", \"top_n\"} -> [{\"index\", \"score\"}, ...] best first\n"
         "  POST /zero-shot  NLI checkpoints (an 'entailment' label): {\"inputs\", \"candidate_labels\",\n"
         "                   \"hypothesis_template\", \"multi_label\"} -> {\"sequence\", \"labels\", \"scores\"}\n"
         "  POST /embed      the backbone alone: {\"inputs\", \"normalize\", \"truncate\"} -> [[floats], ...]\n"
         "  POST /fill-mask  masked LMs: {\"inputs\", \"top_k\"} -> HF's fill-mask predictions\n"
         "  POST /ner        token classification: {\"inputs\"} -> HF's entities (aggregation simple)\n"
         "  POST /gliner     a GLiNER model directory (gliner_config.json) instead of a checkpoint, which serves\n"
         "                   this route alone: {\"text\" | \"texts\", \"labels\", \"threshold\", \"flat_ner\",\n"
         "                   \"multi_label\"} -> [{\"start\", \"end\", \"text\", \"label\", \"score\"}, ...] per text\n"
         "  POST /tokenize   every model: {\"inputs\", \"add_special_tokens\"} -> [[{\"id\", \"text\", \"special\",\n"
         "                   \"start\", \"stop\"}, ...]] (byte offsets, as TEI)\n"
         "  GET /info, GET /health, GET /metrics (Prometheus text format)\n"
         "Errors are {\"error\": ..., \"error_type\": ...} with TEI's statuses: 400 malformed or empty, 413 too\n"
         "large, 422 invalid, 424 a route the model does not serve, 429 overloaded.\n"
         "\n"
         "  --model DIR                   Hugging Face checkpoint directory\n"
         "  --tokenizer DIR               tokenizer files when they are not in --model\n"
         "  --host ADDR                   address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)\n"
         "  --port N                      port (default 8080; 0: any free port, printed at start)\n"
         "  --model-id NAME               the model_id /info reports (default: the directory's name)\n"
         "  --backend B                   eigen (default), kokkos or cuda, where built in\n"
         "  --attention A                 flash (default) or eager\n"
         "  --dtype D                     fp32 (default); bf16 or fp16 with --backend cuda;\n"
         "                                bf16 or int8 linear layers with --backend eigen\n"
         "  --threads N                   host threads of the forward pass (0, the default: every core)\n"
         "  --max-batch-tokens N          tokens per forward pass: concurrent requests are packed into one\n"
         "                                batch up to N (default 16384)\n"
         "  --max-concurrent-requests N   requests admitted at once; more are answered 429 (default 512)\n"
         "  --max-client-batch-size N     inputs per request (default 32; more: 413)\n"
         "  --max-input-length N          tokens per input, special tokens included (default: config.json's\n"
         "                                max_position_embeddings); longer inputs are refused (422) unless\n"
         "                                the request says \"truncate\": true\n"
         "  --payload-limit BYTES         request body size (default 2000000; more: 413)\n"
         "  --pooling mean|cls            /embed's pooling of the last hidden states (default mean)\n"
         "  --http-threads N              connections served at once (default: --max-concurrent-requests + 8)\n"
         "  -h, --help                    show this help\n"
         "\n"
         "exit status: 0 after SIGTERM or SIGINT, 2 for usage errors, 1 for any other error.\n";
}

int serve_command(std::span<char const* const> args) {
  auto const options = parse_serve_options(args);
  if (!options) {
    std::cout << serve_help();
    return 0;
  }
  std::unique_ptr<server::ModelService> service;
  std::unique_ptr<server::HttpServer> http;
  server::Metrics metrics;
  SignalWatcher watcher;  // before the model loads, so the backend's threads inherit the blocked signals
  service = std::make_unique<server::ModelService>(*options, metrics);
  http = std::make_unique<server::HttpServer>(*service, metrics, *options);
  int const port = http->bind();
  std::fprintf(stderr, "flashdeberta: serving %s on http://%s:%d (%s; routes", service->describe().c_str(),
               options->host.c_str(), port,
               describe_backend(options->runtime, service->info()["threads"].get<int>()).c_str());
  for (std::string const& route : service->routes()) std::fprintf(stderr, " %s", route.c_str());
  std::fprintf(stderr, ")\n");
  std::fflush(stderr);
  watcher.watch(http.get());
  http->serve();
  service->stop_batching();
  bool const signalled = watcher.finish();
  if (!signalled) throw Error("the server stopped accepting connections on its own");
  std::fprintf(stderr, "flashdeberta: stopped\n");
  return 0;
}

}  // namespace flashdeberta::cli

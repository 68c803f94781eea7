// flashdeberta serve: the checkpoint behind an HTTP endpoint (apps/server/): text-embeddings-
// inference's routes where it has them (/predict, /rerank, /embed, /embed_all, /similarity, /v1/embeddings,
// /tokenize, /decode, POST /, /invocations, /info, /health, /ping, /metrics) and HF's pipelines for the others
// (/zero-shot, /fill-mask, /ner, /text-classification), GLiNER's entities (/gliner), with dynamic batching, a
// bounded queue and a graceful stop on SIGTERM or SIGINT.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>
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

int serve_command(std::span<char const* const> args) {
  auto const options = parse_serve_options(args);
  if (!options) return 0;  // --help printed the help
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

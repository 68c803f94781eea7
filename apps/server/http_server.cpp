#include "server/http_server.hpp"

#include <algorithm>
#include <chrono>
#include <new>
#include <thread>

#include "server/api_error.hpp"
#include "server/http/listener.hpp"
#include "server/requests.hpp"
#include "server/tei_requests.hpp"

namespace flashdeberta::cli::server {

namespace {

using Clock = std::chrono::steady_clock;

// I/O threads, each with its own io_context: one per four cores, at least one, at most four. On the 16-core GPU
// machine with the clients on the same cores (bench/results/server-load-2026-12-07-h100-spin.md) four kept 64
// clients at 33,126-37,209 requests/s where one gave 30,334-34,066, and on a busy host one I/O thread, descheduled
// among the clients, collapsed to 10,702-13,517 where four held 20,818-22,799; one client was as fast with either.
std::size_t io_threads() {
  std::size_t const cores = std::max(1u, std::thread::hardware_concurrency());
  return std::clamp<std::size_t>(cores / 4, 1, 4);
}

http::Limits limits_of(ServeOptions const& options) {
  http::Limits limits;
  limits.payload_limit = options.payload_limit;
  limits.max_buffered_bytes = options.max_buffered_bytes;
  limits.idle_timeout = std::chrono::seconds(options.idle_timeout_s);
  limits.header_timeout = std::chrono::seconds(options.header_timeout_s);
  limits.body_timeout = std::chrono::seconds(options.body_timeout_s);
  limits.io_threads = io_threads();
  limits.worker_threads = options.http_threads;
  return limits;
}

std::string dump(JsonOut const& value) { return value.dump(-1, ' ', false, JsonOut::error_handler_t::replace); }

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// A task's refusal of an input, in TEI's terms: what the client sent is wrong (422), unless the server's own
// tokenizer and model disagree (424).
ApiError api_error_of(runtime::InputError const& e) {
  switch (e.kind()) {
    case runtime::InputError::Kind::kTokenizer:
      return ApiError(kUnprocessable, ErrorType::kTokenizer, e.what());
    case runtime::InputError::Kind::kVocabulary:
      return ApiError(kFailedDependency, ErrorType::kBackend, e.what());
    case runtime::InputError::Kind::kInvalid:
    case runtime::InputError::Kind::kTooLong:
      break;
  }
  return ApiError(kUnprocessable, ErrorType::kValidation, e.what());
}

}  // namespace

void write_error(HttpResponse& response, int status, std::string_view type, std::string const& message,
                 ErrorStyle style) {
  response.status = status;
  JsonOut body;
  if (style == ErrorStyle::kOpenAi) {
    body["message"] = message;
    body["code"] = status;
    body["type"] = type;
  } else {
    body["error"] = message;
    body["error_type"] = type;
  }
  response.set_content(dump(body), "application/json");
}

HttpServer::HttpServer(ModelService& service, Metrics& metrics, ServeOptions const& options)
    : service_(service),
      metrics_(metrics),
      options_(options),
      listener_(std::make_unique<http::Listener>(limits_of(options), static_cast<http::Application&>(*this))) {
  RequestLimits const limits{options.max_client_batch_size};
  model_route("/predict",
              [this, limits](std::string const& b) { return service_.predict(parse_predict_request(b, limits)); });
  model_route("/rerank",
              [this, limits](std::string const& b) { return service_.rerank(parse_rerank_request(b, limits)); });
  model_route("/embed",
              [this, limits](std::string const& b) { return service_.embed(parse_embed_request(b, limits)); });
  model_route("/embed_all",
              [this, limits](std::string const& b) { return service_.embed_all(parse_embed_all_request(b, limits)); });
  model_route("/similarity", [this, limits](std::string const& b) {
    return service_.similarity(parse_similarity_request(b, limits));
  });
  // OpenAI's embeddings route, with its errors in TEI's OpenAI-compatible body.
  for (char const* path : {"/v1/embeddings", "/embeddings"}) {
    model_route(
        path,
        [this, limits](std::string const& b) {
          return service_.openai_embeddings(parse_openai_embeddings_request(b, limits));
        },
        ErrorStyle::kOpenAi);
  }
  model_route("/decode",
              [this, limits](std::string const& b) { return service_.decode(parse_decode_request(b, limits)); });
  model_route("/text-classification", [this, limits](std::string const& b) {
    return service_.text_classification(parse_text_classification_request(b, limits));
  });
  // TEI's route for the model's kind, on / and on SageMaker's /invocations.
  for (char const* path : {"/", "/invocations"}) {
    model_route(path, [this, limits](std::string const& b) { return service_.default_route(b, limits); });
  }
  model_route("/zero-shot",
              [this, limits](std::string const& b) { return service_.zero_shot(parse_zero_shot_request(b, limits)); });
  model_route("/fill-mask",
              [this, limits](std::string const& b) { return service_.fill_mask(parse_fill_mask_request(b, limits)); });
  model_route("/ner", [this, limits](std::string const& b) { return service_.ner(parse_ner_request(b, limits)); });
  model_route("/gliner",
              [this, limits](std::string const& b) { return service_.gliner(parse_gliner_request(b, limits)); });
  model_route("/tokenize",
              [this, limits](std::string const& b) { return service_.tokenize(parse_tokenize_request(b, limits)); });
  plain_route("GET", "/info", [this](HttpRequest const&, HttpResponse& response) {
    response.set_content(dump(service_.info()), "application/json");
  });
  // TEI answers its health check on GET /health, / (HF's Inference API) and /ping (SageMaker).
  for (char const* path : {"/health", "/", "/ping"}) {
    plain_route("GET", path, [this](HttpRequest const&, HttpResponse& response) {
      if (stopping_) throw ApiError(kUnavailable, ErrorType::kUnhealthy, "the server is shutting down");
      response.set_content("", "text/plain");
    });
  }
  plain_route("GET", "/metrics", [this](HttpRequest const&, HttpResponse& response) {
    response.set_content(metrics_.render(service_.gauges()), "text/plain; version=0.0.4");
  });
}

void HttpServer::model_route(std::string const& path, Body run, ErrorStyle style) {
  plain_route(
      "POST", path,
      [this, run](HttpRequest const& request, HttpResponse& response) {
        auto const permit = service_.gate().try_enter();
        if (!permit) {
          throw ApiError(kTooManyRequests, ErrorType::kOverloaded,
                         "the server is answering " + std::to_string(service_.gate().limit()) +
                             " requests already (--max-concurrent-requests); retry later");
        }
        response.set_content(dump(run(request.body)), "application/json");
      },
      style);
}

void HttpServer::plain_route(std::string const& method, std::string const& path, HttpHandler handler,
                             ErrorStyle style) {
  auto wrapped = [this, path, handler, style](HttpRequest const& request, HttpResponse& response) {
    auto const start = Clock::now();
    response.status = 200;
    auto const fail = [&](int status, ErrorType type, std::string const& message) {
      write_error(response, status, error_type_name(type), message, style);
    };
    try {
      handler(request, response);
    } catch (ApiError const& e) {
      fail(e.status(), e.type(), e.what());
    } catch (runtime::InputError const& e) {
      ApiError const api = api_error_of(e);
      fail(api.status(), api.type(), api.what());
    } catch (runtime::UsageError const& e) {  // a task option the model cannot take (a template without {})
      fail(kUnprocessable, ErrorType::kValidation, e.what());
    } catch (std::bad_alloc const&) {
      fail(kInternalError, ErrorType::kBackend, "out of memory");
    } catch (std::exception const& e) {
      // Anything not refused as an ApiError is the server's fault, not the client's: 500, with the reason.
      fail(kInternalError, ErrorType::kBackend, e.what());
    }
    metrics_.record_request(path, response.status, seconds_since(start));
  };
  routes_.push_back({method, path, std::move(wrapped), style});
}

std::string_view HttpServer::metrics_route(std::string_view path) const {
  for (Route const& route : routes_)
    if (route.path == path) return route.path;
  return "other";
}

HttpHandler const* HttpServer::route(HttpRequest const& request, HttpResponse& response) {
  std::string methods;
  for (Route const& route : routes_) {
    if (route.path != request.path) continue;
    // HEAD is GET without the body (the transport drops it), as RFC 9110 has every GET resource answer it.
    if (route.method == request.method || (request.method == "HEAD" && route.method == "GET")) return &route.handler;
    methods += (methods.empty() ? "" : ", ") + route.method;
  }
  if (!methods.empty()) {
    response.set_header("Allow", methods);
    refuse(request.path, kMethodNotAllowed, request.path + " takes " + methods + ", not " + request.method, response);
  } else {
    std::string paths;
    for (Route const& route : routes_) paths += (paths.empty() ? "" : ", ") + route.method + " " + route.path;
    refuse(request.path, kNotFound, "no route " + request.method + " " + request.path + " (routes: " + paths + ")",
           response);
  }
  return nullptr;
}

void HttpServer::refuse(std::string_view path, int status, std::string const& message, HttpResponse& response) {
  ErrorType type = ErrorType::kValidation;
  if (status == kTooManyRequests) type = ErrorType::kOverloaded;
  if (status >= kInternalError && status != kNotImplemented) type = ErrorType::kBackend;
  ErrorStyle style = ErrorStyle::kTei;
  for (Route const& route : routes_)
    if (route.path == path) style = route.style;
  write_error(response, status, error_type_name(type), message, style);
  metrics_.record_request(metrics_route(path), status, 0.0);
}

HttpServer::~HttpServer() = default;

int HttpServer::bind() { return listener_->bind(options_.host, options_.port); }

void HttpServer::serve() {
  listener_->serve();
  serving_done_ = true;
}

void HttpServer::stop() {
  stopping_ = true;
  listener_->stop();
}

}  // namespace flashdeberta::cli::server

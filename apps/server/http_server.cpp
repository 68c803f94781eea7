#include "server/http_server.hpp"

#include <sys/socket.h>

#include <chrono>
#include <new>
#include <thread>

#include "flashdeberta/core/error.hpp"
#include "server/api_error.hpp"
#include "server/requests.hpp"

namespace flashdeberta::cli::server {

namespace {

using Clock = std::chrono::steady_clock;

// Pending connections the kernel keeps for accept(): enough for every client of a burst.
constexpr int kListenBacklog = 1024;
// Requests a client may send over one connection; httplib's default of 5 made keep-alive clients
// reconnect every fifth request.
constexpr std::size_t kKeepAliveRequests = 10000;

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

void write_error(httplib::Response& response, int status, std::string_view type, std::string const& message) {
  response.status = status;
  JsonOut body;
  body["error"] = message;
  body["error_type"] = type;
  response.set_content(dump(body), "application/json");
}

HttpServer::HttpServer(ModelService& service, Metrics& metrics, ServeOptions const& options)
    : service_(service), metrics_(metrics), options_(options) {
  std::size_t const threads = options.http_threads;
  server_.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server_.set_payload_max_length(options.payload_limit);
  server_.set_keep_alive_max_count(kKeepAliveRequests);
  // httplib writes the headers and the body of an answer in two sends; with Nagle's algorithm the body then
  // waits for the client's delayed ACK of the headers, 40 ms on Linux: a 10 ms request took 56 ms.
  server_.set_tcp_nodelay(true);
  // httplib's default socket options add SO_REUSEPORT, with which a second server binds a port already served
  // and silently takes part of its connections; SO_REUSEADDR alone still allows a restart while the old
  // connections linger in TIME_WAIT, and makes a busy port an error.
  server_.set_socket_options([](socket_t socket) {
    int const yes = 1;
    ::setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  server_.set_error_handler(httplib::Server::HandlerWithResponse(
      [this](httplib::Request const& request, httplib::Response& response) { return on_error(request, response); }));
  server_.set_exception_handler([](httplib::Request const&, httplib::Response& response, std::exception_ptr) {
    write_error(response, kInternalError, error_type_name(ErrorType::kBackend), "internal error");
  });

  RequestLimits const limits{options.max_client_batch_size};
  model_route("/predict",
              [this, limits](std::string const& b) { return service_.predict(parse_predict_request(b, limits)); });
  model_route("/rerank",
              [this, limits](std::string const& b) { return service_.rerank(parse_rerank_request(b, limits)); });
  model_route("/embed",
              [this, limits](std::string const& b) { return service_.embed(parse_embed_request(b, limits)); });
  model_route("/zero-shot",
              [this, limits](std::string const& b) { return service_.zero_shot(parse_zero_shot_request(b, limits)); });
  model_route("/fill-mask",
              [this, limits](std::string const& b) { return service_.fill_mask(parse_fill_mask_request(b, limits)); });
  model_route("/ner", [this, limits](std::string const& b) { return service_.ner(parse_ner_request(b, limits)); });
  model_route("/gliner",
              [this, limits](std::string const& b) { return service_.gliner(parse_gliner_request(b, limits)); });
  model_route("/tokenize",
              [this, limits](std::string const& b) { return service_.tokenize(parse_tokenize_request(b, limits)); });
  plain_route("GET", "/info", [this](httplib::Request const&, httplib::Response& response) {
    response.set_content(dump(service_.info()), "application/json");
  });
  plain_route("GET", "/health", [this](httplib::Request const&, httplib::Response& response) {
    if (stopping_) throw ApiError(kUnavailable, ErrorType::kUnhealthy, "the server is shutting down");
    response.set_content("", "text/plain");
  });
  plain_route("GET", "/metrics", [this](httplib::Request const&, httplib::Response& response) {
    response.set_content(metrics_.render(service_.gauges()), "text/plain; version=0.0.4");
  });
}

void HttpServer::model_route(std::string const& path, Body run) {
  plain_route("POST", path, [this, run](httplib::Request const& request, httplib::Response& response) {
    auto const permit = service_.gate().try_enter();
    if (!permit) {
      throw ApiError(kTooManyRequests, ErrorType::kOverloaded,
                     "the server is answering " + std::to_string(service_.gate().limit()) +
                         " requests already (--max-concurrent-requests); retry later");
    }
    response.set_content(dump(run(request.body)), "application/json");
  });
}

void HttpServer::plain_route(std::string const& method, std::string const& path, httplib::Server::Handler handler) {
  routes_.emplace_back(method, path);
  auto wrapped = [this, path, handler](httplib::Request const& request, httplib::Response& response) {
    auto const start = Clock::now();
    response.status = 200;
    try {
      handler(request, response);
    } catch (ApiError const& e) {
      write_error(response, e.status(), error_type_name(e.type()), e.what());
    } catch (runtime::InputError const& e) {
      ApiError const api = api_error_of(e);
      write_error(response, api.status(), error_type_name(api.type()), api.what());
    } catch (runtime::UsageError const& e) {  // a task option the model cannot take (a template without {})
      write_error(response, kUnprocessable, error_type_name(ErrorType::kValidation), e.what());
    } catch (std::bad_alloc const&) {
      write_error(response, kInternalError, error_type_name(ErrorType::kBackend), "out of memory");
    } catch (std::exception const& e) {
      // Anything not refused as an ApiError is the server's fault, not the client's: 500, with the reason.
      write_error(response, kInternalError, error_type_name(ErrorType::kBackend), e.what());
    }
    metrics_.record_request(path, response.status, seconds_since(start));
  };
  if (method == "GET") {
    server_.Get(path, wrapped);
  } else {
    server_.Post(path, wrapped);
  }
}

std::string_view HttpServer::metrics_route(std::string const& path) const {
  for (auto const& route : routes_)
    if (route.second == path) return route.second;
  return "other";
}

httplib::Server::HandlerResponse HttpServer::on_error(httplib::Request const& request, httplib::Response& response) {
  if (!response.body.empty()) return httplib::Server::HandlerResponse::Unhandled;  // a route's own error body
  int status = response.status;
  std::string message;
  if (status == kNotFound) {
    std::string methods;
    for (auto const& [method, path] : routes_)
      if (path == request.path) methods += (methods.empty() ? "" : ", ") + method;
    if (!methods.empty()) {
      status = kMethodNotAllowed;
      response.set_header("Allow", methods);
      message = request.path + " takes " + methods + ", not " + request.method;
    } else {
      std::string paths;
      for (auto const& [method, path] : routes_) paths += (paths.empty() ? "" : ", ") + method + " " + path;
      message = "no route " + request.method + " " + request.path + " (routes: " + paths + ")";
    }
  } else if (status == kPayloadTooLarge) {
    message = "the request body holds more than " + std::to_string(options_.payload_limit) +
              " bytes, the most a request may hold (--payload-limit)";
  } else {
    message = "the HTTP request could not be read (status " + std::to_string(status) + ")";
  }
  write_error(response, status, error_type_name(ErrorType::kValidation), message);
  metrics_.record_request(metrics_route(request.path), status, 0.0);
  return httplib::Server::HandlerResponse::Handled;
}

int HttpServer::bind() {
  int port = options_.port;
  if (port == 0) {
    port = server_.bind_to_any_port(options_.host);
    FLASHDEBERTA_REQUIRE(port > 0,
                         "cannot listen on " << options_.host << " (any port): is the address one of this host's?");
  } else {
    FLASHDEBERTA_REQUIRE(server_.bind_to_port(options_.host, port),
                         "cannot listen on " << options_.host << ":" << port
                                             << " (is the port in use, or the address not this host's?)");
  }
  ::listen(server_.listening_socket(), kListenBacklog);
  return port;
}

void HttpServer::serve() {
  server_.listen_after_bind();
  serving_done_ = true;
}

void HttpServer::stop() {
  stopping_ = true;
  // httplib's stop() does nothing before the accept loop runs, so a stop that comes between bind() and
  // serve() waits for it (or for serve() to have returned).
  while (!server_.is_running() && !serving_done_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  server_.stop();
}

}  // namespace flashdeberta::cli::server

// The HTTP side of `flashdeberta serve`: the routes, their error bodies, the admission gate in front of the
// model routes, the request metrics, and a stop that lets every request in flight finish. The transport under
// it (apps/server/http/: Boost.Beast over Asio) reads and writes requests on a few I/O threads, and runs the
// routes' handlers on a worker pool of at most --http-threads threads.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "server/api_error.hpp"
#include "server/http/transport.hpp"
#include "server/http_types.hpp"
#include "server/metrics.hpp"
#include "server/model_service.hpp"

namespace flashdeberta::cli::server {

namespace http {
class Listener;
}

class HttpServer final : private http::Application {
 public:
  // Registers the routes; nothing listens until bind() and serve().
  HttpServer(ModelService& service, Metrics& metrics, ServeOptions const& options);
  ~HttpServer() override;

  // Binds host:port (port 0: a free port chosen by the system) and returns the port; throws
  // flashdeberta::Error naming the address when it cannot.
  int bind();
  // Serves connections until stop(), then returns once every request in flight has been answered.
  void serve();
  // Stops accepting and closes the connections that wait for or send a request; callable from any thread,
  // before or during serve().
  void stop();
  bool serving_finished() const { return serving_done_; }

 private:
  using Body = std::function<JsonOut(std::string const& body)>;
  // A POST route running the model: admitted through the gate (429 beyond it), its ApiErrors rendered.
  void model_route(std::string const& path, Body run, ErrorStyle style = ErrorStyle::kTei);
  // A route answered without the model (/tokenize, /info, ...), with the same error rendering and metrics.
  void plain_route(std::string const& method, std::string const& path, HttpHandler handler,
                   ErrorStyle style = ErrorStyle::kTei);
  std::string_view metrics_route(std::string_view path) const;  // the path if it is a route, else "other"

  // http::Application: the route of a request (404 and 405 answered at once), and the transport's refusals.
  HttpHandler const* route(HttpRequest const& request, HttpResponse& response) override;
  void refuse(std::string_view path, int status, std::string const& message, HttpResponse& response) override;

  struct Route {
    std::string method;
    std::string path;
    HttpHandler handler;
    ErrorStyle style;
  };

  ModelService& service_;
  Metrics& metrics_;
  ServeOptions const& options_;
  std::deque<Route> routes_;  // a deque: the transport holds pointers to the handlers
  std::unique_ptr<http::Listener> listener_;
  std::atomic<bool> stopping_ = false;
  std::atomic<bool> serving_done_ = false;
};

// Writes the error body of `style` with `status`: TEI's {"error": message, "error_type": type}, or on the
// OpenAI-compatible routes TEI's OpenAICompatErrorResponse {"message": message, "code": status, "type": type}.
void write_error(HttpResponse& response, int status, std::string_view type, std::string const& message,
                 ErrorStyle style = ErrorStyle::kTei);

}  // namespace flashdeberta::cli::server

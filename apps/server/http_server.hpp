// The HTTP side of `flashdeberta serve`, on cpp-httplib (Debian's libcpp-httplib-dev): the routes, their
// error bodies, the admission gate in front of the model routes, the request metrics, and a stop that
// lets every request in flight finish.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <string_view>

#include <httplib.h>

#include "server/metrics.hpp"
#include "server/model_service.hpp"

namespace flashdeberta::cli::server {

class HttpServer {
 public:
  // Registers the routes; nothing listens until bind() and serve().
  HttpServer(ModelService& service, Metrics& metrics, ServeOptions const& options);

  // Binds host:port (port 0: a free port chosen by the system) and returns the port; throws
  // flashdeberta::Error naming the address when it cannot.
  int bind();
  // Accepts connections until stop(), then returns once every request in flight has been answered.
  void serve();
  // Stops accepting; callable from any thread, before or during serve().
  void stop();
  bool serving_finished() const { return serving_done_; }

 private:
  // httplib's server with its listening socket reachable: listen() is called again on it with a longer
  // backlog than the library's compiled-in 5, which dropped connections (and cost the client a 1 s SYN
  // retry) when 64 clients connected at once.
  class Server : public httplib::Server {
   public:
    int listening_socket() const { return svr_sock_; }
  };

  using Body = std::function<JsonOut(std::string const& body)>;
  // A POST route running the model: admitted through the gate (429 beyond it), its ApiErrors rendered.
  void model_route(std::string const& path, Body run);
  // A route answered without the model (/tokenize, /info, ...), with the same error rendering and metrics.
  void plain_route(std::string const& method, std::string const& path, httplib::Server::Handler handler);
  // JSON error bodies for what httplib answers itself (404, 413, a malformed request line).
  httplib::Server::HandlerResponse on_error(httplib::Request const& request, httplib::Response& response);
  std::string_view metrics_route(std::string const& path) const;  // the path if it is a route, else "other"

  ModelService& service_;
  Metrics& metrics_;
  ServeOptions const& options_;
  Server server_;
  std::vector<std::pair<std::string, std::string>> routes_;  // (method, path) of every route registered
  std::atomic<bool> stopping_ = false;
  std::atomic<bool> serving_done_ = false;
};

// Writes TEI's error body {"error": message, "error_type": type} with `status`.
void write_error(httplib::Response& response, int status, std::string_view type, std::string const& message);

}  // namespace flashdeberta::cli::server

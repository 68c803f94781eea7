// What the HTTP transport (listener.cpp, connection.cpp: Boost.Beast over Asio) needs from the server and
// what it is bounded by. The transport reads requests on a few I/O threads, refuses what breaks HTTP/1.1's
// framing or these limits, and hands each complete request to the application, whose handlers run on the
// worker pool; route code sees only http_types.hpp.
#pragma once

#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include "server/http_types.hpp"

namespace flashdeberta::cli::server::http {

struct Limits {
  std::size_t payload_limit = 2000000;   // body bytes, as received and as inflated from its Content-Encoding
  std::size_t max_header_bytes = 16384;  // request line and header fields; more: 431
  std::size_t max_header_count = 100;    // header fields; more: 431
  // Deadlines of a request, each for the whole stage (a byte now and then does not extend them): a
  // keep-alive connection's wait for the next request's first byte, then its headers, then its body.
  std::chrono::seconds idle_timeout{60};
  std::chrono::seconds header_timeout{10};
  std::chrono::seconds body_timeout{30};
  std::chrono::seconds write_timeout{30};  // an answer, to a client that does not read it
  // Request bodies held at once, read or being handled, over all connections (a body is counted at its
  // Content-Length from its header on, a chunked or encoded one at payload_limit); a body that would pass
  // it is refused 429 before it is read, so thousands of connections each sending a large body cannot
  // hold more memory than this.
  std::size_t max_buffered_bytes = std::size_t{128} << 20;
  std::size_t io_threads = 1;
  std::size_t worker_threads = 8;  // handlers running at once (the pool grows to it as needed)
};

// A request the transport refuses (framing, limits, deadlines, an encoding it cannot decode): the status
// and the message the application renders in its error body.
class Refusal : public std::runtime_error {
 public:
  Refusal(int status, std::string const& message) : std::runtime_error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

class Application {
 public:
  virtual ~Application() = default;
  // Called on an I/O thread, so it must not block: the handler of a complete request, to be run on the worker
  // pool, or null when `response` already holds the answer (no such route, or not with this method).
  virtual HttpHandler const* route(HttpRequest const& request, HttpResponse& response) = 0;
  // Fills `response` with the application's error body for a refusal and counts it. `path` is the request's
  // path, empty when its request line could not be read.
  virtual void refuse(std::string_view path, int status, std::string const& message, HttpResponse& response) = 0;
};

}  // namespace flashdeberta::cli::server::http

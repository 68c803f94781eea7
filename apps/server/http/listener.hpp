// The listening socket, the I/O threads that run every connection's reads and writes (a few, whatever the
// number of connections), the worker pool their handlers run on, and the stop: no more connections, idle
// and half-read ones closed, the requests being answered answered.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "server/http/transport.hpp"
#include "server/http/worker_pool.hpp"

namespace flashdeberta::cli::server::http {

class Connection;

// Bytes of one request's body, counted against Limits::max_buffered_bytes until it is destroyed.
class BodyReservation {
 public:
  BodyReservation() = default;
  BodyReservation(std::atomic<std::size_t>& total, std::size_t bytes) : total_(&total), bytes_(bytes) {}
  BodyReservation(BodyReservation&& other) noexcept
      : total_(std::exchange(other.total_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  BodyReservation& operator=(BodyReservation&& other) noexcept {
    if (this != &other) {
      release();
      total_ = std::exchange(other.total_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  BodyReservation(BodyReservation const&) = delete;
  BodyReservation& operator=(BodyReservation const&) = delete;
  ~BodyReservation() { release(); }

  void release() {
    if (total_ != nullptr) total_->fetch_sub(bytes_, std::memory_order_relaxed);
    total_ = nullptr;
    bytes_ = 0;
  }

 private:
  std::atomic<std::size_t>* total_ = nullptr;
  std::size_t bytes_ = 0;
};

class Listener {
 public:
  Listener(Limits const& limits, Application& app);
  ~Listener();
  Listener(Listener const&) = delete;
  Listener& operator=(Listener const&) = delete;

  // Binds host:port (port 0: a free port chosen by the system) and returns the port; throws flashdeberta::Error
  // naming the address when it cannot.
  int bind(std::string const& host, int port);
  // Serves connections on limits.io_threads threads (this one among them) until stop() and the last
  // connection has closed, then waits for the worker pool to finish.
  void serve();
  // From any thread, before or during serve().
  void stop();

  // For the connections.
  Limits const& limits() const { return limits_; }
  Application& app() { return app_; }
  WorkerPool& pool() { return pool_; }
  bool stopping() const { return stopping_; }
  bool enter(std::shared_ptr<Connection> const& connection);  // false once stopping: close it
  // `bytes` of a body counted against limits.max_buffered_bytes, or nullopt when they would pass it.
  std::optional<BodyReservation> reserve_body(std::size_t bytes);
  std::size_t buffered_bytes() const { return buffered_bytes_.load(std::memory_order_relaxed); }
  void leave(Connection* connection);
  std::size_t open_connections() const { return open_connections_.load(std::memory_order_relaxed); }

 private:
  void accept();

  void run(boost::asio::io_context& context);  // one I/O thread

  Limits const limits_;
  Application& app_;
  // Before contexts_: a connection released with its context's last handlers leaves the registry.
  std::mutex mutex_;
  std::unordered_map<Connection*, std::weak_ptr<Connection>> connections_;
  std::atomic<std::size_t> open_connections_ = 0;  // connections_.size(), read without the mutex
  std::atomic<bool> stopping_ = false;
  std::atomic<std::size_t> buffered_bytes_ = 0;  // the BodyReservations alive
  // One io_context per I/O thread, each run by its thread alone: a connection stays on the context it was
  // accepted onto, so that its handlers never wait for another thread's turn at a shared reactor (one shared
  // context run by four threads answered 64 clients slower than one thread). contexts_[0] also accepts.
  std::vector<std::unique_ptr<boost::asio::io_context>> contexts_;
  // The other contexts have no work until their first connection: kept running until stop().
  std::vector<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> keep_running_;
  std::size_t next_context_ = 0;  // the next accepted connection's, on contexts_[0]'s thread
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer accept_pause_;  // after accept() fails for want of file descriptors
  WorkerPool pool_;
};

}  // namespace flashdeberta::cli::server::http

#include "server/http/listener.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <thread>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include "flashdeberta/core/error.hpp"
#include "server/http/connection.hpp"
#include "server/thread_name.hpp"

namespace flashdeberta::cli::server::http {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

// Pending connections the kernel keeps for accept(): enough for every client of a burst.
constexpr int kListenBacklog = 1024;
// How long accepting pauses when the process is out of file descriptors, rather than spinning on the error.
constexpr auto kAcceptPause = std::chrono::milliseconds(100);

// Each connection is a file descriptor, and a server that costs no thread per connection is meant to hold
// thousands: the soft limit (often 1024) is raised to the hard one.
void raise_open_files_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

std::vector<std::unique_ptr<asio::io_context>> make_contexts(std::size_t count) {
  std::vector<std::unique_ptr<asio::io_context>> contexts;
  for (std::size_t i = 0; i < std::max<std::size_t>(count, 1); ++i)
    contexts.push_back(std::make_unique<asio::io_context>(1));  // 1: run by one thread, no locking between threads
  return contexts;
}

}  // namespace

Listener::Listener(Limits const& limits, Application& app)
    : limits_(limits),
      app_(app),
      contexts_(make_contexts(limits.io_threads)),
      acceptor_(*contexts_.front()),
      accept_pause_(*contexts_.front()),
      pool_(limits.worker_threads) {
  for (std::size_t i = 1; i < contexts_.size(); ++i) keep_running_.push_back(asio::make_work_guard(*contexts_[i]));
}

Listener::~Listener() = default;

int Listener::bind(std::string const& host, int port) {
  boost::system::error_code error;
  tcp::resolver resolver(*contexts_.front());
  auto const endpoints = resolver.resolve(host, std::to_string(port), tcp::resolver::passive, error);
  if (!error && !endpoints.empty()) {
    tcp::endpoint const endpoint = endpoints.begin()->endpoint();
    acceptor_.open(endpoint.protocol(), error);
    // SO_REUSEADDR allows a restart while the old connections linger in TIME_WAIT; SO_REUSEPORT is left off,
    // with which a second server would bind a port already served and silently take part of its connections.
    if (!error) acceptor_.set_option(tcp::acceptor::reuse_address(true), error);
    if (!error) acceptor_.bind(endpoint, error);
    if (!error) acceptor_.listen(kListenBacklog, error);
  }
  if (error || !acceptor_.is_open()) {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    FLASHDEBERTA_REQUIRE(port != 0, "cannot listen on " << host << " (any port): is the address one of this host's?");
    FLASHDEBERTA_REQUIRE(
        false, "cannot listen on " << host << ":" << port << " (is the port in use, or the address not this host's?)");
  }
  raise_open_files_limit();
  return acceptor_.local_endpoint().port();
}

void Listener::serve() {
  accept();
  std::vector<std::thread> threads;
  for (std::size_t i = 1; i < contexts_.size(); ++i) {
    threads.emplace_back([this, i] {
      std::string const name = "fd-io-" + std::to_string(i);  // the first context runs on the program's thread
      name_this_thread(name.c_str());
      run(*contexts_[i]);
    });
  }
  run(*contexts_.front());
  for (std::thread& thread : threads) thread.join();
  pool_.stop();
}

void Listener::run(asio::io_context& context) {
  for (;;) {
    try {
      context.run();
      return;
    } catch (std::exception const& e) {  // one connection's failure (out of memory) is not the server's
      std::fprintf(stderr, "flashdeberta: HTTP I/O error: %s\n", e.what());
    }
  }
}

void Listener::stop() {
  stopping_ = true;
  asio::post(*contexts_.front(), [this] {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    accept_pause_.cancel();
    keep_running_.clear();  // each context ends with its last connection
  });
  std::vector<std::shared_ptr<Connection>> open;
  {
    // A connection's destructor takes the mutex (leave()), so none is released while it is held.
    std::lock_guard const lock(mutex_);
    for (auto const& [address, weak] : connections_)
      if (auto connection = weak.lock()) open.push_back(std::move(connection));
  }
  for (auto const& connection : open) connection->stop();
}

bool Listener::enter(std::shared_ptr<Connection> const& connection) {
  std::lock_guard const lock(mutex_);
  if (stopping_) return false;
  connections_.emplace(connection.get(), connection);
  open_connections_.store(connections_.size(), std::memory_order_relaxed);
  return true;
}

std::optional<BodyReservation> Listener::reserve_body(std::size_t bytes) {
  std::size_t held = buffered_bytes_.load(std::memory_order_relaxed);
  do {
    if (bytes > limits_.max_buffered_bytes - std::min(held, limits_.max_buffered_bytes)) return std::nullopt;
  } while (!buffered_bytes_.compare_exchange_weak(held, held + bytes, std::memory_order_relaxed));
  return BodyReservation(buffered_bytes_, bytes);
}

void Listener::leave(Connection* connection) {
  std::lock_guard const lock(mutex_);
  connections_.erase(connection);
  open_connections_.store(connections_.size(), std::memory_order_relaxed);
}

void Listener::accept() {
  // The contexts take connections in turn. Each connection gets a strand of its own: its handlers never run at
  // once, even with the worker pool's posts.
  asio::io_context& context = *contexts_[next_context_++ % contexts_.size()];
  acceptor_.async_accept(asio::make_strand(context), [this](boost::system::error_code error, tcp::socket socket) {
    if (error == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (error) {
      // EMFILE and the like: the pending connection waits in the backlog until a descriptor is free.
      accept_pause_.expires_after(kAcceptPause);
      accept_pause_.async_wait([this](boost::system::error_code e) {
        if (!e) accept();
      });
      return;
    }
    boost::system::error_code ignored;
    // An answer's header and body go out in one write, but a client's next request must not wait for
    // the delayed ACK of the last one (40 ms on Linux).
    socket.set_option(tcp::no_delay(true), ignored);
    std::make_shared<Connection>(std::move(socket), *this)->start();
    accept();
  });
}

}  // namespace flashdeberta::cli::server::http

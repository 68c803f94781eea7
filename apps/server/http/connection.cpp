#include "server/http/connection.hpp"

#include <sys/socket.h>
#include <sys/uio.h>

#include <array>
#include <cerrno>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include "server/api_error.hpp"
#include "server/http/body_decoding.hpp"
#include "server/http/framing.hpp"
#include "server/http/listener.hpp"

namespace flashdeberta::cli::server::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
// Before the socket of a connection's last answer closes, what the client still sends is read and dropped,
// for this long and this many bytes at most: closing a socket with unread bytes sends a reset, which can
// destroy the answer before the client has read it (a 413 to a client still sending its body).
constexpr auto kDrainTime = std::chrono::seconds(1);
constexpr std::size_t kDrainBytes = std::size_t{4} << 20;
constexpr std::size_t kDrainStep = 16 * 1024;
// An answer written while the server stops gets this long, so a client that does not read cannot hold the stop.
constexpr auto kStopWrite = std::chrono::seconds(2);

std::string seconds(std::chrono::seconds s) { return std::to_string(s.count()) + " s"; }

}  // namespace

Connection::Connection(Socket socket, Listener& listener)
    : socket_(std::move(socket)), timer_(socket_.get_executor()), listener_(listener), limits_(listener.limits()) {}

Connection::~Connection() { listener_.leave(this); }

void Connection::start() {
  asio::dispatch(socket_.get_executor(), [self = shared_from_this()] {
    if (!self->listener_.enter(self)) return self->close();  // the server stopped as it accepted
    self->wait_for_request();
  });
}

void Connection::stop() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] { self->on_stop(); });
}

void Connection::on_stop() {
  switch (state_) {
    case State::kHandling:
      keep_alive_ = false;
      break;
    case State::kWriting:
      keep_alive_ = false;
      if (timer_.expiry() > Clock::now() + kStopWrite) arm(kStopWrite);
      break;
    case State::kClosed:
      break;
    default:  // waiting for a request, reading one, or draining
      close();
  }
}

void Connection::wait_for_request() {
  parser_.reset();
  path_.clear();
  timed_out_ = false;
  head_ = false;
  if (listener_.stopping()) return drain();
  if (buffer_.size() > 0) return read_header();  // a pipelined request
  buffer_.shrink_to_fit();                       // an idle connection holds no buffer
  state_ = State::kIdle;
  arm(limits_.idle_timeout);
  socket_.async_wait(Socket::wait_read, [self = shared_from_this()](beast::error_code error) {
    if (self->interrupted(error)) return;
    self->read_header();
  });
}

void Connection::read_header() {
  state_ = State::kHeader;
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(limits_.max_header_bytes));
  parser_->body_limit(limits_.payload_limit);
  arm(limits_.header_timeout);  // from the first byte of the request
  bhttp::async_read_header(
      socket_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code error, std::size_t) { self->on_header(error); });
}

void Connection::on_header(beast::error_code error) {
  if (state_ == State::kClosed) return;
  if (timed_out_) {
    return refuse(Refusal(kRequestTimeout, "the request's header did not arrive within " +
                                               seconds(limits_.header_timeout) + " of its first byte"));
  }
  if (error) {
    if (auto const refusal = refusal_of(error, limits_)) return refuse(*refusal);
    return close();
  }
  auto const& header = parser_->get();
  std::string_view const target = header.target();
  path_ = std::string(target.substr(0, target.find('?')));
  if (auto const refusal = check_header(header, limits_)) return refuse(*refusal);
  if (parser_->is_done()) return handle();
  if (auto const refusal = reserve_body(header)) return refuse(*refusal);
  if (expects_continue(header)) {
    state_ = State::kContinue;
    arm(limits_.write_timeout);
    asio::async_write(socket_, asio::buffer(kContinue.data(), kContinue.size()),
                      [self = shared_from_this()](beast::error_code error, std::size_t) {
                        if (self->interrupted(error)) return;
                        self->read_body();
                      });
    return;
  }
  read_body();
}

// A chunked body's size is known only once read, and an encoded one's once inflated: each counts as the
// largest it may be.
std::optional<Refusal> Connection::reserve_body(RequestHeader const& header) {
  std::size_t bytes = limits_.payload_limit;
  if (auto const length = parser_->content_length(); length && !header.count(bhttp::field::content_encoding))
    bytes = static_cast<std::size_t>(*length);
  auto reservation = listener_.reserve_body(bytes);
  if (!reservation) {
    return Refusal(kTooManyRequests, "the server holds " + std::to_string(listener_.buffered_bytes()) +
                                         " bytes of other requests' bodies, and this one's " + std::to_string(bytes) +
                                         " would pass its bound of " + std::to_string(limits_.max_buffered_bytes) +
                                         " (--max-buffered-bytes); retry later");
  }
  body_ = std::move(*reservation);
  return std::nullopt;
}

void Connection::read_body() {
  state_ = State::kBody;
  arm(limits_.body_timeout);  // from the end of the header
  bhttp::async_read(socket_, buffer_, *parser_,
                    [self = shared_from_this()](beast::error_code error, std::size_t) { self->on_body(error); });
}

void Connection::on_body(beast::error_code error) {
  if (state_ == State::kClosed) return;
  if (timed_out_) {
    return refuse(Refusal(
        kRequestTimeout, "the request body did not arrive within " + seconds(limits_.body_timeout) + " of its header"));
  }
  if (error) {
    if (auto const refusal = refusal_of(error, limits_)) return refuse(*refusal);
    return close();
  }
  handle();
}

void Connection::handle() {
  state_ = State::kHandling;
  timer_.cancel();
  keep_alive_ = parser_->keep_alive();
  head_ = parser_->get().method() == bhttp::verb::head;
  auto message = parser_->release();
  parser_.reset();
  HttpRequest request;
  request.method = std::string(message.method_string());
  std::string_view const target = message.target();
  std::size_t const question = target.find('?');
  request.path = std::string(target.substr(0, question));
  if (question != std::string_view::npos) request.query = std::string(target.substr(question + 1));
  for (auto const& field : message) request.headers.emplace_back(field.name_string(), field.value());
  request.body = std::move(message.body());
  HttpResponse response;
  HttpHandler const* const handler = listener_.app().route(request, response);
  if (handler == nullptr) return answer(std::move(response));
  // The pool's task holds the io_context's work, so the I/O threads wait for its answer even at stop. It reads
  // nothing of the connection that the strand may change meanwhile (on_stop clears keep_alive_).
  listener_.pool().post(
      [self = shared_from_this(), handler, request = std::move(request), keep_alive = keep_alive_, head = head_,
       body = std::make_shared<BodyReservation>(std::move(body_)),
       work = asio::make_work_guard(socket_.get_executor())]() mutable {
        HttpResponse response;
        Application& app = self->listener_.app();
        try {
          decode_content(request.body, request.get_header_value("Content-Encoding"), self->limits_.payload_limit);
          (*handler)(request, response);
        } catch (Refusal const& refusal) {
          response = HttpResponse();
          app.refuse(request.path, refusal.status(), refusal.what(), response);
        } catch (std::exception const& e) {  // the handlers render their own errors; this is a last resort
          response = HttpResponse();
          app.refuse(request.path, kInternalError, e.what(), response);
        }
        request = HttpRequest();
        body->release();
        auto wire =
            std::make_shared<Wire>(wire_of(std::move(response), keep_alive && !self->listener_.stopping(), head));
        beast::error_code const error = self->send_now(*wire);
        asio::post(self->socket_.get_executor(), [self, wire, error] { self->on_sent(wire, error); });
      },
      keep_alive_ && listener_.open_connections() == 1);
}

void Connection::refuse(Refusal const& refusal) {
  body_.release();
  HttpResponse response;
  listener_.app().refuse(path_, refusal.status(), refusal.what(), response);
  keep_alive_ = false;  // what follows a refused request cannot be told apart from its rest
  timed_out_ = false;
  answer(std::move(response));
}

Connection::Wire Connection::wire_of(HttpResponse response, bool keep_alive, bool head) {
  bhttp::response<bhttp::string_body> message;
  message.version(11);
  message.result(static_cast<unsigned>(response.status));
  if (!response.content_type.empty()) message.set(bhttp::field::content_type, response.content_type);
  for (auto const& [name, value] : response.headers) message.insert(name, value);
  message.body() = std::move(response.body);
  message.keep_alive(keep_alive);
  message.prepare_payload();  // Content-Length: a HEAD answer's stays the GET answer's
  Wire wire;
  bhttp::fields::writer fields(message.base(), message.version(), message.result_int());
  wire.header = beast::buffers_to_string(fields.get());
  if (!head) wire.body = std::move(message.body());
  wire.keep_alive = keep_alive;
  return wire;
}

void Connection::answer(HttpResponse response) {
  if (state_ == State::kClosed) return;
  state_ = State::kWriting;
  keep_alive_ = keep_alive_ && !listener_.stopping();
  wire_ = wire_of(std::move(response), keep_alive_, head_);
  write_rest();
}

beast::error_code Connection::send_now(Wire& wire) {
  while (wire.sent < wire.size()) {
    std::array<iovec, 2> parts{};
    std::size_t count = 0;
    for (asio::const_buffer const& part : wire.rest())
      if (part.size() > 0) parts[count++] = iovec{const_cast<void*>(part.data()), part.size()};
    msghdr message{};
    message.msg_iov = parts.data();
    message.msg_iovlen = count;
    ssize_t const sent = ::sendmsg(socket_.native_handle(), &message, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return {};  // the strand writes the rest
      return beast::error_code(errno, boost::system::system_category());
    }
    wire.sent += static_cast<std::size_t>(sent);
  }
  return {};
}

void Connection::on_sent(std::shared_ptr<Wire> const& wire, beast::error_code error) {
  if (state_ == State::kClosed) return;
  state_ = State::kWriting;
  wire_ = std::move(*wire);
  keep_alive_ = keep_alive_ && wire_.keep_alive;
  if (error) return close();
  if (wire_.sent == wire_.size()) return on_written({});
  write_rest();
}

void Connection::write_rest() {
  arm(listener_.stopping() ? std::chrono::duration_cast<Clock::duration>(kStopWrite) : limits_.write_timeout);
  asio::async_write(socket_, wire_.rest(),
                    [self = shared_from_this()](beast::error_code error, std::size_t) { self->on_written(error); });
}

void Connection::on_written(beast::error_code error) {
  if (interrupted(error)) return;
  wire_ = {};
  if (!keep_alive_ || listener_.stopping()) return drain();
  wait_for_request();
}

void Connection::drain() {
  if (state_ != State::kDraining) {
    state_ = State::kDraining;
    beast::error_code ignored;
    socket_.shutdown(Socket::shutdown_send, ignored);
    parser_.reset();
    buffer_.clear();
    arm(kDrainTime);
  }
  socket_.async_read_some(buffer_.prepare(kDrainStep),
                          [self = shared_from_this()](beast::error_code error, std::size_t bytes) {
                            if (self->interrupted(error)) return;
                            self->drained_ += bytes;
                            if (self->drained_ > kDrainBytes) return self->close();
                            self->drain();
                          });
}

void Connection::close() {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  body_.release();
  timer_.cancel();
  beast::error_code ignored;
  socket_.close(ignored);
  parser_.reset();
  buffer_ = beast::flat_buffer();
}

void Connection::arm(Clock::duration timeout) {
  timer_.expires_after(timeout);
  timer_.async_wait([self = shared_from_this()](beast::error_code error) {
    if (!error) self->on_deadline();
  });
}

void Connection::on_deadline() {
  if (timer_.expiry() > Clock::now()) return;  // re-armed after this wait had ended
  if (state_ == State::kHeader || state_ == State::kBody) {
    timed_out_ = true;  // the read ends with an error; its handler answers 408
    beast::error_code ignored;
    socket_.cancel(ignored);
  } else if (state_ != State::kHandling) {
    close();  // idle, a client that does not read its answer, or the drain is over
  }
}

bool Connection::interrupted(beast::error_code const& error) {
  if (state_ == State::kClosed) return true;
  if (error) {
    close();
    return true;
  }
  return false;
}

}  // namespace flashdeberta::cli::server::http

// One client connection: its requests read in turn (keep-alive and pipelining: the bytes of a next request
// wait in the buffer while the current one is answered), each stage under its own deadline, each complete
// request handed to the application's handler on the worker pool and its answer written back in order. It
// lives on a strand of the listener's io_context and costs no thread while it waits.
//
// The worker that ran a handler sends its answer itself when the socket takes it whole (a small answer
// always does): the client does not wait for an I/O thread to wake, and only the wait for the next request
// goes back to the strand. While a handler runs no operation of the strand touches the socket, so that
// send races with nothing.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "server/http/listener.hpp"
#include "server/http/transport.hpp"

namespace flashdeberta::cli::server::http {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  using Socket = boost::asio::ip::tcp::socket;

  Connection(Socket socket, Listener& listener);
  ~Connection();
  Connection(Connection const&) = delete;
  Connection& operator=(Connection const&) = delete;

  void start();
  // From any thread: the server stops. A connection waiting for or reading a request is closed; one whose
  // request is being answered writes the answer (Connection: close) and then closes.
  void stop();

 private:
  enum class State { kIdle, kHeader, kContinue, kBody, kHandling, kWriting, kDraining, kClosed };
  using Parser = boost::beast::http::request_parser<boost::beast::http::string_body>;
  // An answer as it goes out: status line and fields, then the body (none for HEAD), `sent` bytes of them
  // written so far.
  struct Wire {
    std::string header;
    std::string body;
    std::size_t sent = 0;
    bool keep_alive = false;  // what the answer's header says
    std::size_t size() const { return header.size() + body.size(); }
    // What is left to send: the unsent ends of the header and of the body (either may be empty).
    std::array<boost::asio::const_buffer, 2> rest() const {
      std::size_t const in_header = std::min(sent, header.size());
      return {boost::asio::buffer(header) + in_header, boost::asio::buffer(body) + (sent - in_header)};
    }
  };
  static Wire wire_of(HttpResponse response, bool keep_alive, bool head);

  void wait_for_request();
  void read_header();
  void on_header(boost::beast::error_code error);
  // Counts the body the header announces against the listener's bound; the refusal when it would pass it.
  std::optional<Refusal> reserve_body(boost::beast::http::request_header<> const& header);
  void read_body();
  void on_body(boost::beast::error_code error);
  void handle();
  void refuse(Refusal const& refusal);
  void answer(HttpResponse response);
  // On the worker, while kHandling: as much of the answer as the socket takes without waiting; an error
  // of the send, or none.
  boost::beast::error_code send_now(Wire& wire);
  // On the strand: after the worker's send, the rest of the answer or the next request.
  void on_sent(std::shared_ptr<Wire> const& wire, boost::beast::error_code error);
  void write_rest();
  void on_written(boost::beast::error_code error);
  void drain();
  void close();
  void on_stop();
  // (Re)arms the one deadline of the current stage; on_deadline acts on whichever stage is then current.
  void arm(std::chrono::steady_clock::duration timeout);
  void on_deadline();
  // The read or write that just finished, after a deadline or a stop cut it short, or failed.
  bool interrupted(boost::beast::error_code const& error);

  Socket socket_;
  boost::asio::steady_timer timer_;
  Listener& listener_;
  Limits const& limits_;
  boost::beast::flat_buffer buffer_;  // bytes read and not yet parsed: the rest of a request, or the next one
  std::optional<Parser> parser_;
  BodyReservation body_;  // of the request being read; handed to its handler's task
  Wire wire_;             // the answer being written
  std::string path_;      // of the request being read or answered, for the metrics
  State state_ = State::kIdle;
  bool timed_out_ = false;
  bool keep_alive_ = true;
  bool head_ = false;  // the request is HEAD: its answer's header alone
  std::size_t drained_ = 0;
};

}  // namespace flashdeberta::cli::server::http

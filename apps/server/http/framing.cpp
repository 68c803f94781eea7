#include "server/http/framing.hpp"

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>

#include "server/api_error.hpp"

namespace flashdeberta::cli::server::http {

namespace bhttp = boost::beast::http;
using boost::beast::iequals;

namespace {

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

bool is_decimal(std::string_view text) {
  if (text.empty()) return false;
  for (char const c : text)
    if (c < '0' || c > '9') return false;
  return true;
}

// At most this much of a client's header value is quoted back in an error.
std::string quoted(std::string_view value) {
  constexpr std::size_t kShown = 40;
  return "'" + std::string(value.substr(0, kShown)) + (value.size() > kShown ? "...'" : "'");
}

bool body_expected(std::string_view method) { return method == "POST" || method == "PUT" || method == "PATCH"; }

}  // namespace

std::optional<Refusal> check_header(RequestHeader const& header, Limits const& limits) {
  std::size_t fields = 0;
  std::size_t lengths = 0;
  std::size_t codings = 0;
  std::size_t encodings = 0;
  for (auto const& field : header) {
    ++fields;
    std::string_view const value = trimmed(field.value());
    if (field.name() == bhttp::field::content_length) {
      if (++lengths > 1) return Refusal(kBadRequest, "the request has more than one Content-Length header");
      if (!is_decimal(value))
        return Refusal(kBadRequest, "Content-Length " + quoted(value) + " is not a decimal number of bytes");
    } else if (field.name() == bhttp::field::transfer_encoding) {
      if (++codings > 1 || !iequals(value, "chunked")) {
        return Refusal(kNotImplemented, "Transfer-Encoding " + quoted(value) +
                                            " is not served: a request body is sent whole or chunked alone");
      }
    } else if (field.name() == bhttp::field::content_encoding) {
      bool const known =
          iequals(value, "identity") || iequals(value, "gzip") || iequals(value, "x-gzip") || iequals(value, "deflate");
      if (++encodings > 1 || !known) {
        return Refusal(kUnsupportedMediaType,
                       "Content-Encoding " + quoted(value) + " is not served (identity, gzip or deflate)");
      }
    }
  }
  if (fields > limits.max_header_count) {
    return Refusal(kHeaderTooLarge, "the request has " + std::to_string(fields) + " header fields, more than the " +
                                        std::to_string(limits.max_header_count) + " a request may have");
  }
  if (lengths > 0 && codings > 0)
    return Refusal(kBadRequest, "the request has both Content-Length and Transfer-Encoding");
  if (lengths == 0 && codings == 0 && body_expected(header.method_string())) {
    return Refusal(kLengthRequired, "a " + std::string(header.method_string()) +
                                        " request needs Content-Length or chunked Transfer-Encoding");
  }
  return std::nullopt;
}

std::optional<Refusal> refusal_of(boost::beast::error_code const& error, Limits const& limits) {
  if (error == bhttp::error::header_limit) {
    return Refusal(kHeaderTooLarge, "the request line and header fields hold more than " +
                                        std::to_string(limits.max_header_bytes) + " bytes");
  }
  if (error == bhttp::error::body_limit) {
    return Refusal(kPayloadTooLarge, "the request body holds more than " + std::to_string(limits.payload_limit) +
                                         " bytes, the most a request may hold (--payload-limit)");
  }
  if (error == bhttp::error::bad_content_length || error == bhttp::error::multiple_content_length)
    return Refusal(kBadRequest,
                   "the request's Content-Length is not one decimal number of bytes, or comes with a "
                   "Transfer-Encoding");
  if (error == bhttp::error::bad_transfer_encoding)
    return Refusal(kBadRequest, "the request's Transfer-Encoding is repeated or comes with a Content-Length");
  if (error.category() == bhttp::make_error_code(bhttp::error::header_limit).category() ||
      error == bhttp::error::bad_method) {
    // Everything else of Beast's parser that is the client's fault: a malformed request line, field or chunk.
    if (error != bhttp::error::end_of_stream && error != bhttp::error::partial_message &&
        error != bhttp::error::need_more && error != bhttp::error::need_buffer)
      return Refusal(kBadRequest, "the HTTP request could not be read (" + error.message() + ")");
  }
  return std::nullopt;
}

bool expects_continue(RequestHeader const& header) {
  auto const expect = header.find(bhttp::field::expect);
  return header.version() >= 11 && expect != header.end() && iequals(trimmed(expect->value()), "100-continue");
}

}  // namespace flashdeberta::cli::server::http

// HTTP/1.1 framing, stricter than Beast's parser alone: what a request's header must satisfy before its body
// is read (RFC 9112 section 6), and the status a parse error is answered with.
#pragma once

#include <optional>

#include <boost/beast/core/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "server/http/transport.hpp"

namespace flashdeberta::cli::server::http {

using RequestHeader = boost::beast::http::request_header<>;

// The refusal of a header that Beast's parser accepted: more than limits.max_header_count fields (431); a
// Content-Length that is not one decimal number sent once ("14, 14", two equal headers: 400); a Transfer-
// Encoding other than "chunked" alone (501), or with a Content-Length (400: refused rather than letting chunked
// win, since the two disagreeing is how requests are smuggled past proxies); a POST, PUT or PATCH without
// either (411); a Content-Encoding other than identity, gzip or deflate (415).
std::optional<Refusal> check_header(RequestHeader const& header, Limits const& limits);

// The refusal a parse error is answered with (400, 408, 413, 431), or nullopt for an error that ends the
// connection without an answer (the client left, the socket failed).
std::optional<Refusal> refusal_of(boost::beast::error_code const& error, Limits const& limits);

// Whether the client waits for "100 Continue" before it sends the body.
bool expects_continue(RequestHeader const& header);

}  // namespace flashdeberta::cli::server::http

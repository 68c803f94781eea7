// A request body sent with Content-Encoding gzip or deflate, inflated before any handler reads it, and
// bounded while it inflates: a few hundred kilobytes of zeros can stand for gigabytes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace flashdeberta::cli::server::http {

// Replaces `body` by what it inflates to under `encoding` (identity, "" or unknown: left as is; framing.cpp
// refused unknown encodings before the body was read). Throws Refusal: 413 the moment the inflated size passes
// `limit`, 400 for a body that is not of its encoding or is cut short.
void decode_content(std::string& body, std::string_view encoding, std::size_t limit);

}  // namespace flashdeberta::cli::server::http

// What a route of the server sees of HTTP: a request (method, path, query, headers, the whole body, already
// decoded from its Content-Encoding) and the response it fills. The transport (apps/server/http/) reads and
// writes the bytes; route code never sees its types.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flashdeberta::cli::server {

namespace detail {
inline bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}
}  // namespace detail

struct HttpRequest {
  std::string method;                                        // "GET", "POST", ... as sent
  std::string path;                                          // the target up to '?'
  std::string query;                                         // after '?', undecoded; empty when none
  std::vector<std::pair<std::string, std::string>> headers;  // in the order sent
  std::string body;

  // The first header named `name` (case-insensitive), or "".
  std::string_view get_header_value(std::string_view name) const {
    for (auto const& [key, value] : headers)
      if (detail::iequals(key, name)) return value;
    return {};
  }
  bool has_header(std::string_view name) const {
    for (auto const& header : headers)
      if (detail::iequals(header.first, name)) return true;
    return false;
  }
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // beside Content-Type, Content-Length, Connection

  void set_content(std::string content, std::string type) {
    body = std::move(content);
    content_type = std::move(type);
  }
  void set_header(std::string name, std::string value) { headers.emplace_back(std::move(name), std::move(value)); }
};

using HttpHandler = std::function<void(HttpRequest const& request, HttpResponse& response)>;

}  // namespace flashdeberta::cli::server

// The server's error answers: an HTTP status and text-embeddings-inference's error body
// {"error": message, "error_type": type}, so TEI's clients read our refusals as they read its own.
// Every handler throws ApiError for a request it refuses; the HTTP layer renders it (http_server.cpp).
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace flashdeberta::cli::server {

// TEI's ErrorType, serialized under the same names. Each has its usual status (TEI's mapping):
// kEmpty 400, kValidation and kTokenizer 422, kOverloaded 429, kBackend 424, kUnhealthy 503; a few
// refusals use another status with the same type (a body too large: 413 kValidation).
enum class ErrorType { kUnhealthy, kBackend, kOverloaded, kValidation, kTokenizer, kEmpty };

// The body an error is written in: TEI's ErrorResponse on its own routes, its OpenAICompatErrorResponse on the
// OpenAI-compatible ones (/v1/embeddings).
enum class ErrorStyle { kTei, kOpenAi };

constexpr std::string_view error_type_name(ErrorType type) {
  switch (type) {
    case ErrorType::kUnhealthy:
      return "Unhealthy";
    case ErrorType::kBackend:
      return "Backend";
    case ErrorType::kOverloaded:
      return "Overloaded";
    case ErrorType::kValidation:
      return "Validation";
    case ErrorType::kTokenizer:
      return "Tokenizer";
    case ErrorType::kEmpty:
      return "Empty";
  }
  return "Backend";
}

// HTTP statuses the server answers with, named once.
inline constexpr int kBadRequest = 400;
inline constexpr int kNotFound = 404;
inline constexpr int kMethodNotAllowed = 405;
inline constexpr int kRequestTimeout = 408;
inline constexpr int kLengthRequired = 411;
inline constexpr int kPayloadTooLarge = 413;
inline constexpr int kUnsupportedMediaType = 415;
inline constexpr int kUnprocessable = 422;
inline constexpr int kFailedDependency = 424;
inline constexpr int kTooManyRequests = 429;
inline constexpr int kHeaderTooLarge = 431;
inline constexpr int kInternalError = 500;
inline constexpr int kNotImplemented = 501;
inline constexpr int kUnavailable = 503;

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, ErrorType type, std::string const& message)
      : std::runtime_error(message), status_(status), type_(type) {}

  int status() const { return status_; }
  ErrorType type() const { return type_; }

 private:
  int status_;
  ErrorType type_;
};

// The refusals every route shares, with their status and type in one place.
[[noreturn]] inline void fail_validation(std::string const& message) {
  throw ApiError(kUnprocessable, ErrorType::kValidation, message);
}
[[noreturn]] inline void fail_empty(std::string const& message) {
  throw ApiError(kBadRequest, ErrorType::kEmpty, message);
}
[[noreturn]] inline void fail_malformed(std::string const& message) {
  throw ApiError(kBadRequest, ErrorType::kValidation, message);
}

}  // namespace flashdeberta::cli::server

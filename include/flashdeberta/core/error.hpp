// The library's exception type and its check tiers.
//
// FLASHDEBERTA_REQUIRE guards user input (files, shapes, configs) and is always on; its message names
// what was wrong. FLASHDEBERTA_REQUIRE_FILE is the same for a file or directory that is missing or cannot
// be read, thrown as FileError so that front ends can tell it apart (Python's OSError, HTTP 404-like
// messages). FLASHDEBERTA_ASSERT guards internal invariants and compiles away under NDEBUG.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace flashdeberta {

class Error : public std::runtime_error {
 public:
  explicit Error(std::string const& message) : std::runtime_error(message) {}
};

// A file or directory that does not exist or cannot be opened or read (what is in it is an Error).
class FileError : public Error {
 public:
  using Error::Error;
};

namespace detail {
// Builds the message from a stream expression only when the check fails.
template <class E = Error, class Fn>
[[noreturn]] void throw_error(Fn&& write_message) {
  std::ostringstream os;
  write_message(os);
  throw E(os.str());
}
}  // namespace detail

}  // namespace flashdeberta

// FLASHDEBERTA_REQUIRE(cond, "tensor " << name << " has " << n << " rows")
#define FLASHDEBERTA_REQUIRE(cond, message)                                                                   \
  do {                                                                                                        \
    if (!(cond)) ::flashdeberta::detail::throw_error([&](std::ostringstream& fd_os_) { fd_os_ << message; }); \
  } while (false)

#define FLASHDEBERTA_REQUIRE_FILE(cond, message)                      \
  do {                                                                \
    if (!(cond))                                                      \
      ::flashdeberta::detail::throw_error<::flashdeberta::FileError>( \
          [&](std::ostringstream& fd_os_) { fd_os_ << message; });    \
  } while (false)

#define FLASHDEBERTA_FAIL(message) \
  ::flashdeberta::detail::throw_error([&](std::ostringstream& fd_os_) { fd_os_ << message; })

#ifdef NDEBUG
#define FLASHDEBERTA_ASSERT(cond) ((void)0)
#else
#define FLASHDEBERTA_ASSERT(cond)                                                            \
  do {                                                                                       \
    if (!(cond))                                                                             \
      ::flashdeberta::detail::throw_error([&](std::ostringstream& fd_os_) {                  \
        fd_os_ << "internal invariant failed: " #cond " at " << __FILE__ << ":" << __LINE__; \
      });                                                                                    \
  } while (false)
#endif

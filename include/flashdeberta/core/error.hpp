// The library's one exception type and its two check tiers.
//
// FLASHDEBERTA_REQUIRE guards user input (files, shapes, configs) and is always on; its message names
// what was wrong. FLASHDEBERTA_ASSERT guards internal invariants and compiles away under NDEBUG.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace flashdeberta {

class Error : public std::runtime_error {
 public:
  explicit Error(std::string const& message) : std::runtime_error(message) {}
};

namespace detail {
// Builds the message from a stream expression only when the check fails.
template <class Fn>
[[noreturn]] void throw_error(Fn&& write_message) {
  std::ostringstream os;
  write_message(os);
  throw Error(os.str());
}
}  // namespace detail

}  // namespace flashdeberta

// FLASHDEBERTA_REQUIRE(cond, "tensor " << name << " has " << n << " rows")
#define FLASHDEBERTA_REQUIRE(cond, message)                                                                   \
  do {                                                                                                        \
    if (!(cond)) ::flashdeberta::detail::throw_error([&](std::ostringstream& fd_os_) { fd_os_ << message; }); \
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

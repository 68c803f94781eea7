// flashdeberta serve in a build without cpp-httplib: the command exists and says what it needs.
#include <span>
#include <string>

#include "commands.hpp"

namespace flashdeberta::cli {

std::string serve_help() {
  return "usage: flashdeberta serve --model DIR [options]\n"
         "\n"
         "This build has no HTTP server: it was configured without cpp-httplib (Debian: libcpp-httplib-dev).\n";
}

int serve_command(std::span<char const* const>) {
  throw UsageError(
      "this build has no HTTP server: it was configured without cpp-httplib (install "
      "libcpp-httplib-dev and configure again)");
}

}  // namespace flashdeberta::cli

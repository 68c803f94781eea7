// flashdeberta serve in a build without cpp-httplib: the command exists, reads its command line as every
// build does (--help included) and says what it needs.
#include <span>

#include "args.hpp"
#include "commands.hpp"
#include "server/model_service.hpp"

namespace flashdeberta::cli {

int serve_command(std::span<char const* const> args) {
  if (!parse_serve_options(args)) return 0;  // --help printed the help
  throw UsageError(
      "this build has no HTTP server: it was configured without cpp-httplib (install "
      "libcpp-httplib-dev and configure again)");
}

}  // namespace flashdeberta::cli

// flashdeberta: the command-line front end of the library (run, bench, tokenize, the pipelines
// fill-mask, classify, ner, qa, zero-shot, rerank, gliner, and serve, the HTTP server). See args.cpp,
// tokenize_command.cpp, serve_command.cpp and the *_command.cpp of the pipelines for the usage texts.
//
// Contract with scripts: exit 0 on success, 2 for usage errors, 1 for any other error, and every error
// is exactly one line on stderr starting with "flashdeberta: error: ". The run command never leaves a
// partial output file (write_safetensors writes a temporary and renames it only when complete).
#include <iostream>
#include <new>
#include <span>
#include <string>
#include <string_view>

#include "args.hpp"
#include "commands.hpp"
#include "flashdeberta/config.hpp"
#include "flashdeberta/core/error.hpp"

namespace {

using flashdeberta::cli::UsageError;

// Messages from deep in the library may quote file contents; flattening keeps the one-line promise.
int report(std::string_view message, int status) {
  std::string line(message);
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  std::cout.flush();
  std::cerr << "flashdeberta: error: " << line << '\n';
  return status;
}

int dispatch(std::span<char const* const> args) {
  using namespace flashdeberta::cli;
  if (args.empty()) throw UsageError("no command given (see 'flashdeberta --help')");
  std::string_view const command = args[0];
  std::span<char const* const> const rest = args.subspan(1);
  if (command == "-h" || command == "--help") {
    std::cout << main_help();
    return 0;
  }
  if (command == "--version") {
    std::cout << "flashdeberta " FLASHDEBERTA_VERSION_STRING "\n";
    return 0;
  }
  if (command == "help") {  // "flashdeberta help run", as git and cargo allow
    std::string_view const topic = rest.empty() ? "" : rest[0];
    if (topic == "run") {
      std::cout << run_help();
    } else if (topic == "bench") {
      std::cout << bench_help();
    } else if (topic == "tokenize") {
      std::cout << tokenize_help();
    } else if (topic == "fill-mask" || topic == "classify" || topic == "ner" || topic == "qa" || topic == "zero-shot" ||
               topic == "rerank") {
      std::cout << (topic == "fill-mask"   ? fill_mask_help()
                    : topic == "classify"  ? classify_help()
                    : topic == "ner"       ? ner_help()
                    : topic == "qa"        ? qa_help()
                    : topic == "zero-shot" ? zero_shot_help()
                                           : rerank_help());
    } else if (topic == "gliner") {
      std::cout << gliner_help();
    } else if (topic == "serve") {
      std::cout << serve_help();
    } else if (topic.empty()) {
      std::cout << main_help();
    } else {
      throw UsageError(
          "no help for unknown command '" + std::string(topic) +
          "' (commands: run, bench, tokenize, fill-mask, classify, ner, qa, zero-shot, rerank, gliner, serve)");
    }
    return 0;
  }
  if (command == "run") {
    auto const options = parse_run_options(rest);
    if (!options) {
      std::cout << run_help();
      return 0;
    }
    return run_command(*options);
  }
  if (command == "bench") {
    auto const options = parse_bench_options(rest);
    if (!options) {
      std::cout << bench_help();
      return 0;
    }
    return bench_command(*options);
  }
  if (command == "tokenize") return tokenize_command(rest);
  if (command == "fill-mask") return fill_mask_command(rest);
  if (command == "classify") return classify_command(rest);
  if (command == "ner") return ner_command(rest);
  if (command == "qa") return qa_command(rest);
  if (command == "serve") return serve_command(rest);
  if (command == "zero-shot") return zero_shot_command(rest);
  if (command == "rerank") return rerank_command(rest);
  if (command == "gliner") return gliner_command(rest);
  if (command.starts_with("-")) {
    throw UsageError("unknown option '" + std::string(command) + "' (see 'flashdeberta --help')");
  }
  throw UsageError(
      "unknown command '" + std::string(command) +
      "' (commands: run, bench, tokenize, fill-mask, classify, ner, qa, zero-shot, rerank, gliner, serve; see "
      "'flashdeberta --help')");
}

}  // namespace

int main(int argc, char** argv) {
  std::span<char const* const> const args(argv + 1, argc > 0 ? static_cast<std::size_t>(argc - 1) : 0);
  try {
    return dispatch(args);
  } catch (UsageError const& e) {
    return report(e.what(), 2);
  } catch (flashdeberta::Error const& e) {
    return report(e.what(), 1);
  } catch (std::bad_alloc const&) {
    return report("out of memory", 1);
  } catch (std::exception const& e) {
    return report(e.what(), 1);
  } catch (...) {
    return report("unknown exception", 1);
  }
}

// Command-line options of the flashdeberta CLI: the option structs, their parsers and the help texts.
//
// Parsing only checks the command line itself (known options, values that parse, required options
// present); whether a file exists or a backend computes a dtype is decided later, by the commands.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

#include "flashdeberta/core/dtype.hpp"
#include "flashdeberta/heads/head_kind.hpp"
#include "flashdeberta/policy/op_args.hpp"
#include "flashdeberta/runtime/options.hpp"

namespace flashdeberta::cli {

// The runtime's option types under the CLI's names. A UsageError (a mistake in the command line, or a
// request the build or checkpoint cannot serve) becomes exit status 2 in main(), as getopt-style tools do,
// so a script can tell "you called me wrong" from "the run failed" (status 1).
using runtime::attention_name;
using runtime::backend_compiled_in;
using runtime::backend_name;
using runtime::BackendKind;
using runtime::describe_backend;
using runtime::dtype_option_name;
using runtime::kDefaultMaxTokens;
using runtime::require_max_tokens;
using runtime::UsageError;
using CommonOptions = runtime::RuntimeOptions;

struct RunOptions {
  CommonOptions common;
  std::filesystem::path input;
  std::filesystem::path output;
  std::optional<HeadKind> head;               // nullopt: --head auto (config.json's architectures)
  std::optional<std::int64_t> mask_token_id;  // masked LM: logits of the tokens with this id only
};

struct BenchOptions {
  CommonOptions common;
  std::int64_t batch = 0;
  std::int64_t seq_len = 0;
  int repeat = 10;
  bool json = false;
};

// Applies one of the options every model command shares (--model, --backend, --attention, --dtype,
// --threads, --max-tokens) with run's parsing and messages; false when `name` is none of them. For commands that parse
// their own option lists (the pipeline commands).
bool apply_common_option(std::string_view command, CommonOptions& options, std::string_view name,
                         std::string_view value);

// Whole-string integer in [min, max]; anything else is a UsageError naming --option and the command.
std::int64_t parse_integer_option(std::string_view command, std::string_view option, std::string_view text,
                                  std::int64_t min, std::int64_t max);

// `args` excludes the program and command names. nullopt: --help was given and the help printed.
std::optional<RunOptions> parse_run_options(std::span<char const* const> args);
std::optional<BenchOptions> parse_bench_options(std::span<char const* const> args);

std::string main_help();
std::string run_help();
std::string bench_help();

}  // namespace flashdeberta::cli

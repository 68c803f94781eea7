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

namespace flashdeberta::cli {

// A mistake in the command line. main() turns it into exit status 2, as getopt-style tools do, so a
// script can tell "you called me wrong" from "the run failed" (status 1).
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class BackendKind { kEigen, kKokkos, kCuda };

// --max-tokens default: the most tokens one input (a run file's [B][L] positions, a bench batch, a text or a
// pipeline batch) may hold. 65536 is 128 sequences of 512 (the length DeBERTa is trained at), far above what
// the pipelines batch, yet a mistake (a whole file as one line, a JSON of 10^6 ids) is refused at once instead
// of allocating for minutes: at 65536 tokens a v3-base forward already holds 1.6 GB of activations and a
// masked-LM head over its 128k vocabulary 34 GB of logits.
inline constexpr std::int64_t kDefaultMaxTokens = 65536;

struct CommonOptions {
  std::filesystem::path model;
  BackendKind backend = BackendKind::kEigen;
  AttentionImpl attention = AttentionImpl::kFlash;
  DType dtype = DType::kF32;
  int threads = 0;                              // 0: every core the backend sees
  std::int64_t max_tokens = kDefaultMaxTokens;  // --max-tokens
};

// Throws flashdeberta::Error (exit 1) when `tokens` exceeds --max-tokens: "<what> holds N tokens, more than
// --max-tokens M ...". `what` names the input ("input.json: input_ids [1, 1000000]", "text 3").
void require_max_tokens(std::int64_t tokens, std::int64_t max_tokens, std::string const& what);

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

std::string_view backend_name(BackendKind backend);
std::string_view attention_name(AttentionImpl attention);
std::string_view dtype_option_name(DType dtype);  // "fp32", "bf16", "fp16"

// "eigen, attention flash, dtype fp32, 8 threads": the summary line both commands print.
std::string describe_backend(CommonOptions const& options, int threads);

// Whether this binary was built with the backend.
bool backend_compiled_in(BackendKind backend);

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

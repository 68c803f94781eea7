// Command-line options of the flashdeberta CLI: what run, bench and tokenize are asked for, the parsers of
// their command lines and serve's, and the options every model command shares. command_line.hpp is the parser (CLI11
// under the program's rules); args.cpp declares run's, bench's, tokenize's and serve's options on it,
// pipeline_options.cpp the pipeline commands'.
//
// Parsing only checks the command line itself (known options, values that parse, required options
// present); whether a file exists or a backend computes a dtype is decided later, by the commands.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "flashdeberta/core/dtype.hpp"
#include "flashdeberta/heads/head_kind.hpp"
#include "flashdeberta/policy/op_args.hpp"
#include "flashdeberta/runtime/options.hpp"
#include "flashdeberta/tokenizer/encoding.hpp"

namespace flashdeberta::cli {

class CommandLine;
namespace server {
struct ServeOptions;
}

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

struct TokenizeOptions {
  std::filesystem::path model;
  std::optional<std::string> pair;  // nullopt also for an empty --pair, as tokenizer(text, "") in HF
  std::optional<std::size_t> max_length;
  std::optional<tokenizer::Truncation> truncation;
  std::int64_t max_tokens = kDefaultMaxTokens;
  std::vector<std::string> texts;  // empty: one text per line of stdin
};

// `args` excludes the program and command names. nullopt: --help was given and the help printed.
std::optional<RunOptions> parse_run_options(std::span<char const* const> args);
std::optional<BenchOptions> parse_bench_options(std::span<char const* const> args);
std::optional<TokenizeOptions> parse_tokenize_options(std::span<char const* const> args);
// serve's (server/model_service.hpp): parsed in every build, so that a build without the server still
// answers --help and checks the command line before saying it has no server.
std::optional<server::ServeOptions> parse_serve_options(std::span<char const* const> args);

// What --model is for a command that loads a Hugging Face checkpoint.
inline constexpr char const* kCheckpointHelp =
    "Hugging Face checkpoint directory (config.json + model.safetensors or\n"
    "pytorch_model.bin, or their sharded indexes); config.json picks the\n"
    "variant: model_type deberta -> v1, deberta-v2 with conv_kernel_size > 0\n"
    "-> v2, else v3";

// The options every model command shares, under the heading "model options": --model (required, described
// by `model_help`), --backend, --attention, --dtype, --threads and, unless `max_tokens_help` is empty (serve
// bounds its inputs with options of its own), --max-tokens.
void add_model_options(CommandLine& cli, CommonOptions& options, std::string const& model_help,
                       std::string const& max_tokens_help);
// --backend alone (eigen, kokkos, cuda; one this build lacks is refused naming those it has), for train.
void add_backend_option(CommandLine& cli, BackendKind& backend);
// train's --dtype: fp32, or bf16 / fp16 mixed precision (HF's bf16=True / fp16=True) on the CUDA backend.
void add_training_dtype_option(CommandLine& cli, DType& dtype);
// --max-tokens alone, for a command that runs no model (tokenize).
void add_max_tokens(CommandLine& cli, std::int64_t& max_tokens, std::string const& help);
// --tokenizer: the tokenizer files when they are not in --model (the pipeline commands, serve).
void add_tokenizer_option(CommandLine& cli, std::optional<std::filesystem::path>& tokenizer);

}  // namespace flashdeberta::cli

// What every front end (the CLI, the Python package, the server) asks of a run: the checkpoint, the
// backend, attention path, dtype and threads, and the most tokens one input may hold. The runtime
// library (flashdeberta::runtime, compiled once and linked by the front ends) is the one place where
// these run-time choices become template instantiations (loaded_model.hpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>

#include "flashdeberta/core/dtype.hpp"
#include "flashdeberta/policy/op_args.hpp"

namespace flashdeberta::runtime {

// A request this build or checkpoint cannot serve as asked (a backend not built in, a dtype the backend
// does not compute in, a checkpoint without the head a task needs). Front ends report it as a usage
// error: the CLI's exit status 2, Python's ValueError, HTTP 400.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class BackendKind { kEigen, kKokkos, kCuda };

// The default of RuntimeOptions::max_tokens: the most tokens one input (a batch, a text, a pipeline
// batch) may hold. 65536 is 128 sequences of 512 (the length DeBERTa is trained at), far above what the
// pipelines batch, yet a mistake (a whole file as one line, a JSON of 10^6 ids) is refused at once instead
// of allocating for minutes: at 65536 tokens a v3-base forward already holds 1.6 GB of activations and a
// masked-LM head over its 128k vocabulary 34 GB of logits.
inline constexpr std::int64_t kDefaultMaxTokens = 65536;

// The bounds every front end (CLI, server, Python) puts on RuntimeOptions: batch offsets are int32, so no
// forward takes more tokens; an OpenMP team far past the machine's cores crashes the process (10^6 threads)
// instead of failing.
inline constexpr std::int64_t kMaxTokensLimit = std::numeric_limits<std::int32_t>::max();
inline constexpr int kMaxThreads = 4096;

// What a front end calls the setting behind RuntimeOptions::max_tokens, so that a refusal names what its user
// can change: the CLI's --max-tokens, the server's --max-batch-tokens, Python's max_tokens.
struct TokenLimitNames {
  std::string max_tokens = "--max-tokens";
};

struct RuntimeOptions {
  std::filesystem::path model;
  BackendKind backend = BackendKind::kEigen;
  AttentionImpl attention = AttentionImpl::kFlash;
  DType dtype = DType::kF32;  // kI8: the host backend's linear layers quantized to int8 (docs/host-dtypes.md)
  int threads = 0;            // 0: every core the backend sees
  std::int64_t max_tokens = kDefaultMaxTokens;  // refuse larger inputs before running them
  TokenLimitNames limit_names;                  // for the refusals
};

std::string_view backend_name(BackendKind backend);        // "eigen", "kokkos", "cuda"
std::string_view backend_title(BackendKind backend);       // "Eigen", "Kokkos", "CUDA": in messages
std::string_view attention_name(AttentionImpl attention);  // "flash", "eager"
std::string_view dtype_option_name(DType dtype);           // "fp32", "bf16", "fp16", "int8"

// Whether this build of the runtime has the backend (backend_registry.cpp). For a backend built as a module
// (CUDA), whether the build made it: its libraries are loaded only when a run starts it.
bool backend_compiled_in(BackendKind backend);

// "eigen, attention flash, dtype fp32, 8 threads": the summary line the front ends print.
std::string describe_backend(RuntimeOptions const& options, int threads);

// Throws flashdeberta::Error when `tokens` exceeds --max-tokens: "<what> holds N tokens, more than
// --max-tokens M ...". `what` names the input ("input.json: input_ids [1, 1000000]", "text 3").
void require_max_tokens(std::int64_t tokens, std::int64_t max_tokens, std::string const& what);

}  // namespace flashdeberta::runtime

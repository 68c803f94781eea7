#include "args.hpp"

#include <charconv>
#include <functional>
#include <limits>
#include <set>
#include <sstream>
#include <vector>

#include "flashdeberta/config.hpp"
#include "flashdeberta/core/error.hpp"

namespace flashdeberta::cli {

namespace {

// "eigen, kokkos (not in this build), cuda (not in this build)": the help says what this binary can do.
std::string backend_list() {
  std::string out;
  for (BackendKind b : {BackendKind::kEigen, BackendKind::kKokkos, BackendKind::kCuda}) {
    if (!out.empty()) out += ", ";
    out += backend_name(b);
    if (b == BackendKind::kEigen) out += " (default)";
    if (!backend_compiled_in(b)) out += " (not in this build)";
  }
  return out;
}

struct OptionSpec {
  std::string_view name;  // without the leading "--"
  bool takes_value = true;
  bool required = false;
  std::function<void(std::string_view)> apply;
};

std::string see_help(std::string_view command) { return " (see 'flashdeberta " + std::string(command) + " --help')"; }

[[noreturn]] void usage_fail(std::string const& message, std::string_view command) {
  throw UsageError(message + see_help(command));
}

// Whole-string integer in [min, max]; "12x", "", "1e3" and out-of-range values are usage errors.
std::int64_t parse_integer(std::string_view option, std::string_view text, std::int64_t min, std::int64_t max,
                           std::string_view command) {
  std::int64_t value = 0;
  auto const [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min || value > max) {
    std::ostringstream os;
    os << "--" << option << " '" << text << "' is not an integer in [" << min << ", " << max << "]";
    usage_fail(os.str(), command);
  }
  return value;
}

// Options shared by run and bench.
std::vector<OptionSpec> common_specs(CommonOptions& o, std::string_view command) {
  return {
      {"model", true, true, [&o](std::string_view v) { o.model = std::filesystem::path(v); }},
      {"backend", true, false,
       [&o, command](std::string_view v) {
         if (v == "eigen") {
           o.backend = BackendKind::kEigen;
         } else if (v == "kokkos") {
           o.backend = BackendKind::kKokkos;
         } else if (v == "cuda") {
           o.backend = BackendKind::kCuda;
         } else {
           usage_fail("unknown backend '" + std::string(v) + "' (expected eigen, kokkos or cuda)", command);
         }
         if (!backend_compiled_in(o.backend)) {
           std::string const shown = o.backend == BackendKind::kCuda ? "CUDA" : "Kokkos";
           throw UsageError("--backend " + std::string(v) + ": this build has no " + shown +
                            " backend (backends: " + backend_list() + ")");
         }
       }},
      {"attention", true, false,
       [&o, command](std::string_view v) {
         if (v == "flash") {
           o.attention = AttentionImpl::kFlash;
         } else if (v == "eager") {
           o.attention = AttentionImpl::kEager;
         } else {
           usage_fail("unknown attention '" + std::string(v) + "' (expected flash or eager)", command);
         }
       }},
      {"dtype", true, false,
       [&o, command](std::string_view v) {
         if (v == "fp32") {
           o.dtype = DType::kF32;
         } else if (v == "bf16") {
           o.dtype = DType::kBF16;
         } else if (v == "fp16") {
           o.dtype = DType::kF16;
         } else if (v == "int8") {
           o.dtype = DType::kI8;
         } else {
           usage_fail("unknown dtype '" + std::string(v) + "' (expected fp32, bf16, fp16 or int8)", command);
         }
       }},
      {"threads", true, false,
       [&o, command](std::string_view v) {
         o.threads = static_cast<int>(parse_integer("threads", v, 0, runtime::kMaxThreads, command));
       }},
      {"max-tokens", true, false,
       [&o, command](std::string_view v) {
         o.max_tokens = parse_integer("max-tokens", v, 1, runtime::kMaxTokensLimit, command);
       }},
  };
}

bool is_help(std::string_view arg) { return arg == "-h" || arg == "--help"; }

// Returns false when --help was given (anywhere, so "run --model x --help" helps rather than fails).
bool parse_options(std::string_view command, std::span<char const* const> args, std::vector<OptionSpec> const& specs) {
  for (char const* arg : args) {
    if (is_help(arg)) return false;
  }
  std::set<std::string_view> seen;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view const arg = args[i];
    if (!arg.starts_with("--")) {
      if (arg.starts_with("-") && arg.size() > 1) usage_fail("unknown option '" + std::string(arg) + "'", command);
      usage_fail("unexpected argument '" + std::string(arg) + "'", command);
    }
    std::size_t const eq = arg.find('=');
    std::string_view const name = arg.substr(2, eq == std::string_view::npos ? std::string_view::npos : eq - 2);
    OptionSpec const* spec = nullptr;
    for (auto const& s : specs) {
      if (s.name == name) spec = &s;
    }
    if (spec == nullptr) {
      usage_fail("unknown option '--" + std::string(name) + "' for '" + std::string(command) + "'", command);
    }
    if (!seen.insert(spec->name).second) usage_fail("option --" + std::string(name) + " is given twice", command);
    if (!spec->takes_value) {
      if (eq != std::string_view::npos) usage_fail("option --" + std::string(name) + " takes no value", command);
      spec->apply({});
      continue;
    }
    std::string_view value;
    if (eq != std::string_view::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < args.size() && !std::string_view(args[i + 1]).starts_with("--")) {
      value = args[++i];
    } else {
      usage_fail("option --" + std::string(name) + " needs a value", command);
    }
    if (value.empty()) usage_fail("option --" + std::string(name) + " has an empty value", command);
    spec->apply(value);
  }
  for (auto const& s : specs) {
    if (s.required && !seen.contains(s.name)) usage_fail("missing --" + std::string(s.name), command);
  }
  return true;
}

}  // namespace

bool apply_common_option(std::string_view command, CommonOptions& options, std::string_view name,
                         std::string_view value) {
  for (OptionSpec const& spec : common_specs(options, command)) {
    if (spec.name == name) {
      spec.apply(value);
      return true;
    }
  }
  return false;
}

std::int64_t parse_integer_option(std::string_view command, std::string_view option, std::string_view text,
                                  std::int64_t min, std::int64_t max) {
  return parse_integer(option, text, min, max, command);
}

std::optional<RunOptions> parse_run_options(std::span<char const* const> args) {
  RunOptions o;
  std::vector<OptionSpec> specs = common_specs(o.common, "run");
  specs.push_back({"input", true, true, [&o](std::string_view v) { o.input = std::filesystem::path(v); }});
  specs.push_back({"output", true, true, [&o](std::string_view v) { o.output = std::filesystem::path(v); }});
  specs.push_back({"head", true, false, [&o](std::string_view v) {
                     if (v == "auto") {
                       o.head.reset();
                     } else if (auto const kind = parse_head_kind(v)) {
                       o.head = *kind;
                     } else {
                       usage_fail(
                           "unknown head '" + std::string(v) + "' (expected auto, base, mlm, seqcls, tokcls, qa or mc)",
                           "run");
                     }
                   }});
  specs.push_back({"mask-token-id", true, false, [&o](std::string_view v) {
                     o.mask_token_id =
                         parse_integer("mask-token-id", v, 0, std::numeric_limits<std::int32_t>::max(), "run");
                   }});
  if (!parse_options("run", args, specs)) return std::nullopt;
  if (o.mask_token_id && o.head && *o.head != HeadKind::kMaskedLM) {
    usage_fail(
        "--mask-token-id selects masked-LM rows; it does not apply to --head " + std::string(head_kind_name(*o.head)),
        "run");
  }
  return o;
}

std::optional<BenchOptions> parse_bench_options(std::span<char const* const> args) {
  BenchOptions o;
  std::vector<OptionSpec> specs = common_specs(o.common, "bench");
  // Batch::cu_seqlens is int32, so the token count of one batch must fit in it.
  constexpr std::int64_t kMaxTokens = runtime::kMaxTokensLimit;
  specs.push_back(
      {"batch", true, true, [&o](std::string_view v) { o.batch = parse_integer("batch", v, 1, kMaxTokens, "bench"); }});
  specs.push_back({"seq-len", true, true,
                   [&o](std::string_view v) { o.seq_len = parse_integer("seq-len", v, 1, kMaxTokens, "bench"); }});
  specs.push_back({"repeat", true, false, [&o](std::string_view v) {
                     o.repeat = static_cast<int>(parse_integer("repeat", v, 1, 1000000, "bench"));
                   }});
  specs.push_back({"json", false, false, [&o](std::string_view) { o.json = true; }});
  if (!parse_options("bench", args, specs)) return std::nullopt;
  if (o.batch > kMaxTokens / o.seq_len) {
    usage_fail("--batch " + std::to_string(o.batch) + " x --seq-len " + std::to_string(o.seq_len) +
                   " tokens exceed the int32 limit of one batch",
               "bench");
  }
  return o;
}

std::string main_help() {
  return "usage: flashdeberta <command> [options]\n"
         "\n"
         "Runs Hugging Face DeBERTa v1/v2/v3 checkpoints (flashdeberta " FLASHDEBERTA_VERSION_STRING
         ").\n"
         "\n"
         "commands:\n"
         "  run        run the model (backbone or a head) on token ids from a JSON file\n"
         "  bench      time the forward pass on random token ids\n"
         "  tokenize   text -> input_ids, token_type_ids, attention_mask, offsets, tokens (JSON lines)\n"
         "  fill-mask  the top tokens for each [MASK] of a text (masked-LM checkpoints)\n"
         "  classify   labels with probabilities, of texts or text pairs (sequence-classification checkpoints)\n"
         "  ner        entity spans with labels, scores and offsets (token-classification checkpoints)\n"
         "  qa         the answer span of a question in a context (question-answering checkpoints)\n"
         "  zero-shot  texts into labels given at run time (NLI sequence-classification checkpoints)\n"
         "  rerank     passages by relevance to a query (cross-encoders: one-label classification)\n"
         "  gliner     named entities of labels given at run time (GLiNER model directories)\n"
         "  serve      the checkpoint behind an HTTP endpoint with dynamic batching (TEI's routes)\n"
         "\n"
         "options:\n"
         "  -h, --help   show this help; 'flashdeberta <command> --help' shows a command's options\n"
         "  --version    print the version\n"
         "\n"
         "exit status: 0 on success, 2 for usage errors, 1 for any other error (one line on stderr).\n";
}

namespace {

std::string model_help() {
  return "  --model DIR          Hugging Face checkpoint directory (config.json + model.safetensors or\n"
         "                       pytorch_model.bin, or their sharded indexes);\n"
         "                       config.json picks the variant: model_type deberta -> v1,\n"
         "                       deberta-v2 with conv_kernel_size > 0 -> v2, else v3\n";
}

std::string backend_help() {
  return "  --backend NAME       " + backend_list() +
         "\n"
         "  --attention IMPL     flash (default) or eager (materializes the L x L scores, as HF does)\n"
         "  --dtype TYPE         compute type: fp32 (default), bf16, fp16, int8; cuda computes in\n"
         "                       the first three; eigen in fp32, or its linear layers in bf16 or\n"
         "                       int8 (dynamic quantization) through oneDNN; kokkos in fp32 only\n"
         "  --threads N          host threads; 0 (default) uses every core\n"
         "  --max-tokens N       refuse an input of more than N tokens in total, before any work on it\n"
         "                       (default " +
         std::to_string(kDefaultMaxTokens) +
         ": 128 sequences of 512); a forward whose estimated\n"
         "                       memory exceeds what the backend has available is refused as well\n";
}

}  // namespace

std::string run_help() {
  return "usage: flashdeberta run --model DIR --input IN.json --output OUT.safetensors\n"
         "                        [--head auto|base|mlm|seqcls|tokcls|qa|mc] [--mask-token-id ID]\n"
         "                        [--backend eigen|kokkos|cuda] [--attention flash|eager]\n"
         "                        [--dtype fp32|bf16|fp16|int8] [--threads N] [--max-tokens N]\n"
         "\n"
         "Runs the DeBERTa backbone, or a head on it, on token ids and writes the outputs under HF's\n"
         "field names.\n"
         "\n" +
         model_help() +
         "  --input IN.json      {\"input_ids\": [[...], ...], \"attention_mask\": ..., \"token_type_ids\": ...}\n"
         "                       each a nested list [B][L] of integers, or [B][C][L] for multiple choice;\n"
         "                       attention_mask (0/1, default all 1) and token_type_ids (default all 0)\n"
         "                       are optional; --max-tokens counts every position of input_ids,\n"
         "                       padding included, since the outputs are padded to them\n"
         "  --head NAME          auto (default): the head config.json's architectures names (e.g.\n"
         "                       DebertaV2ForSequenceClassification), the backbone when it names none;\n"
         "                       base: the backbone; mlm: masked LM; seqcls: sequence classification;\n"
         "                       tokcls: token classification; qa: question answering; mc: multiple\n"
         "                       choice (v2/v3, [B][C][L] input)\n"
         "  --mask-token-id ID   masked LM only: compute the logits of the tokens whose id is ID (e.g.\n"
         "                       [MASK]) and write them as logits [M, V] with positions [M, 2] (row,\n"
         "                       position in the row, int64) instead of logits [B, L, V]\n"
         "  --output OUT         safetensors file, float32, padded as HF's outputs:\n"
         "                         base    last_hidden_state [B, L, H] ([B, C, L, H] for [B][C][L])\n"
         "                         mlm     logits [B, L, V]\n"
         "                         seqcls  logits [B, num_labels] (label names in the metadata)\n"
         "                         tokcls  logits [B, L, num_labels]\n"
         "                         qa      start_logits [B, L], end_logits [B, L]\n"
         "                         mc      logits [B, C]\n"
         "                       Per-token values at positions with attention_mask 0 are zeros (HF\n"
         "                       leaves padding-dependent values there). Written atomically: after\n"
         "                       any error no output file exists.\n" +
         backend_help() +
         "  -h, --help           show this help\n"
         "\n"
         "exit status: 0 on success, 2 for usage errors, 1 for any other error (one line on stderr).\n";
}

std::string bench_help() {
  return "usage: flashdeberta bench --model DIR [--backend eigen|kokkos|cuda] [--attention flash|eager]\n"
         "                          [--dtype fp32|bf16|fp16|int8] [--threads N] [--max-tokens N]\n"
         "                          --batch B --seq-len L [--repeat N] [--json]\n"
         "\n"
         "Times the forward pass on B random sequences of L token ids (fixed seed, ids in [0, vocab))\n"
         "after one warm-up run; prints the median, 10th and 90th percentile milliseconds, tokens/s\n"
         "and peak memory (host peak RSS, which includes the loaded weights). With --backend cuda the\n"
         "times are CUDA events on the policy's stream and the device memory a forward uses beyond the\n"
         "weights is reported too.\n"
         "\n" +
         model_help() + backend_help() +
         "  --batch B            sequences per forward pass\n"
         "  --seq-len L          tokens per sequence\n"
         "  --repeat N           timed runs (default 10)\n"
         "  --json               print exactly one JSON object line with median_ms, p10_ms, p90_ms,\n"
         "                       tokens_per_s, peak_bytes, backend, attention, batch, seq_len, repeat,\n"
         "                       timer (host_clock or cuda_events) and, for cuda, peak_device_bytes\n"
         "  -h, --help           show this help\n"
         "\n"
         "exit status: 0 on success, 2 for usage errors, 1 for any other error (one line on stderr).\n";
}

}  // namespace flashdeberta::cli

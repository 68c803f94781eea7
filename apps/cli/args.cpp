#include "args.hpp"

#include <array>
#include <limits>
#include <string_view>
#include <vector>

#include "command_line.hpp"
#include "server/model_service.hpp"

namespace flashdeberta::cli {

namespace {

constexpr std::array kBackends = {BackendKind::kEigen, BackendKind::kKokkos, BackendKind::kCuda};

// "eigen (default), kokkos (not in this build), cuda (not in this build)": the help says what this binary
// can do.
std::string backend_list() {
  std::string out;
  for (BackendKind b : kBackends) {
    if (!out.empty()) out += ", ";
    out += backend_name(b);
    if (b == BackendKind::kEigen) out += " (default)";
    if (!backend_compiled_in(b)) out += " (not in this build)";
  }
  return out;
}

// Refuses a backend this build lacks, naming the ones it has.
CLI::Validator built_in_backend() {
  return CLI::Validator(
      [](std::string& name) -> std::string {
        for (BackendKind b : kBackends) {
          if (backend_name(b) == name && !backend_compiled_in(b)) {
            return name + ": this build has no " + std::string(runtime::backend_title(b)) +
                   " backend (backends: " + backend_list() + ")";
          }
        }
        return {};
      },
      "");
}

template <typename T, std::size_t N, typename Name>
std::vector<Choice<T>> choices_of(std::array<T, N> const& values, Name name) {
  std::vector<Choice<T>> out;
  for (T v : values) out.push_back({std::string(name(v)), v});
  return out;
}

}  // namespace

void add_max_tokens(CommandLine& cli, std::int64_t& max_tokens, std::string const& help) {
  cli.option("--max-tokens", max_tokens, "N", help)->transform(integer_in(1, runtime::kMaxTokensLimit));
}

void add_backend_option(CommandLine& cli, BackendKind& backend) {
  cli.choice("--backend", backend, "NAME", choices_of(kBackends, backend_name), backend_list())
      ->check(built_in_backend());
}

void add_training_dtype_option(CommandLine& cli, DType& dtype) {
  cli.choice("--dtype", dtype, "TYPE",
             choices_of(std::array{DType::kF32, DType::kBF16, DType::kF16}, dtype_option_name),
             "fp32 (default); bf16 or fp16 (HF's bf16=True / fp16=True): mixed\n"
             "precision on --backend cuda, float32 master weights and 16-bit\n"
             "products; fp16 with dynamic loss scaling");
}

void add_model_options(CommandLine& cli, CommonOptions& o, std::string const& model_help,
                       std::string const& max_tokens_help) {
  cli.group("model options");
  cli.option("--model", o.model, "DIR", model_help)->required();
  add_backend_option(cli, o.backend);
  cli.choice("--attention", o.attention, "IMPL",
             choices_of(std::array{AttentionImpl::kFlash, AttentionImpl::kEager}, attention_name),
             "flash (default) or eager (materializes the L x L scores, as HF does)");
  cli.choice("--dtype", o.dtype, "TYPE",
             choices_of(std::array{DType::kF32, DType::kBF16, DType::kF16, DType::kI8}, dtype_option_name),
             "compute type: fp32 (default), bf16, fp16, int8; cuda computes in\n"
             "the first three; eigen in fp32, or its linear layers in bf16 or\n"
             "int8 (dynamic quantization) through oneDNN; kokkos in fp32 only");
  cli.option("--threads", o.threads, "N", "host threads; 0 (default) uses every core")
      ->transform(integer_in(0, runtime::kMaxThreads));
  if (!max_tokens_help.empty()) add_max_tokens(cli, o.max_tokens, max_tokens_help);
  cli.group("options");
}

void add_tokenizer_option(CommandLine& cli, std::optional<std::filesystem::path>& tokenizer) {
  cli.option("--tokenizer", tokenizer, "DIR",
             "tokenizer files (spm.model, or vocab.json + merges.txt; tokenizer_config.json)\n"
             "when they are not in --model");
}

namespace {

constexpr char const* kExitStatus =
    "exit status: 0 on success, 2 for usage errors, 1 for any other error (one line on stderr).";

// A forward whose memory would not fit is refused whatever --max-tokens allows; the help says so.
std::string max_tokens_help(std::string const& what) {
  return what + " (default " + std::to_string(kDefaultMaxTokens) +
         ": 128 sequences of 512); a forward whose estimated\n"
         "memory exceeds what the backend has available is refused as well";
}

}  // namespace

std::optional<RunOptions> parse_run_options(std::span<char const* const> args) {
  RunOptions o;
  CommandLine cli("run",
                  "Runs the DeBERTa backbone, or a head on it, on token ids and writes the outputs under HF's\n"
                  "field names.");
  cli.option("--input", o.input, "IN.json",
             "{\"input_ids\": [[...], ...], \"attention_mask\": ..., \"token_type_ids\": ...}\n"
             "each a nested list [B][L] of integers, or [B][C][L] for multiple choice;\n"
             "attention_mask (0/1, default all 1) and token_type_ids (default all 0)\n"
             "are optional")
      ->required();
  cli.option("--output", o.output, "OUT",
             "safetensors file, float32, padded as HF's outputs:\n"
             "  base    last_hidden_state [B, L, H] ([B, C, L, H] for [B][C][L])\n"
             "  mlm     logits [B, L, V]\n"
             "  seqcls  logits [B, num_labels] (label names in the metadata)\n"
             "  tokcls  logits [B, L, num_labels]\n"
             "  qa      start_logits [B, L], end_logits [B, L]\n"
             "  mc      logits [B, C]\n"
             "Per-token values at positions with attention_mask 0 are zeros (HF\n"
             "leaves padding-dependent values there). Written atomically: after\n"
             "any error no output file exists.")
      ->required();
  std::vector<Choice<std::optional<HeadKind>>> heads = {{"auto", std::nullopt}};
  std::string heads_help =
      "auto (default): the head config.json's architectures names (e.g.\n"
      "DebertaV2ForSequenceClassification), the backbone when it names none, or";
  for (HeadFacts const& head : kHeadFacts) {
    heads.push_back({std::string(head.name), head.kind});
    heads_help += "\n  " + std::string(head.name) + std::string(8 - head.name.size(), ' ') +
                  std::string(head.description) + (head.v2_only ? " (v2/v3)" : "") +
                  (head.layout == HeadInputLayout::kChoices ? ", [B][C][L] input" : "");
  }
  cli.choice("--head", o.head, "NAME", heads, heads_help);
  cli.option("--mask-token-id", o.mask_token_id, "ID",
             "masked LM only: compute the logits of the tokens whose id is ID (e.g.\n"
             "[MASK]) and write them as logits [M, V] with positions [M, 2] (row,\n"
             "position in the row, int64) instead of logits [B, L, V]")
      ->transform(integer_in(0, std::numeric_limits<std::int32_t>::max()));
  add_model_options(cli, o.common, kCheckpointHelp,
                    max_tokens_help("refuse an input of more than N tokens in total, before any work on it:\n"
                                    "every position of input_ids, padding included, since the outputs\n"
                                    "are padded to them"));
  cli.footer(kExitStatus);
  if (!cli.parse(args)) return std::nullopt;
  if (o.mask_token_id && o.head && *o.head != HeadKind::kMaskedLM) {
    cli.fail("--mask-token-id selects masked-LM rows; it does not apply to --head " +
             std::string(head_kind_name(*o.head)));
  }
  return o;
}

std::optional<BenchOptions> parse_bench_options(std::span<char const* const> args) {
  BenchOptions o;
  CommandLine cli("bench",
                  "Times the forward pass on B random sequences of L token ids (fixed seed, ids in [0, vocab))\n"
                  "after one warm-up run; prints the median, 10th and 90th percentile milliseconds, tokens/s\n"
                  "and peak memory (host peak RSS, which includes the loaded weights). With --backend cuda the\n"
                  "times are CUDA events on the policy's stream and the device memory a forward uses beyond the\n"
                  "weights is reported too.");
  // Batch::cu_seqlens is int32, so the token count of one batch must fit in it.
  constexpr std::int64_t kMaxTokens = runtime::kMaxTokensLimit;
  cli.option("--batch", o.batch, "B", "sequences per forward pass")->required()->transform(integer_in(1, kMaxTokens));
  cli.option("--seq-len", o.seq_len, "L", "tokens per sequence")->required()->transform(integer_in(1, kMaxTokens));
  cli.option("--repeat", o.repeat, "N", "timed runs (default 10)")->transform(integer_in(1, 1000000));
  cli.flag("--json", o.json,
           "print exactly one JSON object line with median_ms, p10_ms, p90_ms,\n"
           "tokens_per_s, peak_bytes, backend, attention, batch, seq_len, repeat,\n"
           "timer (host_clock or cuda_events) and, for cuda, peak_device_bytes");
  add_model_options(cli, o.common, kCheckpointHelp, max_tokens_help("refuse a batch of more than N tokens (B x L)"));
  cli.footer(kExitStatus);
  if (!cli.parse(args)) return std::nullopt;
  if (o.batch > kMaxTokens / o.seq_len) {
    cli.fail("--batch " + std::to_string(o.batch) + " x --seq-len " + std::to_string(o.seq_len) +
             " tokens exceed the int32 limit of one batch");
  }
  return o;
}

std::optional<TokenizeOptions> parse_tokenize_options(std::span<char const* const> args) {
  TokenizeOptions o;
  CommandLine cli("tokenize",
                  "Tokenizes each TEXT (or, without TEXT, each line of stdin) with the checkpoint's tokenizer and\n"
                  "prints one JSON object per line: input_ids, token_type_ids, attention_mask, offsets ([start, end]\n"
                  "in Unicode code points of the text, [0, 0] for special tokens, as HF's offset_mapping) and tokens.");
  cli.option("--model", o.model, "DIR",
             "directory with spm.model (v2/v3) or vocab.json + merges.txt (v1), and\n"
             "tokenizer_config.json etc. when present; tokenizer files alone are enough")
      ->required();
  cli.text("--pair", o.pair, "TEXT",
           "second sequence for every text: [CLS] TEXT [SEP] PAIR [SEP], types 0 / 1\n"
           "(an empty PAIR means none, as tokenizer(text, \"\") in HF)");
  cli.option("--max-length", o.max_length, "N",
             "truncate to N tokens, special tokens included (longest_first by default)")
      ->transform(integer_in(0, std::int64_t{1} << 31));
  cli.choice("--truncation", o.truncation, "S",
             {{"longest_first", tokenizer::Truncation::kLongestFirst},
              {"only_first", tokenizer::Truncation::kOnlyFirst},
              {"only_second", tokenizer::Truncation::kOnlySecond}},
             "longest_first, only_first or only_second; a truncation HF refuses (the\n"
             "chosen sequence is too short) is an error");
  add_max_tokens(cli, o.max_tokens,
                 "refuse a text (with its pair) of more than N tokens before truncation,\n"
                 "special tokens included (default " +
                     std::to_string(kDefaultMaxTokens) +
                     "); a text or line of more than\n"
                     "64 x N bytes is refused before it is tokenized (or read whole)");
  cli.texts(o.texts);
  cli.footer(
      "Every argument after -- is a TEXT, even one starting with '-'. Texts must be valid UTF-8. Lines read\n"
      "from stdin lose their line ending (\\n or \\r\\n).");
  if (!cli.parse(args)) return std::nullopt;
  if (o.pair && o.pair->empty()) o.pair.reset();  // HF's tokenizer(text, "") encodes a single sequence
  if (o.truncation && !o.max_length) cli.fail("--truncation needs --max-length");
  return o;
}

std::optional<server::ServeOptions> parse_serve_options(std::span<char const* const> args) {
  server::ServeOptions o;
  CommandLine cli(
      "serve",
      "Serves the checkpoint over HTTP until SIGTERM or SIGINT (then stops accepting, answers the requests\n"
      "in flight and exits 0). Routes follow text-embeddings-inference's API where it has one; the head in\n"
      "config.json's architectures decides which model routes are served:\n"
      "  POST /predict    sequence classification: {\"inputs\": \"text\" | [\"text\", \"pair\"] | [[...], ...],\n"
      "                   \"raw_scores\", \"truncate\"} -> [{\"label\", \"score\"}, ...] per input\n"
      "  POST /rerank     one-label cross-encoders: {\"query\", \"texts\", \"raw_scores\", \"return_text\",\n"
      "                   \"truncate\", \"top_n\"} -> [{\"index\", \"score\"}, ...] best first\n"
      "  POST /zero-shot  NLI checkpoints (an 'entailment' label): {\"inputs\", \"candidate_labels\",\n"
      "                   \"hypothesis_template\", \"multi_label\"} -> {\"sequence\", \"labels\", \"scores\"}\n"
      "  POST /embed      the backbone alone: {\"inputs\", \"normalize\", \"truncate\"} -> [[floats], ...]\n"
      "  POST /fill-mask  masked LMs: {\"inputs\", \"top_k\"} -> HF's fill-mask predictions\n"
      "  POST /ner        token classification: {\"inputs\"} -> HF's entities (aggregation simple)\n"
      "  POST /gliner     a GLiNER model directory (gliner_config.json) instead of a checkpoint, which serves\n"
      "                   this route alone: {\"text\" | \"texts\", \"labels\", \"threshold\", \"flat_ner\",\n"
      "                   \"multi_label\"} -> [{\"start\", \"end\", \"text\", \"label\", \"score\"}, ...] per text\n"
      "  POST /tokenize   every model: {\"inputs\", \"add_special_tokens\"} -> [[{\"id\", \"text\", \"special\",\n"
      "                   \"start\", \"stop\"}, ...]] (byte offsets, as TEI)\n"
      "  GET /info, GET /health, GET /metrics (Prometheus text format)\n"
      "Errors are {\"error\": ..., \"error_type\": ...} with TEI's statuses: 400 malformed or empty, 413 too\n"
      "large, 422 invalid, 424 a route the model does not serve, 429 overloaded; and HTTP's: 404, 405, 408\n"
      "too slow, 411 no Content-Length, 415 unknown Content-Encoding, 431 header too large.",
      32);
  std::int64_t const int32_max = std::numeric_limits<std::int32_t>::max();
  cli.option("--host", o.host, "ADDR", "address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)");
  cli.option("--port", o.port, "N", "port (default 8080; 0: any free port, printed at start)")
      ->transform(integer_in(0, 65535));
  cli.option("--model-id", o.model_id, "NAME", "the model_id /info reports (default: the directory's name)");
  cli.option("--max-batch-tokens", o.max_batch_tokens, "N",
             "tokens per forward pass: concurrent requests are packed into one\n"
             "batch up to N (default 16384)")
      ->transform(integer_in(1, int32_max));
  cli.option("--max-concurrent-requests", o.max_concurrent_requests, "N",
             "requests admitted at once; more are answered 429 (default 512)")
      ->transform(integer_in(1, 65536));
  cli.option("--max-client-batch-size", o.max_client_batch_size, "N", "inputs per request (default 32; more: 413)")
      ->transform(integer_in(1, 1 << 20));
  cli.option("--max-input-length", o.max_input_length, "N",
             "tokens per input, special tokens included (default: config.json's\n"
             "max_position_embeddings); longer inputs are refused (422) unless\n"
             "the request says \"truncate\": true")
      ->transform(integer_in(8, int32_max));
  cli.option("--payload-limit", o.payload_limit, "BYTES", "request body size (default 2000000; more: 413)")
      ->transform(integer_in(64, int32_max));
  cli.option("--max-buffered-bytes", o.max_buffered_bytes, "BYTES",
             "request bodies held at once over all connections, as announced\n"
             "(a chunked or compressed one counts as --payload-limit); a body\n"
             "that would pass it is answered 429 before it is read (default\n"
             "134217728)")
      ->transform(integer_in(64, std::numeric_limits<std::int64_t>::max()));
  cli.choice("--pooling", o.pooling, "mean|cls",
             {{"mean", pipelines::Pooling::kMean}, {"cls", pipelines::Pooling::kCls}},
             "/embed's pooling of the last hidden states (default mean)");
  cli.choice("--forward-thread", o.forward_thread, "request|worker",
             {{"request", server::ForwardThread::kCaller}, {"worker", server::ForwardThread::kDedicated}},
             "who runs a forward: with request (the default on the GPU), a\n"
             "request that finds the model idle and no other waiting runs its\n"
             "batch on its own thread, else the worker thread does; with worker\n"
             "(the default on the CPU, whose forwards keep per-thread OpenMP\n"
             "teams and oneDNN buffers), always the worker");
  cli.option("--http-threads", o.http_threads, "N",
             "requests handled at once, on threads started as needed (default:\n"
             "--max-concurrent-requests + 8); connections cost no thread")
      ->transform(integer_in(1, 65536));
  cli.option("--idle-timeout", o.idle_timeout_s, "SECONDS",
             "a keep-alive connection without a request is closed after it (default 60)")
      ->transform(integer_in(1, 86400));
  cli.option("--header-timeout", o.header_timeout_s, "SECONDS",
             "a request's header must arrive within it of its first byte (default\n"
             "10; else 408)")
      ->transform(integer_in(1, 86400));
  cli.option("--body-timeout", o.body_timeout_s, "SECONDS",
             "a request's body must arrive within it of its header (default 30;\n"
             "else 408)")
      ->transform(integer_in(1, 86400));
  // --max-tokens is the CLI's bound on one input; the server has --max-input-length and --max-batch-tokens.
  add_model_options(cli, o.runtime, "Hugging Face checkpoint directory", "");
  add_tokenizer_option(cli, o.tokenizer);
  cli.footer("exit status: 0 after SIGTERM or SIGINT, 2 for usage errors, 1 for any other error.");
  if (!cli.parse(args)) return std::nullopt;
  if (o.model_id.empty())
    o.model_id = std::filesystem::absolute(o.runtime.model).lexically_normal().filename().string();
  if (o.model_id.empty()) o.model_id = o.runtime.model.string();
  if (o.max_buffered_bytes < o.payload_limit) {
    cli.fail("--max-buffered-bytes " + std::to_string(o.max_buffered_bytes) + " is below --payload-limit " +
             std::to_string(o.payload_limit) + ": a request of the largest size allowed could never be read");
  }
  if (o.http_threads == 0) o.http_threads = o.max_concurrent_requests + server::kSpareHttpThreads;
  if (o.http_threads <= o.max_concurrent_requests) {
    cli.fail("--http-threads " + std::to_string(o.http_threads) + " must exceed --max-concurrent-requests " +
             std::to_string(o.max_concurrent_requests) +
             ": a thread must be left to answer 429 when every admitted request is busy");
  }
  return o;
}

}  // namespace flashdeberta::cli

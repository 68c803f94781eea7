#include "pipeline_common.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <set>

#include <nlohmann/json.hpp>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/io/json.hpp"
#include "flashdeberta/io/mapped_file.hpp"

namespace flashdeberta::cli {

namespace {

[[noreturn]] void usage_fail(std::string_view command, std::string const& message) {
  throw UsageError(message + " (see 'flashdeberta " + std::string(command) + " --help')");
}

bool is_terminal(int fd) { return ::isatty(fd) == 1; }

// A one-line bar on stderr, redrawn at most every 100 ms; `total` 0 when the count is not known (stdin).
class Progress {
 public:
  Progress(bool enabled, std::size_t total) : enabled_(enabled), total_(total), start_(Clock::now()) {}
  ~Progress() {
    if (drawn_) std::cerr << '\n' << std::flush;
  }
  Progress(Progress const&) = delete;
  Progress& operator=(Progress const&) = delete;

  // Takes the bar off its line before output is printed, so a terminal showing both streams stays tidy.
  void clear() {
    if (drawn_) std::cerr << "\r\x1b[K" << std::flush;
  }

  void advance(std::size_t n, bool final = false) {
    done_ += n;
    if (!enabled_) return;
    auto const now = Clock::now();
    if (!final && drawn_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    double const seconds = std::chrono::duration<double>(now - start_).count();
    double const rate = seconds > 0.0 ? static_cast<double>(done_) / seconds : 0.0;
    char tail[64];
    std::snprintf(tail, sizeof(tail), " %.1f texts/s", rate);
    std::string line = "\r";
    if (total_ > 0) {
      constexpr std::size_t kWidth = 30;
      std::size_t const filled = std::min(kWidth, done_ * kWidth / total_);
      line += "[" + std::string(filled, '#') + std::string(kWidth - filled, '.') + "] " + std::to_string(done_) + "/" +
              std::to_string(total_) + " texts";
    } else {
      line += std::to_string(done_) + " texts";
    }
    std::cerr << line << tail << std::flush;
    drawn_ = true;
  }

 private:
  using Clock = std::chrono::steady_clock;
  bool enabled_;
  std::size_t total_;
  std::size_t done_ = 0;
  bool drawn_ = false;
  Clock::time_point start_;
  Clock::time_point last_;
};

// The same strict reader as the model's config (the model has loaded it by now); HF writes null when unset.
std::string read_problem_type(std::filesystem::path const& config_path) {
  io::MappedFile const file = io::MappedFile::open(config_path);
  std::string_view const text(reinterpret_cast<char const*>(file.bytes().data()), file.size());
  io::Json const root = io::parse_json(text, config_path.string(), "config");
  auto const it = root.is_object() ? root.find("problem_type") : root.end();
  return it != root.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string head_description(HeadKind kind) {
  switch (kind) {
    case HeadKind::kMaskedLM:
      return "masked-LM";
    case HeadKind::kSequenceClassification:
      return "sequence-classification";
    case HeadKind::kTokenClassification:
      return "token-classification";
    case HeadKind::kQuestionAnswering:
      return "question-answering";
    default:
      return std::string(head_kind_name(kind));
  }
}

}  // namespace

std::optional<PipelineOptions> parse_pipeline_options(std::string_view command, std::span<char const* const> args,
                                                      std::span<ExtraOption const> extras, bool takes_texts) {
  for (char const* arg : args) {
    std::string_view const a = arg;
    if (a == "--") break;
    if (a == "-h" || a == "--help") return std::nullopt;
  }
  PipelineOptions o;
  std::set<std::string> seen;
  bool options_done = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view const arg = args[i];
    if (options_done || !arg.starts_with("-") || arg == "-") {
      if (!takes_texts) usage_fail(command, "unexpected argument '" + std::string(arg) + "'");
      o.texts.emplace_back(arg);
      continue;
    }
    if (arg == "--") {
      options_done = true;
      continue;
    }
    if (!arg.starts_with("--")) usage_fail(command, "unknown option '" + std::string(arg) + "'");
    std::size_t const eq = arg.find('=');
    std::string const name(arg.substr(2, eq == std::string_view::npos ? std::string_view::npos : eq - 2));
    bool const is_common = name == "model" || name == "backend" || name == "attention" || name == "dtype" ||
                           name == "threads" || name == "max-tokens" || name == "tokenizer" || name == "batch-size";
    bool const is_extra =
        std::any_of(extras.begin(), extras.end(), [&](ExtraOption const& e) { return e.name == name; });
    bool const is_flag = name == "progress" || name == "timing";
    if (!is_common && !is_extra && !is_flag) {
      usage_fail(command, "unknown option '--" + name + "' for '" + std::string(command) + "'");
    }
    if (!seen.insert(name).second) usage_fail(command, "option --" + name + " is given twice");
    if (is_flag) {
      if (eq != std::string_view::npos) usage_fail(command, "option --" + name + " takes no value");
      (name == "progress" ? o.progress : o.timing) = true;
      continue;
    }
    std::string value;
    if (eq != std::string_view::npos) {
      value = std::string(arg.substr(eq + 1));
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      usage_fail(command, "option --" + name + " needs a value");
    }
    // A question or context may be empty text (HF refuses it later); a path or number may not.
    if (value.empty() && name != "question" && name != "context") {
      usage_fail(command, "option --" + name + " has an empty value");
    }
    if (apply_common_option(command, o.common, name, value)) continue;
    if (name == "tokenizer") {
      o.tokenizer = std::filesystem::path(value);
    } else if (name == "batch-size") {
      o.batch_size = parse_integer_option(command, name, value, 1, 4096);
    } else if (name == "top-k") {
      o.top_k = parse_integer_option(command, name, value, 1, 1000000);
    } else if (name == "question") {
      o.question = value;
    } else if (name == "context") {
      o.context = value;
    }
  }
  if (!seen.contains("model")) usage_fail(command, "missing --model");
  for (ExtraOption const& e : extras) {
    if (e.required && !seen.contains(std::string(e.name))) usage_fail(command, "missing --" + std::string(e.name));
  }
  if (!backend_compiled_in(o.common.backend)) {
    throw UsageError("--backend " + std::string(backend_name(o.common.backend)) + ": this build has no " +
                     (o.common.backend == BackendKind::kCuda ? "CUDA" : "Kokkos") + " backend");
  }
  return o;
}

std::string pipeline_common_help() {
  return "  --model DIR          Hugging Face checkpoint directory (config.json, model.safetensors)\n"
         "  --tokenizer DIR      tokenizer files (spm.model, or vocab.json + merges.txt; tokenizer_config.json)\n"
         "                       when they are not in --model\n"
         "  --backend B          eigen (default), kokkos or cuda, where built in\n"
         "  --attention A        flash (default) or eager\n"
         "  --dtype D            fp32 (default); bf16 or fp16 with --backend cuda\n"
         "  --threads N          host threads (0, the default: every core)\n"
         "  --batch-size N       texts per forward pass (default 8)\n"
         "  --max-tokens N       refuse a text, or a batch of texts, of more than N tokens (default " +
         std::to_string(kDefaultMaxTokens) +
         ");\n"
         "                       a text of more than 64 x N bytes is refused before it is tokenized\n"
         "  --progress           progress bar on stderr (shown anyway for TEXT arguments at a terminal)\n"
         "  --timing             the load time, and the texts' time and rate at the end, on stderr\n"
         "\n"
         "Output: one JSON object per line on stdout. Errors: one line on stderr starting with\n"
         "'flashdeberta: error:', exit status 2 for usage errors (a checkpoint without the head the command\n"
         "needs included), 1 otherwise.\n";
}

Pipeline::Pipeline(PipelineOptions const& options, HeadKind head, std::string_view command) {
  auto const start = std::chrono::steady_clock::now();
  config_ = read_model_config(options.common.model);
  config_path_ = options.common.model / "config.json";
  HeadKind const found = head_kind_from_config(config_);
  if (found != head) {
    std::string names;
    for (std::string const& a : config_.architectures) names += (names.empty() ? "" : ", ") + a;
    throw UsageError(std::string(command) + " needs a " + head_description(head) + " checkpoint (architectures " +
                     "Deberta*" + std::string(head_kind_class_suffix(head)) + "), but " + config_path_.string() +
                     (names.empty() ? std::string(" names no architectures (the backbone alone)") : " names " + names));
  }
  max_tokens_ = options.common.max_tokens;
  problem_type_ = read_problem_type(config_path_);
  tokenizer_.emplace(tokenizer::load_tokenizer(options.tokenizer.value_or(options.common.model)));
  backend_ = std::make_unique<Backend>(options.common);
  model_ = backend_->load(options.common.model, config_, head);
  if (options.timing) {
    std::chrono::duration<double, std::milli> const load = std::chrono::steady_clock::now() - start;
    std::fprintf(stderr, "flashdeberta: loaded %s in %.1f ms\n", options.common.model.string().c_str(), load.count());
  }
}

Pipeline::~Pipeline() {
  model_.reset();
  backend_.reset();
}

tokenizer::Encoding Pipeline::encode(std::string const& text, std::size_t index, std::string const* pair) const {
  require_text_bytes(text.size() + (pair != nullptr ? pair->size() : 0), index, max_tokens_);
  // Tokenizing stops once the text is sure to hold more than --max-tokens, whatever its length.
  tokenizer::EncodeOptions options;
  options.token_limit = static_cast<std::size_t>(max_tokens_);
  tokenizer::Encoding e;
  try {
    e = pair != nullptr ? tokenizer_->encode(text, *pair, options) : tokenizer_->encode(text, options);
  } catch (tokenizer::TokenLimitError const&) {
    fail_over_max_tokens(index, max_tokens_);
  } catch (Error const& error) {
    fail_text(index, error.what());
  }
  return e;
}

HeadOutput Pipeline::forward(std::vector<tokenizer::Encoding> const& encodings,
                             std::optional<std::int64_t> mask_token_id, std::size_t first_text) const {
  std::int64_t total = 0;
  for (tokenizer::Encoding const& e : encodings) total += static_cast<std::int64_t>(e.size());
  FLASHDEBERTA_REQUIRE(total <= max_tokens_, "texts " << first_text << " to " << first_text + encodings.size() - 1
                                                      << " hold " << total
                                                      << " tokens together, more than --max-tokens " << max_tokens_
                                                      << " (lower --batch-size, or raise --max-tokens)");
  Batch batch;
  bool const types = config_.type_vocab_size > 0;
  for (std::size_t i = 0; i < encodings.size(); ++i) {
    tokenizer::Encoding const& e = encodings[i];
    std::vector<std::int32_t> ids, type_ids;
    for (std::size_t t = 0; t < e.size(); ++t) {
      std::int64_t const id = e.input_ids[t];
      if (id < 0 || id >= config_.vocab_size) {
        fail_text(first_text + i, "token '" + e.tokens[t] + "' has id " + std::to_string(id) +
                                      ", outside the model's vocabulary (vocab_size " +
                                      std::to_string(config_.vocab_size) + " in " + config_path_.string() +
                                      "); is the tokenizer the checkpoint's own?");
      }
      ids.push_back(static_cast<std::int32_t>(id));
      if (types)
        type_ids.push_back(
            static_cast<std::int32_t>(std::min<std::int64_t>(e.token_type_ids[t], config_.type_vocab_size - 1)));
    }
    batch.add_sequence(ids, type_ids);
  }
  return model_->forward_head(batch, mask_token_id);
}

std::vector<std::vector<float>> rows_by_sequence(HostHeadTensor const& t, std::span<std::size_t const> sizes) {
  std::vector<std::vector<float>> out(sizes.size());
  std::size_t const width = static_cast<std::size_t>(t.width);
  if (t.rows == HeadRows::kSequences) {
    FLASHDEBERTA_REQUIRE(t.row_count == static_cast<std::int64_t>(sizes.size()),
                         t.name << ": " << t.row_count << " rows for " << sizes.size() << " sequences");
    for (std::size_t b = 0; b < sizes.size(); ++b)
      out[b].assign(t.values.begin() + b * width, t.values.begin() + (b + 1) * width);
    return out;
  }
  std::vector<std::size_t> starts(sizes.size() + 1, 0);
  for (std::size_t b = 0; b < sizes.size(); ++b) {
    starts[b + 1] = starts[b] + sizes[b];
    out[b].assign(sizes[b] * width, 0.0f);
  }
  for (std::int64_t r = 0; r < t.row_count; ++r) {
    std::size_t const token = static_cast<std::size_t>(t.tokens[r]);
    auto const next = std::upper_bound(starts.begin(), starts.end(), token);
    std::size_t const b = static_cast<std::size_t>(next - starts.begin()) - 1;
    FLASHDEBERTA_REQUIRE(b < sizes.size(), t.name << ": row " << r << " names token " << token);
    std::copy_n(t.values.begin() + r * width, width, out[b].begin() + (token - starts[b]) * width);
  }
  return out;
}

void for_each_batch(PipelineOptions const& options,
                    std::function<void(std::vector<std::string> const& texts, std::size_t first)> const& run) {
  using Clock = std::chrono::steady_clock;
  auto const start = Clock::now();
  bool const from_args = !options.texts.empty();
  // A bar by default only for texts given as arguments at a terminal: lines typed at one are answered
  // one by one, and a bar between them would only get in the way.
  bool const interactive = from_args && is_terminal(STDIN_FILENO) && is_terminal(STDERR_FILENO);
  Progress progress(options.progress || interactive, from_args ? options.texts.size() : 0);
  // Lines typed at a terminal are answered one by one.
  std::size_t const size = !from_args && is_terminal(STDIN_FILENO) ? 1 : static_cast<std::size_t>(options.batch_size);
  std::size_t next = 1;
  std::vector<std::string> texts;
  auto const flush = [&] {
    if (texts.empty()) return;
    progress.clear();
    run(texts, next);
    std::cout.flush();
    next += texts.size();
    progress.advance(texts.size());
    texts.clear();
  };
  if (from_args) {
    for (std::string const& text : options.texts) {
      texts.push_back(text);
      if (texts.size() == size) flush();
    }
  } else {
    std::size_t const limit = static_cast<std::size_t>(max_text_bytes(options.common.max_tokens));
    for (std::string line; read_bounded_line(std::cin, line, limit, next + texts.size(), options.common.max_tokens);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      texts.push_back(std::move(line));
      if (texts.size() == size) flush();
    }
  }
  flush();
  progress.advance(0, true);
  if (options.timing) {
    std::chrono::duration<double, std::milli> const time = Clock::now() - start;
    std::size_t const count = next - 1;
    std::fprintf(stderr, "flashdeberta: %zu text%s in %.1f ms (%.1f texts/s)\n", count, count == 1 ? "" : "s",
                 time.count(), time.count() > 0.0 ? 1000.0 * static_cast<double>(count) / time.count() : 0.0);
  }
}

bool read_bounded_line(std::istream& in, std::string& line, std::size_t limit, std::size_t index,
                       std::int64_t max_tokens) {
  line.clear();
  std::streambuf* const buffer = in.rdbuf();
  bool any = false;
  for (;;) {
    int const c = buffer->sbumpc();
    if (c == std::char_traits<char>::eof()) {
      in.setstate(std::ios::eofbit);
      return any;
    }
    any = true;
    if (c == '\n') return true;
    if (line.size() == limit) {
      fail_text(index, "the line holds more than " + std::to_string(limit) + " bytes (" +
                           std::to_string(kMaxTextBytesPerToken) + " per token of --max-tokens " +
                           std::to_string(max_tokens) + "); it is refused before tokenizing (raise --max-tokens)");
    }
    line.push_back(static_cast<char>(c));
  }
}

void require_text_bytes(std::size_t bytes, std::size_t index, std::int64_t max_tokens) {
  std::int64_t const limit = max_text_bytes(max_tokens);
  if (static_cast<std::int64_t>(bytes) <= limit) return;
  fail_text(index, "the text holds " + std::to_string(bytes) + " bytes, more than the " + std::to_string(limit) + " (" +
                       std::to_string(kMaxTextBytesPerToken) + " per token) of --max-tokens " +
                       std::to_string(max_tokens) + "; it is refused before tokenizing (raise --max-tokens)");
}

void fail_over_max_tokens(std::size_t index, std::int64_t max_tokens) {
  fail_text(index, "the text holds more than " + std::to_string(max_tokens) + " tokens, more than --max-tokens " +
                       std::to_string(max_tokens) + " (tokenizing stopped there; raise --max-tokens)");
}

void fail_text(std::size_t index, std::string const& message) {
  throw Error("text " + std::to_string(index) + ": " + message);
}

}  // namespace flashdeberta::cli

#include "pipeline_common.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "flashdeberta/core/error.hpp"

namespace flashdeberta::cli {

namespace {

[[noreturn]] void usage_fail(std::string_view command, std::string const& message) {
  throw UsageError(message + " (see 'flashdeberta " + std::string(command) + " --help')");
}

bool is_terminal(int fd) { return ::isatty(fd) == 1; }

// Progress on stderr; `total` 0 when the count is not known (stdin). At a terminal, a one-line bar redrawn
// in place at most every 100 ms. Elsewhere (a log file, CI) carriage returns would run the updates together
// on one line, so each update is a line of its own (progress_line), at most once a second and at the end.
class Progress {
 public:
  Progress(bool enabled, std::size_t total)
      : enabled_(enabled), at_terminal_(is_terminal(STDERR_FILENO)), total_(total), start_(Clock::now()) {}
  ~Progress() {
    if (drawn_ && at_terminal_) std::cerr << '\n' << std::flush;
  }
  Progress(Progress const&) = delete;
  Progress& operator=(Progress const&) = delete;

  // Takes the bar off its line before output is printed, so a terminal showing both streams stays tidy.
  void clear() {
    if (drawn_ && at_terminal_) std::cerr << "\r\x1b[K" << std::flush;
  }

  void advance(std::size_t n, bool final = false) {
    done_ += n;
    if (!enabled_) return;
    auto const now = Clock::now();
    auto const interval = at_terminal_ ? std::chrono::milliseconds(100) : std::chrono::milliseconds(1000);
    if (!final && drawn_ && now - last_ < interval) return;
    if (final && drawn_ && !at_terminal_ && done_ == shown_) return;  // that line is printed already
    last_ = now;
    shown_ = done_;
    double const seconds = std::chrono::duration<double>(now - start_).count();
    double const rate = seconds > 0.0 ? static_cast<double>(done_) / seconds : 0.0;
    drawn_ = true;
    if (!at_terminal_) {
      std::cerr << progress_line(done_, total_, rate) << '\n' << std::flush;
      return;
    }
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
  }

 private:
  using Clock = std::chrono::steady_clock;
  bool enabled_;
  bool at_terminal_;
  std::size_t total_;
  std::size_t done_ = 0;
  std::size_t shown_ = 0;  // done_ when last drawn
  bool drawn_ = false;
  Clock::time_point start_;
  Clock::time_point last_;
};

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
    auto const extra = std::find_if(extras.begin(), extras.end(), [&](ExtraOption const& e) { return e.name == name; });
    bool const is_extra = extra != extras.end();
    bool const is_flag = name == "progress" || name == "timing" || (is_extra && extra->flag);
    if (!is_common && !is_extra && !is_flag) {
      usage_fail(command, "unknown option '--" + name + "' for '" + std::string(command) + "'");
    }
    if (!seen.insert(name).second) usage_fail(command, "option --" + name + " is given twice");
    if (is_flag) {
      if (eq != std::string_view::npos) usage_fail(command, "option --" + name + " takes no value");
      // Every flag a command may declare, and where it goes.
      std::pair<std::string_view, bool*> const flags[] = {
          {"progress", &o.progress},     {"timing", &o.timing},
          {"jsonl", &o.jsonl},           {"multi-label", &o.multi_label},
          {"raw-scores", &o.raw_scores}, {"return-text", &o.return_text},
          {"nested", &o.nested}};
      for (auto const& [flag, target] : flags) {
        if (flag == name) *target = true;
      }
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
    // A question or context may be empty text (HF refuses it later), and so may a pair; a path or number may not.
    if (value.empty() && name != "question" && name != "context" && name != "pair") {
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
    } else if (name == "pair") {
      o.pair = value;
    } else if (name == "labels") {
      o.labels = value;
    } else if (name == "hypothesis-template") {
      o.hypothesis_template = value;
    } else if (name == "query") {
      o.query = value;
    } else if (name == "top-n") {
      o.top_n = parse_integer_option(command, name, value, 1, 1000000000);
    } else if (name == "max-length") {
      o.max_length = parse_integer_option(command, name, value, 1, 1000000000);
    } else if (name == "threshold") {
      char* end = nullptr;
      double const t = std::strtod(value.c_str(), &end);
      if (end != value.c_str() + value.size() || !(t >= 0.0 && t <= 1.0)) {
        usage_fail(command, "--threshold '" + value + "' is not a number in [0, 1]");
      }
      o.threshold = t;
    } else if (name == "long-text") {
      o.long_text = value;
    } else if (name == "window-overlap") {
      o.window_overlap = parse_integer_option(command, name, value, 0, 1000000000);
    } else if (name == "truncation") {
      try {
        o.truncation = tokenizer::parse_truncation(value);
      } catch (Error const& e) {
        usage_fail(command, "--truncation: " + std::string(e.what()));
      }
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
         "  --dtype D            fp32 (default); bf16 or fp16 with --backend cuda;\n"
         "                       bf16 or int8 linear layers with --backend eigen\n"
         "  --threads N          host threads (0, the default: every core)\n"
         "  --batch-size N       texts per forward pass (default 8)\n"
         "  --max-tokens N       refuse a text, or a batch of texts, of more than N tokens (default " +
         std::to_string(kDefaultMaxTokens) +
         ");\n"
         "                       a text of more than 64 x N bytes is refused before it is tokenized\n"
         "  --progress           progress bar on stderr (shown anyway for TEXT arguments at a terminal); when\n"
         "                       stderr is not a terminal, a line 'flashdeberta: N/M texts, R texts/s' at most\n"
         "                       once a second and at the end\n"
         "  --timing             the load time, and the texts' time and rate at the end, on stderr\n"
         "\n"
         "Output: one JSON object per line on stdout. Errors: one line on stderr starting with\n"
         "'flashdeberta: error:', exit status 2 for usage errors (a checkpoint without the head the command\n"
         "needs included), 1 otherwise.\n";
}

std::unique_ptr<Pipeline const> load_pipeline(PipelineOptions const& options, HeadKind head, std::string_view command) {
  auto const start = std::chrono::steady_clock::now();
  auto pipeline = std::make_unique<Pipeline const>(options.common, options.tokenizer, head, command);
  if (options.timing) {
    std::chrono::duration<double, std::milli> const load = std::chrono::steady_clock::now() - start;
    std::fprintf(stderr, "flashdeberta: loaded %s in %.1f ms\n", options.common.model.string().c_str(), load.count());
  }
  return pipeline;
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

void fail_text(std::size_t index, std::string const& message) {
  throw runtime::InputError(runtime::InputError::Kind::kInvalid, "text " + std::to_string(index) + ": " + message);
}

void print_line(JsonOut const& line) { std::cout << line.dump() << '\n'; }

std::string progress_line(std::size_t done, std::size_t total, double texts_per_second) {
  char rate[64];
  std::snprintf(rate, sizeof(rate), ", %.1f texts/s", texts_per_second);
  return "flashdeberta: " + std::to_string(done) + (total > 0 ? "/" + std::to_string(total) : std::string()) +
         " texts" + rate;
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

}  // namespace flashdeberta::cli

#include "pipeline_common.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <utility>

#include <nlohmann/json.hpp>

#include "flashdeberta/core/error.hpp"

namespace flashdeberta::cli {

namespace {

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

  // Takes the bar off its line before output is printed, so a terminal showing both streams stays tidy;
  // the next advance() draws it again whatever the time since the last drawing, so that it is on screen
  // while the next batch runs (drawn at most every 100 ms, it was blank most of the time).
  void clear() {
    if (drawn_ && at_terminal_) {
      std::cerr << "\r\x1b[K" << std::flush;
      cleared_ = true;
    }
  }

  void advance(std::size_t n, bool final = false) {
    done_ += n;
    if (!enabled_) return;
    auto const now = Clock::now();
    auto const interval = at_terminal_ ? std::chrono::milliseconds(100) : std::chrono::milliseconds(1000);
    if (!final && drawn_ && !cleared_ && now - last_ < interval) return;
    if (final && drawn_ && !at_terminal_ && done_ == shown_) return;  // that line is printed already
    last_ = now;
    shown_ = done_;
    cleared_ = false;
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
  bool cleared_ = false;  // the bar was taken off its line for output and is not drawn again yet
  Clock::time_point start_;
  Clock::time_point last_;
};

}  // namespace

std::unique_ptr<Pipeline const> load_pipeline(PipelineOptions const& options, HeadKind head, std::string_view command) {
  auto const start = std::chrono::steady_clock::now();
  auto pipeline = std::make_unique<Pipeline const>(options.common, options.tokenizer, head, command);
  if (options.timing) {
    std::chrono::duration<double, std::milli> const load = std::chrono::steady_clock::now() - start;
    std::fprintf(stderr, "flashdeberta: loaded %s in %.1f ms\n", options.common.model.string().c_str(), load.count());
  }
  return pipeline;
}

std::size_t for_each_batch(PipelineOptions const& options,
                           std::function<void(std::vector<std::string> const& texts, std::size_t first)> const& run) {
  using Clock = std::chrono::steady_clock;
  auto const start = Clock::now();
  bool const from_args = !options.texts.empty();
  // A bar by default only for texts given as arguments at a terminal: lines typed at one are answered
  // one by one, and a bar between them would only get in the way.
  bool const interactive = from_args && is_terminal(STDIN_FILENO) && is_terminal(STDERR_FILENO);
  Progress progress(options.progress || interactive, from_args ? options.texts.size() : 0);
  // Lines typed at a terminal are answered one by one, and the command says it waits for them: without TEXT
  // arguments it would otherwise sit silent.
  bool const typed = !from_args && is_terminal(STDIN_FILENO);
  std::size_t const size = typed ? 1 : static_cast<std::size_t>(options.batch_size);
  if (typed && is_terminal(STDERR_FILENO)) {
    std::cerr << "flashdeberta: reading texts from the terminal, one per line; Ctrl-D ends (or give TEXT arguments)\n"
              << std::flush;
  }
  std::size_t next = 1;
  std::size_t refused = 0;
  std::vector<std::string> texts;
  auto const refuse = [&](std::size_t line, runtime::InputError const& e) {
    print_line({{"line", line}, {"error", e.what()}});
    ++refused;
  };
  // One refused text fails its whole batch (its forward never ran): the texts then run one at a time.
  auto const run_batch = [&] {
    if (options.stop_on_error) return run(texts, next);
    try {
      run(texts, next);
    } catch (runtime::InputError const& e) {
      if (texts.size() == 1) return refuse(next, e);
      for (std::size_t i = 0; i < texts.size(); ++i) {
        try {
          run({texts[i]}, next + i);
        } catch (runtime::InputError const& one) {
          refuse(next + i, one);
        }
      }
    }
  };
  auto const flush = [&] {
    if (texts.empty()) return;
    progress.clear();
    run_batch();
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
    for (std::string line;;) {
      try {
        if (!read_bounded_line(std::cin, line, limit, next + texts.size(), options.common.max_tokens)) break;
      } catch (runtime::InputError const& e) {  // a line over the byte bound: the rest of it is skipped unread
        if (options.stop_on_error) throw;
        flush();  // the lines before it are answered first
        progress.clear();
        refuse(next, e);
        std::cout.flush();
        ++next;
        progress.advance(1);
        std::cin.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
        continue;
      }
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
  if (refused > 0) {
    std::fprintf(stderr,
                 "flashdeberta: error: %zu of %zu texts refused; their lines on stdout are {\"line\": N, \"error\": "
                 "...} (--on-error stop ends at the first)\n",
                 refused, next - 1);
  }
  return refused;
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

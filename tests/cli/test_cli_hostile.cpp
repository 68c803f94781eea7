// Hostile inputs through the flashdeberta program, as a user downloading files from anywhere would meet
// them: each must end with exit 1, one `flashdeberta: error:` line naming what was wrong, within a few
// seconds and a few hundred MB, and no output file. docs/errors.md lists these cases by name.
#include <sys/stat.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <cctype>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../sanitized_build.hpp"
#include "../unit/torch_bin_writer.hpp"
#include "cli_harness.hpp"

namespace fd = flashdeberta;
namespace fs = std::filesystem;
using fd::testing::fixture;
using fd::testing::ScratchDir;

namespace {

constexpr bool kSanitized = flashdeberta::testing::kAddressSanitized;

// Bounds for a refusal: generous for a loaded 2-core CI machine, far below what the unbounded versions took
// (10 s and 860 MB for the pickle, minutes and tens of GB for the long inputs). ASan's shadow memory and
// slowdown get their own.
constexpr double kMaxSeconds = kSanitized ? 20.0 : 5.0;
constexpr long kMaxKilobytes = kSanitized ? 1200 * 1024 : 300 * 1024;

struct Measured {
  fd::testing::CliResult result;
  double seconds = 0.0;
  long max_rss_kb = 0;  // of the CLI alone: /usr/bin/time is a small parent, whose fork passes on little
};

// Runs the CLI under /usr/bin/time, stdin from `input` when given.
Measured run_measured(std::vector<std::string> const& args, std::string const* input = nullptr) {
  ScratchDir const capture;
  std::vector<std::string> wrapped = {"-f", "%M", "-o", (capture / "rss").string(), FLASHDEBERTA_CLI_PATH};
  wrapped.insert(wrapped.end(), args.begin(), args.end());
  std::string command = "/usr/bin/time";
  for (auto const& a : wrapped) command += " " + fd::testing::shell_quote(a);
  if (input != nullptr) {
    capture.write("stdin.txt", *input);
    command += " <" + fd::testing::shell_quote((capture / "stdin.txt").string());
  }
  command += " >" + fd::testing::shell_quote((capture / "stdout").string()) + " 2>" +
             fd::testing::shell_quote((capture / "stderr").string());
  auto const start = std::chrono::steady_clock::now();
  int const raw = std::system(command.c_str());
  Measured m;
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  m.result.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  m.result.out = fd::testing::read_text(capture / "stdout");
  m.result.err = fd::testing::read_text(capture / "stderr");
  // GNU time writes "Command exited with non-zero status N" before the figure when the program fails.
  std::ifstream rss(capture / "rss");
  for (std::string line; std::getline(rss, line);) {
    if (!line.empty() && std::isdigit(static_cast<unsigned char>(line[0]))) m.max_rss_kb = std::stol(line);
  }
  CHECK(m.max_rss_kb > 0);
  return m;
}

// The refusal contract; `needles` must all appear in the one error line.
void check_refused(Measured const& m, std::vector<std::string> const& needles) {
  CAPTURE(m.result.err);
  CHECK(m.result.status == 1);
  auto const lines = m.result.err_lines();
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].rfind("flashdeberta: error: ", 0) == 0);
  for (auto const& needle : needles) CHECK_MESSAGE(lines[0].find(needle) != std::string::npos, needle);
  CHECK(m.seconds < kMaxSeconds);
  CHECK(m.max_rss_kb < kMaxKilobytes);
  MESSAGE("refused in " << m.seconds << " s, " << m.max_rss_kb / 1024 << " MiB: " << lines[0].substr(0, 160));
}

std::string read_bytes(fs::path const& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(fs::path const& path, std::string const& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// A model directory: the fixture's config.json and weights, with `weights` replacing model.safetensors.
fs::path model_dir(ScratchDir const& dir, std::string const& weights_name, std::string const& weights,
                   std::string const& config = read_bytes(fixture("v3_c2p") / "config.json")) {
  fs::path const model = dir / "model";
  fs::create_directories(model);
  write_bytes(model / "config.json", config);
  write_bytes(model / weights_name, weights);
  return model;
}

// The fixture's safetensors image split into its header JSON and data section.
struct SafetensorsImage {
  fd::io::Json header;
  std::string data;

  static SafetensorsImage of(fs::path const& path) {
    std::string const bytes = read_bytes(path);
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
    return {fd::io::Json::parse(bytes.substr(8, n)), bytes.substr(8 + n)};
  }

  // Every tensor's offsets moved by `shift` bytes.
  void shift_offsets(std::int64_t shift) {
    for (auto& [name, entry] : header.items()) {
      if (name == "__metadata__") continue;
      entry["data_offsets"][0] = entry["data_offsets"][0].get<std::int64_t>() + shift;
      entry["data_offsets"][1] = entry["data_offsets"][1].get<std::int64_t>() + shift;
    }
  }

  std::string bytes(std::string const& header_text) const {
    std::string out;
    fd::test::torch_bin::put_le(out, header_text.size(), 8);
    return out + header_text + data;
  }
  std::string bytes() const { return bytes(header.dump()); }
};

std::string input_with_ids(std::size_t tokens) {
  std::string text = "{\"input_ids\": [[1";
  text.reserve(tokens * 3 + 32);
  for (std::size_t i = 1; i < tokens; ++i) text += ",5";
  return text + "]]}";
}

// `flashdeberta run` of `model` on dir/input.json (the v3_c2p fixture's rows unless the case wrote its own).
std::vector<std::string> run_args(ScratchDir const& dir, fs::path const& model, std::vector<std::string> const& extra) {
  if (!fs::exists(dir / "input.json")) dir.write("input.json", fd::testing::input_json_from_fixture(fixture("v3_c2p")));
  std::vector<std::string> args = {"run",
                                   "--model",
                                   model.string(),
                                   "--input",
                                   (dir / "input.json").string(),
                                   "--output",
                                   (dir / "out.safetensors").string()};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

fd::testing::CliResult run_model(ScratchDir const& dir, fs::path const& model, std::vector<std::string> extra = {}) {
  return fd::testing::run_cli(run_args(dir, model, extra));
}

Measured run_model_measured(ScratchDir const& dir, fs::path const& model, std::vector<std::string> extra = {}) {
  Measured m = run_measured(run_args(dir, model, extra));
  CHECK(!fs::exists(dir / "out.safetensors"));
  return m;
}

}  // namespace

TEST_CASE("hostile safetensors: the data section must be covered from 0 to the end of the file") {
  ScratchDir const dir;
  SafetensorsImage image = SafetensorsImage::of(fixture("v3_c2p") / "model.safetensors");
  SUBCASE("a hole before the first tensor") {
    image.shift_offsets(16);
    image.data.insert(0, 16, '\0');
    check_refused(run_model_measured(dir, model_dir(dir, "model.safetensors", image.bytes())),
                  {"model.safetensors", "16"});
  }
  SUBCASE("trailing bytes after the last tensor") {
    image.data += std::string(16, '\x7f');
    check_refused(run_model_measured(dir, model_dir(dir, "model.safetensors", image.bytes())),
                  {"model.safetensors", "16"});
  }
  SUBCASE("a NUL byte in the header, then anything") {
    check_refused(run_model_measured(
                      dir, model_dir(dir, "model.safetensors", image.bytes(image.header.dump() + '\0' + "}{junk"))),
                  {"model.safetensors", "NUL"});
  }
  SUBCASE("a header over the reference's 100,000,000 bytes") {
    // The file really is that long (sparse), so only the length rule can refuse it.
    fs::path const model = model_dir(dir, "model.safetensors", "");
    std::string head;
    fd::test::torch_bin::put_le(head, 100'000'001, 8);
    write_bytes(model / "model.safetensors", head + "{}");
    fs::resize_file(model / "model.safetensors", 8 + 100'000'001);
    check_refused(run_model_measured(dir, model), {"model.safetensors", "100000000"});
  }
  SUBCASE("the unchanged image still runs") {  // the cases above differ from a good file by one rule each
    auto const r = run_model(dir, model_dir(dir, "model.safetensors", image.bytes()));
    CHECK_MESSAGE(r.status == 0, r.err);
  }
}

TEST_CASE("hostile files: a FIFO as --input, config.json or the weights is refused, not waited on") {
  // Opened for reading, a FIFO waits for a writer: the program blocked forever. SIGALRM fails the test instead.
  ::alarm(120);
  ScratchDir const dir;
  std::string const weights = read_bytes(fixture("v3_c2p") / "model.safetensors");
  SUBCASE("--input") {
    REQUIRE(::mkfifo((dir / "input.json").c_str(), 0600) == 0);
    check_refused(run_model_measured(dir, model_dir(dir, "model.safetensors", weights)),
                  {(dir / "input.json").string() + ": cannot read the input: it is a FIFO, not a regular file"});
  }
  SUBCASE("config.json") {
    fs::path const model = model_dir(dir, "model.safetensors", weights);
    fs::remove(model / "config.json");
    REQUIRE(::mkfifo((model / "config.json").c_str(), 0600) == 0);
    check_refused(run_model_measured(dir, model), {(model / "config.json").string(), "it is a FIFO"});
  }
  SUBCASE("model.safetensors") {
    fs::path const model = model_dir(dir, "model.safetensors", weights);
    fs::remove(model / "model.safetensors");
    REQUIRE(::mkfifo((model / "model.safetensors").c_str(), 0600) == 0);
    check_refused(run_model_measured(dir, model), {(model / "model.safetensors").string(), "it is a FIFO"});
  }
  ::alarm(0);
}

TEST_CASE("hostile JSON: a NUL byte ends nothing, the rest of the file is read and refused") {
  ScratchDir const dir;
  std::string const weights = read_bytes(fixture("v3_c2p") / "model.safetensors");
  std::string const config = read_bytes(fixture("v3_c2p") / "config.json");
  SUBCASE("config.json") {
    check_refused(run_model_measured(dir, model_dir(dir, "model.safetensors", weights, config + '\0' + "garbage")),
                  {"config.json", "NUL"});
  }
  SUBCASE("the input file") {
    dir.write("input.json", fd::testing::input_json_from_fixture(fixture("v3_c2p")) + '\0' + "{\"x\": 1}");
    check_refused(run_model_measured(dir, fixture("v3_c2p")), {"input.json", "NUL"});
  }
  SUBCASE("text after the value, without a NUL") {
    dir.write("input.json", fd::testing::input_json_from_fixture(fixture("v3_c2p")) + " {}");
    check_refused(run_model_measured(dir, fixture("v3_c2p")), {"input.json"});
  }
}

TEST_CASE("hostile pytorch_model.bin: memo references cannot amplify memory") {
  // One tensor record built once and memoized, then referenced again under 300,000 fresh names: each
  // ~16 bytes of pickle would add a record of two 64-dimension vectors (~1 KB) to an unbounded reader.
  namespace tb = fd::test::torch_bin;
  using namespace std::string_literals;  // the memo opcodes carry NUL bytes
  std::vector<std::int64_t> dims(64, 1);
  // name, callable (memo 0), args (memo 1), REDUCE; then the same two memo entries under every other name.
  std::string pickle = "\x80\x02" + tb::global("collections", "OrderedDict") + ")R(" + tb::str("t0") +
                       tb::global("torch._utils", "_rebuild_tensor_v2") + "q\x00"s + "((" + tb::str("storage") +
                       tb::global("torch", "FloatStorage") + tb::str("0") + tb::str("cpu") + tb::integer(1) + "tQ" +
                       tb::integer(0) + tb::int_tuple(dims) + tb::int_tuple(dims) + "\x89" +
                       tb::global("collections", "OrderedDict") + ")Rtq\x01R"s;
  for (int i = 1; i < 300'000; ++i) pickle += tb::str("t" + std::to_string(i)) + "h\x00h\x01R"s;
  pickle += "u.";
  std::string const file = tb::torch_zip(pickle, {{"0", std::string(4, '\0')}});
  CHECK(file.size() > 3'000'000);
  ScratchDir const dir;
  check_refused(run_model_measured(dir, model_dir(dir, "pytorch_model.bin", file)), {"pytorch_model.bin"});
}

TEST_CASE("hostile sizes: long inputs are refused before any allocation") {
  ScratchDir const dir;
  SUBCASE("one sequence of 10^6 tokens, default --max-tokens") {
    dir.write("input.json", input_with_ids(1'000'000));
    check_refused(run_model_measured(dir, fixture("v3_c2p")), {"1000000", "--max-tokens"});
  }
  SUBCASE("eager attention at L = 10^5 asks for more memory than there is") {
    dir.write("input.json", input_with_ids(100'000));
    check_refused(run_model_measured(dir, fixture("v3_c2p"), {"--attention", "eager", "--max-tokens", "200000"}),
                  {"eager", "GiB"});
  }
  SUBCASE("rows that disagree in length, the first one long") {
    std::string text = "{\"input_ids\": [[";
    for (int i = 0; i < 100'000; ++i) text += i ? ",5" : "5";
    text += "]";
    for (int i = 0; i < 50'000; ++i) text += ",[5]";
    dir.write("input.json", text + "]}");
    check_refused(run_model_measured(dir, fixture("v3_c2p")), {"input.json", "input_ids"});
  }
}

TEST_CASE("hostile tokenizer files and text") {
  ScratchDir const dir;
  fs::path const tok = dir / "bpe";
  fs::copy(fixture("tokenizers/bpe"), tok);
  SUBCASE("added_tokens.json with an id that overflows") {
    dir.write("bpe/added_tokens.json", "{\"<extra>\": 9223372036854775807}");
    check_refused(run_measured({"tokenize", "--model", tok.string(), "hello"}), {"added_tokens.json", "<extra>"});
  }
  SUBCASE("vocab.json with a negative id") {
    fd::io::Json vocab = fd::io::Json::parse(read_bytes(tok / "vocab.json"));
    vocab["hello"] = -5;
    dir.write("bpe/vocab.json", vocab.dump());
    check_refused(run_measured({"tokenize", "--model", tok.string(), "hello"}), {"vocab.json", "hello"});
  }
  SUBCASE("a word of 100,000 characters tokenizes in well under a second") {
    std::string const word(100'000, 'q');  // 100,000 tokens: above the default --max-tokens
    Measured const m = run_measured({"tokenize", "--model", tok.string(), "--max-tokens", "200000"}, &word);
    CHECK_MESSAGE(m.result.status == 0, m.result.err);
    CHECK(m.seconds < (kSanitized ? 10.0 : 1.0));
    MESSAGE("100,000-character word: " << m.seconds << " s");
  }
  SUBCASE("a text of more tokens than --max-tokens stops being tokenized there") {
    std::string text;
    for (int i = 0; i < 1'000'000; ++i) text += "q ";  // 4 MB minus a little: under 64 bytes per token
    Measured const m = run_measured({"tokenize", "--model", tok.string()}, &text);
    check_refused(m, {"text 1", "more than 65536 tokens", "--max-tokens 65536"});
  }
}

TEST_CASE("hostile text for SentencePiece: 10^6 characters the model lacks, 4 MB of words") {
  fs::path const spm = fixture("tokenizers/spm");
  if (fd::testing::run_cli({"tokenize", "--model", spm.string(), "hello"}).status != 0) {
    MESSAGE("the CLI has no SentencePiece tokenizer; skipped");
    return;
  }
  SUBCASE("one [UNK] of 10^6 characters (libsentencepiece alone: 97 s)") {
    std::string text;
    for (int i = 0; i < 1'000'000; ++i) text += "\xE4\xB8\x81";  // U+4E01, in no piece of the fixture
    Measured const m = run_measured({"tokenize", "--model", spm.string()}, &text);
    CHECK_MESSAGE(m.result.status == 0, m.result.err);
    CHECK(m.result.out.find("\"[UNK]\"") != std::string::npos);
    CHECK(m.seconds < (kSanitized ? 20.0 : 3.0));
    CHECK(m.max_rss_kb < kMaxKilobytes);  // the bound of every refusal here (a CUDA build starts at ~180 MiB)
    MESSAGE("10^6 unknown characters: " << m.seconds << " s, " << m.max_rss_kb / 1024 << " MiB");
  }
  SUBCASE("4 MB of short words: refused at --max-tokens, libsentencepiece never holds it whole") {
    std::string text;
    for (int i = 0; i < 1'300'000; ++i) text += "ab ";
    Measured const m = run_measured({"tokenize", "--model", spm.string()}, &text);
    check_refused(m, {"text 1", "more than 65536 tokens"});
    MESSAGE("4 MB of words: refused in " << m.seconds << " s, " << m.max_rss_kb / 1024 << " MiB");
  }
}

TEST_CASE("cli run: an output path holding a FIFO (or a device) is refused, not replaced by the rename") {
  ScratchDir const dir;
  dir.write("input.json", R"({"input_ids": [[1, 2, 3]]})");
  std::filesystem::path const fifo = dir / "out.safetensors";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  auto const r = fd::testing::run_cli({"run", "--model", fixture("v3_c2p").string(), "--input",
                                       (dir / "input.json").string(), "--output", fifo.string()});
  CHECK(r.status == 1);
  auto const lines = r.err_lines();
  REQUIRE_MESSAGE(lines.size() == 1, r.err);
  CHECK_MESSAGE(lines[0].starts_with("flashdeberta: error: " + fifo.string() + " is a FIFO"), lines[0]);
  CHECK(std::filesystem::is_fifo(fifo));  // still the FIFO: no rename over it
  CHECK(dir.entries() == std::vector<std::string>{"input.json", "out.safetensors"});
}

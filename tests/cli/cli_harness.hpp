// Helpers for the CLI tests: run the flashdeberta program in a scratch directory and look at what it left.
#pragma once

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../scratch_dir.hpp"
#include "flashdeberta/io/json.hpp"
#include "flashdeberta/io/safetensors.hpp"

namespace flashdeberta::testing {

inline std::filesystem::path fixture(std::string const& name) {
  return std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR) / name;
}

struct CliResult {
  int status = -1;
  std::string out;
  std::string err;

  std::vector<std::string> err_lines() const {
    std::vector<std::string> lines;
    std::istringstream in(err);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }
};

inline std::string shell_quote(std::string const& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

inline std::string read_text(std::filesystem::path const& path) {
  std::ifstream in(path);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// Runs the CLI with `args`, stdin read from a file holding `input` when given; stdout and stderr are
// captured in files of a private directory so they never land in the directory under test.
inline CliResult run_cli_with(std::vector<std::string> const& args, std::string const* input) {
  ScratchDir const capture;
  std::string command = shell_quote(FLASHDEBERTA_CLI_PATH);
  for (auto const& a : args) command += " " + shell_quote(a);
  if (input != nullptr) {
    capture.write("stdin.txt", *input);
    command += " <" + shell_quote((capture / "stdin.txt").string());
  }
  command += " >" + shell_quote((capture / "stdout").string()) + " 2>" + shell_quote((capture / "stderr").string());
  int const raw = std::system(command.c_str());
  CliResult result;
  result.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  result.out = read_text(capture / "stdout");
  result.err = read_text(capture / "stderr");
  return result;
}

inline CliResult run_cli(std::vector<std::string> const& args) { return run_cli_with(args, nullptr); }

// A failed run as the CLI reports one: exit `status`, nothing on stdout, one line "flashdeberta: error: ..."
// on stderr holding `needle`.
inline void check_one_line_error(CliResult const& r, int status, std::string const& needle) {
  CAPTURE(r.err);
  CHECK(r.status == status);
  CHECK(r.out.empty());
  auto const lines = r.err_lines();
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].starts_with("flashdeberta: error: "));
  CHECK(lines[0].find(needle) != std::string::npos);
}

// The same with stdin read from a file holding `input`.
inline CliResult run_cli_stdin(std::vector<std::string> const& args, std::string const& input) {
  return run_cli_with(args, &input);
}

// Standard output of a command that prints one JSON object per line.
inline std::vector<io::Json> json_lines(std::string const& out) {
  std::vector<io::Json> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) lines.push_back(io::Json::parse(line));
  return lines;
}

// A run expected to succeed with one JSON line per text: the run, and its lines once the exit status and
// their count are checked.
struct CliLines {
  CliResult result;
  std::vector<io::Json> lines;
};
inline CliLines run_cli_lines(std::vector<std::string> const& args, std::size_t expected_lines) {
  CliLines run{run_cli(args), {}};
  CAPTURE(run.result.err);
  REQUIRE(run.result.status == 0);
  run.lines = json_lines(run.result.out);
  REQUIRE(run.lines.size() == expected_lines);
  return run;
}

// The padded integer fields of a fixture's expected.safetensors as an input file: [B][L] lists.
inline std::string input_json_from_fixture(std::filesystem::path const& dir, bool with_token_types = true) {
  SafetensorsFile const file = SafetensorsFile::open(dir / "expected.safetensors");
  auto const& shape = file.info("input_ids").shape;
  std::int64_t const rows = shape[0];
  std::int64_t const length = shape[1];
  io::Json doc = io::Json::object();
  std::vector<char const*> names = {"input_ids", "attention_mask"};
  if (with_token_types && file.contains("token_type_ids")) names.push_back("token_type_ids");
  for (char const* name : names) {
    std::vector<std::int64_t> const values = file.read_i64(name);
    io::Json nested = io::Json::array();
    for (std::int64_t b = 0; b < rows; ++b)
      nested.push_back(std::vector<std::int64_t>(values.begin() + b * length, values.begin() + (b + 1) * length));
    doc[name] = std::move(nested);
  }
  return doc.dump();
}

// The task fixtures (tests/fixtures/pipelines and pairs: models made on the committed SentencePiece vocabulary,
// with HF's answers in expected.json). Scores are compared at kTaskScoreTolerance, everything else exactly.
inline constexpr double kTaskScoreTolerance = 1e-4;

inline io::Json task_expected(std::filesystem::path const& dir) {
  std::ifstream in(dir / "expected.json");
  return io::Json::parse(in);
}

inline std::string task_tokenizer_dir() { return fixture("tokenizers/spm").string(); }

// The arguments every task command of these tests starts with: the model, its tokenizer, two threads.
inline std::vector<std::string> task_args(std::string const& command, std::filesystem::path const& model) {
  return {command, "--model", model.string(), "--tokenizer", task_tokenizer_dir(), "--threads", "2"};
}

}  // namespace flashdeberta::testing

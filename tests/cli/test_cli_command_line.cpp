// The command line every flashdeberta command reads through one parser (apps/cli/command_line.hpp): the
// help of each command, and the rules it holds every command to (values, `--`, repeats, empty values,
// unknown options). tokenize runs on the BPE tokenizer fixture and needs no model; the other commands are
// refused before any model loads.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "cli_harness.hpp"

using flashdeberta::testing::check_one_line_error;
using flashdeberta::testing::CliResult;
using flashdeberta::testing::json_lines;
using flashdeberta::testing::run_cli;
using flashdeberta::testing::run_cli_stdin;

namespace {

std::string const kBpe = (std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR) / "tokenizers" / "bpe").string();

std::vector<std::string> const kCommands = {"run", "bench",  "tokenize", "fill-mask", "classify", "ner",
                                            "qa",  "rerank", "gliner",   "serve",     "train",    "zero-shot"};
std::vector<std::string> const kPipelines = {"fill-mask", "classify", "ner", "qa", "zero-shot", "rerank", "gliner"};

std::string help_of(std::string const& command) {
  CliResult const r = run_cli({command, "--help"});
  CHECK_MESSAGE(r.status == 0, r.err);
  CHECK(r.err.empty());
  return r.out;
}

bool has(std::string const& text, std::string const& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("every command prints its help for --help, -h and 'help <command>'") {
  for (std::string const& command : kCommands) {
    CAPTURE(command);
    std::string const help = help_of(command);
    CHECK(help.starts_with("usage: flashdeberta " + command + " "));
    CHECK(has(help, "-h, --help"));
    CHECK(run_cli({command, "-h"}).out == help);
    CHECK(run_cli({"help", command}).out == help);
  }
  for (std::string const& command : kPipelines) {
    CAPTURE(command);
    std::string const help = help_of(command);
    for (char const* shared : {"--model DIR", "--backend NAME", "--attention IMPL", "--dtype TYPE", "--threads N",
                               "--max-tokens N", "--batch-size N", "--progress", "--timing"}) {
      CHECK_MESSAGE(has(help, shared), shared);
    }
    CHECK(has(help, "--tokenizer DIR") == (command != "gliner"));  // GLiNER reads its model directory's
  }
  // What each pipeline command prints: rerank one array at the end, the others a JSON object per line.
  for (std::string const& command : kPipelines) {
    CAPTURE(command);
    bool const array = command == "rerank";
    CHECK(has(help_of(command), "Output: one JSON array on stdout") == array);
    CHECK(has(help_of(command), "Output: one JSON object per line on stdout") == !array);
  }
  std::string const serve = help_of("serve");
  CHECK(has(serve, "--max-batch-tokens N"));
  CHECK(!has(serve, "--max-tokens"));  // the server bounds its inputs with options of its own
  CHECK(has(help_of("run"), "--head NAME"));
  check_one_line_error(run_cli({"help", "summarize"}), 2, "no help for unknown command 'summarize'");
}

TEST_CASE("--help wins over mistakes before it, but after -- it is a TEXT") {
  CliResult const r = run_cli({"run", "--threads", "two", "--bogus", "--help"});
  CHECK(r.status == 0);
  CHECK(r.out.starts_with("usage: flashdeberta run"));
  CliResult const text = run_cli({"tokenize", "--model", kBpe, "--", "--help"});
  REQUIRE_MESSAGE(text.status == 0, text.err);
  CHECK(json_lines(text.out).size() == 1);
}

TEST_CASE("an option's value is the next argument, whatever it starts with, or what follows '='") {
  CliResult const spaced = run_cli({"tokenize", "--model", kBpe, "--pair", "--x", "Hello"});
  CliResult const attached = run_cli({"tokenize", "--model", kBpe, "--pair=--x", "Hello"});
  CliResult const alone = run_cli({"tokenize", "--model", kBpe, "Hello"});
  REQUIRE_MESSAGE(spaced.status == 0, spaced.err);
  CHECK(json_lines(spaced.out).size() == 1);
  CHECK(spaced.out == attached.out);
  CHECK(spaced.out != alone.out);
  // "--pair=" is an empty pair (none), not "--pair" taking the next argument: "Hello" stays the text.
  CliResult const empty = run_cli({"tokenize", "--model", kBpe, "--pair=", "Hello"});
  CHECK(empty.out == alone.out);
  // A negative number or '-' alone is a TEXT, not an option.
  CliResult const negative = run_cli({"tokenize", "--model", kBpe, "-5"});
  CHECK_MESSAGE(negative.status == 0, negative.err);
}

TEST_CASE("a TEXT argument arrives as given, brackets and commas included") {
  std::string const text = "[a, b]";
  CliResult const argument = run_cli({"tokenize", "--model", kBpe, text});
  CliResult const line = run_cli_stdin({"tokenize", "--model", kBpe}, text + "\n");
  REQUIRE_MESSAGE(argument.status == 0, argument.err);
  CHECK(argument.out == line.out);
}

TEST_CASE("an empty value is refused, given apart or attached") {
  check_one_line_error(run_cli({"tokenize", "--model=", "x"}), 2, "--model has an empty value");
  check_one_line_error(run_cli({"tokenize", "--model", "", "x"}), 2, "--model has an empty value");
  check_one_line_error(run_cli({"zero-shot", "--model", "m", "--labels=", "x"}), 2, "--labels has an empty value");
  check_one_line_error(run_cli({"serve", "--model", "m", "--host", ""}), 2, "--host has an empty value");
}

TEST_CASE("options given twice, flags given a value and options left without one are refused") {
  check_one_line_error(run_cli({"classify", "--model", "m", "--progress", "--progress", "x"}), 2,
                       "option --progress is given twice");
  check_one_line_error(run_cli({"classify", "--model", "m", "--jsonl=yes"}), 2, "option --jsonl takes no value");
  check_one_line_error(run_cli({"bench", "--model", "m", "--batch", "1", "--seq-len", "8", "--batch", "2"}), 2,
                       "option --batch is given twice");
  check_one_line_error(run_cli({"tokenize", "--model"}), 2, "option --model needs a value");
  check_one_line_error(run_cli({"rerank", "--model", "m", "--query"}), 2, "option --query needs a value");
}

TEST_CASE("unknown options name themselves and the command, stray arguments themselves") {
  CliResult const r = run_cli({"ner", "--model", "m", "--bogus=1", "x"});
  check_one_line_error(r, 2, "unknown option '--bogus' for 'ner'");
  CHECK(has(r.err, "(see 'flashdeberta ner --help')"));
  check_one_line_error(run_cli({"tokenize", "--model", kBpe, "-x"}), 2, "unknown option '-x' for 'tokenize'");
  check_one_line_error(run_cli({"serve", "--model", "m", "--max-tokens", "5"}), 2,
                       "unknown option '--max-tokens' for 'serve'");
  check_one_line_error(run_cli({"bench", "--model", "m", "--batch", "1", "--seq-len", "8", "extra"}), 2,
                       "unexpected argument 'extra'");
}

TEST_CASE("integers are whole decimal numbers in their range") {
  // "010" is ten tokens, not the octal 8 CLI11 would read.
  std::string const text = "one two three four five six seven eight nine ten eleven twelve";
  CliResult const r = run_cli({"tokenize", "--model", kBpe, "--max-length", "010", text});
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(json_lines(r.out).at(0)["input_ids"].size() == 10);
  check_one_line_error(run_cli({"tokenize", "--model", kBpe, "--max-length", "0x10", "x"}), 2,
                       "--max-length '0x10' is not an integer in [0, 2147483648]");
  check_one_line_error(run_cli({"classify", "--model", "m", "--batch-size", "4097", "x"}), 2,
                       "--batch-size '4097' is not an integer in [1, 4096]");
}

// flashdeberta tokenize, end to end: JSON lines equal to the library's encodings (which the tokenizer
// suite checks against HF), stdin input, pairs and truncation, and the one-line errors.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_harness.hpp"
#include "flashdeberta/tokenizer/tokenizer.hpp"

using flashdeberta::testing::check_one_line_error;
using flashdeberta::testing::CliResult;
using flashdeberta::testing::json_lines;
using flashdeberta::testing::run_cli;
using flashdeberta::testing::run_cli_stdin;
using flashdeberta::testing::ScratchDir;
using flashdeberta::testing::shell_quote;
using nlohmann::json;

namespace {

std::string tokenizer_dir(std::string const& name) {
  return (std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR) / "tokenizers" / name).string();
}

// What the CLI must print for `e`.
json expected_json(flashdeberta::Encoding const& e) {
  json offsets = json::array();
  for (auto const& s : e.offsets) offsets.push_back({s.begin, s.end});
  return json{{"input_ids", e.input_ids},
              {"token_type_ids", e.token_type_ids},
              {"attention_mask", e.attention_mask},
              {"offsets", offsets},
              {"tokens", e.tokens}};
}

}  // namespace

TEST_CASE("tokenize: one JSON line per text, equal to the library's encoding (v1 BPE)") {
  auto const dir = tokenizer_dir("bpe");
  auto const tok = flashdeberta::load_tokenizer(dir);
  std::vector<std::string> const texts{"Hello world", "Paris is the [MASK] of France.", "",
                                       "caf\xC3\xA9 \xF0\x9F\x8D\x95"};
  std::vector<std::string> args{"tokenize", "--model", dir};
  args.insert(args.end(), texts.begin(), texts.end());
  CliResult const r = run_cli(args);
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  auto const lines = json_lines(r.out);
  REQUIRE(lines.size() == texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i) CHECK(lines[i] == expected_json(tok.encode(texts[i])));
  // The keys come in the documented order.
  CHECK(r.out.rfind("{\"input_ids\":", 0) == 0);
}

TEST_CASE("tokenize: texts from stdin, one per line, with --pair and truncation") {
  auto const dir = tokenizer_dir("bpe");
  auto const tok = flashdeberta::load_tokenizer(dir);
  flashdeberta::EncodeOptions o;
  o.max_length = 10;
  o.truncation = flashdeberta::Truncation::kOnlyFirst;
  CliResult const r = run_cli_stdin(
      {"tokenize", "--model", dir, "--pair", "How are you?", "--max-length", "10", "--truncation", "only_first"},
      "The quick brown fox jumps over the lazy dog\r\nHello world\n");
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  auto const lines = json_lines(r.out);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == expected_json(tok.encode("The quick brown fox jumps over the lazy dog", "How are you?", o)));
  CHECK(lines[1] == expected_json(tok.encode("Hello world", "How are you?", o)));
  CHECK(lines[0]["input_ids"].size() == 10);
  CHECK(lines[0]["token_type_ids"].back() == 1);
}

TEST_CASE("tokenize: texts after -- may start with a dash, and --max-length alone truncates longest_first") {
  auto const dir = tokenizer_dir("bpe");
  CliResult const r = run_cli({"tokenize", "--model", dir, "--max-length", "3", "--", "-x y z"});
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  auto const lines = json_lines(r.out);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0]["input_ids"].size() == 3);
  CHECK(lines[0]["offsets"][0] == json::array({0, 0}));
}

TEST_CASE("tokenize: refusals and usage errors are one line") {
  auto const dir = tokenizer_dir("bpe");
  check_one_line_error(run_cli({"tokenize", "--model", dir, "--max-length", "5", "--truncation", "only_second",
                                "one two three four five six"}),
                       1, "only_second needs a pair");
  check_one_line_error(run_cli({"tokenize", "--model", dir, "--pair", "b", "--max-length", "5", "--truncation",
                                "only_second", "one two three four five six"}),
                       1, "the second sequence has 1 tokens");
  check_one_line_error(run_cli({"tokenize", "--model", dir, "ok", "bad \xFF"}), 1, "text 2: invalid UTF-8 at byte 4");
  check_one_line_error(run_cli({"tokenize", "--model", dir, "--pair", "\xC3", "ok"}), 1,
                       "text 1: --pair: invalid UTF-8");
  check_one_line_error(run_cli({"tokenize", "x"}), 2, "missing --model");
  check_one_line_error(run_cli({"tokenize", "--model", dir, "--truncation", "only_first", "x"}), 2,
                       "--truncation needs --max-length");
  check_one_line_error(run_cli({"tokenize", "--model", dir, "--truncation", "longest", "--max-length", "4", "x"}), 2,
                       "--truncation 'longest' is not longest_first, only_first or only_second");
  check_one_line_error(run_cli({"tokenize", "--model", dir, "--max-length", "-1", "x"}), 2, "--max-length '-1'");
  check_one_line_error(run_cli({"tokenize", "--model", "/nonexistent/dir", "x"}), 1, "no such directory");
  ScratchDir const empty;
  check_one_line_error(run_cli({"tokenize", "--model", empty.path().string(), "x"}), 1, "no tokenizer files");
}

TEST_CASE("tokenize: an empty --pair is no pair, as tokenizer(text, \"\") in HF") {
  auto const dir = tokenizer_dir("bpe");
  CliResult const with_empty = run_cli({"tokenize", "--model", dir, "--pair", "", "Hello world"});
  CliResult const without = run_cli({"tokenize", "--model", dir, "Hello world"});
  CHECK(with_empty.status == 0);
  CHECK(with_empty.out == without.out);
}

TEST_CASE("tokenize: help") {
  CliResult const r = run_cli({"tokenize", "--help"});
  CHECK(r.status == 0);
  CHECK(r.out.find("usage: flashdeberta tokenize --model DIR") == 0);
  CHECK(run_cli({"help", "tokenize"}).out == r.out);
}

#if defined(FLASHDEBERTA_WITH_SENTENCEPIECE)
TEST_CASE("tokenize: a directory of SentencePiece tokenizer files alone is enough (v2/v3)") {
  auto const dir = tokenizer_dir("spm");
  auto const tok = flashdeberta::load_tokenizer(dir);
  CliResult const r = run_cli({"tokenize", "--model", dir, "--pair", "It is [MASK].", "Paris is the capital."});
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  auto const lines = json_lines(r.out);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == expected_json(tok.encode("Paris is the capital.", "It is [MASK].")));
  CHECK(std::find(lines[0]["input_ids"].begin(), lines[0]["input_ids"].end(), json(1074)) !=
        lines[0]["input_ids"].end());
}
#endif

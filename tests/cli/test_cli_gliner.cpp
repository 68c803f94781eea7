// flashdeberta gliner against GLiNER 0.2.27's own outputs (tests/fixtures/gliner, made by
// make_gliner_fixtures.py): every input of every case through the program (texts as arguments, one case
// through stdin, on eigen and kokkos), entities equal with scores within 1e-4, in GLiNER's order; and the
// one-line errors (a directory that is not a GLiNER model, a bad --threshold, no label).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_harness.hpp"

using flashdeberta::testing::check_one_line_error;
using flashdeberta::testing::CliResult;
using flashdeberta::testing::run_cli;
using flashdeberta::testing::run_cli_stdin;
using nlohmann::json;
using ordered = nlohmann::ordered_json;  // the CLI's lines, read with their keys in order

namespace {

constexpr double kScoreTolerance = 1e-4;

std::filesystem::path gliner_dir() { return std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR) / "gliner"; }

std::vector<std::filesystem::path> cases() {
  std::vector<std::filesystem::path> dirs;
  for (auto const& entry : std::filesystem::directory_iterator(gliner_dir())) {
    if (entry.is_directory() && std::filesystem::exists(entry.path() / "expected.json")) dirs.push_back(entry.path());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

// Standard output, one JSON object per line, keys in their order.
std::vector<ordered> ordered_lines(std::string const& out) {
  std::vector<ordered> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) lines.push_back(ordered::parse(line));
  return lines;
}

void check_entities(ordered const& got, json const& want) {
  CAPTURE(got.dump());
  CAPTURE(want.dump());
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    // Our keys in GLiNER's order.
    std::vector<std::string> keys;
    for (auto const& [key, value] : got[i].items()) keys.push_back(key);
    CHECK(keys == std::vector<std::string>{"start", "end", "text", "label", "score"});
    CHECK(got[i]["start"].get<std::int64_t>() == want[i]["start"].get<std::int64_t>());
    CHECK(got[i]["end"].get<std::int64_t>() == want[i]["end"].get<std::int64_t>());
    CHECK(got[i]["text"].get<std::string>() == want[i]["text"].get<std::string>());
    CHECK(got[i]["label"].get<std::string>() == want[i]["label"].get<std::string>());
    CHECK(std::abs(got[i]["score"].get<double>() - want[i]["score"].get<double>()) <= kScoreTolerance);
  }
}

// The command line of one fixture input, without its texts.
std::vector<std::string> input_args(std::filesystem::path const& dir, json const& rec, std::string const& backend) {
  std::string labels;
  for (auto const& l : rec["labels"]) labels += (labels.empty() ? "" : ",") + l.get<std::string>();
  std::vector<std::string> args = {
      "gliner",    "--model", dir.string(), "--labels", labels, "--threshold", rec["threshold"].dump(),
      "--backend", backend,   "--threads",  "2"};
  if (!rec["flat_ner"].get<bool>()) args.push_back("--nested");
  if (rec["multi_label"].get<bool>()) args.push_back("--multi-label");
  return args;
}

// Every input of every case whose texts share their labels (a batch with per-text labels has no command line).
void run_fixtures(std::string const& backend) {
  std::size_t inputs = 0;
  for (auto const& dir : cases()) {
    json const expected = json::parse(std::ifstream(dir / "expected.json"));
    for (json const& rec : expected["inputs"]) {
      if (!rec["labels"].empty() && rec["labels"][0].is_array()) continue;
      INFO("case " << dir.filename().string() << " input " << rec["name"].get<std::string>());
      std::vector<std::string> args = input_args(dir, rec, backend);
      args.push_back("--");
      for (json const& t : rec["per_text"]) args.push_back(t["text"].get<std::string>());
      CliResult const r = run_cli(args);
      CAPTURE(r.err);
      REQUIRE(r.status == 0);
      std::vector<ordered> const lines = ordered_lines(r.out);
      REQUIRE(lines.size() == rec["per_text"].size());
      for (std::size_t i = 0; i < lines.size(); ++i) {
        json const& d = rec["per_text"][i];
        CHECK(lines[i]["text"].get<std::string>() == d["text"].get<std::string>());
        if (rec["api"] == "predict_entities") {
          check_entities(lines[i]["entities"], rec["entities"]);
        } else {
          check_entities(lines[i]["entities"], d["valid"].get<bool>() ? d["entities_single"] : json::array());
        }
      }
      ++inputs;
    }
  }
  CHECK(inputs >= 40);
}

}  // namespace

TEST_CASE("gliner: every fixture input equals GLiNER's entities (eigen)") { run_fixtures("eigen"); }

TEST_CASE("gliner: every fixture input equals GLiNER's entities (kokkos)") {
  CliResult const probe = run_cli(
      {"gliner", "--model", (gliner_dir() / "span_marker").string(), "--labels", "x", "--backend", "kokkos", "--", ""});
  if (probe.err.find("this build has no Kokkos backend") != std::string::npos) {
    MESSAGE("no Kokkos backend in this build: skipped");
    return;
  }
  run_fixtures("kokkos");
}

TEST_CASE("gliner: texts from stdin, one per line") {
  std::filesystem::path const dir = gliner_dir() / "span_markerV0";
  json const expected = json::parse(std::ifstream(dir / "expected.json"));
  for (json const& rec : expected["inputs"]) {
    if (rec["name"] != "batch") continue;
    std::string input;
    for (json const& t : rec["per_text"]) input += t["text"].get<std::string>() + "\n";
    CliResult const r = run_cli_stdin(input_args(dir, rec, "eigen"), input);
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    std::vector<ordered> const lines = ordered_lines(r.out);
    REQUIRE(lines.size() == rec["per_text"].size());
    for (std::size_t i = 0; i < lines.size(); ++i) {
      json const& d = rec["per_text"][i];
      check_entities(lines[i]["entities"], d["valid"].get<bool>() ? d["entities_single"] : json::array());
    }
  }
}

TEST_CASE("gliner: one-line errors") {
  std::string const model = (gliner_dir() / "span_marker").string();
  // A transformers checkpoint is not a GLiNER model.
  check_one_line_error(
      run_cli({"gliner", "--model", (std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR) / "v3_base_like").string(),
               "--labels", "person", "x"}),
      1, "no gliner_config.json");
  check_one_line_error(run_cli({"gliner", "--model", "/nonexistent/gliner", "--labels", "person", "x"}), 1,
                       "no such directory");
  check_one_line_error(run_cli({"gliner", "--model", model, "--labels", "person", "--threshold", "1.5", "x"}), 2,
                       "--threshold '1.5' is not a number in [0, 1]");
  check_one_line_error(run_cli({"gliner", "--model", model, "--labels", " , ", "x"}), 2, "holds no label");
  check_one_line_error(run_cli({"gliner", "--model", model, "x"}), 2, "missing --labels");
  check_one_line_error(run_cli({"gliner", "--model", model, "--labels", "a", "--tokenizer", model, "x"}), 2,
                       "--tokenizer");
  // A batch over --max-tokens is refused, naming it.
  check_one_line_error(run_cli({"gliner", "--model", model, "--labels", "person", "--max-tokens", "8", "--",
                                "Ada Lovelace met Charles Babbage in London."}),
                       1, "--max-tokens 8");
  // --help lists the options.
  CliResult const help = run_cli({"gliner", "--help"});
  CHECK(help.status == 0);
  CHECK(help.out.find("--nested") != std::string::npos);
  CHECK(run_cli({"--help"}).out.find("gliner") != std::string::npos);
}

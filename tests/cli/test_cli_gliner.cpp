// flashdeberta gliner against GLiNER 0.2.27's own outputs (tests/fixtures/gliner, made by
// make_gliner_fixtures.py): every input of every case through the program (texts as arguments, one case
// through stdin, on eigen and kokkos), entities equal with scores within 1e-4, in GLiNER's order; and the
// one-line errors (a directory that is not a GLiNER model, a bad --threshold, no label); --long-text windows
// and single-pass past max_len, and their refusals.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
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
  // GLiNER reads the tokenizer of its model directory: the option is not taken.
  check_one_line_error(run_cli({"gliner", "--model", model, "--labels", "a", "--tokenizer", model, "x"}), 2,
                       "unknown option '--tokenizer' for 'gliner'");
  // A batch over --max-tokens is refused, naming it.
  check_one_line_error(run_cli({"gliner", "--model", model, "--labels", "person", "--max-tokens", "8", "--on-error",
                                "stop", "--", "Ada Lovelace met Charles Babbage in London."}),
                       1, "--max-tokens 8");
  // A max_width that no memory holds (10^9: 9 x 10^9 span rows for 9 words) is refused at once, naming the sizes
  // (before: a bare "out of memory", and at 10^8 40 s and 10 GB before failing).
  {
    flashdeberta::testing::ScratchDir const dir;
    std::filesystem::path const from = gliner_dir() / "span_markerV0";
    for (auto const& entry : std::filesystem::directory_iterator(from)) {
      if (entry.path().filename() != "gliner_config.json") {
        std::filesystem::create_symlink(std::filesystem::canonical(entry.path()), dir / entry.path().filename());
      }
    }
    std::ifstream in(from / "gliner_config.json");
    json config = json::parse(in);
    config["max_width"] = 1000000000;
    dir.write("gliner_config.json", config.dump());
    auto const start = std::chrono::steady_clock::now();
    check_one_line_error(run_cli({"gliner", "--model", dir.path().string(), "--labels", "person,location",
                                  "Ada Lovelace worked with Charles Babbage in London."}),
                         1, "GLiNER: the spans of 9 words up to max_width 1000000000 (gliner_config.json) are");
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  }
  // --help lists the options.
  CliResult const help = run_cli({"gliner", "--help"});
  CHECK(help.status == 0);
  CHECK(help.out.find("--nested") != std::string::npos);
  CHECK(run_cli({"--help"}).out.find("gliner") != std::string::npos);
}

TEST_CASE("gliner: --long-text") {
  std::filesystem::path const dir = gliner_dir() / "span_markerV0";  // max_len 64
  // A fixture text that fits max_len: windows and single-pass give GLiNER's own entities.
  json const expected = json::parse(std::ifstream(dir / "expected.json"));
  json const& rec = expected["inputs"][0];
  for (std::string const mode : {"windows", "single-pass"}) {
    INFO("--long-text " << mode);
    std::vector<std::string> args = input_args(dir, rec, "eigen");
    args.insert(args.end(), {"--long-text", mode, "--", rec["per_text"][0]["text"].get<std::string>()});
    CliResult const r = run_cli(args);
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    check_entities(ordered_lines(r.out).at(0)["entities"], rec["entities"]);
  }
  // 8 copies of a 14-word text (80 code points and a space each): 112 words. truncate stops at word 64;
  // windows finds the first copy's surest entity in every copy.
  std::string const base = "The European Space Agency launched the Rosetta probe from Kourou in March 2004 .";
  std::string text = base;
  for (int r = 1; r < 8; ++r) text += " " + base;
  auto const entities = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"gliner",      "--model", dir.string(), "--labels", "organization,location,date",
                                     "--threshold", "0.5",     "--threads",  "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back("--");
    args.push_back(text);
    CliResult const r = run_cli(args);
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    ordered const list = ordered_lines(r.out).at(0)["entities"];
    for (auto const& e : list) {  // ASCII text: code points are bytes
      auto const start = e["start"].get<std::size_t>();
      CHECK(e["text"].get<std::string>() == text.substr(start, e["end"].get<std::size_t>() - start));
    }
    return list;
  };
  auto const has = [](ordered const& list, std::int64_t start, std::int64_t end, bool any_label = false) {
    return std::any_of(list.begin(), list.end(), [&](auto const& e) {
      return e["start"] == start && e["end"] == end && (any_label || e["label"] == "date");
    });
  };
  ordered const truncated = entities({});
  ordered const windows = entities({"--long-text", "windows"});
  ordered const narrow = entities({"--long-text", "windows", "--window-overlap", "20"});
  ordered const single = entities({"--long-text", "single-pass"});
  for (std::int64_t r = 0; r < 8; ++r) {
    INFO("copy " << r);
    CHECK(has(windows, 13 + 81 * r, 64 + 81 * r));
    // Other windows give this random model other contexts, in which its labels flip, but not its spans.
    CHECK(has(narrow, 13 + 81 * r, 64 + 81 * r, true));
  }
  CHECK(narrow != windows);
  CHECK(has(truncated, 13, 64));
  CHECK(!has(truncated, 13 + 81 * 7, 64 + 81 * 7));
  std::int64_t const cut = 4 * 81 + 53;  // word 64, "from" of the fifth copy, starts there
  CHECK(std::all_of(truncated.begin(), truncated.end(), [&](auto const& e) { return e["end"] <= cut; }));
  CHECK(std::any_of(single.begin(), single.end(), [&](auto const& e) { return e["start"] >= cut; }));

  std::string const model = dir.string();
  check_one_line_error(run_cli({"gliner", "--model", model, "--labels", "date", "--long-text", "window", "x"}), 2,
                       "--long-text 'window' is not truncate, windows, single-pass or single_pass");
  check_one_line_error(run_cli({"gliner", "--model", model, "--labels", "date", "--window-overlap", "4", "x"}), 2,
                       "--window-overlap needs --long-text windows");
  check_one_line_error(run_cli({"gliner", "--model", model, "--labels", "date", "--long-text", "windows",
                                "--window-overlap", "64", "x"}),
                       2, "window_overlap 64 is outside [0, 63]");
  check_one_line_error(run_cli({"gliner", "--model", model, "--labels", "date", "--long-text", "windows",
                                "--window-overlap", "-1", "x"}),
                       2, "--window-overlap");
  CliResult const help = run_cli({"gliner", "--help"});
  CHECK(help.out.find("--long-text M") != std::string::npos);
  CHECK(help.out.find("--window-overlap N") != std::string::npos);
  CHECK(help.out.find("not cuda yet") == std::string::npos);
}

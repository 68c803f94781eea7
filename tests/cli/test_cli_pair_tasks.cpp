// flashdeberta zero-shot / rerank / classify with text pairs against HF (tests/fixtures/pairs, made by
// make_pair_fixtures.py with transformers 5.17): every case of the fixtures, scores at 1e-4 (the largest
// difference is reported, and is ~1e-7), labels and order exactly; the one-line errors of the pair options;
// and --progress's lines when stderr is not a terminal.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_harness.hpp"

namespace flashdeberta::testing {

using nlohmann::json;

namespace {

double max_score_difference = 0.0;  // over every score compared, reported at the end of each case

std::filesystem::path pairs_dir(std::string const& name) { return fixture("pairs/" + name); }

json expected(std::string const& name) { return task_expected(pairs_dir(name)); }

// pair_classify has no checkpoint of its own: it runs the zero_shot model (meta.model "../zero_shot").
std::vector<std::string> base_args(std::string const& command, std::string const& model) {
  return task_args(command, pairs_dir(model));
}

void check_score(json const& got, json const& want) {
  double const difference = std::abs(got.get<double>() - want.get<double>());
  max_score_difference = std::max(max_score_difference, difference);
  CHECK(difference <= kTaskScoreTolerance);
}

// HF's {"sequence", "labels", "scores"} against a line of ours.
void check_zero_shot(json const& got, json const& want) {
  CHECK(got["sequence"] == want["sequence"]);
  CHECK(got["labels"] == want["labels"]);
  REQUIRE(got["scores"].size() == want["scores"].size());
  for (std::size_t k = 0; k < want["scores"].size(); ++k) check_score(got["scores"][k], want["scores"][k]);
}

// HF's [{"label", "score"}...] (or, with the default top_k, the best one as a dict) against our labels.
void check_labels(json const& got, json want) {
  if (want.is_object()) want = json::array({want});
  REQUIRE(got.size() == want.size());
  for (std::size_t k = 0; k < want.size(); ++k) {
    CHECK(got[k]["label"] == want[k]["label"]);
    check_score(got[k]["score"], want[k]["score"]);
  }
}

std::vector<std::string> strings(json const& list) {
  std::vector<std::string> out;
  for (auto const& s : list) out.push_back(s.get<std::string>());
  return out;
}

// A copy of the zero_shot checkpoint with other labels.
void write_relabelled_checkpoint(ScratchDir const& dir, json const& id2label) {
  std::filesystem::copy_file(pairs_dir("zero_shot") / "model.safetensors", dir / "model.safetensors");
  json config = json::parse(std::ifstream(pairs_dir("zero_shot") / "config.json"));
  config["id2label"] = id2label;
  config.erase("label2id");
  dir.write("config.json", config.dump(2));
}

}  // namespace

#if defined(FLASHDEBERTA_WITH_SENTENCEPIECE)

TEST_CASE("zero-shot matches HF's zero-shot-classification pipeline on every fixture case") {
  json const doc = expected("zero_shot");
  max_score_difference = 0.0;
  for (auto const& c : doc["inputs"]) {
    json const& input = c["input"];
    CAPTURE(input.dump());
    std::vector<std::string> args = base_args("zero-shot", "zero_shot");
    // A list of labels goes comma-separated; a string as it is (the CLI splits it as HF's _parse_labels).
    std::string labels = input["candidate_labels"].is_string() ? input["candidate_labels"].get<std::string>() : "";
    for (auto const& l : input["candidate_labels"].is_array() ? input["candidate_labels"] : json::array())
      labels += (labels.empty() ? "" : ",") + l.get<std::string>();
    args.insert(args.end(), {"--labels", labels});
    if (input.contains("hypothesis_template"))
      args.insert(args.end(), {"--hypothesis-template", input["hypothesis_template"].get<std::string>()});
    if (input.value("multi_label", false)) args.push_back("--multi-label");
    args.push_back("--");
    json const want = input["sequences"].is_string() ? json::array({c["output"]}) : c["output"];
    json const sequences = input["sequences"].is_string() ? json::array({input["sequences"]}) : input["sequences"];
    for (auto const& s : sequences) args.push_back(s.get<std::string>());
    auto const lines = run_cli_lines(args, want.size()).lines;
    for (std::size_t i = 0; i < want.size(); ++i) check_zero_shot(lines[i], want[i]);
  }
  MESSAGE("zero-shot: largest score difference from HF " << max_score_difference);
}

TEST_CASE("zero-shot: stdin lines and one text per batch give the same lines") {
  json const doc = expected("zero_shot");
  json const& c = doc["inputs"][5];  // two sequences, three labels, multi_label false
  REQUIRE(c["input"]["sequences"].size() == 2);
  std::vector<std::string> args = base_args("zero-shot", "zero_shot");
  args.insert(args.end(), {"--labels", "sports,technology,cooking", "--batch-size", "1"});
  std::string input;
  for (auto const& s : c["input"]["sequences"]) input += s.get<std::string>() + "\n";
  CliResult const r = run_cli_stdin(args, input);
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  auto const lines = json_lines(r.out);
  REQUIRE(lines.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) check_zero_shot(lines[i], c["output"][i]);
}

TEST_CASE("classify with text pairs matches HF's text-classification pipeline on every fixture case") {
  json const doc = expected("pair_classify");
  max_score_difference = 0.0;
  SUBCASE("--pair, one call per case") {
    for (auto const& c : doc["inputs"]) {
      json const& inputs = c["input"]["inputs"];
      CAPTURE(inputs.dump());
      json const items = inputs.is_array() ? inputs : json::array({inputs});
      json const want = inputs.is_array() ? c["output"] : json::array({c["output"]});
      for (std::size_t i = 0; i < items.size(); ++i) {
        std::vector<std::string> args = base_args("classify", "zero_shot");
        args.insert(args.end(), {"--pair", items[i]["text_pair"].get<std::string>()});
        if (!c["input"].contains("top_k")) args.insert(args.end(), {"--top-k", "1"});  // HF's default: the best
        args.insert(args.end(), {"--", items[i]["text"].get<std::string>()});
        auto const lines = run_cli_lines(args, 1).lines;
        CHECK(lines[0]["text"] == items[i]["text"]);
        CHECK(lines[0]["text_pair"] == items[i]["text_pair"]);
        check_labels(lines[0]["labels"], want[i]);
      }
    }
  }
  SUBCASE("--jsonl: every top_k=None pair in one run, batched, with texts alone among them") {
    std::string input;
    json want = json::array();
    for (auto const& c : doc["inputs"]) {
      if (!c["input"].contains("top_k")) continue;
      json const& inputs = c["input"]["inputs"];
      json const items = inputs.is_array() ? inputs : json::array({inputs});
      json const outputs = inputs.is_array() ? c["output"] : json::array({c["output"]});
      for (std::size_t i = 0; i < items.size(); ++i) {
        input += items[i].dump() + "\n";
        want.push_back({{"text", items[i]["text"]}, {"text_pair", items[i]["text_pair"]}, {"labels", outputs[i]}});
        // The premise alone, and with an explicit null pair: classified as a single text.
        input += json{{"text", items[i]["text"]}}.dump() + "\n";
        input += json{{"text", items[i]["text"]}, {"text_pair", nullptr}}.dump() + "\n";
        want.push_back({{"text", items[i]["text"]}});
        want.push_back({{"text", items[i]["text"]}});
      }
    }
    std::vector<std::string> args = base_args("classify", "zero_shot");
    args.insert(args.end(), {"--jsonl", "--batch-size", "4"});
    CliResult const r = run_cli_stdin(args, input);
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    auto const lines = json_lines(r.out);
    REQUIRE(lines.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      CAPTURE(i);
      CHECK(lines[i]["text"] == want[i]["text"]);
      CHECK(lines[i].contains("text_pair") == want[i].contains("text_pair"));
      if (want[i].contains("labels")) check_labels(lines[i]["labels"], want[i]["labels"]);
    }
    // A text alone is what plain classify makes of it (in another batch: the same to float rounding).
    std::vector<std::string> plain = base_args("classify", "zero_shot");
    plain.insert(plain.end(), {"--", want[1]["text"].get<std::string>()});
    auto const alone = run_cli_lines(plain, 1).lines;
    check_labels(lines[1]["labels"], alone[0]["labels"]);
    check_labels(lines[2]["labels"], alone[0]["labels"]);
  }
  MESSAGE("classify pairs: largest score difference from HF " << max_score_difference);
}

TEST_CASE("rerank matches the cross-encoder's HF scores and order on every fixture case") {
  json const doc = expected("rerank");
  max_score_difference = 0.0;
  for (auto const& c : doc["inputs"]) {
    json const& input = c["input"];
    CAPTURE(input.dump());
    std::vector<std::string> const passages = strings(input["passages"]);
    std::vector<std::string> args = base_args("rerank", "rerank");
    args.insert(args.end(), {"--query", input["query"].get<std::string>()});
    if (!input["max_length"].is_null()) {
      args.insert(args.end(), {"--max-length", std::to_string(input["max_length"].get<int>()), "--truncation",
                               input["truncation"].get<std::string>()});
    }
    {  // sigmoid scores, all passages
      std::vector<std::string> all = args;
      all.push_back("--");
      all.insert(all.end(), passages.begin(), passages.end());
      json const ranked = run_cli_lines(all, 1).lines[0];
      REQUIRE(ranked.size() == passages.size());
      for (std::size_t k = 0; k < ranked.size(); ++k) {
        std::size_t const index = c["order"][k].get<std::size_t>();
        CHECK(ranked[k]["index"] == index);
        CHECK_FALSE(ranked[k].contains("text"));
        check_score(ranked[k]["score"], c["sigmoid_scores"][index]);
      }
    }
    {  // raw scores, the top 2 with their texts, passages from stdin in batches of 2
      std::vector<std::string> some = args;
      some.insert(some.end(), {"--raw-scores", "--top-n", "2", "--return-text", "--batch-size", "2"});
      std::string lines;
      for (auto const& p : passages) lines += p + "\n";
      CliResult const r = run_cli_stdin(some, lines);
      CAPTURE(r.err);
      REQUIRE(r.status == 0);
      json const ranked = json_lines(r.out).at(0);
      REQUIRE(ranked.size() == 2);
      for (std::size_t k = 0; k < 2; ++k) {
        std::size_t const index = c["order"][k].get<std::size_t>();
        CHECK(ranked[k]["index"] == index);
        CHECK(ranked[k]["text"] == passages[index]);
        check_score(ranked[k]["score"], c["logits"][index]);
      }
    }
  }
  MESSAGE("rerank: largest score difference from HF " << max_score_difference);
}

TEST_CASE("zero-shot and rerank refuse what they cannot serve, in one line") {
  std::vector<std::string> zs = base_args("zero-shot", "zero_shot");
  SUBCASE("a checkpoint without an entailment label: status 2, naming config.json and its labels") {
    ScratchDir const dir;
    write_relabelled_checkpoint(dir, {{"0", "yes"}, {"1", "maybe"}, {"2", "no"}});
    CliResult const r = run_cli({"zero-shot", "--model", dir.path().string(), "--tokenizer", task_tokenizer_dir(),
                                 "--labels", "a,b", "some text"});
    check_one_line_error(r, 2, "needs an NLI checkpoint with an entailment label");
    CHECK(r.err.find("id2label in " + (dir / "config.json").string() + " holds yes, maybe, no") != std::string::npos);
  }
  SUBCASE("another order of the labels is read as HF reads it") {
    ScratchDir const dir;
    write_relabelled_checkpoint(dir, {{"0", "contradiction"}, {"1", "Entailment"}, {"2", "neutral"}});
    auto const lines = run_cli_lines({"zero-shot", "--model", dir.path().string(), "--tokenizer", task_tokenizer_dir(),
                                      "--labels", "a", "some text"},
                                     1)
                           .lines;
    CHECK(lines[0]["labels"] == json::array({"a"}));
  }
  SUBCASE("labels and templates") {
    check_one_line_error(run_cli({"zero-shot", "--model", pairs_dir("zero_shot").string(), "x"}), 2,
                         "missing --labels");
    std::vector<std::string> args = zs;
    args.insert(args.end(), {"--labels", " , ", "x"});
    check_one_line_error(run_cli(args), 2, "--labels ' , ' holds no label");
    args = zs;
    args.insert(args.end(), {"--labels", "", "x"});
    check_one_line_error(run_cli(args), 2, "--labels has an empty value");
    args = zs;
    args.insert(args.end(), {"--labels", "a,b", "--hypothesis-template", "No placeholder.", "x"});
    check_one_line_error(run_cli(args), 2, "has no {} where the candidate label should go");
    args = zs;
    args.insert(args.end(), {"--labels", "a,b", "--hypothesis-template", "About {topic}.", "x"});
    check_one_line_error(run_cli(args), 2, "only {} (or {0}) may stand for the label");
    args = zs;
    args.insert(args.end(), {"--labels", "a", "--multi-label=yes", "x"});
    check_one_line_error(run_cli(args), 2, "option --multi-label takes no value");
    args = zs;
    args.insert(args.end(), {"--labels", "a", "--top-n", "1", "x"});
    check_one_line_error(run_cli(args), 2, "unknown option '--top-n' for 'zero-shot'");
  }
  SUBCASE("rerank on a checkpoint of three labels, and rerank's options") {
    std::vector<std::string> args = base_args("rerank", "zero_shot");
    args.insert(args.end(), {"--query", "q", "passage"});
    CliResult const r = run_cli(args);
    check_one_line_error(r, 2, "rerank needs a cross-encoder, a sequence-classification checkpoint with one label");
    CHECK(r.err.find((pairs_dir("zero_shot") / "config.json").string() +
                     " holds entailment, neutral, contradiction (3 labels)") != std::string::npos);
    std::vector<std::string> const rr = base_args("rerank", "rerank");
    check_one_line_error(run_cli({"rerank", "--model", pairs_dir("rerank").string(), "p"}), 2, "missing --query");
    args = rr;
    args.insert(args.end(), {"--query", "q", "--top-k", "1", "p"});
    check_one_line_error(run_cli(args), 2, "unknown option '--top-k' for 'rerank'");
    args = rr;
    args.insert(args.end(), {"--query", "q", "--top-n", "0", "p"});
    check_one_line_error(run_cli(args), 2, "--top-n '0'");
    args = rr;
    args.insert(args.end(), {"--query", "q", "--truncation", "sideways", "p"});
    check_one_line_error(run_cli(args), 2,
                         "--truncation 'sideways' is not longest_first, only_second, only_first or do_not_truncate");
    args = rr;  // the fixture's tokenizer has no model_max_length to cut to
    args.insert(args.end(), {"--query", "q", "--truncation", "only_second", "p"});
    check_one_line_error(run_cli(args), 2, "tokenizer_config.json gives none (add --max-length N)");
    args = rr;  // HF refuses too: the passage is too short to give up the tokens
    args.insert(args.end(), {"--query", "a query of several words", "--max-length", "6", "--truncation", "only_second",
                             "fine", "short"});
    check_one_line_error(run_cli(args), 1, "text 1: truncation error: the second sequence has");
    args = rr;  // no passage: nothing to rank
    args.insert(args.end(), {"--query", "q"});
    CliResult const none = run_cli_stdin(args, "");
    CHECK(none.status == 0);
    CHECK(none.out == "[]\n");
  }
}

TEST_CASE("classify --pair and --jsonl: usage and input errors") {
  std::vector<std::string> const cl = base_args("classify", "zero_shot");
  std::vector<std::string> args = cl;
  args.insert(args.end(), {"--jsonl", "text"});
  check_one_line_error(run_cli(args), 2, "--jsonl reads JSON lines from stdin, so it takes no TEXT arguments");
  args = cl;
  args.insert(args.end(), {"--jsonl", "--pair", "p"});
  check_one_line_error(run_cli_stdin(args, "{\"text\": \"t\"}\n"), 2, "--pair and --jsonl do not go together");
  args = cl;
  args.insert(args.end(), {"--jsonl", "--on-error", "stop"});
  check_one_line_error(run_cli_stdin(args, "{\"text\": \"t\"}\nplain text\n"), 1,
                       "text 2: the line is not valid JSON (");
  check_one_line_error(run_cli_stdin(args, "[\"t\"]\n"), 1, "text 1: the line is a JSON array, not an object");
  check_one_line_error(run_cli_stdin(args, "{\"text\": \"t\", \"pair\": \"p\"}\n"), 1, "text 1: unknown key 'pair'");
  check_one_line_error(run_cli_stdin(args, "{\"text\": 3}\n"), 1, "text 1: \"text\" is a JSON number, not a string");
  check_one_line_error(run_cli_stdin(args, "{\"text_pair\": \"p\"}\n"), 1, "text 1: the line has no \"text\"");
  // nlohmann alone would read the first value of these lines and take the second "text" silently.
  check_one_line_error(run_cli_stdin(args, std::string("{\"text\": \"t\"}\0garbage\n", 22)), 1,
                       "text 1: the line has a NUL byte at offset 13");
  check_one_line_error(run_cli_stdin(args, "{\"text\": \"t\", \"text\": \"u\"}\n"), 1,
                       "text 1: the line has duplicate key 'text'");
  // Without --jsonl a line that looks like JSON is a text like any other.
  auto const plain = run_cli_stdin(cl, "{\"text\": \"t\"}\n");
  CHECK(plain.status == 0);
  CHECK(json_lines(plain.out).at(0)["text"] == "{\"text\": \"t\"}");
  // An empty --pair is a pair all the same ([CLS] text [SEP] [SEP]).
  args = cl;
  args.insert(args.end(), {"--pair", "", "text"});
  CHECK(run_cli_lines(args, 1).lines[0]["text_pair"] == "");
}

TEST_CASE("help of the pair commands") {
  for (std::string const command : {"zero-shot", "rerank", "classify"}) {
    CliResult const help = run_cli({"help", command});
    CHECK(help.status == 0);
    CHECK(help.out.starts_with("usage: flashdeberta " + command));
    CHECK(run_cli({command, "--help"}).out == help.out);
  }
  CliResult const main_help = run_cli({"--help"});
  CHECK(main_help.out.find("  zero-shot  ") != std::string::npos);
  CHECK(main_help.out.find("  rerank     ") != std::string::npos);
  CHECK(run_cli({"help", "classify"}).out.find("--jsonl") != std::string::npos);
}

// Issue 14 item 8: with stderr a file (as here, where the harness captures it), each update is a line of its
// own, never carriage returns running together.
TEST_CASE("--progress with stderr not a terminal prints one line per update") {
  auto const check_lines = [](CliResult const& r, std::string const& last) {
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    CHECK(r.err.find('\r') == std::string::npos);
    CHECK(r.err.find('\x1b') == std::string::npos);
    auto const lines = r.err_lines();
    REQUIRE_FALSE(lines.empty());
    for (std::string const& line : lines) {
      CHECK(line.starts_with("flashdeberta: "));
      CHECK(line.ends_with(" texts/s"));
    }
    CHECK(lines.back().starts_with(last));
    // No line repeats the one before: the final update is printed once.
    for (std::size_t i = 1; i < lines.size(); ++i) CHECK(lines[i].substr(0, 20) != lines[i - 1].substr(0, 20));
  };
  std::vector<std::string> args = base_args("classify", "zero_shot");
  args.insert(args.end(), {"--progress", "--batch-size", "2"});
  check_lines(run_cli_stdin(args, "one\ntwo\nthree\n"), "flashdeberta: 3 texts, ");
  args.insert(args.end(), {"--", "one", "two", "three"});
  check_lines(run_cli(args), "flashdeberta: 3/3 texts, ");
}

#endif  // FLASHDEBERTA_WITH_SENTENCEPIECE

}  // namespace flashdeberta::testing

// flashdeberta fill-mask / classify / ner / qa against HF's pipelines (tests/fixtures/pipelines, made by
// make_pipeline_fixtures.py with transformers 5.17): scores at 1e-4, everything else exactly; stdin
// input, batching, and the one-line errors.
#include <doctest/doctest.h>

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

std::filesystem::path fixture_dir(std::string const& name) { return fixture("pipelines/" + name); }

bool have_fixture(std::string const& name) {
  if (std::filesystem::exists(fixture_dir(name) / "expected.json")) return true;
  MESSAGE("tests/fixtures/pipelines/" << name << " is missing (make_pipeline_fixtures.py makes it); skipped");
  return false;
}

json expected(std::string const& name) { return task_expected(fixture_dir(name)); }

void check_score(json const& got, json const& want) {
  CHECK(std::abs(got.get<double>() - want.get<double>()) <= kTaskScoreTolerance);
}

std::vector<std::string> base_args(std::string const& command, std::string const& name) {
  return task_args(command, fixture_dir(name));
}

// The texts of a fixture's inputs.
std::vector<std::string> texts_of(json const& doc) {
  std::vector<std::string> texts;
  for (auto const& c : doc["inputs"]) texts.push_back(c["input"]["text"].get<std::string>());
  return texts;
}

void check_labels(json const& got, json const& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t k = 0; k < want.size(); ++k) {
    CHECK(got[k]["label"] == want[k]["label"]);
    check_score(got[k]["score"], want[k]["score"]);
  }
}

}  // namespace

#if defined(FLASHDEBERTA_WITH_SENTENCEPIECE)

TEST_CASE("fill-mask matches HF's fill-mask pipeline (top_k 3)") {
  if (!have_fixture("fill_mask")) return;
  json const doc = expected("fill_mask");
  std::vector<std::string> args = base_args("fill-mask", "fill_mask");
  args.insert(args.end(), {"--top-k", "3", "--"});
  for (auto const& t : texts_of(doc)) args.push_back(t);
  CliResult const r = run_cli(args);
  CAPTURE(r.err);
  REQUIRE(r.status == 0);
  auto const lines = json_lines(r.out);
  REQUIRE(lines.size() == doc["inputs"].size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    json const& c = doc["inputs"][i];
    CAPTURE(c["input"].dump());
    CHECK(lines[i]["text"] == c["input"]["text"]);
    // HF returns a list for one mask and a list of lists for several.
    json want = c["output"];
    if (!want.empty() && !want[0].is_array()) want = json::array({want});
    json const& got = lines[i]["masks"];
    REQUIRE(got.size() == want.size());
    for (std::size_t m = 0; m < want.size(); ++m) {
      REQUIRE(got[m].size() == want[m].size());
      for (std::size_t k = 0; k < want[m].size(); ++k) {
        CHECK(got[m][k]["token"] == want[m][k]["token"]);
        CHECK(got[m][k]["token_str"] == want[m][k]["token_str"]);
        CHECK(got[m][k]["sequence"] == want[m][k]["sequence"]);
        check_score(got[m][k]["score"], want[m][k]["score"]);
      }
    }
  }
}

TEST_CASE("classify matches HF's text-classification pipeline (top_k None), softmax and multi-label sigmoid") {
  if (!have_fixture("classify")) return;
  json const doc = expected("classify");
  std::vector<std::string> const texts = texts_of(doc);
  SUBCASE("softmax, texts as arguments, in batches of 3") {
    std::vector<std::string> args = base_args("classify", "classify");
    args.insert(args.end(), {"--batch-size", "3", "--"});
    args.insert(args.end(), texts.begin(), texts.end());
    auto const lines = run_cli_lines(args, texts.size()).lines;
    for (std::size_t i = 0; i < lines.size(); ++i) {
      CAPTURE(texts[i]);
      CHECK(lines[i]["text"] == texts[i]);
      check_labels(lines[i]["labels"], doc["inputs"][i]["output"]);
    }
  }
  SUBCASE("texts from stdin give the same lines") {
    std::string input;
    for (auto const& t : texts) input += t + "\n";
    CliResult const from_stdin = run_cli_stdin(base_args("classify", "classify"), input);
    CAPTURE(from_stdin.err);
    REQUIRE(from_stdin.status == 0);
    CHECK(from_stdin.err.empty());  // no progress bar unless asked for or on a terminal
    auto const lines = json_lines(from_stdin.out);
    REQUIRE(lines.size() == texts.size());
    for (std::size_t i = 0; i < lines.size(); ++i) check_labels(lines[i]["labels"], doc["inputs"][i]["output"]);
    // --progress draws on stderr only.
    std::vector<std::string> args = base_args("classify", "classify");
    args.push_back("--progress");
    CliResult const with_bar = run_cli_stdin(args, input);
    CHECK(with_bar.status == 0);
    CHECK(with_bar.out == from_stdin.out);
    CHECK(with_bar.err.find(std::to_string(texts.size()) + " texts") != std::string::npos);
  }
  SUBCASE("--top-k keeps the best labels (HF's top_k), --timing reports on stderr only") {
    std::vector<std::string> args = base_args("classify", "classify");
    args.insert(args.end(), {"--top-k", "2", "--timing", "--"});
    args.insert(args.end(), texts.begin(), texts.end());
    auto const [r, lines] = run_cli_lines(args, texts.size());
    for (std::size_t i = 0; i < lines.size(); ++i) {
      json want = doc["inputs"][i]["output"];
      if (want.size() > 2) want.erase(want.begin() + 2, want.end());
      check_labels(lines[i]["labels"], want);
    }
    auto const err = r.err_lines();
    REQUIRE(err.size() == 2);
    CHECK(err[0].starts_with("flashdeberta: loaded "));
    CHECK(err[1].starts_with("flashdeberta: " + std::to_string(texts.size()) + " texts in "));
    check_one_line_error(run_cli({"classify", "--model", fixture_dir("classify").string(), "--tokenizer",
                                  task_tokenizer_dir(), "--timing=1", "x"}),
                         2, "option --timing takes no value");
  }
  SUBCASE("problem_type multi_label_classification: a sigmoid per label") {
    ScratchDir const dir;
    std::filesystem::copy_file(fixture_dir("classify") / "model.safetensors", dir / "model.safetensors");
    json config = json::parse(std::ifstream(fixture_dir("classify") / "config.json"));
    config["problem_type"] = "multi_label_classification";
    dir.write("config.json", config.dump(2));
    std::vector<std::string> args = {"classify",           "--model", dir.path().string(), "--tokenizer",
                                     task_tokenizer_dir(), "--"};
    args.insert(args.end(), texts.begin(), texts.end());
    CliResult const r = run_cli(args);
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    auto const lines = json_lines(r.out);
    REQUIRE(lines.size() == texts.size());
    for (std::size_t i = 0; i < lines.size(); ++i)
      check_labels(lines[i]["labels"], doc["inputs"][i]["output_multi_label"]);
  }
}

TEST_CASE("ner matches HF's token-classification pipeline (aggregation_strategy simple)") {
  if (!have_fixture("ner")) return;
  json const doc = expected("ner");
  std::vector<std::string> const texts = texts_of(doc);
  for (std::string const batch : {"1", "8"}) {
    std::vector<std::string> args = base_args("ner", "ner");
    args.insert(args.end(), {"--batch-size", batch, "--"});
    args.insert(args.end(), texts.begin(), texts.end());
    CliResult const r = run_cli(args);
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    auto const lines = json_lines(r.out);
    REQUIRE(lines.size() == texts.size());
    for (std::size_t i = 0; i < lines.size(); ++i) {
      CAPTURE(texts[i]);
      json const& want = doc["inputs"][i]["output"];
      json const& got = lines[i]["entities"];
      CAPTURE(got.dump());
      CAPTURE(want.dump());
      REQUIRE(got.size() == want.size());
      for (std::size_t k = 0; k < want.size(); ++k) {
        CHECK(got[k]["entity_group"] == want[k]["entity_group"]);
        CHECK(got[k]["word"] == want[k]["word"]);
        CHECK(got[k]["start"] == want[k]["start"]);
        CHECK(got[k]["end"] == want[k]["end"]);
        check_score(got[k]["score"], want[k]["score"]);
      }
    }
  }
}

TEST_CASE("qa matches HF's question-answering pipeline (top_k 1, max_answer_len 15)") {
  if (!have_fixture("qa")) return;
  json const doc = expected("qa");
  for (auto const& c : doc["inputs"]) {
    std::string const question = c["input"]["question"];
    std::string const context = c["input"]["context"];
    CAPTURE(question);
    std::vector<std::string> args = base_args("qa", "qa");
    args.insert(args.end(), {"--question", question, "--context", context});
    CliResult const r = run_cli(args);
    CAPTURE(r.err);
    REQUIRE(r.status == 0);
    auto const lines = json_lines(r.out);
    REQUIRE(lines.size() == 1);
    json const& want = c["output"];
    CAPTURE(lines[0].dump());
    CAPTURE(want.dump());
    CHECK(lines[0]["question"] == question);
    CHECK(lines[0]["start"] == want["start"]);
    CHECK(lines[0]["end"] == want["end"]);
    CHECK(lines[0]["answer"] == want["answer"]);
    check_score(lines[0]["score"], want["score"]);
  }
}

TEST_CASE("fill-mask: a text without [MASK] is an error naming the text") {
  if (!have_fixture("fill_mask")) return;
  std::vector<std::string> args = base_args("fill-mask", "fill_mask");
  args.insert(args.end(), {"--on-error", "stop", "Paris is [MASK].", "no mask here"});
  check_one_line_error(run_cli(args), 1, "text 2: no mask token ([MASK]) in the text");
}

// The bad line in the middle of a batch: every other line gets its result, in its place, the bad one an error
// object, and the exit status is 1 once all ran.
TEST_CASE("pipeline commands: a refused line is answered on its line and the others go on") {
  if (!have_fixture("fill_mask") || !have_fixture("classify")) return;
  std::vector<std::string> args = base_args("fill-mask", "fill_mask");
  args.insert(args.end(), {"--batch-size", "3"});
  std::string const input = "Paris is [MASK].\nno mask here\nThe [MASK] is blue.\n\xff bad\nA [MASK] day.\n";
  CliResult const r = run_cli_stdin(args, input);
  CAPTURE(r.err);
  CHECK(r.status == 1);
  auto const lines = json_lines(r.out);
  REQUIRE(lines.size() == 5);
  CHECK(lines[0]["text"] == "Paris is [MASK].");
  CHECK(lines[1].size() == 2);
  CHECK(lines[1]["line"] == 2);
  CHECK(lines[1]["error"] == "text 2: no mask token ([MASK]) in the text; fill-mask needs one");
  CHECK(lines[2]["text"] == "The [MASK] is blue.");
  CHECK(lines[3]["line"] == 4);
  CHECK(lines[3]["error"].get<std::string>().starts_with("text 4: "));
  CHECK(lines[4]["text"] == "A [MASK] day.");
  // the lines that ran alone give what they give in a batch (the same tokens; the scores to float rounding, as a
  // batch's other sequences change the order of some sums on the portable path)
  CliResult const good = run_cli_stdin(args, "Paris is [MASK].\nThe [MASK] is blue.\nA [MASK] day.\n");
  REQUIRE(good.status == 0);
  auto const want = json_lines(good.out);
  REQUIRE(want.size() == 3);
  for (auto [got, expect] :
       {std::pair{lines[0], want[0]}, std::pair{lines[2], want[1]}, std::pair{lines[4], want[2]}}) {
    CHECK(got["text"] == expect["text"]);
    auto const& got_masks = got["masks"][0];
    auto const& want_masks = expect["masks"][0];
    REQUIRE(got_masks.size() == want_masks.size());
    for (std::size_t k = 0; k < want_masks.size(); ++k) {
      CHECK(got_masks[k]["token"] == want_masks[k]["token"]);
      CHECK(got_masks[k]["sequence"] == want_masks[k]["sequence"]);
      CHECK(std::abs(got_masks[k]["score"].get<double>() - want_masks[k]["score"].get<double>()) <= 1e-5);
    }
  }
  auto const err = r.err_lines();
  REQUIRE(err.size() == 1);
  CHECK(err[0].starts_with("flashdeberta: error: 2 of 5 texts refused"));
  // a line over the byte bound is skipped unread and answered the same way
  std::vector<std::string> cl = base_args("classify", "classify");
  cl.insert(cl.end(), {"--max-tokens", "16"});
  CliResult const longer = run_cli_stdin(cl, "fine\n" + std::string(2000, 'x') + "\nalso fine\n");
  CHECK(longer.status == 1);
  auto const got = json_lines(longer.out);
  REQUIRE(got.size() == 3);
  CHECK(got[0]["text"] == "fine");
  CHECK(got[1]["line"] == 2);
  CHECK(got[2]["text"] == "also fine");
}

TEST_CASE("pipeline commands: invalid UTF-8 from stdin names the line") {
  if (!have_fixture("classify")) return;
  std::vector<std::string> args = base_args("classify", "classify");
  args.insert(args.end(), {"--on-error", "stop"});
  check_one_line_error(run_cli_stdin(args, "fine\n\xff\xfe bad\n"), 1, "text 2:");
}

// The models of the quick start (models/, trained by tools/train-tiny/): what a newcomer sees first must stay
// sensible. Their outputs match HF's at 1e-5 (tests/heads); these answers are the ones scripts/quickstart.sh shows.
TEST_CASE("the shipped models give the quick start's answers") {
  std::filesystem::path const models =
      std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR).parent_path().parent_path() / "models";
  auto const filled = run_cli_lines({"fill-mask", "--model", (models / "tiny-en").string(), "--top-k", "3", "--threads",
                                     "2", "This is a command-line [MASK] for managing packages.",
                                     "In the beginning God created the heaven and the [MASK]."},
                                    2)
                          .lines;
  CHECK(filled[0]["masks"][0][0]["token_str"] == "tool");
  CHECK(filled[1]["masks"][0][0]["token_str"] == "earth");

  auto const classified =
      run_cli_lines({"classify", "--model", (models / "tiny-en-sections").string(), "--top-k", "1", "--threads", "2",
                     "A fast-paced space shooter with twenty levels, joystick support and a built-in level editor.",
                     "Python bindings for the libzstd compression library, for use in Python 3 programs.",
                     "A small web server with support for CGI scripts, virtual hosts and TLS."},
                    3)
          .lines;
  CHECK(classified[0]["labels"][0]["label"] == "games");
  CHECK(classified[1]["labels"][0]["label"] == "language-ecosystems");
  CHECK(classified[2]["labels"][0]["label"] == "network");
  CHECK(classified[0]["labels"].size() == 1);
}

// tiny-en's embedding has 12,008 rows for the tokenizer's 12,001 tokens (rounded up like DeBERTa-v3's 128,100):
// every row is a prediction; those without a token decode to nothing, as HF's decode drops unknown ids.
TEST_CASE("fill-mask: predictions past the tokenizer's vocabulary decode to empty text") {
  std::filesystem::path const models =
      std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR).parent_path().parent_path() / "models";
  auto const filled = run_cli_lines({"fill-mask", "--model", (models / "tiny-en").string(), "--top-k", "100000",
                                     "--threads", "2", "a [MASK] tool"},
                                    1)
                          .lines;
  auto const& predictions = filled[0]["masks"][0];
  REQUIRE(predictions.size() == 12008);
  int unknown = 0;
  for (auto const& p : predictions) {
    if (p["token"].get<std::int64_t>() < 12001) continue;
    ++unknown;
    CHECK(p["token_str"] == "");
    CHECK(p["sequence"] == "a tool");
  }
  CHECK(unknown == 7);
}

#endif  // FLASHDEBERTA_WITH_SENTENCEPIECE

TEST_CASE("pipeline commands refuse a checkpoint without their head, naming its architectures") {
  std::string const seqcls = (std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR) / "heads" / "seqcls_v3").string();
  std::string const base = (std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR) / "v3_base_like").string();
  check_one_line_error(run_cli({"ner", "--model", seqcls, "text"}), 2,
                       "ner needs a token-classification checkpoint (architectures Deberta*ForTokenClassification), "
                       "but " +
                           seqcls + "/config.json names DebertaV2ForSequenceClassification");
  check_one_line_error(run_cli({"fill-mask", "--model", seqcls, "a [MASK]"}), 2, "needs a masked-LM checkpoint");
  check_one_line_error(run_cli({"qa", "--model", seqcls, "--question", "q", "--context", "c"}), 2,
                       "needs a question-answering checkpoint");
  check_one_line_error(run_cli({"classify", "--model", base, "text"}), 2, "names DebertaV2Model");
}

TEST_CASE("pipeline commands: usage errors exit 2 with one line") {
  std::string const dir = (std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR) / "heads" / "seqcls_v3").string();
  check_one_line_error(run_cli({"classify", "text"}), 2, "missing --model");
  check_one_line_error(run_cli({"ner", "--model", dir, "--bogus", "x"}), 2, "unknown option '--bogus' for 'ner'");
  check_one_line_error(run_cli({"fill-mask", "--model", dir, "--top-k", "0", "x"}), 2, "--top-k '0'");
  check_one_line_error(run_cli({"qa", "--model", dir, "--question", "q"}), 2, "missing --context");
  check_one_line_error(run_cli({"qa", "--model", dir, "--question", "q", "--context", "c", "extra"}), 2,
                       "unexpected argument 'extra'");
  check_one_line_error(run_cli({"classify", "--model", dir, "--backend", "tpu", "x"}), 2, "--backend 'tpu' is not");
  check_one_line_error(run_cli({"classify", "--model", dir, "--model", dir, "x"}), 2, "given twice");
  check_one_line_error(run_cli({"classify", "--model", "/nonexistent/model", "x"}), 1, "no such directory");
  CliResult const help = run_cli({"help", "qa"});
  CHECK(help.status == 0);
  CHECK(help.out.starts_with("usage: flashdeberta qa"));
}

}  // namespace flashdeberta::testing

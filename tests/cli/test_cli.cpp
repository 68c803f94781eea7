// End-to-end tests of the flashdeberta program: results against the HF fixtures, the error contract
// (exit status, one stderr line, no output file) for every kind of bad input, and bench --json.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "cli_harness.hpp"

namespace fd = flashdeberta;
using fd::testing::fixture;
using fd::testing::run_cli;
using fd::testing::ScratchDir;

namespace {

constexpr double kTolerance = 1e-5;  // the golden suite's bound: float32 against HF's float64

// Max |ours - HF| at attention_mask = 1 positions; every masked position must be exactly zero.
double max_error_against_fixture(std::filesystem::path const& output, std::filesystem::path const& fixture_dir) {
  fd::SafetensorsFile const expected_file = fd::SafetensorsFile::open(fixture_dir / "expected.safetensors");
  fd::SafetensorsFile const ours_file = fd::SafetensorsFile::open(output);
  auto const& shape = expected_file.info("last_hidden_state").shape;
  REQUIRE(ours_file.info("last_hidden_state").dtype == fd::DType::kF32);
  REQUIRE(ours_file.info("last_hidden_state").shape == shape);
  std::vector<float> const expected = expected_file.read_f32("last_hidden_state");
  std::vector<float> const ours = ours_file.read_f32("last_hidden_state");
  std::vector<std::int64_t> const mask = expected_file.read_i64("attention_mask");
  std::int64_t const hidden = shape[2];
  double worst = 0.0;
  std::int64_t nonzero_padding = 0;
  for (std::size_t row = 0; row < mask.size(); ++row) {
    for (std::int64_t c = 0; c < hidden; ++c) {
      std::size_t const i = row * static_cast<std::size_t>(hidden) + static_cast<std::size_t>(c);
      if (mask[row] == 0) {
        nonzero_padding += ours[i] != 0.0f;
        continue;
      }
      double const err = std::abs(static_cast<double>(ours[i]) - expected[i]);
      if (!(err <= worst)) worst = std::isnan(err) ? INFINITY : err;
    }
  }
  CHECK(nonzero_padding == 0);
  return worst;
}

bool kokkos_in_build() {
  return run_cli({"run", "--help"}).out.find("kokkos (not in this build)") == std::string::npos;
}

bool cuda_in_build() { return run_cli({"run", "--help"}).out.find("cuda (not in this build)") == std::string::npos; }

// ||a - b|| / ||b|| over last_hidden_state of two CLI outputs.
double relative_error(std::filesystem::path const& a, std::filesystem::path const& b) {
  std::vector<float> const x = fd::SafetensorsFile::open(a).read_f32("last_hidden_state");
  std::vector<float> const y = fd::SafetensorsFile::open(b).read_f32("last_hidden_state");
  REQUIRE(x.size() == y.size());
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    diff += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
    norm += static_cast<double>(y[i]) * y[i];
  }
  return std::sqrt(diff / norm);
}

}  // namespace

TEST_CASE("cli run: last_hidden_state matches the HF fixtures at valid positions") {
  // One fixture per variant the dispatch can pick: v3 (no conv), v1 (model_type deberta), v2 (conv, token
  // types, a mask with holes).
  for (char const* name : {"v3_base_like", "v1_c2p_p2c", "v2_conv"}) {
    for (char const* attention : {"flash", "eager"}) {
      std::string const what = std::string(name) + " " + attention;
      CAPTURE(what);
      ScratchDir const dir;
      dir.write("input.json", fd::testing::input_json_from_fixture(fixture(name)));
      auto const r =
          run_cli({"run", "--model", fixture(name).string(), "--input", (dir / "input.json").string(), "--output",
                   (dir / "out.safetensors").string(), "--attention", attention, "--threads", "2"});
      REQUIRE_MESSAGE(r.status == 0, r.err);
      CHECK(r.err.empty());
      CHECK(r.out.find("tokens/s") != std::string::npos);
      CHECK(max_error_against_fixture(dir / "out.safetensors", fixture(name)) <= kTolerance);
    }
  }
}

TEST_CASE("cli run: a [B][C][L] input gives [B, C, L, H]") {
  // The three rows of v3_c2p as one multiple-choice example with three choices: the same rows, one more dim.
  fd::SafetensorsFile const expected = fd::SafetensorsFile::open(fixture("v3_c2p") / "expected.safetensors");
  auto const& shape = expected.info("last_hidden_state").shape;
  fd::io::Json const flat = fd::io::Json::parse(fd::testing::input_json_from_fixture(fixture("v3_c2p")));
  fd::io::Json nested = fd::io::Json::object();
  for (auto const& item : flat.items()) nested[item.key()] = fd::io::Json::array({item.value()});
  ScratchDir const dir;
  dir.write("input.json", nested.dump());
  auto const r = run_cli({"run", "--model", fixture("v3_c2p").string(), "--input", (dir / "input.json").string(),
                          "--output", (dir / "out.safetensors").string(), "--threads", "2"});
  REQUIRE_MESSAGE(r.status == 0, r.err);
  fd::SafetensorsFile const ours = fd::SafetensorsFile::open(dir / "out.safetensors");
  CHECK(ours.info("last_hidden_state").shape == std::vector<std::int64_t>{1, shape[0], shape[1], shape[2]});
  CHECK(r.out.find("(B x C x L)") != std::string::npos);
}

TEST_CASE("cli run: the kokkos backend matches the fixture too") {
  if (!kokkos_in_build()) return;
  ScratchDir const dir;
  dir.write("input.json", fd::testing::input_json_from_fixture(fixture("v3_c2p")));
  auto const r = run_cli({"run", "--model", fixture("v3_c2p").string(), "--input", (dir / "input.json").string(),
                          "--output", (dir / "out.safetensors").string(), "--backend", "kokkos"});
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(r.err.empty());
  CHECK(max_error_against_fixture(dir / "out.safetensors", fixture("v3_c2p")) <= kTolerance);

  auto const bf16 =
      run_cli({"run", "--model", fixture("v3_c2p").string(), "--input", (dir / "input.json").string(), "--output",
               (dir / "bf16.safetensors").string(), "--backend", "kokkos", "--dtype", "bf16"});
  CHECK(bf16.status == 2);
  REQUIRE(bf16.err_lines().size() == 1);
  CHECK(bf16.err_lines()[0].find("the kokkos backend computes in fp32 only") != std::string::npos);
  CHECK(!std::filesystem::exists(dir / "bf16.safetensors"));
}

// On a machine without a GPU (CI) the CUDA build's CLI reports that in one line and the case ends there.
TEST_CASE("cli run/bench: the cuda backend matches the fixture in fp32 and eigen in bf16 and fp16") {
  if (!cuda_in_build()) return;
  ScratchDir const dir;
  std::string const model = fixture("v3_base_like").string();
  dir.write("input.json", fd::testing::input_json_from_fixture(fixture("v3_base_like")));
  auto const run = [&](std::string const& backend, std::string const& dtype) {
    return run_cli({"run", "--model", model, "--input", (dir / "input.json").string(), "--output",
                    (dir / (backend + "_" + dtype + ".safetensors")).string(), "--backend", backend, "--dtype", dtype});
  };
  auto const fp32 = run("cuda", "fp32");
  if (fp32.status == 1 && fp32.err.find("no CUDA device") != std::string::npos) {
    MESSAGE("no CUDA device: the cuda CLI case is skipped (" << fp32.err << ")");
    return;
  }
  REQUIRE_MESSAGE(fp32.status == 0, fp32.err);
  CHECK(max_error_against_fixture(dir / "cuda_fp32.safetensors", fixture("v3_base_like")) <= kTolerance);

  // The issue's bound for bf16 (1.5e-2, HF's own bf16 error is 1.24e-2) holds for fp16 a fortiori.
  auto const eigen = run("eigen", "fp32");
  REQUIRE_MESSAGE(eigen.status == 0, eigen.err);
  for (std::string const dtype : {"bf16", "fp16"}) {
    CAPTURE(dtype);
    auto const low = run("cuda", dtype);
    REQUIRE_MESSAGE(low.status == 0, low.err);
    CHECK(relative_error(dir / ("cuda_" + dtype + ".safetensors"), dir / "eigen_fp32.safetensors") <= 1.5e-2);
  }

  auto const bench = run_cli({"bench", "--model", model, "--backend", "cuda", "--dtype", "bf16", "--batch", "2",
                              "--seq-len", "64", "--repeat", "3", "--json"});
  REQUIRE_MESSAGE(bench.status == 0, bench.err);
  fd::io::Json const doc = fd::io::Json::parse(bench.out);
  CHECK(doc["timer"] == "cuda_events");
  CHECK(doc["backend"] == "cuda");
  CHECK(doc["median_ms"].get<double>() > 0.0);
  CHECK(doc["peak_device_bytes"].get<std::int64_t>() > 0);
}

TEST_CASE("cli run: bad input fails with one line, the right status and no output file") {
  std::string const model = fixture("v3_c2p").string();     // vocab 97, no token types, no absolute positions
  std::string const v1_model = fixture("v1_c2p").string();  // max_position_embeddings 64
  struct Case {
    char const* what;
    char const* input;  // written to input.json unless null (then the file does not exist)
    std::vector<std::string> options;
    int status;
    char const* message;  // a part of the stderr line
  };
  // A long first row and many short ones: rows x that length must not be reserved before the rows are compared
  // (2 * 10^5 x 10^5 int64 would be 160 GB).
  std::string long_first_row = R"({"input_ids": [[5)";
  for (int i = 1; i < 200'000; ++i) long_first_row += ",5";
  for (int i = 0; i < 100'000; ++i) long_first_row += "],[5";
  long_first_row += "]]}";
  std::string long_first_row_rank3 = R"({"input_ids": [[[5)";
  for (int i = 1; i < 200'000; ++i) long_first_row_rank3 += ",5";
  long_first_row_rank3 += "]]";
  for (int i = 0; i < 100'000; ++i) long_first_row_rank3 += ",[]";
  long_first_row_rank3 += "]}";
  // 1.1 MB of indentation around one id: more than --max-tokens 1 admits (3 fields x 64 bytes + 1 MiB).
  std::string const padded_file = R"({"input_ids": [[1]])" + std::string(1'100'000, ' ') + "}";
  std::vector<Case> const cases = {
      {"missing input file", nullptr, {}, 1, "cannot read the input (no such file)"},
      {"malformed JSON", R"({"input_ids": [[1, 2, 3]})", {}, 1, "not valid JSON"},
      {"not an object", R"([[1, 2, 3]])", {}, 1, "an object"},
      {"no input_ids", R"({"attention_mask": [[1, 1]]})", {}, 1, "'input_ids' is missing"},
      {"unknown key", R"({"input_ids": [[1, 2]], "attention_masks": [[1, 1]]})", {}, 1, "unknown key"},
      {"ragged rows", R"({"input_ids": [[1, 2, 3], [4, 5]]})", {}, 1, "equal length"},
      {"ragged rank 3", R"({"input_ids": [[[1, 2], [3, 4]], [[1, 2], [3]]]})", {}, 1, "equal length"},
      {"flat list", R"({"input_ids": [1, 2, 3]})", {}, 1, "rank 1"},
      {"empty list", R"({"input_ids": []})", {}, 1, "empty list"},
      {"empty rows", R"({"input_ids": [[], []]})", {}, 1, "length 0"},
      {"float id", R"({"input_ids": [[1, 2.5, 3]]})", {}, 1, "input_ids[0][1] must be an integer"},
      {"string id", R"({"input_ids": [[1, "2", 3]]})", {}, 1, "must be an integer"},
      {"negative id", R"({"input_ids": [[1, -2, 3]]})", {}, 1, "non-negative"},
      {"id >= vocab", R"({"input_ids": [[1, 97, 3]]})", {}, 1, "outside the vocabulary"},
      {"masked id >= vocab",
       R"({"input_ids": [[1, 2, 500]], "attention_mask": [[1, 1, 0]]})",
       {},
       1,
       "outside the vocabulary"},
      {"mask value 2", R"({"input_ids": [[1, 2, 3]], "attention_mask": [[1, 2, 1]]})", {}, 1, "0 or 1"},
      {"mask shape", R"({"input_ids": [[1, 2, 3]], "attention_mask": [[1, 1]]})", {}, 1, "has shape [1, 2]"},
      {"token types shape", R"({"input_ids": [[1, 2]], "token_type_ids": [[0, 0], [0, 0]]})", {}, 1, "shape"},
      {"unknown option", R"({"input_ids": [[1]]})", {"--fast"}, 2, "unknown option '--fast'"},
      {"unknown backend",
       R"({"input_ids": [[1]]})",
       {"--backend", "tpu"},
       2,
       "--backend 'tpu' is not eigen, kokkos or cuda"},
      {"cuda backend", R"({"input_ids": [[1]]})", {"--backend", "cuda"}, 2, "this build has no CUDA backend"},
      {"fp16 on eigen",
       R"({"input_ids": [[1]]})",
       {"--dtype", "fp16", "--backend", "eigen"},
       2,
       "the eigen backend computes in fp32"},
      {"unknown dtype",
       R"({"input_ids": [[1]]})",
       {"--dtype", "fp8"},
       2,
       "--dtype 'fp8' is not fp32, bf16, fp16 or int8"},
      {"unknown attention",
       R"({"input_ids": [[1]]})",
       {"--attention", "sparse"},
       2,
       "--attention 'sparse' is not flash or eager"},
      {"bad threads", R"({"input_ids": [[1]]})", {"--threads", "two"}, 2, "--threads 'two'"},
      {"option twice", R"({"input_ids": [[1]]})", {"--attention", "flash", "--attention", "eager"}, 2, "given twice"},
      {"stray argument", R"({"input_ids": [[1]]})", {"extra"}, 2, "unexpected argument 'extra'"},
      {"more positions than --max-tokens",
       R"({"input_ids": [[1, 2, 3], [4, 5, 6]]})",
       {"--max-tokens", "5"},
       1,
       "input.json: input_ids [2, 3] holds 6 tokens, more than --max-tokens 5"},
      {"padding counts toward --max-tokens",
       R"({"input_ids": [[1, 2, 3], [4, 0, 0]], "attention_mask": [[1, 1, 1], [1, 0, 0]]})",
       {"--max-tokens", "5"},
       1,
       "input_ids [2, 3] holds 6 tokens, more than --max-tokens 5"},
      {"[B][C][L] positions count toward --max-tokens",
       R"({"input_ids": [[[1, 2], [3, 4]], [[1, 2], [3, 4]]]})",
       {"--max-tokens", "7"},
       1,
       "input_ids [2, 2, 2] holds 8 tokens, more than --max-tokens 7"},
      {"--max-tokens 0", R"({"input_ids": [[1]]})", {"--max-tokens", "0"}, 2, "--max-tokens '0' is not an integer"},
      {"--max-tokens past int32", R"({"input_ids": [[1]]})", {"--max-tokens", "2147483648"}, 2, "--max-tokens"},
      {"file larger than --max-tokens admits",
       padded_file.c_str(),
       {"--max-tokens", "1"},
       1,
       "bytes, more than the 1048768 an input of --max-tokens 1 tokens can take"},
      {"ragged rows after a long first row",
       long_first_row.c_str(),
       {},
       1,
       "input_ids[1] has 1 entries but input_ids[0] has 200000; rows must have equal length"},
      {"ragged rank 3 after a long first row",
       long_first_row_rank3.c_str(),
       {},
       1,
       "input_ids[1] has 0 entries but input_ids[0] has 1"},
      {"mask ragged after ids that fit",
       R"({"input_ids": [[1, 2], [3, 4]], "attention_mask": [[1, 1], [1]]})",
       {},
       1,
       "attention_mask[1] has 1 entries but attention_mask[0] has 2"},
  };
  bool const with_cuda = cuda_in_build();
  for (Case const& c : cases) {
    std::string const what = c.what;
    if (what == "cuda backend" && with_cuda) continue;  // the cuda case above covers a build that has it
    CAPTURE(what);
    ScratchDir const dir;
    if (c.input != nullptr) dir.write("input.json", c.input);
    std::vector<std::string> args = {"run",
                                     "--model",
                                     model,
                                     "--input",
                                     (dir / "input.json").string(),
                                     "--output",
                                     (dir / "out.safetensors").string()};
    args.insert(args.end(), c.options.begin(), c.options.end());
    auto const r = run_cli(args);
    CHECK(r.status == c.status);
    auto const lines = r.err_lines();
    REQUIRE_MESSAGE(lines.size() == 1, r.err);
    CHECK(lines[0].starts_with("flashdeberta: error: "));
    CHECK_MESSAGE(lines[0].find(c.message) != std::string::npos, lines[0]);
    CHECK(r.out.empty());
    std::vector<std::string> const left = dir.entries();  // input.json at most: no output, no temporary
    CHECK(left == (c.input != nullptr ? std::vector<std::string>{"input.json"} : std::vector<std::string>{}));
  }
}

// The single stderr line of a refused command, after checking the error contract (exit 1, nothing on stdout).
std::string refusal_line(fd::testing::CliResult const& r) {
  CAPTURE(r.err);
  CHECK(r.status == 1);
  CHECK(r.out.empty());
  auto const lines = r.err_lines();
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].starts_with("flashdeberta: error: "));
  return lines[0];
}

TEST_CASE("cli run/bench: one v3 sequence of 10^6 tokens is refused at once by the default --max-tokens") {
  ScratchDir const dir;
  std::string ids = R"({"input_ids": [[1)";
  for (int i = 1; i < 1'000'000; ++i) ids += ",5";
  dir.write("input.json", ids + "]]}");
  auto const start = std::chrono::steady_clock::now();
  auto const r = run_cli({"run", "--model", fixture("v3_c2p").string(), "--input", (dir / "input.json").string(),
                          "--output", (dir / "out.safetensors").string()});
  double const seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string const line = refusal_line(r);
  CHECK_MESSAGE(line.find("input.json: input_ids [1, 1000000] holds 1000000 tokens, more than --max-tokens 65536") !=
                    std::string::npos,
                line);
  CHECK(seconds < 5.0);  // the file is parsed and measured, nothing else; generous for a loaded machine
  CHECK(dir.entries() == std::vector<std::string>{"input.json"});

  auto const bench = run_cli({"bench", "--model", fixture("v3_c2p").string(), "--batch", "1", "--seq-len", "1000000"});
  CHECK(refusal_line(bench).find("the bench batch of --batch 1 x --seq-len 1000000 holds 1000000 tokens, more than "
                                 "--max-tokens 65536") != std::string::npos);
  auto const small = run_cli({"bench", "--model", fixture("v3_c2p").string(), "--batch", "2", "--seq-len", "8",
                              "--max-tokens", "15", "--repeat", "1"});
  CHECK(refusal_line(small).find("holds 16 tokens, more than --max-tokens 15") != std::string::npos);
  auto const fits = run_cli({"bench", "--model", fixture("v3_c2p").string(), "--batch", "2", "--seq-len", "8",
                             "--max-tokens", "16", "--repeat", "1", "--threads", "1"});
  CHECK_MESSAGE(fits.status == 0, fits.err);
}

// The pipeline commands need the SentencePiece tokenizer of the v3 fixtures; a build without it skips these.
bool sentencepiece_in_cli() {
  return run_cli({"tokenize", "--model", fixture("tokenizers/spm").string(), "hello"}).status == 0;
}

TEST_CASE("cli pipelines: --max-tokens refuses a long text, a long stdin line and a long batch") {
  if (!sentencepiece_in_cli()) {
    MESSAGE("the CLI has no SentencePiece tokenizer; skipped");
    return;
  }
  // --on-error stop: the refusal ends the command with its one error line (the default answers it on its line
  // and goes on: test_cli_pipelines.cpp).
  std::vector<std::string> const classify = {"classify",
                                             "--model",
                                             fixture("pipelines/classify").string(),
                                             "--tokenizer",
                                             fixture("tokenizers/spm").string(),
                                             "--threads",
                                             "1",
                                             "--on-error",
                                             "stop"};
  SUBCASE("one v3 text of 10^6 tokens from stdin") {
    std::string text;
    for (int i = 0; i < 1'000'000; ++i) text += "a ";  // 10^6 pieces "\u2581a", plus [CLS] and [SEP]
    auto const r = fd::testing::run_cli_stdin(classify, "short text\n" + text + "\n");
    CHECK_MESSAGE(refusal_line(r).find("text 2: the text holds more than 65536 tokens, more than --max-tokens 65536") !=
                      std::string::npos,
                  r.err);
  }
  SUBCASE("a stdin line longer than 64 bytes per token is not even read whole") {
    std::string text;
    for (int i = 0; i < 1'000'000; ++i) text += "hello ";
    auto const start = std::chrono::steady_clock::now();
    auto const r = fd::testing::run_cli_stdin(classify, text);
    CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 5.0);
    CHECK(refusal_line(r).find("text 1: the line holds more than 4194304 bytes (64 per token of --max-tokens "
                               "65536); it is refused before tokenizing") != std::string::npos);
  }
  SUBCASE("a text argument longer than 64 bytes per token") {
    std::vector<std::string> args = classify;
    args.insert(args.end(), {"--max-tokens", "1", "--", std::string(65, 'x')});
    CHECK(refusal_line(run_cli(args))
              .find("text 1: the text holds 65 bytes, more than the 64 (64 per token) of "
                    "--max-tokens 1") != std::string::npos);
  }
  SUBCASE("texts that fit alone but not together in one forward run in one forward each") {
    std::vector<std::string> args = classify;
    // Each text: [CLS], 8 pieces, [SEP]: a batch of two holds 20 tokens, more than --max-tokens 15.
    args.insert(args.end(), {"--max-tokens", "15", "--batch-size", "2", "--", "a a a a a a a a", "a a b a a a a a"});
    auto const split = run_cli(args);
    CHECK_MESSAGE(split.status == 0, split.err);
    args[args.size() - 4] = "1";  // --batch-size 1: the same forwards
    auto const one_by_one = run_cli(args);
    CHECK_MESSAGE(one_by_one.status == 0, one_by_one.err);
    CHECK(fd::testing::json_lines(split.out).size() == 2);
    CHECK(split.out == one_by_one.out);
  }
  SUBCASE("question and context together") {
    auto const r =
        run_cli({"qa", "--model", fixture("pipelines/qa").string(), "--tokenizer", fixture("tokenizers/spm").string(),
                 "--question", "a a a", "--context", "a a a a", "--max-tokens", "8"});
    // The question and the context's window are read whole (qa_windows.hpp), then the window is refused.
    CHECK_MESSAGE(
        refusal_line(r).find("text 1: the text holds 10 tokens, more than --max-tokens 8") != std::string::npos, r.err);
  }
}

TEST_CASE("cli run: errors found late (model, forward, output) leave no output either") {
  ScratchDir const dir;
  dir.write("input.json", R"({"input_ids": [[1, 2, 3]]})");
  std::string long_row = "[";
  for (int i = 0; i < 65; ++i) long_row += (i ? ", " : "") + std::to_string(1 + i % 50);
  dir.write("long.json", R"({"input_ids": [)" + long_row + "]]}");
  struct Case {
    char const* what;
    std::vector<std::string> args;
    int status;
    char const* message;
  };
  std::string const in = (dir / "input.json").string();
  std::string const out = (dir / "out.safetensors").string();
  std::vector<Case> const cases = {
      {"missing model dir",
       {"--model", (dir / "nope").string(), "--input", in, "--output", out},
       1,
       "no such directory"},
      {"model without weights", {"--model", dir.path().string(), "--input", in, "--output", out}, 1, "config.json"},
      {"position past the table",
       {"--model", fixture("v1_c2p").string(), "--input", (dir / "long.json").string(), "--output", out},
       1,
       "position"},
      {"output directory missing",
       {"--model", fixture("v3_c2p").string(), "--input", in, "--output", (dir / "no/out.safetensors").string()},
       1,
       "does not exist"},
      {"output is a directory",
       {"--model", fixture("v3_c2p").string(), "--input", in, "--output", dir.path().string()},
       1,
       "is a directory"},
      {"missing --output", {"--model", fixture("v3_c2p").string(), "--input", in}, 2, "missing --output"},
  };
  for (Case const& c : cases) {
    std::string const what = c.what;
    CAPTURE(what);
    std::vector<std::string> args = {"run"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    auto const r = run_cli(args);
    CHECK(r.status == c.status);
    auto const lines = r.err_lines();
    REQUIRE_MESSAGE(lines.size() == 1, r.err);
    CHECK(lines[0].starts_with("flashdeberta: error: "));
    CHECK_MESSAGE(lines[0].find(c.message) != std::string::npos, lines[0]);
    CHECK(dir.entries() == std::vector<std::string>{"input.json", "long.json"});
  }
}

TEST_CASE("cli bench: --json prints one parseable object with the documented keys") {
  auto const r = run_cli({"bench", "--model", fixture("v3_c2p").string(), "--batch", "2", "--seq-len", "16", "--repeat",
                          "3", "--threads", "2", "--json"});
  REQUIRE_MESSAGE(r.status == 0, r.err);
  CHECK(r.err.empty());
  REQUIRE(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  fd::io::Json const doc = fd::io::Json::parse(r.out);
  REQUIRE(doc.is_object());
  for (char const* key : {"median_ms", "p10_ms", "p90_ms", "tokens_per_s", "load_ms", "peak_bytes"}) {
    CAPTURE(key);
    REQUIRE(doc.contains(key));
    CHECK(doc[key].is_number());
    CHECK(doc[key].get<double>() > 0.0);
  }
  CHECK(doc["p10_ms"].get<double>() <= doc["median_ms"].get<double>());
  CHECK(doc["median_ms"].get<double>() <= doc["p90_ms"].get<double>());
  CHECK(doc["batch"] == 2);
  CHECK(doc["seq_len"] == 16);

  auto const text = run_cli({"bench", "--model", fixture("v3_c2p").string(), "--batch", "1", "--seq-len", "8",
                             "--repeat", "1", "--threads", "1"});
  REQUIRE_MESSAGE(text.status == 0, text.err);
  CHECK(text.out.find("median") != std::string::npos);
  CHECK(text.out.find("tokens/s") != std::string::npos);

  auto const bad = run_cli({"bench", "--model", fixture("v3_c2p").string(), "--batch", "0", "--seq-len", "8"});
  CHECK(bad.status == 2);
  CHECK(bad.err_lines().size() == 1);
}

TEST_CASE("cli: help, version and command errors") {
  for (std::vector<std::string> args :
       {std::vector<std::string>{"--help"}, {"run", "--help"}, {"bench", "--help"}, {"help", "run"}, {"--version"}}) {
    auto const r = run_cli(args);
    CHECK(r.status == 0);
    CHECK(r.err.empty());
    CHECK(!r.out.empty());
  }
  CHECK(run_cli({"run", "--help"}).out.find("zeros") != std::string::npos);  // masked positions are documented
  CHECK(run_cli({"--version"}).out.starts_with("flashdeberta 0."));
  for (std::vector<std::string> args : {std::vector<std::string>{}, {"summarize"}, {"--verbose"}}) {
    auto const r = run_cli(args);
    CHECK(r.status == 2);
    auto const lines = r.err_lines();
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].starts_with("flashdeberta: error: "));
  }
}

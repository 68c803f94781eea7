// End-to-end tests of `flashdeberta run --head`: every head fixture (tests/fixtures/heads) through the
// program with the head config.json names, HF's field names and layouts in the output, the masked-LM
// row selection, and the errors (an unknown head, multiple choice on v1, a left-padded input under a
// pooler, a head the checkpoint has no tensors for).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cli_harness.hpp"

namespace fd = flashdeberta;
using fd::testing::run_cli;
using fd::testing::ScratchDir;

namespace {

constexpr double kTolerance = 1e-5;

std::filesystem::path head_fixture(std::string const& name) { return fd::testing::fixture("heads") / name; }

// The integer fields of a fixture's expected.safetensors as an input file, [B][L] or [B][C][L].
std::string input_json(std::filesystem::path const& dir) {
  fd::SafetensorsFile const file = fd::SafetensorsFile::open(dir / "expected.safetensors");
  std::vector<std::int64_t> const shape = file.info("input_ids").shape;
  fd::io::Json doc = fd::io::Json::object();
  for (char const* name : {"input_ids", "attention_mask", "token_type_ids"}) {
    if (!file.contains(name)) continue;
    std::vector<std::int64_t> const values = file.read_i64(name);
    std::int64_t const length = shape.back();
    fd::io::Json rows = fd::io::Json::array();
    for (std::size_t r = 0; r * length < values.size(); ++r)
      rows.push_back(std::vector<std::int64_t>(values.begin() + r * length, values.begin() + (r + 1) * length));
    if (shape.size() == 3) {
      fd::io::Json nested = fd::io::Json::array();
      for (std::int64_t b = 0; b < shape[0]; ++b) {
        fd::io::Json choices = fd::io::Json::array();
        for (std::int64_t c = 0; c < shape[1]; ++c) choices.push_back(rows[b * shape[1] + c]);
        nested.push_back(std::move(choices));
      }
      rows = std::move(nested);
    }
    doc[name] = std::move(rows);
  }
  return doc.dump();
}

// Max |ours - HF| of one field; per-token fields at attention_mask = 1 (and exactly zero elsewhere).
double field_error(std::filesystem::path const& output, std::filesystem::path const& dir, std::string const& field) {
  fd::SafetensorsFile const expected = fd::SafetensorsFile::open(dir / "expected.safetensors");
  fd::SafetensorsFile const ours = fd::SafetensorsFile::open(output);
  REQUIRE_MESSAGE(ours.contains(field), "output lacks " << field);
  auto const& shape = expected.info(field).shape;
  REQUIRE(ours.info(field).dtype == fd::DType::kF32);
  REQUIRE(ours.info(field).shape == shape);
  std::vector<float> const theirs = expected.read_f32(field);
  std::vector<float> const mine = ours.read_f32(field);
  std::vector<std::int64_t> const input_shape = expected.info("input_ids").shape;
  bool const per_token =
      shape.size() >= input_shape.size() && std::equal(input_shape.begin(), input_shape.end(), shape.begin());
  std::vector<std::int64_t> const mask = expected.read_i64("attention_mask");
  std::size_t const positions = per_token ? mask.size() : 1;
  std::size_t const width = theirs.size() / positions;
  double worst = 0.0;
  for (std::size_t p = 0; p < positions; ++p) {
    for (std::size_t k = 0; k < width; ++k) {
      std::size_t const i = p * width + k;
      double const err = per_token && mask[p] == 0 ? std::abs(mine[i]) : std::abs(double(mine[i]) - theirs[i]);
      if (!(err <= worst)) worst = std::isnan(err) ? INFINITY : err;
    }
  }
  return worst;
}

struct HeadFixture {
  char const* name;
  char const* head;  // what --head auto must pick
  std::vector<std::string> fields;
};

}  // namespace

TEST_CASE("cli run --head: each head fixture through the head config.json names") {
  std::vector<HeadFixture> const cases = {
      {"mlm_v1_embedding_size", "mlm", {"logits"}},
      {"mlm_v3_nonlegacy", "mlm", {"logits"}},
      {"mlm_v2_decoder_present", "mlm", {"logits"}},
      {"seqcls_v3", "seqcls", {"logits"}},
      {"seqcls_v1", "seqcls", {"logits"}},
      {"tokcls_v3", "tokcls", {"logits"}},
      {"qa_v3", "qa", {"start_logits", "end_logits"}},
      {"qa_v1", "qa", {"start_logits", "end_logits"}},
      {"mc_v3", "mc", {"logits"}},
  };
  for (auto const& c : cases) {
    std::string const name = c.name;
    CAPTURE(name);
    ScratchDir const dir;
    dir.write("input.json", input_json(head_fixture(c.name)));
    auto const r = run_cli({"run", "--model", head_fixture(c.name).string(), "--input", (dir / "input.json").string(),
                            "--output", (dir / "out.safetensors").string(), "--threads", "2"});
    REQUIRE_MESSAGE(r.status == 0, r.err);
    CHECK(r.err.empty());
    CHECK(r.out.find(std::string("head ") + c.head + " from config.json") != std::string::npos);
    fd::SafetensorsFile const out = fd::SafetensorsFile::open(dir / "out.safetensors");
    CHECK(out.size() == c.fields.size());
    CHECK(out.metadata().at("head") == c.head);
    for (auto const& field : c.fields)
      CHECK(field_error(dir / "out.safetensors", head_fixture(c.name), field) <= kTolerance);
  }
}

TEST_CASE("cli run --head: explicit heads, the backbone of a head checkpoint, labels") {
  ScratchDir const dir;
  dir.write("seqcls.json", input_json(head_fixture("seqcls_v3")));
  auto const base =
      run_cli({"run", "--model", head_fixture("seqcls_v3").string(), "--input", (dir / "seqcls.json").string(),
               "--output", (dir / "base.safetensors").string(), "--head", "base", "--attention", "eager"});
  REQUIRE_MESSAGE(base.status == 0, base.err);
  CHECK(field_error(dir / "base.safetensors", head_fixture("seqcls_v3"), "last_hidden_state") <= kTolerance);
  CHECK(base.out.find("head base)") != std::string::npos);

  auto const seqcls =
      run_cli({"run", "--model", head_fixture("seqcls_v3").string(), "--input", (dir / "seqcls.json").string(),
               "--output", (dir / "seqcls.safetensors").string(), "--head", "seqcls", "--backend", "eigen"});
  REQUIRE_MESSAGE(seqcls.status == 0, seqcls.err);
  fd::SafetensorsFile const out = fd::SafetensorsFile::open(dir / "seqcls.safetensors");
  CHECK(out.info("logits").shape == std::vector<std::int64_t>{3, 3});
  fd::io::Json const labels = fd::io::Json::parse(out.metadata().at("id2label"));
  CHECK(labels["2"] == "positive");
  CHECK(seqcls.out.find("logits [3, 3] float32") != std::string::npos);

  // A token-classification head on the QA checkpoint: its tensors are missing, named with the file.
  dir.write("qa.json", input_json(head_fixture("qa_v3")));
  auto const missing = run_cli({"run", "--model", head_fixture("qa_v3").string(), "--input", (dir / "qa.json").string(),
                                "--output", (dir / "tokcls.safetensors").string(), "--head", "tokcls"});
  CHECK(missing.status == 1);
  REQUIRE(missing.err_lines().size() == 1);
  CHECK(missing.err_lines()[0].find("token-classification head needs tensor 'classifier.weight'") != std::string::npos);
  CHECK(missing.err_lines()[0].find((head_fixture("qa_v3") / "model.safetensors").string()) != std::string::npos);
  CHECK(!std::filesystem::exists(dir / "tokcls.safetensors"));
}

TEST_CASE("cli run --head mlm --mask-token-id: logits of the chosen tokens only, with their positions") {
  std::filesystem::path const fixture = head_fixture("mlm_v3_nonlegacy");
  fd::SafetensorsFile const expected = fd::SafetensorsFile::open(fixture / "expected.safetensors");
  std::vector<std::int64_t> const ids = expected.read_i64("input_ids");
  std::vector<std::int64_t> const mask = expected.read_i64("attention_mask");
  std::int64_t const length = expected.info("input_ids").shape[1];
  std::int64_t const vocab = expected.info("logits").shape[2];
  std::int64_t const id = ids[1];  // row 0, position 1
  ScratchDir const dir;
  dir.write("input.json", input_json(fixture));
  auto const r = run_cli({"run", "--model", fixture.string(), "--input", (dir / "input.json").string(), "--output",
                          (dir / "out.safetensors").string(), "--mask-token-id", std::to_string(id)});
  REQUIRE_MESSAGE(r.status == 0, r.err);
  fd::SafetensorsFile const out = fd::SafetensorsFile::open(dir / "out.safetensors");
  std::vector<std::int64_t> const positions = out.read_i64("positions");
  std::vector<float> const logits = out.read_f32("logits");
  std::vector<float> const theirs = expected.read_f32("logits");
  std::size_t want = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) want += ids[i] == id && mask[i] == 1;
  REQUIRE(positions.size() == 2 * want);
  REQUIRE(out.info("logits").shape == std::vector<std::int64_t>{static_cast<std::int64_t>(want), vocab});
  double worst = 0.0;
  for (std::size_t m = 0; m < want; ++m) {
    std::int64_t const at = positions[2 * m] * length + positions[2 * m + 1];
    CHECK(ids[at] == id);
    for (std::int64_t v = 0; v < vocab; ++v)
      worst = std::max(worst, std::abs(double(logits[m * vocab + v]) - theirs[at * vocab + v]));
  }
  CHECK(worst <= kTolerance);
}

TEST_CASE("cli run --head: usage and input errors") {
  ScratchDir const dir;
  dir.write("v1.json", input_json(head_fixture("seqcls_v1")));
  auto const out = (dir / "out.safetensors").string();

  auto const unknown = run_cli({"run", "--model", head_fixture("seqcls_v1").string(), "--input",
                                (dir / "v1.json").string(), "--output", out, "--head", "classify"});
  CHECK(unknown.status == 2);
  REQUIRE(unknown.err_lines().size() == 1);
  CHECK(unknown.err_lines()[0].find("--head 'classify' is not auto, base, mlm, seqcls, tokcls, qa or mc") !=
        std::string::npos);

  // HF has no v1 multiple-choice class: refused before the input is even read.
  auto const mc_v1 = run_cli({"run", "--model", head_fixture("seqcls_v1").string(), "--input",
                              (dir / "v1.json").string(), "--output", out, "--head", "mc"});
  CHECK(mc_v1.status == 1);
  REQUIRE(mc_v1.err_lines().size() == 1);
  CHECK(mc_v1.err_lines()[0].find("the multiple-choice head needs a DeBERTa v2/v3 checkpoint") != std::string::npos);

  auto const flat_mc = run_cli({"run", "--model", head_fixture("mc_v3").string(), "--input", (dir / "v1.json").string(),
                                "--output", out, "--head", "mc"});
  CHECK(flat_mc.status == 1);
  REQUIRE(flat_mc.err_lines().size() == 1);
  CHECK(flat_mc.err_lines()[0].find("needs input_ids as [B][C][L]") != std::string::npos);

  dir.write("left.json", R"({"input_ids": [[5, 6, 7], [8, 9, 10]], "attention_mask": [[1, 1, 1], [0, 1, 1]]})");
  auto const left = run_cli(
      {"run", "--model", head_fixture("seqcls_v3").string(), "--input", (dir / "left.json").string(), "--output", out});
  CHECK(left.status == 1);
  REQUIRE(left.err_lines().size() == 1);
  CHECK(left.err_lines()[0].find("attention_mask[1][0] is 0, but the seqcls head pools position 0") !=
        std::string::npos);

  auto const mask_id = run_cli({"run", "--model", head_fixture("seqcls_v3").string(), "--input",
                                (dir / "left.json").string(), "--output", out, "--mask-token-id", "4"});
  CHECK(mask_id.status == 2);
  REQUIRE(mask_id.err_lines().size() == 1);
  CHECK(mask_id.err_lines()[0].find("--mask-token-id selects masked-LM rows") != std::string::npos);
  CHECK(!std::filesystem::exists(out));
}

// The log-bucket function and the relative slot table (spec 3), against values HF produced
// (tests/fixtures/relative_positions.safetensors, written by make_position_fixtures.py) when present,
// and structural properties that hold for every configuration.
#include <doctest/doctest.h>

#include <filesystem>

#include "flashdeberta/io/safetensors.hpp"
#include "flashdeberta/math/relative_position.hpp"

using namespace flashdeberta;

namespace {
ModelConfig v2_config(std::int64_t buckets, std::int64_t max_relative) {
  ModelConfig c;
  c.model_type = ModelType::kDebertaV2;
  c.position_buckets = buckets;
  c.max_relative_positions = max_relative;
  c.relative_attention = true;
  return c;
}
}  // namespace

TEST_CASE("log bucket is the identity up to mid and odd everywhere") {
  for (std::int64_t x = -128; x <= 128; ++x) CHECK(log_bucket_position(x, 256, 512) == x);
  for (std::int64_t x = 0; x < 5000; ++x) CHECK(log_bucket_position(-x, 256, 512) == -log_bucket_position(x, 256, 512));
}

TEST_CASE("log bucket is monotone and unclamped") {
  std::int64_t previous = 0;
  for (std::int64_t x = 0; x < 20000; ++x) {
    std::int64_t const b = log_bucket_position(x, 256, 512);
    CHECK(b >= previous);
    previous = b;
  }
  CHECK(log_bucket_position(512, 256, 512) == 256);  // reaches k exactly at max_relative_positions
  CHECK(log_bucket_position(1000, 256, 512) > 256);
}

TEST_CASE("slot table: v3 shape saturates at 512 with edge rows 0 and 2k-1") {
  RelativeSlotTable const t = make_relative_slot_table(v2_config(256, 512));
  CHECK(t.span == 256);
  CHECK(t.saturation == 512);
  CHECK(t.slot(0) == 256);
  CHECK(t.slot(1) == 257);
  CHECK(t.slot(-1) == 255);
  CHECK(t.slot(511) == 511);
  CHECK(t.slot(100000) == 511);
  CHECK(t.slot(-511) == 1);
  CHECK(t.slot(-512) == 0);
  CHECK(t.slot(-100000) == 0);
}

TEST_CASE("slot table: v1 clamps the identity bucket at R") {
  ModelConfig c;
  c.model_type = ModelType::kDeberta;
  c.max_relative_positions = 12;
  c.relative_attention = true;
  RelativeSlotTable const t = make_relative_slot_table(c);
  CHECK(t.span == 12);
  CHECK(t.saturation == 12);
  for (std::int64_t d = -40; d <= 40; ++d) {
    std::int64_t const expected = 12 + std::clamp<std::int64_t>(d, -12, 11);
    CHECK(t.slot(d) == expected);
  }
}

TEST_CASE("slot table agrees with HF's make_log_bucket_position") {
  std::filesystem::path const path = std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR) / "relative_positions.safetensors";
  REQUIRE_MESSAGE(std::filesystem::exists(path), "missing " << path.string());
  SafetensorsFile const file = SafetensorsFile::open(path);
  std::vector<std::int64_t> const diffs = file.read_i64("relative_pos");
  for (auto const& [buckets, max_relative] :
       {std::pair<int, int>{256, 512}, {32, 64}, {16, 40}, {128, 512}, {64, 512}}) {
    std::string const name = "bucket_" + std::to_string(buckets) + "_" + std::to_string(max_relative);
    CAPTURE(name);
    std::vector<std::int64_t> const hf = file.read_i64(name);
    REQUIRE(hf.size() == diffs.size());
    RelativeSlotTable const t = make_relative_slot_table(v2_config(buckets, max_relative));
    std::int64_t const k = t.span;
    for (std::size_t i = 0; i < diffs.size(); ++i) {
      CHECK(log_bucket_position(diffs[i], buckets, max_relative) == hf[i]);
      CHECK(t.slot(diffs[i]) == std::clamp<std::int64_t>(hf[i] + k, 0, 2 * k - 1));
    }
  }
}

TEST_CASE("slot table agrees with the (L, L) matrix HF's model builds") {
  std::filesystem::path const path = std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR) / "relative_positions.safetensors";
  REQUIRE_MESSAGE(std::filesystem::exists(path), "missing " << path.string());
  SafetensorsFile const file = SafetensorsFile::open(path);
  std::vector<std::int64_t> const rel = file.read_i64("build_relative_position_600_by_diff");  // (1199): i - j + 599
  REQUIRE(rel.size() == 1199u);
  RelativeSlotTable const t = make_relative_slot_table(v2_config(256, 512));
  for (std::int64_t diff = -599; diff <= 599; ++diff) {
    CAPTURE(diff);
    CHECK(t.slot(diff) == std::clamp<std::int64_t>(rel[diff + 599] + 256, 0, 511));
  }
}

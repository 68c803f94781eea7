// Golden end-to-end tests, written once for any policy: every fixture under tests/fixtures (produced by
// HF transformers in float64, see make_fixtures.py) through eager and flash attention, compared at the
// valid (mask = 1) positions.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "flashdeberta/flashdeberta.hpp"
#include "flashdeberta/io/safetensors.hpp"

namespace flashdeberta::testing {

inline constexpr double kGoldenTolerance = 1e-5;

inline std::vector<std::filesystem::path> fixture_directories() {
  std::vector<std::filesystem::path> dirs;
  for (auto const& entry : std::filesystem::directory_iterator(FLASHDEBERTA_FIXTURE_DIR)) {
    if (entry.is_directory() && std::filesystem::exists(entry.path() / "expected.safetensors") &&
        std::filesystem::exists(entry.path() / "config.json"))
      dirs.push_back(entry.path());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

struct GoldenCase {
  Batch batch;
  std::int64_t batch_size = 0;
  std::int64_t length = 0;
  std::int64_t hidden = 0;
  std::vector<float> expected;  // (B, L, H)
};

inline GoldenCase read_golden_case(std::filesystem::path const& dir) {
  SafetensorsFile const file = SafetensorsFile::open(dir / "expected.safetensors");
  GoldenCase golden;
  auto const& shape = file.info("last_hidden_state").shape;
  REQUIRE(shape.size() == 3);
  golden.batch_size = shape[0];
  golden.length = shape[1];
  golden.hidden = shape[2];
  std::vector<std::int64_t> const ids = file.read_i64("input_ids");
  std::vector<std::int64_t> const mask = file.read_i64("attention_mask");
  std::vector<std::int64_t> token_types;
  if (file.contains("token_type_ids")) token_types = file.read_i64("token_type_ids");
  golden.batch = Batch::from_padded(golden.batch_size, golden.length, ids, mask, token_types);
  golden.expected = file.read_f32("last_hidden_state");
  return golden;
}

// Largest |ours - HF| over the valid positions.
inline double max_abs_error(GoldenCase const& golden, std::vector<float> const& packed) {
  double worst = 0.0;
  Batch const& batch = golden.batch;
  for (std::int64_t b = 0; b < batch.batch_size(); ++b) {
    for (std::int64_t t = batch.cu_seqlens[b]; t < batch.cu_seqlens[b + 1]; ++t) {
      std::int64_t const row = b * golden.length + batch.positions[t];
      for (std::int64_t c = 0; c < golden.hidden; ++c) {
        double const ours = packed[t * golden.hidden + c];
        double const theirs = golden.expected[row * golden.hidden + c];
        double const err = std::abs(ours - theirs);
        if (!(err <= worst)) worst = std::isnan(err) ? INFINITY : err;
      }
    }
  }
  return worst;
}

// ||ours - HF|| / ||HF|| (Frobenius) over the valid positions: the measure of the low-precision tests.
inline double relative_frobenius_error(GoldenCase const& golden, std::vector<float> const& packed) {
  double diff = 0.0, norm = 0.0;
  Batch const& batch = golden.batch;
  for (std::int64_t b = 0; b < batch.batch_size(); ++b) {
    for (std::int64_t t = batch.cu_seqlens[b]; t < batch.cu_seqlens[b + 1]; ++t) {
      std::int64_t const row = b * golden.length + batch.positions[t];
      for (std::int64_t c = 0; c < golden.hidden; ++c) {
        double const theirs = golden.expected[row * golden.hidden + c];
        double const err = packed[t * golden.hidden + c] - theirs;
        diff += err * err;
        norm += theirs * theirs;
      }
    }
  }
  return std::isnan(diff) ? INFINITY : std::sqrt(diff / norm);
}

template <Variant V, ExecutionPolicy P>
void check_fixture_with(P const& policy, std::filesystem::path const& dir, GoldenCase const& golden) {
  auto model = DebertaModel<V, P>::load(policy, dir);
  for (AttentionImpl impl : {AttentionImpl::kEager, AttentionImpl::kFlash}) {
    model.set_attention(impl);
    std::vector<float> const out = model.forward_to_host(golden.batch);
    double const err = max_abs_error(golden, out);
    INFO("fixture " << dir.filename().string() << ", " << V::kName << ", "
                    << (impl == AttentionImpl::kEager ? "eager" : "flash") << ": max abs error " << err);
    CHECK(err <= kGoldenTolerance);
    MESSAGE("fixture " << dir.filename().string() << " " << V::kName << " "
                       << (impl == AttentionImpl::kEager ? "eager" : "flash") << " max abs error " << err);
  }
}

template <ExecutionPolicy P>
void run_golden_suite(P const& policy) {
  auto const dirs = fixture_directories();
  REQUIRE_MESSAGE(!dirs.empty(), "no fixtures found under " FLASHDEBERTA_FIXTURE_DIR);
  for (auto const& dir : dirs) {
    SUBCASE(dir.filename().string().c_str()) {
      ModelConfig const config = load_model_config(dir);
      GoldenCase const golden = read_golden_case(dir);
      if (config.talking_head) {
        // Head-mixing projections couple all heads' scores before and after the softmax; no published
        // checkpoint uses them, and we reject them rather than run a path without a flash form.
        using Model = DebertaModel<V1, P>;
        CHECK_THROWS_WITH_AS(Model::load(policy, dir), doctest::Contains("talking_head"), Error);
      } else {
        dispatch_variant(config, [&]<Variant V>() { check_fixture_with<V>(policy, dir, golden); });
        // The v2 code also runs v3 checkpoints: it differs only by the conv layer they do not have.
        if (config.model_type == ModelType::kDebertaV2 && config.conv_kernel_size == 0)
          check_fixture_with<V2>(policy, dir, golden);
      }
    }
  }
}

}  // namespace flashdeberta::testing

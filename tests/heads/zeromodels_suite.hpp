// ZeroModels checkpoints (tests/fixtures/zeromodels, make_zeromodels_fixtures.py: ZeroModels' own code, Keras 3
// float32) through any policy: every fixture's backbone (last_hidden_state, within 1e-5) and head (logits
// within 1e-5, masked-LM logits within 1e-4) at the valid positions, through the same DebertaModel /
// DebertaWith loaders as HF directories; and the head found in the file.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "heads_suite.hpp"

namespace flashdeberta::testing {

inline std::filesystem::path zeromodels_fixture_dir() {
  return std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR) / "zeromodels";
}

inline std::vector<std::filesystem::path> zeromodels_fixture_directories() {
  std::vector<std::filesystem::path> dirs;
  for (auto const& entry : std::filesystem::directory_iterator(zeromodels_fixture_dir())) {
    if (entry.is_directory() && std::filesystem::exists(entry.path() / "expected.safetensors"))
      dirs.push_back(entry.path());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

// Largest |ours - theirs| of the backbone's last_hidden_state over the valid tokens ([rows, L, H] padded).
template <Variant V, ExecutionPolicy P>
double zeromodels_backbone_error(P const& policy, HeadCase const& c) {
  auto const model = DebertaModel<V, P>::load(policy, c.dir);
  std::vector<float> const ours = model.forward_to_host(c.batch);  // [tokens, H]
  std::vector<float> const theirs = c.expected.read_f32("last_hidden_state");
  std::int64_t const hidden = model.config().hidden_size;
  std::int64_t const length = c.input_shape.back();
  REQUIRE(static_cast<std::int64_t>(theirs.size()) == static_cast<std::int64_t>(c.mask.size()) * hidden);
  double worst = 0.0;
  for (std::int64_t b = 0; b < c.batch.batch_size(); ++b) {
    for (std::int64_t t = c.batch.cu_seqlens[b]; t < c.batch.cu_seqlens[b + 1]; ++t) {
      std::int64_t const padded = b * length + c.batch.positions[t];
      for (std::int64_t k = 0; k < hidden; ++k) {
        double const err = std::abs(double(ours[t * hidden + k]) - theirs[padded * hidden + k]);
        if (!(err <= worst)) worst = std::isnan(err) ? INFINITY : err;
      }
    }
  }
  return worst;
}

template <ExecutionPolicy P>
void check_zeromodels_fixture(P const& policy, std::filesystem::path const& dir) {
  ModelConfig const config = load_model_config(dir);
  HeadCase const c = read_head_case(dir);
  HeadKind const kind = head_kind_from_config(config);
  dispatch_variant(config, [&]<Variant V>() {
    double const err = zeromodels_backbone_error<V>(policy, c);
    INFO("ZeroModels fixture " << dir.filename().string() << ", " << V::kName << " backbone: max abs error " << err);
    CHECK(err <= 1e-5);
    MESSAGE("zeromodels " << dir.filename().string() << " backbone max abs error " << err);
    if (kind == HeadKind::kBase) return;
    dispatch_head(kind, [&]<template <class> class Head>() {
      auto const model = DebertaWith<V, P, Head>::load(policy, dir);
      HeadOutput const out = model.forward_to_host(c.batch);
      for (std::string const& field : output_fields(kind)) {
        double const head_err = field_error(c, to_padded(out[field], c.batch, c.input_shape), field);
        double const tolerance = kind == HeadKind::kMaskedLM ? 1e-4 : 1e-5;
        INFO("ZeroModels fixture " << dir.filename().string() << ", " << field << ": max abs error " << head_err);
        CHECK(head_err <= tolerance);
        MESSAGE("zeromodels " << dir.filename().string() << " " << field << " max abs error " << head_err);
      }
    });
  });
}

template <ExecutionPolicy P>
void run_zeromodels_suite(P const& policy) {
  auto const dirs = zeromodels_fixture_directories();
  REQUIRE_MESSAGE(dirs.size() >= 10, "ZeroModels fixtures missing under " << zeromodels_fixture_dir().string());
  for (auto const& dir : dirs) {
    SUBCASE(dir.filename().string().c_str()) { check_zeromodels_fixture(policy, dir); }
  }
  SUBCASE("the head is what the weights hold") {
    auto const kind = [&](char const* name) {
      return head_kind_from_config(load_model_config(zeromodels_fixture_dir() / name));
    };
    // v1/v2 repositories hold the masked-LM superset while their config names the backbone class.
    CHECK(kind("v1_base") == HeadKind::kMaskedLM);
    CHECK(kind("v2_base") == HeadKind::kMaskedLM);
    CHECK(kind("v3_base") == HeadKind::kBase);
    CHECK(kind("v3_seq_cls") == HeadKind::kSequenceClassification);
    CHECK(kind("v3_token_cls") == HeadKind::kTokenClassification);
    CHECK(kind("v3_qa") == HeadKind::kQuestionAnswering);
    CHECK(kind("v2_multiple_choice") == HeadKind::kMultipleChoice);
    CHECK(load_model_config(zeromodels_fixture_dir() / "v3_seq_cls").num_labels == 3);
  }
}

}  // namespace flashdeberta::testing

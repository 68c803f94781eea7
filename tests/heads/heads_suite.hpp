// Golden tests of the heads, written once for any policy: every case under tests/fixtures/heads
// (make_head_fixtures.py: HF in float64), tests/fixtures/v3_prefixed (a legacy v3 masked LM) and the
// models we ship (models/, against tests/fixtures/tiny_models),
// through eager and flash attention, against HF's outputs at the valid positions; then the errors a
// user meets (a missing head tensor, a misshapen classifier, multiple choice on v1, left padding under
// a pooler).
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../scratch_dir.hpp"
#include "flashdeberta/flashdeberta.hpp"
#include "flashdeberta/heads/heads.hpp"
#include "flashdeberta/io/safetensors.hpp"

namespace flashdeberta::testing {

inline constexpr double kHeadTolerance = 1e-5;

inline std::filesystem::path heads_fixture_dir() { return std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR) / "heads"; }

// Every head case: tests/fixtures/heads/<case>/ and the masked-LM logits of tests/fixtures/v3_prefixed.
inline std::vector<std::filesystem::path> head_fixture_directories() {
  std::vector<std::filesystem::path> dirs;
  if (std::filesystem::is_directory(heads_fixture_dir())) {
    for (auto const& entry : std::filesystem::directory_iterator(heads_fixture_dir())) {
      if (entry.is_directory() && std::filesystem::exists(entry.path() / "expected.safetensors") &&
          std::filesystem::exists(entry.path() / "config.json"))
        dirs.push_back(entry.path());
    }
  }
  std::sort(dirs.begin(), dirs.end());
  dirs.push_back(std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR) / "v3_prefixed");
  return dirs;
}

struct HeadCase {
  std::filesystem::path dir;
  std::vector<std::int64_t> input_shape;  // [B, L] or [B, C, L]
  std::vector<std::int64_t> mask;         // (rows, L)
  Batch batch;
  SafetensorsFile expected;
};

inline HeadCase read_head_case(std::filesystem::path const& dir) {
  HeadCase c{dir, {}, {}, {}, SafetensorsFile::open(dir / "expected.safetensors")};
  c.input_shape = c.expected.info("input_ids").shape;
  REQUIRE((c.input_shape.size() == 2 || c.input_shape.size() == 3));
  std::int64_t const length = c.input_shape.back();
  std::int64_t rows = 1;
  for (std::size_t i = 0; i + 1 < c.input_shape.size(); ++i) rows *= c.input_shape[i];
  std::vector<std::int64_t> const ids = c.expected.read_i64("input_ids");
  c.mask = c.expected.read_i64("attention_mask");
  std::vector<std::int64_t> types;
  if (c.expected.contains("token_type_ids")) types = c.expected.read_i64("token_type_ids");
  c.batch = Batch::from_padded(rows, length, ids, c.mask, types);
  return c;
}

// The HF output fields a head kind has.
inline std::vector<std::string> output_fields(HeadKind kind) {
  if (kind == HeadKind::kQuestionAnswering) return {"start_logits", "end_logits"};
  return {"logits"};
}

// Largest |ours - HF| of one field; per-token fields are compared where the mask is 1 (and, for a
// masked LM asked for some tokens only, at those tokens, with zeros checked elsewhere).
inline double field_error(HeadCase const& c, PaddedTensor const& ours, std::string const& field,
                          std::vector<char> const* asked = nullptr) {
  REQUIRE(c.expected.contains(field));
  std::vector<std::int64_t> const& shape = c.expected.info(field).shape;
  REQUIRE_MESSAGE(ours.shape == shape, "field " << field << ": shape " << detail::format_shape(ours.shape)
                                                << ", HF has " << detail::format_shape(shape));
  std::vector<float> const theirs = c.expected.read_f32(field);
  bool const per_token =
      shape.size() >= c.input_shape.size() && std::equal(c.input_shape.begin(), c.input_shape.end(), shape.begin());
  std::int64_t const positions = per_token ? static_cast<std::int64_t>(c.mask.size()) : 1;
  std::int64_t const width = static_cast<std::int64_t>(theirs.size()) / positions;
  double worst = 0.0;
  for (std::int64_t i = 0; i < positions; ++i) {
    if (per_token && c.mask[i] == 0) continue;
    bool const compare = asked == nullptr || (*asked)[i];
    for (std::int64_t k = 0; k < width; ++k) {
      double const o = ours.values[i * width + k];
      double const err = compare ? std::abs(o - theirs[i * width + k]) : std::abs(o);
      if (!(err <= worst)) worst = std::isnan(err) ? INFINITY : err;
    }
  }
  return worst;
}

// Loads the head model from `model_dir` (the fixture itself when empty; `from` names another source in
// the messages) and compares it with the fixture's expected outputs.
template <Variant V, ExecutionPolicy P, template <class> class Head>
void check_head_case_with(P const& policy, HeadCase const& c, std::filesystem::path const& model_dir = {},
                          std::string const& from = {}) {
  using Model = DebertaWith<V, P, Head>;
  Model model = Model::load(policy, model_dir.empty() ? c.dir : model_dir);
  std::string const name = c.dir.filename().string() + from;
  for (AttentionImpl impl : {AttentionImpl::kEager, AttentionImpl::kFlash}) {
    model.set_attention(impl);
    std::string const impl_name = impl == AttentionImpl::kEager ? "eager" : "flash";
    HeadOutput const out = model.forward_to_host(c.batch);
    for (std::string const& field : output_fields(Head<P>::kKind)) {
      double const err = field_error(c, to_padded(out[field], c.batch, c.input_shape), field);
      INFO("fixture " << name << ", " << V::kName << ", " << impl_name << ", " << field << ": max abs error " << err);
      CHECK(err <= kHeadTolerance);
      MESSAGE("heads fixture " << name << " " << V::kName << " " << impl_name << " " << field << " max abs error "
                               << err);
    }
  }
  if constexpr (Head<P>::kKind == HeadKind::kMaskedLM) {
    // Logits of every third token only: the same values there, zeros elsewhere.
    HeadRequest request;
    request.tokens.emplace();
    for (std::int64_t t = 0; t < c.batch.total_tokens(); t += 3) request.tokens->push_back(t);
    std::vector<char> asked(c.mask.size(), 0);
    for (std::int64_t b = 0; b < c.batch.batch_size(); ++b)
      for (std::int64_t t = c.batch.cu_seqlens[b]; t < c.batch.cu_seqlens[b + 1]; ++t)
        if (t % 3 == 0) asked[b * c.input_shape.back() + c.batch.positions[t]] = 1;
    HeadOutput const out = model.forward_to_host(c.batch, request);
    CHECK(out["logits"].row_count == static_cast<std::int64_t>(request.tokens->size()));
    double const err = field_error(c, to_padded(out["logits"], c.batch, c.input_shape), "logits", &asked);
    INFO("fixture " << name << ", masked LM on every third token: max abs error " << err);
    CHECK(err <= kHeadTolerance);
  }
}

// One fixture through its variant and head kind (and, for a v3 checkpoint, the v2 code too), the model
// loaded from `model_dir` (the fixture itself when empty).
template <ExecutionPolicy P>
void check_head_fixture(P const& policy, std::filesystem::path const& dir, std::filesystem::path const& model_dir = {},
                        std::string const& from = {}) {
  ModelConfig const config = load_model_config(model_dir.empty() ? dir : model_dir);
  HeadKind const kind = head_kind_from_config(config);
  REQUIRE(kind != HeadKind::kBase);
  HeadCase const c = read_head_case(dir);
  dispatch_variant(config, [&]<Variant V>() {
    dispatch_head(kind,
                  [&]<template <class> class Head>() { check_head_case_with<V, P, Head>(policy, c, model_dir, from); });
  });
  // The v2 code also runs v3 checkpoints.
  if (config.model_type == ModelType::kDebertaV2 && config.conv_kernel_size == 0) {
    dispatch_head(
        kind, [&]<template <class> class Head>() { check_head_case_with<V2, P, Head>(policy, c, model_dir, from); });
  }
}

// The models we ship (models/tiny-en, models/tiny-en-sections: trained weights, float16 storage) against
// HF's float64 outputs in tests/fixtures/tiny_models/<model> (make_tiny_model_fixtures.py).
inline std::vector<std::string> shipped_model_names() { return {"tiny-en", "tiny-en-sections"}; }

template <ExecutionPolicy P>
void run_head_golden_suite(P const& policy) {
  auto const dirs = head_fixture_directories();
  REQUIRE_MESSAGE(dirs.size() > 1, "no head fixtures under " << heads_fixture_dir().string());
  SUBCASE("every registered head dispatches to its own template and has a fixture") {
    std::vector<HeadKind> covered;
    for (auto const& dir : dirs) covered.push_back(head_kind_from_config(load_model_config(dir)));
    for (HeadFacts const& f : kHeadFacts) {
      if (f.kind == HeadKind::kBase) continue;
      CHECK_MESSAGE(std::find(covered.begin(), covered.end(), f.kind) != covered.end(), "no fixture for " << f.name);
      dispatch_head(f.kind, [&]<template <class> class Head>() { CHECK(Head<P>::kKind == f.kind); });
    }
  }
  for (auto const& dir : dirs) {
    SUBCASE(dir.filename().string().c_str()) { check_head_fixture(policy, dir); }
  }
  std::filesystem::path const fixtures = std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR);
  for (std::string const& name : shipped_model_names()) {
    SUBCASE(("shipped " + name).c_str()) {
      check_head_fixture(policy, fixtures / "tiny_models" / name,
                         fixtures.parent_path().parent_path() / "models" / name, " (shipped)");
    }
  }
}

template <ExecutionPolicy P>
void run_head_error_suite(P const& policy) {
  std::filesystem::path const heads = heads_fixture_dir();

  SUBCASE("a missing head tensor is named with the file") {
    // The question-answering checkpoint has no classifier.*.
    std::filesystem::path const dir = heads / "qa_v3";
    CHECK_THROWS_WITH_AS(DebertaV3ForTokenClassification<P>::load(policy, dir),
                         doctest::Contains("token-classification head needs tensor 'classifier.weight', which the "
                                           "checkpoint lacks (head tensors: qa_outputs.bias, qa_outputs.weight)"),
                         Error);
    CHECK_THROWS_WITH_AS(DebertaV3ForTokenClassification<P>::load(policy, dir),
                         doctest::Contains((dir / "model.safetensors").string().c_str()), Error);
    // A backbone-only checkpoint has no masked-LM head at all.
    CHECK_THROWS_WITH_AS(
        DebertaV3ForMaskedLM<P>::load(policy, std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR) / "v3_c2p"),
        doctest::Contains("masked-LM head needs tensor 'cls.predictions.transform.dense.weight'"), Error);
  }

  SUBCASE("a classifier whose shape disagrees with num_labels") {
    // seqcls_v3's weights (3 labels) under tokcls_v3's config.json (5 labels in id2label).
    ScratchDir const copy("heads_shape");
    copy.copy_from(heads / "seqcls_v3");
    std::filesystem::copy_file(heads / "tokcls_v3" / "config.json", copy.path() / "config.json",
                               std::filesystem::copy_options::overwrite_existing);
    CHECK_THROWS_WITH_AS(DebertaV3ForSequenceClassification<P>::load(policy, copy.path()),
                         doctest::Contains("tensor 'classifier.weight' has shape [3, 32]; the "
                                           "sequence-classification head needs [5, 32] (num_labels = 5"),
                         Error);
  }

  SUBCASE("question answering needs two labels") {
    CHECK_THROWS_WITH_AS(DebertaV3ForQuestionAnswering<P>::load(policy, heads / "seqcls_v3"),
                         doctest::Contains("the question-answering head needs num_labels = 2"), Error);
  }

  SUBCASE("multiple choice on a v1 checkpoint") {
    ModelConfig const config = load_model_config(heads / "seqcls_v1");
    CHECK_THROWS_WITH_AS(resolve_head_kind(config, HeadKind::kMultipleChoice, "config.json"),
                         doctest::Contains("multiple-choice head needs a DeBERTa v2/v3 checkpoint"), Error);
    using V1MultipleChoice = DebertaWith<V1, P, MultipleChoiceHead>;
    CHECK_THROWS_WITH_AS(V1MultipleChoice::load(policy, heads / "seqcls_v1"),
                         doctest::Contains("HF has no DebertaForMultipleChoice"), Error);
  }

  SUBCASE("a pooler refuses rows whose first position is masked") {
    auto const model = DebertaV3ForSequenceClassification<P>::load(policy, heads / "seqcls_v3");
    std::vector<std::int64_t> const ids = {5, 6, 7, 8, 9, 10};
    std::vector<std::int64_t> const mask = {1, 1, 1, 0, 1, 1};  // row 1 is left-padded
    Batch const batch = Batch::from_padded(2, 3, ids, mask);
    CHECK_THROWS_WITH_AS(model.forward(batch),
                         doctest::Contains("sequence 1: the pooler reads the hidden state at "
                                           "position 0"),
                         Error);
  }

  SUBCASE("the head kind from config.json") {
    CHECK(head_kind_from_config(load_model_config(heads / "mlm_v3_nonlegacy")) == HeadKind::kMaskedLM);
    CHECK(head_kind_from_config(load_model_config(heads / "seqcls_v1")) == HeadKind::kSequenceClassification);
    CHECK(head_kind_from_config(load_model_config(heads / "tokcls_v3")) == HeadKind::kTokenClassification);
    CHECK(head_kind_from_config(load_model_config(heads / "qa_v1")) == HeadKind::kQuestionAnswering);
    CHECK(head_kind_from_config(load_model_config(heads / "mc_v3")) == HeadKind::kMultipleChoice);
    CHECK(head_kind_from_config(load_model_config(std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR) / "v3_c2p")) ==
          HeadKind::kBase);
  }

  SUBCASE("labels, layouts and tied decoders") {
    auto const seqcls = DebertaV3ForSequenceClassification<P>::load(policy, heads / "seqcls_v3");
    CHECK(seqcls.head().labels() == std::vector<std::string>{"negative", "neutral", "positive"});
    auto const v1 = DebertaV1ForSequenceClassification<P>::load(policy, heads / "seqcls_v1");
    CHECK(v1.head().labels() == std::vector<std::string>{"LABEL_0", "LABEL_1"});
    auto const legacy = DebertaV1ForMaskedLM<P>::load(policy, heads / "mlm_v1_embedding_size");
    CHECK(legacy.head().layout() == MaskedLMLayout::kLegacy);
    CHECK(legacy.head().decoder_tied());
    auto const lm_head = DebertaV3ForMaskedLM<P>::load(policy, heads / "mlm_v3_nonlegacy");
    CHECK(lm_head.head().layout() == MaskedLMLayout::kLMHead);
    auto const untied = DebertaV2ForMaskedLM<P>::load(policy, heads / "mlm_v2_decoder_present");
    CHECK(!untied.head().decoder_tied());
  }

  SUBCASE("a masked LM refuses tokens outside the batch") {
    auto const model = DebertaV3ForMaskedLM<P>::load(policy, heads / "mlm_v3_nonlegacy");
    Batch const batch = Batch::from_sequences({{1, 2, 3}});
    HeadRequest request;
    request.tokens = std::vector<std::int64_t>{0, 3};
    CHECK_THROWS_WITH_AS(model.forward(batch, request), doctest::Contains("requested token 3 is outside"), Error);
    HeadRequest const ids = HeadRequest::tokens_with_id(Batch::from_sequences({{1, 4, 2}, {4, 4}}), 4);
    CHECK(*ids.tokens == std::vector<std::int64_t>{1, 3, 4});
  }
}

}  // namespace flashdeberta::testing

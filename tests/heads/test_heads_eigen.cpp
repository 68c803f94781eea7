#include "flashdeberta/eigen/eigen_policy.hpp"
#include "heads_bin_suite.hpp"
#include "heads_suite.hpp"
#if FLASHDEBERTA_WITH_HDF5
#include "zeromodels_errors_suite.hpp"
#endif

TEST_CASE("heads: HF fixtures through EigenPolicy") {
  flashdeberta::testing::run_head_golden_suite(flashdeberta::EigenPolicy(2));
}

TEST_CASE("heads: errors through EigenPolicy") {
  flashdeberta::testing::run_head_error_suite(flashdeberta::EigenPolicy(2));
}

TEST_CASE("heads: HF fixtures from pytorch_model.bin through EigenPolicy") {
  flashdeberta::testing::run_head_torch_bin_suite(flashdeberta::EigenPolicy(2));
}

// The shipped masked LM stores float16: its backbone keeps the word table as stored (the embedding op widens the
// rows it gathers), and the tied decoder multiplies by a float32 copy of its own; logits equal, bit for bit, those
// of a load that converts every weight (zero_copy off).
TEST_CASE("heads: a float16 masked LM keeps its word table as stored and ties a converted copy") {
  namespace fd = flashdeberta;
  std::filesystem::path const dir =
      std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR).parent_path().parent_path() / "models" / "tiny-en";
  fd::EigenPolicy const policy(2);
  auto const lent = fd::DebertaV3ForMaskedLM<fd::EigenPolicy>::load(policy, dir);
  auto const copied =
      fd::DebertaV3ForMaskedLM<fd::EigenPolicy>::load(policy, dir, {.checkpoint = {.zero_copy = false}});
  CHECK(lent.backbone().word_embeddings().dtype == fd::DType::kF16);
  CHECK(copied.backbone().word_embeddings().dtype == fd::DType::kF32);
  fd::Batch const batch = fd::Batch::from_sequences({{1, 260, 4, 99, 3, 2}, {1, 44, 2}});
  fd::HeadOutput const a = lent.forward_to_host(batch);
  fd::HeadOutput const b = copied.forward_to_host(batch);
  CHECK(a["logits"].values == b["logits"].values);
}

#if FLASHDEBERTA_WITH_HDF5
TEST_CASE("heads: ZeroModels checkpoints through EigenPolicy") {
  flashdeberta::testing::run_zeromodels_suite(flashdeberta::EigenPolicy(2));
}

TEST_CASE("heads: malformed ZeroModels checkpoints through EigenPolicy") {
  flashdeberta::testing::run_zeromodels_error_suite(flashdeberta::EigenPolicy(2));
}
#endif

#if defined(FLASHDEBERTA_EIGEN_WITH_ONEDNN)
namespace {

namespace fd = flashdeberta;

// Rows (sequences, choices, or valid tokens) whose largest logit is at another label than HF's.
std::int64_t argmax_disagreements(fd::testing::HeadCase const& c, fd::PaddedTensor const& ours) {
  std::vector<float> const theirs = c.expected.read_f32("logits");
  std::vector<std::int64_t> const& shape = c.expected.info("logits").shape;
  bool const per_token =
      shape.size() >= c.input_shape.size() && std::equal(c.input_shape.begin(), c.input_shape.end(), shape.begin());
  std::int64_t const width = shape.back();
  std::int64_t const rows = static_cast<std::int64_t>(theirs.size()) / width;
  std::int64_t disagreements = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    if (per_token && c.mask[r] == 0) continue;
    auto const label = [&](std::vector<float> const& v) {
      return std::max_element(v.begin() + r * width, v.begin() + (r + 1) * width) - (v.begin() + r * width);
    };
    disagreements += label(theirs) != label(ours.values) ? 1 : 0;
  }
  return disagreements;
}

}  // namespace

// The classification heads with the encoder's linear layers in bf16 and int8 (oneDNN, docs/host-dtypes.md):
// logits within about twice the max abs error measured on an AVX512-BF16 EPYC (bf16 1.65e-2, int8 2.70e-2, both
// tokcls_v3), and every predicted label equal to HF's.
TEST_CASE("heads: classification fixtures with bf16 and int8 linear layers through EigenPolicy") {
  auto const bound = [](fd::DType dtype) { return dtype == fd::DType::kBF16 ? 3.5e-2 : 5.5e-2; };
  for (char const* name : {"seqcls_v1", "seqcls_v3", "tokcls_v1", "tokcls_v3", "mc_v3"}) {
    std::filesystem::path const dir = fd::testing::heads_fixture_dir() / name;
    fd::ModelConfig const config = fd::load_model_config(dir);
    fd::testing::HeadCase const c = fd::testing::read_head_case(dir);
    for (fd::DType dtype : {fd::DType::kBF16, fd::DType::kI8}) {
      fd::EigenPolicy const policy(fd::EigenOptions{.threads = 2, .linear_dtype = dtype});
      double err = 0.0;
      std::int64_t disagreements = 0;
      fd::dispatch_variant(config, [&]<fd::Variant V>() {
        fd::dispatch_head(fd::head_kind_from_config(config), [&]<template <class> class Head>() {
          auto const model = fd::DebertaWith<V, fd::EigenPolicy, Head>::load(policy, dir);
          fd::HeadOutput const out = model.forward_to_host(c.batch);
          fd::PaddedTensor const logits = fd::to_padded(out["logits"], c.batch, c.input_shape);
          err = fd::testing::field_error(c, logits, "logits");
          disagreements = argmax_disagreements(c, logits);
        });
      });
      MESSAGE("heads fixture " << std::string(name) << " " << fd::dtype_name(dtype)
                               << " linear layers: logits max abs error " << err << ", labels differing from HF "
                               << disagreements);
      CHECK(err <= bound(dtype));
      CHECK(disagreements == 0);
    }
  }
}
#endif

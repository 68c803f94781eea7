// Every trainable parameter's gradient against HF autograd in float64 (tests/fixtures/training, written by
// make_training_fixtures.py from transformers): for each fixture case, flash and eager attention, the loss and each
// gradient tensor within 1e-5 of that tensor's largest |gradient|. Shared by the host policies' test programs.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "flashdeberta/io/safetensors.hpp"
#include "flashdeberta/train/training_model.hpp"
#include "flashdeberta/variant/dispatch.hpp"

namespace flashdeberta::testing {

inline std::filesystem::path training_fixture_dir() {
  return std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR) / "training";
}

inline std::vector<std::string> training_fixture_cases() {
  std::vector<std::string> names;
  for (auto const& entry : std::filesystem::directory_iterator(training_fixture_dir()))
    if (std::filesystem::exists(entry.path() / "expected.safetensors") &&
        std::filesystem::exists(entry.path() / "inputs.safetensors"))
      names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// A fixture's padded inputs as a packed batch and the targets in packed order.
struct TrainingCase {
  ModelConfig config;
  HeadKind head = HeadKind::kSequenceClassification;
  ProblemType problem = ProblemType::kSingleLabel;
  Batch batch;
  TrainingTargets targets;
};

inline TrainingCase read_training_case(std::filesystem::path const& dir) {
  TrainingCase c;
  c.config = load_model_config(dir);
  c.head = head_kind_from_config(c.config);
  SafetensorsFile const inputs = SafetensorsFile::open(dir / "inputs.safetensors");
  std::vector<std::int64_t> const shape = inputs.info("input_ids").shape;
  std::int64_t const length = shape.back();
  std::int64_t rows = 1;
  for (std::size_t i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];
  std::vector<std::int64_t> types;
  if (inputs.contains("token_type_ids")) types = inputs.read_i64("token_type_ids");
  c.batch = Batch::from_padded(rows, length, inputs.read_i64("input_ids"), inputs.read_i64("attention_mask"), types);
  // Per-token labels move from (row, position) to the packed token.
  auto const packed = [&](std::vector<std::int64_t> const& padded) {
    std::vector<std::int64_t> out(static_cast<std::size_t>(c.batch.total_tokens()));
    for (std::int64_t b = 0; b < c.batch.batch_size(); ++b)
      for (std::int64_t t = c.batch.cu_seqlens[b]; t < c.batch.cu_seqlens[b + 1]; ++t)
        out[t] = padded[b * length + c.batch.positions[t]];
    return out;
  };
  if (c.head == HeadKind::kQuestionAnswering) {
    // HF clamps positions to [0, L] and ignores L.
    for (char const* field : {"start_positions", "end_positions"}) {
      std::vector<std::int64_t> positions = inputs.read_i64(field);
      for (std::int64_t& p : positions) p = std::clamp<std::int64_t>(p, 0, length) == length ? kIgnoredLabel : p;
      (std::string(field) == "start_positions" ? c.targets.starts : c.targets.ends) = positions;
    }
    return c;
  }
  TensorInfo const& labels = inputs.info("labels");
  if (labels.dtype == DType::kF64 || labels.dtype == DType::kF32) {
    c.problem = c.config.num_labels == 1 ? ProblemType::kRegression : ProblemType::kMultiLabel;
    c.targets.values = inputs.read_f32("labels");
  } else {
    c.problem = c.config.num_labels == 1 ? ProblemType::kRegression : ProblemType::kSingleLabel;
    std::vector<std::int64_t> const values = inputs.read_i64("labels");
    bool const per_token = c.head == HeadKind::kTokenClassification || c.head == HeadKind::kMaskedLM;
    c.targets.classes = per_token ? packed(values) : values;
  }
  return c;
}

// Runs one case through TrainingModel<V, P> and compares loss and every gradient with HF's.
template <Variant V, TrainingPolicy P>
void check_training_case(P const& policy, std::filesystem::path const& dir, AttentionImpl impl) {
  TrainingCase const c = read_training_case(dir);
  TrainingModelOptions options{.head = c.head, .problem = c.problem, .attention = impl};
  auto model = TrainingModel<V, P>::load(policy, dir, options);
  CHECK(model.parameters().initialized().empty());
  TrainingLoss const loss = model.forward_backward(c.batch, c.targets);
  SafetensorsFile const expected = SafetensorsFile::open(dir / "expected.safetensors");
  double const hf_loss = expected.read_f32("loss")[0];
  std::string const label = dir.filename().string() + (impl == AttentionImpl::kFlash ? " flash" : " eager");
  MESSAGE(label << ": loss " << loss.loss << " (HF " << hf_loss << ")");
  CHECK(std::abs(loss.loss - hf_loss) <= 1e-5 * std::max(1.0, std::abs(hf_loss)));
  std::map<std::string, std::vector<float>> ours;
  for (auto& [name, values] : model.parameters().download_grads()) ours[name] = std::move(values);
  double worst = 0.0;
  std::string worst_name;
  std::size_t compared = 0;
  for (std::string const& field : expected.names()) {
    if (field.rfind("grad.", 0) != 0) continue;
    std::string const name = field.substr(5);
    auto const it = ours.find(name);
    INFO(label << ": HF's gradient " << name);
    REQUIRE(it != ours.end());
    std::vector<float> const theirs = expected.read_f32(field);
    REQUIRE(theirs.size() == it->second.size());
    double scale = 0.0, err = 0.0;
    for (float g : theirs) scale = std::max(scale, static_cast<double>(std::abs(g)));
    for (std::size_t i = 0; i < theirs.size(); ++i)
      err = std::max(err, std::abs(static_cast<double>(it->second[i]) - theirs[i]));
    // HF stores gradients that are zero analytically (a QA output bias, a multiple-choice classifier bias) as float64
    // rounding noise near 1e-17, and float32 sums leave noise near 1e-8: those compare against 1e-7 absolute.
    double const relative = err / std::max(scale, 1e-2);
    CHECK_MESSAGE(err <= std::max(1e-5 * scale, 1e-7),
                  label << ": " << name << " max abs error " << err << " of max |grad| " << scale);
    if (relative > worst) {
      worst = relative;
      worst_name = name;
    }
    ours.erase(it);
    ++compared;
  }
  MESSAGE(label << ": " << compared << " gradient tensors, worst relative error " << worst << " (" << worst_name
                << ")");
  for (auto const& entry : ours) {  // parameters HF gave no gradient must have none here either
    double largest = 0.0;
    for (float g : entry.second) largest = std::max(largest, static_cast<double>(std::abs(g)));
    CHECK_MESSAGE(largest == 0.0, label << ": " << entry.first << " has a gradient (max " << largest << ") HF has not");
  }
}

template <TrainingPolicy P>
void run_gradient_suite(P const& policy) {
  std::vector<std::string> const cases = training_fixture_cases();
  REQUIRE(!cases.empty());
  for (std::string const& name : cases) {
    std::filesystem::path const dir = training_fixture_dir() / name;
    ModelConfig const config = load_model_config(dir);
    for (AttentionImpl impl : {AttentionImpl::kFlash, AttentionImpl::kEager})
      dispatch_variant(config, [&]<Variant V>() { check_training_case<V, P>(policy, dir, impl); });
  }
}

}  // namespace flashdeberta::testing

namespace flashdeberta::testing {

// A step with dropout on, with each option against the plain step: (loss, gradients).
template <Variant V, TrainingPolicy P>
std::pair<double, std::vector<std::pair<std::string, std::vector<float>>>> step_with_dropout(
    P const& policy, std::filesystem::path const& dir, TrainingCase const& c, TrainingModelOptions options) {
  options.head = c.head;
  options.problem = c.problem;
  auto model = TrainingModel<V, P>::load(policy, dir, options);
  DropoutRates const dropout{.hidden = 0.1f, .attention = 0.1f, .pooler = 0.1f, .classifier = 0.1f};
  double const loss = model.forward_backward(c.batch, c.targets, dropout, 7).loss;
  return {loss, model.parameters().download_grads()};
}

// The last layer over the head's rows only (TrainingModelOptions::head_rows_only) against every row, dropout on (the
// rows keep their packed counters): the same loss and gradients up to the GEMMs' summation order.
template <TrainingPolicy P>
void run_head_rows_cases(P const& policy) {
  for (char const* name : {"v3_seqcls", "v3_mc", "v3_mlm", "v1_mlm", "v2_conv_seqcls", "v3_tokcls"}) {
    std::filesystem::path const dir = training_fixture_dir() / name;
    TrainingCase const c = read_training_case(dir);
    dispatch_variant(load_model_config(dir), [&]<Variant V>() {
      auto const rows = step_with_dropout<V>(policy, dir, c, {.head_rows_only = true});
      auto const all = step_with_dropout<V>(policy, dir, c, {.head_rows_only = false});
      INFO(std::string(name) << ": the last layer over the head's rows");
      CHECK(std::abs(rows.first - all.first) <= 1e-6 * std::max(1.0, std::abs(all.first)));
      REQUIRE(rows.second.size() == all.second.size());
      // A tensor whose entries cancel far below the rest (a two-label bias's gradient is +-one sum of p - y) keeps
      // the rounding of the terms it summed, not of its result: its bound is at least 1e-2 of the step's largest.
      double step_largest = 0.0;
      for (auto const& [tensor, grad] : all.second)
        for (float g : grad) step_largest = std::max(step_largest, static_cast<double>(std::abs(g)));
      for (std::size_t i = 0; i < all.second.size(); ++i) {
        std::vector<float> const& a = all.second[i].second;
        std::vector<float> const& b = rows.second[i].second;
        REQUIRE(a.size() == b.size());
        double largest = 0.0, error = 0.0;
        for (std::size_t x = 0; x < a.size(); ++x) {
          largest = std::max(largest, static_cast<double>(std::abs(a[x])));
          error = std::max(error, static_cast<double>(std::abs(a[x] - b[x])));
        }
        double const scale = std::max(largest, 1e-2 * step_largest);
        CHECK_MESSAGE(error <= 1e-5 * scale, std::string(name)
                                                 << " " << all.second[i].first << ": " << error << " of " << largest);
      }
    });
  }
}

// Activation checkpointing reruns each layer's forward in the backward with the same dropout counters: the
// gradients must be the very same bits. And a step over the memory limit is refused before it runs.
template <TrainingPolicy P>
void run_checkpointing_and_memory_cases(P const& policy) {
  for (char const* name : {"v2_conv_seqcls", "v3_mlm", "v1_seqcls"}) {
    std::filesystem::path const dir = training_fixture_dir() / name;
    TrainingCase const c = read_training_case(dir);
    ModelConfig const config = load_model_config(dir);
    dispatch_variant(config, [&]<Variant V>() {
      std::vector<std::pair<std::string, std::vector<float>>> grads[2];
      double losses[2] = {0.0, 0.0};
      for (int checkpointing = 0; checkpointing < 2; ++checkpointing) {
        auto model = TrainingModel<V, P>::load(
            policy, dir, {.head = c.head, .problem = c.problem, .activation_checkpointing = checkpointing == 1});
        DropoutRates const dropout{.hidden = 0.1f, .attention = 0.1f, .pooler = 0.1f, .classifier = 0.1f};
        losses[checkpointing] = model.forward_backward(c.batch, c.targets, dropout, 7).loss;
        grads[checkpointing] = model.parameters().download_grads();
      }
      INFO(name << ": activation checkpointing");
      CHECK(losses[0] == losses[1]);
      REQUIRE(grads[0].size() == grads[1].size());
      for (std::size_t i = 0; i < grads[0].size(); ++i) CHECK(grads[0][i] == grads[1][i]);
    });
  }
  std::filesystem::path const dir = training_fixture_dir() / "v3_seqcls";
  TrainingCase const c = read_training_case(dir);
  auto model = TrainingModel<V3, P>::load(policy, dir, {.problem = c.problem, .max_step_bytes = 64 * 1024});
  try {
    model.forward_backward(c.batch, c.targets);
    FAIL("a step over max_step_bytes ran");
  } catch (Error const& e) {
    std::string const message = e.what();
    MESSAGE(message);
    CHECK(message.find("a training step of " + std::to_string(c.batch.total_tokens()) + " tokens") !=
          std::string::npos);
    CHECK(message.find("allowed") != std::string::npos);
  }
}

}  // namespace flashdeberta::testing

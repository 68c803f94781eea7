// Mixed-precision gradients (a policy whose compute dtype is bf16 or fp16 training float32 parameters: 16-bit products,
// float32 accumulation and activations) against HF autograd in float64, bounded by HF's own error under
// torch.autocast in that dtype on the same fixtures (tests/fixtures/training/hf_autocast_error.json, written on the GPU
// machine by tests/cuda/hf_training_low_precision_error.py). Both errors are measured alike: per case, the largest
// over its gradient tensors of max |g - g64| / max(max |g64|, 1e-2 x the case's largest |g64|).
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "flashdeberta/train/loss_scale.hpp"
#include "gradient_suite.hpp"

namespace flashdeberta::testing {

struct CaseError {
  double error = 0.0;
  std::string tensor;
};

// The error measure of hf_training_low_precision_error.py over the gradients `ours` (name -> values).
inline CaseError case_gradient_error(std::map<std::string, std::vector<float>> const& ours,
                                     SafetensorsFile const& expected) {
  std::map<std::string, std::vector<float>> reference;
  double largest = 0.0;
  for (std::string const& field : expected.names()) {
    if (field.rfind("grad.", 0) != 0) continue;
    std::vector<float>& r = reference[field.substr(5)] = expected.read_f32(field);
    for (float g : r) largest = std::max(largest, static_cast<double>(std::abs(g)));
  }
  CaseError worst;
  for (auto const& [name, r] : reference) {
    auto const it = ours.find(name);
    REQUIRE_MESSAGE(it != ours.end(), "no gradient for HF's " << name);
    REQUIRE(it->second.size() == r.size());
    double scale = 0.0, err = 0.0;
    for (std::size_t i = 0; i < r.size(); ++i) {
      scale = std::max(scale, static_cast<double>(std::abs(r[i])));
      err = std::max(err, std::abs(static_cast<double>(it->second[i]) - r[i]));
    }
    double const relative = err / std::max(scale, 1e-2 * largest);
    if (relative > worst.error) worst = {relative, name};
  }
  return worst;
}

// Every fixture case HF's autocast ran in `dtype_label` ("bf16", "fp16"): ours no worse than HF's. fp16 scales the loss
// from DynamicLossScale's initial scale, halved while the gradients overflow, and divides it out of the gradients, as
// the optimizer does.
template <TrainingPolicy P>
void run_mixed_precision_suite(P const& policy, std::string const& dtype_label) {
  std::ifstream file(training_fixture_dir() / "hf_autocast_error.json");
  REQUIRE_MESSAGE(file.good(), "tests/fixtures/training/hf_autocast_error.json is missing");
  nlohmann::json const bounds = nlohmann::json::parse(file);
  std::optional<DynamicLossScale> const scaler = loss_scale_for(policy.compute_dtype());
  double const loss_scale = scaler ? scaler->scale() : 1.0;
  // Where HF's autocast fails (its v1 code overflows a float32 fill value in 16 bits), the bound is the largest error
  // HF reached on any case that ran.
  double largest_hf = 0.0;
  for (auto const& [name, row] : bounds.at("cases").items())
    if (row.at(dtype_label).contains("error"))
      largest_hf = std::max(largest_hf, row.at(dtype_label).at("error").template get<double>());
  REQUIRE(largest_hf > 0.0);
  int compared = 0;
  for (auto const& [name, row] : bounds.at("cases").items()) {
    nlohmann::json const& hf_row = row.at(dtype_label);
    nlohmann::json const hf =
        hf_row.contains("error") ? hf_row : nlohmann::json{{"error", largest_hf}, {"tensor", "HF fails: any case's"}};
    std::filesystem::path const dir = training_fixture_dir() / name;
    TrainingCase const c = read_training_case(dir);
    dispatch_variant(load_model_config(dir), [&]<Variant V>() {
      auto model = TrainingModel<V, P>::load(policy, dir, {.head = c.head, .problem = c.problem});
      // GradScaler's backoff, as the script measured HF: halve the scale while the gradients overflow.
      double scale = loss_scale;
      std::map<std::string, std::vector<float>> ours;
      for (;;) {
        model.parameters().zero_grads();
        (void)model.forward_backward(c.batch, c.targets, {}, 0, scale);
        bool finite = true;
        ours.clear();
        for (auto& [tensor, values] : model.parameters().download_grads()) {
          for (float& g : values) {
            finite = finite && std::isfinite(g);
            g = static_cast<float>(g / scale);
          }
          ours[tensor] = std::move(values);
        }
        if (finite || scale < 1.0) break;
        scale /= 2.0;
      }
      CaseError const e = case_gradient_error(ours, SafetensorsFile::open(dir / "expected.safetensors"));
      double const bound = hf.at("error").get<double>();
      MESSAGE(name << " " << dtype_label << ": " << e.error << " (" << e.tensor << ", loss scale " << scale
                   << "), HF autocast " << bound << " (" << hf.value("tensor", "") << ")");
      CHECK_MESSAGE(e.error <= bound, name << " " << dtype_label << ": " << e.error << " > HF's " << bound);
    });
    ++compared;
  }
  CHECK(compared > 0);
}

}  // namespace flashdeberta::testing

// The optimizer against PyTorch: one AdamW step from HF's gradients against torch.optim.AdamW (adamw_step), and 20
// steps of HF's Trainer (trainer_20_steps: warmup, linear decay, weight decay, clipping) replayed batch by batch in
// the Trainer's order, each step's loss within 1e-4 (tests/fixtures/training, make_training_fixtures.py).
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "flashdeberta/train/optimizer.hpp"
#include "gradient_suite.hpp"

namespace flashdeberta::testing {

// Largest |ours - theirs| over every parameter, theirs read from `file` under `prefix` + the parameter's name.
template <TrainingPolicy P>
double parameter_distance(ParameterSet<P> const& parameters, SafetensorsFile const& file, std::string const& prefix,
                          std::string& worst_name) {
  double worst = 0.0;
  for (auto const& entry : parameters.download_values()) {
    std::string const& name = entry.first;  // a named copy: doctest's INFO captures it, and a binding cannot be
    std::vector<float> const& values = entry.second;
    INFO("parameter " << name);
    REQUIRE(file.contains(prefix + name));
    std::vector<float> const theirs = file.read_f32(prefix + name);
    REQUIRE(theirs.size() == values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
      double const err = std::abs(static_cast<double>(values[i]) - theirs[i]);
      if (err > worst) {
        worst = err;
        worst_name = name;
      }
    }
  }
  return worst;
}

template <TrainingPolicy P>
void run_adamw_step_case(P const& policy) {
  std::filesystem::path const dir = training_fixture_dir() / "v3_seqcls";
  auto model = TrainingModel<V3, P>::load(policy, dir, {});
  SafetensorsFile const expected = SafetensorsFile::open(dir / "expected.safetensors");
  ParameterSet<P>& parameters = model.parameters();
  for (std::size_t i = 0; i < parameters.size(); ++i)
    parameters.set_grad(i, expected.read_f32("grad." + parameters.info(i).name));
  AdamW<P> optimizer(
      {.learning_rate = 1e-3, .weight_decay = 0.01, .max_grad_norm = 1.0, .schedule = LearningRateSchedule::kConstant});
  auto const report = optimizer.step(parameters);
  MESSAGE("adamw_step: gradient norm " << report.grad_norm << " (torch 6.881671817363321)");
  CHECK(std::abs(report.grad_norm - 6.881671817363321) <= 1e-5);
  std::string worst_name;
  SafetensorsFile const after = SafetensorsFile::open(training_fixture_dir() / "adamw_step" / "after_step.safetensors");
  double const worst = parameter_distance(parameters, after, "", worst_name);
  MESSAGE("adamw_step: largest |ours - torch| after one step " << worst << " (" << worst_name << "; lr 1e-3)");
  CHECK(worst <= 1e-6);
}

// The adamw_step fixture's gradients times a loss scale of 1024, stepped with that DynamicLossScale: torch's update
// (the scale divided out); then a gradient that overflowed: the step is skipped, nothing moves, the scale halves.
template <TrainingPolicy P>
void run_loss_scaled_step_case(P const& policy) {
  std::filesystem::path const dir = training_fixture_dir() / "v3_seqcls";
  auto model = TrainingModel<V3, P>::load(policy, dir, {});
  SafetensorsFile const expected = SafetensorsFile::open(dir / "expected.safetensors");
  ParameterSet<P>& parameters = model.parameters();
  auto const set_scaled_grads = [&](float scale) {
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      std::vector<float> g = expected.read_f32("grad." + parameters.info(i).name);
      for (float& x : g) x *= scale;
      parameters.set_grad(i, g);
    }
  };
  AdamW<P> optimizer(
      {.learning_rate = 1e-3, .weight_decay = 0.01, .max_grad_norm = 1.0, .schedule = LearningRateSchedule::kConstant});
  DynamicLossScale loss_scale({.initial = 1024.0, .growth_interval = 2});
  set_scaled_grads(1024.0f);
  auto const report = optimizer.step(parameters, 1.0, &loss_scale);
  CHECK_FALSE(report.skipped);
  CHECK(std::abs(report.grad_norm - 6.881671817363321) <= 1e-5);
  CHECK(optimizer.completed_steps() == 1);
  CHECK(loss_scale.scale() == 1024.0);
  std::string worst_name;
  SafetensorsFile const after = SafetensorsFile::open(training_fixture_dir() / "adamw_step" / "after_step.safetensors");
  double const worst = parameter_distance(parameters, after, "", worst_name);
  MESSAGE("loss-scaled adamw_step: largest |ours - torch| after one step " << worst << " (" << worst_name << ")");
  CHECK(worst <= 1e-6);

  std::vector<float> overflowed = expected.read_f32("grad." + parameters.info(1).name);
  overflowed[0] = std::numeric_limits<float>::infinity();
  parameters.zero_grads();
  parameters.set_grad(1, overflowed);
  auto const skipped = optimizer.step(parameters, 1.0, &loss_scale);
  CHECK(skipped.skipped);
  CHECK(skipped.loss_scale == 512.0);
  CHECK(optimizer.completed_steps() == 1);
  CHECK(parameter_distance(parameters, after, "", worst_name) == worst);  // nothing moved
}

template <TrainingPolicy P>
void run_trainer_replay(P const& policy, AttentionImpl impl) {
  std::filesystem::path const fixtures = training_fixture_dir();
  std::filesystem::path const trainer = fixtures / "trainer_20_steps";
  SafetensorsFile const data = SafetensorsFile::open(trainer / "data.safetensors");
  SafetensorsFile const expected = SafetensorsFile::open(trainer / "expected.safetensors");
  std::vector<std::int64_t> const ids = data.read_i64("input_ids");
  std::vector<std::int64_t> const lengths = data.read_i64("lengths");
  std::vector<std::int64_t> const labels = data.read_i64("labels");
  std::int64_t const width = data.info("input_ids").shape[1];
  std::vector<std::int64_t> const order = expected.read_i64("order");
  std::vector<float> const losses = expected.read_f32("losses");
  std::vector<float> const rates = expected.read_f32("lrs");
  std::int64_t const steps = static_cast<std::int64_t>(losses.size());
  std::int64_t const per_batch = static_cast<std::int64_t>(order.size()) / steps;

  auto model = TrainingModel<V3, P>::load(policy, fixtures / "v3_seqcls", {.attention = impl});
  AdamW<P> optimizer({.learning_rate = 1e-4,
                      .weight_decay = 0.01,
                      .max_grad_norm = 1.0,
                      .schedule = LearningRateSchedule::kLinear,
                      .warmup_steps = 3,
                      .total_steps = steps});
  double worst_loss = 0.0;
  for (std::int64_t step = 0; step < steps; ++step) {
    Batch batch;
    TrainingTargets targets;
    for (std::int64_t k = 0; k < per_batch; ++k) {
      std::int64_t const example = order[step * per_batch + k];
      std::vector<std::int32_t> sequence;
      for (std::int64_t t = 0; t < lengths[example]; ++t)
        sequence.push_back(static_cast<std::int32_t>(ids[example * width + t]));
      batch.add_sequence(sequence);
      targets.classes.push_back(labels[example]);
    }
    model.parameters().zero_grads();
    TrainingLoss const loss = model.forward_backward(batch, targets);
    double const learning_rate = optimizer.next_learning_rate();
    optimizer.step(model.parameters());
    worst_loss = std::max(worst_loss, std::abs(loss.loss - losses[step]));
    CHECK_MESSAGE(std::abs(loss.loss - losses[step]) <= 1e-4,
                  "step " << step + 1 << ": loss " << loss.loss << ", Trainer " << losses[step]);
    CHECK(std::abs(learning_rate - rates[step]) <= 1e-9);
  }
  std::string worst_name;
  double const worst = parameter_distance(model.parameters(), expected, "param.", worst_name);
  MESSAGE("trainer replay (" << (impl == AttentionImpl::kFlash ? "flash" : "eager") << "): " << steps
                             << " steps, largest loss difference " << worst_loss << ", largest parameter difference "
                             << worst << " (" << worst_name << ")");
  CHECK(worst <= 1e-5);  // a float64 replay of the Trainer ends within 8.7e-7 of its float32 parameters
}

}  // namespace flashdeberta::testing

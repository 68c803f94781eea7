// A model being fine-tuned on one backend, as the front ends see it (flashdeberta train, Python's train()): the
// run-time face of TrainingModel<V, P> and its AdamW, made by StartedBackend::train (policy_backend.hpp) so that no
// front end names a variant or a policy.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "flashdeberta/core/batch.hpp"
#include "flashdeberta/train/optimizer.hpp"
#include "flashdeberta/train/trainable_head.hpp"
#include "flashdeberta/train/training_model.hpp"

namespace flashdeberta::runtime {

struct TrainingSessionOptions {
  HeadKind head = HeadKind::kSequenceClassification;
  ProblemType problem = ProblemType::kSingleLabel;
  OptimizerOptions optimizer;
  std::uint64_t init_seed = 42;  // a new head's initial weights
};

// Host copies of what a run must keep to resume bit-identically: every parameter, AdamW's moments and step count,
// and the loss scale of an fp16 run (DynamicLossScale; 0 where the run has none).
struct TrainingState {
  std::vector<std::pair<std::string, std::vector<float>>> values, exp_avg, exp_avg_sq;
  std::int64_t completed_steps = 0;
  double loss_scale = 0.0;
  std::int64_t loss_scale_good_steps = 0;
};

class TrainingSession {
 public:
  virtual ~TrainingSession() = default;
  virtual ModelConfig const& config() const = 0;
  // Forward, loss and backward; gradients add up until the next step() or zero_grads().
  virtual TrainingLoss forward_backward(Batch const& batch, TrainingTargets const& targets, DropoutRates dropout,
                                        std::uint64_t seed) = 0;
  virtual TrainingLoss evaluate(Batch const& batch, TrainingTargets const& targets) = 0;
  virtual void zero_grads() = 0;
  // One AdamW update (clipping, schedule) from the gradients times `gradient_scale` (1 / accumulation steps); they
  // are zeroed after it. Under fp16 products the loss is scaled and a step whose gradients overflowed is skipped
  // (OptimizerStepReport::skipped).
  virtual OptimizerStepReport step(double gradient_scale) = 0;
  virtual double next_learning_rate() const = 0;
  // Every parameter under its HF name (deberta.* and the head's), host float32, flat; shapes() gives each one's.
  virtual std::vector<std::pair<std::string, std::vector<float>>> weights() const = 0;
  virtual std::map<std::string, std::vector<std::int64_t>> shapes() const = 0;
  virtual TrainingState state() const = 0;
  virtual void restore(TrainingState const& state) = 0;
};

}  // namespace flashdeberta::runtime

// Optimization as HF's Trainer does it (docs/training.md): AdamW with decoupled weight decay (none on biases and
// LayerNorm weights), a learning rate warmed up linearly then decayed linearly or by a cosine, and clipping by the
// global gradient norm before each update. Defaults are TrainingArguments'.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string_view>

#include "flashdeberta/train/loss_scale.hpp"
#include "flashdeberta/train/parameter_set.hpp"

namespace flashdeberta {

enum class LearningRateSchedule { kLinear, kCosine, kConstant };

inline LearningRateSchedule parse_learning_rate_schedule(std::string_view name) {
  if (name == "linear") return LearningRateSchedule::kLinear;
  if (name == "cosine") return LearningRateSchedule::kCosine;
  if (name == "constant" || name == "constant_with_warmup") return LearningRateSchedule::kConstant;
  FLASHDEBERTA_FAIL("unknown learning-rate schedule '" << name << "' (linear, cosine, constant)");
}

struct OptimizerOptions {
  double learning_rate = 5e-5;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  double max_grad_norm = 1.0;  // <= 0: no clipping
  LearningRateSchedule schedule = LearningRateSchedule::kLinear;
  std::int64_t warmup_steps = 0;
  std::int64_t total_steps = 0;  // the schedule's length (optimizer steps)
};

// The learning rate of the optimizer step that follows `completed` steps (transformers' get_linear_schedule_with_
// warmup / get_cosine_schedule_with_warmup with 0.5 cycles: the scheduler steps after each update, so the first
// update uses the factor at 0, which is 0 with warmup).
inline double scheduled_learning_rate(OptimizerOptions const& o, std::int64_t completed) {
  double const step = static_cast<double>(completed);
  double const warmup = static_cast<double>(o.warmup_steps);
  if (completed < o.warmup_steps) return o.learning_rate * step / std::max(1.0, warmup);
  double const remaining = static_cast<double>(o.total_steps) - warmup;
  switch (o.schedule) {
    case LearningRateSchedule::kConstant:
      return o.learning_rate;
    case LearningRateSchedule::kCosine: {
      double const progress = (step - warmup) / std::max(1.0, remaining);
      return o.learning_rate * std::max(0.0, 0.5 * (1.0 + std::cos(std::numbers::pi * progress)));
    }
    case LearningRateSchedule::kLinear:
    default:
      return o.learning_rate * std::max(0.0, (static_cast<double>(o.total_steps) - step) / std::max(1.0, remaining));
  }
}

struct OptimizerStepReport {
  double grad_norm = 0.0;  // before clipping (the loss scale divided out)
  double learning_rate = 0.0;
  bool skipped = false;     // the scaled gradients overflowed: no update, the schedule did not advance
  double loss_scale = 1.0;  // the scale the next backward uses (1 without loss scaling)
};

// AdamW over a ParameterSet, with the schedule and clipping; holds the step count (the moments live in the set).
template <TrainingPolicy P>
class AdamW {
 public:
  explicit AdamW(OptimizerOptions options) : options_(options) {}

  OptimizerOptions const& options() const { return options_; }
  std::int64_t completed_steps() const { return completed_; }
  void set_completed_steps(std::int64_t steps) { completed_ = steps; }  // when resuming
  double next_learning_rate() const { return scheduled_learning_rate(options_, completed_); }

  // One update from the gradients in `parameters` times `gradient_scale` (which it leaves as they are):
  // 1 / gradient_accumulation_steps makes summed micro-batch gradients HF's, whose loss each micro-batch divides.
  // With a DynamicLossScale the gradients are that scale times the loss's: it is divided out, and a step whose norm
  // is not finite is skipped (the scale shrinks) as GradScaler.step skips it, the schedule not advanced.
  OptimizerStepReport step(ParameterSet<P>& parameters, double gradient_scale = 1.0,
                           DynamicLossScale* loss_scale = nullptr) {
    OptimizerStepReport report;
    if (loss_scale != nullptr) {
      gradient_scale /= loss_scale->scale();
      double const norm = parameters.grad_norm() * gradient_scale;
      report.skipped = !loss_scale->update(norm);
      report.loss_scale = loss_scale->scale();
      report.learning_rate = next_learning_rate();
      report.grad_norm = norm;
      if (report.skipped) return report;
    } else {
      report.grad_norm = parameters.grad_norm() * gradient_scale;
      report.learning_rate = next_learning_rate();
    }
    // torch.nn.utils.clip_grad_norm_: every gradient times min(1, max_norm / (norm + 1e-6)).
    double scale = 1.0;
    if (options_.max_grad_norm > 0.0) scale = std::min(1.0, options_.max_grad_norm / (report.grad_norm + 1e-6));
    ++completed_;
    parameters.adamw_step({.learning_rate = report.learning_rate,
                           .beta1 = options_.beta1,
                           .beta2 = options_.beta2,
                           .eps = options_.eps,
                           .weight_decay = options_.weight_decay,
                           .grad_scale = scale * gradient_scale,
                           .step = completed_});
    return report;
  }

 private:
  OptimizerOptions options_;
  std::int64_t completed_ = 0;
};

}  // namespace flashdeberta

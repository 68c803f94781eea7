// Dynamic loss scaling for fp16 products, as torch.cuda.amp.GradScaler does it with its defaults (HF Trainer's --fp16):
// the loss's gradient is multiplied by the scale before the backward so that small gradients survive fp16's range;
// the optimizer divides it out. A step whose gradients overflowed (a non-finite norm) is skipped and the scale halved;
// after growth_interval good steps in a row it doubles. bf16 has float32's range and needs none.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>

#include "flashdeberta/core/dtype.hpp"
#include "flashdeberta/core/error.hpp"

namespace flashdeberta {

struct LossScaleOptions {
  double initial = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 2000;
};

class DynamicLossScale {
 public:
  explicit DynamicLossScale(LossScaleOptions options = {}) : options_(options), scale_(options.initial) {
    FLASHDEBERTA_REQUIRE(options.initial > 0.0 && std::isfinite(options.initial) && options.growth_factor > 1.0 &&
                             options.backoff_factor > 0.0 && options.backoff_factor < 1.0 &&
                             options.growth_interval > 0,
                         "loss scaling: initial scale "
                             << options.initial << ", growth factor " << options.growth_factor << ", backoff factor "
                             << options.backoff_factor << ", growth interval " << options.growth_interval
                             << ": needs a finite scale > 0, growth > 1, 0 < backoff < 1 "
                                "and an interval >= 1");
  }

  double scale() const { return scale_; }
  std::int64_t good_steps() const { return good_steps_; }
  // Resuming: the scale and good-step count a checkpoint saved.
  void restore(double scale, std::int64_t good_steps) {
    FLASHDEBERTA_REQUIRE(scale > 0.0 && std::isfinite(scale) && good_steps >= 0,
                         "loss scale " << scale << " after " << good_steps << " good steps: not a state to resume");
    scale_ = scale;
    good_steps_ = good_steps;
  }

  // After a backward whose gradients had norm `scaled_norm` (of the scaled gradients): whether the step may use them.
  // Updates the scale either way, as GradScaler.update does.
  bool update(double scaled_norm) {
    if (!std::isfinite(scaled_norm)) {
      scale_ *= options_.backoff_factor;
      good_steps_ = 0;
      return false;
    }
    if (++good_steps_ == options_.growth_interval) {
      double const grown = scale_ * options_.growth_factor;
      if (std::isfinite(grown)) scale_ = grown;
      good_steps_ = 0;
    }
    return true;
  }

 private:
  LossScaleOptions options_;
  double scale_ = 1.0;
  std::int64_t good_steps_ = 0;
};

// The loss scaling a policy computing its products in `products` needs: fp16 has one, every other dtype none.
inline std::optional<DynamicLossScale> loss_scale_for(DType products, LossScaleOptions options = {}) {
  if (products != DType::kF16) return std::nullopt;
  return DynamicLossScale(options);
}

}  // namespace flashdeberta

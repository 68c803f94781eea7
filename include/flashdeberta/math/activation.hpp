// Scalar activations by HF's names (spec 5.3), usable from host and device code.
#pragma once

#include <cmath>

#include "flashdeberta/config.hpp"
#include "flashdeberta/core/model_config.hpp"

namespace flashdeberta {

FLASHDEBERTA_HOST_DEVICE inline float apply_activation(Activation act, float x) {
  switch (act) {
    case Activation::kIdentity:
      return x;
    case Activation::kGelu:  // exact erf form, PyTorch's default
      return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f));
    case Activation::kGeluTanh:
      return 0.5f * x * (1.0f + tanhf(0.79788456080286535588f * (x + 0.044715f * x * x * x)));
    case Activation::kGeluFast:
      return 0.5f * x * (1.0f + tanhf(0.7978845608f * x * (1.0f + 0.044715f * x * x)));
    case Activation::kQuickGelu:
      return x / (1.0f + expf(-1.702f * x));
    case Activation::kRelu:
      return x > 0.0f ? x : 0.0f;
    case Activation::kTanh:
      return tanhf(x);
    case Activation::kSigmoid:
      return 1.0f / (1.0f + expf(-x));
    case Activation::kSilu:
      return x / (1.0f + expf(-x));
    case Activation::kMish:
      return x * tanhf(x > 20.0f ? x : log1pf(expf(x)));
  }
  return x;
}

}  // namespace flashdeberta

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

// dy * act'(x), the derivative of math/activation.hpp's formula. The logistic-based forms use s = 1 / (1 + e),
// e = exp(-z), with 1 - s = e s and 1 - tanh^2(u) = 4 s (1 - s) for z = 2u: differences of saturated values keep
// no relative accuracy (eigen_ops::activation_backward_row, the vectorized host form, measured 6.5e-6 against
// 1.7e-7 for gelu_tanh). The CUDA and Kokkos training ops call it; apply_activation is its forward.
FLASHDEBERTA_HOST_DEVICE inline float activation_backward(Activation act, float x, float dy) {
  // z at least -80: e s stays finite (exp(80) < FLT_MAX) and s (1.8e-35) is 0 for every purpose.
  auto const exp_neg = [](float z) { return expf(-(z > -80.0f ? z : -80.0f)); };
  switch (act) {
    case Activation::kIdentity:
      return dy;
    case Activation::kGelu: {  // Phi(x) + x phi(x)
      constexpr float kInvSqrt2 = 0.70710678118654752440f;
      constexpr float kInvSqrt2Pi = 0.39894228040143267794f;
      return dy * (0.5f * (1.0f + erff(x * kInvSqrt2)) + x * kInvSqrt2Pi * expf(-0.5f * x * x));
    }
    case Activation::kGeluTanh:
    case Activation::kGeluFast: {  // 0.5 x (1 + tanh u), u = a (x + b x^3): s + 2 x s (1 - s) u', s = logistic(2u)
      constexpr float kA = 0.79788456080286535588f;
      constexpr float kB = 0.044715f;
      float const e = exp_neg(2.0f * kA * (x + kB * x * x * x));
      float const s = 1.0f / (1.0f + e);
      return dy * (s + 2.0f * x * s * (e * s) * kA * (1.0f + 3.0f * kB * x * x));
    }
    case Activation::kQuickGelu: {  // x s(1.702 x)
      float const e = exp_neg(1.702f * x);
      float const s = 1.0f / (1.0f + e);
      return dy * s * (1.0f + 1.702f * x * (e * s));
    }
    case Activation::kRelu:  // 0 at x = 0, as PyTorch's threshold_backward
      return x > 0.0f ? dy : 0.0f;
    case Activation::kTanh: {  // 4 s (1 - s), s = logistic(2 x)
      float const e = exp_neg(2.0f * x);
      float const s = 1.0f / (1.0f + e);
      return dy * 4.0f * s * (e * s);
    }
    case Activation::kSigmoid: {
      float const e = exp_neg(x);
      float const s = 1.0f / (1.0f + e);
      return dy * s * (e * s);
    }
    case Activation::kSilu: {  // x s(x)
      float const e = exp_neg(x);
      float const s = 1.0f / (1.0f + e);
      return dy * s * (1.0f + x * (e * s));
    }
    case Activation::kMish: {  // x tanh(softplus(x)); the forward takes softplus(x) = x above 20, whose slope is 1
      float const t = tanhf(x > 20.0f ? x : log1pf(expf(x)));
      float const softplus_slope = x > 20.0f ? 1.0f : 1.0f / (1.0f + expf(-x));
      return dy * (t + x * (1.0f - t * t) * softplus_slope);
    }
  }
  return dy;
}

}  // namespace flashdeberta

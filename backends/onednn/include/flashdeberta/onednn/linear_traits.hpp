// The linear layers oneDNN runs, one traits struct per dtype (float32, bf16, int8), and the one place where the
// run-time dtype of EigenOptions becomes one of them (dispatch_linear_dtype).
//
// Both keep the activations that flow between ops in float32 (LayerNorm, attention, embeddings and softmax are
// unchanged) and change only what a linear layer multiplies:
//   bf16: a (M, K) rounded to bf16 per call, weights bf16 packed once at load, float32 accumulation written
//         to the float32 output as is; bias and activation fused into the matmul where oneDNN has the activation.
//   int8: dynamic quantization. Weights s8 with one symmetric scale per output channel (max |w| / 127, at
//         load); each row of a (a token) s8 with its own scale (max |a| / 127, per call); s8 x s8 -> s32
//         matmul; out = s32 * row scale * channel scale + bias, then the activation, in float32.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <optional>

#include "flashdeberta/core/dtype.hpp"
#include "flashdeberta/core/error.hpp"
#include "flashdeberta/core/model_config.hpp"

namespace flashdeberta::onednn {

template <DType D>
struct LinearTraits;

template <>
struct LinearTraits<DType::kBF16> {
  using Source = std::uint16_t;  // a's bf16 bits, as oneDNN reads them
  static constexpr int kKind = 1;
  static constexpr DType kDType = DType::kBF16;
  static constexpr auto kSource = dnnl::memory::data_type::bf16;
  static constexpr auto kWeights = dnnl::memory::data_type::bf16;
  static constexpr auto kOutput = dnnl::memory::data_type::f32;
  static constexpr bool kQuantized = false;
  static constexpr bool kFusesEpilogue = true;  // bias and activation as matmul bias and eltwise post-op
};

template <>
struct LinearTraits<DType::kI8> {
  using Source = std::int8_t;
  static constexpr int kKind = 2;
  static constexpr DType kDType = DType::kI8;
  static constexpr auto kSource = dnnl::memory::data_type::s8;
  static constexpr auto kWeights = dnnl::memory::data_type::s8;
  // s32, not f32 with output scales: oneDNN 2.6's brgemm matmul takes neither run-time output scales nor a
  // per-row multiplier (it fell back to gemm:jit and ref_int8 when asked), and constant scales would tie a
  // primitive to one weight. The scales are applied by our own pass over the output.
  static constexpr auto kOutput = dnnl::memory::data_type::s32;
  static constexpr bool kQuantized = true;
  static constexpr bool kFusesEpilogue = false;
  static constexpr float kLevels = 127.0f;  // symmetric: [-127, 127], so that -x quantizes to -q
};

// float32 through oneDNN's matmul (its AVX-512 brgemm kernels on weights packed at load): a's rows are read
// where they lie, nothing is converted.
template <>
struct LinearTraits<DType::kF32> {
  using Source = float;
  static constexpr int kKind = 3;
  static constexpr DType kDType = DType::kF32;
  static constexpr auto kSource = dnnl::memory::data_type::f32;
  static constexpr auto kWeights = dnnl::memory::data_type::f32;
  static constexpr auto kOutput = dnnl::memory::data_type::f32;
  static constexpr bool kQuantized = false;
  static constexpr bool kFusesEpilogue = true;
};

template <class T>
concept LinearTraitsType = requires {
  typename T::Source;
  { T::kKind } -> std::convertible_to<int>;
  { T::kQuantized } -> std::convertible_to<bool>;
};
static_assert(LinearTraitsType<LinearTraits<DType::kBF16>> && LinearTraitsType<LinearTraits<DType::kI8>> &&
              LinearTraitsType<LinearTraits<DType::kF32>>);
static_assert(sizeof(LinearTraits<DType::kBF16>::Source) == 2 && sizeof(LinearTraits<DType::kI8>::Source) == 1 &&
                  sizeof(LinearTraits<DType::kF32>::Source) == 4,
              "Source must have the size of the oneDNN data type it stands for");

// Calls f.template operator()<LinearTraits<dtype>>(): the run-time -> compile-time crossing for linear layers.
template <class F>
decltype(auto) dispatch_linear_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kBF16:
      return f.template operator()<LinearTraits<DType::kBF16>>();
    case DType::kI8:
      return f.template operator()<LinearTraits<DType::kI8>>();
    case DType::kF32:
      return f.template operator()<LinearTraits<DType::kF32>>();
    default:
      FLASHDEBERTA_FAIL("oneDNN linear layers run in bf16, int8 (I8) or F32, not " << dtype_name(dtype));
  }
}

// The eltwise post-op that computes `act` as HF does, or nullopt where oneDNN has none (applied by the caller).
inline std::optional<dnnl::algorithm> fused_activation(Activation act) {
  switch (act) {
    case Activation::kGelu:
      return dnnl::algorithm::eltwise_gelu_erf;
    case Activation::kGeluTanh:
      return dnnl::algorithm::eltwise_gelu_tanh;
    case Activation::kTanh:
      return dnnl::algorithm::eltwise_tanh;
    case Activation::kRelu:
      return dnnl::algorithm::eltwise_relu;
    case Activation::kSigmoid:
      return dnnl::algorithm::eltwise_logistic;
    default:
      return std::nullopt;
  }
}

}  // namespace flashdeberta::onednn

// Compile-time variant traits: which code paths of the DeBERTa forward pass exist (spec 4, 5).
// Sizes come from config.json at run time; structure comes from here. Log-bucketed positions are not a
// trait: they change only the slot table built once at load, not the code, so ModelConfig::uses_log_buckets()
// is their one source.
#pragma once

#include <string_view>

#include "flashdeberta/core/model_config.hpp"

namespace flashdeberta {

struct V1 {
  static constexpr std::string_view kName = "DeBERTa v1";
  static constexpr ModelType kModelType = ModelType::kDeberta;
  static constexpr bool kFusedInProj = true;  // interleaved in_proj with q_bias / v_bias
  static constexpr bool kConvLayer = false;
  static constexpr bool kRelativeLayerNorm = false;
};

struct V2 {
  static constexpr std::string_view kName = "DeBERTa v2";
  static constexpr ModelType kModelType = ModelType::kDebertaV2;
  static constexpr bool kFusedInProj = false;  // separate query/key/value projections with biases
  static constexpr bool kConvLayer = true;     // when conv_kernel_size > 0
  static constexpr bool kRelativeLayerNorm = true;
};

// v3 is the v2 code without the conv layer (ELECTRA-style training changes no inference structure).
struct V3 : V2 {
  static constexpr std::string_view kName = "DeBERTa v3";
  static constexpr bool kConvLayer = false;
};

template <class V>
concept Variant = requires {
  { V::kModelType } -> std::convertible_to<ModelType>;
  { V::kFusedInProj } -> std::convertible_to<bool>;
  { V::kConvLayer } -> std::convertible_to<bool>;
};

}  // namespace flashdeberta

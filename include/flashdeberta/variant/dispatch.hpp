// The one run-time -> compile-time switch over variants: config.json decides which DebertaModel to build.
#pragma once

#include "flashdeberta/variant/traits.hpp"

namespace flashdeberta {

// Calls fn.template operator()<V>() with the variant a checkpoint needs: model_type deberta is V1;
// deberta-v2 with the conv layer is V2; otherwise V3, whose inference code is V2's without the conv layer.
template <class Fn>
decltype(auto) dispatch_variant(ModelConfig const& config, Fn&& fn) {
  if (config.model_type == ModelType::kDeberta) return fn.template operator()<V1>();
  if (config.conv_kernel_size > 0) return fn.template operator()<V2>();
  return fn.template operator()<V3>();
}

}  // namespace flashdeberta

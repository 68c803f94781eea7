// The v2 ConvLayer (spec 5.5), applied once after layer 0: LayerNorm(y + act(conv1d(x0))), where x0 is
// the embedding output and y the output of layer 0. Padding never reaches it: batches are packed.
#pragma once

#include "flashdeberta/layers/forward_context.hpp"
#include "flashdeberta/layers/layer_norm.hpp"
#include "flashdeberta/layers/weight_loader.hpp"

namespace flashdeberta {

template <ExecutionPolicy P>
class ConvLayer {
 public:
  ConvLayer(WeightLoader<P> const& w, ModelConfig const& c) : config_(c) {
    std::int64_t const h = c.hidden_size;
    weight_ = w.tensor("encoder.conv.conv.weight", {h, h / c.conv_groups, c.conv_kernel_size});  // (C, C / g, K)
    bias_ = w.vector("encoder.conv.conv.bias", h);
    norm_ = LayerNormParams<P>(w, "encoder.conv.LayerNorm", h, c.layer_norm_eps);
  }

  typename P::Buffer forward(ForwardContext<P> const& ctx, typename P::Buffer const& x0,
                             typename P::Buffer const& y) const {
    P const& p = ctx.policy;
    std::int64_t const t = ctx.tokens();
    std::int64_t const h = config_.hidden_size;
    auto conv = ctx.activation(h);  // (T, H)
    p.conv1d({.x = rows_of(x0, t, h),
              .weight = weight_.data(),
              .bias = bias_.data(),
              .kernel_size = config_.conv_kernel_size,
              .groups = config_.conv_groups,
              .activation = config_.conv_act,
              .out = rows_of(conv, t, h),
              .sequences = ctx.sequences});
    return norm_.apply(ctx, y, &conv);
  }

 private:
  ModelConfig config_;
  typename P::Buffer weight_, bias_;
  LayerNormParams<P> norm_;
};

}  // namespace flashdeberta

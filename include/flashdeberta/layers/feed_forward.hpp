// The feed-forward block of one layer (spec 5.1): LayerNorm(act(a . Wi^T + bi) . Wo^T + bo + a).
#pragma once

#include <string>

#include "flashdeberta/layers/forward_context.hpp"
#include "flashdeberta/layers/layer_norm.hpp"
#include "flashdeberta/layers/linear_weight.hpp"
#include "flashdeberta/layers/weight_loader.hpp"

namespace flashdeberta {

template <ExecutionPolicy P>
class FeedForwardBlock {
 public:
  using Matrix = DeviceMatrix<typename P::Buffer>;

  FeedForwardBlock(WeightLoader<P> const& w, ModelConfig const& c, std::int64_t layer) : config_(c) {
    std::string const prefix = "encoder.layer." + std::to_string(layer) + ".";
    intermediate_ = {w.policy(), w.matrix(prefix + "intermediate.dense.weight", c.intermediate_size, c.hidden_size)};
    intermediate_bias_ = w.vector(prefix + "intermediate.dense.bias", c.intermediate_size);
    output_ = {w.policy(), w.matrix(prefix + "output.dense.weight", c.hidden_size, c.intermediate_size)};
    output_bias_ = w.vector(prefix + "output.dense.bias", c.hidden_size);
    norm_ = LayerNormParams<P>(w, prefix + "output.LayerNorm", c.hidden_size, c.layer_norm_eps);
  }

  typename P::Buffer forward(ForwardContext<P> const& ctx, typename P::Buffer const& a) const {
    P const& p = ctx.policy;
    std::int64_t const t = ctx.tokens();
    std::int64_t const h = config_.hidden_size;
    std::int64_t const i = config_.intermediate_size;
    auto inner = ctx.activation(i);  // (T, I)
    intermediate_.gemm(p, {.a = rows_of(a, t, h),
                           .bias = intermediate_bias_.data(),
                           .out = rows_of(inner, t, i),
                           .activation = config_.hidden_act});
    auto projected = ctx.activation(h);  // (T, H)
    output_.gemm(p, {.a = rows_of(inner, t, i), .bias = output_bias_.data(), .out = rows_of(projected, t, h)});
    return norm_.apply(ctx, projected, &a);
  }

 private:
  ModelConfig config_;
  LinearWeight<P> intermediate_, output_;
  typename P::Buffer intermediate_bias_, output_bias_;
  LayerNormParams<P> norm_;
};

}  // namespace flashdeberta

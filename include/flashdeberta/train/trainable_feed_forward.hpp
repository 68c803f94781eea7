// The feed-forward block (spec 5.1) and v2's conv layer (spec 5.5) for training: forward with what the backward
// needs, and the backward (layers/feed_forward.hpp and layers/conv_layer.hpp are the inference versions).
#pragma once

#include <string>

#include "flashdeberta/core/model_config.hpp"
#include "flashdeberta/train/row_subset.hpp"
#include "flashdeberta/train/train_context.hpp"

namespace flashdeberta {

// LayerNorm(dropout(act(a . Wi^T + bi) . Wo^T + bo) + a).
template <TrainingPolicy P>
class TrainableFeedForward {
 public:
  using Buffer = typename P::Buffer;

  // T rows, or the m rows of a row subset (row_subset.hpp) in the last layer.
  struct Saved {
    MatrixRef input;   // (T, H) the attention block's output, owned by it
    Buffer inner_pre;  // (T, I) before the activation
    Buffer inner;      // (T, I)
    Buffer projected;  // (T, H) after dropout
    Buffer out;        // (T, H)
    DropoutSite dropout;
  };

  TrainableFeedForward(ParameterSet<P>& s, ParameterSource const& src, ModelConfig const& c, std::int64_t layer)
      : config_(c) {
    std::string const base = "encoder.layer." + std::to_string(layer) + ".";
    intermediate_ = add_linear(s, src, base + "intermediate.dense", c.intermediate_size, c.hidden_size);
    output_ = add_linear(s, src, base + "output.dense", c.hidden_size, c.intermediate_size);
    norm_ = TrainableLayerNorm::add(s, src, base + "output.LayerNorm", c.hidden_size, c.layer_norm_eps);
  }

  // a (rows, H): the T rows, or the subset's m rows of the last layer.
  void forward(TrainContext<P>& ctx, MatrixRef const& a, Saved& saved, RowSubset<P> const* subset = nullptr) const {
    P const& p = ctx.policy();
    ParameterSet<P> const& s = ctx.parameters;
    std::int64_t const t = a.rows;
    std::int64_t const h = config_.hidden_size;
    std::int64_t const i = config_.intermediate_size;
    saved.input = a;
    saved.inner_pre = ctx.allocate(t, i);
    intermediate_.forward(s, a, rows_of(saved.inner_pre, t, i));
    saved.inner = ctx.allocate(t, i);
    p.activation(
        {.x = rows_of(saved.inner_pre, t, i), .out = rows_of(saved.inner, t, i), .activation = config_.hidden_act});
    saved.projected = ctx.allocate(t, h);
    MatrixRef const projected = rows_of(saved.projected, t, h);
    output_.forward(s, rows_of(saved.inner, t, i), projected);
    saved.dropout = DropoutSite::reserve(ctx, ctx.dropout.hidden, ctx.tokens() * h);
    drop_rows(p, saved.dropout, subset, projected, projected);
    saved.out = ctx.allocate(t, h);
    norm_.forward(s, projected, a, rows_of(saved.out, t, h));
  }

  // dy (rows, H) -> da (rows, H) written, rows as in the forward.
  void backward(TrainContext<P>& ctx, Saved& saved, MatrixRef const& dy, MatrixRef const& da,
                RowSubset<P> const* subset = nullptr) const {
    P const& p = ctx.policy();
    ParameterSet<P> const& s = ctx.parameters;
    std::int64_t const t = saved.input.rows;
    std::int64_t const h = config_.hidden_size;
    std::int64_t const i = config_.intermediate_size;
    norm_.backward(s, rows_of(saved.projected, t, h), saved.input, dy, da);
    Buffer dprojected = ctx.allocate(t, h);
    MatrixRef const dproj = rows_of(dprojected, t, h);
    if (saved.dropout.active()) {
      drop_rows(p, saved.dropout, subset, da, dproj);
    } else {
      p.activation({.x = da, .out = dproj, .activation = Activation::kIdentity});
    }
    Buffer dinner = ctx.allocate(t, i);
    MatrixRef const dinner_ref = rows_of(dinner, t, i);
    output_.backward(s, rows_of(saved.inner, t, i), dproj, dinner_ref);
    p.activation(
        {.x = rows_of(saved.inner_pre, t, i), .dy = dinner_ref, .out = dinner_ref, .activation = config_.hidden_act});
    intermediate_.backward(s, saved.input, dinner_ref, da, /*accumulate_dx=*/true);
  }

 private:
  ModelConfig config_;
  TrainableLinear intermediate_, output_;
  TrainableLayerNorm norm_;
};

// v2's conv layer after layer 0: LayerNorm(y + act(dropout(conv1d(x0) + b))), x0 the embedding output, y layer 0's.
template <TrainingPolicy P>
class TrainableConvLayer {
 public:
  using Buffer = typename P::Buffer;

  struct Saved {
    MatrixRef x0, y;   // (T, H) each, owned by the encoder
    Buffer pre;        // (T, H) the convolution plus bias, after dropout
    Buffer activated;  // (T, H)
    Buffer out;        // (T, H)
    DropoutSite dropout;
  };

  TrainableConvLayer(ParameterSet<P>& s, ParameterSource const& src, ModelConfig const& c) : config_(c) {
    std::int64_t const h = c.hidden_size;
    weight_ = s.add({"encoder.conv.conv.weight", {h, h / c.conv_groups, c.conv_kernel_size}}, src);
    bias_ = s.add({"encoder.conv.conv.bias", {h}, ParameterInit::kZeros}, src);
    norm_ = TrainableLayerNorm::add(s, src, "encoder.conv.LayerNorm", h, c.layer_norm_eps);
  }

  void forward(TrainContext<P>& ctx, MatrixRef const& x0, MatrixRef const& y, Saved& saved) const {
    P const& p = ctx.policy();
    ParameterSet<P> const& s = ctx.parameters;
    std::int64_t const t = ctx.tokens();
    std::int64_t const h = config_.hidden_size;
    saved.x0 = x0;
    saved.y = y;
    saved.pre = ctx.activation(h);
    MatrixRef const pre = rows_of(saved.pre, t, h);
    p.conv1d({.x = x0,
              .weight = s.value_data(weight_),
              .bias = s.value_data(bias_),
              .kernel_size = config_.conv_kernel_size,
              .groups = config_.conv_groups,
              .activation = Activation::kIdentity,
              .out = pre,
              .sequences = ctx.forward.sequences});
    saved.dropout = DropoutSite::reserve(ctx, ctx.dropout.hidden, t * h);
    if (saved.dropout.active()) saved.dropout.apply(p, pre, pre);
    saved.activated = ctx.activation(h);
    p.activation({.x = pre, .out = rows_of(saved.activated, t, h), .activation = config_.conv_act});
    saved.out = ctx.activation(h);
    norm_.forward(s, y, rows_of(saved.activated, t, h), rows_of(saved.out, t, h));
  }

  // dout (T, H) -> dy (T, H) (layer 0's output) and dx0 (T, H) (the embedding output's share), both written.
  void backward(TrainContext<P>& ctx, Saved& saved, MatrixRef const& dout, MatrixRef const& dy,
                MatrixRef const& dx0) const {
    P const& p = ctx.policy();
    ParameterSet<P> const& s = ctx.parameters;
    std::int64_t const t = ctx.tokens();
    std::int64_t const h = config_.hidden_size;
    norm_.backward(s, saved.y, rows_of(saved.activated, t, h), dout, dy);
    MatrixRef const dpre = rows_of(saved.activated, t, h);  // reused: the activation's output is not needed again
    p.activation({.x = rows_of(saved.pre, t, h), .dy = dy, .out = dpre, .activation = config_.conv_act});
    if (saved.dropout.active()) saved.dropout.apply(p, dpre, dpre);
    p.conv1d_backward({.x = saved.x0,
                       .weight = s.value_data(weight_),
                       .kernel_size = config_.conv_kernel_size,
                       .groups = config_.conv_groups,
                       .dpre = dpre,
                       .dx = dx0,
                       .dweight = s.grad_data(weight_),
                       .dbias = s.grad_data(bias_),
                       .sequences = ctx.forward.sequences});
  }

 private:
  ModelConfig config_;
  std::size_t weight_ = TrainableLinear::kNone, bias_ = TrainableLinear::kNone;
  TrainableLayerNorm norm_;
};

}  // namespace flashdeberta

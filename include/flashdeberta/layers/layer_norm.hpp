// A LayerNorm's parameters in policy memory, applied as LayerNorm(x + residual) (spec 5.2).
#pragma once

#include <string>

#include "flashdeberta/layers/forward_context.hpp"
#include "flashdeberta/layers/weight_loader.hpp"

namespace flashdeberta {

template <ExecutionPolicy P>
class LayerNormParams {
 public:
  using Buffer = typename P::Buffer;

  LayerNormParams() = default;
  // Reads `<prefix>.weight` and `<prefix>.bias`, each (size).
  LayerNormParams(WeightLoader<P> const& w, std::string const& prefix, std::int64_t size, float eps)
      : gamma_(w.vector(prefix + ".weight", size)), beta_(w.vector(prefix + ".bias", size)), size_(size), eps_(eps) {}

  // out (rows, size) = LayerNorm(x + residual); residual may be empty.
  void apply(P const& p, MatrixRef const& x, MatrixRef const& residual, MatrixRef const& out) const {
    p.layer_norm({.x = x, .residual = residual, .gamma = gamma_.data(), .beta = beta_.data(), .eps = eps_, .out = out});
  }

  // A fresh (T, size) activation holding LayerNorm(x + residual) over the batch's tokens.
  Buffer apply(ForwardContext<P> const& ctx, Buffer const& x, Buffer const* residual = nullptr) const {
    std::int64_t const t = ctx.tokens();
    Buffer out = ctx.activation(size_);
    apply(ctx.policy, rows_of(x, t, size_), residual != nullptr ? rows_of(*residual, t, size_) : MatrixRef{},
          rows_of(out, t, size_));
    return out;
  }

 private:
  Buffer gamma_, beta_;
  std::int64_t size_ = 0;
  float eps_ = 1e-7f;
};

}  // namespace flashdeberta

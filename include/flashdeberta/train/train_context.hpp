// Per-step state of a training forward and backward: the batch's forward context, whether dropout is active,
// and the dropout generator's counter; plus the two building blocks every trainable layer uses, a Linear and a
// LayerNorm over parameters of a ParameterSet.
#pragma once

#include <cstdint>

#include "flashdeberta/layers/forward_context.hpp"
#include "flashdeberta/train/parameter_set.hpp"

namespace flashdeberta {

// Where DeBERTa drops out (docs/training.md): probabilities from config.json, 0 in evaluation.
struct DropoutRates {
  float hidden = 0.0f;      // hidden_dropout_prob: embeddings, sub-layer outputs, relative embeddings, conv
  float attention = 0.0f;   // attention_probs_dropout_prob
  float pooler = 0.0f;      // pooler_dropout: the pooled token before the pooler's dense layer
  float classifier = 0.0f;  // cls_dropout, else hidden_dropout_prob: a classifier's input
};

template <TrainingPolicy P>
struct TrainContext {
  ForwardContext<P> const& forward;
  ParameterSet<P>& parameters;
  DropoutRates dropout;    // all zero when not training
  std::uint64_t seed = 0;  // this step's dropout seed
  std::uint64_t next = 0;  // the generator's next free counter

  P const& policy() const { return forward.policy; }
  std::int64_t tokens() const { return forward.tokens(); }
  // A fresh (T, cols) float32 activation: training keeps its activations in float32 whatever the policy's compute
  // dtype (a 16-bit one rounds only the products' operands: CudaPolicy::rounds_product).
  typename P::Buffer activation(std::int64_t cols) const { return allocate(tokens(), cols); }
  typename P::Buffer allocate(std::int64_t rows, std::int64_t cols) const {
    return policy().allocate(rows * cols, DType::kF32);
  }
};

// One dropout site of one forward: its rate and the counters it drew, so that the backward draws the same mask.
struct DropoutSite {
  float probability = 0.0f;
  std::uint64_t seed = 0;
  std::uint64_t offset = 0;

  bool active() const { return probability > 0.0f; }

  template <TrainingPolicy P>
  static DropoutSite reserve(TrainContext<P>& ctx, float probability, std::int64_t elements) {
    DropoutSite site{probability, ctx.seed, ctx.next};
    if (probability > 0.0f) ctx.next += static_cast<std::uint64_t>(elements);
    return site;
  }

  // out = dropout(x); the backward applies the same to the gradient.
  template <TrainingPolicy P>
  void apply(P const& p, MatrixRef const& x, MatrixRef const& out) const {
    p.dropout({.x = x, .out = out, .probability = probability, .seed = seed, .offset = offset});
  }
};

// out (M, N) = x (M, K) . W^T + b over parameters of the set; `count` consecutive parameters form W (and, when
// there is a bias, `count` consecutive ones form b): v2's query, key and value projections as one (3A, H) GEMM.
struct TrainableLinear {
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::size_t weight = kNone;
  std::size_t bias = kNone;
  std::int64_t out_features = 0;
  std::int64_t in_features = 0;
  std::size_t count = 1;

  template <TrainingPolicy P>
  MatrixRef weight_value(ParameterSet<P> const& s) const {
    return s.value(weight, out_features, in_features, count);
  }

  template <TrainingPolicy P>
  void forward(ParameterSet<P> const& s, MatrixRef const& x, MatrixRef const& out) const {
    float const* b = bias == kNone ? nullptr : s.value(bias, 1, out_features, count).template as<float>();
    s.policy().gemm({.a = x, .b = weight_value(s), .bias = b, .out = out});
  }

  // dx (M, K) = dy . W (added to dx with accumulate_dx; skipped when dx is empty); the gradients of W and b add up.
  template <TrainingPolicy P>
  void backward(ParameterSet<P> const& s, MatrixRef const& x, MatrixRef const& dy, MatrixRef const& dx,
                bool accumulate_dx = false) const {
    s.policy().linear_backward(
        {.x = x,
         .w = weight_value(s),
         .dy = dy,
         .dx = dx,
         .dw = s.grad(weight, out_features, in_features, count),
         .db = bias == kNone ? nullptr : s.grad(bias, 1, out_features, count).template as<float>(),
         .accumulate_dx = accumulate_dx});
  }
};

// out = LayerNorm(x + residual) * gamma + beta; gamma and beta are consecutive parameters of one block.
struct TrainableLayerNorm {
  std::size_t gamma = TrainableLinear::kNone;  // beta is gamma + 1
  std::int64_t size = 0;
  float eps = 1e-7f;

  template <TrainingPolicy P>
  void forward(ParameterSet<P> const& s, MatrixRef const& x, MatrixRef const& residual, MatrixRef const& out) const {
    s.policy().layer_norm({.x = x,
                           .residual = residual,
                           .gamma = s.value_data(gamma),
                           .beta = s.value_data(gamma + 1),
                           .eps = eps,
                           .out = out});
  }

  // dx = d/d(x + residual), written or added.
  template <TrainingPolicy P>
  void backward(ParameterSet<P> const& s, MatrixRef const& x, MatrixRef const& residual, MatrixRef const& dy,
                MatrixRef const& dx, bool accumulate_dx = false) const {
    s.policy().layer_norm_backward({.x = x,
                                    .residual = residual,
                                    .gamma = s.value_data(gamma),
                                    .eps = eps,
                                    .dy = dy,
                                    .dx = dx,
                                    .dgamma = s.grad_data(gamma),
                                    .dbeta = s.grad_data(gamma + 1),
                                    .accumulate_dx = accumulate_dx});
  }

  // Adds `<prefix>.weight` and `<prefix>.bias` to the set as one block.
  template <TrainingPolicy P>
  static TrainableLayerNorm add(ParameterSet<P>& s, ParameterSource const& src, std::string const& name,
                                std::int64_t size, float eps) {
    std::size_t const first = s.add_block(
        {{name + ".weight", {size}, ParameterInit::kOnes}, {name + ".bias", {size}, ParameterInit::kZeros}}, src);
    return {first, size, eps};
  }
};

// Adds `<name>.weight` (out, in) and, with a bias, `<name>.bias` (out) as a TrainableLinear.
template <TrainingPolicy P>
TrainableLinear add_linear(ParameterSet<P>& s, ParameterSource const& src, std::string const& name, std::int64_t out,
                           std::int64_t in, bool with_bias = true) {
  TrainableLinear linear;
  linear.out_features = out;
  linear.in_features = in;
  linear.weight = s.add({name + ".weight", {out, in}, ParameterInit::kNormal}, src);
  if (with_bias) linear.bias = s.add({name + ".bias", {out}, ParameterInit::kZeros}, src);
  return linear;
}

// A (rows, cols) view of a buffer's first rows * cols elements.
template <class Buffer>
MatrixRef view(Buffer const& buffer, std::int64_t rows, std::int64_t cols) {
  return rows_of(buffer, rows, cols);
}

}  // namespace flashdeberta

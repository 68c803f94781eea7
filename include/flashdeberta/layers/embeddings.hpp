// Embeddings (spec 2): word + absolute position + token type, optional projection E -> H, LayerNorm.
#pragma once

#include "flashdeberta/layers/forward_context.hpp"
#include "flashdeberta/layers/layer_norm.hpp"
#include "flashdeberta/layers/weight_loader.hpp"

namespace flashdeberta {

template <ExecutionPolicy P>
class Embeddings {
 public:
  using Matrix = DeviceMatrix<typename P::Buffer>;

  Embeddings(WeightLoader<P> const& w, ModelConfig const& c) : config_(c) {
    std::int64_t const e = c.embedding_size;
    // As stored where the policy reads 16-bit rows (WeightLoader::table): a float16 checkpoint's largest weight.
    word_ = w.table("embeddings.word_embeddings.weight", c.vocab_size, e);
    // HF ignores a stored position table when position_biased_input is false (spec 2, 7.4).
    if (c.position_biased_input)
      position_ = w.matrix("embeddings.position_embeddings.weight", c.max_position_embeddings, e);
    if (c.type_vocab_size > 0) token_type_ = w.matrix("embeddings.token_type_embeddings.weight", c.type_vocab_size, e);
    if (e != c.hidden_size) projection_ = w.matrix("embeddings.embed_proj.weight", c.hidden_size, e);
    norm_ = LayerNormParams<P>(w, "embeddings.LayerNorm", c.hidden_size, c.layer_norm_eps);
  }

  // (T, H) embedding output.
  typename P::Buffer forward(ForwardContext<P> const& ctx) const {
    P const& p = ctx.policy;
    std::int64_t const t = ctx.tokens();
    std::int64_t const e = config_.embedding_size;
    std::int64_t const h = config_.hidden_size;
    auto summed = ctx.activation(e);  // (T, E)
    EmbeddingArgs args;
    args.ids = ctx.input_ids;
    args.positions = ctx.sequences.positions;
    args.token_types = ctx.token_type_ids;
    args.word = word_.ref();
    if (config_.position_biased_input) args.position = position_.ref();
    if (config_.type_vocab_size > 0) args.token_type = token_type_.ref();
    args.out = rows_of(summed, t, e);
    p.embedding(args);
    auto normalized_input = std::move(summed);
    if (e != h) {
      auto projected = ctx.activation(h);  // (T, H)
      p.gemm({.a = rows_of(normalized_input, t, e), .b = projection_.ref(), .out = rows_of(projected, t, h)});
      normalized_input = std::move(projected);
    }
    return norm_.apply(ctx, normalized_input);
  }

  Matrix const& word_embeddings() const { return word_; }

 private:
  ModelConfig config_;
  Matrix word_, position_, token_type_, projection_;
  LayerNormParams<P> norm_;
};

}  // namespace flashdeberta

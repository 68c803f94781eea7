// The embeddings' forward with what their backward needs, and that backward (spec 2; layers/embeddings.hpp is the
// inference version): word + absolute position + token type, the E -> H projection, LayerNorm, dropout.
#pragma once

#include <string>

#include "flashdeberta/core/model_config.hpp"
#include "flashdeberta/train/train_context.hpp"

namespace flashdeberta {

template <TrainingPolicy P>
class TrainableEmbeddings {
 public:
  using Buffer = typename P::Buffer;

  // What the forward keeps for the backward.
  struct Saved {
    Buffer summed;     // (T, E) the tables' sum
    Buffer projected;  // (T, H) after embed_proj; empty when E = H
    DropoutSite dropout;
  };

  TrainableEmbeddings() = default;
  TrainableEmbeddings(ParameterSet<P>& s, ParameterSource const& src, ModelConfig const& c) : config_(c) {
    std::int64_t const e = c.embedding_size;
    word_ = s.add({"embeddings.word_embeddings.weight", {c.vocab_size, e}}, src);
    if (c.position_biased_input)
      position_ = s.add({"embeddings.position_embeddings.weight", {c.max_position_embeddings, e}}, src);
    if (c.type_vocab_size > 0)
      token_type_ = s.add({"embeddings.token_type_embeddings.weight", {c.type_vocab_size, e}}, src);
    if (e != c.hidden_size)
      projection_ = add_linear(s, src, "embeddings.embed_proj", c.hidden_size, e, /*with_bias=*/false);
    norm_ = TrainableLayerNorm::add(s, src, "embeddings.LayerNorm", c.hidden_size, c.layer_norm_eps);
  }

  std::size_t word_embeddings() const { return word_; }

  // out (T, H): the embedding output.
  Buffer forward(TrainContext<P>& ctx, Saved& saved) const {
    P const& p = ctx.policy();
    ParameterSet<P> const& s = ctx.parameters;
    std::int64_t const t = ctx.tokens();
    std::int64_t const e = config_.embedding_size;
    std::int64_t const h = config_.hidden_size;
    saved.summed = ctx.activation(e);
    EmbeddingArgs args;
    args.ids = ctx.forward.input_ids;
    args.positions = ctx.forward.sequences.positions;
    args.token_types = ctx.forward.token_type_ids;
    args.word = s.value(word_, config_.vocab_size, e);
    if (has(position_)) args.position = s.value(position_, config_.max_position_embeddings, e);
    if (has(token_type_)) args.token_type = s.value(token_type_, config_.type_vocab_size, e);
    args.out = rows_of(saved.summed, t, e);
    p.embedding(args);
    MatrixRef normalized_input = rows_of(saved.summed, t, e);
    if (e != h) {
      saved.projected = ctx.activation(h);
      projection_.forward(s, normalized_input, rows_of(saved.projected, t, h));
      normalized_input = rows_of(saved.projected, t, h);
    }
    Buffer out = ctx.activation(h);
    norm_.forward(s, normalized_input, MatrixRef{}, rows_of(out, t, h));
    saved.dropout = DropoutSite::reserve(ctx, ctx.dropout.hidden, t * h);
    if (saved.dropout.active()) saved.dropout.apply(p, rows_of(out, t, h), rows_of(out, t, h));
    return out;
  }

  // dout (T, H) is consumed (overwritten).
  void backward(TrainContext<P>& ctx, Saved const& saved, Buffer& dout) const {
    P const& p = ctx.policy();
    ParameterSet<P> const& s = ctx.parameters;
    std::int64_t const t = ctx.tokens();
    std::int64_t const e = config_.embedding_size;
    std::int64_t const h = config_.hidden_size;
    MatrixRef const d = rows_of(dout, t, h);
    if (saved.dropout.active()) saved.dropout.apply(p, d, d);
    Buffer dnorm = ctx.activation(h);
    MatrixRef const normalized_input = e != h ? rows_of(saved.projected, t, h) : rows_of(saved.summed, t, e);
    norm_.backward(s, normalized_input, MatrixRef{}, d, rows_of(dnorm, t, h));
    Buffer dsummed;
    MatrixRef dtables = rows_of(dnorm, t, h);
    if (e != h) {
      dsummed = ctx.activation(e);
      projection_.backward(s, rows_of(saved.summed, t, e), rows_of(dnorm, t, h), rows_of(dsummed, t, e));
      dtables = rows_of(dsummed, t, e);
    }
    EmbeddingBackwardArgs args;
    args.ids = ctx.forward.input_ids;
    args.positions = ctx.forward.sequences.positions;
    args.token_types = ctx.forward.token_type_ids;
    args.dout = dtables;
    args.dword = s.grad(word_, config_.vocab_size, e);
    if (has(position_)) args.dposition = s.grad(position_, config_.max_position_embeddings, e);
    if (has(token_type_)) args.dtoken_type = s.grad(token_type_, config_.type_vocab_size, e);
    p.embedding_backward(args);
  }

 private:
  static bool has(std::size_t index) { return index != TrainableLinear::kNone; }

  ModelConfig config_;
  std::size_t word_ = TrainableLinear::kNone;
  std::size_t position_ = TrainableLinear::kNone;
  std::size_t token_type_ = TrainableLinear::kNone;
  TrainableLinear projection_;
  TrainableLayerNorm norm_;
};

}  // namespace flashdeberta

// TrainableDeberta<Variant, Policy>: the DeBERTa backbone as trainable parameters (float32, HF names) with a forward
// that keeps what the backward needs (a Tape) and the backward that consumes it. Heads (trainable_heads.hpp) sit on
// top; DebertaModel remains the inference path and loads what training saves.
#pragma once

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "flashdeberta/math/relative_position.hpp"
#include "flashdeberta/train/row_subset.hpp"
#include "flashdeberta/train/trainable_attention.hpp"
#include "flashdeberta/train/trainable_embeddings.hpp"
#include "flashdeberta/train/trainable_feed_forward.hpp"

namespace flashdeberta {

template <Variant V, TrainingPolicy P>
class TrainableDeberta {
 public:
  using Buffer = typename P::Buffer;

  struct LayerTape {
    typename TrainableAttention<V, P>::Saved attention;
    typename TrainableFeedForward<P>::Saved feed_forward;
    MatrixRef input;                    // (T, H) the layer's input
    std::uint64_t dropout_counter = 0;  // the generator's counter when the layer began: a recompute draws the same
    Buffer output;                      // (T, H) with activation checkpointing, the only buffer the layer keeps
  };
  // Everything one forward keeps for its backward: per layer the inputs of each GEMM, the LayerNorms' inputs and the
  // attention's output and row log-sum-exp; never an (L, L) tensor on the flash path.
  struct Tape {
    typename TrainableEmbeddings<P>::Saved embeddings;
    Buffer embedded;  // (T, H)
    Buffer relative;  // (2k, H) the relative table after its LayerNorm; empty when the variant has none
    std::vector<LayerTape> layers;
    std::optional<typename TrainableConvLayer<P>::Saved> conv;
    RowSubset<P> const* subset = nullptr;  // the rows the last layer computed, owned by the caller; null: all
  };

  // Reads every backbone tensor from `checkpoint` under `prefix` ("deberta." in a head model's file).
  TrainableDeberta(ParameterSet<P>& s, ParameterSource const& src, ModelConfig config)
      : config_(std::move(config)), embeddings_(s, src, config_) {
    FLASHDEBERTA_REQUIRE(!config_.talking_head, "training: talking_head=true is not supported");
    std::int64_t const h = config_.hidden_size;
    if (config_.has_position_terms()) {
      relative_rows_ = 2 * config_.relative_span();
      relative_table_ = s.add({"encoder.rel_embeddings.weight", {relative_rows_, h}}, src);
      if (V::kRelativeLayerNorm && config_.norm_rel_ebd_layer_norm)
        relative_norm_ = TrainableLayerNorm::add(s, src, "encoder.LayerNorm", h, config_.layer_norm_eps);
      slots_ = make_relative_slot_table(config_);
      slot_buffer_ = s.policy().upload_indices(std::span<std::int32_t const>(slots_.slots));
    }
    for (std::int64_t l = 0; l < config_.num_layers; ++l) {
      attention_.emplace_back(s, src, config_, l);
      feed_forward_.emplace_back(s, src, config_, l);
    }
    if constexpr (V::kConvLayer) {
      if (config_.conv_kernel_size > 0) conv_.emplace(s, src, config_);
    }
  }

  ModelConfig const& config() const { return config_; }
  std::size_t word_embeddings() const { return embeddings_.word_embeddings(); }

  // The last hidden state (T, H), a view into the tape. With `checkpointing` each layer keeps only its output and
  // the backward runs the layer's forward again (one layer's tape alive at a time). With `subset` (row_subset.hpp;
  // alive until the backward ends), the last layer computes only its rows: the result is (m, H), unless the subset
  // cannot apply (see uses_subset), then (T, H); the tape records which.
  MatrixRef forward(TrainContext<P>& ctx, Tape& tape, bool checkpointing = false,
                    RowSubset<P> const* subset = nullptr) const {
    std::int64_t const t = ctx.tokens();
    std::int64_t const h = config_.hidden_size;
    tape.subset = uses_subset(subset, t) ? subset : nullptr;
    tape.embedded = embeddings_.forward(ctx, tape.embeddings);
    RelativeInputs const rel = relative_inputs(ctx, tape, /*forward=*/true, Buffer{});
    tape.layers.resize(attention_.size());
    MatrixRef x = rows_of(tape.embedded, t, h);
    for (std::size_t l = 0; l < attention_.size(); ++l) {
      LayerTape& saved = tape.layers[l];
      saved.input = x;
      saved.dropout_counter = ctx.next;
      RowSubset<P> const* const rows = last_layer_rows(tape, l);
      layer_forward(ctx, rel, l, saved, rows);
      x = rows_of(saved.feed_forward.out, rows != nullptr ? rows->size() : t, h);
      if (l == 0 && conv_) {
        tape.conv.emplace();
        conv_->forward(ctx, rows_of(tape.embedded, t, h), x, *tape.conv);
      }
      if (checkpointing) {  // buffers keep their addresses when moved: the views of x stay valid
        saved.output = std::move(saved.feed_forward.out);
        saved.attention = {};
        saved.feed_forward = {};
      }
      if (l == 0 && conv_) x = rows_of(tape.conv->out, t, h);
    }
    return x;
  }

  // dhidden (T, H), or (m, H) where the forward's tape took a subset: the gradient of the last hidden state; consumed.
  // Parameter gradients add up in the set.
  void backward(TrainContext<P>& ctx, Tape& tape, Buffer dhidden, bool checkpointing = false) const {
    P const& p = ctx.policy();
    ParameterSet<P> const& s = ctx.parameters;
    std::int64_t const t = ctx.tokens();
    std::int64_t const h = config_.hidden_size;
    Buffer drelative;
    if (config_.has_position_terms()) {
      drelative = ctx.allocate(relative_rows_, h);
      p.fill(rows_of(drelative, relative_rows_, h), 0.0f);
    }
    RelativeInputs const rel = relative_inputs(ctx, tape, /*forward=*/false, drelative);
    Buffer d = std::move(dhidden);
    Buffer dconv_input;
    for (std::size_t l = attention_.size(); l-- > 0;) {
      LayerTape& saved = tape.layers[l];
      RowSubset<P> const* const rows = last_layer_rows(tape, l);
      std::int64_t const m = rows != nullptr ? rows->size() : t;
      if (checkpointing) {
        std::uint64_t const next = ctx.next;
        ctx.next = saved.dropout_counter;
        layer_forward(ctx, rel, l, saved, rows);
        ctx.next = next;
      }
      if (l == 0 && conv_) {
        Buffer dlayer = ctx.activation(h);
        dconv_input = ctx.activation(h);
        conv_->backward(ctx, *tape.conv, rows_of(d, t, h), rows_of(dlayer, t, h), rows_of(dconv_input, t, h));
        d = std::move(dlayer);
      }
      Buffer dattention = ctx.allocate(m, h);
      feed_forward_[l].backward(ctx, saved.feed_forward, rows_of(d, m, h), rows_of(dattention, m, h), rows);
      Buffer dinput = ctx.activation(h);
      attention_[l].backward(ctx, rel, saved.attention, rows_of(dattention, m, h), rows_of(dinput, t, h), rows);
      d = std::move(dinput);
      saved = LayerTape{};  // what this layer kept is spent
    }
    if (conv_)
      p.activation({.x = rows_of(dconv_input, t, h),
                    .out = rows_of(d, t, h),
                    .activation = Activation::kIdentity,
                    .accumulate = true});
    embeddings_.backward(ctx, tape.embeddings, d);
    if (config_.has_position_terms()) {
      MatrixRef const table = s.value(relative_table_, relative_rows_, h);
      MatrixRef const dtable = s.grad(relative_table_, relative_rows_, h);
      if (relative_norm_.gamma != TrainableLinear::kNone) {
        Buffer dnormalized = ctx.allocate(relative_rows_, h);
        relative_norm_.backward(s, table, MatrixRef{}, rows_of(drelative, relative_rows_, h),
                                rows_of(dnormalized, relative_rows_, h));
        p.activation({.x = rows_of(dnormalized, relative_rows_, h),
                      .out = dtable,
                      .activation = Activation::kIdentity,
                      .accumulate = true});
      } else {
        p.activation({.x = rows_of(drelative, relative_rows_, h),
                      .out = dtable,
                      .activation = Activation::kIdentity,
                      .accumulate = true});
      }
    }
  }

 private:
  // A subset applies to the last layer unless v2's conv layer, which mixes neighbouring tokens, follows it (a
  // one-layer encoder), and only when it leaves out some rows and keeps some.
  bool uses_subset(RowSubset<P> const* subset, std::int64_t tokens) const {
    bool const conv_follows_last = conv_.has_value() && attention_.size() == 1;
    return subset != nullptr && !conv_follows_last && subset->size() > 0 && subset->size() < tokens;
  }
  RowSubset<P> const* last_layer_rows(Tape const& tape, std::size_t l) const {
    return l + 1 == attention_.size() ? tape.subset : nullptr;
  }

  void layer_forward(TrainContext<P>& ctx, RelativeInputs const& rel, std::size_t l, LayerTape& saved,
                     RowSubset<P> const* rows) const {
    attention_[l].forward(ctx, saved.input, rel, saved.attention, rows);
    std::int64_t const m = rows != nullptr ? rows->size() : ctx.tokens();
    feed_forward_[l].forward(ctx, rows_of(saved.attention.out, m, config_.hidden_size), saved.feed_forward, rows);
  }

  // The relative table every layer projects (normalized in the forward, once per step) and its gradient.
  RelativeInputs relative_inputs(TrainContext<P>& ctx, Tape& tape, bool forward, Buffer const& dtable) const {
    RelativeInputs rel;
    if (!config_.has_position_terms()) return rel;
    ParameterSet<P> const& s = ctx.parameters;
    std::int64_t const h = config_.hidden_size;
    rel.table = s.value(relative_table_, relative_rows_, h);
    if (relative_norm_.gamma != TrainableLinear::kNone) {
      if (forward) {
        tape.relative = ctx.allocate(relative_rows_, h);
        relative_norm_.forward(s, rel.table, MatrixRef{}, rows_of(tape.relative, relative_rows_, h));
      }
      rel.table = rows_of(tape.relative, relative_rows_, h);
    }
    if (dtable.size() > 0) rel.dtable = rows_of(dtable, relative_rows_, h);
    rel.relative_index = static_cast<std::int32_t const*>(slot_buffer_.data());
    rel.saturation = slots_.saturation;
    SequenceLayout const& sequences = ctx.forward.sequences;
    RelativeSlotTable::Rows const reached =
        sequences.contiguous_positions ? slots_.reached_rows(std::max<std::int64_t>(sequences.max_seqlen - 1, 0))
                                       : RelativeSlotTable::Rows{0, relative_rows_};
    rel.first_row = reached.first;
    rel.row_count = reached.count;
    return rel;
  }

  ModelConfig config_;
  TrainableEmbeddings<P> embeddings_;
  std::int64_t relative_rows_ = 0;
  std::size_t relative_table_ = TrainableLinear::kNone;
  TrainableLayerNorm relative_norm_;
  RelativeSlotTable slots_;
  Buffer slot_buffer_;
  std::vector<TrainableAttention<V, P>> attention_;
  std::vector<TrainableFeedForward<P>> feed_forward_;
  std::optional<TrainableConvLayer<P>> conv_;
};

}  // namespace flashdeberta

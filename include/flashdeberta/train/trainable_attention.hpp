// The attention block of one layer for training (layers/attention.hpp is the inference version): the q/k/v
// projection as one GEMM, the position projections of this layer's relative table (recomputed every step, since the
// weights move), disentangled attention (with dropout on its probabilities), the output projection, dropout and the
// post-LayerNorm, with their backward.
#pragma once

#include <string>

#include "flashdeberta/core/model_config.hpp"
#include "flashdeberta/train/row_subset.hpp"
#include "flashdeberta/train/train_context.hpp"
#include "flashdeberta/variant/traits.hpp"

namespace flashdeberta {

// The relative-position inputs every layer shares in one step (trainable_encoder.hpp owns them).
struct RelativeInputs {
  MatrixRef table;                               // (2k, H) after the relative LayerNorm where the variant has one
  MatrixRef dtable;                              // (2k, H) its gradient, added to by every layer
  std::int32_t const* relative_index = nullptr;  // the slot table in policy memory
  std::int64_t saturation = 0;
  // The rows the batch's pairs reach (RelativeSlotTable::reached_rows): the layers project only these. At L = 128
  // that is 255 of v3's 512 rows; projecting all 512 would add a twelfth to a layer's GEMM work.
  std::int64_t first_row = 0, row_count = 0;
};

template <Variant V, TrainingPolicy P>
class TrainableAttention {
 public:
  using Buffer = typename P::Buffer;

  struct Saved {
    MatrixRef input;            // (T, H) the layer's input, owned by the caller
    Buffer qkv;                 // (T, 3A)
    Buffer qkv_bias;            // (3A) v1's interleaved q / v bias
    Buffer context;             // (T, A)
    Buffer lse;                 // (heads, T)
    Buffer relative;            // (2k, H) the table after this layer's dropout; empty without it
    Buffer pos_key, pos_query;  // (2k, A)
    // With a row subset (row_subset.hpp) of m rows, the output projection and what follows cover those rows only:
    Buffer context_rows;  // (m, A) the subset's rows of context
    Buffer input_rows;    // (m, H) the subset's rows of the input: the residual
    Buffer projected;     // (T or m, H) the output projection after dropout
    Buffer out;           // (T or m, H)
    DropoutSite relative_dropout, output_dropout;
    DropoutSite probs_dropout;  // of the attention probabilities: heads * T * max_seqlen counters
  };

  TrainableAttention(ParameterSet<P>& s, ParameterSource const& src, ModelConfig const& c, std::int64_t layer)
      : config_(c) {
    std::string const self = "encoder.layer." + std::to_string(layer) + ".attention.self.";
    std::string const output = "encoder.layer." + std::to_string(layer) + ".attention.output.";
    std::int64_t const h = c.hidden_size;
    std::int64_t const a = c.all_head_size();
    if constexpr (V::kFusedInProj) {
      qkv_ = add_linear(s, src, self + "in_proj", 3 * a, h, /*with_bias=*/false);
      q_bias_ = s.add({self + "q_bias", {a}, ParameterInit::kZeros}, src);
      v_bias_ = s.add({self + "v_bias", {a}, ParameterInit::kZeros}, src);
      if (c.has_position_terms() && c.c2p) pos_key_ = add_linear(s, src, self + "pos_proj", a, h, /*with_bias=*/false);
      if (c.has_position_terms() && c.p2c) pos_query_ = add_linear(s, src, self + "pos_q_proj", a, h);
    } else {
      std::size_t const w = s.add_block({{self + "query_proj.weight", {a, h}},
                                         {self + "key_proj.weight", {a, h}},
                                         {self + "value_proj.weight", {a, h}}},
                                        src);
      std::size_t const b = s.add_block({{self + "query_proj.bias", {a}, ParameterInit::kZeros},
                                         {self + "key_proj.bias", {a}, ParameterInit::kZeros},
                                         {self + "value_proj.bias", {a}, ParameterInit::kZeros}},
                                        src);
      qkv_ = {w, b, 3 * a, h, 3};
      if (c.has_position_terms() && c.share_att_key) {
        pos_key_ = {w + 1, b + 1, a, h, 1};  // key_proj
        pos_query_ = {w, b, a, h, 1};        // query_proj
      } else if (c.has_position_terms()) {
        if (c.c2p) pos_key_ = add_linear(s, src, self + "pos_key_proj", a, h);
        if (c.p2c) pos_query_ = add_linear(s, src, self + "pos_query_proj", a, h);
      }
    }
    out_ = add_linear(s, src, output + "dense", h, a);
    norm_ = TrainableLayerNorm::add(s, src, output + "LayerNorm", h, c.layer_norm_eps);
  }

  // x (T, H) -> saved.out = LayerNorm(dropout(attention(x) . Wo^T + bo) + x), (T, H); with `subset`, the subset's
  // rows of it, (m, H).
  void forward(TrainContext<P>& ctx, MatrixRef const& x, RelativeInputs const& rel, Saved& saved,
               RowSubset<P> const* subset = nullptr) const {
    P const& p = ctx.policy();
    ParameterSet<P> const& s = ctx.parameters;
    std::int64_t const t = ctx.tokens();
    std::int64_t const h = config_.hidden_size;
    std::int64_t const a = config_.all_head_size();
    saved.input = x;
    saved.qkv = ctx.activation(3 * a);
    if constexpr (V::kFusedInProj) {
      saved.qkv_bias = ctx.allocate(1, 3 * a);
      interleave_bias(s, saved.qkv_bias);
      p.gemm({.a = x,
              .b = qkv_.weight_value(s),
              .bias = saved.qkv_bias.template as<float>(),
              .out = rows_of(saved.qkv, t, 3 * a)});
    } else {
      qkv_.forward(s, x, rows_of(saved.qkv, t, 3 * a));
    }
    AttentionArgs args = attention_args(ctx, rel, saved);  // reserves the relative table's dropout first
    saved.probs_dropout =
        DropoutSite::reserve(ctx, ctx.dropout.attention, config_.num_heads * t * ctx.forward.sequences.max_seqlen);
    drop_probabilities(args, saved.probs_dropout);
    saved.context = ctx.activation(a);
    args.out = rows_of(saved.context, t, a);
    saved.lse = ctx.allocate(config_.num_heads, t);
    args.lse = saved.lse.template as<float>();
    p.disentangled_attention(args);

    std::int64_t const m = subset != nullptr ? subset->size() : t;
    MatrixRef context = rows_of(saved.context, t, a);
    MatrixRef residual = x;
    if (subset != nullptr) {
      saved.context_rows = ctx.allocate(m, a);
      subset->gather(p, context, rows_of(saved.context_rows, m, a));
      context = rows_of(saved.context_rows, m, a);
      saved.input_rows = ctx.allocate(m, h);
      subset->gather(p, x, rows_of(saved.input_rows, m, h));
      residual = rows_of(saved.input_rows, m, h);
    }
    saved.projected = ctx.allocate(m, h);
    MatrixRef const projected = rows_of(saved.projected, m, h);
    out_.forward(s, context, projected);
    saved.output_dropout = DropoutSite::reserve(ctx, ctx.dropout.hidden, t * h);
    drop_rows(p, saved.output_dropout, subset, projected, projected);
    saved.out = ctx.allocate(m, h);
    norm_.forward(s, projected, residual, rows_of(saved.out, m, h));
  }

  // dy (T, H) -> dx (T, H) written; the relative table's gradient is added to rel.dtable. With the forward's
  // `subset`, dy is (m, H): the gradient of the subset's rows.
  void backward(TrainContext<P>& ctx, RelativeInputs const& rel, Saved& saved, MatrixRef const& dy, MatrixRef const& dx,
                RowSubset<P> const* subset = nullptr) const {
    P const& p = ctx.policy();
    ParameterSet<P> const& s = ctx.parameters;
    std::int64_t const t = ctx.tokens();
    std::int64_t const h = config_.hidden_size;
    std::int64_t const a = config_.all_head_size();
    std::int64_t const m = subset != nullptr ? subset->size() : t;
    // The residual's share first (dx, or its subset's rows); the q/k/v projection's input gradient is added last.
    Buffer dresidual_rows = subset != nullptr ? ctx.allocate(m, h) : Buffer{};
    MatrixRef const dresidual = subset != nullptr ? rows_of(dresidual_rows, m, h) : dx;
    MatrixRef const residual = subset != nullptr ? rows_of(saved.input_rows, m, h) : saved.input;
    norm_.backward(s, rows_of(saved.projected, m, h), residual, dy, dresidual);
    Buffer dprojected = ctx.allocate(m, h);
    MatrixRef const dproj = rows_of(dprojected, m, h);
    if (saved.output_dropout.active()) {
      drop_rows(p, saved.output_dropout, subset, dresidual, dproj);
    } else {
      p.activation({.x = dresidual, .out = dproj, .activation = Activation::kIdentity});
    }
    Buffer dcontext = ctx.activation(a);
    if (subset != nullptr) {
      Buffer dcontext_rows = ctx.allocate(m, a);
      out_.backward(s, rows_of(saved.context_rows, m, a), dproj, rows_of(dcontext_rows, m, a));
      p.fill(rows_of(dcontext, t, a), 0.0f);
      subset->scatter_add(p, rows_of(dcontext_rows, m, a), rows_of(dcontext, t, a));
      p.fill(dx, 0.0f);
      subset->scatter_add(p, dresidual, dx);
    } else {
      out_.backward(s, rows_of(saved.context, t, a), dproj, rows_of(dcontext, t, a));
    }

    Buffer dqkv = ctx.activation(3 * a);
    AttentionBackwardArgs back;
    back.forward = attention_args(ctx, rel, saved);
    drop_probabilities(back.forward, saved.probs_dropout);  // the forward's mask, redrawn
    back.forward.out = rows_of(saved.context, t, a);
    back.dout = rows_of(dcontext, t, a);
    back.lse = saved.lse.template as<float>();
    AttentionArgs gradients;
    view_fused_qkv(gradients, rows_of(dqkv, t, 3 * a), config_.head_size, layout());
    back.dq = gradients.q;
    back.dk = gradients.k;
    back.dv = gradients.v;
    std::int64_t const rows = rel.table.rows;
    Buffer dpos_key, dpos_query;
    if (!back.forward.pos_key.empty()) {
      dpos_key = ctx.allocate(rows, a);
      p.fill(rows_of(dpos_key, rows, a), 0.0f);
      back.dpos_key = rows_of(dpos_key, rows, a);
    }
    if (!back.forward.pos_query.empty()) {
      dpos_query = ctx.allocate(rows, a);
      p.fill(rows_of(dpos_query, rows, a), 0.0f);
      back.dpos_query = rows_of(dpos_query, rows, a);
    }
    p.disentangled_attention_backward(back);

    if constexpr (V::kFusedInProj) {
      Buffer dbias = ctx.allocate(1, 3 * a);
      p.fill(rows_of(dbias, 1, 3 * a), 0.0f);
      p.linear_backward({.x = saved.input,
                         .w = qkv_.weight_value(s),
                         .dy = rows_of(dqkv, t, 3 * a),
                         .dx = dx,
                         .dw = s.grad(qkv_.weight, 3 * a, h),
                         .db = dbias.template as<float>(),
                         .accumulate_dx = true});
      scatter_bias_gradient(s, dbias);
    } else {
      qkv_.backward(s, saved.input, rows_of(dqkv, t, 3 * a), dx, /*accumulate_dx=*/true);
    }
    relative_backward(ctx, rel, saved, dpos_key, dpos_query);
  }

 private:
  static constexpr QkvLayout layout() { return V::kFusedInProj ? QkvLayout::kInterleavedPerHead : QkvLayout::kStacked; }
  bool has_c2p() const { return pos_key_.weight != TrainableLinear::kNone; }
  bool has_p2c() const { return pos_query_.weight != TrainableLinear::kNone; }

  // attention_probs_dropout_prob on the softmax's output (AttentionArgs::dropout), drawn from `site`.
  static void drop_probabilities(AttentionArgs& args, DropoutSite const& site) {
    args.dropout = site.probability;
    args.dropout_seed = site.seed;
    args.dropout_offset = site.offset;
  }

  // The attention arguments over saved.qkv and this step's projected relative tables (computed on first use).
  AttentionArgs attention_args(TrainContext<P>& ctx, RelativeInputs const& rel, Saved& saved) const {
    std::int64_t const t = ctx.tokens();
    std::int64_t const a = config_.all_head_size();
    AttentionArgs args;
    args.num_heads = config_.num_heads;
    args.head_size = config_.head_size;
    args.scale = config_.attention_scale();
    args.sequences = ctx.forward.sequences;
    args.impl = ctx.forward.attention;
    view_fused_qkv(args, rows_of(saved.qkv, t, 3 * a), config_.head_size, layout());
    if (has_c2p() || has_p2c()) {
      if (saved.pos_key.size() == 0 && saved.pos_query.size() == 0) project_relative(ctx, rel, saved);
      if (has_c2p()) args.pos_key = rows_of(saved.pos_key, rel.table.rows, a);
      if (has_p2c()) args.pos_query = rows_of(saved.pos_query, rel.table.rows, a);
      args.relative_index = rel.relative_index;
      args.saturation = rel.saturation;
    }
    return args;
  }

  // Kr = dropout(table) . Wk^T (+ bk), Qr = dropout(table) . Wq^T + bq (spec 4.1, 4.2), (2k, A) each.
  void project_relative(TrainContext<P>& ctx, RelativeInputs const& rel, Saved& saved) const {
    P const& p = ctx.policy();
    std::int64_t const rows = rel.table.rows;
    std::int64_t const h = config_.hidden_size;
    std::int64_t const a = config_.all_head_size();
    saved.relative_dropout = DropoutSite::reserve(ctx, ctx.dropout.hidden, rows * h);
    MatrixRef table = rel.table;
    if (saved.relative_dropout.active()) {
      saved.relative = ctx.allocate(rows, h);
      saved.relative_dropout.apply(p, rel.table, rows_of(saved.relative, rows, h));
      table = rows_of(saved.relative, rows, h);
    }
    MatrixRef const reached = table.row_range(rel.first_row, rel.row_count);
    if (has_c2p()) {
      saved.pos_key = ctx.allocate(rows, a);
      MatrixRef const projected = rows_of(saved.pos_key, rows, a);
      zero_unreached(p, rel, projected);
      pos_key_.forward(ctx.parameters, reached, projected.row_range(rel.first_row, rel.row_count));
    }
    if (has_p2c()) {
      saved.pos_query = ctx.allocate(rows, a);
      MatrixRef const projected = rows_of(saved.pos_query, rows, a);
      zero_unreached(p, rel, projected);
      pos_query_.forward(ctx.parameters, reached, projected.row_range(rel.first_row, rel.row_count));
    }
  }

  // No pair reads the rows outside the reached ones, but a kernel may load them beside its window (the host flash
  // kernel packs the tables 64 rows at a time): zeros, not stale memory.
  static void zero_unreached(P const& p, RelativeInputs const& rel, MatrixRef const& projected) {
    std::int64_t const after = rel.first_row + rel.row_count;
    if (rel.first_row > 0) p.fill(projected.row_range(0, rel.first_row), 0.0f);
    if (after < projected.rows) p.fill(projected.row_range(after, projected.rows - after), 0.0f);
  }

  void relative_backward(TrainContext<P>& ctx, RelativeInputs const& rel, Saved const& saved, Buffer const& dpos_key,
                         Buffer const& dpos_query) const {
    if (!has_c2p() && !has_p2c()) return;
    P const& p = ctx.policy();
    std::int64_t const rows = rel.table.rows;
    std::int64_t const h = config_.hidden_size;
    std::int64_t const a = config_.all_head_size();
    bool const dropped = saved.relative_dropout.active();
    MatrixRef const table = dropped ? rows_of(saved.relative, rows, h) : rel.table;
    Buffer local;
    MatrixRef dtable = rel.dtable;
    if (dropped) {
      local = ctx.allocate(rows, h);
      dtable = rows_of(local, rows, h);
      p.fill(dtable, 0.0f);
    }
    // Rows outside the reached ones have zero gradients (no pair reads them): they add nothing to dW, db or dtable.
    std::int64_t const first = rel.first_row;
    std::int64_t const count = rel.row_count;
    MatrixRef const reached = table.row_range(first, count);
    MatrixRef const dreached = dtable.row_range(first, count);
    if (has_c2p())
      pos_key_.backward(ctx.parameters, reached, rows_of(dpos_key, rows, a).row_range(first, count), dreached, true);
    if (has_p2c())
      pos_query_.backward(ctx.parameters, reached, rows_of(dpos_query, rows, a).row_range(first, count), dreached,
                          true);
    if (dropped) {
      saved.relative_dropout.apply(p, dtable, dtable);
      p.activation({.x = dtable, .out = rel.dtable, .activation = Activation::kIdentity, .accumulate = true});
    }
  }

  // v1: the (3A) bias of the fused projection, per head [q_bias_h | 0 | v_bias_h].
  void interleave_bias(ParameterSet<P> const& s, Buffer& fused) const {
    P const& p = s.policy();
    std::int64_t const heads = config_.num_heads;
    std::int64_t const d = config_.head_size;
    MatrixRef const per_head{fused.data(), DType::kF32, heads, 3 * d, 3 * d};  // (heads, 3d)
    p.fill(per_head, 0.0f);
    p.activation({.x = s.value(q_bias_, heads, d), .out = per_head.columns(0, d), .activation = Activation::kIdentity});
    p.activation(
        {.x = s.value(v_bias_, heads, d), .out = per_head.columns(2 * d, d), .activation = Activation::kIdentity});
  }
  void scatter_bias_gradient(ParameterSet<P> const& s, Buffer const& dfused) const {
    P const& p = s.policy();
    std::int64_t const heads = config_.num_heads;
    std::int64_t const d = config_.head_size;
    MatrixRef const per_head{dfused.data(), DType::kF32, heads, 3 * d, 3 * d};
    p.activation({.x = per_head.columns(0, d),
                  .out = s.grad(q_bias_, heads, d),
                  .activation = Activation::kIdentity,
                  .accumulate = true});
    p.activation({.x = per_head.columns(2 * d, d),
                  .out = s.grad(v_bias_, heads, d),
                  .activation = Activation::kIdentity,
                  .accumulate = true});
  }
  ModelConfig config_;
  TrainableLinear qkv_, pos_key_, pos_query_, out_;
  std::size_t q_bias_ = TrainableLinear::kNone, v_bias_ = TrainableLinear::kNone;
  TrainableLayerNorm norm_;
};

}  // namespace flashdeberta

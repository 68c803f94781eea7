// The attention block of one layer (spec 4, 5.1): fused q/k/v projection, disentangled attention,
// output projection and post-LayerNorm with the residual.
//
// At load the q/k/v weights become one (3A, H) matrix and the projected relative tables Kr, Qr (2k, A)
// of this layer are computed once, since they depend only on weights.
#pragma once

#include <concepts>
#include <span>
#include <string>
#include <vector>

#include "flashdeberta/layers/forward_context.hpp"
#include "flashdeberta/layers/layer_norm.hpp"
#include "flashdeberta/layers/linear_weight.hpp"
#include "flashdeberta/layers/relative_context.hpp"
#include "flashdeberta/layers/weight_loader.hpp"
#include "flashdeberta/math/relative_position.hpp"
#include "flashdeberta/policy/concepts.hpp"
#include "flashdeberta/variant/traits.hpp"

namespace flashdeberta {

template <Variant V, ExecutionPolicy P>
class AttentionBlock {
 public:
  using Matrix = DeviceMatrix<typename P::Buffer>;

  AttentionBlock(WeightLoader<P> const& w, ModelConfig const& c, std::int64_t layer, RelativeContext<P> const* rel)
      : config_(c) {
    std::string const self = "encoder.layer." + std::to_string(layer) + ".attention.self.";
    std::string const output = "encoder.layer." + std::to_string(layer) + ".attention.output.";
    std::int64_t const h = c.hidden_size;
    std::int64_t const a = c.all_head_size();
    std::int64_t const d = c.head_size;
    std::vector<float> bias(static_cast<std::size_t>(3 * a), 0.0f);
    Matrix qkv;  // (3A, H), prepared into qkv_ once the relative tables are projected (they may read its rows)
    if constexpr (V::kFusedInProj) {
      // v1: in_proj rows interleave per head as [q_h; k_h; v_h] (spec 4.1); k has no bias.
      qkv = w.matrix(self + "in_proj.weight", 3 * a, h);
      std::vector<float> const q_bias = w.read(self + "q_bias", {a});
      std::vector<float> const v_bias = w.read(self + "v_bias", {a});
      for (std::int64_t head = 0; head < c.num_heads; ++head) {
        for (std::int64_t e = 0; e < d; ++e) {
          bias[head * 3 * d + e] = q_bias[head * d + e];
          bias[head * 3 * d + 2 * d + e] = v_bias[head * d + e];
        }
      }
    } else {
      // v2/v3: stack query, key, value rows so one GEMM yields [q | k | v]: the one copy of these weights a
      // load makes, written straight from the file.
      char const* const parts[] = {"query_proj", "key_proj", "value_proj"};
      auto const rows = static_cast<std::size_t>(a);
      auto const part_size = static_cast<std::size_t>(a * h);
      qkv = w.staged(3 * a, h, [&](std::span<float> weight) {
        for (std::size_t i = 0; i < 3; ++i)
          w.read_into(self + parts[i] + ".weight", {a, h}, weight.subspan(i * part_size, part_size));
      });
      for (std::size_t i = 0; i < 3; ++i)
        w.read_into(self + parts[i] + ".bias", {a}, std::span<float>(bias).subspan(i * rows, rows));
    }
    qkv_bias_ = w.policy().upload(std::span<float const>(bias), w.policy().compute_dtype());
    if (c.has_position_terms()) project_relative_tables(w, self, *rel, qkv.ref());
    qkv_ = {w.policy(), std::move(qkv)};
    out_ = {w.policy(), w.matrix(output + "dense.weight", h, a)};
    out_bias_ = w.vector(output + "dense.bias", h);
    norm_ = LayerNormParams<P>(w, output + "LayerNorm", h, c.layer_norm_eps);
  }

  // The relative part of this layer's attention arguments (empty tables without position terms).
  AttentionArgs relative_args(RelativeContext<P> const* rel) const {
    AttentionArgs args;
    args.num_heads = config_.num_heads;
    args.head_size = config_.head_size;
    if (config_.has_position_terms()) {
      if (config_.c2p) args.pos_key = pos_key_.ref();
      if (config_.p2c) args.pos_query = pos_query_.ref();
      args.relative_index = static_cast<std::int32_t const*>(rel->slot_buffer.data());
      args.saturation = rel->slots.saturation;
    }
    args.scale = config_.attention_scale();
    return args;
  }

  // x (T, H) -> LayerNorm(attention(x) . Wo^T + bo + x), (T, H).
  typename P::Buffer forward(ForwardContext<P> const& ctx, typename P::Buffer const& x,
                             RelativeContext<P> const* rel) const {
    P const& p = ctx.policy;
    std::int64_t const t = ctx.tokens();
    std::int64_t const h = config_.hidden_size;
    std::int64_t const a = config_.all_head_size();
    std::int64_t const d = config_.head_size;
    auto qkv = ctx.activation(3 * a);  // (T, 3A)
    qkv_.gemm(p, {.a = rows_of(x, t, h), .bias = qkv_bias_.data(), .out = rows_of(qkv, t, 3 * a)});
    MatrixRef const fused = rows_of(qkv, t, 3 * a);
    AttentionArgs args = relative_args(rel);
    view_fused_qkv(args, fused, d, V::kFusedInProj ? QkvLayout::kInterleavedPerHead : QkvLayout::kStacked);
    auto context = ctx.activation(a);  // (T, A)
    args.out = rows_of(context, t, a);
    args.sequences = ctx.sequences;
    args.impl = ctx.attention;
    if constexpr (PreparesRelativeTables<P>) {
      p.disentangled_attention(args, prepared_);
    } else {
      p.disentangled_attention(args);
    }

    auto projected = ctx.activation(h);  // (T, H)
    out_.gemm(p, {.a = rows_of(context, t, a), .bias = out_bias_.data(), .out = rows_of(projected, t, h)});
    return norm_.apply(ctx, projected, &x);
  }

 private:
  // Kr = T . Wk^T (+ bk), Qr = T . Wq^T + bq over the (LayerNorm'ed) relative table (spec 4.1, 4.2), each (2k, A),
  // in the memory of the weights (allocate_weight).
  // `stacked`: the layer's (3A, H) q/k/v weight.
  void project_relative_tables(WeightLoader<P> const& w, std::string const& self, RelativeContext<P> const& rel,
                               MatrixRef const& stacked) {
    std::int64_t const h = config_.hidden_size;
    std::int64_t const a = config_.all_head_size();
    std::int64_t const rows = rel.table.rows;
    P const& p = w.policy();
    auto project = [&](MatrixRef const& weight, void const* bias) {
      Matrix result{allocate_weight(p, rows * a), rows, a};
      p.gemm({.a = rel.table.ref(), .b = weight, .bias = bias, .out = result.ref()});
      return result;
    };
    auto project_stored = [&](std::string const& weight_name, std::string const& bias_name) {
      Matrix const weight = w.matrix(weight_name, a, h);
      typename P::Buffer bias;
      if (!bias_name.empty()) bias = w.vector(bias_name, a);
      return project(weight.ref(), bias_name.empty() ? nullptr : bias.data());
    };
    if constexpr (V::kFusedInProj) {
      if (config_.c2p) pos_key_ = project_stored(self + "pos_proj.weight", "");
      if (config_.p2c) pos_query_ = project_stored(self + "pos_q_proj.weight", self + "pos_q_proj.bias");
    } else if (config_.share_att_key) {
      // The key and query projections are rows [A, 2A) and [0, A) of the stacked q/k/v weight and bias, loaded
      // once already.
      auto const bias_rows = [&](std::int64_t first) {
        return static_cast<void const*>(static_cast<char const*>(qkv_bias_.data()) +
                                        first * static_cast<std::int64_t>(dtype_size(qkv_bias_.dtype())));
      };
      if (config_.c2p) pos_key_ = project(stacked.row_range(a, a), bias_rows(a));
      if (config_.p2c) pos_query_ = project(stacked.row_range(0, a), bias_rows(0));
    } else {
      if (config_.c2p) pos_key_ = project_stored(self + "pos_key_proj.weight", self + "pos_key_proj.bias");
      if (config_.p2c) pos_query_ = project_stored(self + "pos_query_proj.weight", self + "pos_query_proj.bias");
    }
    // Whatever the policy derives from the tables once (concepts.hpp, PreparesRelativeTables).
    if constexpr (PreparesRelativeTables<P>) prepared_ = p.prepare_relative(relative_args(&rel));
    p.fence();
  }

  ModelConfig config_;
  LinearWeight<P> qkv_, out_;  // the projections, prepared for the policy's linear dtype
  Matrix pos_key_, pos_query_;
  typename P::Buffer qkv_bias_, out_bias_;
  prepared_relative_t<P> prepared_;  // from the policy's prepare_relative at load, when it has one
  LayerNormParams<P> norm_;
};

}  // namespace flashdeberta

// What every attention layer of a model shares for its position terms (spec 4.1, 5.4): the relative-embedding
// table after its optional LayerNorm, and the slot table mapping a clamped position difference to a table row.
// Built once at load by the Encoder, which owns it; the layers project the table into their own Kr / Qr then,
// and read only the slots afterwards (the table itself is released once every layer has projected it).
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "flashdeberta/core/model_config.hpp"
#include "flashdeberta/layers/layer_norm.hpp"
#include "flashdeberta/layers/weight_loader.hpp"
#include "flashdeberta/math/relative_position.hpp"
#include "flashdeberta/variant/traits.hpp"

namespace flashdeberta {

template <ExecutionPolicy P>
struct RelativeContext {
  DeviceMatrix<typename P::Buffer> table;  // (2k, H)
  RelativeSlotTable slots;
  typename P::Buffer slot_buffer;  // slots.slots in policy memory

  // Null for a model without position terms.
  template <Variant V>
  static std::unique_ptr<RelativeContext> load(WeightLoader<P> const& w, ModelConfig const& c) {
    if (!c.has_position_terms()) return nullptr;
    P const& p = w.policy();
    auto context = std::make_unique<RelativeContext>();
    std::int64_t const rows = 2 * c.relative_span();
    auto table = w.matrix("encoder.rel_embeddings.weight", rows, c.hidden_size);  // (2k, H)
    if (V::kRelativeLayerNorm && c.norm_rel_ebd_layer_norm) {
      LayerNormParams<P> const norm(w, "encoder.LayerNorm", c.hidden_size, c.layer_norm_eps);
      DeviceMatrix<typename P::Buffer> normalized{p.allocate(rows * c.hidden_size, p.compute_dtype()), rows,
                                                  c.hidden_size};
      norm.apply(p, table.ref(), MatrixRef{}, normalized.ref());
      table = std::move(normalized);
    }
    context->table = std::move(table);
    context->slots = make_relative_slot_table(c);
    context->slot_buffer = p.upload_indices(std::span<std::int32_t const>(context->slots.slots));
    return context;
  }
};

}  // namespace flashdeberta

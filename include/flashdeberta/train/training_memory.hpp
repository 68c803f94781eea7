// What one training step (forward with its tape, head, backward) allocates, estimated from the batch's sizes before
// any of it is allocated, and the refusal of a step that cannot fit (TrainingModel calls both).
//
// The tape (trainable_model.hpp) keeps per layer, as (T, *) float32 columns: q/k/v (3A), the attention output (A),
// the output projection, the block's output, the FFN's input and output of the activation (2I), its projection and
// output (4H in all), the row log-sum-exp (heads), plus this step's position projections (2k, 2A) and, with dropout,
// the layer's dropped relative table (2k, H). With activation checkpointing only each layer's output (H) stays, and
// one layer's tape is rebuilt at a time in the backward. The backward's own peak is a few (T, *) gradients beside
// the tape: dqkv (3A), d context (A), the FFN's (I) and three (T, H), plus what its attention op allocates.
#pragma once

#include <cstdint>
#include <optional>

#include "flashdeberta/core/batch.hpp"
#include "flashdeberta/core/model_config.hpp"
#include "flashdeberta/model/forward_memory.hpp"
#include "flashdeberta/policy/concepts.hpp"

namespace flashdeberta {

struct TrainingMemory {
  std::int64_t tokens = 0;
  std::int64_t longest = 0;
  std::int64_t tape = 0;                 // what the forward keeps for the backward
  std::int64_t backward = 0;             // the backward's gradients and attention work beside the tape
  std::int64_t attention_workspace = 0;  // one attention call's own buffers, the forward's and the backward's
  std::int64_t total = 0;
};

// rows_gathered: the rows the head reads (first tokens, labelled tokens); head_width: its output columns.
template <ExecutionPolicy P>
TrainingMemory estimate_training_memory(P const& policy, ModelConfig const& c, Batch const& batch, AttentionImpl impl,
                                        bool checkpointing, std::int64_t rows_gathered, std::int64_t head_width) {
  TrainingMemory m;
  m.tokens = batch.total_tokens();
  m.longest = batch.max_seqlen();
  double const f = sizeof(float);
  double const t = static_cast<double>(m.tokens);
  double const h = static_cast<double>(c.hidden_size);
  double const a = static_cast<double>(c.all_head_size());
  double const i = static_cast<double>(c.intermediate_size);
  double const e = static_cast<double>(c.embedding_size);
  double const layers = static_cast<double>(c.num_layers);
  double const rows = c.has_position_terms() ? 2.0 * static_cast<double>(c.relative_span()) : 0.0;
  double const per_layer_tokens = t * (4 * a + 2 * i + 4 * h + static_cast<double>(c.num_heads)) * f;
  double const per_layer_tables = rows * (2 * a + h) * f;
  double const embeddings = t * (e + h + h) * f + rows * h * f;
  double const tape = checkpointing ? embeddings + layers * t * h * f + per_layer_tokens + per_layer_tables
                                    : embeddings + layers * (per_layer_tokens + per_layer_tables);
  AttentionShape const shape = attention_shape(c, batch, impl, DType::kF32);
  std::int64_t backward_workspace = 0;
  if constexpr (ReportsAttentionBackwardWorkspace<P>) {
    backward_workspace = static_cast<std::int64_t>(policy.attention_backward_workspace_bytes(shape));
  } else {
    backward_workspace = detail::saturated_bytes(2.0 * rows * a * f * static_cast<double>(c.num_heads));  // partials
  }
  m.attention_workspace = detail::saturated_bytes(static_cast<double>(attention_workspace_bytes(policy, shape)) +
                                                  static_cast<double>(backward_workspace));
  double const backward = t * (4 * a + i + 3 * h) * f + 2 * rows * (a + h) * f;
  double const head = static_cast<double>(rows_gathered) * (3 * h + 2 * static_cast<double>(head_width)) * f;
  m.tape = detail::saturated_bytes(tape);
  m.backward = detail::saturated_bytes(backward + head);
  m.total = detail::saturated_bytes(tape + backward + head + static_cast<double>(m.attention_workspace));
  return m;
}

// Refuses, naming the numbers, a step whose estimate exceeds `limit` bytes (0: none) or what the policy reports
// available.
template <ExecutionPolicy P>
void require_training_fits(P const& policy, TrainingMemory const& m, std::int64_t limit, bool checkpointing) {
  std::optional<std::int64_t> available;
  if constexpr (ReportsAvailableMemory<P>) available = policy.available_memory_bytes();
  std::int64_t bound = limit > 0 ? limit : INT64_MAX;
  if (available && *available < bound) bound = *available;
  FLASHDEBERTA_REQUIRE(m.total <= bound,
                       "a training step of "
                           << m.tokens << " tokens (longest sequence " << m.longest << ") needs about "
                           << detail::format_gib(m.total) << " (tape " << detail::format_gib(m.tape) << ", backward "
                           << detail::format_gib(m.backward) << ", attention "
                           << detail::format_gib(m.attention_workspace) << "), more than the "
                           << detail::format_gib(bound) << (limit > 0 && bound == limit ? " allowed" : " available")
                           << (checkpointing ? "" : "; activation checkpointing keeps one layer's tape at a time")
                           << "; use smaller batches or shorter sequences");
}

}  // namespace flashdeberta

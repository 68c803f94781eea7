// What a forward of one batch allocates, estimated from the batch's sizes before any of it is allocated, and
// the refusal of a forward that cannot fit (DebertaModel::forward calls both).
//
// The estimate follows the layers' allocations (layers/*.hpp): every activation is a fresh (T, cols) buffer
// in the compute dtype, freed when the layer that made it returns. The peak is the larger of
//   - the largest set of activations alive at once (embeddings; a layer's attention block; its feed-forward
//     block; the v2 conv layer), and
//   - the activations alive around the attention op plus what that op allocates for itself: the policy says
//     (ReportsAttentionWorkspace), else HF's eager layout is assumed (num_heads x L x L scores), and
//   - those around the v2 conv op plus its im2col buffer.
// Weights are not counted: they are loaded already. A head's outputs are added by DebertaWith::forward when
// the head reports them (the masked LM's logits).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/core/batch.hpp"
#include "flashdeberta/policy/concepts.hpp"

namespace flashdeberta {

struct ForwardMemory {
  std::int64_t batch = 0;    // B sequences
  std::int64_t tokens = 0;   // T
  std::int64_t longest = 0;  // L
  AttentionImpl attention = AttentionImpl::kFlash;
  std::int64_t indices = 0;              // the batch's index arrays in policy memory
  std::int64_t activations = 0;          // the most (T, *) activations alive at once
  std::int64_t attention_workspace = 0;  // what one attention call allocates for itself (eager: the L x L scores)
  std::int64_t head_outputs = 0;         // what the head allocates (DebertaWith), beside the hidden states
  std::int64_t total = 0;                // the peak of the whole forward
};

namespace detail {

// "21.3 GiB", "0.0712 GiB": three significant digits, one unit, so messages compare at a glance.
inline std::string format_gib(std::int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3g GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

}  // namespace detail

// The shape of every attention call of a forward of `batch` (each layer's is the same).
inline AttentionShape attention_shape(ModelConfig const& config, Batch const& batch, AttentionImpl impl, DType dtype) {
  AttentionShape s;
  s.batch = batch.batch_size();
  s.total_tokens = batch.total_tokens();
  s.max_seqlen = batch.max_seqlen();
  s.num_heads = config.num_heads;
  s.head_size = config.head_size;
  if (config.has_position_terms()) {
    s.relative_rows = 2 * config.relative_span();
    s.c2p = config.c2p;
    s.p2c = config.p2c;
  }
  s.impl = impl;
  s.dtype = dtype;
  return s;
}

// HF's eager layout, for policies that do not report their own: (heads, L, L) scores of one sequence, and
// the (T, heads, 2k) c2p and p2c products; flash keeps only the p2c products.
inline double default_attention_workspace_bytes(AttentionShape const& s) {
  double const element = static_cast<double>(dtype_size(s.dtype));
  double const tokens = static_cast<double>(s.total_tokens);
  double const heads = static_cast<double>(s.num_heads);
  double const length = static_cast<double>(s.max_seqlen);
  double const projected = tokens * heads * static_cast<double>(s.relative_rows) * element;
  if (s.impl == AttentionImpl::kFlash) return s.p2c ? projected : 0.0;
  return heads * length * length * element + (s.c2p ? projected : 0.0) + (s.p2c ? projected : 0.0);
}

template <ExecutionPolicy P>
std::int64_t attention_workspace_bytes(P const& policy, AttentionShape const& shape) {
  if constexpr (ReportsAttentionWorkspace<P>) {
    return static_cast<std::int64_t>(policy.attention_workspace_bytes(shape));
  } else {
    return detail::saturated_bytes(default_attention_workspace_bytes(shape));
  }
}

// The estimate for a forward of `batch` through a model of `config` (conv_layer: the v2 conv layer runs).
template <ExecutionPolicy P>
ForwardMemory estimate_forward_memory(P const& policy, ModelConfig const& config, bool conv_layer, Batch const& batch,
                                      AttentionImpl impl) {
  ForwardMemory m;
  m.batch = batch.batch_size();
  m.tokens = batch.total_tokens();
  m.longest = batch.max_seqlen();
  m.attention = impl;
  if (m.tokens == 0) return m;  // nothing is computed (DebertaModel::enqueue_forward)
  double const t = static_cast<double>(m.tokens);
  double const element = static_cast<double>(dtype_size(policy.compute_dtype()));
  double const h = static_cast<double>(config.hidden_size);
  double const a = static_cast<double>(config.all_head_size());
  double const i = static_cast<double>(config.intermediate_size);
  double const e = static_cast<double>(config.embedding_size);
  // Columns of the (T, *) activations alive at once in each stage.
  double const embeddings = h + std::max(e, h);  // the (T, E) sum and its projection, or the LayerNorm's in/out
  double const attention_block = 3 * h + 4 * a;  // x, qkv (3A), context (A), projected, LayerNorm output
  double const feed_forward = 4 * h + i;         // x, attended, inner (I), projected, LayerNorm output
  double const conv = conv_layer ? 5 * h : 0.0;  // x, attended, y, conv, LayerNorm output
  double const around_attention = h + 4 * a;     // x, qkv and context while the attention op runs
  double const activation_columns = std::max({embeddings, attention_block, feed_forward, conv});
  double const indices = (3.0 * t + static_cast<double>(m.batch) + 1.0) * sizeof(std::int32_t);
  m.indices = detail::saturated_bytes(indices);
  m.activations = detail::saturated_bytes(t * activation_columns * element);
  m.attention_workspace =
      attention_workspace_bytes(policy, attention_shape(config, batch, impl, policy.compute_dtype()));
  double const attention_peak = t * around_attention * element + static_cast<double>(m.attention_workspace);
  // The conv op's own buffer: CudaPolicy's im2col holds (T, H x kernel); the host policies' is smaller.
  double const conv_peak = conv_layer ? t * (conv + h * static_cast<double>(config.conv_kernel_size)) * element : 0.0;
  m.total = detail::saturated_bytes(indices + std::max({t * activation_columns * element, attention_peak, conv_peak}));
  return m;
}

// `memory` with what a head allocates after the forward (head_bytes), beside the (T, H) hidden states and the
// batch's indices, which stay alive while it runs: the peak becomes the larger of the two stages.
inline void add_head_outputs(ForwardMemory& memory, std::int64_t head_bytes, std::int64_t hidden_size, DType dtype) {
  memory.head_outputs = head_bytes;
  double const hidden =
      static_cast<double>(memory.tokens) * static_cast<double>(hidden_size) * static_cast<double>(dtype_size(dtype));
  double const head_stage = static_cast<double>(memory.indices) + hidden + static_cast<double>(head_bytes);
  memory.total = std::max(memory.total, detail::saturated_bytes(head_stage));
}

// Throws, naming the batch and the numbers, when `memory` exceeds what the policy has available (when it
// reports it) or `limit_bytes` (ModelOptions::max_forward_bytes; 0: no limit of its own).
template <ExecutionPolicy P>
void require_forward_fits(P const& policy, ForwardMemory const& memory, std::int64_t limit_bytes) {
  std::optional<std::int64_t> available;
  if constexpr (ReportsAvailableMemory<P>) available = policy.available_memory_bytes();
  bool const limited_by_option = limit_bytes > 0 && (!available || limit_bytes < *available);
  std::optional<std::int64_t> const budget = limited_by_option ? std::optional<std::int64_t>(limit_bytes) : available;
  if (!budget || memory.total <= *budget) return;
  bool const eager = memory.attention == AttentionImpl::kEager;
  FLASHDEBERTA_FAIL(
      "forward of "
      << memory.batch << (memory.batch == 1 ? " sequence, " : " sequences, ") << memory.tokens << " tokens, longest "
      << memory.longest << " needs about " << detail::format_gib(memory.total)
      << (eager ? " (eager attention: " + detail::format_gib(memory.attention_workspace) + " of scores per layer)"
                : std::string())
      << (memory.head_outputs > 0 ? " (head outputs: " + detail::format_gib(memory.head_outputs) + ")" : std::string())
      << " but only " << detail::format_gib(*budget) << " are available"
      << (limited_by_option ? " (ModelOptions::max_forward_bytes)" : std::string(" to the ") + P::name() + " policy")
      << (eager ? "; use flash attention (memory linear in L) or fewer tokens"
          : memory.head_outputs > memory.total / 2
              ? "; ask the head for fewer tokens (HeadRequest::tokens) or use fewer sequences per forward"
              : "; use fewer or shorter sequences per forward"));
}

}  // namespace flashdeberta

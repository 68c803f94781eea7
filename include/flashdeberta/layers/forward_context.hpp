// Per-forward state shared by the layers: the packed batch in policy memory.
#pragma once

#include <span>

#include "flashdeberta/model/batch.hpp"
#include "flashdeberta/policy/concepts.hpp"

namespace flashdeberta {

template <ExecutionPolicy P>
struct ForwardContext {
  using Buffer = typename P::Buffer;

  P const& policy;
  Buffer input_ids;       // (T) int32
  Buffer token_type_ids;  // (T) int32, zeros when the batch has none
  Buffer positions;       // (T) int32
  Buffer cu_seqlens;      // (B + 1) int32
  SequenceLayout sequences;
  AttentionImpl attention = AttentionImpl::kFlash;

  ForwardContext(P const& p, Batch const& batch, AttentionImpl impl) : policy(p), attention(impl) {
    std::int64_t const tokens = batch.total_tokens();
    input_ids = p.upload_indices(std::span<std::int32_t const>(batch.input_ids));
    if (batch.token_type_ids.empty()) {
      std::vector<std::int32_t> const zeros(static_cast<std::size_t>(tokens), 0);
      token_type_ids = p.upload_indices(std::span<std::int32_t const>(zeros));
    } else {
      token_type_ids = p.upload_indices(std::span<std::int32_t const>(batch.token_type_ids));
    }
    positions = p.upload_indices(std::span<std::int32_t const>(batch.positions));
    cu_seqlens = p.upload_indices(std::span<std::int32_t const>(batch.cu_seqlens));
    sequences.cu_seqlens = static_cast<std::int32_t const*>(cu_seqlens.data());
    sequences.positions = static_cast<std::int32_t const*>(positions.data());
    sequences.batch = batch.batch_size();
    sequences.total_tokens = tokens;
    sequences.max_seqlen = batch.max_seqlen();
    sequences.max_position = batch.max_position();
    sequences.contiguous_positions = batch.contiguous_positions();
  }

  std::int64_t tokens() const { return sequences.total_tokens; }

  // A fresh (T, cols) activation in the compute dtype.
  Buffer activation(std::int64_t cols) const { return policy.allocate(tokens() * cols, policy.compute_dtype()); }
};

template <class Buffer>
MatrixRef rows_of(Buffer const& buffer, std::int64_t rows, std::int64_t cols) {
  FLASHDEBERTA_ASSERT(buffer.size() >= rows * cols);
  return {buffer.data(), buffer.dtype(), rows, cols, cols};
}

}  // namespace flashdeberta

// Per-forward state shared by the layers: the packed batch's index arrays in policy memory, and the sizes
// the host-side code decides from (SequenceLayout).
//
// A context is made one of two ways. From a Batch it uploads the four index arrays and owns them: what
// DebertaModel::forward does. From a DeviceBatch the caller owns (advanced), nothing is uploaded and the
// context only points at the arrays; the Batch then supplies just the structure (cu_seqlens, positions)
// and must describe what the arrays hold. CudaGraphForward works this way: a captured forward reads the
// arrays at fixed addresses, and the runner rewrites the ids there before each replay.
#pragma once

#include <span>
#include <utility>
#include <vector>

#include "flashdeberta/core/batch.hpp"
#include "flashdeberta/policy/concepts.hpp"

namespace flashdeberta {

// The four index arrays of a packed batch in policy memory, int32 each.
template <ExecutionPolicy P>
struct DeviceBatch {
  using Buffer = typename P::Buffer;

  Buffer input_ids;       // (T)
  Buffer token_type_ids;  // (T), zeros when the batch has none
  Buffer positions;       // (T)
  Buffer cu_seqlens;      // (B + 1)

  static DeviceBatch upload(P const& p, Batch const& batch) {
    DeviceBatch device;
    device.input_ids = p.upload_indices(std::span<std::int32_t const>(batch.input_ids));
    if (batch.token_type_ids.empty()) {
      std::vector<std::int32_t> const zeros(static_cast<std::size_t>(batch.total_tokens()), 0);
      device.token_type_ids = p.upload_indices(std::span<std::int32_t const>(zeros));
    } else {
      device.token_type_ids = p.upload_indices(std::span<std::int32_t const>(batch.token_type_ids));
    }
    device.positions = p.upload_indices(std::span<std::int32_t const>(batch.positions));
    device.cu_seqlens = p.upload_indices(std::span<std::int32_t const>(batch.cu_seqlens));
    return device;
  }
};

template <ExecutionPolicy P>
struct ForwardContext {
  using Buffer = typename P::Buffer;

  P const& policy;
  std::int32_t const* input_ids = nullptr;       // (T) in policy memory
  std::int32_t const* token_type_ids = nullptr;  // (T) in policy memory
  SequenceLayout sequences;                      // its positions and cu_seqlens point into policy memory
  AttentionImpl attention = AttentionImpl::kFlash;

  // Uploads the batch's index arrays; the context owns them.
  ForwardContext(P const& p, Batch const& batch, AttentionImpl impl)
      : ForwardContext(p, batch, impl, DeviceBatch<P>::upload(p, batch)) {}

  // Advanced: reads `device`, which the caller keeps alive until the work enqueued with this context has
  // run. `structure` gives the sizes the host decides from; the values of its ids and token types are not
  // read.
  ForwardContext(P const& p, Batch const& structure, DeviceBatch<P> const& device, AttentionImpl impl)
      : policy(p), attention(impl) {
    std::int64_t const tokens = structure.total_tokens();
    auto const holds = [](Buffer const& b, std::int64_t n) { return b.dtype() == DType::kI32 && b.size() == n; };
    FLASHDEBERTA_REQUIRE(holds(device.input_ids, tokens) && holds(device.token_type_ids, tokens) &&
                             holds(device.positions, tokens) && holds(device.cu_seqlens, structure.batch_size() + 1),
                         "device batch of " << device.input_ids.size() << " ids, " << device.token_type_ids.size()
                                            << " token types, " << device.positions.size() << " positions and "
                                            << device.cu_seqlens.size() << " offsets (int32 each) does not hold a batch"
                                            << " of " << tokens << " tokens in " << structure.batch_size()
                                            << " sequences");
    point_at(device, structure);
  }

  std::int64_t tokens() const { return sequences.total_tokens; }

  // A fresh (T, cols) activation in the compute dtype.
  Buffer activation(std::int64_t cols) const { return policy.allocate(tokens() * cols, policy.compute_dtype()); }

 private:
  ForwardContext(P const& p, Batch const& batch, AttentionImpl impl, DeviceBatch<P> uploaded)
      : policy(p), attention(impl), owned_(std::move(uploaded)) {
    point_at(owned_, batch);
  }

  void point_at(DeviceBatch<P> const& device, Batch const& structure) {
    input_ids = static_cast<std::int32_t const*>(device.input_ids.data());
    token_type_ids = static_cast<std::int32_t const*>(device.token_type_ids.data());
    sequences.cu_seqlens = static_cast<std::int32_t const*>(device.cu_seqlens.data());
    sequences.positions = static_cast<std::int32_t const*>(device.positions.data());
    sequences.batch = structure.batch_size();
    sequences.total_tokens = structure.total_tokens();
    sequences.max_seqlen = structure.max_seqlen();
    sequences.max_position = structure.max_position();
    sequences.contiguous_positions = structure.contiguous_positions();
  }

  DeviceBatch<P> owned_;  // empty when the caller owns the arrays
};

template <class Buffer>
MatrixRef rows_of(Buffer const& buffer, std::int64_t rows, std::int64_t cols) {
  FLASHDEBERTA_ASSERT(buffer.size() >= rows * cols);
  return {buffer.data(), buffer.dtype(), rows, cols, cols};
}

}  // namespace flashdeberta

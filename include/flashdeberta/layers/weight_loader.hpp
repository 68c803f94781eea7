// Reads backbone tensors from a checkpoint, checks each shape against the config and puts it into the
// policy's memory in its compute dtype, copying as little as the policy allows (load_weight).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "flashdeberta/core/host_buffer.hpp"
#include "flashdeberta/core/weight_arena.hpp"
#include "flashdeberta/io/checkpoint.hpp"
#include "flashdeberta/policy/concepts.hpp"
#include "flashdeberta/policy/host_adoption.hpp"

namespace flashdeberta {

// A weight in policy memory with its logical (rows, cols) shape.
template <class Buffer>
struct DeviceMatrix {
  Buffer buffer;
  std::int64_t rows = 0;
  std::int64_t cols = 0;

  MatrixRef ref() const { return {buffer.data(), buffer.dtype(), rows, cols, cols}; }
  void const* data() const { return buffer.data(); }
};

// Host memory for a float32 weight a policy that computes on host memory adopts (AdoptsHostMemory): 64-byte
// aligned, in huge pages, carved from the WeightArena below its largest size, else a HostBuffer of its own. The
// span is written once; `owner` keeps it valid.
struct HostWeightMemory {
  std::span<float> values;
  std::shared_ptr<void> owner;
};

inline HostWeightMemory host_weight_memory(std::int64_t numel) {
  std::size_t const bytes = static_cast<std::size_t>(numel) * sizeof(float);
  if (bytes < WeightArena::kLargestCarved) {
    std::shared_ptr<void> carved = WeightArena::instance().allocate(bytes);
    return {{static_cast<float*>(carved.get()), static_cast<std::size_t>(numel)}, std::move(carved)};
  }
  auto owned = std::make_shared<HostBuffer>(numel, DType::kF32);
  return {{owned->as<float>(), static_cast<std::size_t>(numel)}, std::move(owned)};
}

// A weight the loader builds on the host (converted, stacked, interleaved): `fill` writes its `numel` float32
// values once, into memory the policy then adopts (host_weight_memory) or into a host vector it uploads.
template <ExecutionPolicy P, class Fill>
typename P::Buffer stage_weight(P const& policy, std::int64_t numel, Fill&& fill) {
  if constexpr (AdoptsHostMemory<P>) {
    if (policy.compute_dtype() == DType::kF32) {
      HostWeightMemory memory = host_weight_memory(numel);
      fill(memory.values);
      return policy.adopt_host(memory.values, std::move(memory.owner));
    }
  }
  std::vector<float> host(static_cast<std::size_t>(numel));
  fill(std::span<float>(host));
  return policy.upload(std::span<float const>(host), policy.compute_dtype());
}

// Policy memory for a weight the policy's own ops compute at load (e.g. the projected relative tables), in the
// compute dtype: on host policies the weights' huge-page memory (host_weight_memory), where a fresh 4 KiB page
// costs ~10 us to first touch on a VM.
template <ExecutionPolicy P>
typename P::Buffer allocate_weight(P const& policy, std::int64_t numel) {
  if constexpr (AdoptsHostMemory<P>) {
    if (policy.compute_dtype() == DType::kF32) {
      HostWeightMemory memory = host_weight_memory(numel);
      return policy.adopt_host(memory.values, std::move(memory.owner));
    }
  }
  return policy.allocate(numel, policy.compute_dtype());
}

// The policy's host threads as the checkpoint's conversions take them (SplitsHostWork), or none.
template <ExecutionPolicy P>
HostRanges host_ranges(P const& policy) {
  if constexpr (SplitsHostWork<P>) {
    return [&policy](std::int64_t count, std::function<void(std::int64_t, std::int64_t)> const& body) {
      policy.for_each_host_range(count, body);
    };
  } else {
    return {};
  }
}

// Tensor `name` of `checkpoint`, shape-checked, in policy memory. A float32 tensor in a mapped file is used where
// it lies when the policy computes on host memory in place (AdoptsHostMemory) and the checkpoint lends its
// mappings (CheckpointOptions::zero_copy): no copy, the buffer keeps the mapping alive. Otherwise it is uploaded
// straight from the mapping, and any other dtype (or a misaligned tensor) is converted once (stage_weight).
template <ExecutionPolicy P>
typename P::Buffer load_weight(P const& policy, Checkpoint const& checkpoint, std::string const& name,
                               std::vector<std::int64_t> const& shape) {
  if (std::optional<MappedTensor> mapped = checkpoint.mapped_f32(name, shape)) {
    if constexpr (AdoptsHostMemory<P>) {
      if (checkpoint.options().zero_copy && policy.compute_dtype() == DType::kF32)
        return policy.adopt_host(mapped->values, std::move(mapped->owner));
    }
    typename P::Buffer buffer = policy.upload(mapped->values, policy.compute_dtype());
    checkpoint.release(name);
    return buffer;
  }
  std::int64_t numel = 1;
  for (std::int64_t d : shape) numel *= d;
  return stage_weight(policy, numel,
                      [&](std::span<float> out) { checkpoint.read_f32_into(name, shape, out, host_ranges(policy)); });
}

// Whether load_table lends `name` as stored: a float16 / bfloat16 tensor in a mapped file, a float32 policy that
// gathers rows of such a table (AdoptsStoredTables), and a checkpoint that lends its mappings (zero_copy).
template <ExecutionPolicy P>
bool lends_stored_table(P const& policy, Checkpoint const& checkpoint, std::string const& name,
                        std::vector<std::int64_t> const& shape) {
  if constexpr (AdoptsStoredTables<P>) {
    return checkpoint.options().zero_copy && policy.compute_dtype() == DType::kF32 &&
           checkpoint.mapped_16bit(name, shape).has_value();
  } else {
    return false;
  }
}

// An embedding table, which only the embedding op reads, a row per token: kept as stored where lends_stored_table
// says so (no conversion, and half the memory of a float32 copy), else as load_weight gives it.
template <ExecutionPolicy P>
typename P::Buffer load_table(P const& policy, Checkpoint const& checkpoint, std::string const& name,
                              std::vector<std::int64_t> const& shape) {
  if constexpr (AdoptsStoredTables<P>) {
    if (lends_stored_table(policy, checkpoint, name, shape)) {
      MappedStoredTensor stored = *checkpoint.mapped_16bit(name, shape);
      return policy.adopt_host_table(stored.data, stored.numel, stored.dtype, std::move(stored.owner));
    }
  }
  return load_weight(policy, checkpoint, name, shape);
}

template <ExecutionPolicy P>
class WeightLoader {
 public:
  using Matrix = DeviceMatrix<typename P::Buffer>;

  WeightLoader(P const& policy, Checkpoint const& checkpoint) : policy_(policy), checkpoint_(checkpoint) {
    // A bare DebertaModel checkpoint has no prefix; one saved from a head model puts the backbone under
    // "deberta." (spec 7). Either is accepted.
    if (checkpoint.contains("embeddings.word_embeddings.weight")) {
      prefix_ = "";
    } else if (checkpoint.contains("deberta.embeddings.word_embeddings.weight")) {
      prefix_ = "deberta.";
    } else {
      FLASHDEBERTA_FAIL("checkpoint " << checkpoint.directory().string()
                                      << " holds no DeBERTa backbone: neither embeddings.word_embeddings.weight nor "
                                         "deberta.embeddings.word_embeddings.weight is present");
    }
  }

  // The backbone's tensors under an explicit prefix, e.g. GLiNER's "token_rep_layer.bert_layer.model.".
  WeightLoader(P const& policy, Checkpoint const& checkpoint, std::string prefix)
      : policy_(policy), checkpoint_(checkpoint), prefix_(std::move(prefix)) {
    FLASHDEBERTA_REQUIRE(checkpoint.contains(prefix_ + "embeddings.word_embeddings.weight"),
                         "checkpoint " << checkpoint.directory().string() << " holds no DeBERTa backbone under '"
                                       << prefix_ << "': " << prefix_
                                       << "embeddings.word_embeddings.weight is missing");
  }

  std::string const& prefix() const { return prefix_; }
  bool has(std::string const& name) const { return checkpoint_.contains(prefix_ + name); }
  Checkpoint const& checkpoint() const { return checkpoint_; }

  // Host float32 copy, shape-checked; for load-time preparation (fusing, precomputing).
  std::vector<float> read(std::string const& name, std::vector<std::int64_t> const& shape) const {
    return checkpoint_.read_f32(prefix_ + name, shape, host_ranges(policy_));
  }
  // The same into `out`, e.g. a part of a weight being stacked (staged).
  void read_into(std::string const& name, std::vector<std::int64_t> const& shape, std::span<float> out) const {
    checkpoint_.read_f32_into(prefix_ + name, shape, out, host_ranges(policy_));
  }

  // A tensor used as stored, in policy memory (load_weight: in place where it can be).
  typename P::Buffer tensor(std::string const& name, std::vector<std::int64_t> const& shape) const {
    return load_weight(policy_, checkpoint_, prefix_ + name, shape);
  }
  Matrix matrix(std::string const& name, std::int64_t rows, std::int64_t cols) const {
    return {tensor(name, {rows, cols}), rows, cols};
  }
  typename P::Buffer vector(std::string const& name, std::int64_t size) const { return tensor(name, {size}); }
  // An embedding table (load_table: as stored where the policy gathers its rows so).
  Matrix table(std::string const& name, std::int64_t rows, std::int64_t cols) const {
    return {load_table(policy_, checkpoint_, prefix_ + name, {rows, cols}), rows, cols};
  }

  // A (rows, cols) weight built at load: `fill` writes its float32 values once (stage_weight).
  template <class Fill>
  Matrix staged(std::int64_t rows, std::int64_t cols, Fill&& fill) const {
    return {stage_weight(policy_, rows * cols, std::forward<Fill>(fill)), rows, cols};
  }

  P const& policy() const { return policy_; }

 private:
  P const& policy_;
  Checkpoint const& checkpoint_;
  std::string prefix_;
};

}  // namespace flashdeberta

// Reads backbone tensors from a checkpoint, checks each shape against the config and moves it into the
// policy's memory in its compute dtype.
#pragma once

#include <span>
#include <string>
#include <utility>
#include <vector>

#include "flashdeberta/io/checkpoint.hpp"
#include "flashdeberta/policy/concepts.hpp"

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

  // Host float32 copy, shape-checked; for load-time preparation (fusing, precomputing).
  std::vector<float> read(std::string const& name, std::vector<std::int64_t> const& shape) const {
    return checkpoint_.read_f32(prefix_ + name, shape);
  }

  Matrix matrix(std::string const& name, std::int64_t rows, std::int64_t cols) const {
    return from_host(read(name, {rows, cols}), rows, cols);
  }

  typename P::Buffer vector(std::string const& name, std::int64_t size) const {
    std::vector<float> const host = read(name, {size});
    return policy_.upload(std::span<float const>(host), policy_.compute_dtype());
  }

  Matrix from_host(std::vector<float> const& host, std::int64_t rows, std::int64_t cols) const {
    FLASHDEBERTA_ASSERT(static_cast<std::int64_t>(host.size()) == rows * cols);
    return {policy_.upload(std::span<float const>(host), policy_.compute_dtype()), rows, cols};
  }

  P const& policy() const { return policy_; }

 private:
  P const& policy_;
  Checkpoint const& checkpoint_;
  std::string prefix_;
};

}  // namespace flashdeberta

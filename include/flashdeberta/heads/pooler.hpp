// HF's ContextPooler (spec 6.2), shared by sequence classification and multiple choice:
// pooled (B, H) = act(h[first token of each sequence] . W^T + b), act = pooler_hidden_act.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flashdeberta/heads/head_support.hpp"

namespace flashdeberta {

template <class P>
class ContextPooler {
  static_assert(ExecutionPolicy<P>, "ContextPooler<P> needs an execution policy");

 public:
  using Matrix = DeviceMatrix<typename P::Buffer>;

  ContextPooler(HeadWeights<P> const& w, ModelConfig const& c) : activation_(c.pooler_hidden_act) {
    // HF's pooler is Linear(pooler_hidden_size, pooler_hidden_size) applied to a hidden state of width
    // H and read by a classifier of input width H: it only runs when the two agree.
    FLASHDEBERTA_REQUIRE(c.pooler_hidden_size == c.hidden_size,
                         w.config_source()
                             << ": the " << w.head() << " pools with pooler_hidden_size = " << c.pooler_hidden_size
                             << ", which must equal hidden_size = " << c.hidden_size
                             << " (HF cannot run this config either)");
    dense_ = w.matrix("pooler.dense.weight", c.hidden_size, c.hidden_size, "pooler_hidden_size from config.json");
    bias_ = w.vector("pooler.dense.bias", c.hidden_size, "pooler_hidden_size from config.json");
  }

  // The packed index of token 0 of each sequence. HF pools hidden_states[:, 0] of the padded input; a
  // row whose position 0 is masked (left padding) would pool a padding position, whose value depends
  // on how padded queries attend, which flashdeberta does not compute, so it is refused.
  static std::vector<std::int32_t> first_tokens(Batch const& batch) {
    std::vector<std::int32_t> rows;
    rows.reserve(static_cast<std::size_t>(batch.batch_size()));
    for (std::int64_t b = 0; b < batch.batch_size(); ++b) {
      std::int32_t const first = batch.cu_seqlens[b];
      FLASHDEBERTA_REQUIRE(batch.sequence_length(b) > 0 && batch.positions[first] == 0,
                           "sequence " << b << ": the pooler reads the hidden state at position 0 (HF's "
                                       << "hidden_states[:, 0]), which attention_mask excludes in this row; the "
                                          "pooling heads need every row's first token (pad on the right)");
      rows.push_back(first);
    }
    return rows;
  }

  // (B, H) pooled states of the batch's sequences, in the compute dtype. `indices` holds the uploaded
  // row list, which the caller keeps until its work is fenced.
  typename P::Buffer forward(HeadInput<P> const& in, typename P::Buffer& indices) const {
    P const& p = in.policy;
    std::vector<std::int32_t> const rows = first_tokens(in.batch);
    auto const count = static_cast<std::int64_t>(rows.size());
    typename P::Buffer const first = gather_rows(p, in.hidden.ref(), std::span<std::int32_t const>(rows), indices);
    typename P::Buffer pooled = p.allocate(count * dense_.rows, p.compute_dtype());
    if (count > 0) {
      p.gemm({.a = rows_of(first, count, dense_.cols),
              .b = dense_.ref(),
              .bias = bias_.data(),
              .out = rows_of(pooled, count, dense_.rows),
              .activation = activation_});
    }
    return pooled;
  }

 private:
  Matrix dense_;
  typename P::Buffer bias_;
  Activation activation_ = Activation::kGelu;
};

}  // namespace flashdeberta

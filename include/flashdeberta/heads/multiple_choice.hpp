// Multiple choice (spec 6.5, v2/v3 only; HF has no v1 class): the [B, C, L] input is run as B * C
// sequences (choice c of example b is sequence b * C + c), each pooled as in sequence classification
// and scored by classifier [1, H]; HF's "logits" [B, C].
#pragma once

#include <cstdint>
#include <string>

#include "flashdeberta/heads/pooler.hpp"
#include "flashdeberta/heads/registered_head.hpp"

namespace flashdeberta {

template <class P>
class MultipleChoiceHead {
  static_assert(ExecutionPolicy<P>, "MultipleChoiceHead<P> needs an execution policy");

 public:
  using Matrix = DeviceMatrix<typename P::Buffer>;
  static constexpr HeadKind kKind = HeadKind::kMultipleChoice;

  MultipleChoiceHead(P const& policy, Checkpoint const& checkpoint, ModelConfig const& c)
      : MultipleChoiceHead(checked_weights(policy, checkpoint, c), c) {}

  // One logit per sequence (B * C of them); to_padded with the [B, C, L] input shape gives [B, C].
  DeviceHeadOutput<P> forward(HeadInput<P> const& in) const {
    P const& p = in.policy;
    typename P::Buffer indices;
    typename P::Buffer const pooled = pooler_.forward(in, indices);  // (B * C, H)
    std::int64_t const n = in.batch.batch_size();
    DeviceHeadTensor<P> logits{
        .name = "logits", .rows = HeadRows::kSequences, .row_count = n, .width = 1, .squeeze = true};
    logits.values = p.allocate(n, p.compute_dtype());
    if (n > 0) {
      p.gemm({.a = rows_of(pooled, n, classifier_.cols),
              .b = classifier_.ref(),
              .bias = bias_.data(),
              .out = rows_of(logits.values, n, 1)});
      p.fence();
    }
    DeviceHeadOutput<P> out;
    out.tensors.push_back(std::move(logits));
    return out;
  }

 private:
  // A v1 checkpoint is refused before any head tensor is read.
  static HeadWeights<P> checked_weights(P const& policy, Checkpoint const& checkpoint, ModelConfig const& c) {
    require_head_supported(c, kKind, model_config_file(checkpoint.directory()).string());
    return HeadWeights<P>(policy, checkpoint, "multiple-choice head");
  }

  MultipleChoiceHead(HeadWeights<P> const& w, ModelConfig const& c)
      : pooler_(w, c),
        classifier_(w.matrix("classifier.weight", 1, c.hidden_size, "one score per choice")),
        bias_(w.vector("classifier.bias", 1, "one score per choice")) {}

  ContextPooler<P> pooler_;
  Matrix classifier_;
  typename P::Buffer bias_;
};

template <>
struct RegisteredHead<HeadKind::kMultipleChoice> : HeadTemplate<MultipleChoiceHead> {};

}  // namespace flashdeberta

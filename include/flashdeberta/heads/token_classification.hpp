// Token classification (spec 6.3): logits (T, num_labels) = h . W^T + b per token, classifier
// [num_labels, H]; HF's "logits" [B, L, num_labels].
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flashdeberta/heads/registered_head.hpp"
#include "flashdeberta/heads/sequence_classification.hpp"

namespace flashdeberta {

template <class P>
class TokenClassificationHead {
  static_assert(ExecutionPolicy<P>, "TokenClassificationHead<P> needs an execution policy");

 public:
  using Matrix = DeviceMatrix<typename P::Buffer>;
  static constexpr HeadKind kKind = HeadKind::kTokenClassification;

  TokenClassificationHead(P const& policy, Checkpoint const& checkpoint, ModelConfig const& c)
      : TokenClassificationHead(HeadWeights<P>(policy, checkpoint, "token-classification head"), c) {}

  std::int64_t num_labels() const { return classifier_.rows; }
  std::vector<std::string> const& labels() const { return labels_; }

  DeviceHeadOutput<P> forward(HeadInput<P> const& in) const {
    P const& p = in.policy;
    std::int64_t const t = in.hidden.tokens;
    DeviceHeadTensor<P> logits{.name = "logits", .rows = HeadRows::kTokens, .row_count = t, .width = num_labels()};
    logits.tokens.resize(static_cast<std::size_t>(t));
    for (std::int64_t i = 0; i < t; ++i) logits.tokens[i] = i;
    logits.values = p.allocate(t * num_labels(), p.compute_dtype());
    if (t > 0) {
      p.gemm({.a = in.hidden.ref(),
              .b = classifier_.ref(),
              .bias = bias_.data(),
              .out = rows_of(logits.values, t, num_labels())});
      p.fence();
    }
    DeviceHeadOutput<P> out;
    out.tensors.push_back(std::move(logits));
    return out;
  }

 private:
  TokenClassificationHead(HeadWeights<P> const& w, ModelConfig const& c)
      : classifier_(w.matrix("classifier.weight", c.num_labels, c.hidden_size, num_labels_reason(c))),
        bias_(w.vector("classifier.bias", c.num_labels, num_labels_reason(c))),
        labels_(label_names(c)) {}

  Matrix classifier_;
  typename P::Buffer bias_;
  std::vector<std::string> labels_;
};

template <>
struct RegisteredHead<HeadKind::kTokenClassification> : HeadTemplate<TokenClassificationHead> {};

}  // namespace flashdeberta

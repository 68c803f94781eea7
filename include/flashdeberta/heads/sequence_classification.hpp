// Sequence classification (spec 6.2): logits (B, num_labels) = ContextPooler(h) . W^T + b, with
// classifier [num_labels, H]; num_labels = len(id2label) when config.json has id2label, else its
// num_labels, else 2 (HF's rule). No softmax, as HF.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flashdeberta/heads/pooler.hpp"
#include "flashdeberta/heads/registered_head.hpp"

namespace flashdeberta {

// The label names of a classification config: id2label, or HF's default "LABEL_<i>".
inline std::vector<std::string> label_names(ModelConfig const& c) {
  std::vector<std::string> names;
  for (std::int64_t i = 0; i < c.num_labels; ++i) {
    auto it = c.id2label.find(i);
    names.push_back(it != c.id2label.end() ? it->second : "LABEL_" + std::to_string(i));
  }
  return names;
}

// Where num_labels came from, for shape messages.
inline std::string num_labels_reason(ModelConfig const& c) {
  return "num_labels = " + std::to_string(c.num_labels) +
         (c.id2label.empty() ? std::string(" from config.json") : std::string(", the size of id2label in config.json"));
}

template <class P>
class SequenceClassificationHead {
  static_assert(ExecutionPolicy<P>, "SequenceClassificationHead<P> needs an execution policy");

 public:
  using Matrix = DeviceMatrix<typename P::Buffer>;
  static constexpr HeadKind kKind = HeadKind::kSequenceClassification;

  SequenceClassificationHead(P const& policy, Checkpoint const& checkpoint, ModelConfig const& c)
      : SequenceClassificationHead(HeadWeights<P>(policy, checkpoint, "sequence-classification head"), c) {}

  std::int64_t num_labels() const { return classifier_.rows; }
  std::vector<std::string> const& labels() const { return labels_; }

  DeviceHeadOutput<P> forward(HeadInput<P> const& in) const {
    P const& p = in.policy;
    typename P::Buffer indices;
    typename P::Buffer const pooled = pooler_.forward(in, indices);  // (B, H)
    std::int64_t const b = in.batch.batch_size();
    DeviceHeadTensor<P> logits{.name = "logits", .rows = HeadRows::kSequences, .row_count = b, .width = num_labels()};
    logits.values = p.allocate(b * num_labels(), p.compute_dtype());
    if (b > 0) {
      p.gemm({.a = rows_of(pooled, b, classifier_.cols),
              .b = classifier_.ref(),
              .bias = bias_.data(),
              .out = rows_of(logits.values, b, num_labels())});
      p.fence();
    }
    DeviceHeadOutput<P> out;
    out.tensors.push_back(std::move(logits));
    return out;
  }

 private:
  SequenceClassificationHead(HeadWeights<P> const& w, ModelConfig const& c)
      : pooler_(w, c),
        classifier_(w.matrix("classifier.weight", c.num_labels, c.hidden_size, num_labels_reason(c))),
        bias_(w.vector("classifier.bias", c.num_labels, num_labels_reason(c))),
        labels_(label_names(c)) {}

  ContextPooler<P> pooler_;
  Matrix classifier_;
  typename P::Buffer bias_;
  std::vector<std::string> labels_;
};

template <>
struct RegisteredHead<HeadKind::kSequenceClassification> : HeadTemplate<SequenceClassificationHead> {};

}  // namespace flashdeberta

// Extractive question answering (spec 6.4): qa_outputs [2, H] applied per token; channel 0 is HF's
// start_logits, channel 1 its end_logits, each [B, L].
#pragma once

#include <cstdint>
#include <string>

#include "flashdeberta/heads/registered_head.hpp"
#include "flashdeberta/heads/sequence_classification.hpp"

namespace flashdeberta {

template <class P>
class QuestionAnsweringHead {
  static_assert(ExecutionPolicy<P>, "QuestionAnsweringHead<P> needs an execution policy");

 public:
  using Matrix = DeviceMatrix<typename P::Buffer>;
  static constexpr HeadKind kKind = HeadKind::kQuestionAnswering;

  QuestionAnsweringHead(P const& policy, Checkpoint const& checkpoint, ModelConfig const& c)
      : QuestionAnsweringHead(HeadWeights<P>(policy, checkpoint, "question-answering head"), c) {}

  DeviceHeadOutput<P> forward(HeadInput<P> const& in) const {
    P const& p = in.policy;
    std::int64_t const t = in.hidden.tokens;
    std::size_t const element = dtype_size(p.compute_dtype());
    DeviceHeadOutput<P> out;
    char const* names[2] = {"start_logits", "end_logits"};
    for (std::int64_t channel = 0; channel < 2; ++channel) {
      DeviceHeadTensor<P> logits{
          .name = names[channel], .rows = HeadRows::kTokens, .row_count = t, .width = 1, .squeeze = true};
      logits.tokens.resize(static_cast<std::size_t>(t));
      for (std::int64_t i = 0; i < t; ++i) logits.tokens[i] = i;
      logits.values = p.allocate(t, p.compute_dtype());
      // One GEMM per channel (a row of qa_outputs each), so each output is contiguous as HF's.
      if (t > 0) {
        p.gemm({.a = in.hidden.ref(),
                .b = weight_.ref().row_range(channel, 1),
                .bias = static_cast<char const*>(bias_.data()) + channel * element,
                .out = rows_of(logits.values, t, 1)});
      }
      out.tensors.push_back(std::move(logits));
    }
    p.fence();
    return out;
  }

 private:
  QuestionAnsweringHead(HeadWeights<P> const& w, ModelConfig const& c) {
    // HF splits the logits into exactly two channels: any other num_labels fails there too.
    FLASHDEBERTA_REQUIRE(c.num_labels == 2, w.config_source()
                                                << ": the question-answering head needs num_labels = 2 "
                                                << "(start and end logits), not " << num_labels_reason(c));
    weight_ = w.matrix("qa_outputs.weight", 2, c.hidden_size, "2 x hidden_size");
    bias_ = w.vector("qa_outputs.bias", 2, "2 x hidden_size");
  }

  Matrix weight_;
  typename P::Buffer bias_;
};

template <>
struct RegisteredHead<HeadKind::kQuestionAnswering> : HeadTemplate<QuestionAnsweringHead> {};

}  // namespace flashdeberta

// DebertaWith<Variant, Policy, Head>: a backbone and a head loaded from one checkpoint directory. The
// head composes the model (it reads the backbone's output and, for the masked LM, its word embeddings)
// and never inherits from it. HF's classes are aliases: DebertaV3ForMaskedLM<P> and so on.
//
// Heads are `template <class P> class XHead` that static_assert ExecutionPolicy<P> in their body rather
// than constrain P: a constrained class template does not bind to a `template <class> class` parameter
// (and GCC 12 rejects the constrained spelling in lambdas), so this keeps dispatch_head portable.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>

#include "flashdeberta/heads/masked_lm.hpp"
#include "flashdeberta/heads/multiple_choice.hpp"
#include "flashdeberta/heads/question_answering.hpp"
#include "flashdeberta/heads/sequence_classification.hpp"
#include "flashdeberta/heads/token_classification.hpp"
#include "flashdeberta/variant/dispatch.hpp"

namespace flashdeberta {

template <template <class> class Head, class P>
concept ModelHead = ExecutionPolicy<P> && requires(Head<P> const& head, HeadInput<P> const& input) {
  { Head<P>::kKind } -> std::convertible_to<HeadKind>;
  { head.forward(input) } -> std::same_as<DeviceHeadOutput<P>>;
};

// Thread safety as DebertaModel: forward and forward_to_host may run on many threads at once, each with its
// own batch and HeadRequest; set_attention only while no forward runs (docs/thread-safety.md).
template <Variant V, ExecutionPolicy P, template <class> class Head>
class DebertaWith {
 public:
  using Backbone = DebertaModel<V, P>;
  using HeadType = Head<P>;
  static_assert(ModelHead<Head, P>, "Head<P> must declare kKind and forward(HeadInput<P>) -> DeviceHeadOutput<P>");

  static DebertaWith load(P policy, std::filesystem::path const& directory, ModelOptions options = {}) {
    ModelConfig config = load_model_config(directory);
    std::string const source = model_config_file(directory).string();
    require_variant_accepts<V>(config, source);
    require_head_supported(config, HeadType::kKind, source);
    Checkpoint const checkpoint = Checkpoint::open(directory, options.checkpoint);
    return DebertaWith(std::move(policy), std::move(config), checkpoint, options);
  }

  // The head is read first: a missing or misshapen head tensor fails before the backbone is loaded.
  DebertaWith(P policy, ModelConfig config, Checkpoint const& checkpoint, ModelOptions options = {})
      : head_(policy, checkpoint, config), backbone_(std::move(policy), std::move(config), checkpoint, options) {}

  Backbone const& backbone() const { return backbone_; }
  HeadType const& head() const { return head_; }
  ModelConfig const& config() const { return backbone_.config(); }
  P const& policy() const { return backbone_.policy(); }
  void set_attention(AttentionImpl impl) { backbone_.set_attention(impl); }

  // The head's outputs in policy memory (the policy is fenced). A batch whose forward and head outputs cannot
  // fit together is refused first, with the numbers (the masked LM's logits over a 128k vocabulary are the
  // largest: ask for the masked tokens only, HeadRequest::tokens).
  DeviceHeadOutput<P> forward(Batch const& batch, HeadRequest const& request = {}) const {
    if constexpr (requires { head_.output_bytes(batch, request, std::int64_t{}, DType{}); }) {
      batch.validate(config());
      ForwardMemory memory = backbone_.estimate_forward_memory(batch);
      add_head_outputs(memory, head_.output_bytes(batch, request, config().hidden_size, policy().compute_dtype()),
                       config().hidden_size, policy().compute_dtype());
      require_forward_fits(policy(), memory, backbone_.options().max_forward_bytes);
    }
    HiddenStates<P> const hidden = backbone_.forward(batch);
    return head_.forward(HeadInput<P>{backbone_.policy(), batch, hidden, backbone_.word_embeddings(), request});
  }

  // The same in host memory, float32: one row per packed token or per sequence (to_padded gives HF's layout).
  HeadOutput forward_to_host(Batch const& batch, HeadRequest const& request = {}) const {
    return download_outputs(backbone_.policy(), forward(batch, request));
  }

  // HF's output_hidden_states=True: the head's outputs on the last layer, and into `hidden_states` the
  // backbone's num_layers + 1 states (DebertaModel::forward_hidden_states), in policy memory.
  DeviceHeadOutput<P> forward(Batch const& batch, HeadRequest const& request,
                              std::vector<HiddenStates<P>>& hidden_states) const {
    hidden_states = backbone_.forward_hidden_states(batch);
    FLASHDEBERTA_REQUIRE(!hidden_states.empty(), "forward needs at least one token");
    return head_.forward(
        HeadInput<P>{backbone_.policy(), batch, hidden_states.back(), backbone_.word_embeddings(), request});
  }

 private:
  HeadType head_;
  Backbone backbone_;
};

template <ExecutionPolicy P>
using DebertaV1ForMaskedLM = DebertaWith<V1, P, MaskedLMHead>;
template <ExecutionPolicy P>
using DebertaV2ForMaskedLM = DebertaWith<V2, P, MaskedLMHead>;
template <ExecutionPolicy P>
using DebertaV3ForMaskedLM = DebertaWith<V3, P, MaskedLMHead>;

template <ExecutionPolicy P>
using DebertaV1ForSequenceClassification = DebertaWith<V1, P, SequenceClassificationHead>;
template <ExecutionPolicy P>
using DebertaV2ForSequenceClassification = DebertaWith<V2, P, SequenceClassificationHead>;
template <ExecutionPolicy P>
using DebertaV3ForSequenceClassification = DebertaWith<V3, P, SequenceClassificationHead>;

template <ExecutionPolicy P>
using DebertaV1ForTokenClassification = DebertaWith<V1, P, TokenClassificationHead>;
template <ExecutionPolicy P>
using DebertaV2ForTokenClassification = DebertaWith<V2, P, TokenClassificationHead>;
template <ExecutionPolicy P>
using DebertaV3ForTokenClassification = DebertaWith<V3, P, TokenClassificationHead>;

template <ExecutionPolicy P>
using DebertaV1ForQuestionAnswering = DebertaWith<V1, P, QuestionAnsweringHead>;
template <ExecutionPolicy P>
using DebertaV2ForQuestionAnswering = DebertaWith<V2, P, QuestionAnsweringHead>;
template <ExecutionPolicy P>
using DebertaV3ForQuestionAnswering = DebertaWith<V3, P, QuestionAnsweringHead>;

// No v1 alias: HF has no DebertaForMultipleChoice (loading one is refused at run time too).
template <ExecutionPolicy P>
using DebertaV2ForMultipleChoice = DebertaWith<V2, P, MultipleChoiceHead>;
template <ExecutionPolicy P>
using DebertaV3ForMultipleChoice = DebertaWith<V3, P, MultipleChoiceHead>;

namespace detail {

template <std::size_t I, class Fn, class Result>
Result dispatch_head_from(HeadKind kind, Fn& fn) {
  if constexpr (I < kHeadFacts.size()) {
    constexpr HeadKind candidate = kHeadFacts[I].kind;
    if (kind == candidate) return RegisteredHead<candidate>::call(fn);
    return dispatch_head_from<I + 1, Fn, Result>(kind, fn);
  } else {
    FLASHDEBERTA_FAIL("dispatch_head: '" << head_kind_name(kind) << "' is the backbone alone, not a head");
  }
}

}  // namespace detail

// The run-time -> compile-time choice of a head: calls fn.template operator()<Head>() with the template
// registered for `kind` (RegisteredHead), folding over kHeadFacts. HeadKind::kBase is the backbone alone and
// has no head template: the caller handles it.
template <class Fn>
decltype(auto) dispatch_head(HeadKind kind, Fn&& fn) {
  using Result = decltype(RegisteredHead<HeadKind::kMaskedLM>::call(fn));
  return detail::dispatch_head_from<1, Fn, Result>(kind, fn);  // kHeadFacts[0] is the backbone
}

}  // namespace flashdeberta

// DebertaModel<Variant, Policy>: the DeBERTa backbone, loaded once from a Hugging Face checkpoint
// directory and run on packed batches. Heads compose a model; they never inherit from it.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "flashdeberta/io/checkpoint.hpp"
#include "flashdeberta/io/config_json.hpp"
#include "flashdeberta/layers/embeddings.hpp"
#include "flashdeberta/layers/encoder.hpp"
#include "flashdeberta/model/forward_memory.hpp"

namespace flashdeberta {

struct ModelOptions {
  AttentionImpl attention = AttentionImpl::kFlash;
  // forward refuses a batch whose estimated memory (estimate_forward_memory) exceeds this many bytes, or what
  // the policy reports available when that is less; 0: only the policy's report.
  std::int64_t max_forward_bytes = 0;
  // How load() opens the checkpoint: by default float32 weights stay in the mapped file where the policy can
  // read them in place (CheckpointOptions::zero_copy), and the model keeps the file mapped.
  CheckpointOptions checkpoint;
};

// The last hidden state of a packed batch, (T, H) in policy memory.
template <ExecutionPolicy P>
struct HiddenStates {
  typename P::Buffer values;
  std::int64_t tokens = 0;
  std::int64_t hidden_size = 0;

  MatrixRef ref() const { return {values.data(), values.dtype(), tokens, hidden_size, hidden_size}; }
};

// Rejects a config whose structure the variant does not implement, naming the variant to use instead.
template <Variant V>
void require_variant_accepts(ModelConfig const& config, std::string const& source) {
  bool const v1_config = config.model_type == ModelType::kDeberta;
  FLASHDEBERTA_REQUIRE(config.model_type == V::kModelType,
                       source << ": model_type '" << (v1_config ? "deberta" : "deberta-v2") << "' is a "
                              << (v1_config ? "DeBERTa v1" : "DeBERTa v2/v3") << " checkpoint; load it with "
                              << (v1_config ? "DebertaV1" : "DebertaV2 or DebertaV3") << ", not " << V::kName);
  FLASHDEBERTA_REQUIRE(V::kConvLayer || config.conv_kernel_size == 0,
                       source << ": conv_kernel_size=" << config.conv_kernel_size
                              << " asks for the v2 conv layer, which " << V::kName
                              << " has not; load it with DebertaV2");
  FLASHDEBERTA_REQUIRE(!config.talking_head, source << ": talking_head=true is not supported");
  FLASHDEBERTA_REQUIRE(config.all_head_size() > 0 && config.head_size > 0,
                       source << ": head size " << config.head_size << " x " << config.num_heads << " heads");
}

// Immutable once loaded: any number of threads may call forward, forward_to_host and enqueue_forward on one
// model at once (each call allocates its own activations); set_attention only while no forward runs. Per-call
// attention, or a policy per thread over the shared weights: ForwardContext + enqueue_forward
// (docs/thread-safety.md).
template <Variant V, ExecutionPolicy P>
class DebertaModel {
 public:
  using Policy = P;
  using VariantType = V;

  static DebertaModel load(P policy, std::filesystem::path const& directory, ModelOptions options = {}) {
    ModelConfig config = load_model_config(directory);
    require_variant_accepts<V>(config, model_config_file(directory).string());
    Checkpoint const checkpoint = Checkpoint::open(directory, options.checkpoint);
    return DebertaModel(std::move(policy), std::move(config), checkpoint, options);
  }

  DebertaModel(P policy, ModelConfig config, Checkpoint const& checkpoint, ModelOptions options = {})
      : policy_(std::move(policy)),
        config_(std::move(config)),
        options_(options),
        weights_(WeightLoader<P>(policy_, checkpoint), config_) {}

  // The backbone stored under `backbone_prefix` in a larger model's checkpoint (GLiNER:
  // "token_rep_layer.bert_layer.model.").
  DebertaModel(P policy, ModelConfig config, Checkpoint const& checkpoint, std::string const& backbone_prefix,
               ModelOptions options = {})
      : policy_(std::move(policy)),
        config_(std::move(config)),
        options_(options),
        weights_(WeightLoader<P>(policy_, checkpoint, backbone_prefix), config_) {}

  ModelConfig const& config() const { return config_; }
  P const& policy() const { return policy_; }
  ModelOptions const& options() const { return options_; }
  void set_attention(AttentionImpl impl) { options_.attention = impl; }
  std::string const& backbone_prefix() const { return weights_.prefix; }
  // The word-embedding table (V, E) in policy memory; the masked-LM decoder is tied to it.
  MatrixRef word_embeddings() const { return weights_.embeddings.word_embeddings().ref(); }

  // Validates the batch (Batch::validate) and refuses, with the numbers, one whose estimated memory does not
  // fit (require_forward_fits), before anything is allocated.
  HiddenStates<P> forward(Batch const& batch) const {
    batch.validate(config_);
    FLASHDEBERTA_REQUIRE(batch.batch_size() > 0, "forward needs at least one sequence");
    require_forward_fits(policy_, estimate_forward_memory(batch), options_.max_forward_bytes);
    ForwardContext<P> const ctx(policy_, batch, options_.attention);
    HiddenStates<P> states = enqueue_forward(ctx);
    if (states.tokens > 0) policy_.fence();
    return states;
  }

  // What a forward of `batch` allocates in policy memory, estimated from its sizes (forward_memory.hpp); the
  // batch must be valid (Batch::validate_structure).
  ForwardMemory estimate_forward_memory(Batch const& batch) const {
    bool const conv_layer = V::kConvLayer && config_.conv_kernel_size > 0;
    return flashdeberta::estimate_forward_memory(policy_, config_, conv_layer, batch, options_.attention);
  }

  // Advanced: enqueues the forward of a context the caller built and returns without waiting; the
  // states are ready after policy().fence(). Nothing here validates ids (forward does, with
  // Batch::validate: ids outside the tables would be read out of bounds) or synchronizes, so that
  // CudaGraphForward can capture it; ctx's arrays must stay alive until the work has run.
  HiddenStates<P> enqueue_forward(ForwardContext<P> const& ctx) const {
    if (ctx.tokens() == 0) return {policy_.allocate(0, policy_.compute_dtype()), 0, config_.hidden_size};
    auto embedded = weights_.embeddings.forward(ctx);
    auto hidden = weights_.encoder.forward(ctx, std::move(embedded));
    return {std::move(hidden), ctx.tokens(), config_.hidden_size};
  }

  // The output of every layer, 1 .. num_layers (HF's hidden_states[1:]), each (T, H); the policy is fenced.
  std::vector<HiddenStates<P>> forward_all_layers(Batch const& batch) const { return every_state(batch, false); }

  // HF's output_hidden_states: the embedding output, then every layer's (num_layers + 1 states, the last one
  // forward's), each (T, H); the policy is fenced.
  std::vector<HiddenStates<P>> forward_hidden_states(Batch const& batch) const { return every_state(batch, true); }

  // The hidden states in host memory, packed (T, H).
  std::vector<float> forward_to_host(Batch const& batch) const {
    HiddenStates<P> const states = forward(batch);
    std::vector<float> host(static_cast<std::size_t>(states.tokens * states.hidden_size));
    policy_.download(states.values, std::span<float>(host));
    return host;
  }

 private:
  std::vector<HiddenStates<P>> every_state(Batch const& batch, bool with_embedded) const {
    batch.validate(config_);
    FLASHDEBERTA_REQUIRE(batch.batch_size() > 0, "forward needs at least one sequence");
    ForwardMemory memory = estimate_forward_memory(batch);
    // Each state kept is (T, H) more than a forward holds at once.
    std::int64_t const kept = (config_.num_layers + 1) * batch.total_tokens() * config_.hidden_size *
                              static_cast<std::int64_t>(dtype_size(policy_.compute_dtype()));
    memory.activations += kept;
    memory.total += kept;
    require_forward_fits(policy_, memory, options_.max_forward_bytes);
    ForwardContext<P> const ctx(policy_, batch, options_.attention);
    std::vector<HiddenStates<P>> out;
    if (ctx.tokens() == 0) return out;
    std::vector<typename P::Buffer> earlier;
    auto last = weights_.encoder.forward(ctx, weights_.embeddings.forward(ctx), &earlier, with_embedded);
    policy_.fence();
    for (auto& b : earlier) out.push_back({std::move(b), ctx.tokens(), config_.hidden_size});
    out.push_back({std::move(last), ctx.tokens(), config_.hidden_size});
    return out;
  }

  struct Weights {
    Weights(WeightLoader<P> const& w, ModelConfig const& c) : prefix(w.prefix()), embeddings(w, c), encoder(w, c) {}
    std::string prefix;
    Embeddings<P> embeddings;
    Encoder<V, P> encoder;
  };

  P policy_;
  ModelConfig config_;
  ModelOptions options_;
  Weights weights_;
};

template <ExecutionPolicy P>
using DebertaV1 = DebertaModel<V1, P>;
template <ExecutionPolicy P>
using DebertaV2 = DebertaModel<V2, P>;
template <ExecutionPolicy P>
using DebertaV3 = DebertaModel<V3, P>;

// Scatters packed (T, H) rows back to a zero-filled (B, L, H) array; L = batch.padded_length, or else the
// largest position + 1 (the longest sequence, for batches built from sequences).
inline std::vector<float> unpack_to_padded(Batch const& batch, std::span<float const> packed, std::int64_t hidden) {
  batch.validate_structure();
  FLASHDEBERTA_REQUIRE(
      hidden >= 0 && static_cast<std::int64_t>(packed.size()) == batch.total_tokens() * hidden,
      "unpack_to_padded: " << packed.size() << " values are not " << batch.total_tokens() << " tokens x " << hidden);
  std::int64_t const length = batch.padded_length > 0 ? batch.padded_length : batch.max_position();
  std::vector<float> padded(static_cast<std::size_t>(batch.batch_size() * length * hidden), 0.0f);
  for (std::int64_t b = 0; b < batch.batch_size(); ++b) {
    for (std::int64_t t = batch.cu_seqlens[b]; t < batch.cu_seqlens[b + 1]; ++t) {
      std::int64_t const row = b * length + batch.positions[t];
      std::copy_n(packed.begin() + t * hidden, hidden, padded.begin() + row * hidden);
    }
  }
  return padded;
}

}  // namespace flashdeberta

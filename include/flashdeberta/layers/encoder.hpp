// The encoder (spec 5.4, 5.5): the relative-position context it owns (relative_context.hpp, built once at
// load), the stack of layers and, for v2 checkpoints that have one, the conv layer after layer 0.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "flashdeberta/layers/attention.hpp"
#include "flashdeberta/layers/conv_layer.hpp"
#include "flashdeberta/layers/feed_forward.hpp"

namespace flashdeberta {

template <Variant V, ExecutionPolicy P>
class Encoder {
 public:
  Encoder(WeightLoader<P> const& w, ModelConfig const& c) : config_(c) {
    P const& p = w.policy();
    // Before the layers are sized from the config: num_hidden_layers 1e8 would otherwise end in "out of memory".
    std::string const layer_prefix = w.prefix() + "encoder.layer.";
    std::int64_t const stored = w.checkpoint().count_numbered(layer_prefix);
    FLASHDEBERTA_REQUIRE(
        c.num_layers <= stored,
        "checkpoint " << w.checkpoint().directory().string() << ": config key 'num_hidden_layers' is " << c.num_layers
                      << ", but the checkpoint holds " << stored << " layer" << (stored == 1 ? "" : "s") << " ("
                      << layer_prefix
                      << (stored == 0 ? "N.*: none" : "0.* to " + layer_prefix + std::to_string(stored - 1) + ".*")
                      << ")");
    relative_ = RelativeContext<P>::template load<V>(w, c);
    layers_.reserve(static_cast<std::size_t>(c.num_layers));
    for (std::int64_t l = 0; l < c.num_layers; ++l)
      layers_.push_back({AttentionBlock<V, P>(w, c, l, relative_.get()), FeedForwardBlock<P>(w, c, l)});
    if constexpr (V::kConvLayer) {
      if (c.conv_kernel_size > 0) conv_.emplace(w, c);
    }
    if (relative_) relative_->table = {};  // the projected tables hold all that attention needs from it
    p.fence();
  }

  // The last layer's output; with `earlier_layers`, the outputs of layers 0 .. N-2 are moved there, in order
  // (GLiNER's LayersFuser reads every layer), preceded by the embedding output with `with_embedded` (HF's
  // hidden_states[0]).
  typename P::Buffer forward(ForwardContext<P> const& ctx, typename P::Buffer embedded,
                             std::vector<typename P::Buffer>* earlier_layers = nullptr,
                             bool with_embedded = false) const {
    typename P::Buffer x = std::move(embedded);
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      auto attended = layers_[l].attention.forward(ctx, x, relative_.get());
      auto y = layers_[l].feed_forward.forward(ctx, attended);
      if (l == 0 && conv_) y = conv_->forward(ctx, x, y);  // x is still the embedding output here
      if (earlier_layers != nullptr && (l > 0 || with_embedded)) earlier_layers->push_back(std::move(x));
      x = std::move(y);
    }
    return x;
  }

 private:
  struct Layer {
    AttentionBlock<V, P> attention;
    FeedForwardBlock<P> feed_forward;
  };
  ModelConfig config_;
  std::unique_ptr<RelativeContext<P>> relative_;
  std::vector<Layer> layers_;
  std::optional<ConvLayer<P>> conv_;
};

}  // namespace flashdeberta

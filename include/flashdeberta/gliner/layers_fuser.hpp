// GLiNER's LayersFuser (docs/gliner.md section 4.1, fuse_layers: true), per text over its own tokens (GLiNER's
// batch of one): U_n (L, Hb) the output of encoder layer n (1 .. N); z_n = mean over the L tokens of
// squeeze(U_n) (Linear Hb -> 1); s = sigmoid(W2 relu(W1 z)); out = output_projection(sum_n s_n U_n).
//
// squeeze and output_projection are policy GEMMs over all packed tokens; the per-text means, the N x N/2
// gate MLP (a few dozen numbers) and the per-text weighted sum of the layers (weights differ per text, no
// policy op scales rows by sequence) run on the host.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "flashdeberta/core/batch.hpp"
#include "flashdeberta/gliner/gliner_layers.hpp"
#include "flashdeberta/model/deberta_model.hpp"

namespace flashdeberta {

template <ExecutionPolicy P>
class GlinerLayersFuser {
 public:
  GlinerLayersFuser() = default;

  static GlinerLayersFuser load(P const& p, GlinerTensors const& t, std::int64_t hidden, std::int64_t layers) {
    std::string const pre = "token_rep_layer.bert_layer.layers_fuser.";
    GlinerLayersFuser f;
    f.layers_ = layers;
    f.squeeze_ = GlinerLinear<P>::load(p, t, pre + "squeeze", 1, hidden);
    f.w1_ = t.matrix(pre + "W1.weight", layers / 2, layers);
    f.b1_ = t.read(pre + "W1.bias", {layers / 2});
    f.w2_ = t.matrix(pre + "W2.weight", layers, layers / 2);
    f.b2_ = t.read(pre + "W2.bias", {layers});
    f.output_ = GlinerLinear<P>::load(p, t, pre + "output_projection", hidden, hidden);
    return f;
  }

  // Every layer's output (N of (T, Hb)) -> the fused (T, Hb) in policy memory.
  PolicyMatrix<P> forward(P const& p, Batch const& batch, std::vector<HiddenStates<P>> const& states) const {
    PolicyMatrix<P> out = allocate_matrix(p, states.front().tokens, states.front().hidden_size);
    forward_into(p, batch, states, out.ref());
    return out;
  }

  // The same into out (T, Hb), which may be a row or column range of a wider matrix.
  void forward_into(P const& p, Batch const& batch, std::vector<HiddenStates<P>> const& states, MatrixRef out) const {
    auto const n_layers = static_cast<std::int64_t>(states.size());
    FLASHDEBERTA_REQUIRE(n_layers == layers_, "LayersFuser: " << n_layers << " layers, expected " << layers_);
    std::int64_t const tokens = states.front().tokens;
    std::int64_t const hb = states.front().hidden_size;
    std::vector<HostMatrix> u;
    std::vector<HostMatrix> z;  // squeeze(U_n): (T, 1)
    for (auto const& s : states) {
      z.push_back(to_host(p, squeeze_.forward(p, s.ref())));
      HostMatrix host(tokens, hb);
      p.fence();
      p.download(s.values, std::span<float>(host.values));
      u.push_back(std::move(host));
    }
    HostMatrix fused(tokens, hb);
    for (std::int64_t b = 0; b < batch.batch_size(); ++b) {
      std::int64_t const first = batch.cu_seqlens[b];
      std::int64_t const last = batch.cu_seqlens[b + 1];
      std::vector<float> zm(static_cast<std::size_t>(n_layers));
      for (std::int64_t l = 0; l < n_layers; ++l) {
        float acc = 0.0f;
        for (std::int64_t t = first; t < last; ++t) acc += z[l].values[t];
        zm[l] = acc / static_cast<float>(last - first);
      }
      std::vector<float> hidden(static_cast<std::size_t>(layers_ / 2));
      for (std::int64_t i = 0; i < layers_ / 2; ++i) {
        float acc = b1_[i];
        for (std::int64_t l = 0; l < n_layers; ++l) acc += w1_.row(i)[l] * zm[l];
        hidden[i] = std::max(acc, 0.0f);
      }
      for (std::int64_t l = 0; l < n_layers; ++l) {
        float acc = b2_[l];
        for (std::int64_t i = 0; i < layers_ / 2; ++i) acc += w2_.row(l)[i] * hidden[i];
        float const gate = 1.0f / (1.0f + std::exp(-acc));
        for (std::int64_t t = first; t < last; ++t)
          for (std::int64_t j = 0; j < hb; ++j) fused.row(t)[j] += gate * u[l].row(t)[j];
      }
    }
    PolicyMatrix<P> const fp = to_policy(p, fused);
    output_.forward_into(p, fp.ref(), out);
  }

 private:
  std::int64_t layers_ = 0;
  GlinerLinear<P> squeeze_;
  HostMatrix w1_;
  std::vector<float> b1_;
  HostMatrix w2_;
  std::vector<float> b2_;
  GlinerLinear<P> output_;
};

}  // namespace flashdeberta

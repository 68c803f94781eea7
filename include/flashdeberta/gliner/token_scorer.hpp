// GLiNER's Scorer of token-level models (docs/gliner.md section 5): T = proj_token(h) (n, 2D), L =
// proj_label(P) (C, 2D), and for every word w and label c, x = [T0_w ; L0_c ; T1_w . L1_c] (3D) through
// out_mlp (3D -> 4D -> 3): start, end and inside logits, (n C, 3) with row w C + c.
//
// The projections and out_mlp are policy GEMMs over all texts of a batch; the pair matrix (a broadcast and an
// elementwise product, no policy op) is built on the host, once for all texts.
#pragma once

#include <cstdint>

#include "flashdeberta/gliner/gliner_batch.hpp"
#include "flashdeberta/gliner/gliner_layers.hpp"

namespace flashdeberta {

template <ExecutionPolicy P>
class GlinerTokenScorer {
 public:
  GlinerTokenScorer() = default;

  static GlinerTokenScorer load(P const& p, GlinerTensors const& t, std::int64_t d) {
    GlinerTokenScorer s;
    s.d_ = d;
    s.proj_token_ = GlinerLinear<P>::load(p, t, "scorer.proj_token", 2 * d, d);
    s.proj_label_ = GlinerLinear<P>::load(p, t, "scorer.proj_label", 2 * d, d);
    s.out_ = GlinerMlp<P>::load(p, t, "scorer.out_mlp", 3 * d, 4 * d, 3);
    return s;
  }

  // words (W, D) and labels (C, D) of every text of `batch` -> logits (sum_i n_i C_i, 3) in policy memory: text i's
  // (n_i C_i, 3) block after those of the texts before it, row w C_i + c.
  PolicyMatrix<P> forward(P const& p, MatrixRef words, MatrixRef labels, GlinerBatch const& batch) const {
    std::int64_t const d = d_;
    HostMatrix const tok = to_host(p, proj_token_.forward(p, words));
    HostMatrix const lab = to_host(p, proj_label_.forward(p, labels));
    std::int64_t pairs = 0;
    for (std::int64_t i = 0; i < batch.texts(); ++i) pairs += batch.words_of(i) * batch.labels_of(i);
    HostMatrix x(pairs, 3 * d);
    std::int64_t row = 0;
    for (std::int64_t i = 0; i < batch.texts(); ++i) {
      for (std::int64_t w = batch.word_offset[i]; w < batch.word_offset[i + 1]; ++w) {
        for (std::int64_t l = batch.label_offset[i]; l < batch.label_offset[i + 1]; ++l, ++row) {
          float* out = x.row(row);
          for (std::int64_t j = 0; j < d; ++j) {
            out[j] = tok.row(w)[j];
            out[d + j] = lab.row(l)[j];
            out[2 * d + j] = tok.row(w)[d + j] * lab.row(l)[d + j];
          }
        }
      }
    }
    PolicyMatrix<P> const xp = to_policy(p, x);
    return out_.forward(p, xp.ref());
  }

 private:
  std::int64_t d_ = 0;
  GlinerLinear<P> proj_token_;
  GlinerLinear<P> proj_label_;
  GlinerMlp<P> out_;
};

}  // namespace flashdeberta

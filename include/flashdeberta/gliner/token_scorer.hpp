// GLiNER's Scorer of token-level models (docs/gliner.md section 5): T = proj_token(h) (n, 2D), L =
// proj_label(P) (C, 2D), and for every word w and label c, x = [T0_w ; L0_c ; T1_w . L1_c] (3D) through
// out_mlp (3D -> 4D -> 3): start, end and inside logits, (n C, 3) with row w C + c.
//
// The projections and out_mlp are policy GEMMs; the (n C, 3D) pair matrix (a broadcast and an elementwise
// product, no policy op) is built on the host.
#pragma once

#include <cstdint>

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

  // words (n, D), labels (C, D) -> logits (n C, 3) on the host.
  HostMatrix forward(P const& p, HostMatrix const& words, HostMatrix const& labels) const {
    std::int64_t const n = words.rows;
    std::int64_t const c = labels.rows;
    std::int64_t const d = d_;
    PolicyMatrix<P> const wp = to_policy(p, words);
    PolicyMatrix<P> const lp = to_policy(p, labels);
    HostMatrix const tok = to_host(p, proj_token_.forward(p, wp.ref()));
    HostMatrix const lab = to_host(p, proj_label_.forward(p, lp.ref()));
    HostMatrix x(n * c, 3 * d);
    for (std::int64_t w = 0; w < n; ++w) {
      for (std::int64_t l = 0; l < c; ++l) {
        float* row = x.row(w * c + l);
        for (std::int64_t j = 0; j < d; ++j) {
          row[j] = tok.row(w)[j];
          row[d + j] = lab.row(l)[j];
          row[2 * d + j] = tok.row(w)[d + j] * lab.row(l)[d + j];
        }
      }
    }
    PolicyMatrix<P> const xp = to_policy(p, x);
    return to_host(p, out_.forward(p, xp.ref()));
  }

 private:
  std::int64_t d_ = 0;
  GlinerLinear<P> proj_token_;
  GlinerLinear<P> proj_label_;
  GlinerMlp<P> out_;
};

}  // namespace flashdeberta

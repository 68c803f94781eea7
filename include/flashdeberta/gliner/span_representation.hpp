// GLiNER's span representations (docs/gliner.md section 4.4), every span_mode, for all texts of a batch at once:
// a (W K, D) matrix in policy memory, row w K + k represents the span of words w .. w+k of w's text. Rows of
// spans past their text's end are zeros or whatever the layers make of zeros; decoding never reads them (GLiNER
// drops them too).
//
// Linear layers run as policy GEMMs over all texts' rows. Where GLiNER concatenates, multiplies by a per-width
// query or slides a window, the linear algebra is rewritten so that gathers and GEMMs do the work:
//   marker rows  [start_s ; end_{s+k}] gathered from the (W, 2 D) [start | end] matrix, span by span;
//   query        relu(W (h_s . q_k) + b) = relu((W diag(q_k)) h_s + b): K weights scaled once at load;
//   cat          relu(W [h_s ; q_k] + b) = relu(W_h h_s + (W_q q_k + b)): K biases computed once at load;
//   conv         sum_j W[:, :, j] h_{s+j} = W' [h_s ; ... ; h_{s+k}] with W' the kernel laid out as (D, (k+1) D),
//                over a window matrix gathered once.
// Two steps have no policy op and run on the host, once for all texts: markerV1's per-text mean and the
// conv_max / conv_mean / conv_sum pooling.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "flashdeberta/gliner/gliner_batch.hpp"
#include "flashdeberta/gliner/gliner_config.hpp"
#include "flashdeberta/gliner/gliner_layers.hpp"

namespace flashdeberta {

template <ExecutionPolicy P>
class GlinerSpanLayer {
 public:
  GlinerSpanLayer() = default;

  static GlinerSpanLayer load(P const& p, GlinerTensors const& t, GlinerConfig const& c) {
    GlinerSpanLayer layer;
    layer.mode_ = c.span_mode;
    std::int64_t const d = c.hidden_size;
    std::int64_t const k_max = c.max_width;
    layer.d_ = d;
    layer.k_ = k_max;
    std::string const pre = "span_rep_layer.span_rep_layer.";
    switch (c.span_mode) {
      case GlinerSpanMode::kMarkerV0:
      case GlinerSpanMode::kMarkerV1: {
        layer.start_ = GlinerMlp<P>::load(p, t, pre + "project_start", d, 4 * d, d);
        layer.end_ = GlinerMlp<P>::load(p, t, pre + "project_end", d, 4 * d, d);
        // out_project = Linear(parts D, 4 D), ReLU, Linear(4 D, D). Its first Linear is kept split by the parts
        // of its input (start, end, text mean), so that each part is projected once per word (per text) and a
        // span adds its parts' rows, instead of a GEMM over every span's concatenation (12x the rows).
        std::int64_t const parts = c.span_mode == GlinerSpanMode::kMarkerV1 ? 3 : 2;
        HostMatrix const first = t.matrix(pre + "out_project.0.weight", 4 * d, parts * d);
        std::vector<float> const first_bias = t.read(pre + "out_project.0.bias", {4 * d});
        for (std::int64_t part = 0; part < parts; ++part) {
          HostMatrix columns(4 * d, d);
          for (std::int64_t o = 0; o < 4 * d; ++o) std::copy_n(first.row(o) + part * d, d, columns.row(o));
          layer.out_parts_.push_back(
              GlinerLinear<P>::from_host(p, columns, part == 0 ? first_bias : std::vector<float>{}));
        }
        layer.out_ = GlinerLinear<P>::load(p, t, pre + "out_project.3", d, 4 * d);
        break;
      }
      case GlinerSpanMode::kMarker:
        layer.start_ = GlinerMlp<P>::load(p, t, pre + "project_start", d, 2 * d, d);
        layer.end_ = GlinerMlp<P>::load(p, t, pre + "project_end", d, 2 * d, d);
        layer.out_ = GlinerLinear<P>::load(p, t, pre + "out_project", d, 2 * d);
        break;
      case GlinerSpanMode::kQuery: {
        HostMatrix const q = t.matrix(pre + "query_seg", d, k_max);
        HostMatrix const w = t.matrix(pre + "project.0.weight", d, d);
        std::vector<float> const b = t.read(pre + "project.0.bias", {d});
        for (std::int64_t k = 0; k < k_max; ++k) {
          HostMatrix wk(d, d);
          for (std::int64_t o = 0; o < d; ++o)
            for (std::int64_t j = 0; j < d; ++j) wk.row(o)[j] = w.row(o)[j] * q.row(j)[k];
          layer.per_width_.push_back(GlinerLinear<P>::from_host(p, wk, b));
        }
        break;
      }
      case GlinerSpanMode::kMlp:
        layer.out_ = GlinerLinear<P>::load(p, t, pre + "mlp", k_max * d, d);
        break;
      case GlinerSpanMode::kCat: {
        constexpr std::int64_t kQuery = 128;
        std::vector<float> const q = t.read(pre + "query_seg", {kQuery, k_max});  // read flat: a view(K, 128)
        HostMatrix const w = t.matrix(pre + "project.0.weight", d, d + kQuery);
        std::vector<float> const b = t.read(pre + "project.0.bias", {d});
        HostMatrix w_h(d, d);
        for (std::int64_t o = 0; o < d; ++o) std::copy_n(w.row(o), d, w_h.row(o));
        for (std::int64_t k = 0; k < k_max; ++k) {
          std::vector<float> bias(static_cast<std::size_t>(d));
          for (std::int64_t o = 0; o < d; ++o) {
            double acc = b[o];
            for (std::int64_t j = 0; j < kQuery; ++j) acc += double(w.row(o)[d + j]) * q[k * kQuery + j];
            bias[o] = static_cast<float>(acc);
          }
          layer.per_width_.push_back(GlinerLinear<P>::from_host(p, w_h, bias));
        }
        break;
      }
      case GlinerSpanMode::kConvConv:
      case GlinerSpanMode::kConvShare: {
        bool const share = c.span_mode == GlinerSpanMode::kConvShare;
        std::vector<float> shared;
        if (share) shared = t.read(pre + "conv_weigth", {d, d, k_max});
        for (std::int64_t k = share ? 0 : 1; k < k_max; ++k) {
          std::int64_t const kernel = k + 1;
          std::vector<float> w;
          std::vector<float> bias;
          std::int64_t stride = kernel;  // last-axis length of the stored weight
          if (share) {
            w = shared;
            stride = k_max;
          } else {
            std::string const conv = pre + "convs." + std::to_string(k - 1) + ".conv.";
            w = t.read(conv + "weight", {d, d, kernel});
            bias = t.read(conv + "bias", {d});
          }
          HostMatrix laid(d, kernel * d);  // laid[o, j D + i] = w[o, i, j]
          for (std::int64_t o = 0; o < d; ++o)
            for (std::int64_t j = 0; j < kernel; ++j)
              for (std::int64_t i = 0; i < d; ++i) laid.row(o)[j * d + i] = w[(o * d + i) * stride + j];
          layer.per_width_.push_back(GlinerLinear<P>::from_host(p, laid, bias));
        }
        if (!share) {
          HostMatrix identity(d, d);
          for (std::int64_t o = 0; o < d; ++o) identity.row(o)[o] = 1.0f;
          layer.identity_ = GlinerLinear<P>::from_host(p, identity, {});
        }
        layer.out_ = GlinerLinear<P>::load(p, t, pre + "project.1", d, d);
        break;
      }
      case GlinerSpanMode::kConvMax:
      case GlinerSpanMode::kConvMean:
      case GlinerSpanMode::kConvSum:
        layer.out_ = GlinerLinear<P>::load(p, t, pre + "project.1", d, d);
        break;
      case GlinerSpanMode::kTokenLevel:
        FLASHDEBERTA_FAIL("GlinerSpanLayer: a token_level model has no span layer");
    }
    return layer;
  }

  // words (W + 1, D): every text's word vectors after the BiLSTM, text i at rows [word_offset[i],
  // word_offset[i + 1]) of `batch`, row W zero -> (W K, D), text i at rows [K word_offset[i], K word_offset[i + 1]).
  PolicyMatrix<P> forward(P const& p, PolicyMatrix<P> const& words, GlinerBatch const& batch,
                          GlinerZeroRow<P> const& zero) const {
    std::int64_t const w = batch.words();
    std::int64_t const d = d_;
    std::int64_t const kk = k_;
    MatrixRef const h = words.ref().row_range(0, w);  // (W, D)
    switch (mode_) {
      case GlinerSpanMode::kMarkerV0:
      case GlinerSpanMode::kMarkerV1:
      case GlinerSpanMode::kMarker:
        return marker_forward(p, words, batch, zero);
      case GlinerSpanMode::kMlp: {
        PolicyMatrix<P> out = out_.forward(p, h, Activation::kRelu);  // (W, K D) = (W K, D)
        return {std::move(out.buffer), w * kk, d};
      }
      case GlinerSpanMode::kQuery:
      case GlinerSpanMode::kCat: {
        PolicyMatrix<P> out = allocate_matrix(p, w * kk, d);
        MatrixRef const wide{out.buffer.data(), out.buffer.dtype(), w, kk * d, kk * d};  // (W, K D) view
        for (std::int64_t k = 0; k < kk; ++k)
          per_width_[k].forward_into(p, h, wide.columns(k * d, d), Activation::kRelu);
        return out;
      }
      case GlinerSpanMode::kConvConv:
      case GlinerSpanMode::kConvShare:
        return conv_forward(p, words, batch);
      default:
        return pool_forward(p, words, batch);
    }
  }

 private:
  // marker / markerV0 / markerV1: relu([start_s ; end_{s+k} (; mean)]) through out_project. The ReLU is applied
  // per part, in each part's last GEMM. marker: the concatenation is gathered, then out_project. markerV0/V1:
  // out_project's first Linear runs per part on the words (texts), and each span's hidden row is
  // relu(P_start[s] + P_end[s + k] (+ P_mean[text])), one gather-add (the embedding op) before the second Linear.
  PolicyMatrix<P> marker_forward(P const& p, PolicyMatrix<P> const& words, GlinerBatch const& batch,
                                 GlinerZeroRow<P> const& zero) const {
    std::int64_t const w = batch.words();
    std::int64_t const d = d_;
    std::int64_t const kk = k_;
    bool const v1 = mode_ == GlinerSpanMode::kMarkerV1;
    std::int64_t const parts = v1 ? 3 : 2;
    MatrixRef const h = words.ref().row_range(0, w);
    PolicyMatrix<P> const ends = allocate_matrix(p, w + 1, 2 * d);  // [start(h_w) | end(h_w)], row W zero
    start_.forward_into(p, h, ends.ref().row_range(0, w).columns(0, d), Activation::kRelu);
    end_.forward_into(p, h, ends.ref().row_range(0, w).columns(d, d), Activation::kRelu);
    zero.fill_last_row(p, ends.ref());
    auto const starts = upload_rows(p, batch.span_rows(kk, false));
    auto const stops = upload_rows(p, batch.span_rows(kk, true));
    if (mode_ == GlinerSpanMode::kMarker) {
      PolicyMatrix<P> const cat = allocate_matrix(p, w * kk, parts * d);  // (W K, 2 D)
      gather_rows(p, ends.ref().columns(0, d), starts, cat.ref().columns(0, d));
      gather_rows(p, ends.ref().columns(d, d), stops, cat.ref().columns(d, d));
      return out_.forward(p, cat.ref());
    }
    // (W + 1, 4 D) each; row W (the zero word spans past a text's end point to): the bias alone, or zeros.
    PolicyMatrix<P> const from_start = out_parts_[0].forward(p, ends.ref().columns(0, d));
    PolicyMatrix<P> const from_end = out_parts_[1].forward(p, ends.ref().columns(d, d));
    std::optional<PolicyMatrix<P>> from_mean;  // (B + 1, 4 D)
    std::optional<typename P::Buffer> texts;
    if (v1) {
      from_mean = out_parts_[2].forward(p, text_means(p, words, batch).ref());
      texts = upload_rows(p, batch.span_texts(kk));
    }
    PolicyMatrix<P> const hidden = allocate_matrix(p, w * kk, from_start.cols);  // (W K, 4 D)
    if (w * kk > 0) {
      p.embedding({.ids = static_cast<std::int32_t const*>(starts.data()),
                   .positions = static_cast<std::int32_t const*>(stops.data()),
                   .token_types = texts ? static_cast<std::int32_t const*>(texts->data()) : nullptr,
                   .word = from_start.ref(),
                   .position = from_end.ref(),
                   .token_type = from_mean ? from_mean->ref() : MatrixRef{},
                   .out = hidden.ref(),
                   .relu = true});
    }
    return out_.forward(p, hidden.ref());
  }

  // markerV1's third part, relu(mean of the text's words), (B + 1, D) with row B zero. On the host, once for
  // all texts: a per-text column mean is no policy op (the GEMM reads its right operand transposed).
  PolicyMatrix<P> text_means(P const& p, PolicyMatrix<P> const& words, GlinerBatch const& batch) const {
    std::int64_t const d = d_;
    HostMatrix const h = to_host(p, words);
    HostMatrix means(batch.texts() + 1, d);
    for (std::int64_t i = 0; i < batch.texts(); ++i) {
      std::int64_t const n = batch.words_of(i);
      if (n == 0) continue;
      for (std::int64_t j = 0; j < d; ++j) {
        float acc = 0.0f;
        for (std::int64_t s = 0; s < n; ++s) acc += h.row(batch.word_offset[i] + s)[j];
        means.row(i)[j] = std::max(acc / static_cast<float>(n), 0.0f);
      }
    }
    return to_policy(p, means);
  }

  // conv_conv / conv_share: v(s, k) = relu(W_k [h_s ; ... ; h_{s+k}]) by one GEMM per width over the first
  // (k + 1) D columns of one (W, K D) window matrix, row w = [h_w ; h_{w+1} ; ... ; h_{w+K-1}] (zeros past the
  // text): K gathers build it. conv_conv's width 1 is relu(h_s), an identity GEMM with the ReLU epilogue.
  PolicyMatrix<P> conv_forward(P const& p, PolicyMatrix<P> const& words, GlinerBatch const& batch) const {
    std::int64_t const w = batch.words();
    std::int64_t const d = d_;
    std::int64_t const kk = k_;
    bool const share = mode_ == GlinerSpanMode::kConvShare;
    PolicyMatrix<P> const window = allocate_matrix(p, w, kk * d);
    for (std::int64_t j = 0; j < kk; ++j)
      gather_rows(p, words.ref(), upload_rows(p, batch.window_rows(j)), window.ref().columns(j * d, d));
    PolicyMatrix<P> const v = allocate_matrix(p, w * kk, d);
    MatrixRef const wide{v.buffer.data(), v.buffer.dtype(), w, kk * d, kk * d};  // (W, K D) view
    if (!share) identity_.forward_into(p, words.ref().row_range(0, w), wide.columns(0, d), Activation::kRelu);
    for (std::int64_t k = share ? 0 : 1; k < kk; ++k) {
      per_width_[share ? k : k - 1].forward_into(p, window.ref().columns(0, (k + 1) * d), wide.columns(k * d, d),
                                                 Activation::kRelu);
    }
    return out_.forward(p, v.ref());
  }

  // conv_max / conv_mean / conv_sum: the window's elementwise max, mean or sum, relu, project.1. The pooling runs
  // on the host (no policy op takes an elementwise max), once for all texts.
  PolicyMatrix<P> pool_forward(P const& p, PolicyMatrix<P> const& words, GlinerBatch const& batch) const {
    std::int64_t const d = d_;
    std::int64_t const kk = k_;
    HostMatrix const h = to_host(p, words);
    HostMatrix v(batch.words() * kk, d);
    for (std::int64_t i = 0; i < batch.texts(); ++i) {
      std::int64_t const n = batch.words_of(i);
      std::int64_t const first = batch.word_offset[i];
      for (std::int64_t s = 0; s < n; ++s) {
        for (std::int64_t k = 0; k < kk && s + k < n; ++k) {
          float* row = v.row((first + s) * kk + k);
          for (std::int64_t j = 0; j < d; ++j) {
            float acc = h.row(first + s)[j];
            for (std::int64_t u = 1; u <= k; ++u) {
              float const x = h.row(first + s + u)[j];
              acc = mode_ == GlinerSpanMode::kConvMax ? std::max(acc, x) : acc + x;
            }
            if (mode_ == GlinerSpanMode::kConvMean) acc /= static_cast<float>(k + 1);
            row[j] = std::max(acc, 0.0f);
          }
        }
      }
    }
    PolicyMatrix<P> const vp = to_policy(p, v);
    return out_.forward(p, vp.ref());
  }

  GlinerSpanMode mode_ = GlinerSpanMode::kMarkerV0;
  std::int64_t d_ = 0;
  std::int64_t k_ = 0;
  GlinerMlp<P> start_;
  GlinerMlp<P> end_;
  std::vector<GlinerLinear<P>> out_parts_;  // markerV0/V1: out_project's first Linear, by input part
  GlinerLinear<P> out_;  // marker, mlp, conv and pooling modes: out_project; markerV0/V1: its second Linear
  std::vector<GlinerLinear<P>> per_width_;
  GlinerLinear<P> identity_;  // conv_conv: (D, D) identity, for relu(h) as a GEMM epilogue
};

}  // namespace flashdeberta

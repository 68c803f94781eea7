// GLiNER's span representations (docs/gliner.md section 4.4), every span_mode, as a (n K, D) matrix in policy
// memory: row s K + k represents the span of words s .. s+k. Rows with s + k >= n (spans past the text) are
// zeros or whatever the layers make of zeros; decoding never reads them (GLiNER drops them too).
//
// Linear layers run as policy GEMMs. Where GLiNER concatenates, multiplies by a per-width query or slides a
// window, the linear algebra is rewritten so that GEMMs still do the work:
//   query  relu(W (h_s . q_k) + b) = relu((W diag(q_k)) h_s + b): K weights scaled once at load;
//   cat    relu(W [h_s ; q_k] + b) = relu(W_h h_s + (W_q q_k + b)): K biases computed once at load;
//   conv   sum_j W[:, :, j] h_{s+j} = W' [h_s ; ... ; h_{s+k}] with W' the kernel laid out as (D, (k+1) D).
// Building the concatenated inputs (and the max/mean/sum windows) runs on the host: it is a gather that no
// policy op expresses for a column range (the embedding op writes whole rows) and it costs O(n K D) copies
// against the GEMMs' O(n K D^2) work.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

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
        std::int64_t const parts = c.span_mode == GlinerSpanMode::kMarkerV1 ? 3 : 2;
        layer.out_mlp_ = GlinerMlp<P>::load(p, t, pre + "out_project", parts * d, 4 * d, d);
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

  // h (n, D): the word vectors after the BiLSTM -> (n K, D).
  PolicyMatrix<P> forward(P const& p, HostMatrix const& h) const {
    std::int64_t const n = h.rows;
    std::int64_t const d = d_;
    std::int64_t const kk = k_;
    PolicyMatrix<P> const x = to_policy(p, h);
    switch (mode_) {
      case GlinerSpanMode::kMarkerV0:
      case GlinerSpanMode::kMarkerV1:
      case GlinerSpanMode::kMarker: {
        // relu([start_s ; end_{s+k} (; mean)]): the ReLU is applied per part, in the parts' last GEMM.
        HostMatrix const start = to_host(p, start_.forward(p, x.ref(), Activation::kRelu));
        HostMatrix const end = to_host(p, end_.forward(p, x.ref(), Activation::kRelu));
        bool const v1 = mode_ == GlinerSpanMode::kMarkerV1;
        std::vector<float> mean(static_cast<std::size_t>(d), 0.0f);
        if (v1 && n > 0) {
          for (std::int64_t j = 0; j < d; ++j) {
            float acc = 0.0f;
            for (std::int64_t s = 0; s < n; ++s) acc += h.row(s)[j];
            mean[j] = std::max(acc / static_cast<float>(n), 0.0f);
          }
        }
        std::int64_t const parts = v1 ? 3 : 2;
        HostMatrix cat(n * kk, parts * d);
        for (std::int64_t s = 0; s < n; ++s) {
          for (std::int64_t k = 0; k < kk && s + k < n; ++k) {
            float* row = cat.row(s * kk + k);
            std::copy_n(start.row(s), d, row);
            std::copy_n(end.row(s + k), d, row + d);
            if (v1) std::copy(mean.begin(), mean.end(), row + 2 * d);
          }
        }
        PolicyMatrix<P> const cat_p = to_policy(p, cat);
        if (mode_ == GlinerSpanMode::kMarker) return out_.forward(p, cat_p.ref());
        return out_mlp_.forward(p, cat_p.ref());
      }
      case GlinerSpanMode::kMlp: {
        PolicyMatrix<P> out = out_.forward(p, x.ref(), Activation::kRelu);  // (n, K D) = (n K, D)
        return {std::move(out.buffer), n * kk, d};
      }
      case GlinerSpanMode::kQuery:
      case GlinerSpanMode::kCat: {
        PolicyMatrix<P> out = allocate_matrix(p, n * kk, d);
        MatrixRef const wide{out.buffer.data(), out.buffer.dtype(), n, kk * d, kk * d};  // (n, K D) view
        for (std::int64_t k = 0; k < kk; ++k)
          per_width_[k].forward_into(p, x.ref(), wide.columns(k * d, d), Activation::kRelu);
        p.fence();
        return out;
      }
      case GlinerSpanMode::kConvConv:
      case GlinerSpanMode::kConvShare:
        return conv_forward(p, h);
      default:
        return pool_forward(p, h);
    }
  }

 private:
  // conv_conv / conv_share: v(s, k) by one GEMM per width over the stacked window; relu; project.1.
  PolicyMatrix<P> conv_forward(P const& p, HostMatrix const& h) const {
    std::int64_t const n = h.rows;
    std::int64_t const d = d_;
    std::int64_t const kk = k_;
    bool const share = mode_ == GlinerSpanMode::kConvShare;
    HostMatrix grid(n * kk, d);  // width 1 of conv_conv is h_s itself (after the ReLU)
    if (!share) {
      for (std::int64_t s = 0; s < n; ++s)
        for (std::int64_t j = 0; j < d; ++j) grid.row(s * kk)[j] = std::max(h.row(s)[j], 0.0f);
    }
    PolicyMatrix<P> const v = to_policy(p, grid);
    MatrixRef const wide{v.buffer.data(), v.buffer.dtype(), n, kk * d, kk * d};  // (n, K D) view
    for (std::int64_t k = share ? 0 : 1; k < kk; ++k) {
      std::int64_t const kernel = k + 1;
      HostMatrix window(n, kernel * d);  // rows past the text read the zero padding
      for (std::int64_t s = 0; s < n; ++s)
        for (std::int64_t j = 0; j < kernel && s + j < n; ++j) std::copy_n(h.row(s + j), d, window.row(s) + j * d);
      PolicyMatrix<P> const wp = to_policy(p, window);
      per_width_[share ? k : k - 1].forward_into(p, wp.ref(), wide.columns(k * d, d), Activation::kRelu);
      p.fence();  // `wp` is freed on the next iteration
    }
    return out_.forward(p, v.ref());
  }

  // conv_max / conv_mean / conv_sum: the window's elementwise max, mean or sum on the host; relu; project.1.
  PolicyMatrix<P> pool_forward(P const& p, HostMatrix const& h) const {
    std::int64_t const n = h.rows;
    std::int64_t const d = d_;
    std::int64_t const kk = k_;
    HostMatrix v(n * kk, d);
    for (std::int64_t s = 0; s < n; ++s) {
      for (std::int64_t k = 0; k < kk && s + k < n; ++k) {
        float* row = v.row(s * kk + k);
        for (std::int64_t j = 0; j < d; ++j) {
          float acc = h.row(s)[j];
          for (std::int64_t w = 1; w <= k; ++w) {
            float const x = h.row(s + w)[j];
            acc = mode_ == GlinerSpanMode::kConvMax ? std::max(acc, x) : acc + x;
          }
          if (mode_ == GlinerSpanMode::kConvMean) acc /= static_cast<float>(k + 1);
          row[j] = std::max(acc, 0.0f);
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
  GlinerMlp<P> out_mlp_;
  GlinerLinear<P> out_;
  std::vector<GlinerLinear<P>> per_width_;
};

}  // namespace flashdeberta

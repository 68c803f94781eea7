// GLiNER's LstmSeq2SeqEncoder (docs/gliner.md section 4.3): nn.LSTM(D, D/2, num_layers, bidirectional,
// batch_first) over one text's words, packed by its word count, so each text runs alone over its own words.
//
// The input side of every step (W_ih x + b_ih + b_hh, both directions) is one policy GEMM over all words;
// the recurrence (W_hh h and the gates) runs on the host in float32: it is sequential over the words and
// a (4 D/2, D/2) matrix-vector product per step, which no policy op expresses and which is too small to
// gain from a device (a CUDA version would want a persistent kernel; until then the host does it).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "flashdeberta/gliner/gliner_layers.hpp"

namespace flashdeberta {

template <ExecutionPolicy P>
class GlinerBiLstm {
 public:
  GlinerBiLstm() = default;

  // D = hidden_size of gliner_config.json; keys rnn.lstm.{weight_ih,weight_hh,bias_ih,bias_hh}_l{r}[_reverse].
  static GlinerBiLstm load(P const& p, GlinerTensors const& t, std::int64_t hidden, std::int64_t layers) {
    GlinerBiLstm lstm;
    std::int64_t const half = hidden / 2;
    lstm.half_ = half;
    for (std::int64_t l = 0; l < layers; ++l) {
      Layer layer;
      HostMatrix input(8 * half, hidden);  // forward rows then reverse rows
      std::vector<float> bias(static_cast<std::size_t>(8 * half));
      for (int dir = 0; dir < 2; ++dir) {
        std::string const suffix = "_l" + std::to_string(l) + (dir == 1 ? "_reverse" : "");
        HostMatrix const w_ih = t.matrix("rnn.lstm.weight_ih" + suffix, 4 * half, hidden);
        std::copy(w_ih.values.begin(), w_ih.values.end(), input.row(dir * 4 * half));
        std::vector<float> const b_ih = t.read("rnn.lstm.bias_ih" + suffix, {4 * half});
        std::vector<float> const b_hh = t.read("rnn.lstm.bias_hh" + suffix, {4 * half});
        for (std::int64_t i = 0; i < 4 * half; ++i) bias[dir * 4 * half + i] = b_ih[i] + b_hh[i];
        layer.recurrent[dir] = t.matrix("rnn.lstm.weight_hh" + suffix, 4 * half, half);
      }
      layer.input = GlinerLinear<P>::from_host(p, input, bias);
      lstm.layers_.push_back(std::move(layer));
    }
    return lstm;
  }

  bool empty() const { return layers_.empty(); }

  // words (n, D) -> (n, D) = [forward | backward] of the last layer.
  HostMatrix forward(P const& p, HostMatrix words) const {
    for (Layer const& layer : layers_) {
      if (words.rows == 0) break;
      PolicyMatrix<P> const x = to_policy(p, words);
      HostMatrix const gates_in = to_host(p, layer.input.forward(p, x.ref()));  // (n, 8 half)
      HostMatrix out(words.rows, 2 * half_);
      for (int dir = 0; dir < 2; ++dir) run_direction(layer.recurrent[dir], gates_in, dir, out);
      words = std::move(out);
    }
    return words;
  }

 private:
  struct Layer {
    GlinerLinear<P> input;    // (8 half, in): W_ih of both directions, bias b_ih + b_hh
    HostMatrix recurrent[2];  // W_hh (4 half, half) per direction
  };

  static float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

  // PyTorch's gate order i, f, g, o; zero initial states.
  void run_direction(HostMatrix const& w_hh, HostMatrix const& gates_in, int dir, HostMatrix& out) const {
    std::int64_t const n = gates_in.rows;
    std::int64_t const h = half_;
    std::vector<float> state(static_cast<std::size_t>(h), 0.0f);
    std::vector<float> cell(static_cast<std::size_t>(h), 0.0f);
    std::vector<float> g(static_cast<std::size_t>(4 * h));
    for (std::int64_t step = 0; step < n; ++step) {
      std::int64_t const t = dir == 0 ? step : n - 1 - step;
      float const* in = gates_in.row(t) + dir * 4 * h;
      for (std::int64_t r = 0; r < 4 * h; ++r) {
        float const* w = w_hh.row(r);
        float acc = 0.0f;
        for (std::int64_t j = 0; j < h; ++j) acc += w[j] * state[j];
        g[r] = in[r] + acc;
      }
      for (std::int64_t j = 0; j < h; ++j) {
        cell[j] = sigmoid(g[h + j]) * cell[j] + sigmoid(g[j]) * std::tanh(g[2 * h + j]);
        state[j] = sigmoid(g[3 * h + j]) * std::tanh(cell[j]);
        out.row(t)[dir * h + j] = state[j];
      }
    }
  }

  std::int64_t half_ = 0;
  std::vector<Layer> layers_;
};

}  // namespace flashdeberta

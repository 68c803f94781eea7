// GLiNER's LstmSeq2SeqEncoder (docs/gliner.md section 4.3): nn.LSTM(D, D/2, num_layers, bidirectional,
// batch_first) over each text's words, packed by its word count: every text runs over its own words only,
// and all texts of a batch run together, on the policy.
//
// The texts are packed as pack_padded_sequence does: sorted by word count, longest first, so that the texts
// still running at step s are the first B_s of that order, and the rows of step s are one contiguous block of a
// step-major matrix. The reverse direction's step s reads word n - 1 - s of each text, so both directions run
// the same B_s texts at every step and share it:
//   input side   both directions' W_ih x + b_ih + b_hh, two GEMMs over all words (gathered in each
//                direction's step-major order) into one (W, 8 H) matrix;
//   each step    one GEMM of the previous step's [h_fwd | h_rev] (B_s, 2 H) by the block-diagonal
//                [W_hh_fwd 0; 0 W_hh_rev] (8 H, 2 H), then one lstm_cell over both directions.
// The block-diagonal weight doubles the recurrent products, which cost nothing next to a launch at these sizes
// (a (64, 512) x (512, 2048) step on a GPU), in exchange for one GEMM per step instead of two.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "flashdeberta/gliner/gliner_layers.hpp"

namespace flashdeberta {

// The step-major order of a batch of texts of n_i words (word_offset, GlinerBatch), both directions.
struct LstmPacking {
  std::vector<std::int64_t> step_offset{0};  // (N + 1) rows of step s: [step_offset[s], step_offset[s + 1])
  std::vector<std::int32_t> forward_words;   // (W) text-order word read at each step-major row, forward
  std::vector<std::int32_t> reverse_words;   // (W) the same, reverse direction
  std::vector<std::int32_t> forward_rows;    // (W) step-major row of each text-order word, forward
  std::vector<std::int32_t> reverse_rows;    // (W) the same, reverse direction

  explicit LstmPacking(std::vector<std::int64_t> const& word_offset) {
    auto const texts = static_cast<std::int64_t>(word_offset.size()) - 1;
    std::int64_t const words = word_offset.back();
    auto const length = [&](std::int64_t i) { return word_offset[i + 1] - word_offset[i]; };
    std::vector<std::int64_t> order(static_cast<std::size_t>(texts));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return length(a) > length(b); });
    std::int64_t const steps = texts > 0 ? length(order.front()) : 0;
    forward_words.reserve(static_cast<std::size_t>(words));
    reverse_words.reserve(static_cast<std::size_t>(words));
    forward_rows.resize(static_cast<std::size_t>(words));
    reverse_rows.resize(static_cast<std::size_t>(words));
    for (std::int64_t s = 0; s < steps; ++s) {
      for (std::int64_t i : order) {
        std::int64_t const n = length(i);
        if (n <= s) break;
        auto const row = static_cast<std::int32_t>(forward_words.size());
        std::int64_t const fwd = word_offset[i] + s;
        std::int64_t const rev = word_offset[i] + n - 1 - s;
        forward_words.push_back(static_cast<std::int32_t>(fwd));
        reverse_words.push_back(static_cast<std::int32_t>(rev));
        forward_rows[fwd] = row;
        reverse_rows[rev] = row;
      }
      step_offset.push_back(static_cast<std::int64_t>(forward_words.size()));
    }
  }

  std::int64_t steps() const { return static_cast<std::int64_t>(step_offset.size()) - 1; }
  std::int64_t rows_of(std::int64_t s) const { return step_offset[s + 1] - step_offset[s]; }
};

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
      HostMatrix recurrent(8 * half, 2 * half);  // block-diagonal: forward rows read h_fwd, reverse rows h_rev
      for (int dir = 0; dir < 2; ++dir) {
        std::string const suffix = "_l" + std::to_string(l) + (dir == 1 ? "_reverse" : "");
        HostMatrix const w_ih = t.matrix("rnn.lstm.weight_ih" + suffix, 4 * half, hidden);
        std::vector<float> const b_ih = t.read("rnn.lstm.bias_ih" + suffix, {4 * half});
        std::vector<float> const b_hh = t.read("rnn.lstm.bias_hh" + suffix, {4 * half});
        std::vector<float> bias(static_cast<std::size_t>(4 * half));
        for (std::int64_t i = 0; i < 4 * half; ++i) bias[i] = b_ih[i] + b_hh[i];
        layer.input[dir] = GlinerLinear<P>::from_host(p, w_ih, bias);
        HostMatrix const w_hh = t.matrix("rnn.lstm.weight_hh" + suffix, 4 * half, half);
        for (std::int64_t r = 0; r < 4 * half; ++r)
          std::copy_n(w_hh.row(r), half, recurrent.row(dir * 4 * half + r) + dir * half);
      }
      layer.recurrent = GlinerLinear<P>::from_host(p, recurrent, {});
      lstm.layers_.push_back(std::move(layer));
    }
    return lstm;
  }

  bool empty() const { return layers_.empty(); }

  // words (W, D), text i at rows [word_offset[i], word_offset[i + 1]), overwritten with the last layer's
  // [forward | backward] outputs (W, D).
  void forward(P const& p, MatrixRef words, std::vector<std::int64_t> const& word_offset) const {
    std::int64_t const w = words.rows;
    if (w == 0) return;
    LstmPacking const pack(word_offset);
    FLASHDEBERTA_REQUIRE(pack.step_offset.back() == w,
                         "GLiNER BiLSTM: " << w << " word rows but the texts hold " << pack.step_offset.back());
    std::int64_t const h = half_;
    std::int64_t const running = pack.rows_of(0);  // B_0: every text with words
    auto const forward_words = upload_rows(p, pack.forward_words);
    auto const reverse_words = upload_rows(p, pack.reverse_words);
    auto const forward_rows = upload_rows(p, pack.forward_rows);
    auto const reverse_rows = upload_rows(p, pack.reverse_rows);
    PolicyMatrix<P> const x = allocate_matrix(p, w, 2 * words.cols);       // [x fwd order | x rev order]
    PolicyMatrix<P> const gates = allocate_matrix(p, w, 8 * h);            // step-major, [fwd | rev]
    PolicyMatrix<P> const states = allocate_matrix(p, w, 2 * h);           // step-major h, [fwd | rev]
    PolicyMatrix<P> const recurrent = allocate_matrix(p, running, 8 * h);  // one step's W_hh h_prev
    typename P::Buffer const cell_buffer = p.allocate(running * 2 * h, DType::kF32);
    MatrixRef const cell{cell_buffer.data(), DType::kF32, running, 2 * h, 2 * h};
    for (Layer const& layer : layers_) {
      std::int64_t const in = words.cols;
      gather_rows(p, words, forward_words, x.ref().columns(0, in));
      gather_rows(p, words, reverse_words, x.ref().columns(in, in));
      layer.input[0].forward_into(p, x.ref().columns(0, in), gates.ref().columns(0, 4 * h));
      layer.input[1].forward_into(p, x.ref().columns(in, in), gates.ref().columns(4 * h, 4 * h));
      for (std::int64_t s = 0; s < pack.steps(); ++s) {
        std::int64_t const rows = pack.rows_of(s);
        LstmCellArgs step{.gates_in = gates.ref().row_range(pack.step_offset[s], rows),
                          .cell = cell.row_range(0, rows),
                          .hidden = states.ref().row_range(pack.step_offset[s], rows),
                          .directions = 2};
        if (s > 0) {
          // The texts still running are the first `rows` of the previous step's.
          layer.recurrent.forward_into(p, states.ref().row_range(pack.step_offset[s - 1], rows),
                                       recurrent.ref().row_range(0, rows));
          step.gates_rec = recurrent.ref().row_range(0, rows);
          step.cell_prev = step.cell;
        }
        p.lstm_cell(step);
      }
      gather_rows(p, states.ref().columns(0, h), forward_rows, words.columns(0, h));
      gather_rows(p, states.ref().columns(h, h), reverse_rows, words.columns(h, h));
    }
  }

 private:
  struct Layer {
    GlinerLinear<P> input[2];   // W_ih (4 H, in) per direction, bias b_ih + b_hh
    GlinerLinear<P> recurrent;  // block-diagonal W_hh (8 H, 2 H), no bias
  };

  std::int64_t half_ = 0;
  std::vector<Layer> layers_;
};

}  // namespace flashdeberta

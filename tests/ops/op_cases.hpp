// The op tests' cases, written once and generic over the policy: each case holds its random inputs and
// runs them through any ExecutionPolicy. op_suite.hpp lists the cases of each op; every backend's test
// runs them on its policy and compares with reference_run(), EigenPolicy in eigen_reference.cpp (a
// translation unit of its own, so that a backend's test never includes Eigen's headers itself).
// Outputs are poisoned with NaN before each call, so an element a kernel forgets to write fails.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "flashdeberta/math/relative_position.hpp"
#include "flashdeberta/policy/concepts.hpp"

namespace flashdeberta::op_tests {

using Host = std::vector<float>;
using HostIndices = std::vector<std::int32_t>;

inline Host random_values(std::size_t n, float stddev, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  Host v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

template <ExecutionPolicy P>
typename P::Buffer up(P const& p, Host const& v) {
  return p.upload(std::span<float const>(v), p.compute_dtype());
}

template <ExecutionPolicy P>
typename P::Buffer up(P const& p, HostIndices const& v) {
  return p.upload_indices(std::span<std::int32_t const>(v));
}

template <ExecutionPolicy P>
typename P::Buffer poisoned(P const& p, std::int64_t n) {
  return up(p, Host(static_cast<std::size_t>(n), std::numeric_limits<float>::quiet_NaN()));
}

template <ExecutionPolicy P>
Host down(P const& p, typename P::Buffer const& b) {
  p.fence();
  Host h(static_cast<std::size_t>(b.size()));
  p.download(b, std::span<float>(h));
  return h;
}

template <class Buffer>
MatrixRef ref(Buffer const& b, std::int64_t rows, std::int64_t cols) {
  return {b.data(), b.dtype(), rows, cols, cols};
}

// Four packed sequences of lengths 1, 70, 200 and 300: the second starts at position 5 (left padding),
// the third has a hole of 30 positions after its first 100 tokens, the fourth is contiguous and long
// enough for several query and key blocks. contiguous: lengths 1, 70, 200 and 700, positions 0, 1, ...
// in each and flagged contiguous, the layout the CUDA tensor-core kernel runs on by-difference windows
// (700 tokens reach the v3 saturation of 512, so those tiles mix windows and edge tiles). Distances of 100+
// exceed the saturation of the small-bucket regime, so every flash kernel meets fully saturated tiles.
struct PackedSequences {
  HostIndices cu_seqlens{0, 1, 71, 271, 571};
  HostIndices positions;
  std::int64_t total = 571;
  std::int64_t max_seqlen = 300;
  bool contiguous = false;

  explicit PackedSequences(bool contiguous_ = false) : contiguous(contiguous_) {
    if (contiguous) {
      cu_seqlens = {0, 1, 71, 271, 971};
      total = 971;
      max_seqlen = 700;
      for (std::int32_t length : {1, 70, 200, 700})
        for (std::int32_t i = 0; i < length; ++i) positions.push_back(i);
      return;
    }
    positions.push_back(0);
    for (std::int32_t i = 0; i < 70; ++i) positions.push_back(5 + i);
    for (std::int32_t i = 0; i < 200; ++i) positions.push_back(i < 100 ? i : i + 30);
    for (std::int32_t i = 0; i < 300; ++i) positions.push_back(i);
  }

  template <class Buffer>
  SequenceLayout layout(Buffer const& cu, Buffer const& pos) const {
    SequenceLayout s;
    s.cu_seqlens = static_cast<std::int32_t const*>(cu.data());
    s.positions = static_cast<std::int32_t const*>(pos.data());
    s.batch = 4;
    s.total_tokens = total;
    s.max_seqlen = max_seqlen;
    s.max_position = max_seqlen;
    s.contiguous_positions = contiguous;
    return s;
  }
};

struct GemmCase {
  std::int64_t m, n, k;
  bool bias;
  Activation act;
  float alpha;
  std::uint32_t seed;
  bool accumulate_f64 = false;  // GemmArgs::accumulate_f64
  Host a, b, bias_values;       // a (m, k) with row stride k + 3

  GemmCase(std::int64_t m_, std::int64_t n_, std::int64_t k_, bool bias_, Activation act_, float alpha_,
           std::uint32_t seed_, bool accumulate_f64_ = false)
      : m(m_), n(n_), k(k_), bias(bias_), act(act_), alpha(alpha_), seed(seed_), accumulate_f64(accumulate_f64_) {
    a = random_values(static_cast<std::size_t>(m * (k + 3)), 1.0f, seed);
    b = random_values(static_cast<std::size_t>(n * k), 1.0f / std::sqrt(float(k)), seed + 1);
    bias_values = random_values(static_cast<std::size_t>(n), 0.1f, seed + 2);
  }

  std::string name() const {
    return std::string(accumulate_f64 ? "gemm (float64 sums) " : "gemm ") + std::to_string(m) + "x" +
           std::to_string(n) + "x" + std::to_string(k);
  }

  // alpha * a . b^T + bias in float64, no activation (the float64-accumulated cases use none).
  std::vector<double> exact() const {
    std::vector<double> out(static_cast<std::size_t>(m * n));
    for (std::int64_t r = 0; r < m; ++r) {
      for (std::int64_t c = 0; c < n; ++c) {
        double sum = 0.0;
        for (std::int64_t i = 0; i < k; ++i) sum += double(a[r * (k + 3) + i]) * double(b[c * k + i]);
        out[r * n + c] = double(alpha) * sum + (bias ? double(bias_values[c]) : 0.0);
      }
    }
    return out;
  }

  template <ExecutionPolicy P>
  Host run(P const& p) const {
    auto const a_buf = up(p, a);
    auto const b_buf = up(p, b);
    auto const bias_buf = up(p, bias_values);
    auto const out = poisoned(p, m * n);
    p.gemm({.a = {a_buf.data(), a_buf.dtype(), m, k, k + 3},
            .b = ref(b_buf, n, k),
            .bias = bias ? bias_buf.data() : nullptr,
            .out = ref(out, m, n),
            .activation = act,
            .alpha = alpha,
            .accumulate_f64 = accumulate_f64});
    return down(p, out);
  }
};

struct LayerNormCase {
  std::int64_t rows, cols;
  bool residual;
  Host x, r, gamma, beta;

  LayerNormCase(std::int64_t rows_, std::int64_t cols_, bool residual_, std::uint32_t seed)
      : rows(rows_), cols(cols_), residual(residual_) {
    x = random_values(static_cast<std::size_t>(rows * cols), 2.0f, seed);
    r = random_values(static_cast<std::size_t>(rows * cols), 1.0f, seed + 1);
    gamma = random_values(static_cast<std::size_t>(cols), 0.2f, seed + 2);
    for (float& g : gamma) g += 1.0f;
    beta = random_values(static_cast<std::size_t>(cols), 0.1f, seed + 3);
  }

  std::string name() const { return "layer_norm cols " + std::to_string(cols) + (residual ? " + residual" : ""); }

  template <ExecutionPolicy P>
  Host run(P const& p) const {
    auto const x_buf = up(p, x);
    auto const r_buf = up(p, r);
    auto const g_buf = up(p, gamma);
    auto const b_buf = up(p, beta);
    auto const out = poisoned(p, rows * cols);
    p.layer_norm({.x = ref(x_buf, rows, cols),
                  .residual = residual ? ref(r_buf, rows, cols) : MatrixRef{},
                  .gamma = g_buf.data(),
                  .beta = b_buf.data(),
                  .eps = 1e-7f,
                  .out = ref(out, rows, cols)});
    return down(p, out);
  }
};

struct EmbeddingCase {
  PackedSequences seq;
  std::int64_t vocab = 97, width = 48, types = 2, max_positions = 512;
  bool with_tables;
  bool relu;
  Host word, position, token_type;
  HostIndices ids, token_types;

  EmbeddingCase(bool with_tables_, std::uint32_t seed, bool relu_ = false) : with_tables(with_tables_), relu(relu_) {
    word = random_values(static_cast<std::size_t>(vocab * width), 0.5f, seed);
    position = random_values(static_cast<std::size_t>(max_positions * width), 0.5f, seed + 1);
    token_type = random_values(static_cast<std::size_t>(types * width), 0.5f, seed + 2);
    std::mt19937 gen(seed + 3);
    for (std::int64_t t = 0; t < seq.total; ++t) {
      ids.push_back(static_cast<std::int32_t>(gen() % vocab));
      token_types.push_back(static_cast<std::int32_t>(gen() % types));
    }
  }

  std::string name() const {
    return std::string(with_tables ? "embedding word + position + token type" : "embedding word only") +
           (relu ? ", relu" : "");
  }

  template <ExecutionPolicy P>
  Host run(P const& p) const {
    auto const w = up(p, word);
    auto const pos = up(p, position);
    auto const tt = up(p, token_type);
    auto const id_buf = up(p, ids);
    auto const pos_buf = up(p, seq.positions);
    auto const tt_buf = up(p, token_types);
    auto const out = poisoned(p, seq.total * width);
    EmbeddingArgs args;
    args.ids = static_cast<std::int32_t const*>(id_buf.data());
    args.positions = static_cast<std::int32_t const*>(pos_buf.data());
    args.token_types = static_cast<std::int32_t const*>(tt_buf.data());
    args.word = ref(w, vocab, width);
    if (with_tables) {
      args.position = ref(pos, max_positions, width);
      args.token_type = ref(tt, types, width);
    }
    args.out = ref(out, seq.total, width);
    args.relu = relu;
    p.embedding(args);
    return down(p, out);
  }
};

struct ConvCase {
  PackedSequences seq;
  std::int64_t channels, kernel, groups;
  Activation act;
  Host x, weight, bias;

  ConvCase(std::int64_t channels_, std::int64_t kernel_, std::int64_t groups_, Activation act_, std::uint32_t seed)
      : channels(channels_), kernel(kernel_), groups(groups_), act(act_) {
    std::int64_t const gw = channels / groups;
    x = random_values(static_cast<std::size_t>(seq.total * channels), 1.0f, seed);
    weight =
        random_values(static_cast<std::size_t>(channels * gw * kernel), 1.0f / std::sqrt(float(gw * kernel)), seed + 1);
    bias = random_values(static_cast<std::size_t>(channels), 0.1f, seed + 2);
  }

  std::string name() const {
    return "conv1d C " + std::to_string(channels) + " kernel " + std::to_string(kernel) + " groups " +
           std::to_string(groups);
  }

  template <ExecutionPolicy P>
  Host run(P const& p) const {
    auto const x_buf = up(p, x);
    auto const w_buf = up(p, weight);
    auto const b_buf = up(p, bias);
    auto const cu = up(p, seq.cu_seqlens);
    auto const pos = up(p, seq.positions);
    auto const out = poisoned(p, seq.total * channels);
    p.conv1d({.x = ref(x_buf, seq.total, channels),
              .weight = w_buf.data(),
              .bias = b_buf.data(),
              .kernel_size = kernel,
              .groups = groups,
              .activation = act,
              .out = ref(out, seq.total, channels),
              .sequences = seq.layout(cu, pos)});
    return down(p, out);
  }
};

// Relative-position regimes: log buckets with a 32-row table (every tile window fits), a v1 table of 256
// rows without buckets (contiguous tiles fill the 63-slot window; tiles across the hole overflow it and
// take the per-element path), and the v3-base table (256 buckets, max distance 512).
enum class RelativeRegime { kSmallBuckets, kV1Span128, kV3Base };

struct AttentionCase {
  PackedSequences seq;
  std::int64_t heads = 2;
  std::int64_t d;
  bool c2p, p2c, interleaved;
  RelativeRegime regime;
  AttentionImpl impl;
  RelativeSlotTable slots;
  Host qkv, pos_key, pos_query;

  AttentionCase(std::int64_t head_size, bool c2p_, bool p2c_, bool interleaved_, RelativeRegime regime_,
                AttentionImpl impl_, std::uint32_t seed, bool contiguous = false)
      : seq(contiguous), d(head_size), c2p(c2p_), p2c(p2c_), interleaved(interleaved_), regime(regime_), impl(impl_) {
    ModelConfig config;
    if (regime == RelativeRegime::kV1Span128) {
      config.model_type = ModelType::kDeberta;
      config.max_relative_positions = 128;
    } else {
      config.model_type = ModelType::kDebertaV2;
      config.position_buckets = regime == RelativeRegime::kV3Base ? 256 : 16;
      config.max_relative_positions = regime == RelativeRegime::kV3Base ? 512 : 40;
    }
    slots = make_relative_slot_table(config);
    std::int64_t const a = heads * d;
    qkv = random_values(static_cast<std::size_t>(seq.total * 3 * a), 1.0f, seed);
    pos_key = random_values(static_cast<std::size_t>(2 * slots.span * a), 1.0f, seed + 1);
    pos_query = random_values(static_cast<std::size_t>(2 * slots.span * a), 1.0f, seed + 2);
  }

  std::string name() const {
    char const* terms = c2p ? (p2c ? "c2p+p2c" : "c2p") : (p2c ? "p2c" : "none");
    char const* regime_name = regime == RelativeRegime::kSmallBuckets
                                  ? "buckets 16"
                                  : (regime == RelativeRegime::kV1Span128 ? "v1 span 128" : "v3-base buckets");
    return std::string(impl == AttentionImpl::kEager ? "eager " : "flash ") + terms + ", d " + std::to_string(d) +
           ", " + regime_name + (interleaved ? ", v1 layout" : "") + (seq.contiguous ? ", contiguous" : "");
  }

  template <ExecutionPolicy P>
  Host run(P const& p) const {
    std::int64_t const a = heads * d;
    auto const qkv_buf = up(p, qkv);
    auto const key_buf = up(p, pos_key);
    auto const query_buf = up(p, pos_query);
    auto const slot_buf = up(p, slots.slots);
    auto const cu = up(p, seq.cu_seqlens);
    auto const pos = up(p, seq.positions);
    auto const out = poisoned(p, seq.total * a);
    MatrixRef const fused = ref(qkv_buf, seq.total, 3 * a);
    AttentionArgs args;
    view_fused_qkv(args, fused, d, interleaved ? QkvLayout::kInterleavedPerHead : QkvLayout::kStacked);
    args.num_heads = heads;
    args.head_size = d;
    if (c2p) args.pos_key = ref(key_buf, 2 * slots.span, a);
    if (p2c) args.pos_query = ref(query_buf, 2 * slots.span, a);
    if (c2p || p2c) {
      args.relative_index = static_cast<std::int32_t const*>(slot_buf.data());
      args.saturation = slots.saturation;
    }
    args.scale = std::sqrt(static_cast<float>(d) * static_cast<float>(1 + c2p + p2c));
    args.out = ref(out, seq.total, a);
    args.sequences = seq.layout(cu, pos);
    args.impl = impl;
    p.disentangled_attention(args);
    return down(p, out);
  }
};

// One LSTM step over `rows` rows of `directions` x `units` cells. The gates sit in column views of wider
// matrices (ld = width + 5), as GLiNER's BiLSTM reads its step's rows; the first step has no recurrent gates and
// no previous cell; later steps update the cell in place. Returns [hidden (rows, width) ; cell (rows, width)].
struct LstmCellCase {
  std::int64_t rows, units, directions;
  bool first_step;
  Host gates_in, gates_rec, cell_prev;  // (rows, 4 width + 5), (rows, 4 width + 5), (rows, width)

  LstmCellCase(std::int64_t rows_, std::int64_t units_, std::int64_t directions_, bool first_step_, std::uint32_t seed)
      : rows(rows_), units(units_), directions(directions_), first_step(first_step_) {
    std::int64_t const width = units * directions;
    gates_in = random_values(static_cast<std::size_t>(rows * (4 * width + 5)), 2.0f, seed);
    gates_rec = random_values(static_cast<std::size_t>(rows * (4 * width + 5)), 1.0f, seed + 1);
    cell_prev = random_values(static_cast<std::size_t>(rows * width), 1.0f, seed + 2);
  }

  std::string name() const {
    return "lstm_cell " + std::to_string(rows) + " rows x " + std::to_string(directions) + " x " +
           std::to_string(units) + (first_step ? ", first step" : "");
  }

  template <ExecutionPolicy P>
  Host run(P const& p) const {
    std::int64_t const width = units * directions;
    std::int64_t const ld = 4 * width + 5;
    auto const in_buf = up(p, gates_in);
    auto const rec_buf = up(p, gates_rec);
    auto const cell_buf = p.upload(std::span<float const>(cell_prev), DType::kF32);  // float32 in every dtype
    auto const hidden = poisoned(p, rows * width);
    LstmCellArgs args{.gates_in = MatrixRef{in_buf.data(), in_buf.dtype(), rows, 4 * width, ld},
                      .cell = ref(cell_buf, rows, width),
                      .hidden = ref(hidden, rows, width),
                      .directions = directions};
    if (!first_step) {
      args.gates_rec = MatrixRef{rec_buf.data(), rec_buf.dtype(), rows, 4 * width, ld};
      args.cell_prev = args.cell;
    }
    p.lstm_cell(args);
    Host out = down(p, hidden);
    Host const cell = down(p, cell_buf);
    out.insert(out.end(), cell.begin(), cell.end());
    return out;
  }
};

// The reference results, computed by EigenPolicy in eigen_reference.cpp.
Host reference_run(GemmCase const& c);
Host reference_run(LayerNormCase const& c);
Host reference_run(EmbeddingCase const& c);
Host reference_run(ConvCase const& c);
Host reference_run(AttentionCase const& c);
Host reference_run(LstmCellCase const& c);

}  // namespace flashdeberta::op_tests

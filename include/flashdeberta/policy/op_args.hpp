// The closed set of operations the DeBERTa and GLiNER forward passes need, as argument structs.
//
// Layers fill these; each execution policy implements one function per struct. Pointers refer to the
// policy's memory space. Shapes are given as (rows, cols) comments; T is the number of packed tokens.
#pragma once

#include <cstdint>

#include "flashdeberta/core/matrix_ref.hpp"
#include "flashdeberta/core/model_config.hpp"

namespace flashdeberta {

enum class AttentionImpl {
  kEager,  // materializes the (L, L) scores per head, in HF's order of operations: the reference path
  kFlash,  // tiled online softmax, memory linear in L
};

// Packed variable-length sequences: sequence b owns tokens [cu_seqlens[b], cu_seqlens[b + 1]).
struct SequenceLayout {
  std::int32_t const* cu_seqlens = nullptr;  // (B + 1)
  std::int32_t const* positions = nullptr;   // (T) index of each token in its original padded row
  std::int64_t batch = 0;
  std::int64_t total_tokens = 0;
  std::int64_t max_seqlen = 0;       // longest sequence, in tokens
  std::int64_t max_position = 0;     // largest positions[t] + 1
  bool contiguous_positions = true;  // positions[t] - positions[first of sequence] == t - first for all t
};

// out (M, N) = act(alpha * a (M, K) . b (N, K)^T + bias (N)); b is a PyTorch Linear weight [out, in].
struct GemmArgs {
  MatrixRef a;
  MatrixRef b;
  void const* bias = nullptr;  // (N) in b's dtype, or null
  MatrixRef out;
  Activation activation = Activation::kIdentity;
  float alpha = 1.0f;
  // Float32 operands, sums (and the bias) in float64, one rounding at the end; F32 outputs only (the 16-bit
  // dtypes already accumulate in float32 and ignore it). For the masked-LM decoder: a trained model's logits
  // reach about 20, where a float32 sum over the E products alone drifts about 1e-5 from float64 (HF's own
  // float32 is 1.03e-5 off on models/tiny-en), more than our parity bound.
  bool accumulate_f64 = false;
};

// out (M, N) = LayerNorm(x + residual) * gamma + beta over each row; residual may be empty.
struct LayerNormArgs {
  MatrixRef x;
  MatrixRef residual;
  void const* gamma = nullptr;  // (N)
  void const* beta = nullptr;   // (N)
  float eps = 1e-7f;
  MatrixRef out;
};

// out (T, E) = word[ids] + position[positions] + token_type[token_types] (HF's order of additions), then
// max(., 0) with relu: GLiNER's marker spans, relu(W [start ; end] + b) = relu(W_s start + b + W_e end), gather
// two per-word projections and add them instead of multiplying every span's concatenation.
struct EmbeddingArgs {
  std::int32_t const* ids = nullptr;          // (T)
  std::int32_t const* positions = nullptr;    // (T), used when position table is set
  std::int32_t const* token_types = nullptr;  // (T), used when token_type table is set
  MatrixRef word;                             // (V, E)
  MatrixRef position;                         // (max_position_embeddings, E) or empty
  MatrixRef token_type;                       // (type_vocab_size, E) or empty
  MatrixRef out;                              // (T, E)
  bool relu = false;
};

// out (T, C) = act(conv1d(x) + bias) within each sequence, zero-padded at sequence edges and across
// holes in positions. weight is PyTorch's Conv1d layout (C, C / groups, kernel).
struct Conv1dArgs {
  MatrixRef x;  // (T, C)
  void const* weight = nullptr;
  void const* bias = nullptr;  // (C)
  std::int64_t kernel_size = 0;
  std::int64_t groups = 1;
  Activation activation = Activation::kTanh;
  MatrixRef out;  // (T, C)
  SequenceLayout sequences;
};

// One time step of an LSTM over a batch of rows, for `directions` independent directions side by side (a
// BiLSTM's forward and reverse cells run in one call), PyTorch's gate order i, f, g, o:
//   z = gates_in + gates_rec;  c = sigmoid(z_f) c_prev + sigmoid(z_i) tanh(z_g);  h = sigmoid(z_o) tanh(c)
// Direction d reads gate columns [4 H d, 4 H (d + 1)) and writes columns [H d, H (d + 1)) of cell and hidden.
// The cell state is float32 whatever the compute dtype (as cuDNN keeps it), so that 16-bit rounding does
// not build up over hundreds of steps; h is stored in the compute dtype, as the next step's GEMM reads it.
struct LstmCellArgs {
  MatrixRef gates_in;   // (B, 4 H directions): W_ih x + b_ih + b_hh
  MatrixRef gates_rec;  // (B, 4 H directions): W_hh h_prev; empty at the first step (zero)
  MatrixRef cell_prev;  // (B, H directions) float32; empty at the first step (zero); may alias cell
  MatrixRef cell;       // (B, H directions) float32
  MatrixRef hidden;     // (B, H directions)
  std::int64_t directions = 1;
};

// H of an LstmCellArgs, after checking that its shapes agree; the backends' common precondition.
inline std::int64_t lstm_cell_units(LstmCellArgs const& a) {
  std::int64_t const dirs = a.directions;
  FLASHDEBERTA_REQUIRE(dirs >= 1 && a.hidden.cols % dirs == 0,
                       "lstm_cell: " << a.hidden.cols << " hidden columns do not split into " << dirs << " directions");
  std::int64_t const units = a.hidden.cols / dirs;
  std::int64_t const rows = a.hidden.rows;
  auto const agrees = [&](MatrixRef const& m, std::int64_t cols) { return m.rows == rows && m.cols == cols; };
  FLASHDEBERTA_REQUIRE(agrees(a.gates_in, 4 * units * dirs) && agrees(a.cell, units * dirs) &&
                           (a.gates_rec.empty() || agrees(a.gates_rec, 4 * units * dirs)) &&
                           (a.cell_prev.empty() || agrees(a.cell_prev, units * dirs)),
                       "lstm_cell shapes do not agree: gates_in ("
                           << a.gates_in.rows << ", " << a.gates_in.cols << "), cell (" << a.cell.rows << ", "
                           << a.cell.cols << "), hidden (" << rows << ", " << a.hidden.cols << "), " << dirs
                           << " directions");
  FLASHDEBERTA_REQUIRE(a.cell.dtype == DType::kF32 && (a.cell_prev.empty() || a.cell_prev.dtype == DType::kF32),
                       "lstm_cell keeps its cell state in F32, not " << dtype_name(a.cell.dtype));
  FLASHDEBERTA_REQUIRE(
      a.gates_in.dtype == a.hidden.dtype && (a.gates_rec.empty() || a.gates_rec.dtype == a.hidden.dtype),
      "lstm_cell gates and hidden state must share one dtype: gates_in " << dtype_name(a.gates_in.dtype) << ", hidden "
                                                                         << dtype_name(a.hidden.dtype));
  return units;
}

// Disentangled self-attention over packed sequences (spec 4.3):
//   S[h, i, j] = (q_i . k_j + [c2p] q_i . pos_key[delta(i, j)] + [p2c] k_j . pos_query[delta(i, j)]) / scale
//   out_i = softmax_j(S[h, i, :]) . v
// with delta(i, j) = relative_index[clamp(p_i - p_j, -saturation, saturation) + saturation], p = positions.
// Head h of q, k, v occupies columns [h * head_stride, h * head_stride + head_size) of its matrix, so
// one fused projection can be viewed in place (v1 interleaves q, k, v per head; v2 stacks them).
struct AttentionArgs {
  MatrixRef q;  // (T, *)
  MatrixRef k;  // (T, *)
  MatrixRef v;  // (T, *)
  std::int64_t num_heads = 0;
  std::int64_t head_size = 0;
  std::int64_t head_stride = 0;  // column distance between heads in q, k and v
  MatrixRef pos_key;             // (2k, A) projected relative keys, head h at columns h * head_size; empty without c2p
  MatrixRef pos_query;           // (2k, A) projected relative queries; empty without p2c
  std::int32_t const* relative_index = nullptr;  // (2 * saturation + 1) values in [0, 2k)
  std::int64_t saturation = 0;                   // |p_i - p_j| >= saturation all map to the edge rows of the table
  float scale = 1.0f;                            // sqrt(d * s)
  MatrixRef out;                                 // (T, A), head h at columns h * head_size
  SequenceLayout sequences;
  AttentionImpl impl = AttentionImpl::kFlash;
  // (num_heads, T) float32, or null: where a policy that supports it writes each row's log-sum-exp of S (natural
  // log), which the training backward reads instead of recomputing it (training_op_args.hpp).
  float* lse = nullptr;
  // Training only: inverted dropout on the probabilities after the softmax (HF's attention_probs_dropout_prob),
  //   out_i = sum_j P[h, i, j] m[h, i, j] / (1 - dropout) v_j,
  //   m[h, i, j] = dropout_uniform(dropout_seed, dropout_offset + (h T + i) max_seqlen + (j - first_j)) >= dropout
  // (training_op_args.hpp) with i the packed query, j - first_j the key's index in its sequence, T and max_seqlen
  // those of `sequences`: a call draws from num_heads * T * max_seqlen counters, which the caller reserves. lse
  // stays that of the undropped S; the backward (AttentionBackwardArgs::forward) redraws the same mask. 0: off.
  float dropout = 0.0f;
  std::uint64_t dropout_seed = 0;
  std::uint64_t dropout_offset = 0;
};

// How q, k and v sit in one fused (T, 3A) projection: v1's in_proj interleaves them per head
// ([q_h | k_h | v_h], heads 3d apart); v2/v3 run their three projections as one GEMM ([Q | K | V], heads d apart).
enum class QkvLayout { kInterleavedPerHead, kStacked };

// Points args.q, args.k, args.v and args.head_stride into `fused` in place, no copy.
inline void view_fused_qkv(AttentionArgs& args, MatrixRef fused, std::int64_t head_size, QkvLayout layout) {
  std::int64_t const a = fused.cols / 3;
  std::int64_t const d = head_size;
  if (layout == QkvLayout::kInterleavedPerHead) {
    args.q = fused.columns(0, 3 * a - 2 * d);
    args.k = fused.columns(d, 3 * a - 2 * d);
    args.v = fused.columns(2 * d, 3 * a - 2 * d);
    args.head_stride = 3 * d;
  } else {
    args.q = fused.columns(0, a);
    args.k = fused.columns(a, a);
    args.v = fused.columns(2 * a, a);
    args.head_stride = d;
  }
}

}  // namespace flashdeberta

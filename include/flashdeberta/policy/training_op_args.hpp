// The operations training adds to the forward's closed set (op_args.hpp): the backward of each forward op,
// dropout and the optimizer's elementwise update, as argument structs.
//
// Every tensor here is float32 (training keeps float32 master weights and activations; docs/training.md).
// Gradients of parameters accumulate (`+=`): a weight used twice in one step (v2/v3 share_att_key projects
// the relative table with the content projections; the masked-LM decoder is tied to the word embeddings) and
// gradient accumulation over micro-batches both add into one buffer, which the trainer zeroes before a step.
// Gradients of activations are written (`=`) unless an op says otherwise.
#pragma once

#include <cstdint>

#include "flashdeberta/config.hpp"
#include "flashdeberta/policy/op_args.hpp"

namespace flashdeberta {

// The backward of out = x . w^T + b (GemmArgs without activation or alpha):
//   dx (M, K) = dy . w          written, or added with accumulate_dx; skipped when dx is empty
//   dw (N, K) += dy^T . x       skipped when dw is empty
//   db (N)    += column sums of dy, skipped when null
struct LinearBackwardArgs {
  MatrixRef x;          // (M, K) the forward's input
  MatrixRef w;          // (N, K) PyTorch Linear weight [out, in]
  MatrixRef dy;         // (M, N)
  MatrixRef dx;         // (M, K) or empty
  MatrixRef dw;         // (N, K) or empty
  float* db = nullptr;  // (N) or null
  bool accumulate_dx = false;
};

// The backward of out = LayerNorm(x + residual) * gamma + beta (LayerNormArgs), recomputing the row statistics
// from x and residual:
//   dx (M, N)      = d/d(x + residual): written, or added with accumulate_dx (the residual's gradient is the same
//                    tensor, which the caller adds where the residual came from)
//   dgamma (N)    += sum over rows of dy * x_hat;  dbeta (N) += sum over rows of dy
struct LayerNormBackwardArgs {
  MatrixRef x;                   // (M, N)
  MatrixRef residual;            // (M, N) or empty
  float const* gamma = nullptr;  // (N)
  float eps = 1e-7f;
  MatrixRef dy;             // (M, N)
  MatrixRef dx;             // (M, N)
  float* dgamma = nullptr;  // (N)
  float* dbeta = nullptr;   // (N)
  bool accumulate_dx = false;
};

// Elementwise activation, forward or backward:
//   forward:  out = act(x)
//   backward: out = dy * act'(x)       (x: the activation's input, as the forward saw it)
// out may alias x (forward) or dy (backward). With accumulate the result is added to out instead (identity then
// adds one view into another: a gradient flowing into a strided part of a parameter).
struct ActivationArgs {
  MatrixRef x;    // (M, N)
  MatrixRef dy;   // (M, N); empty in the forward
  MatrixRef out;  // (M, N)
  Activation activation = Activation::kGelu;
  bool accumulate = false;
};

// The backward of EmbeddingArgs (without relu): the rows of dout scatter-add into the tables' gradients,
//   dword[ids[t]] += dout[t],  dposition[positions[t]] += dout[t],  dtoken_type[token_types[t]] += dout[t]
// for each table whose gradient is given (not empty).
struct EmbeddingBackwardArgs {
  std::int32_t const* ids = nullptr;          // (T)
  std::int32_t const* positions = nullptr;    // (T)
  std::int32_t const* token_types = nullptr;  // (T)
  MatrixRef dout;                             // (T, E)
  MatrixRef dword;                            // (V, E) or empty
  MatrixRef dposition;                        // (max_position_embeddings, E) or empty
  MatrixRef dtoken_type;                      // (type_vocab_size, E) or empty
};

// The backward of Conv1dArgs before its activation: dpre = dy * act'(pre) is the caller's (ActivationArgs).
//   dx (T, C) = conv1d^T(dpre)   written; dweight (C, C / groups, kernel) += ...; dbias (C) += column sums
// Zero padding at sequence edges and across holes in positions, as the forward: its tap at offset o links token t
// to the packed token t + o only, and only when their positions differ by o (a kernel wider than 3 so also drops
// a token that lies o positions away beyond a hole).
struct Conv1dBackwardArgs {
  MatrixRef x;  // (T, C) the forward's input
  float const* weight = nullptr;
  std::int64_t kernel_size = 0;
  std::int64_t groups = 1;
  MatrixRef dpre;  // (T, C) gradient of the convolution's output before the activation
  MatrixRef dx;    // (T, C)
  float* dweight = nullptr;
  float* dbias = nullptr;
  SequenceLayout sequences;
};

// The backward of disentangled_attention (AttentionArgs). `forward` holds the forward's arguments exactly as
// the forward call had them (q, k, v, tables, index, scale, sequences, impl; out = the forward's output).
// The eager path materializes each head's (L, L) probabilities as HF's autograd does; the flash path recomputes
// them tile by tile from the row log-sum-exp (given, or recomputed in a first pass when lse is null), never
// holding an L x L buffer (docs/training.md gives the terms).
//   dq, dk, dv (T, *): written, at the forward's columns (head h at h * head_stride) of q, k, v; they may be
//   views of one fused (T, 3A) gradient as view_fused_qkv makes them
//   dpos_key, dpos_query (2k, A): added; empty when the forward had no such table
struct AttentionBackwardArgs {
  AttentionArgs forward;
  MatrixRef dout;              // (T, A)
  float const* lse = nullptr;  // (num_heads, T) natural-log row sums of exp(S) of the forward, or null
  MatrixRef dq;
  MatrixRef dk;
  MatrixRef dv;
  MatrixRef dpos_key;
  MatrixRef dpos_query;
};

// Inverted dropout with a counter-based generator: element (r, c) is kept when
//   dropout_uniform(seed, offset + r * cols + c) >= probability
// and then scaled by 1 / (1 - probability). The mask is a pure function of (seed, offset, index), so the
// backward applies the same op to dy with the same seed and offset and no mask is stored; every backend
// draws the same mask. probability 0 copies. out may alias x.
struct DropoutArgs {
  MatrixRef x;    // (M, N)
  MatrixRef out;  // (M, N)
  float probability = 0.0f;
  std::uint64_t seed = 0;
  std::uint64_t offset = 0;
};

// A uniform draw in [0, 1) from (seed, counter): SplitMix64's finalizer over the pair, 24 bits of mantissa. Host and
// device: the CUDA kernels draw the very same masks.
FLASHDEBERTA_HOST_DEVICE inline constexpr float dropout_uniform(std::uint64_t seed, std::uint64_t counter) {
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + counter + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
}

// A contiguous run of float32 values in policy memory: a gradient block, or some rows of one (BatchesFloatRuns).
struct FloatRun {
  float* data = nullptr;
  std::int64_t count = 0;
};

// One AdamW step (torch.optim.AdamW, bias-corrected moments, decoupled weight decay) over n float32 values:
//   w -= lr * weight_decay * w
//   m = beta1 m + (1 - beta1) g * grad_scale;  v = beta2 v + (1 - beta2) (g * grad_scale)^2
//   w -= lr * (m / (1 - beta1^step)) / (sqrt(v / (1 - beta2^step)) + eps)
// grad_scale carries global-norm clipping (max_norm / (norm + 1e-6) when the norm exceeds max_norm, else 1).
struct AdamWArgs {
  float* weights = nullptr;
  float const* grads = nullptr;
  float* exp_avg = nullptr;
  float* exp_avg_sq = nullptr;
  std::int64_t count = 0;
  double learning_rate = 5e-5;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  double grad_scale = 1.0;
  std::int64_t step = 1;  // 1 for the first update
};

}  // namespace flashdeberta

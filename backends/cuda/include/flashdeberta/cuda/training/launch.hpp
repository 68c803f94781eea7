// The training kernels as the host sees them (cuda_training_ops.hpp, cuda_training_attention.hpp): one launcher per
// kernel family, declared in plain C++ and compiled once by nvcc into flashdeberta::cuda
// (backends/cuda/src/training_kernels.cu), as kernels/launch.hpp does for the forward. Float32 operands throughout. The
// policy's methods check the arguments (training_op_checks.hpp) before they call these; the launchers check only what
// their kernels assume.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "flashdeberta/core/matrix_ref.hpp"
#include "flashdeberta/cuda/kernels/launch.hpp"
#include "flashdeberta/policy/training_op_args.hpp"

namespace flashdeberta::cuda_kernels {

// training/reductions.cuh. Every sum there runs in float64 in an order fixed by the shapes and the launch
// constants: the same bits run to run.
// Column sums run in two stages: blocks of kColumnRowChunk rows write float64 partial sums per column, then each
// column adds its partials in chunk order (a grid over columns alone left most SMs idle: 24 blocks for 768 columns).
//   add_column_sums: sums[c] += the sum over rows of m (M, N), from sums[c]'s value on, rounded once; partials is
//     column_partials(M, N) doubles of scratch.
//   layer_norm_backward: the passes of LayerNormBackwardArgs; scratch is layer_norm_backward_scratch(M, N) doubles.
inline constexpr std::int64_t kColumnRowChunk = 256;
inline std::int64_t column_chunks(std::int64_t rows) { return (rows + kColumnRowChunk - 1) / kColumnRowChunk; }
inline std::int64_t column_partials(std::int64_t rows, std::int64_t cols) { return column_chunks(rows) * cols; }
inline std::int64_t layer_norm_backward_scratch(std::int64_t rows, std::int64_t cols) {
  return rows * 4 + 2 * column_partials(rows, cols);  // (M, 4) row statistics, then dgamma's and dbeta's partials
}
void add_column_sums(MatrixRef const& m, float* sums, double* partials, cudaStream_t stream);
void layer_norm_backward(LayerNormBackwardArgs const& n, double* scratch, cudaStream_t stream);
inline constexpr std::int64_t kSquaresChunk = std::int64_t{1} << 14;
// A list of `count` chunks (device memory, each at most kSquaresChunk elements; CudaPolicy cuts the runs of
// BatchesFloatRuns into them): sum_of_squares_list: partial[c] = the float64 sum of chunk c's squares; fill_list sets
// every element.
void sum_of_squares_list(FloatRun const* chunks, std::int64_t count, double* partial, cudaStream_t stream);
void fill_list(FloatRun const* chunks, std::int64_t count, float value, cudaStream_t stream);

// training/elementwise.cuh: one thread per element, each reading its inputs before it writes (out may alias them).
void activation(ActivationArgs const& a, cudaStream_t stream);
void dropout(DropoutArgs const& d, cudaStream_t stream);
void adamw(AdamWArgs const& a, cudaStream_t stream);
void fill(MatrixRef const& m, float value, cudaStream_t stream);
// out (16-bit, in's shape, its own row stride) = in (float32) rounded to nearest even: a mixed-precision operand.
void round_to(MatrixRef const& in, MatrixRef const& out, cudaStream_t stream);

// training/scatter.cuh.
//   first_index_out_of_range: *first = min(*first, the first token t with index[t] outside [0, rows)); the caller
//     presets *first above every token.
//   embedding_backward: the rows of dout added into the tables' gradients with atomicAdd.
//   conv_sequence_bounds: bounds (T, 2) = each token's sequence [begin, end), empty outside every sequence.
//   conv_unfold: columns (T, C x kernel), [channel][tap], of x as the forward's taps link the tokens (zeros else).
//   conv_fold: dx (T, C) = the transpose of conv_unfold applied to dcolumns (T, C x kernel), written.
void first_index_out_of_range(std::int32_t const* index, std::int64_t tokens, std::int64_t rows, int* first,
                              cudaStream_t stream);
void embedding_backward(EmbeddingBackwardArgs const& e, cudaStream_t stream);
void conv_sequence_bounds(SequenceLayout const& s, std::int64_t tokens, std::int32_t* bounds, cudaStream_t stream);
void conv_unfold(Conv1dBackwardArgs const& c, std::int32_t const* bounds, float* columns, cudaStream_t stream);
void conv_fold(Conv1dBackwardArgs const& c, std::int32_t const* bounds, float const* dcolumns, cudaStream_t stream);

// The attention backward's device scratch (cuda_training_attention.hpp allocates it;
// training/attention_backward_*.cuh). The projected tables and bands run over every token: row (t, h) of head h at (t
// heads + h) 2k.
struct AttentionBackwardBuffers {
  // The pairs' position terms, elements of `tables`: F32, or the compute dtype where the tensor-core kernels read them
  // (autocast rounds these matmuls' outputs alike).
  void const* c2p_all = nullptr;  // (T, heads, 2k) q . Kr^T, unscaled; null without c2p
  void const* p2c_all = nullptr;  // (T, heads, 2k) k . Qr^T, unscaled; null without p2c
  DType tables = DType::kF32;
  float* band_c2p = nullptr;  // (T, heads, 2k), zeroed: Gc2p / scale, the row of query t
  float* band_p2c = nullptr;  // (T, heads, 2k), zeroed: Gp2c / scale, the row of key t
  // flash, (heads, T) each: D of each row (dO . O in float32; on tensor cores sum_j P M dP, or dO rounded . O given the
  // mixed-precision forward's lse) and its lse where the kernels form it (without AttentionBackwardArgs::lse).
  float* row_dot = nullptr;
  float* lse = nullptr;
  float* probabilities = nullptr;  // eager: (heads, L, L) P * M of one sequence at a time
  float* ds = nullptr;             // eager: (heads, L, L) dS / scale of one sequence at a time
};

// dq, dk, dv written (their content terms: the bands' products with the tables are the caller's GEMMs), the bands
// accumulated. The forward's operands are float32. flash: `products` is the policy's compute dtype; BF16 or F16 run
// the five products on tensor cores with operands rounded to it (training/attention_backward_mma.cuh: sm_80+, head
// sizes up to 64), anything else the float32 kernels.
void attention_backward_eager(AttentionBackwardArgs const& g, AttentionBackwardBuffers const& buffers,
                              DeviceLimits const& limits, cudaStream_t stream);
void attention_backward_flash(AttentionBackwardArgs const& g, AttentionBackwardBuffers const& buffers,
                              DeviceLimits const& limits, DType products, cudaStream_t stream);
// Whether attention_backward_flash runs the tensor-core passes for g (training/attention_backward_mma.cuh).
bool attention_backward_mixed_applies(AttentionBackwardArgs const& g, DeviceLimits const& limits, DType products);

// Mixed-precision training's flash forward (training/attention_forward_mma.cuh): float32 operands, output and lse (if
// asked), dropout, products in `products` (BF16 or F16) on tensor cores; the position terms gathered from
// buffers.c2p_all and p2c_all, which the caller projects as for the backward. applies: 16-bit products, float32
// operands, flash, sm_80+ code, head sizes up to 64; else the caller runs the float32 kernels.
bool attention_forward_mixed_applies(AttentionArgs const& a, DeviceLimits const& limits, DType products);
void attention_forward_mixed(AttentionArgs const& a, AttentionBackwardBuffers const& buffers,
                             DeviceLimits const& limits, DType products, cudaStream_t stream);

}  // namespace flashdeberta::cuda_kernels

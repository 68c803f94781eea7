// CudaPolicy's training ops (TrainingPolicy, training_op_args.hpp): the definitions of the methods cuda_policy.hpp
// declares, which it includes this header for at its end. Float32 operands. Products run on cuBLASLt (strict
// float32, no TF32), the rest on the kernels of training/launch.hpp, with the host backends' conventions: parameter
// gradients add, activation gradients are written unless an op says otherwise, and db, dbias, dgamma, dbeta, D and
// the sums of squares add in float64 in an order fixed by the shapes. embedding_backward scatters with atomicAdd, so
// its sums over a repeated row vary in their last bits run to run; every other op gives the same bits each run.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <vector>

#include "flashdeberta/cuda/cuda_policy.hpp"
#include "flashdeberta/cuda/training/launch.hpp"
#include "flashdeberta/policy/training_op_checks.hpp"

namespace flashdeberta {

namespace cuda_detail {

// Element `at` of a device array, read on the host after the work enqueued before it.
template <class T>
T read_device_value(T const* values, std::int64_t at, cudaStream_t stream) {
  T value{};
  FLASHDEBERTA_CUDA_CHECK(cudaMemcpyAsync(&value, values + at, sizeof(T), cudaMemcpyDeviceToHost, stream));
  FLASHDEBERTA_CUDA_CHECK(cudaStreamSynchronize(stream));
  return value;
}

// The float32 (rows, cols) view of m's data from element `first` on, with m's row stride: a head's columns, a group's.
inline MatrixRef f32_view(void const* data, std::int64_t first, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  return {const_cast<float*>(static_cast<float const*>(data)) + first, DType::kF32, rows, cols, ld};
}

}  // namespace cuda_detail

inline CudaPolicy::RoundedOperand CudaPolicy::rounded(MatrixRef const& m) const {
  std::int64_t const ld = (m.cols + 7) / 8 * 8;
  RoundedOperand r{allocate(m.rows * ld, compute_dtype()), {}};
  r.view = {r.storage.data(), compute_dtype(), m.rows, m.cols, ld};
  cuda_kernels::round_to(m, r.view, stream());
  return r;
}

// dx (M, K) = dy (M, N) . w (N, K), then dw (N, K) += dy^T . x (M, K): two cuBLASLt products (dx first, as the host
// backends), each on 16-bit operands where rounds_product says (dx sums N terms, dw M); db += column sums of dy in
// float64.
inline void CudaPolicy::linear_backward(LinearBackwardArgs const& l) const {
  require_linear_backward_args(l);
  std::int64_t const rows = l.dy.rows;     // M
  std::int64_t const outputs = l.dy.cols;  // N
  context_->activate();
  using Product = cuda_detail::CublasLtGemm::Product;
  bool const round_dx = !l.dx.empty() && rows > 0 && outputs > 0 && rounds_product(l.dy, l.w, l.dx, outputs);
  bool const round_dw = !l.dw.empty() && rows > 0 && outputs > 0 && rounds_product(l.dy, l.x, l.dw, rows);
  RoundedOperand dy;
  if (round_dx || round_dw) dy = rounded(l.dy);
  if (!l.dx.empty()) {
    if (outputs > 0) {
      RoundedOperand w;
      if (round_dx) w = rounded(l.w);
      context_->gemm->run(Product{.a = round_dx ? dy.view : l.dy,
                                  .b = round_dx ? w.view : l.w,
                                  .out = l.dx,
                                  .beta = l.accumulate_dx ? 1.0f : 0.0f},
                          stream());
    } else if (!l.accumulate_dx) {
      cuda_kernels::fill(l.dx, 0.0f, stream());  // an empty sum
    }
  }
  if (!l.dw.empty() && rows > 0) {
    RoundedOperand x;
    if (round_dw) x = rounded(l.x);
    context_->gemm->run(Product{.a = round_dw ? dy.view : l.dy,
                                .transpose_a = true,
                                .b = round_dw ? x.view : l.x,
                                .out = l.dw,
                                .beta = 1.0f},
                        stream());
  }
  if (l.db != nullptr) cuda_kernels::add_column_sums(l.dy, l.db, stream());
}

// Three kernels (row statistics, parameter gradients, dx), so that dx may alias dy or x; (M, 4) float64 statistics.
inline void CudaPolicy::layer_norm_backward(LayerNormBackwardArgs const& n) const {
  require_layer_norm_backward_args(n);
  std::int64_t const rows = n.x.rows;
  std::int64_t const cols = n.x.cols;
  if (rows == 0 || cols == 0) return;
  context_->activate();
  Buffer const stats = allocate(rows * 4, DType::kF64);
  cuda_kernels::layer_norm_backward(n, stats.as<double>(), stream());
}

inline void CudaPolicy::activation(ActivationArgs const& a) const {
  bool const backward = !a.dy.empty();
  char const* op = backward ? "activation backward" : "activation forward";
  require_training_matrix(op, "x", a.x, a.x.rows, a.x.cols);
  require_training_matrix(op, "out", a.out, a.x.rows, a.x.cols);
  if (backward) require_training_matrix(op, "dy", a.dy, a.x.rows, a.x.cols);
  context_->activate();
  cuda_kernels::activation(a, stream());
}

// Every index is checked before anything is added (one synchronization for all tables), then one scatter-add.
inline void CudaPolicy::embedding_backward(EmbeddingBackwardArgs const& e) const {
  char const* op = "embedding_backward";
  std::int64_t const tokens = e.dout.rows;
  std::int64_t const width = e.dout.cols;
  require_training_matrix(op, "dout", e.dout, tokens, width);
  char const* const names[] = {"dword", "dposition", "dtoken_type"};
  MatrixRef const* const grads[] = {&e.dword, &e.dposition, &e.dtoken_type};
  std::int32_t const* const indices[] = {e.ids, e.positions, e.token_types};
  for (int i = 0; i < 3; ++i) {
    if (grads[i]->empty()) continue;
    require_training_matrix(op, names[i], *grads[i], grads[i]->rows, width);
    FLASHDEBERTA_REQUIRE(tokens == 0 || indices[i] != nullptr, op << ": " << names[i] << " has no indices");
  }
  if (tokens == 0) return;
  FLASHDEBERTA_REQUIRE(tokens < 0x7f7f7f7f, op << " over " << tokens << " tokens exceeds 32-bit indices");
  require_not_capturing(op);
  context_->activate();
  Buffer const first = allocate(3, DType::kI32);  // the first bad token of each table
  FLASHDEBERTA_CUDA_CHECK(cudaMemsetAsync(first.data(), 0x7f, 3 * sizeof(std::int32_t), stream()));
  for (int i = 0; i < 3; ++i)
    if (!grads[i]->empty())
      cuda_kernels::first_index_out_of_range(indices[i], tokens, grads[i]->rows, first.as<int>() + i, stream());
  std::array<std::int32_t, 3> bad{};
  FLASHDEBERTA_CUDA_CHECK(cudaMemcpyAsync(bad.data(), first.data(), sizeof(bad), cudaMemcpyDeviceToHost, stream()));
  FLASHDEBERTA_CUDA_CHECK(cudaStreamSynchronize(stream()));
  for (int i = 0; i < 3; ++i) {
    if (grads[i]->empty() || bad[i] >= tokens) continue;
    FLASHDEBERTA_FAIL(op << ": token " << bad[i] << " indexes row "
                         << cuda_detail::read_device_value(indices[i], bad[i], stream()) << " of " << names[i]
                         << ", which has " << grads[i]->rows << " rows");
  }
  cuda_kernels::embedding_backward(e, stream());
}

// The forward's taps transposed (training/scatter.cuh), per group g of width G = C / groups:
//   dweight_g (G, G kernel) += dpre_g^T (G, T) . unfold(x)_g (T, G kernel)
//   dx = fold(dpre_g (T, G) . W_g (G, G kernel)),   dbias += column sums of dpre
inline void CudaPolicy::conv1d_backward(Conv1dBackwardArgs const& c) const {
  char const* op = "conv1d_backward";
  std::int64_t const tokens = c.dpre.rows;
  std::int64_t const channels = c.dpre.cols;
  require_conv1d_backward_args(c);
  std::int64_t const batch = c.sequences.batch;
  FLASHDEBERTA_REQUIRE(batch == 0 || (c.sequences.cu_seqlens != nullptr && c.sequences.positions != nullptr),
                       op << ": the sequence layout of " << batch << " sequences has no offsets or positions");
  context_->activate();
  if (batch > 0) {
    require_not_capturing(op);
    std::int32_t const end = cuda_detail::read_device_value(c.sequences.cu_seqlens, batch, stream());
    FLASHDEBERTA_REQUIRE(end <= tokens, op << ": the sequence layout describes " << end << " tokens, not " << tokens);
  }
  if (tokens == 0) return;
  std::int64_t const group_width = channels / c.groups;
  std::int64_t const taps = group_width * c.kernel_size;  // columns of a group's unfolded slice
  std::int64_t const width = channels * c.kernel_size;
  Buffer const bounds = allocate(2 * tokens, DType::kI32);
  cuda_kernels::conv_sequence_bounds(c.sequences, tokens, bounds.as<std::int32_t>(), stream());
  using Product = cuda_detail::CublasLtGemm::Product;
  auto const dpre_group = [&](std::int64_t g) { return c.dpre.columns(g * group_width, group_width); };
  auto const weight_group = [&](void const* w, std::int64_t g) {  // (G, G kernel) rows of PyTorch's (C, G, kernel)
    return cuda_detail::f32_view(w, g * group_width * taps, group_width, taps, taps);
  };
  if (c.dweight != nullptr) {
    Buffer const columns = allocate(tokens * width, DType::kF32);  // (T, C kernel)
    cuda_kernels::conv_unfold(c, bounds.as<std::int32_t>(), columns.as<float>(), stream());
    for (std::int64_t g = 0; g < c.groups; ++g)
      context_->gemm->run(Product{.a = dpre_group(g),
                                  .transpose_a = true,
                                  .b = cuda_detail::f32_view(columns.data(), g * taps, tokens, taps, width),
                                  .out = weight_group(c.dweight, g),
                                  .beta = 1.0f},
                          stream());
  }
  if (!c.dx.empty()) {
    Buffer const dcolumns = allocate(tokens * width, DType::kF32);  // (T, C kernel)
    for (std::int64_t g = 0; g < c.groups; ++g)
      context_->gemm->run(Product{.a = dpre_group(g),
                                  .b = weight_group(c.weight, g),
                                  .out = cuda_detail::f32_view(dcolumns.data(), g * taps, tokens, taps, width)},
                          stream());
    cuda_kernels::conv_fold(c, bounds.as<std::int32_t>(), dcolumns.as<float>(), stream());
  }
  if (c.dbias != nullptr) cuda_kernels::add_column_sums(c.dpre, c.dbias, stream());
}

// The kernels of training/attention_backward_*.cuh around cuBLASLt products, per head h (s = 1 / scale):
//   c2p_all[:, h] (T, 2k) = q_h . Kr_h^T and p2c_all[:, h] = k_h . Qr_h^T, the pairs' position terms;
//   the kernels: dQ, dK, dV's content terms written, the bands s Gc2p and s Gp2c (T, heads, 2k) formed
//     (flash with a bf16 / fp16 compute dtype: their five products on tensor cores, operands rounded to it);
//   dq_h += band_c2p_h . Kr_h,  dk_h += band_p2c_h . Qr_h,  dKr_h += band_c2p_h^T . q_h,  dQr_h += band_p2c_h^T . k_h.
// Memory beyond the gradients: four (T, heads, 2k) tables (linear in T); flash (heads, T) D and lse, eager two
// (heads, L, L) tiles of the sequence at hand.
inline void CudaPolicy::disentangled_attention_backward(AttentionBackwardArgs const& g) const {
  AttentionArgs const& a = g.forward;
  require_attention_backward_args(g);
  require_training_f32(a.q, "attention_backward q");
  require_training_f32(a.k, "attention_backward k");
  require_training_f32(a.v, "attention_backward v");
  require_training_f32(a.out, "attention_backward out");
  FLASHDEBERTA_REQUIRE(a.dropout >= 0.0f && a.dropout < 1.0f,
                       "attention_backward: dropout " << a.dropout << " is outside [0, 1)");
  FLASHDEBERTA_REQUIRE(a.impl == AttentionImpl::kEager || a.head_size <= 128,
                       "attention_backward: the flash kernels take head sizes up to 128, not " << a.head_size);
  std::int64_t const tokens = a.sequences.total_tokens;
  std::int64_t const max_len = a.sequences.max_seqlen;
  if (a.sequences.batch == 0 || max_len == 0 || tokens == 0) return;
  context_->activate();
  std::int64_t const heads = a.num_heads;
  std::int64_t const d = a.head_size;
  std::int64_t const stride = a.head_stride;
  bool const c2p = !a.pos_key.empty();
  bool const p2c = !a.pos_query.empty();
  std::int64_t const span2 = c2p ? a.pos_key.rows : (p2c ? a.pos_query.rows : 0);
  std::int64_t const band = tokens * heads * span2;
  std::int64_t const tables = std::int64_t{c2p} + std::int64_t{p2c};
  Buffer const relative = allocate(2 * tables * band, DType::kF32);  // the projected tables, then the bands
  float* next = relative.as<float>();
  auto const take = [&](bool given) {
    float* const taken = given ? next : nullptr;
    if (given) next += band;
    return taken;
  };
  float* const c2p_all = take(c2p);
  float* const p2c_all = take(p2c);
  cuda_kernels::AttentionBackwardBuffers buffers;
  buffers.c2p_all = c2p_all;
  buffers.p2c_all = p2c_all;
  float* const bands = next;
  buffers.band_c2p = take(c2p);
  buffers.band_p2c = take(p2c);
  if (tables > 0)
    FLASHDEBERTA_CUDA_CHECK(
        cudaMemsetAsync(bands, 0, static_cast<std::size_t>(tables * band) * sizeof(float), stream()));

  using cuda_detail::f32_view;
  auto const head = [&](MatrixRef const& m, std::int64_t h) { return f32_view(m.data, h * stride, tokens, d, m.ld); };
  auto const table = [&](MatrixRef const& m, std::int64_t h) { return f32_view(m.data, h * d, m.rows, d, m.ld); };
  auto const band_of = [&](float const* all, std::int64_t h) {
    return f32_view(all, h * span2, tokens, span2, heads * span2);
  };
  // The tensor-core passes (training/attention_backward_mma.cuh) gather these tables as the mixed-precision forward
  // did: made from the same rounded operands.
  bool const tensor_cores = a.impl == AttentionImpl::kFlash &&
                            cuda_kernels::attention_backward_mixed_applies(g, context_->limits, compute_dtype());
  project_pair_tables(a, c2p_all, p2c_all, tensor_cores);
  // Scratch returned to the cache at the end of its block: later work on the stream is ordered behind its readers.
  if (a.impl == AttentionImpl::kEager) {
    Buffer const square = allocate(2 * heads * max_len * max_len, DType::kF32);
    buffers.probabilities = square.as<float>();
    buffers.ds = buffers.probabilities + heads * max_len * max_len;
    cuda_kernels::attention_backward_eager(g, buffers, context_->limits, stream());
  } else {
    // D and lse, (heads, T) each. lse always: the tensor-core passes write their own even where the forward's is
    // given, and whether they run is the kernels' call (attention_backward_mma.cuh); heads T floats, small beside the
    // bands.
    Buffer const rows = allocate(2 * heads * tokens, DType::kF32);
    buffers.row_dot = rows.as<float>();
    buffers.lse = buffers.row_dot + heads * tokens;
    cuda_kernels::attention_backward_flash(g, buffers, context_->limits, compute_dtype(), stream());
  }
  // Each product is one strided-batched call over the heads: head h of q, k, dq, dk sits h stride columns in, of the
  // tables h d, of the bands h span2. Where the tensor-core passes ran, their operands are rounded as autocast rounds
  // these matmuls (each block of heads once; rounds_product: not a product of fewer than 16 terms).
  using Product = cuda_detail::CublasLtGemm::Product;
  auto const per_head = [&](Product product, std::int64_t stride_a, std::int64_t stride_b, std::int64_t stride_out) {
    product.batch = heads;
    product.batch_stride_a = stride_a;
    product.batch_stride_b = stride_b;
    product.batch_stride_out = stride_out;
    context_->gemm->run(product, stream());
  };
  bool const round_table = tensor_cores && rounds_product(a.q, a.q, a.q, span2);   // dq += band . Kr: 2k terms
  bool const round_input = tensor_cores && rounds_product(a.q, a.q, a.q, tokens);  // dKr += band^T . q: T terms
  auto const band_products = [&](float const* all, MatrixRef const& table_head0, MatrixRef const& input_head0,
                                 MatrixRef const& dinput_head0, MatrixRef const& dtable_head0) {
    MatrixRef const band32 = band_of(all, 0);
    RoundedOperand band16, table16, input16;
    MatrixRef const band16_view =
        round_table || round_input ? rounded_heads(band32, heads, span2, band16) : MatrixRef{};
    per_head({.a = round_table ? band16_view : band32,
              .b = round_table ? rounded_heads(table_head0, heads, d, table16) : table_head0,
              .out = dinput_head0,
              .beta = 1.0f},
             span2, d, stride);
    per_head({.a = round_input ? band16_view : band32,
              .transpose_a = true,
              .b = round_input ? rounded_heads(input_head0, heads, stride, input16) : input_head0,
              .out = dtable_head0,
              .beta = 1.0f},
             span2, stride, d);
  };
  if (c2p) band_products(buffers.band_c2p, table(a.pos_key, 0), head(a.q, 0), head(g.dq, 0), table(g.dpos_key, 0));
  if (p2c) band_products(buffers.band_p2c, table(a.pos_query, 0), head(a.k, 0), head(g.dk, 0), table(g.dpos_query, 0));
}

// The block of `heads` heads whose head 0 is `head0` (side by side, `stride` columns apart) rounded to the compute
// dtype in one copy, kept alive by `keep`; returns the copy's head 0 (the batch strides stay those of the block).
inline MatrixRef CudaPolicy::rounded_heads(MatrixRef const& head0, std::int64_t heads, std::int64_t stride,
                                           RoundedOperand& keep) const {
  keep = rounded({head0.data, DType::kF32, head0.rows, (heads - 1) * stride + head0.cols, head0.ld});
  return {keep.view.data, keep.view.dtype, head0.rows, head0.cols, keep.view.ld};
}

// c2p_all (T, heads, 2k) = q_h . Kr_h^T and p2c_all = k_h . Qr_h^T per head h, unscaled: the position terms of every
// pair, gathered by the flash backward and the mixed-precision forward. One strided-batched cuBLASLt product each
// (head h of q and k sits h head_stride columns in, of the tables h d, of the outputs h 2k). Null: not wanted.
// tensor_cores (the kernels that gather them run on tensor cores): q, k and the tables rounded to the compute dtype,
// as autocast runs these matmuls; the tables float32 either way.
inline void CudaPolicy::project_pair_tables(AttentionArgs const& a, float* c2p_all, float* p2c_all,
                                            bool tensor_cores) const {
  std::int64_t const tokens = a.sequences.total_tokens;
  std::int64_t const heads = a.num_heads;
  std::int64_t const d = a.head_size;
  std::int64_t const span2 = !a.pos_key.empty() ? a.pos_key.rows : (!a.pos_query.empty() ? a.pos_query.rows : 0);
  using cuda_detail::f32_view;
  using Product = cuda_detail::CublasLtGemm::Product;
  bool const round = tensor_cores && rounds_product(a.q, a.q, a.q, d);  // d terms
  auto const project = [&](MatrixRef const& x, MatrixRef const& table, float* out) {
    MatrixRef const x32 = f32_view(x.data, 0, tokens, d, x.ld);
    MatrixRef const table32 = f32_view(table.data, 0, table.rows, d, table.ld);
    RoundedOperand x16, table16;
    context_->gemm->run(Product{.a = round ? rounded_heads(x32, heads, a.head_stride, x16) : x32,
                                .b = round ? rounded_heads(table32, heads, d, table16) : table32,
                                .transpose_b = true,
                                .out = f32_view(out, 0, tokens, span2, heads * span2),
                                .batch = heads,
                                .batch_stride_a = a.head_stride,
                                .batch_stride_b = d,
                                .batch_stride_out = span2},
                        stream());
  };
  if (c2p_all != nullptr) project(a.q, a.pos_key, c2p_all);
  if (p2c_all != nullptr) project(a.k, a.pos_query, p2c_all);
}

// The forward of training under a bf16 / fp16 compute dtype (training/attention_forward_mma.cuh): float32 q, k, v,
// out and lse, 16-bit products. The position tables (2 (T, heads, 2k) floats, as the backward's) are scratch,
// returned to the cache once the kernel that reads them is enqueued.
inline void CudaPolicy::attend_mixed_precision(AttentionArgs const& a) const {
  std::int64_t const tokens = a.sequences.total_tokens;
  if (a.sequences.batch == 0 || a.sequences.max_seqlen == 0 || tokens == 0) return;
  bool const c2p = !a.pos_key.empty();
  bool const p2c = !a.pos_query.empty();
  std::int64_t const span2 = c2p ? a.pos_key.rows : (p2c ? a.pos_query.rows : 0);
  std::int64_t const band = tokens * a.num_heads * span2;
  Buffer tables;
  if (c2p || p2c) tables = allocate((std::int64_t{c2p} + std::int64_t{p2c}) * band, DType::kF32);
  float* const c2p_all = c2p ? tables.as<float>() : nullptr;
  float* const p2c_all = p2c ? tables.as<float>() + (c2p ? band : 0) : nullptr;
  project_pair_tables(a, c2p_all, p2c_all, /*tensor_cores=*/true);
  cuda_kernels::AttentionBackwardBuffers buffers;
  buffers.c2p_all = c2p_all;
  buffers.p2c_all = p2c_all;
  cuda_kernels::attention_forward_mixed(a, buffers, context_->limits, compute_dtype(), stream());
}

// Inverted dropout; element (r, c) of the view draws counter offset + r cols + c.
inline void CudaPolicy::dropout(DropoutArgs const& d) const {
  require_dropout_args(d);
  context_->activate();
  cuda_kernels::dropout(d, stream());
}

// One element per thread in float64; the four arrays must not overlap.
inline void CudaPolicy::adamw(AdamWArgs const& a) const {
  require_adamw_args(a);
  context_->activate();
  cuda_kernels::adamw(a, stream());
}

inline void CudaPolicy::fill(MatrixRef const& m, float value) const {
  if (m.rows == 0 || m.cols == 0) return;
  require_training_matrix("fill", "out", m, m.rows, m.cols);
  context_->activate();
  cuda_kernels::fill(m, value, stream());
}

// Chunks of kSquaresChunk elements summed on the device in float64, their sums added in chunk order on the host.
inline double CudaPolicy::sum_of_squares(float const* values, std::int64_t count) const {
  FLASHDEBERTA_REQUIRE(count >= 0 && (count == 0 || values != nullptr),
                       "sum_of_squares: " << count << " values at " << static_cast<void const*>(values));
  if (count == 0) return 0.0;
  require_not_capturing("sum_of_squares");
  context_->activate();
  std::int64_t const chunks = (count + cuda_kernels::kSquaresChunk - 1) / cuda_kernels::kSquaresChunk;
  Buffer const partial = allocate(chunks, DType::kF64);
  cuda_kernels::sum_of_squares_chunks(values, count, partial.as<double>(), stream());
  std::vector<double> host(static_cast<std::size_t>(chunks));
  FLASHDEBERTA_CUDA_CHECK(
      cudaMemcpyAsync(host.data(), partial.data(), host.size() * sizeof(double), cudaMemcpyDeviceToHost, stream()));
  FLASHDEBERTA_CUDA_CHECK(cudaStreamSynchronize(stream()));
  double total = 0.0;
  for (double sum : host) total += sum;
  return total;
}

inline CudaPolicy::Buffer CudaPolicy::upload_chunks(std::span<FloatRun const> runs, std::int64_t& chunks) const {
  std::vector<FloatRun> list;
  for (FloatRun const& r : runs) {
    FLASHDEBERTA_REQUIRE(r.count >= 0 && (r.count == 0 || r.data != nullptr),
                         "a run of " << r.count << " floats at " << static_cast<void const*>(r.data));
    for (std::int64_t at = 0; at < r.count; at += cuda_kernels::kSquaresChunk)
      list.push_back({r.data + at, std::min(cuda_kernels::kSquaresChunk, r.count - at)});
  }
  chunks = static_cast<std::int64_t>(list.size());
  FLASHDEBERTA_REQUIRE(chunks < (std::int64_t{1} << 31), chunks << " chunks exceed one launch's grid");
  if (chunks == 0) return {};
  static_assert(sizeof(FloatRun) == 16, "two 8-byte words");
  Buffer list_d = allocate(2 * chunks, DType::kI64);
  // Pageable memory: the copy is staged before the call returns, so `list` may go.
  FLASHDEBERTA_CUDA_CHECK(
      cudaMemcpyAsync(list_d.data(), list.data(), list.size() * sizeof(FloatRun), cudaMemcpyHostToDevice, stream()));
  return list_d;
}

inline void CudaPolicy::fill(std::span<FloatRun const> runs, float value) const {
  require_not_capturing("fill of runs");  // its chunk list is uploaded from pageable memory
  context_->activate();
  std::int64_t chunks = 0;
  Buffer const list = upload_chunks(runs, chunks);
  cuda_kernels::fill_list(static_cast<FloatRun const*>(list.data()), chunks, value, stream());
}

// Each chunk's float64 sum on the device, the sums added in chunk order on the host: one round trip for all runs.
inline double CudaPolicy::sum_of_squares(std::span<FloatRun const> runs) const {
  require_not_capturing("sum_of_squares");
  context_->activate();
  std::int64_t chunks = 0;
  Buffer const list = upload_chunks(runs, chunks);
  if (chunks == 0) return 0.0;
  Buffer const partial = allocate(chunks, DType::kF64);
  cuda_kernels::sum_of_squares_list(static_cast<FloatRun const*>(list.data()), chunks, partial.as<double>(), stream());
  std::vector<double> host(static_cast<std::size_t>(chunks));
  FLASHDEBERTA_CUDA_CHECK(
      cudaMemcpyAsync(host.data(), partial.data(), host.size() * sizeof(double), cudaMemcpyDeviceToHost, stream()));
  FLASHDEBERTA_CUDA_CHECK(cudaStreamSynchronize(stream()));
  double total = 0.0;
  for (double sum : host) total += sum;
  return total;
}

}  // namespace flashdeberta

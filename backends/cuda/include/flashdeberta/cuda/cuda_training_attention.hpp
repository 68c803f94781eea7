// CudaPolicy's attention for training (the methods cuda_policy.hpp declares and includes this header for at its end,
// after cuda_training_ops.hpp): the attention backward around its kernels (training/attention_backward_*.cuh), the
// per-head position tables it and the mixed-precision forward gather, and that forward
// (training/attention_forward_mma.cuh). Float32 operands; under a bf16 / fp16 compute dtype the flash kernels and the
// products around them run on tensor cores.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "flashdeberta/cuda/cuda_policy.hpp"
#include "flashdeberta/cuda/cuda_training_ops.hpp"
#include "flashdeberta/cuda/training/launch.hpp"
#include "flashdeberta/policy/training_op_checks.hpp"

namespace flashdeberta {

// The kernels of training/attention_backward_*.cuh around cuBLASLt products, per head h (s = 1 / scale):
//   c2p_all[:, h] (T, 2k) = q_h . Kr_h^T and p2c_all[:, h] = k_h . Qr_h^T, the pairs' position terms;
//   the kernels: dQ, dK, dV's content terms written, the bands s Gc2p and s Gp2c (T, heads, 2k) formed
//     (flash with a bf16 / fp16 compute dtype: their five products on tensor cores, operands rounded to it);
//   dq_h += band_c2p_h . Kr_h,  dk_h += band_p2c_h . Qr_h,  dKr_h += band_c2p_h^T . q_h,  dQr_h += band_p2c_h^T . k_h.
// Memory beyond the gradients: four (T, heads, 2k) tables (linear in T; the two projected ones in the compute dtype
// where the tensor-core kernels read them); flash (heads, T) D and lse, eager two
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
  // The tensor-core passes (training/attention_backward_mma.cuh) read these tables as the mixed-precision forward did:
  // made from the same rounded operands, in the compute dtype.
  bool const tensor_cores = a.impl == AttentionImpl::kFlash &&
                            cuda_kernels::attention_backward_mixed_applies(g, context_->limits, compute_dtype());
  cuda_kernels::AttentionBackwardBuffers buffers;
  buffers.tables = tensor_cores ? compute_dtype() : DType::kF32;
  Buffer const projected = allocate(tables * band, buffers.tables);
  Buffer const bands = allocate(tables * band, DType::kF32);
  void* const c2p_all = c2p ? projected.data() : nullptr;
  void* const p2c_all =
      p2c ? static_cast<char*>(projected.data()) + (c2p ? band * dtype_size(buffers.tables) : 0) : nullptr;
  buffers.c2p_all = c2p_all;
  buffers.p2c_all = p2c_all;
  buffers.band_c2p = c2p ? bands.as<float>() : nullptr;
  buffers.band_p2c = p2c ? bands.as<float>() + (c2p ? band : 0) : nullptr;
  if (tables > 0)
    FLASHDEBERTA_CUDA_CHECK(
        cudaMemsetAsync(bands.data(), 0, static_cast<std::size_t>(tables * band) * sizeof(float), stream()));

  using cuda_detail::f32_view;
  auto const head = [&](MatrixRef const& m, std::int64_t h) { return f32_view(m.data, h * stride, tokens, d, m.ld); };
  auto const table = [&](MatrixRef const& m, std::int64_t h) { return f32_view(m.data, h * d, m.rows, d, m.ld); };
  auto const band_of = [&](float const* all, std::int64_t h) {
    return f32_view(all, h * span2, tokens, span2, heads * span2);
  };
  project_pair_tables(a, c2p_all, p2c_all, tensor_cores);
  // Scratch returned to the cache at the end of its block: later work on the stream is ordered behind its readers.
  if (a.impl == AttentionImpl::kEager) {
    Buffer const square = allocate(2 * heads * max_len * max_len, DType::kF32);
    buffers.probabilities = square.as<float>();
    buffers.ds = buffers.probabilities + heads * max_len * max_len;
    cuda_kernels::attention_backward_eager(g, buffers, context_->limits, stream());
  } else {
    // D and lse, (heads, T) each: written by the kernels that form them (the float32 row pass without the forward's
    // lse; the tensor-core passes' D always, their lse without the forward's); heads T floats, small beside the bands.
    Buffer const rows = allocate(2 * heads * tokens, DType::kF32);
    buffers.row_dot = rows.as<float>();
    buffers.lse = buffers.row_dot + heads * tokens;
    cuda_kernels::attention_backward_flash(g, buffers, context_->limits, compute_dtype(), stream());
  }
  // Each product is one strided-batched call over the heads: head h of q, k, dq, dk sits h stride columns in, of the
  // tables h d, of the bands h span2. Where the tensor-core passes ran, dq's and dk's products round their operands as
  // autocast rounds these matmuls (each block of heads once; rounds_product: not a product of fewer than 16 terms).
  using Product = cuda_detail::CublasLtGemm::Product;
  auto const per_head = [&](Product product, std::int64_t stride_a, std::int64_t stride_b, std::int64_t stride_out) {
    product.batch = heads;
    product.batch_stride_a = stride_a;
    product.batch_stride_b = stride_b;
    product.batch_stride_out = stride_out;
    context_->gemm->run(product, stream());
  };
  // dKr += band^T . q (and dQr += band^T . k) stay float32: summed over the slots they give sum_i q_i sum_j dS_ij,
  // zero by the softmax's shift invariance, and that sum is the key bias's gradient (share_att_key); rounded bands
  // lost the cancellation (layer 0's key_proj above HF autocast's own error in 2 of 28 mixed-precision cases on the
  // H100, 2026-12-07). dq += band . Kr sums no such cancellation.
  bool const round_table = tensor_cores && rounds_product(a.q, a.q, a.q, span2);  // dq += band . Kr: 2k terms
  auto const band_products = [&](float const* all, MatrixRef const& table_head0, MatrixRef const& input_head0,
                                 MatrixRef const& dinput_head0, MatrixRef const& dtable_head0) {
    MatrixRef const band32 = band_of(all, 0);
    RoundedOperand band16, table16;
    per_head({.a = round_table ? rounded_heads(band32, heads, span2, band16) : band32,
              .b = round_table ? rounded_heads(table_head0, heads, d, table16) : table_head0,
              .out = dinput_head0,
              .beta = 1.0f},
             span2, d, stride);
    per_head({.a = band32, .transpose_a = true, .b = input_head0, .out = dtable_head0, .beta = 1.0f}, span2, stride, d);
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
// pair, read by the flash backward and the mixed-precision forward. One strided-batched cuBLASLt product each (head h
// of q and k sits h head_stride columns in, of the tables h d, of the outputs h 2k). Null: not wanted. tensor_cores
// (the kernels that read them run on tensor cores): q, k and the tables rounded to the compute dtype and the outputs
// in it, as autocast runs these matmuls; else float32 throughout.
inline void CudaPolicy::project_pair_tables(AttentionArgs const& a, void* c2p_all, void* p2c_all,
                                            bool tensor_cores) const {
  std::int64_t const tokens = a.sequences.total_tokens;
  std::int64_t const heads = a.num_heads;
  std::int64_t const d = a.head_size;
  std::int64_t const span2 = !a.pos_key.empty() ? a.pos_key.rows : (!a.pos_query.empty() ? a.pos_query.rows : 0);
  using cuda_detail::f32_view;
  using Product = cuda_detail::CublasLtGemm::Product;
  // Rounded whatever d: the kernels read 16-bit tables, a product cuBLASLt runs on 16-bit operands only.
  bool const round = tensor_cores;
  DType const out_dtype = tensor_cores ? compute_dtype() : DType::kF32;
  auto const project = [&](MatrixRef const& x, MatrixRef const& table, void* out) {
    MatrixRef const x32 = f32_view(x.data, 0, tokens, d, x.ld);
    MatrixRef const table32 = f32_view(table.data, 0, table.rows, d, table.ld);
    RoundedOperand x16, table16;
    context_->gemm->run(Product{.a = round ? rounded_heads(x32, heads, a.head_stride, x16) : x32,
                                .b = round ? rounded_heads(table32, heads, d, table16) : table32,
                                .transpose_b = true,
                                .out = {out, out_dtype, tokens, span2, heads * span2},
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
// out and lse, 16-bit products. The position tables (2 (T, heads, 2k) in the compute dtype, as the backward's) are
// scratch, returned to the cache once the kernel that reads them is enqueued.
inline void CudaPolicy::attend_mixed_precision(AttentionArgs const& a) const {
  std::int64_t const tokens = a.sequences.total_tokens;
  if (a.sequences.batch == 0 || a.sequences.max_seqlen == 0 || tokens == 0) return;
  bool const c2p = !a.pos_key.empty();
  bool const p2c = !a.pos_query.empty();
  std::int64_t const span2 = c2p ? a.pos_key.rows : (p2c ? a.pos_query.rows : 0);
  std::int64_t const band = tokens * a.num_heads * span2;
  DType const element = compute_dtype();
  Buffer tables;
  if (c2p || p2c) tables = allocate((std::int64_t{c2p} + std::int64_t{p2c}) * band, element);
  void* const c2p_all = c2p ? tables.data() : nullptr;
  void* const p2c_all = p2c ? static_cast<char*>(tables.data()) + (c2p ? band * dtype_size(element) : 0) : nullptr;
  project_pair_tables(a, c2p_all, p2c_all, /*tensor_cores=*/true);
  cuda_kernels::AttentionBackwardBuffers buffers;
  buffers.c2p_all = c2p_all;
  buffers.p2c_all = p2c_all;
  buffers.tables = element;
  cuda_kernels::attention_forward_mixed(a, buffers, context_->limits, compute_dtype(), stream());
}

}  // namespace flashdeberta

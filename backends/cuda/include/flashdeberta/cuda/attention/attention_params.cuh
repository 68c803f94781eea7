// The one argument of every attention kernel (eager, flash, tensor-core flash, the float32 backward), passed by
// value, and what fills it from AttentionArgs with the checks every attention launcher shares (dispatch.cuh, the
// training backward's training/attention_backward_launch.cuh): the operands, the grid, the head-size dispatch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/policy/op_args.hpp"
#include "flashdeberta/policy/training_op_args.hpp"

namespace flashdeberta::cuda_kernels {

// log2(e). The tensor-core flash kernel keeps its scores in log2 units (exp2 is one instruction): it scales
// q by kLog2e / scale, and dispatch.cuh stores the by-diff Qr table pre-scaled by the same factor, so both
// must use this one value.
inline constexpr float kLog2e = 1.4426950408889634f;

// One disentangled-attention call (op_args.hpp, AttentionArgs) as the kernels see it: raw pointers in
// the compute dtype; head h of q, k, v starts at column h * head_stride, of out and the relative tables
// at column h * head_size.
struct AttentionParams {
  void const* q;
  void const* k;
  void const* v;
  void* out;
  std::int64_t q_ld, k_ld, v_ld, out_ld, head_stride;
  void const* pos_key;    // (2k, A) Kr, or null without c2p
  void const* pos_query;  // (2k, A) Qr, or null without p2c
  std::int64_t pos_key_ld, pos_query_ld;
  std::int32_t const* relative_index;  // (2 * saturation + 1)
  int saturation;
  std::int32_t const* cu_seqlens;  // (B + 1)
  std::int32_t const* positions;   // (T)
  int head_size;
  float scale;
  float inv_scale;
  bool c2p;
  bool p2c;
  bool contiguous;  // positions[t] - positions[first] == t - first in every sequence (no holes)
  // Tensor-core kernel, contiguous positions, head size 64: Kr / Qr indexed by difference (by_diff_tables.cuh);
  // by_diff_ld == 0 when absent.
  void const* key_by_diff = nullptr;
  void const* query_by_diff = nullptr;
  std::int64_t by_diff_ld = 0;
  int by_diff_offset = 0;
  int by_diff_rows = 0;
  // Training, float32 paths only (AttentionArgs::lse, AttentionArgs::dropout): each row's natural-log sum of
  // exp(S), (heads, T), or null; dropout on the probabilities after the softmax, 0 off.
  float* lse = nullptr;
  float dropout = 0.0f;
  float dropout_scale = 1.0f;  // 1 / (1 - dropout) in float32, as the host backends compute it
  std::uint64_t dropout_seed = 0;
  std::uint64_t dropout_offset = 0;
  std::int64_t total_tokens = 0;  // T and max_seqlen: the strides of the dropout counter
  std::int64_t max_seqlen = 0;
};

// m / (1 - p) of head h's pair (packed query token, key index `key` within its sequence): dropout_scale or 0, from
// the counter (h T + token) max_seqlen + key past dropout_offset (op_args.hpp), so every kernel redraws one mask.
__device__ __forceinline__ float dropout_factor(AttentionParams const& p, int h, std::int64_t token, int key) {
  auto const counter = p.dropout_offset + static_cast<std::uint64_t>((h * p.total_tokens + token) * p.max_seqlen + key);
  return dropout_uniform(p.dropout_seed, counter) >= p.dropout ? p.dropout_scale : 0.0f;
}

// fn.template operator()<D>() with D the smallest compiled head size >= head_size: every DeBERTa head
// size (64 in all official checkpoints; 8 to 128 in the fixtures) runs one of three instantiations.
template <class Fn>
void dispatch_head_size(std::int64_t head_size, Fn&& fn) {
  if (head_size <= 32) {
    fn.template operator()<32>();
  } else if (head_size <= 64) {
    fn.template operator()<64>();
  } else if (head_size <= 128) {
    fn.template operator()<128>();
  } else {
    FLASHDEBERTA_FAIL("CudaPolicy attention supports head sizes up to 128, not " << head_size);
  }
}

inline AttentionParams attention_params(AttentionArgs const& a) {
  bool const c2p = !a.pos_key.empty();
  bool const p2c = !a.pos_query.empty();
  FLASHDEBERTA_REQUIRE(
      a.q.dtype == a.k.dtype && a.q.dtype == a.v.dtype && a.q.dtype == a.out.dtype &&
          (!c2p || a.pos_key.dtype == a.q.dtype) && (!p2c || a.pos_query.dtype == a.q.dtype),
      "attention operands must share one dtype; q is " << dtype_name(a.q.dtype) << ", out " << dtype_name(a.out.dtype));
  FLASHDEBERTA_REQUIRE(
      !c2p || !p2c || a.pos_key.rows == a.pos_query.rows,
      "relative key and query tables differ in rows: " << a.pos_key.rows << " vs " << a.pos_query.rows);
  FLASHDEBERTA_REQUIRE(!(c2p || p2c) || a.relative_index != nullptr, "position terms need the relative slot table");
  FLASHDEBERTA_REQUIRE(a.head_size > 0 && a.num_heads > 0,
                       "attention with " << a.num_heads << " heads of size " << a.head_size);
  FLASHDEBERTA_REQUIRE(
      a.sequences.max_seqlen < (std::int64_t{1} << 30) && a.sequences.total_tokens < (std::int64_t{1} << 31),
      "attention over " << a.sequences.total_tokens << " tokens exceeds 32-bit token indices");
  FLASHDEBERTA_REQUIRE(a.dropout >= 0.0f && a.dropout < 1.0f,
                       "attention dropout (attention_probs_dropout_prob) must lie in [0, 1), not " << a.dropout);
  FLASHDEBERTA_REQUIRE((a.dropout == 0.0f && a.lse == nullptr) || a.q.dtype == DType::kF32,
                       "CudaPolicy: training's attention dropout and log-sum-exp output run in float32 only so far; "
                           << "the operands are " << dtype_name(a.q.dtype));
  AttentionParams params{a.q.data,
                         a.k.data,
                         a.v.data,
                         a.out.data,
                         a.q.ld,
                         a.k.ld,
                         a.v.ld,
                         a.out.ld,
                         a.head_stride,
                         c2p ? a.pos_key.data : nullptr,
                         p2c ? a.pos_query.data : nullptr,
                         a.pos_key.ld,
                         a.pos_query.ld,
                         a.relative_index,
                         static_cast<int>(a.saturation),
                         a.sequences.cu_seqlens,
                         a.sequences.positions,
                         static_cast<int>(a.head_size),
                         a.scale,
                         1.0f / a.scale,
                         c2p,
                         p2c,
                         a.sequences.contiguous_positions};
  params.lse = a.lse;
  params.dropout = a.dropout;
  params.dropout_scale = 1.0f / (1.0f - a.dropout);
  params.dropout_seed = a.dropout_seed;
  params.dropout_offset = a.dropout_offset;
  params.total_tokens = a.sequences.total_tokens;
  params.max_seqlen = a.sequences.max_seqlen;
  return params;
}

inline dim3 attention_grid(AttentionArgs const& a, std::int64_t rows_per_cta) {
  FLASHDEBERTA_REQUIRE(a.num_heads <= 65535 && a.sequences.batch <= 65535,
                       "attention grid of " << a.num_heads << " heads x " << a.sequences.batch
                                            << " sequences exceeds 65535 per dimension");
  std::int64_t const blocks = (a.sequences.max_seqlen + rows_per_cta - 1) / rows_per_cta;
  return dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(a.num_heads),
              static_cast<unsigned>(a.sequences.batch));
}

}  // namespace flashdeberta::cuda_kernels

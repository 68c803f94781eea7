// The one argument of every attention kernel (eager, flash, tensor-core flash), passed by value;
// dispatch.cuh fills it from AttentionArgs.
#pragma once

#include <cstdint>

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
};

}  // namespace flashdeberta::cuda_kernels

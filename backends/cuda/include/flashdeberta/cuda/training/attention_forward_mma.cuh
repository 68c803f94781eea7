// The attention forward of mixed-precision training on tensor cores: the row pass of the tensor-core backward
// (attention_backward_mma_rows.cuh) turned into a forward, with the same tiles, staging and products. Training keeps
// q, k, v and the output in float32 (the tape); under a bf16 / fp16 compute dtype this kernel rounds q, k and v to it
// as it stages them, runs S = q k^T and O += (P M) v on mma.sync m16n8k16 with float32 accumulation, and keeps the
// position terms, the softmax, the dropout mask M and O float32, as torch.autocast runs HF's attention (its matmuls in
// 16 bits, its softmax in float32). The inference kernel (attention/flash_mma_kernel.cuh) takes 16-bit operands and
// writes a 16-bit output, and has neither the dropout nor the log-sum-exp training asks for.
//
// One CTA per (64 query rows, head, sequence) sweeps the sequence's keys 64 at a time; warp w owns rows
// [16w, 16w + 16) and keeps their O, running maximum and sum in registers. Per key step: k, v staged (16-bit) with the
// step's position terms (float32, staged from the projected tables buffers.c2p_all and p2c_all as the backward
// stages them: stage_position_terms); S = q k^T; S + c2p + p2c; online softmax in natural-log units; P M with the
// forward's counter (dropout_factor); O += (P M) v with P M split into its rounding to T and the remainder. At the end
// out = O / l (float32) and, when asked, lse = m + log l of the undropped row. The backward's tensor-core passes form
// their own lse from their own products (attention_backward_mma.cuh), so this one is written for callers that read it,
// not for them.
#pragma once

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>

#include "flashdeberta/cuda/attention/mma.cuh"
#include "flashdeberta/cuda/training/attention_backward_common.cuh"
#include "flashdeberta/cuda/training/attention_backward_mma.cuh"
#include "flashdeberta/cuda/training/attention_backward_mma_common.cuh"
#include "flashdeberta/cuda/training/launch.hpp"

namespace flashdeberta::cuda_kernels::training {

template <class Tr>
__global__ void __launch_bounds__(Tr::kThreads)
    mma_forward_kernel(BackwardParams const b, MmaBackwardLoads const loads) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using T = typename Tr::Element;
  constexpr int BO = Tr::kBlockOwned, BS = Tr::kBlockSweep, NS = Tr::kSweepTiles, NH = Tr::kHeadTiles;
  extern __shared__ __align__(16) unsigned char mma_smem[];  // not `smem`: the float32 kernels declare it as float[]
  T* const q_s = reinterpret_cast<T*>(mma_smem + Tr::kOwnedAOffset);  // (BO, 64) the owned query rows
  T* const k_s = reinterpret_cast<T*>(mma_smem + Tr::kSweepAOffset);  // (BS, 64) the step's keys
  T* const v_s = reinterpret_cast<T*>(mma_smem + Tr::kSweepBOffset);  // (BS, 64) their values

  AttentionParams const& p = b.p;
  int const h = blockIdx.y;
  int const first = p.cu_seqlens[blockIdx.z];
  int const length = p.cu_seqlens[blockIdx.z + 1] - first;
  int const i0 = blockIdx.x * BO;
  if (i0 >= length) return;  // uniform over the CTA
  int const rows = min(BO, length - i0);
  int const warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  int const d = p.head_size;
  float const* const q = static_cast<float const*>(p.q) + h * p.head_stride;  // (T, *) head h of q, k, v
  float const* const k = static_cast<float const*>(p.k) + h * p.head_stride;
  float const* const v = static_cast<float const*>(p.v) + h * p.head_stride;

  stage_tile<Tr, BO>(q_s, q + (first + i0) * p.q_ld, p.q_ld, rows, d, loads.q);

  // The thread's rows g, g + 8 of its warp (rr = 0, 1). Padding rows repeat the last valid token: every look-up stays
  // in range; they are not written.
  bool valid[2];
  std::int64_t qtok[2];
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    int const r = 16 * warp + g + 8 * rr;
    valid[rr] = r < rows;
    qtok[rr] = first + i0 + min(r, rows - 1);
  }
  FragmentAddresses const frag = fragment_addresses(mma_smem, warp);
  bool const dropped = p.dropout > 0.0f;
  bool const relative = p.c2p || p.p2c;

  float o[NH][4] = {};  // (P M) v of the warp's rows, head columns 8 nt + 2 t (+1), unnormalized
  float run_max[2] = {-INFINITY, -INFINITY};
  float run_sum[2] = {0.0f, 0.0f};  // the thread's partial sums over its own columns, rescaled with o
  for (int j0 = 0; j0 < length; j0 += BS) {
    int const cols = min(BS, length - j0);
    __syncthreads();  // the previous step is done with k_s, v_s and the terms (first step: q_s is staged)
    stage_tile<Tr, BS>(k_s, k + (first + j0) * p.k_ld, p.k_ld, cols, d, loads.k);
    stage_tile<Tr, BS>(v_s, v + (first + j0) * p.v_ld, p.v_ld, cols, d, loads.v);
    if (relative) stage_position_terms<Tr, true>(b, mma_smem, h, first + i0, rows, first + j0, cols);
    __syncthreads();

    float s[NS][4];  // S, then S / scale (-inf past the keys), then P M
    owned_times_swept<Tr, Tr::kOwnedAOffset, Tr::kSweepAOffset>(s, frag);
    finish_scores<Tr>(s, mma_smem, warp, relative,
                      [&](float score, int, int c) { return c < cols ? score * p.inv_scale : -INFINITY; });
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      float step = -INFINITY;  // the step's largest S / scale of the row (key 0 is valid: finite)
#pragma unroll
      for (int nt = 0; nt < NS; ++nt) step = fmaxf(step, fmaxf(s[nt][2 * rr], s[nt][2 * rr + 1]));
      step = fmaxf(step, __shfl_xor_sync(0xffffffffu, step, 1));
      step = fmaxf(step, __shfl_xor_sync(0xffffffffu, step, 2));
      float const new_max = fmaxf(run_max[rr], step);
      float const rescale = __expf(run_max[rr] - new_max);  // 0 on the first step
      run_max[rr] = new_max;
      run_sum[rr] *= rescale;
#pragma unroll
      for (int nt = 0; nt < NH; ++nt) {
        o[nt][2 * rr] *= rescale;
        o[nt][2 * rr + 1] *= rescale;
      }
    }
    std::uint32_t const kept = !dropped ? ~0u : dropout_bits<Tr>([&](int nt, int e) {
      return dropout_factor(p, h, qtok[e / 2], j0 + 8 * nt + 2 * t + e % 2) != 0.0f;
    });
#pragma unroll
    for (int nt = 0; nt < NS; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        int const rr = e / 2;
        float const prob = 8 * nt + 2 * t + e % 2 < cols ? __expf(s[nt][e] - run_max[rr]) : 0.0f;
        run_sum[rr] += prob;
        float const m = (kept >> (4 * nt + e) & 1u) != 0 ? p.dropout_scale : 0.0f;  // dropout_factor's values
        s[nt][e] = dropped ? prob * m : prob;
      }
    // O += (P M) v in two products, P M's rounding to T and what that rounding left out: O is then (P M) v to float32
    // accuracy for the rounded v, as the backward's D = dO . O needs it (attention_backward_mma.cuh)
    accumulate_product<Tr, Tr::kSweepBOffset>(o, s, frag);
#pragma unroll
    for (int nt = 0; nt < NS; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] -= rounded_to<T>(s[nt][e]);
    accumulate_product<Tr, Tr::kSweepBOffset>(o, s, frag);
  }

  float* const out_head = static_cast<float*>(p.out) + h * p.head_size;  // (T, *) head h of out: written
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    float sum = run_sum[rr];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    if (!valid[rr]) continue;
    if (p.lse != nullptr && t == 0) p.lse[h * p.total_tokens + qtok[rr]] = run_max[rr] + logf(sum);
    float const inv = 1.0f / sum;
    float* const row = out_head + qtok[rr] * p.out_ld;
#pragma unroll
    for (int nt = 0; nt < NH; ++nt) {
      int const col = 8 * nt + 2 * t;
      if (col < d) row[col] = o[nt][2 * rr] * inv;
      if (col + 1 < d) row[col + 1] = o[nt][2 * rr + 1] * inv;
    }
  }
#else
  __trap();  // attention_forward_mixed sends code below sm_80 to the float32 kernels
#endif
}

}  // namespace flashdeberta::cuda_kernels::training

namespace flashdeberta::cuda_kernels {

bool attention_forward_mixed_applies(AttentionArgs const& a, DeviceLimits const& limits, DType products) {
  return (products == DType::kBF16 || products == DType::kF16) && a.q.dtype == DType::kF32 &&
         a.impl == AttentionImpl::kFlash && limits.compute_capability >= 80 && a.head_size <= 64 &&
         training::MmaBackwardTraits<__half>::is_valid(limits.max_smem_per_block);
}

void attention_forward_mixed(AttentionArgs const& a, AttentionBackwardBuffers const& buffers,
                             DeviceLimits const& limits, DType products, cudaStream_t stream) {
  FLASHDEBERTA_REQUIRE(attention_forward_mixed_applies(a, limits, products),
                       "the mixed-precision attention forward takes float32 operands, BF16 or F16 products, head "
                       "sizes up to 64 and sm_80+; got "
                           << dtype_name(a.q.dtype) << " operands, " << dtype_name(products) << " products, head size "
                           << a.head_size << ", sm_" << limits.compute_capability);
  if (a.sequences.batch == 0 || a.sequences.max_seqlen == 0 || a.sequences.total_tokens == 0) return;
  FLASHDEBERTA_REQUIRE(
      (a.pos_key.empty() || buffers.c2p_all != nullptr) && (a.pos_query.empty() || buffers.p2c_all != nullptr),
      "the mixed-precision attention forward needs the projected position tables");
  FLASHDEBERTA_REQUIRE(buffers.tables == products || (a.pos_key.empty() && a.pos_query.empty()),
                       "the mixed-precision attention forward reads its position tables in "
                           << dtype_name(products) << ", not " << dtype_name(buffers.tables));
  AttentionBackwardArgs g;
  g.forward = a;
  training::BackwardParams params = training::backward_params(g, buffers);
  params.p.lse = a.lse;  // backward_params clears it: the backward never writes it, this forward does
  training::MmaBackwardLoads const loads = training::mma_backward_loads(params);
  dim3 const grid = attention_grid(a, training::MmaBackwardTraits<__half>::kBlockOwned);
  dispatch_float_type(products, [&]<class T>() {
    if constexpr (!std::is_same_v<T, float>) {
      using Traits = training::MmaBackwardTraits<T>;
      auto* const kernel = training::mma_forward_kernel<Traits>;
      training::allow_shared_memory(kernel, Traits::kSmemBytes);
      kernel<<<grid, Traits::kThreads, Traits::kSmemBytes, stream>>>(params, loads);
      FLASHDEBERTA_CUDA_CHECK_LAUNCH();
    }
  });
}

}  // namespace flashdeberta::cuda_kernels

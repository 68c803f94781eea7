// The row pass of the tensor-core flash backward (attention_backward_mma.cuh): one CTA per (64 query rows, head,
// sequence) sweeps the sequence's keys 64 at a time, twice; warp w owns rows [16w, 16w + 16) and keeps their dQ in
// registers. Once: q and dO staged as 16-bit tiles. Per key step, in both sweeps: k and v staged (16-bit) with the
// step's position terms (float32, from the projected tables: stage_position_terms); S = q k^T and dP = dO v^T
// (tensor cores), S + c2p + p2c; M the dropout mask. The first sweep forms each row's own softmax statistics from them
// (online, as the forward): lse = log sum_j exp(S_j / scale) and D = sum_j P_j M_j dP_j, written to buffers.lse and
// buffers.row_dot for the column pass; given the mixed-precision forward's lse there is no first sweep. The second:
//   P = exp(S / scale - lse);  dS / scale = P (dP M - D) / scale in float32;
//   dQ += (dS / scale) k (tensor cores, dS rounded to T);  the rows' c2p bands += dS / scale (add_band_step).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "flashdeberta/cuda/attention/mma.cuh"
#include "flashdeberta/cuda/training/attention_backward_common.cuh"
#include "flashdeberta/cuda/training/attention_backward_mma_common.cuh"

namespace flashdeberta::cuda_kernels::training {

template <class Tr>
__global__ void __launch_bounds__(Tr::kThreads)
    mma_backward_rows_kernel(BackwardParams const b, MmaBackwardLoads const loads) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using T = typename Tr::Element;
  constexpr int BO = Tr::kBlockOwned, BS = Tr::kBlockSweep, NS = Tr::kSweepTiles, NH = Tr::kHeadTiles;
  extern __shared__ __align__(16) unsigned char mma_smem[];  // not `smem`: the float32 kernels declare it as float[]
  T* const q_s = reinterpret_cast<T*>(mma_smem + Tr::kOwnedAOffset);           // (BO, 64) the owned query rows
  T* const do_s = reinterpret_cast<T*>(mma_smem + Tr::kOwnedBOffset);          // (BO, 64) their dO
  T* const k_s = reinterpret_cast<T*>(mma_smem + Tr::kSweepAOffset);           // (BS, 64) the step's keys
  T* const v_s = reinterpret_cast<T*>(mma_smem + Tr::kSweepBOffset);           // (BS, 64) their values
  float* const ds_s = reinterpret_cast<float*>(mma_smem + Tr::kBandOffset);    // dS / scale, after the terms
  int* const kpos_s = reinterpret_cast<int*>(mma_smem + Tr::kPositionOffset);  // (BS) the step's key positions

  AttentionParams const& p = b.p;
  int const h = blockIdx.y;
  int const first = p.cu_seqlens[blockIdx.z];
  int const length = p.cu_seqlens[blockIdx.z + 1] - first;
  int const i0 = blockIdx.x * BO;
  if (i0 >= length) return;  // uniform over the CTA
  int const rows = min(BO, length - i0);
  int const warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  int const d = p.head_size;
  std::int64_t const stats = h * p.total_tokens + first + i0;                 // the rows' offset in (heads, T)
  float const* const q = static_cast<float const*>(p.q) + h * p.head_stride;  // (T, *) head h of q, k, v
  float const* const k = static_cast<float const*>(p.k) + h * p.head_stride;
  float const* const v = static_cast<float const*>(p.v) + h * p.head_stride;

  stage_tile<Tr, BO>(q_s, q + (first + i0) * p.q_ld, p.q_ld, rows, d, loads.q);
  stage_tile<Tr, BO>(do_s, b.dout + (first + i0) * b.dout_ld + h * d, b.dout_ld, rows, d, loads.dout);

  // The thread's rows g, g + 8 of its warp (rr = 0, 1) and the row lane % 16 it walks the bands of. Padding rows
  // repeat the last valid token and position: every look-up stays in range, P = 0 drops them.
  auto const owned = [&](int r) {
    std::int64_t const token = first + i0 + min(r, rows - 1);
    float* const band = p.c2p ? b.buffers.band_c2p + b.band_row(token, h) : nullptr;
    return OwnedBand{r < rows, p.positions[token], band};
  };
  OwnedBand const quad[2] = {owned(16 * warp + g), owned(16 * warp + g + 8)};
  OwnedBand const mine = owned(16 * warp + lane % 16);
  std::int64_t const qtok[2] = {first + i0 + min(16 * warp + g, rows - 1),
                                first + i0 + min(16 * warp + g + 8, rows - 1)};
  FragmentAddresses const frag = fragment_addresses(mma_smem, warp);
  bool const dropped = p.dropout > 0.0f;
  bool const relative = p.c2p || p.p2c;
  float lse[2] = {}, row_dot[2] = {};  // the rows' softmax statistics: the forward's or the first sweep's

  // The key step at j0: k, v and the keys' positions staged. Padding keys repeat the last valid position (and token,
  // below): in range, and in the last key's band slot.
  auto const stage_keys = [&](int j0, int cols) {
    __syncthreads();  // the previous step is done with k_s, v_s and kpos_s (first step: q_s and do_s are staged)
    stage_tile<Tr, BS>(k_s, k + (first + j0) * p.k_ld, p.k_ld, cols, d, loads.k);
    stage_tile<Tr, BS>(v_s, v + (first + j0) * p.v_ld, p.v_ld, cols, d, loads.v);
    if (threadIdx.x < BS) kpos_s[threadIdx.x] = p.positions[first + j0 + min(static_cast<int>(threadIdx.x), cols - 1)];
    if (relative) stage_position_terms<Tr, true>(b, mma_smem, h, first + i0, rows, first + j0, cols);
    __syncthreads();
  };
  // S + c2p + p2c of the warp's rows against the staged keys, both sweeps alike. probabilities: P = exp(S / scale -
  // lse) (0 for padding rows and keys), else S unscaled (-inf past the keys).
  auto const scores = [&](float(&s)[NS][4], int cols, bool probabilities) {
    owned_times_swept<Tr, Tr::kOwnedAOffset, Tr::kSweepAOffset>(s, frag);
    finish_scores<Tr>(s, mma_smem, warp, relative, [&](float score, int rr, int c) {
      if (probabilities) return quad[rr].valid && c < cols ? __expf(score * p.inv_scale - lse[rr]) : 0.0f;
      return c < cols ? score : -INFINITY;
    });
  };
  auto const kept_bits = [&](int j0) {
    return !dropped ? ~0u : dropout_bits<Tr>([&](int nt, int e) {
      return dropout_factor(p, h, qtok[e / 2], j0 + 8 * nt + 2 * t + e % 2) != 0.0f;
    });
  };

  // The rows' lse and D: the mixed-precision forward's lse with D from its output (b.lse, buffers.row_dot:
  // attention_backward_mma.cuh says why they match these products), or else a first sweep that forms both from these
  // rounded products. Per row rr of the thread: the running max m of S / scale (quad-uniform: each step's max is
  // reduced over the quad's four lanes) and the thread's partial sums over its own columns, l = sum exp(S / scale - m)
  // and acc = sum exp(S / scale - m) M dP, both rescaled by exp(m_old - m) whenever a step moves m; the quad adds its
  // four partials at the end.
  if (!b.compute_lse) {
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      lse[rr] = b.lse[h * p.total_tokens + qtok[rr]];
      row_dot[rr] = b.buffers.row_dot[h * p.total_tokens + qtok[rr]];
    }
  } else {
    float run_max[2] = {-INFINITY, -INFINITY}, run_sum[2] = {0.0f, 0.0f}, run_dot[2] = {0.0f, 0.0f};
    for (int j0 = 0; j0 < length; j0 += BS) {
      int const cols = min(BS, length - j0);
      stage_keys(j0, cols);
      float prob[NS][4], dp[NS][4];  // S (-inf past the keys) then exp(S / scale - m); dP
      scores(prob, cols, false);
      float rescale[2];
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        float step = -INFINITY;  // the step's largest S of the row (key 0 is valid: finite)
#pragma unroll
        for (int nt = 0; nt < NS; ++nt) step = fmaxf(step, fmaxf(prob[nt][2 * rr], prob[nt][2 * rr + 1]));
        step = fmaxf(step, __shfl_xor_sync(0xffffffffu, step, 1));
        step = fmaxf(step, __shfl_xor_sync(0xffffffffu, step, 2));
        float const new_max = fmaxf(run_max[rr], step * p.inv_scale);
        rescale[rr] = __expf(run_max[rr] - new_max);  // 0 on the first step
        run_max[rr] = new_max;
      }
#pragma unroll
      for (int nt = 0; nt < NS; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          prob[nt][e] = 8 * nt + 2 * t + e % 2 < cols ? __expf(prob[nt][e] * p.inv_scale - run_max[e / 2]) : 0.0f;
      std::uint32_t const kept = kept_bits(j0);
      owned_times_swept<Tr, Tr::kOwnedBOffset, Tr::kSweepBOffset>(dp, frag);
      float step_sum[2] = {0.0f, 0.0f}, step_dot[2] = {0.0f, 0.0f};
#pragma unroll
      for (int nt = 0; nt < NS; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float const m = (kept >> (4 * nt + e) & 1u) != 0 ? p.dropout_scale : 0.0f;  // dropout_factor's values
          step_sum[e / 2] += prob[nt][e];
          step_dot[e / 2] += prob[nt][e] * (dp[nt][e] * m);
        }
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        run_sum[rr] = run_sum[rr] * rescale[rr] + step_sum[rr];
        run_dot[rr] = run_dot[rr] * rescale[rr] + step_dot[rr];
      }
    }
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      float sum = run_sum[rr], dot = run_dot[rr];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      dot += __shfl_xor_sync(0xffffffffu, dot, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      dot += __shfl_xor_sync(0xffffffffu, dot, 2);
      lse[rr] = run_max[rr] + logf(sum);
      row_dot[rr] = dot / sum;
      if (quad[rr].valid && t == 0) {
        b.buffers.lse[stats + 16 * warp + g + 8 * rr] = lse[rr];
        b.buffers.row_dot[stats + 16 * warp + g + 8 * rr] = row_dot[rr];
      }
    }
  }

  float dq[NH][4] = {};  // (dS / scale) k of the warp's rows, head columns 8 nt + 2 t (+1)
  for (int j0 = 0; j0 < length; j0 += BS) {
    int const cols = min(BS, length - j0);
    stage_keys(j0, cols);

    // P first, dP after it: the gathers of the position terms run while only S is live (fewer registers).
    float prob[NS][4], ds[NS][4];  // S then P; dP then dS / scale: the warp's rows x the step's keys
    scores(prob, cols, true);
    std::uint32_t const kept = kept_bits(j0);
    owned_times_swept<Tr, Tr::kOwnedBOffset, Tr::kSweepBOffset>(ds, frag);
#pragma unroll
    for (int nt = 0; nt < NS; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        int const rr = e / 2;
        float const m = (kept >> (4 * nt + e) & 1u) != 0 ? p.dropout_scale : 0.0f;  // dropout_factor's values
        ds[nt][e] = prob[nt][e] * (ds[nt][e] * m - row_dot[rr]) * p.inv_scale;
      }
    }
    accumulate_product<Tr, Tr::kSweepAOffset>(dq, ds, frag);

    if (p.c2p) {
      int const kmin = warp_min_int(min(kpos_s[lane], kpos_s[lane + 32]));
      int const kmax = warp_max_int(max(kpos_s[lane], kpos_s[lane + 32]));
      int const sat = p.saturation;
      auto const single = [&](int pos) { return pos - kmax >= sat || pos - kmin <= -sat ? b.slot(pos, kmin) : -1; };
      auto const slot = [&](int pos, int c) { return b.slot(pos, kpos_s[c]); };
      // the previous step's last key sits just before this step's first (contiguous positions)
      auto const previous = [&](int pos) { return j0 > 0 ? b.slot(pos, kpos_s[0] - 1) : -1; };
      add_band_step<Tr>(ds, ds_s, warp, lane, quad, mine, single, slot, p.contiguous, previous);
    }
  }

  float* const dq_head = b.dq + h * p.head_stride;  // (T, *) head h of dq: written
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    if (!quad[rr].valid) continue;
    float* const out = dq_head + qtok[rr] * b.dq_ld;
#pragma unroll
    for (int nt = 0; nt < NH; ++nt) {
      int const col = 8 * nt + 2 * t;
      if (col < d) out[col] = dq[nt][2 * rr];
      if (col + 1 < d) out[col + 1] = dq[nt][2 * rr + 1];
    }
  }
#else
  __trap();  // attention_backward_flash sends code below sm_80 to the float32 kernels
#endif
}

}  // namespace flashdeberta::cuda_kernels::training

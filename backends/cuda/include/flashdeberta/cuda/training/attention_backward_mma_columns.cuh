// The column pass of the tensor-core flash backward (attention_backward_mma.cuh): one CTA per (64 keys, head,
// sequence) sweeps the sequence's query rows 64 at a time, after the row pass (stream order: it reads the lse and D
// the row pass wrote or took, b.lse and buffers.row_dot); warp w owns keys [16w, 16w + 16) and keeps their dK and dV in
// registers. Its step tiles are the row pass's transposed (keys x queries). Once: k and v staged as 16-bit tiles. Per
// query step:
//   q and dO staged (16-bit), the rows' positions, lse and D, the step's position terms (stage_position_terms);
//   S^T = k q^T and dP^T = v dO^T (tensor cores);
//   P, M and dS / scale as the row pass forms them (the same float32 terms, the same mask);
//   dV += (P M)^T dO and dK += (dS / scale)^T q (tensor cores, P M and dS rounded to T);
//   the keys' p2c bands += dS / scale (add_band_step).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "flashdeberta/cuda/attention/mma.cuh"
#include "flashdeberta/cuda/training/attention_backward_common.cuh"
#include "flashdeberta/cuda/training/attention_backward_mma_common.cuh"

namespace flashdeberta::cuda_kernels::training {

template <class Tr>
__global__ void __launch_bounds__(Tr::kThreads)
    mma_backward_columns_kernel(BackwardParams const b, MmaBackwardLoads const loads) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using T = typename Tr::Element;
  constexpr int BO = Tr::kBlockOwned, BS = Tr::kBlockSweep, NS = Tr::kSweepTiles, NH = Tr::kHeadTiles;
  extern __shared__ __align__(16) unsigned char mma_smem[];  // not `smem`: the float32 kernels declare it as float[]
  T* const k_s = reinterpret_cast<T*>(mma_smem + Tr::kOwnedAOffset);           // (BO, 64) the owned keys
  T* const v_s = reinterpret_cast<T*>(mma_smem + Tr::kOwnedBOffset);           // (BO, 64) their values
  T* const q_s = reinterpret_cast<T*>(mma_smem + Tr::kSweepAOffset);           // (BS, 64) the step's query rows
  T* const do_s = reinterpret_cast<T*>(mma_smem + Tr::kSweepBOffset);          // (BS, 64) their dO
  float* const ds_s = reinterpret_cast<float*>(mma_smem + Tr::kBandOffset);    // dS / scale, key-major
  int* const qpos_s = reinterpret_cast<int*>(mma_smem + Tr::kPositionOffset);  // (BS) the step's query positions
  float* const lse_s = reinterpret_cast<float*>(mma_smem + Tr::kLseOffset);    // (BS) their lse
  float* const dot_s = reinterpret_cast<float*>(mma_smem + Tr::kDotOffset);    // (BS) their D

  AttentionParams const& p = b.p;
  int const h = blockIdx.y;
  int const first = p.cu_seqlens[blockIdx.z];
  int const length = p.cu_seqlens[blockIdx.z + 1] - first;
  int const j0 = blockIdx.x * BO;
  if (j0 >= length) return;  // uniform over the CTA
  int const cols = min(BO, length - j0);
  int const warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  int const d = p.head_size;
  float const* const q = static_cast<float const*>(p.q) + h * p.head_stride;  // (T, *) head h of q, k, v
  float const* const k = static_cast<float const*>(p.k) + h * p.head_stride;
  float const* const v = static_cast<float const*>(p.v) + h * p.head_stride;

  stage_tile<Tr, BO>(k_s, k + (first + j0) * p.k_ld, p.k_ld, cols, d, loads.k);
  stage_tile<Tr, BO>(v_s, v + (first + j0) * p.v_ld, p.v_ld, cols, d, loads.v);

  // The thread's keys g, g + 8 of its warp (rr = 0, 1) and the key lane % 16 it walks the bands of. Padding keys
  // repeat the last valid token and position: every look-up stays in range, P = 0 drops them.
  auto const owned = [&](int c) {
    std::int64_t const token = first + j0 + min(c, cols - 1);
    float* const band = p.p2c ? b.buffers.band_p2c + b.band_row(token, h) : nullptr;
    return OwnedBand{c < cols, p.positions[token], band};
  };
  OwnedBand const quad[2] = {owned(16 * warp + g), owned(16 * warp + g + 8)};
  OwnedBand const mine = owned(16 * warp + lane % 16);
  std::int64_t const ktok[2] = {first + j0 + min(16 * warp + g, cols - 1),
                                first + j0 + min(16 * warp + g + 8, cols - 1)};
  int const key[2] = {j0 + 16 * warp + g, j0 + 16 * warp + g + 8};  // within the sequence: the dropout counter's

  float dk[NH][4] = {};  // (dS / scale)^T q of the warp's keys, head columns 8 nt + 2 t (+1)
  float dv[NH][4] = {};  // (P M)^T dO
  FragmentAddresses const frag = fragment_addresses(mma_smem, warp);
  bool const dropped = p.dropout > 0.0f;
  bool const relative = p.c2p || p.p2c;
  for (int i0 = 0; i0 < length; i0 += BS) {
    int const rows = min(BS, length - i0);
    std::int64_t const stats = h * p.total_tokens + first + i0;  // the step's rows in (heads, T)
    __syncthreads();  // the previous step is done with q_s, do_s and the row vectors (first: k_s, v_s are staged)
    stage_tile<Tr, BS>(q_s, q + (first + i0) * p.q_ld, p.q_ld, rows, d, loads.q);
    stage_tile<Tr, BS>(do_s, b.dout + (first + i0) * b.dout_ld + h * d, b.dout_ld, rows, d, loads.dout);
    if (threadIdx.x < BS) {  // padding rows repeat the last valid position: in the last row's band slot
      int const i = threadIdx.x;
      qpos_s[i] = p.positions[first + i0 + min(i, rows - 1)];
      lse_s[i] = i < rows ? b.lse[stats + i] : 0.0f;
      dot_s[i] = i < rows ? b.buffers.row_dot[stats + i] : 0.0f;
    }
    if (relative) stage_position_terms<Tr, false>(b, mma_smem, h, first + j0, cols, first + i0, rows);
    __syncthreads();

    // P first, dP after it: fewer registers live at once.
    float pm[NS][4], ds[NS][4];  // S, P, then P M; dP then dS / scale: the warp's keys x the step's query rows
    owned_times_swept<Tr, Tr::kOwnedAOffset, Tr::kSweepAOffset>(pm, frag);
    finish_scores<Tr>(pm, mma_smem, warp, relative, [&](float score, int rr, int i) {
      return quad[rr].valid && i < rows ? __expf(score * p.inv_scale - lse_s[i]) : 0.0f;
    });
    std::uint32_t const kept = !dropped ? ~0u : dropout_bits<Tr>([&](int nt, int e) {
      return dropout_factor(p, h, first + i0 + 8 * nt + 2 * t + e % 2, key[e / 2]) != 0.0f;
    });
    owned_times_swept<Tr, Tr::kOwnedBOffset, Tr::kSweepBOffset>(ds, frag);
#pragma unroll
    for (int nt = 0; nt < NS; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        int const i = 8 * nt + 2 * t + e % 2;
        float const m = (kept >> (4 * nt + e) & 1u) != 0 ? p.dropout_scale : 0.0f;  // dropout_factor's values
        ds[nt][e] = pm[nt][e] * (ds[nt][e] * m - dot_s[i]) * p.inv_scale;
        pm[nt][e] *= m;
      }
    }
    accumulate_product<Tr, Tr::kSweepBOffset>(dv, pm, frag);
    accumulate_product<Tr, Tr::kSweepAOffset>(dk, ds, frag);

    if (p.p2c) {
      int const qmin = warp_min_int(min(qpos_s[lane], qpos_s[lane + 32]));
      int const qmax = warp_max_int(max(qpos_s[lane], qpos_s[lane + 32]));
      int const sat = p.saturation;
      auto const single = [&](int pos) { return qmin - pos >= sat || qmax - pos <= -sat ? b.slot(qmin, pos) : -1; };
      auto const slot = [&](int pos, int i) { return b.slot(qpos_s[i], pos); };
      // the previous step's last query sits just before this step's first (contiguous positions)
      auto const previous = [&](int pos) { return i0 > 0 ? b.slot(qpos_s[0] - 1, pos) : -1; };
      add_band_step<Tr>(ds, ds_s, warp, lane, quad, mine, single, slot, p.contiguous, previous);
    }
  }

  float* const dk_head = b.dk + h * p.head_stride;  // (T, *) head h of dk, dv: written
  float* const dv_head = b.dv + h * p.head_stride;
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    if (!quad[rr].valid) continue;
    float* const dk_row = dk_head + ktok[rr] * b.dk_ld;
    float* const dv_row = dv_head + ktok[rr] * b.dv_ld;
#pragma unroll
    for (int nt = 0; nt < NH; ++nt) {
      int const col = 8 * nt + 2 * t;
      if (col < d) {
        dk_row[col] = dk[nt][2 * rr];
        dv_row[col] = dv[nt][2 * rr];
      }
      if (col + 1 < d) {
        dk_row[col + 1] = dk[nt][2 * rr + 1];
        dv_row[col + 1] = dv[nt][2 * rr + 1];
      }
    }
  }
#else
  __trap();  // attention_backward_flash sends code below sm_80 to the float32 kernels
#endif
}

}  // namespace flashdeberta::cuda_kernels::training

// Flash disentangled-attention backward in float32 on CUDA cores: the probabilities recomputed tile by tile from the
// row log-sum-exp, P = exp(S - lse), no (L, L) buffer at any length (attention_backward_common.cuh gives the terms).
//
// Two passes, split so that every gradient row has one writer (FlashDeBERTa's dK/dV + p2c and dQ + c2p kernels):
//   rows:    one CTA per (query block of 32, head, sequence) sweeps the keys 32 at a time: the rows' D (and, without
//            the forward's lse, a first sweep for it), dS, the content part of dQ and the rows' c2p bands;
//   columns: one CTA per (key block of 32, head, sequence) sweeps the queries 32 at a time, reading the lse and D of
//            the row pass: P * M and dS again, the content parts of dK and dV and the keys' p2c bands.
// Thread layout as the forward (flash_fwd_kernel.cuh): each warp owns 8 rows of the CTA's block for the whole
// sweep, lane j is column j of a step's tile; the accumulators stay in registers (lane owns columns lane + 32 c).
// S is formed as the host backends form it, (q . k + c2p + p2c) / scale, from the projected tables.
// The launcher at the bottom runs the tensor-core passes of attention_backward_mma.cuh instead where the policy's
// products are bf16 or fp16 (mma_backward_applies: sm_80+, head sizes up to 64).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "flashdeberta/cuda/training/attention_backward_common.cuh"
#include "flashdeberta/cuda/training/attention_backward_mma.cuh"

namespace flashdeberta::cuda_kernels::training {

// The flash backward's traits. Both passes share one shared-memory plan, in floats: the owned side's two (32, D)
// tiles (q and dO, or k and v: read one row per warp, a broadcast), the sweep side's two (32, D + 1) tiles (read one
// row per lane: padded by one so consecutive lanes hit consecutive banks), two (32, 33) tiles of the step's P * M and
// dS, and the per-column lse and D and both sides' positions.
template <int kHeadDim_>
struct FlashBackwardTraits {
  static constexpr int kHeadDim = kHeadDim_;  // head sizes up to this run here, zero-padded
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kRowsPerWarp = 8;
  static constexpr int kOwned = kWarps * kRowsPerWarp;  // query rows (row pass) or keys (column pass) per CTA
  static constexpr int kSweep = 32;                     // keys (row pass) or queries (column pass) per step
  static constexpr int kColsPerLane = kHeadDim / 32;
  static constexpr int kOwnedLd = kHeadDim;
  static constexpr int kSweepLd = kHeadDim + 1;
  static constexpr int kTileLd = kSweep + 1;

  static constexpr int kOwnedA = 0;                            // (kOwned, D) q or k
  static constexpr int kOwnedB = kOwnedA + kOwned * kOwnedLd;  // (kOwned, D) dO or v
  static constexpr int kSweepA = kOwnedB + kOwned * kOwnedLd;  // (kSweep, D + 1) k or q
  static constexpr int kSweepB = kSweepA + kSweep * kSweepLd;  // (kSweep, D + 1) v or dO
  static constexpr int kTileA = kSweepB + kSweep * kSweepLd;   // (kOwned, kSweep + 1) P * M (column pass)
  static constexpr int kTileB = kTileA + kOwned * kTileLd;     // (kOwned, kSweep + 1) dS / scale
  static constexpr int kVectors = kTileB + kOwned * kTileLd;   // lse, D: kOwned or kSweep floats each
  static constexpr int kPositions = kVectors + 2 * kSweep;     // int: owned then sweep positions
  static constexpr int kSmemWords = kPositions + kOwned + kSweep;
  static constexpr std::size_t kSmemBytes = static_cast<std::size_t>(kSmemWords) * 4;

  static_assert(kHeadDim % 32 == 0 && kHeadDim > 0, "the head size is split evenly across the 32 lanes");
  static_assert(kSweep == 32, "lane j owns column j of a step's tile");
  static_assert(kOwned == kSweep, "the lse and D vectors serve the owned rows (row pass) and the swept ones alike");
  static_assert(kRowsPerWarp <= 32, "one lane per owned row gathers its band");

  static constexpr bool is_valid(std::size_t max_smem_per_block) { return kSmemBytes <= max_smem_per_block; }
};

// dst (rows_total, kD) with row stride ld = src(r, e) for r < rows and e < d; zeros elsewhere.
template <int kD, int kThreads, class Source>
__device__ __forceinline__ void stage(float* dst, int ld, int rows_total, int rows, int d, Source const& src) {
  for (int idx = threadIdx.x; idx < rows_total * kD; idx += kThreads) {
    int const r = idx / kD;
    int const e = idx % kD;
    dst[r * ld + e] = r < rows && e < d ? src(r, e) : 0.0f;
  }
}

template <int kD>
__device__ __forceinline__ float dot(float const* a, float const* b) {
  float sum = 0.0f;
#pragma unroll 8
  for (int e = 0; e < kD; ++e) sum += a[e] * b[e];
  return sum;
}

template <class Tr>
__global__ void __launch_bounds__(Tr::kThreads) flash_backward_rows_kernel(BackwardParams const b) {
  constexpr int D = Tr::kHeadDim, BO = Tr::kOwned, BS = Tr::kSweep, R = Tr::kRowsPerWarp, C = Tr::kColsPerLane;
  extern __shared__ float smem[];
  float* q_s = smem + Tr::kOwnedA;   // (BO, D) the owned query rows
  float* do_s = smem + Tr::kOwnedB;  // (BO, D) their dO
  float* k_s = smem + Tr::kSweepA;   // (BS, D + 1) the step's keys
  float* v_s = smem + Tr::kSweepB;   // (BS, D + 1) its values
  float* ds_s = smem + Tr::kTileB;   // (BO, BS + 1) dS / scale
  float* lse_s = smem + Tr::kVectors;
  float* dot_s = lse_s + BO;
  int* qpos_s = reinterpret_cast<int*>(smem + Tr::kPositions);
  int* kpos_s = qpos_s + BO;

  AttentionParams const& p = b.p;
  int const h = blockIdx.y;
  int const first = p.cu_seqlens[blockIdx.z];
  int const length = p.cu_seqlens[blockIdx.z + 1] - first;
  int const i0 = blockIdx.x * BO;
  if (i0 >= length) return;  // uniform over the CTA
  int const rows = min(BO, length - i0);
  int const warp = threadIdx.x / 32;
  int const lane = threadIdx.x % 32;
  int const row0 = warp * R;
  int const d = p.head_size;
  std::int64_t const stats = h * p.total_tokens + first + i0;  // the rows' offset in (heads, T)

  stage<D, Tr::kThreads>(q_s, Tr::kOwnedLd, BO, rows, d, [&](int r, int e) { return b.q(first + i0 + r, h, e); });
  stage<D, Tr::kThreads>(do_s, Tr::kOwnedLd, BO, rows, d, [&](int r, int e) { return b.d_o(first + i0 + r, h, e); });
  // Padding rows repeat the last valid position and token: every look-up stays in range, the masks drop them.
  if (threadIdx.x < BO) qpos_s[threadIdx.x] = p.positions[first + i0 + min(static_cast<int>(threadIdx.x), rows - 1)];
#pragma unroll
  for (int rr = 0; rr < R; ++rr) {
    int const r = row0 + rr;
    float const row_dot = r < rows ? warp_row_dot(b, first + i0 + r, h) : 0.0f;  // warp-uniform branch
    if (lane == 0) {
      dot_s[r] = row_dot;
      lse_s[r] = r < rows && !b.compute_lse ? b.lse[stats + r] : 0.0f;
      if (r < rows) b.buffers.row_dot[stats + r] = row_dot;
    }
  }

  // S of (owned row r, key lane of the tile at j0): the owned rows' positions and tokens are clamped as staged.
  auto const score = [&](int r, int j0, int cols) {
    float s = dot<D>(q_s + r * Tr::kOwnedLd, k_s + lane * Tr::kSweepLd);
    if (p.c2p || p.p2c) {
      int const slot = b.slot(qpos_s[r], kpos_s[lane]);
      s += b.position_terms(first + i0 + min(r, rows - 1), first + j0 + min(lane, cols - 1), h, slot);
    }
    return s * p.inv_scale;
  };
  auto const stage_keys = [&](int j0, int cols, bool values) {
    stage<D, Tr::kThreads>(k_s, Tr::kSweepLd, BS, cols, d, [&](int c, int e) { return b.k(first + j0 + c, h, e); });
    if (values)
      stage<D, Tr::kThreads>(v_s, Tr::kSweepLd, BS, cols, d, [&](int c, int e) { return b.v(first + j0 + c, h, e); });
    if (threadIdx.x < BS) kpos_s[threadIdx.x] = p.positions[first + j0 + min(static_cast<int>(threadIdx.x), cols - 1)];
  };

  if (b.compute_lse) {  // first sweep: the forward's online softmax, for each row's lse
    float run_max[R], run_sum[R];
#pragma unroll
    for (int rr = 0; rr < R; ++rr) {
      run_max[rr] = -INFINITY;
      run_sum[rr] = 0.0f;
    }
    for (int j0 = 0; j0 < length; j0 += BS) {
      int const cols = min(BS, length - j0);
      __syncthreads();  // the previous step is done with k_s
      stage_keys(j0, cols, false);
      __syncthreads();
#pragma unroll
      for (int rr = 0; rr < R; ++rr) {
        float const s = lane < cols ? score(row0 + rr, j0, cols) : -INFINITY;
        float const new_max = fmaxf(run_max[rr], warp_max(s));  // lane 0 is a valid key: finite
        run_sum[rr] = run_sum[rr] * expf(run_max[rr] - new_max) + warp_sum(expf(s - new_max));
        run_max[rr] = new_max;
      }
    }
#pragma unroll
    for (int rr = 0; rr < R; ++rr) {
      int const r = row0 + rr;
      float const lse = run_max[rr] + logf(run_sum[rr]);
      if (lane == 0) {
        lse_s[r] = lse;
        if (r < rows) b.buffers.lse[stats + r] = lse;
      }
    }
  }

  float acc[R][C];   // dS K of the warp's rows, columns lane + 32 c
  BandRun band_run;  // lane l < R: row row0 + l's open c2p run (contiguous positions)
#pragma unroll
  for (int rr = 0; rr < R; ++rr)
#pragma unroll
    for (int cc = 0; cc < C; ++cc) acc[rr][cc] = 0.0f;
  bool const dropped = p.dropout > 0.0f;
  for (int j0 = 0; j0 < length; j0 += BS) {
    int const cols = min(BS, length - j0);
    __syncthreads();  // the previous step is done with k_s, v_s and ds_s; lse_s and dot_s are written
    stage_keys(j0, cols, true);
    __syncthreads();
#pragma unroll
    for (int rr = 0; rr < R; ++rr) {
      int const r = row0 + rr;
      float const prob = r < rows && lane < cols ? expf(score(r, j0, cols) - lse_s[r]) : 0.0f;
      float const dp = dot<D>(do_s + r * Tr::kOwnedLd, v_s + lane * Tr::kSweepLd);
      float const m = dropped ? dropout_factor(p, h, first + i0 + r, j0 + lane) : 1.0f;
      ds_s[r * Tr::kTileLd + lane] = prob * (dp * m - dot_s[r]) * p.inv_scale;
    }
    __syncwarp();  // each warp reads back only the rows it wrote
#pragma unroll 4
    for (int c = 0; c < BS; ++c) {
      float kc[C];
#pragma unroll
      for (int cc = 0; cc < C; ++cc) kc[cc] = k_s[c * Tr::kSweepLd + lane + 32 * cc];
#pragma unroll
      for (int rr = 0; rr < R; ++rr) {
        float const g = ds_s[(row0 + rr) * Tr::kTileLd + c];
#pragma unroll
        for (int cc = 0; cc < C; ++cc) acc[rr][cc] += g * kc[cc];
      }
    }
    if (p.c2p && lane < R && row0 + lane < rows) {  // the row's band: one lane per row, in key order
      int const r = row0 + lane;
      float* band = b.buffers.band_c2p + b.band_row(first + i0 + r, h);
      if (p.contiguous) {
        for (int c = 0; c < cols; ++c) band_run.add(band, b.slot(qpos_s[r], kpos_s[c]), ds_s[r * Tr::kTileLd + c]);
      } else {
        for (int c = 0; c < cols; ++c) band[b.slot(qpos_s[r], kpos_s[c])] += ds_s[r * Tr::kTileLd + c];
      }
    }
  }
  if (p.c2p && p.contiguous && lane < R && row0 + lane < rows)
    band_run.finish(b.buffers.band_c2p + b.band_row(first + i0 + row0 + lane, h));

#pragma unroll
  for (int rr = 0; rr < R; ++rr) {
    int const r = row0 + rr;
    if (r >= rows) continue;
    float* dq = b.dq + static_cast<std::int64_t>(first + i0 + r) * b.dq_ld + h * p.head_stride;
#pragma unroll
    for (int cc = 0; cc < C; ++cc)
      if (lane + 32 * cc < d) dq[lane + 32 * cc] = acc[rr][cc];
  }
}

template <class Tr>
__global__ void __launch_bounds__(Tr::kThreads) flash_backward_columns_kernel(BackwardParams const b) {
  constexpr int D = Tr::kHeadDim, BO = Tr::kOwned, BS = Tr::kSweep, R = Tr::kRowsPerWarp, C = Tr::kColsPerLane;
  extern __shared__ float smem[];
  float* k_s = smem + Tr::kOwnedA;   // (BO, D) the owned keys
  float* v_s = smem + Tr::kOwnedB;   // (BO, D) their values
  float* q_s = smem + Tr::kSweepA;   // (BS, D + 1) the step's query rows
  float* do_s = smem + Tr::kSweepB;  // (BS, D + 1) their dO
  float* pm_s = smem + Tr::kTileA;   // (BO, BS + 1) P * M, key-major
  float* ds_s = smem + Tr::kTileB;   // (BO, BS + 1) dS / scale, key-major
  float* lse_s = smem + Tr::kVectors;
  float* dot_s = lse_s + BS;
  int* kpos_s = reinterpret_cast<int*>(smem + Tr::kPositions);
  int* qpos_s = kpos_s + BO;

  AttentionParams const& p = b.p;
  int const h = blockIdx.y;
  int const first = p.cu_seqlens[blockIdx.z];
  int const length = p.cu_seqlens[blockIdx.z + 1] - first;
  int const j0 = blockIdx.x * BO;
  if (j0 >= length) return;  // uniform over the CTA
  int const cols = min(BO, length - j0);
  int const warp = threadIdx.x / 32;
  int const lane = threadIdx.x % 32;
  int const row0 = warp * R;  // the warp's first owned key
  int const d = p.head_size;

  stage<D, Tr::kThreads>(k_s, Tr::kOwnedLd, BO, cols, d, [&](int c, int e) { return b.k(first + j0 + c, h, e); });
  stage<D, Tr::kThreads>(v_s, Tr::kOwnedLd, BO, cols, d, [&](int c, int e) { return b.v(first + j0 + c, h, e); });
  if (threadIdx.x < BO) kpos_s[threadIdx.x] = p.positions[first + j0 + min(static_cast<int>(threadIdx.x), cols - 1)];

  float acc_k[R][C];  // dS^T Q of the warp's keys
  float acc_v[R][C];  // (P * M)^T dO
  BandRun band_run;   // lane l < R: key row0 + l's open p2c run (contiguous positions)
#pragma unroll
  for (int rr = 0; rr < R; ++rr)
#pragma unroll
    for (int cc = 0; cc < C; ++cc) acc_k[rr][cc] = acc_v[rr][cc] = 0.0f;
  bool const dropped = p.dropout > 0.0f;
  for (int i0 = 0; i0 < length; i0 += BS) {
    int const rows = min(BS, length - i0);
    std::int64_t const stats = h * p.total_tokens + first + i0;
    __syncthreads();  // the previous step is done with the query-side tiles, pm_s and ds_s
    stage<D, Tr::kThreads>(q_s, Tr::kSweepLd, BS, rows, d, [&](int i, int e) { return b.q(first + i0 + i, h, e); });
    stage<D, Tr::kThreads>(do_s, Tr::kSweepLd, BS, rows, d, [&](int i, int e) { return b.d_o(first + i0 + i, h, e); });
    if (threadIdx.x < BS) {
      int const i = threadIdx.x;
      qpos_s[i] = p.positions[first + i0 + min(i, rows - 1)];
      lse_s[i] = i < rows ? b.lse[stats + i] : 0.0f;
      dot_s[i] = i < rows ? b.buffers.row_dot[stats + i] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int rr = 0; rr < R; ++rr) {
      int const c = row0 + rr;  // key c of the block, query `lane` of the step
      float prob = 0.0f;
      if (c < cols && lane < rows) {
        float s = dot<D>(q_s + lane * Tr::kSweepLd, k_s + c * Tr::kOwnedLd);
        if (p.c2p || p.p2c) {
          int const slot = b.slot(qpos_s[lane], kpos_s[c]);
          s += b.position_terms(first + i0 + lane, first + j0 + c, h, slot);
        }
        prob = expf(s * p.inv_scale - lse_s[lane]);
      }
      float const dp = dot<D>(do_s + lane * Tr::kSweepLd, v_s + c * Tr::kOwnedLd);
      float const m = dropped ? dropout_factor(p, h, first + i0 + lane, j0 + c) : 1.0f;
      pm_s[c * Tr::kTileLd + lane] = prob * m;
      ds_s[c * Tr::kTileLd + lane] = prob * (dp * m - dot_s[lane]) * p.inv_scale;
    }
    __syncwarp();  // each warp reads back only the keys it wrote
#pragma unroll 4
    for (int i = 0; i < BS; ++i) {
      float qi[C], doi[C];
#pragma unroll
      for (int cc = 0; cc < C; ++cc) {
        qi[cc] = q_s[i * Tr::kSweepLd + lane + 32 * cc];
        doi[cc] = do_s[i * Tr::kSweepLd + lane + 32 * cc];
      }
#pragma unroll
      for (int rr = 0; rr < R; ++rr) {
        float const pm = pm_s[(row0 + rr) * Tr::kTileLd + i];
        float const g = ds_s[(row0 + rr) * Tr::kTileLd + i];
#pragma unroll
        for (int cc = 0; cc < C; ++cc) {
          acc_v[rr][cc] += pm * doi[cc];
          acc_k[rr][cc] += g * qi[cc];
        }
      }
    }
    if (p.p2c && lane < R && row0 + lane < cols) {  // the key's band: one lane per key, in query order
      int const c = row0 + lane;
      float* band = b.buffers.band_p2c + b.band_row(first + j0 + c, h);
      if (p.contiguous) {
        for (int i = 0; i < rows; ++i) band_run.add(band, b.slot(qpos_s[i], kpos_s[c]), ds_s[c * Tr::kTileLd + i]);
      } else {
        for (int i = 0; i < rows; ++i) band[b.slot(qpos_s[i], kpos_s[c])] += ds_s[c * Tr::kTileLd + i];
      }
    }
  }
  if (p.p2c && p.contiguous && lane < R && row0 + lane < cols)
    band_run.finish(b.buffers.band_p2c + b.band_row(first + j0 + row0 + lane, h));

#pragma unroll
  for (int rr = 0; rr < R; ++rr) {
    int const c = row0 + rr;
    if (c >= cols) continue;
    std::int64_t const t = first + j0 + c;
    float* dk = b.dk + t * b.dk_ld + h * p.head_stride;
    float* dv = b.dv + t * b.dv_ld + h * p.head_stride;
#pragma unroll
    for (int cc = 0; cc < C; ++cc) {
      if (lane + 32 * cc >= d) continue;
      dk[lane + 32 * cc] = acc_k[rr][cc];
      dv[lane + 32 * cc] = acc_v[rr][cc];
    }
  }
}

}  // namespace flashdeberta::cuda_kernels::training

namespace flashdeberta::cuda_kernels {

// The flash backward's one run-time -> compile-time dispatch: the products' type (bf16 or fp16 on the tensor-core
// passes of attention_backward_mma.cuh where mma_backward_applies, else float32) and, in float32, the padded head size.
bool attention_backward_mixed_applies(AttentionBackwardArgs const& g, DeviceLimits const& limits, DType products) {
  return training::mma_backward_applies(g, limits, products);
}

void attention_backward_flash(AttentionBackwardArgs const& g, AttentionBackwardBuffers const& buffers,
                              DeviceLimits const& limits, DType products, cudaStream_t stream) {
  AttentionArgs const& a = g.forward;
  FLASHDEBERTA_REQUIRE(products == DType::kF32 || products == DType::kBF16 || products == DType::kF16,
                       "the flash attention backward takes F32, BF16 or F16 products, not " << dtype_name(products));
  if (a.sequences.batch == 0 || a.sequences.max_seqlen == 0 || a.sequences.total_tokens == 0) return;
  training::BackwardParams const params = training::backward_params(g, buffers);
  DType const runs = training::mma_backward_applies(g, limits, products) ? products : DType::kF32;
  dispatch_float_type(runs, [&]<class T>() {
    if constexpr (!std::is_same_v<T, float>) {
      training::launch_mma_backward<T>(a, params, limits, stream);
    } else {
      FLASHDEBERTA_REQUIRE(
          buffers.tables == DType::kF32,
          "the float32 flash attention backward reads float32 position tables, not " << dtype_name(buffers.tables));
      dispatch_head_size(a.head_size, [&]<int D>() {
        using Traits = training::FlashBackwardTraits<D>;
        FLASHDEBERTA_REQUIRE(Traits::is_valid(limits.max_smem_per_block),
                             "the flash attention backward for head size " << D << " needs " << Traits::kSmemBytes
                                                                           << " bytes of shared memory; the device has "
                                                                           << limits.max_smem_per_block);
        dim3 const grid = attention_grid(a, Traits::kOwned);
        auto* const rows = training::flash_backward_rows_kernel<Traits>;
        training::allow_shared_memory(rows, Traits::kSmemBytes);
        rows<<<grid, Traits::kThreads, Traits::kSmemBytes, stream>>>(params);
        FLASHDEBERTA_CUDA_CHECK_LAUNCH();
        // The column pass reads the lse and D the row pass wrote: stream order separates them.
        auto* const columns = training::flash_backward_columns_kernel<Traits>;
        training::allow_shared_memory(columns, Traits::kSmemBytes);
        columns<<<grid, Traits::kThreads, Traits::kSmemBytes, stream>>>(params);
        FLASHDEBERTA_CUDA_CHECK_LAUNCH();
      });
    }
  });
}

}  // namespace flashdeberta::cuda_kernels

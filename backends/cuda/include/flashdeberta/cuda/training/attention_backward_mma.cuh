// Flash disentangled-attention backward on tensor cores, for training in mixed precision: the float32 flash backward
// (attention_backward_flash.cuh) with its five products, S = q k^T and dP = dO v^T (recomputed in both passes),
// dQ += dS k, dV += (P M)^T dO and dK += dS^T q, on mma.sync m16n8k16 with operands rounded to the policy's compute
// dtype T (bf16 or fp16) and fp32 accumulation. Everything else stays float32 as in the float32 kernels: the operands
// in global memory (the training tape), the position terms, exp, the dropout mask, the softmax statistics, the bands
// and the gradients written. So the rounding is exactly: q, k, v, dO to T as staged into shared memory (once per tile),
// and P M and dS / scale to T as A operands of the gradient products; S and dP leave the tensor cores in float32.
//
// The softmax statistics must be those of these rounded products: lse_i = log sum_j exp(S_ij) and
// D_i = sum_j P_ij M_ij dP_ij. With a float32 forward's lse and D = dO . O, the recomputed rows of P (from rounded q
// and k) would not sum to one and D would not match them, so the rows of dS = P (dP M - D) would not sum to zero.
// Gradients that are such cancellations (a key bias's, sum_i q_i sum_j dS_ij, zero by the softmax's shift invariance)
// would then carry that mismatch, well above the mixed-precision reference's error; autocast's softmax backward is
// self-consistent in the same way (its D is sum(P dP) of its own P). Two ways to get them:
//   - given the forward's lse (AttentionBackwardArgs::lse), it must be the mixed-precision forward's
//     (attention_forward_mma.cuh), whose S is these passes' S (the same rounded operands, the same staged terms, the
//     same products), and whose output O = sum_j P_ij M_ij v_j is exact to float32 for the rounded v (its P M enters
//     the product as its rounding to T plus the remainder). Then D_i = dO_i . O_i with dO rounded to T as the passes
//     stage it (mma_row_dot_kernel) is sum_j P_ij M_ij dP_ij to float32 rounding, and the row pass has one sweep;
//   - without it, a first sweep of the row pass over the keys forms both from two products per key tile (S and dP):
//     nine products per pair of tiles where the forward's statistics need seven.
//
// Two passes with one writer per gradient row, as the float32 kernels: rows (attention_backward_mma_rows.cuh) writes
// lse and D (buffers.lse, buffers.row_dot) when it forms them, dQ's content term and the c2p bands; columns
// (attention_backward_mma_columns.cuh) reads lse and D and writes dK's and dV's content terms and the p2c bands.
// Conventions are the float32 kernels': S = (q . k + c2p + p2c) / scale with the tables unscaled, P = exp(S - lse)
// with a natural-log lse, the products and the bands take dS / scale (so dq = (1 / scale) dS k, the bands
// Gc2p / scale and Gp2c / scale as the caller's GEMMs expect), dv = (P M)^T dO; dq, dk, dv written, the bands added
// into the caller's zeroed buffers. MmaBackwardTraits (attention_backward_mma_common.cuh) holds the tiles and the
// shared-memory plan; mma_backward_applies says when the launcher takes this path.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <mutex>
#include <set>
#include <string>
#include <type_traits>

#include "flashdeberta/cuda/attention/attention_params.cuh"
#include "flashdeberta/cuda/training/attention_backward_common.cuh"
#include "flashdeberta/cuda/training/attention_backward_mma_columns.cuh"
#include "flashdeberta/cuda/training/attention_backward_mma_common.cuh"
#include "flashdeberta/cuda/training/attention_backward_mma_rows.cuh"
#include "flashdeberta/policy/tile_config.hpp"

namespace flashdeberta::cuda_kernels::training {

// The tensor-core passes' preconditions: 16-bit products asked for (the policy's compute dtype), sm_80+ code (the
// device's, not older PTX: the kernels are compiled out below sm_80), head sizes up to 64 (zero-padded) and room for
// the smallest shared-memory plan; with the mixed-precision forward's lse or none (then the row pass forms its own into
// buffers.lse, which the caller therefore always provides). Else the float32 kernels.
inline bool mma_backward_applies(AttentionBackwardArgs const& g, DeviceLimits const& limits, DType products) {
  return (products == DType::kBF16 || products == DType::kF16) && limits.compute_capability >= 80 &&
         g.forward.head_size <= 64 && MmaBackwardTraits<__half, 32>::is_valid(limits.max_smem_per_block);
}

// Which operands the staging may read as float4: 16-byte aligned data, row strides and head offsets.
inline MmaBackwardLoads mma_backward_loads(BackwardParams const& b) {
  auto const vector = [](void const* data, std::int64_t ld, std::int64_t head_offset) {
    return reinterpret_cast<std::uintptr_t>(data) % 16 == 0 && ld % 4 == 0 && head_offset % 4 == 0;
  };
  return {vector(b.p.q, b.p.q_ld, b.p.head_stride), vector(b.p.k, b.p.k_ld, b.p.head_stride),
          vector(b.p.v, b.p.v_ld, b.p.head_stride), vector(b.dout, b.dout_ld, b.p.head_size)};
}

// The tile configurations the passes are compiled for (TileChoices, policy/tile_config.hpp): BLOCK_M owned rows of
// 32, 64 or 128 with one warp per 16 of them, BLOCK_N 64 swept rows, one stage (each step's tiles are staged, then
// used). The default, 64 rows and 4 warps, keeps two CTAs of the 255-register passes on an SM.
inline TileChoices mma_backward_choices() { return {{32, 64, 128}, {64}, {1}, {2, 4, 8}}; }
inline constexpr TileConfig kMmaBackwardDefault{64, 64, 1, 4};

template <class T>
std::size_t mma_backward_smem(TileConfig const& c) {
  switch (c.block_m) {
    case 32:
      return MmaBackwardTraits<T, 32>::kSmemBytes;
    case 128:
      return MmaBackwardTraits<T, 128>::kSmemBytes;
    default:
      return MmaBackwardTraits<T, 64>::kSmemBytes;
  }
}

// A shrink's note, once per process for each distinct text: a training run launches the passes thousands of times.
inline void note_once(std::string const& text) {
  static std::mutex mutex;
  static std::set<std::string> noted;
  std::lock_guard<std::mutex> const lock(mutex);
  if (noted.insert(text).second) std::fprintf(stderr, "%s\n", text.c_str());
}

// One pass's tiles: FLASHDEBERTA_BWD_Q_* (the row pass, dQ) or FLASHDEBERTA_BWD_KV_* (the column pass, dK and dV)
// over FLASHDEBERTA_BWD_*, else the default; refused when a group is partial, a value is not compiled or NUM_WARPS is
// not BLOCK_M / 16; shrunk, with a note, to the device's shared memory.
template <class T>
TileConfig mma_backward_tiles(char const* pass, char const* group, DeviceLimits const& limits) {
  TileChoices const choices = mma_backward_choices();
  TileConfig c = tile_override(group, "FLASHDEBERTA_BWD", choices).value_or(kMmaBackwardDefault);
  FLASHDEBERTA_REQUIRE(c.num_warps * 16 == c.block_m, "the tensor-core attention backward's "
                                                          << pass << " runs one warp per 16 rows: BLOCK_M " << c.block_m
                                                          << " takes NUM_WARPS " << c.block_m / 16 << ", not "
                                                          << c.num_warps << " (" << group
                                                          << "_* or FLASHDEBERTA_BWD_*)");
  c = fit_shared_memory(std::string("the tensor-core attention backward's ") + pass, c, choices, mma_backward_smem<T>,
                        limits.max_smem_per_block, note_once);
  c.num_warps = c.block_m / 16;  // a shrunk BLOCK_M takes its warps along
  return c;
}

// D of every (token, head) from the mixed-precision forward's output: dO rounded to T, as the passes stage it, dotted
// with O in float64 and rounded once into buffers.row_dot. One warp per (token, head).
template <class T>
__global__ void __launch_bounds__(256) mma_row_dot_kernel(BackwardParams const b) {
  std::int64_t const row = (std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
  if (row >= b.p.total_tokens * b.heads) return;  // warp-uniform
  std::int64_t const token = row / b.heads;
  int const h = static_cast<int>(row % b.heads);
  double sum = 0.0;
  for (int e = threadIdx.x % 32; e < b.p.head_size; e += 32)
    sum += static_cast<double>(rounded_to<T>(b.d_o(token, h, e))) * static_cast<double>(b.o(token, h, e));
  sum = warp_sum_double(sum);
  if (threadIdx.x % 32 == 0) b.buffers.row_dot[h * b.p.total_tokens + token] = static_cast<float>(sum);
}

template <class Traits, class Kernel>
void launch_mma_pass(Kernel* kernel, AttentionArgs const& a, BackwardParams const& params, MmaBackwardLoads loads,
                     cudaStream_t stream) {
  allow_shared_memory(kernel, Traits::kSmemBytes);
  kernel<<<attention_grid(a, Traits::kBlockOwned), Traits::kThreads, Traits::kSmemBytes, stream>>>(params, loads);
  FLASHDEBERTA_CUDA_CHECK_LAUNCH();
}

// fn.template operator()<Traits>() for the traits of c.block_m.
template <class T, class Fn>
void dispatch_owned_rows(TileConfig const& c, Fn&& fn) {
  switch (c.block_m) {
    case 32:
      fn.template operator()<MmaBackwardTraits<T, 32>>();
      break;
    case 128:
      fn.template operator()<MmaBackwardTraits<T, 128>>();
      break;
    default:
      fn.template operator()<MmaBackwardTraits<T, 64>>();
  }
}

// The two passes with products in T; the column pass reads the lse and D the row pass wrote: stream order separates
// them. Each pass takes its own tiles (mma_backward_tiles).
template <class T>
void launch_mma_backward(AttentionArgs const& a, BackwardParams const& params, DeviceLimits const& limits,
                         cudaStream_t stream) {
  FLASHDEBERTA_REQUIRE(params.buffers.lse != nullptr && params.buffers.row_dot != nullptr,
                       "the tensor-core attention backward needs the (heads, T) lse and D buffers");
  DType const element = std::is_same_v<T, __nv_bfloat16> ? DType::kBF16 : DType::kF16;
  FLASHDEBERTA_REQUIRE(params.buffers.tables == element || params.span2 == 0,
                       "the tensor-core attention backward reads its position tables in "
                           << dtype_name(element) << ", not " << dtype_name(params.buffers.tables));
  MmaBackwardLoads const loads = mma_backward_loads(params);
  if (!params.compute_lse) {  // the forward's lse: D from its output, one sweep in the row pass
    constexpr int kThreads = 256;
    std::int64_t const warps = a.sequences.total_tokens * a.num_heads;
    mma_row_dot_kernel<T>
        <<<static_cast<unsigned>((warps * 32 + kThreads - 1) / kThreads), kThreads, 0, stream>>>(params);
    FLASHDEBERTA_CUDA_CHECK_LAUNCH();
  }
  TileConfig const rows = mma_backward_tiles<T>("row pass (dQ)", "FLASHDEBERTA_BWD_Q", limits);
  TileConfig const columns = mma_backward_tiles<T>("column pass (dK, dV)", "FLASHDEBERTA_BWD_KV", limits);
  dispatch_owned_rows<T>(rows, [&]<class Traits>() {
    launch_mma_pass<Traits>(mma_backward_rows_kernel<Traits>, a, params, loads, stream);
  });
  dispatch_owned_rows<T>(columns, [&]<class Traits>() {
    launch_mma_pass<Traits>(mma_backward_columns_kernel<Traits>, a, params, loads, stream);
  });
}

}  // namespace flashdeberta::cuda_kernels::training

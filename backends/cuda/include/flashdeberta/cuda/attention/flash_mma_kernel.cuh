// Flash disentangled-attention forward on tensor cores (FlashTraits<T, 64, true>): 16-bit operands, fp32
// accumulation, online softmax in fp32 registers, no (L, L) buffer and no workspace.
//
// Per CTA: sequence b, head h, query rows [i0, i0 + 64); warp w owns rows [16w, 16w + 16) (flash_mma_cta.cuh).
// Once: the Q fragments, and, when the CTA can meet a saturated tile, the position terms at the two edge
// slots (every |p_i - p_j| >= saturation). Per key tile, the stages, each in its own header:
//   load_kv          keys, values (and, with holes in the positions, key positions) of the next tile, cp.async
//                    into the other buffer (flash_mma_load.cuh)
//   compute_qk       S = (Q log2(e) / scale) . K^T (registers; q scaled once): softmax runs in base 2
//                    (flash_mma_qk.cuh)
//   position terms   c2p and p2c added to S: an edge slot's biases, the by-diff windows, or a general window
//                    (holes) in chunks (flash_mma_position_terms.cuh, window_terms.cuh); then the next tile's
//                    window is requested (flash_mma_window_load.cuh), so it arrives during this tile's
//                    softmax and P.V and the next tile's first steps
//   softmax          mask, running max and sum per row; the four lanes of a quad share a row
//                    (flash_mma_softmax.cuh)
//   compute_pv       O = O * correction + P . V, P taken from the score registers as A fragments
//                    (flash_mma_pv.cuh)
// and at the end write_o: out = O / sum.
//
// The kernel owns the register state that crosses stages (qf, qpos, the edge terms, o / row_max / row_sum,
// the scores, the key fragments kf, the tile maxima) as its own arrays, declared here in this order and
// handed to the stages by reference; compute_qk is bound to the tile's operands by a lambda. That is not
// style: NVVM promotes a kernel's arrays to registers late, after unrolling, in the order it finds them,
// and that order numbers the PTX registers that ptxas allocates from. Arrays moved into a struct or into
// a stage (whose locals the inliner hoists ahead of the kernel's), or compute_qk called directly from its
// three paths, compile to other register assignments; declared as they are, the kernels compile to the
// same SASS as the single-function kernel they were split from (nvcc 13.0, sm_80 and sm_90).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "flashdeberta/cuda/attention/attention_params.cuh"
#include "flashdeberta/cuda/attention/flash_mma_cta.cuh"
#include "flashdeberta/cuda/attention/flash_mma_load.cuh"
#include "flashdeberta/cuda/attention/flash_mma_position_terms.cuh"
#include "flashdeberta/cuda/attention/flash_mma_pv.cuh"
#include "flashdeberta/cuda/attention/flash_mma_qk.cuh"
#include "flashdeberta/cuda/attention/flash_mma_softmax.cuh"
#include "flashdeberta/cuda/attention/flash_mma_window_load.cuh"
#include "flashdeberta/cuda/attention/kernel_traits.cuh"
#include "flashdeberta/cuda/attention/mma.cuh"
#include "flashdeberta/cuda/attention/window_terms.cuh"

namespace flashdeberta::cuda_kernels::flash_mma {

// kDiffWindows: the call has contiguous positions, both position terms and by-diff tables (the DeBERTa-v2/v3
// case), known at compile time so that the mainloop carries no run-time flag tests and no general-window path.
template <class Tr, bool kDiffWindows>
__global__ void __launch_bounds__(Tr::kThreads, Tr::kMinBlocksPerSm) flash_mma_kernel(AttentionParams const p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using T = typename Tr::Element;
  constexpr int BN = Tr::kBlockN, W = Tr::kWindow;
  extern __shared__ __align__(16) unsigned char smem[];

  int const b = blockIdx.z;
  int const h = blockIdx.y;
  int const i0 = blockIdx.x * Tr::kBlockM;
  int const first = p.cu_seqlens[b];
  int const length = p.cu_seqlens[b + 1] - first;
  if (i0 >= length) return;
  MmaCta<Tr, kDiffWindows> const cta(p, smem, h, i0, first, length);
  EdgeSlots const edges = find_edge_slots(cta);

  // load_q and the first key tile
  load_q(cta);
  bool const full_head = cta.d == Tr::kHeadDim;
  load_kv(cta, full_head, 0, 0);
  mma::cp_async_commit();
  int qpos[2] = {0, 0}, qmin = i0, qmax = i0 + cta.rows - 1;
  query_positions(cta, qpos, qmin, qmax);

  mma::cp_async_wait<0>();
  __syncthreads();
  std::uint32_t qf[4][4];  // this warp's 16 query rows as A fragments, k = head columns 16kk..
  load_q_fragments(cta, qf);
  float const score_scale = p.inv_scale * kLog2e;
  FragmentAddresses frag;
  fragment_addresses(cta, frag);
  scale_q_fragments<T>(qf, score_scale);
  float c2p_edge[2][2] = {};            // [row r][lo, hi], scaled like the scores (q is)
  std::uint32_t qr_edge[2][4][2] = {};  // [lo, hi][kk][head columns 16kk + 2t, 16kk + 8 + 2t]
  edge_slot_terms(cta, edges, qf, score_scale, c2p_edge, qr_edge);

  SlotWindow win;
  if (cta.relative) {
    __syncthreads();  // every warp holds its Q fragments: the first window may overwrite the query tile
    int ka, kb;
    key_positions(cta, 0, ka, kb);
    win = classify(cta, edges, qmin, qmax, ka, kb);
    prepare(cta, win, 0);
  }

  float o[8][4] = {};  // the softmax state (flash_mma_softmax.cuh says what each holds)
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[4] = {};
  std::uint32_t const ones = mma::pack2<T>(1.0f, 1.0f);

  int buffer = 0;
  for (int j0 = 0; j0 < length; j0 += BN, buffer ^= 1) {
    int const cols = min(BN, length - j0);
    bool const has_next = j0 + BN < length;
    mma::cp_async_wait<0>();
    __syncthreads();  // this tile's keys, values, positions and window landed; the previous tile is consumed
    int const* kpos = cta.kpos_s + buffer * BN;
    int const* slot_table = cta.slot_s + buffer * (Tr::kBlockM + BN);
    if (has_next) load_kv(cta, full_head, j0 + BN, buffer ^ 1);
    mma::cp_async_commit();
    int next_ka = 0, next_kb = 0;
    if (cta.relative && has_next) key_positions(cta, j0 + BN, next_ka, next_kb);
    SlotWindow next;
    auto const request_next = [&] {  // in flight during the gather, softmax, P.V and the next compute_qk
      if (has_next) {
        next = classify(cta, edges, qmin, qmax, next_ka, next_kb);
        prepare(cta, next, buffer ^ 1);
      }
    };

    int const kv_bytes = buffer * Tr::kTileBytes;   // this tile's K / V buffer, from buffer 0
    float sc[8][4];                                 // written by compute_qk's first k-step
    auto const compute_qk = [&]<bool kEdgeP2c>() {  // bound to this tile (see the top of the file)
      flash_mma::compute_qk<T, kEdgeP2c>(sc, qf, qr_edge, win.edge, frag.k, kv_bytes);
    };
    if (!cta.relative || win.edge != WindowEdge::kNone) {
      // no position terms, or an edge tile: plain flash, p2c accumulated with S, c2p a row bias; the next
      // window can be requested at once (its buffers are free)
      if (win.edge != WindowEdge::kNone && cta.p2c) {
        compute_qk.template operator()<true>();
      } else {
        compute_qk.template operator()<false>();
      }
      if (win.edge != WindowEdge::kNone && cta.c2p) add_edge_bias(sc, c2p_edge, win.edge);
      if (cta.relative) request_next();
    } else if (kDiffWindows || win.by_diff) {
      // the windows first, Q.K^T after them (diff_window_terms says why)
      std::uint32_t kf[4][4];  // this warp's 16 keys of the tile as A fragments (p2c)
      diff_window_terms(cta, qf, frag, kv_bytes, score_scale, kf);
      compute_qk.template operator()<false>();
      __syncthreads();  // terms visible to every warp; the window buffers are free
      request_next();
      gather_diff_terms(cta, sc);
    } else {
      // a general window (holes in the positions): one chunk of W slots at a time, each score's slot looked
      // up in the tile's diff -> slot table
      compute_qk.template operator()<false>();
      for (int c0 = 0; c0 < win.slots; c0 += W) {
        if (c0 > 0) {
          load_window(cta, win, c0);  // every warp passed the barrier after the previous chunk's terms
          mma::cp_async_wait<0>();
          __syncthreads();
        }
        // the chunk's window columns, rounded up to the n16 step (computed here: inside window_chunk_terms NVVM
        // shares it with load_window's count and schedules the chunk loop differently)
        int const width = (min(W, win.slots - c0) + Tr::kWindowStep - 1) / Tr::kWindowStep * Tr::kWindowStep;
        std::uint32_t kf[4][4];  // this warp's 16 keys of the tile as A fragments (p2c)
        window_chunk_terms(cta, width, qf, frag, kv_bytes, score_scale, kf);
        __syncthreads();  // terms visible to every warp; the window buffers are free
        if (c0 + W >= win.slots) request_next();
        gather_window_terms(cta, win, c0, qpos, kpos, slot_table, sc);
      }
    }
    win = next;

    if (cols < BN) mask_keys(sc, cols, cta.t);
    float tile_max[2];
    tile_row_max(sc, tile_max);
    update_softmax_state(sc, tile_max, o, row_max, row_sum);
    compute_pv<T>(sc, o, row_sum, frag.v, kv_bytes, ones);
  }

  write_o(cta, o, row_sum);
#else
  __trap();  // dispatch.cuh sends code below sm_80 (the device's, or older PTX: kernel_code_arch) to the CUDA-core
             // kernel
#endif
}

}  // namespace flashdeberta::cuda_kernels::flash_mma

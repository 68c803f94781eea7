// Flash disentangled-attention forward on tensor cores (FlashTraits<T, 64, true>): 16-bit operands, fp32
// accumulation, online softmax in fp32 registers, no (L, L) buffer and no workspace.
//
// Per CTA: sequence b, head h, query rows [i0, i0 + 64); warp w owns rows [16w, 16w + 16). Once: the Q
// fragments, and, when the CTA can meet a saturated tile, the position terms at the two edge slots (every
// |p_i - p_j| >= saturation). Per key tile:
//   load_kv        keys, values (and, with holes in the positions, key positions) of the next tile, cp.async
//                  into the other buffer
//   compute_qk     S = (Q log2(e) / scale) . K^T (registers; q scaled once): softmax runs in base 2
//   position_terms the tile's slots are one contiguous range (delta is monotone in p_i - p_j):
//                  - one edge slot (saturated tiles): p2c = Qr[edge] . k_j is accumulated with S by a
//                    second mma on the same K fragments, c2p is the row's precomputed bias
//                  - contiguous positions (by-diff windows, window_terms.cuh): c2p (64 rows) = Q . Kr[window]^T
//                    and p2c (64 keys) = K . Qr[window]^T on tensor cores into fp16 shared memory, before
//                    compute_qk, then gathered per score at x = i - j + 63: S[i, j] += c2p[i, x] + p2c[j, x]
//                  - otherwise (holes) the same over the tile's slot window, each score's slot looked up
//                  then the next tile's window is requested, so it arrives during this tile's softmax and
//                  P.V and the next tile's first steps
//   softmax        running max and sum per row; the four lanes of a quad share a row
//   compute_pv     O = O * correction + P . V, P taken from the score registers as A fragments
// and at the end write_o: out = O / sum.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include "flashdeberta/cuda/attention/attention_params.cuh"
#include "flashdeberta/cuda/attention/kernel_traits.cuh"
#include "flashdeberta/cuda/attention/mma.cuh"
#include "flashdeberta/cuda/attention/window_terms.cuh"
#include "flashdeberta/cuda/kernels/element.cuh"

namespace flashdeberta::cuda_kernels::flash_mma {

// kDiffWindows: the call has contiguous positions, both position terms and by-diff tables (the DeBERTa-v2/v3
// case), known at compile time so that the mainloop carries no run-time flag tests and no general-window path.
template <class Tr, bool kDiffWindows>
__global__ void __launch_bounds__(Tr::kThreads, Tr::kMinBlocksPerSm) flash_mma_kernel(AttentionParams const p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using T = typename Tr::Element;
  constexpr int BM = Tr::kBlockM, BN = Tr::kBlockN, W = Tr::kWindow, kLd = Tr::kTermLd, kThreads = Tr::kThreads;
  constexpr int kTile = BN * Tr::kHeadDim;
  extern __shared__ __align__(16) unsigned char smem[];
  auto* k_s = reinterpret_cast<T*>(smem + Tr::kKOffset);
  auto* v_s = reinterpret_cast<T*>(smem + Tr::kVOffset);
  auto* key_window = reinterpret_cast<T*>(smem + Tr::kKeyWindowOffset);
  auto* query_window = reinterpret_cast<T*>(smem + Tr::kQueryWindowOffset);
  T* q_s = key_window;
  auto* c2p_s = reinterpret_cast<__half*>(smem + Tr::kC2pOffset);
  auto* p2c_s = reinterpret_cast<__half*>(smem + Tr::kP2cOffset);
  auto* kpos_s = reinterpret_cast<int*>(smem + Tr::kKeyPosOffset);
  auto* slot_s = reinterpret_cast<int*>(smem + Tr::kSlotOffset);

  int const b = blockIdx.z;
  int const h = blockIdx.y;
  int const i0 = blockIdx.x * BM;
  int const first = p.cu_seqlens[b];
  int const length = p.cu_seqlens[b + 1] - first;
  if (i0 >= length) return;
  int const rows = min(BM, length - i0);
  int const warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int const g = lane / 4, t = lane % 4;
  int const d = p.head_size, s = p.saturation;
  bool const c2p = kDiffWindows || p.c2p, p2c = kDiffWindows || p.p2c, relative = c2p || p2c;
  bool const contiguous = kDiffWindows || p.contiguous;
  bool const by_diff_tables = kDiffWindows || p.by_diff_ld != 0;
  auto const* q = static_cast<T const*>(p.q) + static_cast<std::int64_t>(h) * p.head_stride;
  auto const* k = static_cast<T const*>(p.k) + static_cast<std::int64_t>(h) * p.head_stride;
  auto const* v = static_cast<T const*>(p.v) + static_cast<std::int64_t>(h) * p.head_stride;
  auto const* pos_key = c2p ? static_cast<T const*>(p.pos_key) + static_cast<std::int64_t>(h) * d : nullptr;
  auto const* pos_query = p2c ? static_cast<T const*>(p.pos_query) + static_cast<std::int64_t>(h) * d : nullptr;
  std::int32_t const* positions = p.positions + first;
  std::int32_t const* relative_index = p.relative_index;
  auto const slot_of_diff = [&](int diff) { return __ldg(relative_index + min(max(diff, -s), s) + s); };
  // Edge tiles (every difference of the tile saturated) occur only in sequences longer than about the
  // saturation; a CTA that cannot reach one (the bounds below are at most 32 inside +-s) skips the edge
  // slots, probes and terms, chains of dependent global loads.
  int const last_tile = (length - 1) / BN * BN;
  bool const edges =
      relative && (!contiguous || i0 - min(BN, length) + 1 >= s - 32 || i0 + rows - 1 - last_tile <= -s + 32);
  int const edge_lo = edges ? slot_of_diff(-s) : 0;  // the slot of every diff <= -s
  int const edge_hi = edges ? slot_of_diff(s) : 0;   // the slot of every diff >= s
  // Slots are monotone in the difference, so a tile is an edge tile when its smallest difference reaches
  // edge_hi_from (or its largest stays at or below edge_lo_to). The edge slot's plateau can start below s
  // (log buckets clamp to the last row early): lane l probes s - 1 - l and -s + 1 + l, and the run of
  // hits from lane 0 moves the bounds in; a longer plateau keeps 32 diffs of it on the window path.
  int edge_hi_from = s, edge_lo_to = -s;
  if (edges && contiguous) {
    unsigned const hi = __ballot_sync(0xffffffffu, slot_of_diff(s - 1 - lane) == edge_hi);
    unsigned const lo = __ballot_sync(0xffffffffu, slot_of_diff(-s + 1 + lane) == edge_lo);
    edge_hi_from = s - (hi == 0xffffffffu ? 32 : __ffs(~hi) - 1);
    edge_lo_to = -s + (lo == 0xffffffffu ? 32 : __ffs(~lo) - 1);
  }

  // load_q and the first key tile. Padding rows and columns repeat the last valid position, so they stay
  // inside every slot window.
  mma::load_tile_async<kThreads>(q_s, q + static_cast<std::int64_t>(first + i0) * p.q_ld, p.q_ld, BM, rows, d);
  bool const full_head = d == Tr::kHeadDim;
  auto const load_kv = [&](int j0, int buffer) {
    int const cols = min(BN, length - j0);
    if (cols == BN && full_head) {
      mma::load_full_tile_async<kThreads, BN>(k_s + buffer * kTile, k + static_cast<std::int64_t>(first + j0) * p.k_ld,
                                              p.k_ld);
      mma::load_full_tile_async<kThreads, BN>(v_s + buffer * kTile, v + static_cast<std::int64_t>(first + j0) * p.v_ld,
                                              p.v_ld);
      if (!contiguous && threadIdx.x < BN) kpos_s[buffer * BN + threadIdx.x] = positions[j0 + threadIdx.x];
      return;
    }
    mma::load_tile_async<kThreads>(k_s + buffer * kTile, k + static_cast<std::int64_t>(first + j0) * p.k_ld, p.k_ld, BN,
                                   cols, d);
    mma::load_tile_async<kThreads>(v_s + buffer * kTile, v + static_cast<std::int64_t>(first + j0) * p.v_ld, p.v_ld, BN,
                                   cols, d);
    if (!contiguous && threadIdx.x < BN)
      kpos_s[buffer * BN + threadIdx.x] = positions[j0 + min(static_cast<int>(threadIdx.x), cols - 1)];
  };
  load_kv(0, 0);
  mma::cp_async_commit();
  // Positions enter only through differences, so with contiguous positions they are the token offsets
  // within the sequence (no load: a global load here stalls the warp for an L2 round trip every tile,
  // and with two warps per scheduler nothing hides it).
  int qpos[2] = {0, 0}, qmin = i0, qmax = i0 + rows - 1;
  if (!contiguous) {
    qpos[0] = positions[i0 + min(16 * warp + g, rows - 1)];
    qpos[1] = positions[i0 + min(16 * warp + g + 8, rows - 1)];
    int const qa = positions[i0 + min(lane, rows - 1)], qb = positions[i0 + min(lane + 32, rows - 1)];
    qmin = warp_min_int(min(qa, qb));
    qmax = warp_max_int(max(qa, qb));
  }
  // Key positions of the tile at j0 for its slot window: with contiguous positions its first and last
  // (ka, kb) as offsets; otherwise two per lane straight from global memory, reduced in classify.
  auto const key_positions = [&](int j0, int& ka, int& kb) {
    int const last = min(BN, length - j0) - 1;
    if (contiguous) {
      ka = j0;
      kb = j0 + last;
      return;
    }
    ka = positions[j0 + min(lane, last)];
    kb = positions[j0 + min(lane + 32, last)];
  };
  auto const classify = [&](int ka, int kb) {
    SlotWindow w;
    if (contiguous) {  // by differences alone: no slot lookup on the way to the next window's request
      w.diff_min = qmin - kb;
      int const diff_max = qmax - ka;
      w.edge = w.diff_min >= edge_hi_from ? WindowEdge::kHigh
                                          : (diff_max <= edge_lo_to ? WindowEdge::kLow : WindowEdge::kNone);
      w.slots = 1;
      if (w.edge == WindowEdge::kNone) {
        w.by_diff = true;
        w.diff_min = qmin - (ka + BN - 1);  // ka: the tile's first key position
        w.slots = BM + BN - 1;              // window rows
      }
      return w;
    }
    int const key_max = warp_max_int(max(ka, kb));
    int const key_min = warp_min_int(min(ka, kb));
    w.diff_min = qmin - key_max;
    int const diff_max = qmax - key_min;
    w.first = slot_of_diff(w.diff_min);
    w.slots = slot_of_diff(diff_max) - w.first + 1;
    w.range = diff_max - w.diff_min + 1;
    w.narrow = w.range <= BM + BN;
    w.edge = w.slots != 1 ? WindowEdge::kNone
                          : (w.first == edge_hi ? WindowEdge::kHigh
                                                : (w.first == edge_lo ? WindowEdge::kLow : WindowEdge::kNone));
    return w;
  };
  // The by_diff window: row x <- the relative row of slot(diff_min + x); rows past BM + BN - 2 and head
  // columns past d zero-filled.
  auto const load_window_by_diff = [&](SlotWindow const& w) {
    constexpr int kRows = (BM + BN - 1 + Tr::kWindowStep - 1) / Tr::kWindowStep * Tr::kWindowStep;
    if (by_diff_tables) {  // 128 consecutive rows of the by-diff tables (row 127 is never gathered)
      // the clamp only guards memory: by_diff_layout covers every window start
      std::int64_t const row0 = min(max(w.diff_min + p.by_diff_offset, 0), p.by_diff_rows - kRows);
      std::int64_t const column = static_cast<std::int64_t>(h) * Tr::kHeadDim;
      if (c2p)
        mma::load_full_tile_async<kThreads, kRows>(
            key_window, static_cast<T const*>(p.key_by_diff) + row0 * p.by_diff_ld + column, p.by_diff_ld);
      if (p2c)
        mma::load_full_tile_async<kThreads, kRows>(
            query_window, static_cast<T const*>(p.query_by_diff) + row0 * p.by_diff_ld + column, p.by_diff_ld);
    } else {  // no tables (head sizes below 64): each row's slot looked up
      for (int idx = threadIdx.x; idx < kRows * 8; idx += kThreads) {
        int const r = idx / 8, c = idx % 8;
        bool const valid = r < BM + BN - 1 && c * 8 < d;
        std::int64_t const slot = slot_of_diff(w.diff_min + min(r, BM + BN - 2));
        if (c2p)
          mma::cp_async_16(key_window + mma::swizzle(r, c), valid ? pos_key + slot * p.pos_key_ld + c * 8 : pos_key,
                           valid);
        if (p2c)
          mma::cp_async_16(query_window + mma::swizzle(r, c),
                           valid ? pos_query + slot * p.pos_query_ld + c * 8 : pos_query, valid);
      }
    }
    mma::cp_async_commit();
  };
  // Kr / Qr rows of window chunk [c0, c0 + W) into shared memory, zero rows up to the next n16 step.
  auto const load_window = [&](SlotWindow const& w, int c0) {
    int const count = min(W, w.slots - c0);
    int const rows_loaded = (count + Tr::kWindowStep - 1) / Tr::kWindowStep * Tr::kWindowStep;
    std::int64_t const slot0 = w.first + c0;
    if (c2p)
      mma::load_tile_async<kThreads>(key_window, pos_key + slot0 * p.pos_key_ld, p.pos_key_ld, rows_loaded, count, d);
    if (p2c)
      mma::load_tile_async<kThreads>(query_window, pos_query + slot0 * p.pos_query_ld, p.pos_query_ld, rows_loaded,
                                     count, d);
    mma::cp_async_commit();
  };
  // A general window's first chunk and its diff -> slot table; edge windows need neither.
  auto const prepare = [&](SlotWindow const& w, int table) {
    if (w.edge != WindowEdge::kNone) return;
    if (w.by_diff) {
      load_window_by_diff(w);
      return;
    }
    load_window(w, 0);
    if (w.narrow && w.slots > 1)
      for (int idx = threadIdx.x; idx < w.range; idx += kThreads)
        slot_s[table * (BM + BN) + idx] = slot_of_diff(w.diff_min + idx) - w.first;
  };

  mma::cp_async_wait<0>();
  __syncthreads();
  std::uint32_t qf[4][4];  // this warp's 16 query rows as A fragments, k = head columns 16kk..
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) mma::load_a(qf[kk], q_s, 16 * warp, 16 * kk);
  // Scores are kept in log2 units, scaled: q is scaled once here (rounded to T, as HF rounds k / scale),
  // so Q.K^T, the c2p terms and the edge c2p bias come out scaled; p2c (k . Qr) is scaled where stored.
  float const score_scale = p.inv_scale * kLog2e;
  int row_offset[4], col_offset[4];  // mma::b_rows_offset / b_cols_offset, computed once
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    row_offset[i] = mma::b_rows_offset(i);
    col_offset[i] = mma::b_cols_offset(i);
  }
  // The shared-memory addresses of the mainloop's ldmatrix, per k16 (or n16) step of buffer 0, made opaque:
  // otherwise the compiler re-derives the swizzled offsets from the thread index in every tile (about 80
  // instructions of ~1000 per tile and warp, Nsight Compute source counters at 32 x 512).
  std::uint32_t k_frag[4], v_frag[4], key_a_frag[4], c2p_frag[4], p2c_frag[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    k_frag[i] = mma::opaque(mma::smem_address(k_s + row_offset[i]));  // B of Q.K^T, key rows 16np..
    v_frag[i] = mma::opaque(mma::smem_address(v_s + col_offset[i]));  // B of P.V, value columns 16np..
    key_a_frag[i] = mma::opaque(mma::smem_address(k_s + mma::swizzle(16 * warp + lane % 16, 2 * i + lane / 16)));
    c2p_frag[i] = mma::opaque(mma::smem_address(key_window + 16 * warp * 64 + row_offset[i]));
    p2c_frag[i] = mma::opaque(mma::smem_address(query_window + (BM - 16 - 16 * warp) * 64 + row_offset[i]));
  }
  constexpr int kTileBytes = kTile * 2, kStep16Bytes = 16 * 64 * 2;
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
#pragma unroll
    for (int i = 0; i < 4; ++i) qf[kk][i] = mma::scale_pair<T>(qf[kk][i], score_scale);

  // Edge slots, once per CTA: c2p of rows g, g + 8 at slots edge_lo / edge_hi (one mma per k16 step: B's
  // column 0 is Kr[edge_lo], column 1 Kr[edge_hi]; lane t = 0 of each quad receives both), and Qr at
  // both edge slots as A fragments whose 16 rows are all that row, so that Qr[edge] . k_j lands in the
  // score registers of every row of column j.
  float c2p_edge[2][2] = {};            // [row r][lo, hi], scaled like the scores (q is)
  std::uint32_t qr_edge[2][4][2] = {};  // [lo, hi][kk][head columns 16kk + 2t, 16kk + 8 + 2t]
  if (c2p && edges) {
    float acc[4] = {};
    T const* edge_row = pos_key + static_cast<std::int64_t>(g == 0 ? edge_lo : edge_hi) * p.pos_key_ld;
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      std::uint32_t const b0 = g < 2 ? load_pair(edge_row, 16 * kk + 2 * t, d) : 0u;
      std::uint32_t const b1 = g < 2 ? load_pair(edge_row, 16 * kk + 8 + 2 * t, d) : 0u;
      mma::mma_16816<T>(acc, qf[kk], b0, b1);
    }
    int const quad = lane & ~3;
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int e = 0; e < 2; ++e) c2p_edge[r][e] = __shfl_sync(0xffffffffu, acc[2 * r + e], quad);
  }
  if (p2c && edges) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      T const* row = pos_query + static_cast<std::int64_t>(e == 0 ? edge_lo : edge_hi) * p.pos_query_ld;
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        qr_edge[e][kk][0] = mma::scale_pair<T>(load_pair(row, 16 * kk + 2 * t, d), score_scale);
        qr_edge[e][kk][1] = mma::scale_pair<T>(load_pair(row, 16 * kk + 8 + 2 * t, d), score_scale);
      }
    }
  }

  SlotWindow win;
  if (relative) {
    __syncthreads();  // every warp holds its Q fragments: the first window may overwrite the query tile
    int ka, kb;
    key_positions(0, ka, kb);
    win = classify(ka, kb);
    prepare(win, 0);
  }

  float o[8][4] = {};                         // output columns 8nt + 2t (+1), rows g and g + 8
  float row_max[2] = {-INFINITY, -INFINITY};  // the running maximum the probabilities are taken against
  // Row sums of the probabilities as they enter P.V (rounded to T), accumulated by one more mma per k16 step
  // against a B fragment of ones: every column of the n8 tile holds the full row sum, so no quad reduction
  // is needed and 32 FADD per tile go (c[0]: row g, c[2]: row g + 8).
  float row_sum[4] = {};
  std::uint32_t const ones = mma::pack2<T>(1.0f, 1.0f);

  int buffer = 0;
  for (int j0 = 0; j0 < length; j0 += BN, buffer ^= 1) {
    int const cols = min(BN, length - j0);
    bool const has_next = j0 + BN < length;
    mma::cp_async_wait<0>();
    __syncthreads();  // this tile's keys, values, positions and window landed; the previous tile is consumed
    int const* kpos = kpos_s + buffer * BN;
    int const* slot_table = slot_s + buffer * (BM + BN);
    if (has_next) load_kv(j0 + BN, buffer ^ 1);
    mma::cp_async_commit();
    int next_ka = 0, next_kb = 0;
    if (relative && has_next) key_positions(j0 + BN, next_ka, next_kb);
    SlotWindow next;

    // compute_qk: scores of rows g, g + 8 and key columns 8nt + 2t (+1); in an edge tile p2c is
    // Qr[edge] . k_j, accumulated with the same K fragments
    // (two instantiations rather than a branch around every mma: the branch cost a warpsync per mma)
    int const kv_bytes = buffer * kTileBytes;  // this tile's K / V buffer, from buffer 0
    float sc[8][4];                            // written by compute_qk's first k-step
    auto const compute_qk = [&]<bool kEdgeP2c>() {
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        std::uint32_t qr[4] = {};
        if constexpr (kEdgeP2c) {
          bool const high = win.edge == WindowEdge::kHigh;  // selects, not a register-array index
          std::uint32_t const lo = high ? qr_edge[1][kk][0] : qr_edge[0][kk][0];
          std::uint32_t const hi = high ? qr_edge[1][kk][1] : qr_edge[0][kk][1];
          qr[0] = qr[1] = lo;
          qr[2] = qr[3] = hi;
        }
#pragma unroll
        for (int np = 0; np < 4; ++np) {
          std::uint32_t kb[4];
          mma::ldmatrix_x4(kb, k_frag[kk] + kv_bytes + np * kStep16Bytes);
          if (kk == 0) {
            mma::mma_16816_first<T>(sc[2 * np], qf[kk], kb[0], kb[1]);
            mma::mma_16816_first<T>(sc[2 * np + 1], qf[kk], kb[2], kb[3]);
          } else {
            mma::mma_16816<T>(sc[2 * np], qf[kk], kb[0], kb[1]);
            mma::mma_16816<T>(sc[2 * np + 1], qf[kk], kb[2], kb[3]);
          }
          if constexpr (kEdgeP2c) {
            mma::mma_16816<T>(sc[2 * np], qr, kb[0], kb[1]);
            mma::mma_16816<T>(sc[2 * np + 1], qr, kb[2], kb[3]);
          }
        }
      }
    };
    auto const request_next = [&] {  // in flight during the gather, softmax, P.V and the next compute_qk
      if (has_next) {
        next = classify(next_ka, next_kb);
        prepare(next, buffer ^ 1);
      }
    };

    if (!relative || win.edge != WindowEdge::kNone) {
      // no position terms, or an edge tile: plain flash, p2c accumulated with S, c2p a row bias; the next
      // window can be requested at once (its buffers are free)
      if (win.edge != WindowEdge::kNone && p2c) {
        compute_qk.template operator()<true>();
      } else {
        compute_qk.template operator()<false>();
      }
      if (win.edge != WindowEdge::kNone && c2p) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float const bias = win.edge == WindowEdge::kHigh ? c2p_edge[e >> 1][1] : c2p_edge[e >> 1][0];
#pragma unroll
          for (int nt = 0; nt < 8; ++nt) sc[nt][e] += bias;
        }
      }
      if (relative) request_next();
    } else if (kDiffWindows || win.by_diff) {
      // The windows first, Q.K^T after them: the scores' 32 registers are free while the window
      // accumulators are live, and the two windows run as one interleaved stream of mma (two independent
      // chains where one window alone leaves the tensor pipe waiting). Each warp computes only the window
      // columns its rows read: x = row - col + BN - 1 in [16w, 16w + BN + 15) for c2p, its 16 keys' x in
      // [BM - 16 - 16w, BM + BN - 1 - 16w) for p2c, 80 of the 128 columns each.
      constexpr int kSteps = (BN + 16) / Tr::kWindowStep;
      int const c2p_begin = 16 * warp, p2c_begin = BM - 16 - 16 * warp;
      std::uint32_t kf[4][4];  // this warp's 16 keys of the tile as A fragments (p2c)
      if (p2c) {
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) mma::ldmatrix_x4(kf[kk], key_a_frag[kk] + kv_bytes);
      }
      if (c2p && p2c && by_diff_tables) {  // the by-diff Qr table is pre-scaled (dispatch.cuh)
        window_pair_terms<Tr, kSteps, T>(c2p_s + 16 * warp * kLd, qf, c2p_frag, c2p_begin, p2c_s + 16 * warp * kLd, kf,
                                         p2c_frag, p2c_begin);
      } else {
        if (c2p)
          window_terms<Tr, false, kSteps>(c2p_s + 16 * warp * kLd, qf, key_window, c2p_begin, 0, 1.0f, row_offset);
        if (p2c) {
          if (by_diff_tables) {
            window_terms<Tr, false, kSteps>(p2c_s + 16 * warp * kLd, kf, query_window, p2c_begin, 0, 1.0f, row_offset);
          } else {
            window_terms<Tr, true, kSteps>(p2c_s + 16 * warp * kLd, kf, query_window, p2c_begin, 0, score_scale,
                                           row_offset);
          }
        }
      }
      compute_qk.template operator()<false>();
      __syncthreads();  // terms visible to every warp; the window buffers are free
      request_next();
      // S[i, j] += c2p[i, x] + p2c[j, x]; with both terms they are added in fp16 (one more rounding of
      // 2^-11, one conversion less)
      int const row_base = 16 * warp + g;
      auto const gather = [&]<bool kC2p, bool kP2c>() {
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            int const row = row_base + 8 * (e >> 1);
            int const col = 8 * nt + 2 * t + (e & 1);
            int const x = row - col + BN - 1;
            if constexpr (kC2p && kP2c) {
              sc[nt][e] += __half2float(__hadd(c2p_s[row * kLd + x], p2c_s[col * kLd + x]));
            } else if constexpr (kC2p) {
              sc[nt][e] += __half2float(c2p_s[row * kLd + x]);
            } else {
              sc[nt][e] += __half2float(p2c_s[col * kLd + x]);
            }
          }
        }
      };
      if (c2p && p2c) {
        gather.template operator()<true, true>();
      } else if (c2p) {
        gather.template operator()<true, false>();
      } else {
        gather.template operator()<false, true>();
      }
    } else {
      // a general window (holes in the positions): one chunk of W slots at a time, each score's slot looked
      // up in the tile's diff -> slot table
      compute_qk.template operator()<false>();
      for (int c0 = 0; c0 < win.slots; c0 += W) {
        if (c0 > 0) {
          load_window(win, c0);  // every warp passed the barrier after the previous chunk's terms
          mma::cp_async_wait<0>();
          __syncthreads();
        }
        int const width = (min(W, win.slots - c0) + Tr::kWindowStep - 1) / Tr::kWindowStep * Tr::kWindowStep;
        if (c2p) window_terms<Tr, false, 0>(c2p_s + 16 * warp * kLd, qf, key_window, 0, width, 1.0f, row_offset);
        if (p2c) {
          std::uint32_t kf[4][4];
#pragma unroll
          for (int kk = 0; kk < 4; ++kk) mma::ldmatrix_x4(kf[kk], key_a_frag[kk] + kv_bytes);
          window_terms<Tr, true, 0>(p2c_s + 16 * warp * kLd, kf, query_window, 0, width, score_scale, row_offset);
        }
        __syncthreads();  // terms visible to every warp; the window buffers are free
        if (c0 + W >= win.slots) request_next();
        int const row_base = 16 * warp + g;
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            int const row = row_base + 8 * (e >> 1);
            int const col = 8 * nt + 2 * t + (e & 1);
            int local = 0;  // slot - first - c0
            if (win.slots > 1) {
              int const diff = qpos[e >> 1] - kpos[col];
              local = (win.narrow ? slot_table[diff - win.diff_min] : slot_of_diff(diff) - win.first) - c0;
              if (static_cast<unsigned>(local) >= static_cast<unsigned>(W)) continue;
            }
            float term = 0.0f;
            if (c2p) term += __half2float(c2p_s[row * kLd + local]);
            if (p2c) term += __half2float(p2c_s[col * kLd + local]);
            sc[nt][e] += term;
          }
        }
      }
    }
    win = next;

    // mask (the last tile only), then softmax: column 0 of every tile is a valid key, so each row's new
    // maximum is finite
    if (cols < BN) {
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (8 * nt + 2 * t + (e & 1) >= cols) sc[nt][e] = -INFINITY;
    }
    // Lazy rescaling: the running maximum moves only when a row's tile maximum exceeds it by more than
    // kSlack (log2 units), decided for the whole warp, so most tiles skip the 34 multiplies of rescaling O
    // and the sums. Probabilities then reach 2^kSlack, exact in fp32 and as precise in T.
    constexpr float kSlack = 8.0f;
    float tile_max[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float m8[8];  // a tree, 4 dependent maxima instead of a chain of 16
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) m8[nt] = fmaxf(sc[nt][2 * r], sc[nt][2 * r + 1]);
#pragma unroll
      for (int width = 4; width >= 1; width /= 2)
#pragma unroll
        for (int i = 0; i < width; ++i) m8[i] = fmaxf(m8[i], m8[i + width]);
      float m = m8[0];
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
      tile_max[r] = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
    }
    bool const grows = tile_max[0] > row_max[0] + kSlack || tile_max[1] > row_max[1] + kSlack;
    if (__any_sync(0xffffffffu, grows)) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float const new_max = fmaxf(row_max[r], tile_max[r]);
        float const correction = mma::fast_exp2(row_max[r] - new_max);
        row_max[r] = new_max;
        row_sum[2 * r] *= correction;
        row_sum[2 * r + 1] *= correction;
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          o[nt][2 * r] *= correction;
          o[nt][2 * r + 1] *= correction;
        }
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        sc[nt][2 * r] = mma::fast_exp2(sc[nt][2 * r] - row_max[r]);
        sc[nt][2 * r + 1] = mma::fast_exp2(sc[nt][2 * r + 1] - row_max[r]);
      }

      // compute_pv: the probabilities of keys 16kk.. are the A fragment built from score tiles 2kk, 2kk + 1
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      std::uint32_t const a[4] = {
          mma::pack2<T>(sc[2 * kk][0], sc[2 * kk][1]), mma::pack2<T>(sc[2 * kk][2], sc[2 * kk][3]),
          mma::pack2<T>(sc[2 * kk + 1][0], sc[2 * kk + 1][1]), mma::pack2<T>(sc[2 * kk + 1][2], sc[2 * kk + 1][3])};
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        std::uint32_t vb[4];
        mma::ldmatrix_x4_trans(vb, v_frag[np] + kv_bytes + kk * kStep16Bytes);
        mma::mma_16816<T>(o[2 * np], a, vb[0], vb[1]);
        mma::mma_16816<T>(o[2 * np + 1], a, vb[2], vb[3]);
      }
      mma::mma_16816<T>(row_sum, a, ones, ones);
    }
  }

  // write_o
  auto* out = static_cast<T*>(p.out) + static_cast<std::int64_t>(h) * d;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float const total = row_sum[2 * r];
    int const row = 16 * warp + g + 8 * r;
    if (row >= rows) continue;
    float const inv = 1.0f / total;
    T* out_row = out + static_cast<std::int64_t>(first + i0 + row) * p.out_ld;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      int const col = 8 * nt + 2 * t;
      if (col < d)
        *reinterpret_cast<std::uint32_t*>(out_row + col) = mma::pack2<T>(o[nt][2 * r] * inv, o[nt][2 * r + 1] * inv);
    }
  }
#else
  __trap();  // dispatch.cuh sends devices below sm_80 to the CUDA-core kernel
#endif
}

}  // namespace flashdeberta::cuda_kernels::flash_mma

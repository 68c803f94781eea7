// The tensor-core flash kernel's position windows, requested (flash_mma_kernel.cuh): which relative rows a
// key tile touches (classify, into a SlotWindow) and their asynchronous load into the Kr / Qr window buffers
// (prepare). The mainloop requests the next tile's window while this tile finishes, so that it arrives
// during the softmax, P.V and the next tile's first steps.
#pragma once

#include <cstdint>

#include "flashdeberta/cuda/attention/flash_mma_cta.cuh"
#include "flashdeberta/cuda/attention/mma.cuh"
#include "flashdeberta/cuda/attention/window_terms.cuh"
#include "flashdeberta/cuda/kernels/element.cuh"

namespace flashdeberta::cuda_kernels::flash_mma {

// Key positions of the tile at j0 for its slot window: with contiguous positions its first and last
// (ka, kb) as offsets; otherwise two per lane straight from global memory, reduced in classify.
template <class Tr, bool kDiffWindows>
__device__ inline void key_positions(MmaCta<Tr, kDiffWindows> const& cta, int j0, int& ka, int& kb) {
  int const last = min(Tr::kBlockN, cta.length - j0) - 1;
  if (cta.contiguous) {
    ka = j0;
    kb = j0 + last;
    return;
  }
  ka = cta.positions[j0 + min(cta.lane, last)];
  kb = cta.positions[j0 + min(cta.lane + 32, last)];
}

// The window of the tile whose key positions key_positions gave (qmin, qmax: query_positions): an edge slot,
// a by-diff window or (with holes) a range of slots.
template <class Tr, bool kDiffWindows>
__device__ inline SlotWindow classify(MmaCta<Tr, kDiffWindows> const& cta, EdgeSlots const& edge, int qmin, int qmax,
                                      int ka, int kb) {
  constexpr int BM = Tr::kBlockM, BN = Tr::kBlockN;
  SlotWindow w;
  if (cta.contiguous) {  // by differences alone: no slot lookup on the way to the next window's request
    w.diff_min = qmin - kb;
    int const diff_max = qmax - ka;
    w.edge = w.diff_min >= edge.hi_from ? WindowEdge::kHigh
                                        : (diff_max <= edge.lo_to ? WindowEdge::kLow : WindowEdge::kNone);
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
  w.first = cta.slot_of_diff(w.diff_min);
  w.slots = cta.slot_of_diff(diff_max) - w.first + 1;
  w.range = diff_max - w.diff_min + 1;
  w.narrow = w.range <= BM + BN;
  w.edge = w.slots != 1
               ? WindowEdge::kNone
               : (w.first == edge.hi ? WindowEdge::kHigh : (w.first == edge.lo ? WindowEdge::kLow : WindowEdge::kNone));
  return w;
}

// The by_diff window: row x <- the relative row of slot(diff_min + x); rows past BM + BN - 2 and head
// columns past d zero-filled.
template <class Tr, bool kDiffWindows>
__device__ inline void load_window_by_diff(MmaCta<Tr, kDiffWindows> const& cta, SlotWindow const& w) {
  using T = typename Tr::Element;
  constexpr int BM = Tr::kBlockM, BN = Tr::kBlockN, kThreads = Tr::kThreads;
  constexpr int kRows = (BM + BN - 1 + Tr::kWindowStep - 1) / Tr::kWindowStep * Tr::kWindowStep;
  auto const& p = cta.p;
  if (cta.by_diff_tables) {  // 128 consecutive rows of the by-diff tables (row 127 is never gathered)
    // the clamp only guards memory: by_diff_layout covers every window start
    std::int64_t const row0 = min(max(w.diff_min + p.by_diff_offset, 0), p.by_diff_rows - kRows);
    std::int64_t const column = static_cast<std::int64_t>(cta.h) * Tr::kHeadDim;
    if (cta.c2p)
      mma::load_full_tile_async<kThreads, kRows>(
          cta.key_window, static_cast<T const*>(p.key_by_diff) + row0 * p.by_diff_ld + column, p.by_diff_ld);
    if (cta.p2c)
      mma::load_full_tile_async<kThreads, kRows>(
          cta.query_window, static_cast<T const*>(p.query_by_diff) + row0 * p.by_diff_ld + column, p.by_diff_ld);
  } else {  // no tables (head sizes below 64): each row's slot looked up
    for (int idx = threadIdx.x; idx < kRows * 8; idx += kThreads) {
      int const r = idx / 8, c = idx % 8;
      bool const valid = r < BM + BN - 1 && c * 8 < cta.d;
      std::int64_t const slot = cta.slot_of_diff(w.diff_min + min(r, BM + BN - 2));
      if (cta.c2p)
        mma::cp_async_16(cta.key_window + mma::swizzle(r, c),
                         valid ? cta.pos_key + slot * p.pos_key_ld + c * 8 : cta.pos_key, valid);
      if (cta.p2c)
        mma::cp_async_16(cta.query_window + mma::swizzle(r, c),
                         valid ? cta.pos_query + slot * p.pos_query_ld + c * 8 : cta.pos_query, valid);
    }
  }
  mma::cp_async_commit();
}

// Kr / Qr rows of window chunk [c0, c0 + W) into shared memory, zero rows up to the next n16 step.
template <class Tr, bool kDiffWindows>
__device__ inline void load_window(MmaCta<Tr, kDiffWindows> const& cta, SlotWindow const& w, int c0) {
  constexpr int kThreads = Tr::kThreads;
  auto const& p = cta.p;
  int const count = min(Tr::kWindow, w.slots - c0);
  int const rows_loaded = (count + Tr::kWindowStep - 1) / Tr::kWindowStep * Tr::kWindowStep;
  std::int64_t const slot0 = w.first + c0;
  if (cta.c2p)
    mma::load_tile_async<kThreads>(cta.key_window, cta.pos_key + slot0 * p.pos_key_ld, p.pos_key_ld, rows_loaded, count,
                                   cta.d);
  if (cta.p2c)
    mma::load_tile_async<kThreads>(cta.query_window, cta.pos_query + slot0 * p.pos_query_ld, p.pos_query_ld,
                                   rows_loaded, count, cta.d);
  mma::cp_async_commit();
}

// Requests window w into the window buffers: a by-diff window, or a general window's first chunk and its
// diff -> slot table (into table buffer `table`); edge windows need neither.
template <class Tr, bool kDiffWindows>
__device__ inline void prepare(MmaCta<Tr, kDiffWindows> const& cta, SlotWindow const& w, int table) {
  constexpr int BM = Tr::kBlockM, BN = Tr::kBlockN;
  if (w.edge != WindowEdge::kNone) return;
  if (w.by_diff) {
    load_window_by_diff(cta, w);
    return;
  }
  load_window(cta, w, 0);
  if (w.narrow && w.slots > 1)
    for (int idx = threadIdx.x; idx < w.range; idx += Tr::kThreads)
      cta.slot_s[table * (BM + BN) + idx] = cta.slot_of_diff(w.diff_min + idx) - w.first;
}

}  // namespace flashdeberta::cuda_kernels::flash_mma

// The tensor-core flash kernel's view of its CTA (flash_mma_kernel.cuh): the sequence, head and query rows
// it owns, the position terms the call has, where its operands live in global and shared memory, the query
// positions of its rows, and the edge slots (the relative rows of the saturated differences) it may meet.
// Every stage of the kernel reads these; none changes them.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "flashdeberta/cuda/attention/attention_params.cuh"
#include "flashdeberta/cuda/kernels/element.cuh"

namespace flashdeberta::cuda_kernels::flash_mma {

// Where a CTA is: its sequence, head and query rows, where the kernel's shared memory holds what, the
// thread's place in the mma fragments, and the call's head size and saturation. Values the stages read
// lazily (leading dimensions, the by-diff layout) stay in `p`, read where they are used.
template <class Tr>
struct MmaCtaPlace {
  using T = typename Tr::Element;

  AttentionParams const& p;
  // Shared memory (FlashTraits<T, 64, true>): double-buffered K / V tiles, the Kr / Qr windows (the key
  // window holds the query tile until the Q fragments are in registers), the fp16 term tiles, the key
  // positions and the diff -> slot tables (both double-buffered).
  T* k_s;
  T* v_s;
  T* key_window;
  T* query_window;
  T* q_s;
  __half* c2p_s;
  __half* p2c_s;
  int* kpos_s;
  int* slot_s;
  int h;                 // head
  int i0;                // first query row of the CTA, within the sequence
  int first;             // the sequence's first token
  int length;            // the sequence's length
  int rows;              // valid query rows, up to BM
  int warp, lane, g, t;  // warp w owns rows [16w, 16w + 16); g = lane / 4, t = lane % 4 (mma fragments)
  int d;                 // head size, up to 64
  int s;                 // saturation: every |p_i - p_j| >= s has the slot of +-s

  __device__ __forceinline__ MmaCtaPlace(AttentionParams const& params, unsigned char* smem, int head, int block_row,
                                         int sequence_first, int sequence_length)
      : p(params),
        k_s(reinterpret_cast<T*>(smem + Tr::kKOffset)),
        v_s(reinterpret_cast<T*>(smem + Tr::kVOffset)),
        key_window(reinterpret_cast<T*>(smem + Tr::kKeyWindowOffset)),
        query_window(reinterpret_cast<T*>(smem + Tr::kQueryWindowOffset)),
        q_s(key_window),
        c2p_s(reinterpret_cast<__half*>(smem + Tr::kC2pOffset)),
        p2c_s(reinterpret_cast<__half*>(smem + Tr::kP2cOffset)),
        kpos_s(reinterpret_cast<int*>(smem + Tr::kKeyPosOffset)),
        slot_s(reinterpret_cast<int*>(smem + Tr::kSlotOffset)),
        h(head),
        i0(block_row),
        first(sequence_first),
        length(sequence_length),
        rows(min(Tr::kBlockM, length - i0)),
        warp(threadIdx.x / 32),
        lane(threadIdx.x % 32),
        g(lane / 4),
        t(lane % 4),
        d(p.head_size),
        s(p.saturation) {}
};

// Which position terms the call has, and the layout of its positions and relative tables. kDiffWindows:
// contiguous positions, both position terms and by-diff tables (the DeBERTa-v2/v3 case), known at compile
// time so that the mainloop carries no run-time flag tests and no general-window path. Its flags are
// constants (static, not members set to true) so that the branches on them fold where they are written.
template <class Tr, bool kDiffWindows>
struct MmaCtaTerms : MmaCtaPlace<Tr> {
  bool c2p, p2c, relative;
  bool contiguous;      // positions[t] - positions[first] == t - first: token offsets stand for positions
  bool by_diff_tables;  // Kr / Qr by difference (by_diff_tables.cuh), else each row's slot looked up

  template <class... Args>
  __device__ __forceinline__ explicit MmaCtaTerms(AttentionParams const& params, Args... args)
      : MmaCtaPlace<Tr>(params, args...),
        c2p(kDiffWindows || params.c2p),
        p2c(kDiffWindows || params.p2c),
        relative(c2p || p2c),
        contiguous(kDiffWindows || params.contiguous),
        by_diff_tables(kDiffWindows || params.by_diff_ld != 0) {}
};

template <class Tr>
struct MmaCtaTerms<Tr, true> : MmaCtaPlace<Tr> {
  static constexpr bool c2p = true, p2c = true, relative = true, contiguous = true, by_diff_tables = true;
  using MmaCtaPlace<Tr>::MmaCtaPlace;
};

// The CTA's view of the call, which every stage reads and none changes: the above, and its operands in
// global memory.
template <class Tr, bool kDiffWindows>
struct MmaCta : MmaCtaTerms<Tr, kDiffWindows> {
  using T = typename Tr::Element;
  using Base = MmaCtaTerms<Tr, kDiffWindows>;

  T const* q;  // head h of q, k, v
  T const* k;
  T const* v;
  T const* pos_key;               // head h of Kr (c2p), else null
  T const* pos_query;             // head h of Qr (p2c), else null
  std::int32_t const* positions;  // the sequence's positions
  std::int32_t const* relative_index;

  // (p, the kernel's dynamic shared memory, head, first query row, the sequence's first token and length)
  __device__ __forceinline__ MmaCta(AttentionParams const& params, unsigned char* smem, int head, int block_row,
                                    int sequence_first, int sequence_length)
      : Base(params, smem, head, block_row, sequence_first, sequence_length),
        q(static_cast<T const*>(params.q) + static_cast<std::int64_t>(head) * params.head_stride),
        k(static_cast<T const*>(params.k) + static_cast<std::int64_t>(head) * params.head_stride),
        v(static_cast<T const*>(params.v) + static_cast<std::int64_t>(head) * params.head_stride),
        pos_key(Base::c2p ? static_cast<T const*>(params.pos_key) + static_cast<std::int64_t>(head) * Base::d
                          : nullptr),
        pos_query(Base::p2c ? static_cast<T const*>(params.pos_query) + static_cast<std::int64_t>(head) * Base::d
                            : nullptr),
        positions(params.positions + sequence_first),
        relative_index(params.relative_index) {}

  // The relative row (slot) of the position difference p_i - p_j.
  __device__ inline int slot_of_diff(int diff) const {
    return __ldg(relative_index + min(max(diff, -this->s), this->s) + this->s);
  }
};

// The edge slots of a CTA that can meet a saturated tile: lo is the slot of every diff <= -s, hi of every
// diff >= s. Slots are monotone in the difference, so a tile is an edge tile when its smallest difference
// reaches hi_from (or its largest stays at or below lo_to).
struct EdgeSlots {
  bool reachable;  // the CTA can meet an edge tile; if not, lo and hi are 0 and nothing below is read
  int lo, hi;
  int hi_from, lo_to;
};

template <class Tr, bool kDiffWindows>
__device__ __forceinline__ EdgeSlots find_edge_slots(MmaCta<Tr, kDiffWindows> const& cta) {
  constexpr int BN = Tr::kBlockN;
  int const s = cta.s;
  // Edge tiles (every difference of the tile saturated) occur only in sequences longer than about the
  // saturation; a CTA that cannot reach one (the bounds below are at most 32 inside +-s) skips the edge
  // slots, probes and terms, chains of dependent global loads.
  int const last_tile = (cta.length - 1) / BN * BN;
  bool const edges = cta.relative && (!cta.contiguous || cta.i0 - min(BN, cta.length) + 1 >= s - 32 ||
                                      cta.i0 + cta.rows - 1 - last_tile <= -s + 32);
  int const edge_lo = edges ? cta.slot_of_diff(-s) : 0;
  int const edge_hi = edges ? cta.slot_of_diff(s) : 0;
  // The edge slot's plateau can start below s (log buckets clamp to the last row early): lane l probes
  // s - 1 - l and -s + 1 + l, and the run of hits from lane 0 moves the bounds in; a longer plateau keeps
  // 32 diffs of it on the window path.
  int edge_lo_to = -s, edge_hi_from = s;  // in this order, for the PTX of the pre-split kernel
  if (edges && cta.contiguous) {
    unsigned const hi = __ballot_sync(0xffffffffu, cta.slot_of_diff(s - 1 - cta.lane) == edge_hi);
    unsigned const lo = __ballot_sync(0xffffffffu, cta.slot_of_diff(-s + 1 + cta.lane) == edge_lo);
    edge_hi_from = s - (hi == 0xffffffffu ? 32 : __ffs(~hi) - 1);
    edge_lo_to = -s + (lo == 0xffffffffu ? 32 : __ffs(~lo) - 1);
  }
  return {edges, edge_lo, edge_hi, edge_hi_from, edge_lo_to};
}

// The positions of the CTA's query rows, with holes in the positions: qpos, this thread's rows g and g + 8 of
// its warp, and qmin / qmax over the CTA's rows. The caller's values are kept otherwise: positions enter only
// through differences, so with contiguous positions they are the token offsets within the sequence (no
// load: a global load here stalls the warp for an L2 round trip every tile, and with two warps per scheduler
// nothing hides it), qpos {0, 0}, qmin i0 and qmax i0 + rows - 1.
template <class Tr, bool kDiffWindows>
__device__ __forceinline__ void query_positions(MmaCta<Tr, kDiffWindows> const& cta, int (&qpos)[2], int& qmin,
                                                int& qmax) {
  if (!cta.contiguous) {
    int const i0 = cta.i0, rows = cta.rows, lane = cta.lane;
    qpos[0] = cta.positions[i0 + min(16 * cta.warp + cta.g, rows - 1)];
    qpos[1] = cta.positions[i0 + min(16 * cta.warp + cta.g + 8, rows - 1)];
    int const qa = cta.positions[i0 + min(lane, rows - 1)], qb = cta.positions[i0 + min(lane + 32, rows - 1)];
    qmin = warp_min_int(min(qa, qb));
    qmax = warp_max_int(max(qa, qb));
  }
}

}  // namespace flashdeberta::cuda_kernels::flash_mma

// AVX-512 band gradients of a flash backward tile for contiguous positions: dS summed by slot, the transpose of
// flash_position_band.hpp's gather and with the same slot windows.
//
// The c2p term of pair (i, j) reads c2p(i, delta(i - j)), so its gradient is the band G_c2p(i, s) = sum of dS(i, j)
// over the keys j with delta(i - j) = s (along a row); the p2c term's is G_p2c(j, s), the sum down column j. A
// scalar scatter costs a quarter of the backward at L = 512 (perf, one thread): sixteen read-modify-writes per row
// block, serialized through store forwarding wherever neighbouring pairs share a slot (every log bucket does).
// With unit steps (the slot changes by 0 or 1 per unit of i - j) the 16 pairs of a row block fall in runs of equal
// slot on consecutive slots, so a block is:
//   - a segmented inclusive scan across the lanes (four shifted adds, each masked to lanes of the same slot),
//   - a compress of the runs' last lanes (each run's total, in lane order),
//   - one masked load-add-store of those totals on their consecutive slots (reversed along a row, where slots
//     fall as j rises).
// Down a column the 16 x 16 block of dS is transposed in registers first (slots rise with i).
#pragma once

#include <cstdint>

#include "flashdeberta/eigen/ops/flash_position_band.hpp"

namespace flashdeberta::eigen_ops::detail {

// One tile's dS and the band rows it adds to.
struct BandGradientTile {
  float const* ds = nullptr;  // (rows, cols), row stride ld
  std::int64_t ld = 0;
  float* c2p = nullptr;  // (rows, W) G_c2p rows of the tile's queries, row stride c2p_ld; null without c2p
  float* p2c = nullptr;  // (cols, W) G_p2c rows of the tile's keys, row stride p2c_ld; null without p2c
  std::int64_t c2p_ld = 0, p2c_ld = 0;
  std::int64_t rows = 0, cols = 0;
};

#if defined(__AVX512F__)

// Lane c of the result is lane c - K of v; lanes below K are zero.
template <int K>
inline __m512i lanes_up(__m512i v) {
  return _mm512_alignr_epi32(v, _mm512_setzero_si512(), 16 - K);
}
template <int K>
inline __m512 lanes_up(__m512 v) {
  return _mm512_castsi512_ps(lanes_up<K>(_mm512_castps_si512(v)));
}

// Lane c of the result: the sum of x over lanes c' <= c with slot[c'] == slot[c]. Slots are monotone across the
// lanes, so equal slots form one run and the Hillis-Steele steps need only compare the two lanes they join.
inline __m512 segmented_scan(__m512 x, __m512i slot) {
  x = _mm512_mask_add_ps(x, _mm512_cmpeq_epi32_mask(slot, lanes_up<1>(slot)) & 0xFFFEu, x, lanes_up<1>(x));
  x = _mm512_mask_add_ps(x, _mm512_cmpeq_epi32_mask(slot, lanes_up<2>(slot)) & 0xFFFCu, x, lanes_up<2>(x));
  x = _mm512_mask_add_ps(x, _mm512_cmpeq_epi32_mask(slot, lanes_up<4>(slot)) & 0xFFF0u, x, lanes_up<4>(x));
  x = _mm512_mask_add_ps(x, _mm512_cmpeq_epi32_mask(slot, lanes_up<8>(slot)) & 0xFF00u, x, lanes_up<8>(x));
  return x;
}

// The run totals of one 16-lane block, in lane order, and their count. slot: the lanes' slots; valid: the
// lanes that hold pairs of the tile (a prefix); the lane after each is read from slot_at + 1.
struct RunTotals {
  __m512 totals;
  int count;
};
inline RunTotals run_totals(__m512 x, std::int32_t const* slot_at, __mmask16 valid) {
  __m512i const slot = _mm512_loadu_si512(slot_at);
  __m512i const next = _mm512_loadu_si512(slot_at + 1);
  x = segmented_scan(x, slot);
  auto const last = static_cast<__mmask16>(valid ^ (valid >> 1));  // the highest valid lane
  auto const ends = static_cast<__mmask16>((_mm512_cmpneq_epi32_mask(slot, next) | last) & valid);
  return {_mm512_maskz_compress_ps(ends, x), __builtin_popcount(ends)};
}

inline void add_to_slots(float* band, __m512 values, int count) {
  __mmask16 const lanes = first_lanes(count);
  _mm512_mask_storeu_ps(band, lanes, _mm512_add_ps(_mm512_maskz_loadu_ps(lanes, band), values));
}

// G_c2p rows of the tile's queries += dS by slot along each row; G_p2c rows of its keys += dS by slot down each
// column. `windows`: the tile's slot windows (slot_windows, as its scores used).
template <bool C2p, bool P2c>
inline void add_band_gradients(BandGradientTile const& t, SlotWindows const& windows) {
  __m512i const reverse = _mm512_set_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  if constexpr (C2p) {
    // Blocks outer, rows inner: the next block of a row may add to the slot its last block just stored, and a masked
    // load waits for an overlapping masked store to retire (no forwarding): measured a third of this function.
    for (std::int64_t c0 = 0; c0 < t.cols; c0 += 16) {
      __mmask16 const valid = first_lanes(t.cols - c0);
      for (std::int64_t r = 0; r < t.rows; ++r) {
        float const* ds = t.ds + r * t.ld;
        float* band = t.c2p + r * t.c2p_ld;
        std::int32_t const* slot = windows.by_col + (t.rows - r + c0 + 15);  // falling with the lanes
        RunTotals const runs = run_totals(_mm512_maskz_loadu_ps(valid, ds + c0), slot, valid);
        // Run k sits on slot slot[0] - k: reversed, the totals start at the lowest slot.
        __m512i const order = _mm512_sub_epi32(reverse, _mm512_set1_epi32(16 - runs.count));
        add_to_slots(band + slot[0] - (runs.count - 1), _mm512_permutexvar_ps(order, runs.totals), runs.count);
      }
    }
  }
  if constexpr (P2c) {
    for (std::int64_t r0 = 0; r0 < t.rows; r0 += 16) {
      __mmask16 const rows_valid = first_lanes(t.rows - r0);
      for (std::int64_t c0 = 0; c0 < t.cols; c0 += 16) {
        __mmask16 const cols_valid = first_lanes(t.cols - c0);
        __m512 column[16];  // after the transpose: column[c] lane r = dS(r0 + r, c0 + c)
        for (std::int64_t r = 0; r < 16; ++r)
          column[r] =
              r0 + r < t.rows ? _mm512_maskz_loadu_ps(cols_valid, t.ds + (r0 + r) * t.ld + c0) : _mm512_setzero_ps();
        transpose_16x16(column);
        for (std::int64_t c = 0; c < 16 && c0 + c < t.cols; ++c) {
          std::int32_t const* slot = windows.by_row + (r0 - (c0 + c) + t.cols + 15);  // rising with the lanes
          RunTotals const runs = run_totals(column[c], slot, rows_valid);
          add_to_slots(t.p2c + (c0 + c) * t.p2c_ld + slot[0], runs.totals, runs.count);
        }
      }
    }
  }
}

#endif  // __AVX512F__

}  // namespace flashdeberta::eigen_ops::detail

// AVX-512 position terms of a flash score tile for contiguous positions, in 16 x 16 blocks, with no gather.
//
// Score (i, j) gets c2p(i, delta(i - j)) + p2c(j, delta(i - j)). Gathers of those two terms were ~16% of the
// flash time at L = 2048 (perf: a 16-lane vgatherdps is 16 loads, slower still under the GDS microcode
// mitigation). When the slot table rises by 0 or 1 per unit of i - j (HF's log buckets and the v1 clamp both
// do; `has_unit_steps` checks it once per call), 16 consecutive pairs along a row or down a column need at
// most 16 consecutive slots, so each read is one contiguous 16-float load plus an in-register permute:
//   - c2p along row i: slots fall as j rises -> permute of c2p_row[base .. base + 16);
//   - p2c down column j: slots rise as i rises -> permute of p2c_row_j[base .. base + 16), giving 16 column
//     vectors per block that one 16 x 16 register transpose turns into row vectors.
// Blocks whose pairs are all at |i - j| >= saturation use the edge slots: a per-row constant plus the
// contiguous p2c column of that slot (no permutes at all).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace flashdeberta::eigen_ops::detail {

// True when relative_index[x + 1] - relative_index[x] is 0 or 1 for every x: what the block kernel needs.
inline bool has_unit_steps(std::int32_t const* relative_index, std::int64_t saturation) {
  for (std::int64_t x = 0; x < 2 * saturation; ++x) {
    std::int32_t const step = relative_index[x + 1] - relative_index[x];
    if (step != 0 && step != 1) return false;
  }
  return true;
}

// One tile's inputs for the block kernel. Tables are already divided by scale.
struct BandTile {
  float* scores = nullptr;  // (rows, cols), row stride ld
  std::int64_t ld = 0;
  float const* c2p = nullptr;       // (rows, slots) of this query block, row stride table_ld; null without c2p
  float const* p2c = nullptr;       // (cols, slots) rows of keys j0.., row stride table_ld; null without p2c
  float const* p2c_far = nullptr;   // (cols) p2c column of the slot at i - j >= saturation, keys j0..
  float const* p2c_near = nullptr;  // (cols) p2c column of the slot at j - i >= saturation
  std::int64_t slots = 0;           // 2k, at least 16
  std::int64_t table_ld = 0;        // at least slots
  std::int32_t slot_far = 0, slot_near = 0;
  std::int64_t i0 = 0, rows = 0, j0 = 0, cols = 0;  // first query and key, and the tile's extent
};

#if defined(__AVX512F__)

// In-register transpose: r[a] lane b -> r[b] lane a.
inline void transpose_16x16(__m512 (&r)[16]) {
  __m512 t[16];
  for (int g = 0; g < 16; g += 2) {
    t[g] = _mm512_unpacklo_ps(r[g], r[g + 1]);
    t[g + 1] = _mm512_unpackhi_ps(r[g], r[g + 1]);
  }
  for (int g = 0; g < 16; g += 4) {  // u[g + m], 128-bit lane k: column 4k + m of rows g..g+3
    r[g] = _mm512_shuffle_ps(t[g], t[g + 2], 0x44);
    r[g + 1] = _mm512_shuffle_ps(t[g], t[g + 2], 0xEE);
    r[g + 2] = _mm512_shuffle_ps(t[g + 1], t[g + 3], 0x44);
    r[g + 3] = _mm512_shuffle_ps(t[g + 1], t[g + 3], 0xEE);
  }
  for (int m = 0; m < 4; ++m) {
    __m512 const lo01 = _mm512_shuffle_f32x4(r[m], r[4 + m], 0x88);
    __m512 const hi01 = _mm512_shuffle_f32x4(r[m], r[4 + m], 0xDD);
    __m512 const lo23 = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], 0x88);
    __m512 const hi23 = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], 0xDD);
    t[m] = _mm512_shuffle_f32x4(lo01, lo23, 0x88);
    t[8 + m] = _mm512_shuffle_f32x4(lo01, lo23, 0xDD);
    t[4 + m] = _mm512_shuffle_f32x4(hi01, hi23, 0x88);
    t[12 + m] = _mm512_shuffle_f32x4(hi01, hi23, 0xDD);
  }
  for (int x = 0; x < 16; ++x) r[x] = t[x];
}

inline __mmask16 first_lanes(std::int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1u);
}

// values[base + idx[x]] for 16 slots idx known to lie in [base, base + 16) once base is pulled back to keep
// the load inside the row (slots >= 16).
inline __m512 permute_slots(float const* row, std::int64_t slots, __m512i idx, std::int32_t lowest) {
  std::int32_t const base = std::min(lowest, static_cast<std::int32_t>(slots - 16));
  return _mm512_permutexvar_ps(_mm512_sub_epi32(idx, _mm512_set1_epi32(base)), _mm512_loadu_ps(row + base));
}

// The slot of every distance a tile's 16-lane blocks read, as two windows of consecutive distances:
//   by_col[v]: slot at i - j = i0 - j0 + rows + 15 - v (falls with v: along a row, row r's lanes c0.. start at
//              v = rows - r + c0 + 15);
//   by_row[u]: slot at i - j = i0 - j0 - cols - 15 + u (rises with u: down a column, column c's lanes r0.. start at
//              u = r0 - c + cols + 15).
// Each has rows + cols + 32 entries: a block's 16 slots and the one after them stay inside.
struct SlotWindows {
  std::int32_t const* by_col = nullptr;
  std::int32_t const* by_row = nullptr;
};

inline SlotWindows slot_windows(BandTile const& t, std::int32_t const* relative_index, std::int64_t saturation,
                                std::vector<std::int32_t>& window) {
  std::int64_t const s = saturation;
  std::int64_t const n = t.rows + t.cols + 32;
  window.resize(static_cast<std::size_t>(2 * n));
  std::int32_t* by_col = window.data();
  std::int32_t* by_row = window.data() + n;
  std::int64_t const top = t.i0 - t.j0 + t.rows + 15;
  std::int64_t const bottom = t.i0 - t.j0 - t.cols - 15;
  for (std::int64_t v = 0; v < n; ++v) {
    by_col[v] = relative_index[std::clamp(top - v, -s, s) + s];
    by_row[v] = relative_index[std::clamp(bottom + v, -s, s) + s];
  }
  return {by_col, by_row};
}

// Adds both position terms to the tile; `windows` from slot_windows.
template <bool C2p, bool P2c>
inline void add_position_blocks(BandTile const& t, std::int64_t saturation, SlotWindows const& windows) {
  std::int64_t const s = saturation;
  std::int32_t const* by_col = windows.by_col;
  std::int32_t const* by_row = windows.by_row;
  for (std::int64_t r0 = 0; r0 < t.rows; r0 += 16) {
    std::int64_t const nr = std::min<std::int64_t>(16, t.rows - r0);
    for (std::int64_t c0 = 0; c0 < t.cols; c0 += 16) {
      __mmask16 const cmask = first_lanes(t.cols - c0);
      std::int64_t const diff = (t.i0 + r0) - (t.j0 + c0);  // i - j at the block's corner (0, 0)
      bool const far = diff - 15 >= s, near = diff + 15 <= -s;
      if (far || near) {  // every pair on one edge slot
        std::int32_t const slot = far ? t.slot_far : t.slot_near;
        __m512 column = _mm512_setzero_ps();
        if constexpr (P2c) column = _mm512_maskz_loadu_ps(cmask, (far ? t.p2c_far : t.p2c_near) + c0);
        for (std::int64_t r = r0; r < r0 + nr; ++r) {
          float* row = t.scores + r * t.ld + c0;
          __m512 add = column;
          if constexpr (C2p) add = _mm512_add_ps(add, _mm512_set1_ps(t.c2p[r * t.table_ld + slot]));
          _mm512_mask_storeu_ps(row, cmask, _mm512_add_ps(_mm512_maskz_loadu_ps(cmask, row), add));
        }
        continue;
      }
      __m512 p2c_rows[16];
      if constexpr (P2c) {  // column c: rows r0.. at by_row[r0 - c + cols + 15 ..]
        for (std::int64_t c = 0; c < 16; ++c) {
          if (c0 + c >= t.cols) {
            p2c_rows[c] = _mm512_setzero_ps();
            continue;
          }
          std::int32_t const* slot = by_row + (r0 - (c0 + c) + t.cols + 15);
          p2c_rows[c] = permute_slots(t.p2c + (c0 + c) * t.table_ld, t.slots, _mm512_loadu_si512(slot), slot[0]);
        }
        transpose_16x16(p2c_rows);
      }
      for (std::int64_t r = 0; r < nr; ++r) {
        float* row = t.scores + (r0 + r) * t.ld + c0;
        __m512 x = _mm512_maskz_loadu_ps(cmask, row);
        if constexpr (C2p) {  // row r0 + r: columns c0.. at by_col[rows - (r0 + r) + c0 + 15 ..]
          std::int32_t const* slot = by_col + (t.rows - (r0 + r) + c0 + 15);
          x = _mm512_add_ps(x,
                            permute_slots(t.c2p + (r0 + r) * t.table_ld, t.slots, _mm512_loadu_si512(slot), slot[15]));
        }
        if constexpr (P2c) x = _mm512_add_ps(x, p2c_rows[r]);
        _mm512_mask_storeu_ps(row, cmask, x);
      }
    }
  }
}

#endif  // __AVX512F__

}  // namespace flashdeberta::eigen_ops::detail

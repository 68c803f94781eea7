// The rows of the relative tables one attention call can reach.
//
// The projected tables Kr / Qr have 2k rows (512 for v2/v3) whatever the input, and the flash kernel forms
// c2p = q . Kr^T and p2c = k . Qr^T over all of them. A pair (i, j) only reads the slot of its distance
// p_i - p_j, and within a batch whose widest sequence spans D positions those distances lie in [-D, D]: slots
// delta(-D) .. delta(D), a contiguous range since delta is monotone. At L = 16 that is 31 of the 512 rows, and
// the full tables were 8x the work of q.k^T and p.v together. The call then runs on that window: the tables'
// rows offset to its first slot, the slot index shifted to match, and the saturation lowered to D (no pair is
// farther apart, so clamping at D changes no slot). Each c2p / p2c value is the same dot product as before.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "flashdeberta/policy/op_args.hpp"

namespace flashdeberta::eigen_ops {

// Largest |p_i - p_j| inside any one sequence of the batch.
inline std::int64_t widest_position_span(SequenceLayout const& s) {
  std::int64_t span = 0;
  for (std::int64_t b = 0; b < s.batch; ++b) {
    std::int64_t const first = s.cu_seqlens[b];
    std::int64_t const last = s.cu_seqlens[b + 1];
    if (last <= first) continue;
    if (s.contiguous_positions) {
      span = std::max(span, last - first - 1);
      continue;
    }
    auto const [lo, hi] = std::minmax_element(s.positions + first, s.positions + last);
    span = std::max<std::int64_t>(span, static_cast<std::int64_t>(*hi) - *lo);
  }
  return span;
}

// The table rows [first, first + count) that pairs at distances lowest .. highest read: from the slot of the one to
// that of the other (slots are monotone in the distance; distances past the saturation clamp to it).
struct TableRows {
  std::int64_t first = 0, count = 0;
};
inline TableRows reached_table_rows(AttentionArgs const& a, std::int64_t lowest, std::int64_t highest) {
  std::int64_t const s = a.saturation;
  std::int64_t const first = a.relative_index[std::clamp(lowest, -s, s) + s];
  return {first, a.relative_index[std::clamp(highest, -s, s) + s] - first + 1};
}

// `a` narrowed to the table rows its batch reaches, as a whole number of `multiple` rows (the flash kernel
// packs tables in panels of 64); `index` holds the shifted slot index the result points to. `a` itself when
// there are no position terms or the window would not be smaller.
inline AttentionArgs narrow_relative_window(AttentionArgs const& a, std::int64_t multiple,
                                            std::vector<std::int32_t>& index) {
  bool const c2p = !a.pos_key.empty();
  bool const p2c = !a.pos_query.empty();
  if ((!c2p && !p2c) || a.relative_index == nullptr || a.saturation < 1) return a;
  std::int64_t const rows = c2p ? a.pos_key.rows : a.pos_query.rows;
  std::int64_t const s = a.saturation;
  std::int64_t const reach = std::clamp<std::int64_t>(widest_position_span(a.sequences), 1, s);
  // delta is monotone in the distance: the window runs from the slot of -reach to that of +reach.
  TableRows const reached = reached_table_rows(a, -reach, reach);
  std::int64_t const width = (reached.count - 1 + multiple) / multiple * multiple;
  if (width >= rows || reached.count < 1) return a;
  std::int64_t const begin = std::min(reached.first, rows - width);
  index.resize(static_cast<std::size_t>(2 * reach + 1));
  for (std::int64_t x = 0; x <= 2 * reach; ++x)
    index[static_cast<std::size_t>(x)] = static_cast<std::int32_t>(a.relative_index[x + s - reach] - begin);
  AttentionArgs narrowed = a;
  if (c2p) narrowed.pos_key = a.pos_key.row_range(begin, width);
  if (p2c) narrowed.pos_query = a.pos_query.row_range(begin, width);
  narrowed.relative_index = index.data();
  narrowed.saturation = reach;
  return narrowed;
}

}  // namespace flashdeberta::eigen_ops

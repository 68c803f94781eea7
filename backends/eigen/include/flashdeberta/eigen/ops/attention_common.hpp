// Per-sequence, per-head views shared by the eager and flash host attention.
#pragma once

#include "flashdeberta/eigen/ops/eigen_maps.hpp"
#include "flashdeberta/policy/op_args.hpp"

namespace flashdeberta::eigen_ops {

struct HeadViews {
  ConstMatrixMap q;  // (L, d)
  ConstMatrixMap k;  // (L, d)
  ConstMatrixMap v;  // (L, d)
  MatrixMap out;     // (L, d)
};

inline HeadViews head_views(AttentionArgs const& a, std::int64_t first_token, std::int64_t length, std::int64_t head) {
  std::int64_t const d = a.head_size;
  std::int64_t const col = head * a.head_stride;
  return {cmap(a.q.as<float>() + first_token * a.q.ld + col, length, d, a.q.ld),
          cmap(a.k.as<float>() + first_token * a.k.ld + col, length, d, a.k.ld),
          cmap(a.v.as<float>() + first_token * a.v.ld + col, length, d, a.v.ld),
          map(a.out.as<float>() + first_token * a.out.ld + head * d, length, d, a.out.ld)};
}

// (2k, d) rows of the projected relative table belonging to one head.
inline ConstMatrixMap relative_head(MatrixRef const& table, std::int64_t head, std::int64_t d) {
  return cmap(table.as<float>() + head * d, table.rows, d, table.ld);
}

inline void check_attention_args(AttentionArgs const& a) {
  require_f32(a.q, "attention query");
  require_f32(a.k, "attention key");
  require_f32(a.v, "attention value");
  require_f32(a.out, "attention output");
  FLASHDEBERTA_REQUIRE(
      a.pos_key.empty() || a.pos_query.empty() || a.pos_key.rows == a.pos_query.rows,
      "relative key and query tables differ in rows: " << a.pos_key.rows << " vs " << a.pos_query.rows);
  FLASHDEBERTA_REQUIRE((a.pos_key.empty() && a.pos_query.empty()) || a.relative_index != nullptr,
                       "position terms need the relative slot table");
}

}  // namespace flashdeberta::eigen_ops

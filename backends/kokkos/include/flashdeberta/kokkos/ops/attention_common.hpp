// Pieces shared by the eager and flash Kokkos attention: argument checks, the per-token projection onto
// the relative table, the slot look-up, and the dropout mask of the probabilities (training).
#pragma once

#include "flashdeberta/kokkos/ops/common.hpp"
#include "flashdeberta/policy/op_args.hpp"
#include "flashdeberta/policy/training_op_args.hpp"

namespace flashdeberta::kokkos_ops {

// The natural log of the row sums the forwards write to AttentionArgs::lse (common.hpp has the other functions).
namespace math {
#if KOKKOS_VERSION >= 30700
using Kokkos::log;
#else
using Kokkos::Experimental::log;
#endif
}  // namespace math

// The dropout of the attention probabilities (AttentionArgs::dropout, training): the mask of pair (h, i, j) is a
// pure function of its counter, (h T + i) max_seqlen + (j - first_j) past the offset, so the forwards and the
// backward redraw it tile by tile.
struct ProbsDropout {
  float probability = 0.0f;
  float keep_scale = 1.0f;  // 1 / (1 - probability), on the kept probabilities
  std::uint64_t seed = 0;
  std::uint64_t offset = 0;
  std::int64_t tokens = 0;  // T
  std::int64_t stride = 0;  // max_seqlen: counters between consecutive query rows

  KOKKOS_INLINE_FUNCTION bool active() const { return probability > 0.0f; }

  // m / (1 - p) of head h's pair (packed query token, key `key` of its sequence): keep_scale or 0.
  KOKKOS_INLINE_FUNCTION float factor(std::int64_t h, std::int64_t token, std::int64_t key) const {
    auto const counter = offset + static_cast<std::uint64_t>((h * tokens + token) * stride + key);
    return dropout_uniform(seed, counter) >= probability ? keep_scale : 0.0f;
  }
};

// What an attention kernel reads, as plain device-copyable values.
struct AttentionProblem {
  Strided<float const> q;  // (T, *) head h at columns [h * head_stride, h * head_stride + d)
  Strided<float const> k;
  Strided<float const> v;
  Strided<float> out;  // (T, A) head h at columns h * d
  std::int64_t heads = 0;
  std::int64_t d = 0;
  std::int64_t head_stride = 0;
  std::int64_t span2 = 0;  // 2k: rows of the relative tables
  bool c2p = false;
  bool p2c = false;
  std::int32_t const* relative_index = nullptr;  // (2S + 1)
  std::int64_t saturation = 0;                   // S
  float scale = 1.0f;
  std::int32_t const* cu_seqlens = nullptr;  // (B + 1)
  std::int32_t const* positions = nullptr;   // (T)
  ProbsDropout drop;

  // The relative-table row of the pair (query at position pi, key at position pj).
  KOKKOS_INLINE_FUNCTION std::int32_t slot(std::int64_t pi, std::int64_t pj) const {
    return relative_index[clamp_index(pi - pj, -saturation, saturation) + saturation];
  }
};

inline AttentionProblem attention_problem(AttentionArgs const& a) {
  AttentionProblem p;
  p.q = cstrided(a.q, "attention query");
  p.k = cstrided(a.k, "attention key");
  p.v = cstrided(a.v, "attention value");
  p.out = strided(a.out, "attention output");
  p.heads = a.num_heads;
  p.d = a.head_size;
  p.head_stride = a.head_stride;
  p.c2p = !a.pos_key.empty();
  p.p2c = !a.pos_query.empty();
  FLASHDEBERTA_REQUIRE(a.dropout >= 0.0f && a.dropout < 1.0f,
                       "attention dropout (attention_probs_dropout_prob) must lie in [0, 1), not " << a.dropout);
  FLASHDEBERTA_REQUIRE(a.head_size > 0 && a.num_heads > 0,
                       "attention with " << a.num_heads << " heads of size " << a.head_size);
  FLASHDEBERTA_REQUIRE(
      !p.c2p || !p.p2c || a.pos_key.rows == a.pos_query.rows,
      "relative key and query tables differ in rows: " << a.pos_key.rows << " vs " << a.pos_query.rows);
  FLASHDEBERTA_REQUIRE((!p.c2p && !p.p2c) || a.relative_index != nullptr,
                       "position terms need the relative slot table");
  if (p.c2p) require_f32(a.pos_key, "relative key table");
  if (p.p2c) require_f32(a.pos_query, "relative query table");
  p.span2 = p.c2p ? a.pos_key.rows : (p.p2c ? a.pos_query.rows : 0);
  p.relative_index = a.relative_index;
  p.saturation = a.saturation;
  p.scale = a.scale;
  p.cu_seqlens = a.sequences.cu_seqlens;
  p.positions = a.sequences.positions;
  p.drop.probability = a.dropout;
  p.drop.keep_scale = 1.0f / (1.0f - a.dropout);
  p.drop.seed = a.dropout_seed;
  p.drop.offset = a.dropout_offset;
  p.drop.tokens = a.sequences.total_tokens;
  p.drop.stride = a.sequences.max_seqlen;
  return p;
}

// projected (T, heads, 2k): projected[t, h, r] = x_t(head h) . table_r(head h), the (L, 2k) products of
// every sequence at once. x is q (c2p) or k (p2c), table the projected relative keys or queries.
// Linear in T; the attention kernels read one row of it per (token, head).
template <class ExecSpace>
Kokkos::View<float*, typename ExecSpace::memory_space> project_relative(ExecSpace const& space,
                                                                        AttentionProblem const& p,
                                                                        Strided<float const> const& x,
                                                                        MatrixRef const& table_ref) {
  Strided<float const> const table = cstrided(table_ref, "relative table");
  std::int64_t const tokens = x.rows;
  std::int64_t const heads = p.heads;
  std::int64_t const d = p.d;
  std::int64_t const head_stride = p.head_stride;
  std::int64_t const span2 = table.rows;
  Kokkos::View<float*, typename ExecSpace::memory_space> projected(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, "flashdeberta::relative_projection"),
      static_cast<std::size_t>(tokens * heads * span2));
  float* result = projected.data();
  Kokkos::parallel_for(
      "flashdeberta::project_relative", Kokkos::RangePolicy<ExecSpace>(space, 0, tokens * heads * span2),
      KOKKOS_LAMBDA(std::int64_t idx) {
        std::int64_t const r = idx % span2;
        std::int64_t const h = (idx / span2) % heads;
        std::int64_t const t = idx / (span2 * heads);
        float const* xr = x.row(t) + h * head_stride;
        float const* tr = table.row(r) + h * d;
        float sum = 0.0f;
        for (std::int64_t e = 0; e < d; ++e) sum += xr[e] * tr[e];
        result[idx] = sum;
      });
  return projected;
}

}  // namespace flashdeberta::kokkos_ops

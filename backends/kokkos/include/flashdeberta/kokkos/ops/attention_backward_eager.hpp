// Eager Kokkos attention backward: per sequence, the (heads, L, L) probabilities recomputed in the eager forward's
// order of operations (attention_eager.hpp), then dS, and every gradient from the materialized P (times the
// dropout mask, with dropout) and dS, as HF's autograd differentiates its materialized scores. The reference path
// of the backward; it favours clarity over speed. attention_backward_common.hpp gives the terms.
//
// Two kernels per sequence: one team per (head, query row) forms P's and dS's row, the row's c2p band and dQ; one
// team per (head, key) sums down its column of P and dS for dV and dK, and the key's p2c band. Each output row has
// one team, and every sum runs in a fixed order (a band row is gathered by one thread), so the result does not
// depend on the team size.
#pragma once

#include "flashdeberta/kokkos/ops/attention_backward_common.hpp"

namespace flashdeberta::kokkos_ops {

template <class ExecSpace>
void attention_backward_eager(ExecSpace const& space, AttentionBackwardArgs const& g) {
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = typename Policy::member_type;
  using DeviceFloats = Kokkos::View<float*, typename ExecSpace::memory_space>;
  check_attention_backward_args(g);
  std::int64_t const max_len = g.forward.sequences.max_seqlen;
  if (g.forward.sequences.batch == 0 || max_len == 0) return;
  BackwardBuffers<ExecSpace> buffers;
  BackwardProblem const t = backward_problem(space, g, buffers);
  AttentionProblem const& p = t.p;
  float const inv_scale = 1.0f / p.scale;
  // (heads, L, L) P and dS of one sequence, reused by every sequence of the batch.
  auto const square = static_cast<std::size_t>(p.heads * max_len * max_len);
  DeviceFloats probabilities_buffer(Kokkos::view_alloc(Kokkos::WithoutInitializing, "flashdeberta::eager_backward_p"),
                                    square);
  DeviceFloats ds_buffer(Kokkos::view_alloc(Kokkos::WithoutInitializing, "flashdeberta::eager_backward_ds"), square);
  float* probabilities = probabilities_buffer.data();
  float* ds_all = ds_buffer.data();

  // As the forward: lengths stay in device memory, each launch covers the longest sequence.
  for (std::int64_t b = 0; b < g.forward.sequences.batch; ++b) {
    Kokkos::parallel_for(
        "flashdeberta::attention_backward_eager_rows", Policy(space, static_cast<int>(p.heads * max_len), Kokkos::AUTO),
        KOKKOS_LAMBDA(Member const& team) {
          std::int64_t const h = team.league_rank() / max_len;
          std::int64_t const i = team.league_rank() % max_len;
          std::int64_t const first = p.cu_seqlens[b];
          std::int64_t const length = p.cu_seqlens[b + 1] - first;
          if (i >= length) return;
          float* row = probabilities + (h * max_len + i) * max_len;  // (L) scores, then P of query i
          float* ds = ds_all + (h * max_len + i) * max_len;          // (L) dS / scale
          float const* q_i = p.q.row(first + i) + h * p.head_stride;
          std::int64_t const pos_i = p.positions[first + i];
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, length), [&](std::int64_t j) {
            float const* k_j = p.k.row(first + j) + h * p.head_stride;
            float s = 0.0f;
            for (std::int64_t e = 0; e < p.d; ++e) s += q_i[e] * (k_j[e] / p.scale);
            if (p.c2p || p.p2c) {
              std::int32_t const slot = p.slot(pos_i, p.positions[first + j]);
              float rel = 0.0f;
              if (p.c2p) rel = t.c2p_all[t.band_row(first + i, h) + slot] / p.scale;
              if (p.p2c) rel += t.p2c_all[t.band_row(first + j, h) + slot] / p.scale;
              s += rel;
            }
            row[j] = s;
          });
          team.team_barrier();
          float row_max = 0.0f;
          Kokkos::parallel_reduce(
              Kokkos::TeamThreadRange(team, length), [&](std::int64_t j, float& m) { m = max_of(m, row[j]); },
              Kokkos::Max<float>(row_max));
          float row_sum = 0.0f;
          Kokkos::parallel_reduce(
              Kokkos::TeamThreadRange(team, length),
              [&](std::int64_t j, float& partial) {
                float const e = math::exp(row[j] - row_max);
                row[j] = e;
                partial += e;
              },
              row_sum);
          team.team_barrier();
          float const row_dot = t.row_dot(first + i, h);  // every thread alike: no broadcast
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, length), [&](std::int64_t j) {
            float const prob = row[j] / row_sum;
            float const m = p.drop.active() ? p.drop.factor(h, first + i, j) : 1.0f;
            float const* v_j = p.v.row(first + j) + h * p.head_stride;
            float dp = 0.0f;
            for (std::int64_t e = 0; e < p.d; ++e) dp += t.dout(first + i, h * p.d + e) * v_j[e];
            ds[j] = prob * (dp * m - row_dot) * inv_scale;
            row[j] = prob * m;  // the dropped probabilities, which dV reads
          });
          team.team_barrier();
          if (p.c2p) {  // the row's band: dS gathered by slot, in key order by one thread
            Kokkos::single(Kokkos::PerTeam(team), [&]() {
              float* band = t.band_c2p + t.band_row(first + i, h);
              for (std::int64_t r = 0; r < p.span2; ++r) band[r] = 0.0f;
              for (std::int64_t j = 0; j < length; ++j) band[p.slot(pos_i, p.positions[first + j])] += ds[j];
            });
            team.team_barrier();
          }
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, p.d), [&](std::int64_t e) {
            float acc = 0.0f;
            for (std::int64_t j = 0; j < length; ++j) acc += ds[j] * p.k(first + j, h * p.head_stride + e);
            if (p.c2p) acc += t.band_product(t.band_c2p, t.pos_key, first + i, h, e);
            t.dq(first + i, h * p.head_stride + e) = acc;
          });
        });
    Kokkos::parallel_for(
        "flashdeberta::attention_backward_eager_columns",
        Policy(space, static_cast<int>(p.heads * max_len), Kokkos::AUTO), KOKKOS_LAMBDA(Member const& team) {
          std::int64_t const h = team.league_rank() / max_len;
          std::int64_t const j = team.league_rank() % max_len;
          std::int64_t const first = p.cu_seqlens[b];
          std::int64_t const length = p.cu_seqlens[b + 1] - first;
          if (j >= length) return;
          float const* column_p = probabilities + h * max_len * max_len + j;  // P[i, j] at i * max_len
          float const* column_ds = ds_all + h * max_len * max_len + j;
          if (p.p2c) {  // the key's band: dS gathered by slot down its column, in query order by one thread
            Kokkos::single(Kokkos::PerTeam(team), [&]() {
              float* band = t.band_p2c + t.band_row(first + j, h);
              std::int64_t const pos_j = p.positions[first + j];
              for (std::int64_t r = 0; r < p.span2; ++r) band[r] = 0.0f;
              for (std::int64_t i = 0; i < length; ++i)
                band[p.slot(p.positions[first + i], pos_j)] += column_ds[i * max_len];
            });
            team.team_barrier();
          }
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, p.d), [&](std::int64_t e) {
            float dv = 0.0f;
            float dk = 0.0f;
            for (std::int64_t i = 0; i < length; ++i) {
              dv += column_p[i * max_len] * t.dout(first + i, h * p.d + e);
              dk += column_ds[i * max_len] * p.q(first + i, h * p.head_stride + e);
            }
            if (p.p2c) dk += t.band_product(t.band_p2c, t.pos_query, first + j, h, e);
            t.dv(first + j, h * p.head_stride + e) = dv;
            t.dk(first + j, h * p.head_stride + e) = dk;
          });
        });
  }
  add_table_gradients(space, t, g);
}

}  // namespace flashdeberta::kokkos_ops

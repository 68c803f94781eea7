// Eager Kokkos attention: materializes the (L, L) scores of every head of one sequence, in HF's order of
// operations (deberta-spec 4.2): content = q . (k / scale)^T; c2p and p2c formed as full (L, 2k)
// products, gathered through the slot table and divided by scale; softmax; dropout (training,
// AttentionArgs::dropout, after lse: that stays the undropped one); probabilities . v.
// The reference path the flash kernel is checked against; it favours clarity over speed.
#pragma once

#include "flashdeberta/kokkos/ops/attention_common.hpp"

namespace flashdeberta::kokkos_ops {

template <class ExecSpace>
void attention_eager(ExecSpace const& space, AttentionArgs const& args) {
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = typename Policy::member_type;
  using DeviceFloats = Kokkos::View<float*, typename ExecSpace::memory_space>;
  AttentionProblem const p = attention_problem(args);
  std::int64_t const max_len = args.sequences.max_seqlen;
  if (args.sequences.batch == 0 || max_len == 0) return;
  DeviceFloats c2p_all;  // (T, heads, 2k) = q . Kr^T
  DeviceFloats p2c_all;  // (T, heads, 2k) = k . Qr^T
  if (p.c2p) c2p_all = project_relative(space, p, p.q, args.pos_key);
  if (p.p2c) p2c_all = project_relative(space, p, p.k, args.pos_query);
  float const* c2p_rel = c2p_all.data();
  float const* p2c_rel = p2c_all.data();
  // (heads, L, L) scores of one sequence, reused by every sequence of the batch.
  DeviceFloats scores_buffer(Kokkos::view_alloc(Kokkos::WithoutInitializing, "flashdeberta::eager_scores"),
                             static_cast<std::size_t>(p.heads * max_len * max_len));
  float* scores = scores_buffer.data();
  float* const lse = args.lse;  // (heads, T) or null
  std::int64_t const tokens = args.sequences.total_tokens;

  // Sequence lengths stay in device memory: each launch covers the longest sequence and rows past the
  // end of the current one return at once, so no host synchronization is needed.
  for (std::int64_t b = 0; b < args.sequences.batch; ++b) {
    Kokkos::parallel_for(
        "flashdeberta::attention_eager", Policy(space, static_cast<int>(p.heads * max_len), Kokkos::AUTO),
        KOKKOS_LAMBDA(Member const& team) {
          std::int64_t const h = team.league_rank() / max_len;
          std::int64_t const i = team.league_rank() % max_len;
          std::int64_t const first = p.cu_seqlens[b];
          std::int64_t const length = p.cu_seqlens[b + 1] - first;
          if (i >= length) return;
          std::int64_t const span2 = p.span2;
          float* row = scores + (h * max_len + i) * max_len;  // (L) scores of query i
          float const* q_i = p.q.row(first + i) + h * p.head_stride;
          std::int64_t const pos_i = p.positions[first + i];
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, length), [&](std::int64_t j) {
            float const* k_j = p.k.row(first + j) + h * p.head_stride;
            float s = 0.0f;
            for (std::int64_t e = 0; e < p.d; ++e) s += q_i[e] * (k_j[e] / p.scale);
            if (p.c2p || p.p2c) {
              std::int32_t const slot = p.slot(pos_i, p.positions[first + j]);
              float rel = 0.0f;
              if (p.c2p) rel = c2p_rel[((first + i) * p.heads + h) * span2 + slot] / p.scale;
              if (p.p2c) rel += p2c_rel[((first + j) * p.heads + h) * span2 + slot] / p.scale;
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
          if (lse != nullptr) {
            Kokkos::single(Kokkos::PerTeam(team),
                           [&]() { lse[h * tokens + first + i] = row_max + math::log(row_sum); });
          }
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, length), [&](std::int64_t j) {
            row[j] /= row_sum;
            if (p.drop.active()) row[j] *= p.drop.factor(h, first + i, j);
          });
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, p.d), [&](std::int64_t e) {
            float acc = 0.0f;
            for (std::int64_t j = 0; j < length; ++j) acc += row[j] * p.v(first + j, h * p.head_stride + e);
            p.out(first + i, h * p.d + e) = acc;
          });
        });
  }
}

}  // namespace flashdeberta::kokkos_ops

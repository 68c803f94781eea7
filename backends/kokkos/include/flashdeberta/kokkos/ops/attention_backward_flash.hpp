// Flash Kokkos attention backward: no (L, L) buffer, no atomics. attention_backward_common.hpp gives the terms.
//
// The probabilities are recomputed tile by tile, P = exp(S - lse), S formed exactly as attention_flash.hpp forms
// it (so that the forward's lse fits it), from the forward's lse or, when none is given, from a first sweep of the
// row pass. Two passes, split so that each gradient has one writer:
//   - rows: one team per (sequence, head, kOwned query rows) sweeps all keys kSweep at a time. It writes the rows'
//     lse (when recomputed) and D, the rows' c2p band (each band row gathered by one thread) and dQ;
//   - columns: one team per (sequence, head, kOwned keys) sweeps all queries, reading lse and D of the row pass:
//     dK, dV and the keys' p2c band.
// The tables' gradients are then add_table_gradients' GEMMs over the bands. Every sum runs in a fixed order and
// the tiles' shapes are constants, so the result does not depend on the team size or the schedule. With dropout on
// the probabilities, every tile redraws the forward's mask M (ProbsDropout) for dP = (dO V^T) * M and P * M.
#pragma once

#include "flashdeberta/kokkos/ops/attention_backward_common.hpp"

namespace flashdeberta::kokkos_ops {

struct FlashBackwardTile {
  static constexpr std::int64_t kOwned = 64;  // query rows (row pass) or keys (column pass) per team
  static constexpr std::int64_t kSweep = 32;  // keys (row pass) or queries (column pass) per step, as the forward
  static_assert(kOwned > 0 && kSweep > 0, "blocks must be non-empty");
  static constexpr bool is_valid() { return kOwned % kSweep == 0; }
};
static_assert(FlashBackwardTile::is_valid(), "the owned block must be whole sweep steps");

// S[i, j] of head h, query i and key j of the sequence starting at `first`, as attention_flash.hpp's
// compute_qk + add_position_bias: (q . k + c2p + p2c) / scale. q_row and k_row: the staged (d) rows.
KOKKOS_INLINE_FUNCTION float backward_score(BackwardProblem const& t, float const* q_row, float const* k_row,
                                            std::int64_t first, std::int64_t i, std::int64_t j, std::int64_t h,
                                            float inv_scale) {
  AttentionProblem const& p = t.p;
  float s = 0.0f;
  for (std::int64_t e = 0; e < p.d; ++e) s += q_row[e] * k_row[e];
  if (p.c2p || p.p2c) {
    std::int32_t const slot = p.slot(p.positions[first + i], p.positions[first + j]);
    float term = 0.0f;
    if (p.c2p) term = t.c2p_all[t.band_row(first + i, h) + slot];
    if (p.p2c) term += t.p2c_all[t.band_row(first + j, h) + slot];
    s += term;
  }
  return s * inv_scale;
}

// Stages rows [r0, r0 + rows) of head h of x (q, k or v at h * head_stride, or dout at h * d) as (rows, d).
template <class Member, class Matrix>
KOKKOS_INLINE_FUNCTION void stage_rows(Member const& team, float* tile, Matrix const& x, std::int64_t r0,
                                       std::int64_t rows, std::int64_t column, std::int64_t d) {
  Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows * d),
                       [&](std::int64_t idx) { tile[idx] = x(r0 + idx / d, column + idx % d); });
}

template <class ExecSpace>
void attention_backward_flash(ExecSpace const& space, AttentionBackwardArgs const& g) {
  using Tile = FlashBackwardTile;
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = typename Policy::member_type;
  check_attention_backward_args(g);
  std::int64_t const max_len = g.forward.sequences.max_seqlen;
  std::int64_t const batch = g.forward.sequences.batch;
  if (batch == 0 || max_len == 0) return;
  BackwardBuffers<ExecSpace> buffers;
  BackwardProblem const t = backward_problem(space, g, buffers);
  AttentionProblem const& p = t.p;
  std::int64_t const d = p.d;
  std::int64_t const heads = p.heads;
  std::int64_t const tokens = t.tokens;
  float const inv_scale = 1.0f / p.scale;
  // (heads, T): D of every row, and lse when the forward's is not given.
  Kokkos::View<float*, typename ExecSpace::memory_space> row_dot_buffer(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, "flashdeberta::attention_backward_row_dot"),
      static_cast<std::size_t>(heads * tokens));
  Kokkos::View<float*, typename ExecSpace::memory_space> lse_buffer(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, "flashdeberta::attention_backward_lse"),
      static_cast<std::size_t>(g.lse == nullptr ? heads * tokens : 0));
  float* row_dot_all = row_dot_buffer.data();
  float* lse_out = g.lse == nullptr ? lse_buffer.data() : nullptr;
  float const* lse_all = g.lse != nullptr ? g.lse : lse_buffer.data();

  // One team per (sequence, head, owned block); the scratch of `owned` (BO, d) tiles, `sweep` (BS, d) tiles, two
  // (BO, BS) tiles and `vectors` (BO) vectors, at the level it fits.
  std::int64_t const blocks = (max_len + Tile::kOwned - 1) / Tile::kOwned;
  auto const scratch_of = [&](std::size_t owned, std::size_t sweep, std::size_t vectors) {
    return owned * scratch_bytes<ExecSpace>(Tile::kOwned * d) + sweep * scratch_bytes<ExecSpace>(Tile::kSweep * d) +
           2 * scratch_bytes<ExecSpace>(Tile::kOwned * Tile::kSweep) + vectors * scratch_bytes<ExecSpace>(Tile::kOwned);
  };
  auto const team_policy = [&](std::size_t bytes) {
    Policy policy(space, static_cast<int>(batch * heads * blocks), Kokkos::AUTO);
    policy.set_scratch_size(scratch_level<ExecSpace>(bytes), Kokkos::PerTeam(static_cast<int>(bytes)));
    return policy;
  };

  std::size_t const row_bytes = scratch_of(3, 2, 4);
  int const row_level = scratch_level<ExecSpace>(row_bytes);
  Policy const row_policy = team_policy(row_bytes);
  Kokkos::parallel_for(
      "flashdeberta::attention_backward_flash_rows", row_policy, KOKKOS_LAMBDA(Member const& team) {
        std::int64_t const h = (team.league_rank() / blocks) % heads;
        std::int64_t const b = team.league_rank() / (blocks * heads);
        std::int64_t const first = p.cu_seqlens[b];
        std::int64_t const length = p.cu_seqlens[b + 1] - first;
        std::int64_t const i0 = (team.league_rank() % blocks) * Tile::kOwned;
        if (i0 >= length) return;  // uniform over the team
        std::int64_t const rows = length - i0 < Tile::kOwned ? length - i0 : Tile::kOwned;
        float* q_tile = scratch_floats<ExecSpace>(team, row_level, Tile::kOwned * d);              // (BO, d)
        float* do_tile = scratch_floats<ExecSpace>(team, row_level, Tile::kOwned * d);             // (BO, d)
        float* acc = scratch_floats<ExecSpace>(team, row_level, Tile::kOwned * d);                 // (BO, d) dS K
        float* k_tile = scratch_floats<ExecSpace>(team, row_level, Tile::kSweep * d);              // (BS, d)
        float* v_tile = scratch_floats<ExecSpace>(team, row_level, Tile::kSweep * d);              // (BS, d)
        float* s_tile = scratch_floats<ExecSpace>(team, row_level, Tile::kOwned * Tile::kSweep);   // (BO, BS)
        float* ds_tile = scratch_floats<ExecSpace>(team, row_level, Tile::kOwned * Tile::kSweep);  // (BO, BS)
        float* lse = scratch_floats<ExecSpace>(team, row_level, Tile::kOwned);                     // (BO)
        float* row_dot = scratch_floats<ExecSpace>(team, row_level, Tile::kOwned);                 // (BO)
        float* row_max = scratch_floats<ExecSpace>(team, row_level, Tile::kOwned);                 // (BO)
        float* row_sum = scratch_floats<ExecSpace>(team, row_level, Tile::kOwned);                 // (BO)
        std::int64_t const stats = h * tokens + first + i0;  // the rows' offset in (heads, T)

        stage_rows(team, q_tile, p.q, first + i0, rows, h * p.head_stride, d);
        stage_rows(team, do_tile, t.dout, first + i0, rows, h * d, d);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows * d), [&](std::int64_t idx) { acc[idx] = 0.0f; });
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](std::int64_t r) {
          row_dot[r] = t.row_dot(first + i0 + r, h);
          row_dot_all[stats + r] = row_dot[r];
          row_max[r] = Kokkos::reduction_identity<float>::max();
          row_sum[r] = 0.0f;
          if (lse_out == nullptr) lse[r] = lse_all[stats + r];
        });
        if (lse_out != nullptr) {  // first sweep: the forward's online softmax, for each row's lse
          for (std::int64_t j0 = 0; j0 < length; j0 += Tile::kSweep) {
            std::int64_t const cols = length - j0 < Tile::kSweep ? length - j0 : Tile::kSweep;
            team.team_barrier();
            stage_rows(team, k_tile, p.k, first + j0, cols, h * p.head_stride, d);
            team.team_barrier();
            Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows * cols), [&](std::int64_t idx) {
              std::int64_t const r = idx / cols;
              std::int64_t const c = idx % cols;
              s_tile[r * Tile::kSweep + c] =
                  backward_score(t, q_tile + r * d, k_tile + c * d, first, i0 + r, j0 + c, h, inv_scale);
            });
            team.team_barrier();
            Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](std::int64_t r) {
              float const* sr = s_tile + r * Tile::kSweep;
              float tile_max = sr[0];
              for (std::int64_t c = 1; c < cols; ++c) tile_max = max_of(tile_max, sr[c]);
              float const new_max = max_of(row_max[r], tile_max);
              float sum = 0.0f;
              for (std::int64_t c = 0; c < cols; ++c) sum += math::exp(sr[c] - new_max);
              row_sum[r] = row_sum[r] * math::exp(row_max[r] - new_max) + sum;
              row_max[r] = new_max;
            });
          }
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](std::int64_t r) {
            lse[r] = row_max[r] + math::log(row_sum[r]);
            lse_out[stats + r] = lse[r];
          });
        }
        for (std::int64_t j0 = 0; j0 < length; j0 += Tile::kSweep) {
          std::int64_t const cols = length - j0 < Tile::kSweep ? length - j0 : Tile::kSweep;
          team.team_barrier();  // the previous step is done with k_tile, v_tile and ds_tile
          stage_rows(team, k_tile, p.k, first + j0, cols, h * p.head_stride, d);
          stage_rows(team, v_tile, p.v, first + j0, cols, h * p.head_stride, d);
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows * cols), [&](std::int64_t idx) {
            std::int64_t const r = idx / cols;
            std::int64_t const c = idx % cols;
            float const s = backward_score(t, q_tile + r * d, k_tile + c * d, first, i0 + r, j0 + c, h, inv_scale);
            float const prob = math::exp(s - lse[r]);
            float const m = p.drop.active() ? p.drop.factor(h, first + i0 + r, j0 + c) : 1.0f;
            float dp = 0.0f;
            for (std::int64_t e = 0; e < d; ++e) dp += do_tile[r * d + e] * v_tile[c * d + e];
            ds_tile[r * Tile::kSweep + c] = prob * (dp * m - row_dot[r]) * inv_scale;
          });
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows * d), [&](std::int64_t idx) {
            std::int64_t const r = idx / d;
            std::int64_t const e = idx % d;
            float sum = 0.0f;
            for (std::int64_t c = 0; c < cols; ++c) sum += ds_tile[r * Tile::kSweep + c] * k_tile[c * d + e];
            acc[idx] += sum;
          });
          if (p.c2p) {  // each row's band gathered by the thread of that row, in key order
            Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](std::int64_t r) {
              float* band = t.band_c2p + t.band_row(first + i0 + r, h);
              std::int64_t const pos_i = p.positions[first + i0 + r];
              for (std::int64_t c = 0; c < cols; ++c)
                band[p.slot(pos_i, p.positions[first + j0 + c])] += ds_tile[r * Tile::kSweep + c];
            });
          }
        }
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows * d), [&](std::int64_t idx) {
          std::int64_t const r = idx / d;
          std::int64_t const e = idx % d;
          float const band = p.c2p ? t.band_product(t.band_c2p, t.pos_key, first + i0 + r, h, e) : 0.0f;
          t.dq(first + i0 + r, h * p.head_stride + e) = acc[idx] + band;
        });
      });

  std::size_t const column_bytes = scratch_of(4, 2, 2);
  int const column_level = scratch_level<ExecSpace>(column_bytes);
  Policy const column_policy = team_policy(column_bytes);
  Kokkos::parallel_for(
      "flashdeberta::attention_backward_flash_columns", column_policy, KOKKOS_LAMBDA(Member const& team) {
        std::int64_t const h = (team.league_rank() / blocks) % heads;
        std::int64_t const b = team.league_rank() / (blocks * heads);
        std::int64_t const first = p.cu_seqlens[b];
        std::int64_t const length = p.cu_seqlens[b + 1] - first;
        std::int64_t const j0 = (team.league_rank() % blocks) * Tile::kOwned;
        if (j0 >= length) return;  // uniform over the team
        std::int64_t const cols = length - j0 < Tile::kOwned ? length - j0 : Tile::kOwned;
        float* k_tile = scratch_floats<ExecSpace>(team, column_level, Tile::kOwned * d);              // (BO, d)
        float* v_tile = scratch_floats<ExecSpace>(team, column_level, Tile::kOwned * d);              // (BO, d)
        float* acc_k = scratch_floats<ExecSpace>(team, column_level, Tile::kOwned * d);               // dS^T Q
        float* acc_v = scratch_floats<ExecSpace>(team, column_level, Tile::kOwned * d);               // P^T dO
        float* q_tile = scratch_floats<ExecSpace>(team, column_level, Tile::kSweep * d);              // (BS, d)
        float* do_tile = scratch_floats<ExecSpace>(team, column_level, Tile::kSweep * d);             // (BS, d)
        float* p_tile = scratch_floats<ExecSpace>(team, column_level, Tile::kOwned * Tile::kSweep);   // (BS, BO)
        float* ds_tile = scratch_floats<ExecSpace>(team, column_level, Tile::kOwned * Tile::kSweep);  // (BS, BO)
        float* lse = scratch_floats<ExecSpace>(team, column_level, Tile::kOwned);                     // (BS)
        float* row_dot = scratch_floats<ExecSpace>(team, column_level, Tile::kOwned);                 // (BS)

        stage_rows(team, k_tile, p.k, first + j0, cols, h * p.head_stride, d);
        stage_rows(team, v_tile, p.v, first + j0, cols, h * p.head_stride, d);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, cols * d), [&](std::int64_t idx) {
          acc_k[idx] = 0.0f;
          acc_v[idx] = 0.0f;
        });
        for (std::int64_t i0 = 0; i0 < length; i0 += Tile::kSweep) {
          std::int64_t const rows = length - i0 < Tile::kSweep ? length - i0 : Tile::kSweep;
          team.team_barrier();  // the previous step is done with the query-side tiles
          stage_rows(team, q_tile, p.q, first + i0, rows, h * p.head_stride, d);
          stage_rows(team, do_tile, t.dout, first + i0, rows, h * d, d);
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](std::int64_t r) {
            lse[r] = lse_all[h * tokens + first + i0 + r];
            row_dot[r] = row_dot_all[h * tokens + first + i0 + r];
          });
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows * cols), [&](std::int64_t idx) {
            std::int64_t const r = idx / cols;
            std::int64_t const c = idx % cols;
            float const s = backward_score(t, q_tile + r * d, k_tile + c * d, first, i0 + r, j0 + c, h, inv_scale);
            float const prob = math::exp(s - lse[r]);
            float const m = p.drop.active() ? p.drop.factor(h, first + i0 + r, j0 + c) : 1.0f;
            float dp = 0.0f;
            for (std::int64_t e = 0; e < d; ++e) dp += do_tile[r * d + e] * v_tile[c * d + e];
            p_tile[r * Tile::kOwned + c] = prob * m;  // the dropped probabilities, which dV reads
            ds_tile[r * Tile::kOwned + c] = prob * (dp * m - row_dot[r]) * inv_scale;
          });
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, cols * d), [&](std::int64_t idx) {
            std::int64_t const c = idx / d;
            std::int64_t const e = idx % d;
            float dv = 0.0f;
            float dk = 0.0f;
            for (std::int64_t r = 0; r < rows; ++r) {
              dv += p_tile[r * Tile::kOwned + c] * do_tile[r * d + e];
              dk += ds_tile[r * Tile::kOwned + c] * q_tile[r * d + e];
            }
            acc_v[idx] += dv;
            acc_k[idx] += dk;
          });
          if (p.p2c) {  // each key's band gathered by the thread of that key, in query order
            Kokkos::parallel_for(Kokkos::TeamThreadRange(team, cols), [&](std::int64_t c) {
              float* band = t.band_p2c + t.band_row(first + j0 + c, h);
              std::int64_t const pos_j = p.positions[first + j0 + c];
              for (std::int64_t r = 0; r < rows; ++r)
                band[p.slot(p.positions[first + i0 + r], pos_j)] += ds_tile[r * Tile::kOwned + c];
            });
          }
        }
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, cols * d), [&](std::int64_t idx) {
          std::int64_t const c = idx / d;
          std::int64_t const e = idx % d;
          float const band = p.p2c ? t.band_product(t.band_p2c, t.pos_query, first + j0 + c, h, e) : 0.0f;
          t.dv(first + j0 + c, h * p.head_stride + e) = acc_v[idx];
          t.dk(first + j0 + c, h * p.head_stride + e) = acc_k[idx] + band;
        });
      });
  add_table_gradients(space, t, g);
}

}  // namespace flashdeberta::kokkos_ops

// Flash Kokkos attention: one team per (sequence, head, query block), tiled online softmax, no (L, L)
// buffer (memory linear in L).
//
// Position terms: p2c_all (T, heads, 2k) = k . Qr^T comes from one kernel before the main one; each team
// forms its c2p_block (BQ, 2k) = q_block . Kr^T in scratch; a tile adds c2p_block[i, delta] +
// p2c_all[j, delta] with delta read from the slot table. A tile whose pairs all lie beyond the
// saturation distance uses one slot for all of them: a per-row plus a per-column bias, no look-ups.
//
// The team's stages, each a TeamThreadRange between barriers: load_q, c2p_block, then per key block
// load_kv, compute_qk + add_position_bias, update_softmax_state (one row per thread), compute_pv;
// write_o at the end. Dropout on the probabilities (training, AttentionArgs::dropout) masks a tile's exp(S - max)
// at the end of update_softmax_state, after row_sum took them undropped (lse and the normalization stay those of
// the undropped softmax).
#pragma once

#include "flashdeberta/kokkos/ops/attention_common.hpp"

namespace flashdeberta::kokkos_ops {

struct FlashTile {
  static constexpr std::int64_t kBlockQ = 64;  // query rows per team
  static constexpr std::int64_t kBlockK = 32;  // key rows per step: k, v and scores fit 48 KB for d = 128
  static_assert(kBlockQ > 0 && kBlockK > 0, "blocks must be non-empty");
};

template <class ExecSpace>
void attention_flash(ExecSpace const& space, AttentionArgs const& args) {
  using Tile = FlashTile;
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = typename Policy::member_type;
  using DeviceFloats = Kokkos::View<float*, typename ExecSpace::memory_space>;
  AttentionProblem const p = attention_problem(args);
  std::int64_t const max_len = args.sequences.max_seqlen;
  std::int64_t const batch = args.sequences.batch;
  if (batch == 0 || max_len == 0) return;
  DeviceFloats p2c_all;  // (T, heads, 2k)
  if (p.p2c) p2c_all = project_relative(space, p, p.k, args.pos_query);
  float const* p2c_rel = p2c_all.data();
  Strided<float const> const pos_key =
      p.c2p ? cstrided(args.pos_key, "relative key table") : Strided<float const>{};  // (2k, A)

  std::int64_t const d = p.d;
  std::int64_t const span2 = p.span2;
  std::int64_t const c2p_floats = p.c2p ? Tile::kBlockQ * span2 : 0;
  // Hot tiles (k, v, scores) are read in every step; the rest once per step or once per team.
  std::size_t const hot_bytes =
      2 * scratch_bytes<ExecSpace>(Tile::kBlockK * d) + scratch_bytes<ExecSpace>(Tile::kBlockQ * Tile::kBlockK);
  std::size_t const cold_bytes = 2 * scratch_bytes<ExecSpace>(Tile::kBlockQ * d) +
                                 scratch_bytes<ExecSpace>(c2p_floats) + 2 * scratch_bytes<ExecSpace>(Tile::kBlockQ);
  int const hot_level = scratch_level<ExecSpace>(hot_bytes);
  int const cold_level = hot_level == 0 && scratch_level<ExecSpace>(hot_bytes + cold_bytes) == 0 ? 0 : 1;
  std::size_t level_bytes[2] = {0, 0};
  level_bytes[hot_level] += hot_bytes;
  level_bytes[cold_level] += cold_bytes;

  std::int64_t const query_blocks = (max_len + Tile::kBlockQ - 1) / Tile::kBlockQ;
  Policy policy(space, static_cast<int>(batch * p.heads * query_blocks), Kokkos::AUTO);
  if (level_bytes[0] > 0) policy.set_scratch_size(0, Kokkos::PerTeam(static_cast<int>(level_bytes[0])));
  if (level_bytes[1] > 0) policy.set_scratch_size(1, Kokkos::PerTeam(static_cast<int>(level_bytes[1])));
  float const inv_scale = 1.0f / p.scale;
  float* const lse = args.lse;  // (heads, T) or null
  std::int64_t const tokens = args.sequences.total_tokens;

  Kokkos::parallel_for(
      "flashdeberta::attention_flash", policy, KOKKOS_LAMBDA(Member const& team) {
        std::int64_t const qb = team.league_rank() % query_blocks;
        std::int64_t const h = (team.league_rank() / query_blocks) % p.heads;
        std::int64_t const b = team.league_rank() / (query_blocks * p.heads);
        std::int64_t const first = p.cu_seqlens[b];
        std::int64_t const length = p.cu_seqlens[b + 1] - first;
        std::int64_t const i0 = qb * Tile::kBlockQ;
        if (i0 >= length) return;  // uniform over the team: no barrier is skipped by some threads only
        std::int64_t const rows = length - i0 < Tile::kBlockQ ? length - i0 : Tile::kBlockQ;
        std::int32_t const* pos = p.positions + first;

        float* k_tile = scratch_floats<ExecSpace>(team, hot_level, Tile::kBlockK * d);              // (BK, d)
        float* v_tile = scratch_floats<ExecSpace>(team, hot_level, Tile::kBlockK * d);              // (BK, d)
        float* s_tile = scratch_floats<ExecSpace>(team, hot_level, Tile::kBlockQ * Tile::kBlockK);  // (BQ, BK)
        float* q_tile = scratch_floats<ExecSpace>(team, cold_level, Tile::kBlockQ * d);             // (BQ, d)
        float* acc = scratch_floats<ExecSpace>(team, cold_level, Tile::kBlockQ * d);                // (BQ, d)
        float* c2p_block = scratch_floats<ExecSpace>(team, cold_level, c2p_floats);                 // (BQ, 2k)
        float* row_max = scratch_floats<ExecSpace>(team, cold_level, Tile::kBlockQ);                // (BQ)
        float* row_sum = scratch_floats<ExecSpace>(team, cold_level, Tile::kBlockQ);                // (BQ)

        // load_q and the running softmax state.
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows * d), [&](std::int64_t idx) {
          std::int64_t const r = idx / d;
          std::int64_t const e = idx % d;
          q_tile[idx] = p.q(first + i0 + r, h * p.head_stride + e);
          acc[idx] = 0.0f;
        });
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](std::int64_t r) {
          row_max[r] = Kokkos::reduction_identity<float>::max();  // -FLT_MAX: the first correction is 0
          row_sum[r] = 0.0f;
        });
        team.team_barrier();
        if (p.c2p) {
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows * span2), [&](std::int64_t idx) {
            std::int64_t const r = idx / span2;
            float const* kr = pos_key.row(idx % span2) + h * d;
            float sum = 0.0f;
            for (std::int64_t e = 0; e < d; ++e) sum += q_tile[r * d + e] * kr[e];
            c2p_block[idx] = sum;
          });
        }

        for (std::int64_t j0 = 0; j0 < length; j0 += Tile::kBlockK) {
          std::int64_t const cols = length - j0 < Tile::kBlockK ? length - j0 : Tile::kBlockK;
          team.team_barrier();  // the previous step's compute_pv is done with v_tile and s_tile
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, cols * d), [&](std::int64_t idx) {
            std::int64_t const c = idx / d;
            std::int64_t const e = idx % d;
            k_tile[idx] = p.k(first + j0 + c, h * p.head_stride + e);
            v_tile[idx] = p.v(first + j0 + c, h * p.head_stride + e);
          });
          team.team_barrier();
          // Positions increase within a sequence, so the extreme differences sit at the tile's corners.
          std::int64_t const min_diff = static_cast<std::int64_t>(pos[i0]) - pos[j0 + cols - 1];
          std::int64_t const max_diff = static_cast<std::int64_t>(pos[i0 + rows - 1]) - pos[j0];
          std::int32_t fixed_slot = -1;  // saturated tile: every pair shares this slot
          if (p.c2p || p.p2c) {
            if (min_diff >= p.saturation) {
              fixed_slot = p.relative_index[2 * p.saturation];  // every key far to the left of every query
            } else if (max_diff <= -p.saturation) {
              fixed_slot = p.relative_index[0];  // every key far to the right
            }
          }
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows * cols), [&](std::int64_t idx) {
            std::int64_t const r = idx / cols;
            std::int64_t const c = idx % cols;
            float const* qr = q_tile + r * d;
            float const* kc = k_tile + c * d;
            float s = 0.0f;
            for (std::int64_t e = 0; e < d; ++e) s += qr[e] * kc[e];
            if (p.c2p || p.p2c) {
              std::int32_t const slot = fixed_slot >= 0 ? fixed_slot : p.slot(pos[i0 + r], pos[j0 + c]);
              float term = 0.0f;
              if (p.c2p) term = c2p_block[r * span2 + slot];
              if (p.p2c) term += p2c_rel[((first + j0 + c) * p.heads + h) * span2 + slot];
              s += term;
            }
            s_tile[r * Tile::kBlockK + c] = s * inv_scale;
          });
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](std::int64_t r) {
            float* sr = s_tile + r * Tile::kBlockK;
            float tile_max = sr[0];
            for (std::int64_t c = 1; c < cols; ++c) tile_max = max_of(tile_max, sr[c]);
            float const new_max = max_of(row_max[r], tile_max);
            float const correction = math::exp(row_max[r] - new_max);
            float sum = 0.0f;
            for (std::int64_t c = 0; c < cols; ++c) {
              sr[c] = math::exp(sr[c] - new_max);
              sum += sr[c];
            }
            row_sum[r] = row_sum[r] * correction + sum;
            row_max[r] = new_max;
            for (std::int64_t e = 0; e < d; ++e) acc[r * d + e] *= correction;
            if (p.drop.active()) {
              for (std::int64_t c = 0; c < cols; ++c) sr[c] *= p.drop.factor(h, first + i0 + r, j0 + c);
            }
          });
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows * d), [&](std::int64_t idx) {
            std::int64_t const r = idx / d;
            std::int64_t const e = idx % d;
            float const* sr = s_tile + r * Tile::kBlockK;
            float sum = 0.0f;
            for (std::int64_t c = 0; c < cols; ++c) sum += sr[c] * v_tile[c * d + e];
            acc[idx] += sum;
          });
        }
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows * d), [&](std::int64_t idx) {
          std::int64_t const r = idx / d;
          p.out(first + i0 + r, h * d + idx % d) = acc[idx] * (1.0f / row_sum[r]);
        });
        if (lse != nullptr) {  // row_max is of the scores already divided by scale: S itself
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, rows), [&](std::int64_t r) {
            lse[h * tokens + first + i0 + r] = row_max[r] + math::log(row_sum[r]);
          });
        }
      });
}

}  // namespace flashdeberta::kokkos_ops

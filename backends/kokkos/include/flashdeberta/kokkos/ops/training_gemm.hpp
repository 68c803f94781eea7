// The batched GEMM of the Kokkos training ops: out[z] (M, N) = A[z] (M, K) . B[z] (K, N) for z < batches, with
// A, B and the store given as functors, so that one kernel serves every backward product: transposed operands
// (dw = dy^T . x), gathered ones (conv1d's shifted and masked inputs), strided head views, and stores that
// write, add, or scatter into PyTorch's weight layout. The forward's gemm (gemm.hpp) has a fixed a . b^T form.
//
// One team per (batch, kTileM x kTileN tile) stages kTileK-deep slices of A and B in team scratch as gemm.hpp
// does. Every output element is summed by one thread, along K in a fixed order: each kTileK slice into a fresh
// register block, then onto the tile's running sum (two-level summation: float32 error grows with K / kTileK
// instead of K, which matters for the weight gradients' sums over thousands of tokens). So the result does not
// depend on the team size or the schedule: the same bits run to run and on any execution space.
#pragma once

#include "flashdeberta/kokkos/ops/common.hpp"

namespace flashdeberta::kokkos_ops {

struct BatchedGemmTile {
  static constexpr std::int64_t kTileM = 64;
  static constexpr std::int64_t kTileN = 64;
  static constexpr std::int64_t kTileK = 32;
  static constexpr std::int64_t kMicroM = 4;  // register block per thread, as gemm.hpp's
  static constexpr std::int64_t kMicroN = 8;
  static constexpr std::int64_t kMicroCols = kTileN / kMicroN;
  static constexpr std::int64_t kMicroTiles = (kTileM / kMicroM) * kMicroCols;

  static_assert(kTileM % kMicroM == 0 && kTileN % kMicroN == 0, "micro-tiles must cover the tile exactly");
  static constexpr bool is_valid() { return kTileM > 0 && kTileN > 0 && kTileK > 0 && kMicroTiles > 0; }
};
static_assert(BatchedGemmTile::is_valid());

struct GemmShape {
  std::int64_t batches = 1;
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
};

// a(z, i, kk) and b(z, kk, j) return float operands; store(z, i, j, sum) receives each of the M x N sums once.
// K = 0 stores zeros.
template <class ExecSpace, class LoadA, class LoadB, class Store>
void batched_gemm(ExecSpace const& space, char const* label, GemmShape const& shape, LoadA const& a, LoadB const& b,
                  Store const& store) {
  using Tile = BatchedGemmTile;
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = typename Policy::member_type;
  std::int64_t const m = shape.m;
  std::int64_t const n = shape.n;
  std::int64_t const k = shape.k;
  if (shape.batches == 0 || m == 0 || n == 0) return;
  std::int64_t const tiles_m = (m + Tile::kTileM - 1) / Tile::kTileM;
  std::int64_t const tiles_n = (n + Tile::kTileN - 1) / Tile::kTileN;
  std::int64_t const tiles = tiles_m * tiles_n;
  std::size_t const bytes = scratch_bytes<ExecSpace>(Tile::kTileK * Tile::kTileM) +
                            scratch_bytes<ExecSpace>(Tile::kTileK * Tile::kTileN) +
                            scratch_bytes<ExecSpace>(Tile::kTileM * Tile::kTileN);
  int const level = scratch_level<ExecSpace>(bytes);
  Policy policy(space, static_cast<int>(shape.batches * tiles), Kokkos::AUTO);
  policy.set_scratch_size(level, Kokkos::PerTeam(static_cast<int>(bytes)));

  Kokkos::parallel_for(
      label, policy, KOKKOS_LAMBDA(Member const& team) {
        std::int64_t const z = team.league_rank() / tiles;
        std::int64_t const tile = team.league_rank() % tiles;
        std::int64_t const m0 = (tile / tiles_n) * Tile::kTileM;
        std::int64_t const n0 = (tile % tiles_n) * Tile::kTileN;
        float* a_tile = scratch_floats<ExecSpace>(team, level, Tile::kTileK * Tile::kTileM);  // (TK, TM)
        float* b_tile = scratch_floats<ExecSpace>(team, level, Tile::kTileK * Tile::kTileN);  // (TK, TN)
        float* c_tile = scratch_floats<ExecSpace>(team, level, Tile::kTileM * Tile::kTileN);  // (TM, TN)
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, Tile::kTileM * Tile::kTileN),
                             [&](std::int64_t i) { c_tile[i] = 0.0f; });
        for (std::int64_t k0 = 0; k0 < k; k0 += Tile::kTileK) {
          team.team_barrier();  // the previous step's micro-kernels are done with the tiles
          // Out-of-range entries are zero, so the micro-kernel runs without bounds checks.
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, Tile::kTileM * Tile::kTileK), [&](std::int64_t idx) {
            std::int64_t const r = idx / Tile::kTileK;
            std::int64_t const kk = idx % Tile::kTileK;
            a_tile[kk * Tile::kTileM + r] = m0 + r < m && k0 + kk < k ? a(z, m0 + r, k0 + kk) : 0.0f;
          });
          // Consecutive indices walk along N: B is row-major (K, N) in every use (x, weights, head views).
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, Tile::kTileK * Tile::kTileN), [&](std::int64_t idx) {
            std::int64_t const kk = idx / Tile::kTileN;
            std::int64_t const c = idx % Tile::kTileN;
            b_tile[idx] = n0 + c < n && k0 + kk < k ? b(z, k0 + kk, n0 + c) : 0.0f;
          });
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, Tile::kMicroTiles), [&](std::int64_t micro) {
            std::int64_t const r0 = (micro / Tile::kMicroCols) * Tile::kMicroM;
            std::int64_t const c0 = (micro % Tile::kMicroCols) * Tile::kMicroN;
            float acc[Tile::kMicroM][Tile::kMicroN] = {};
            for (std::int64_t kk = 0; kk < Tile::kTileK; ++kk) {
              float const* a_col = a_tile + kk * Tile::kTileM + r0;
              float const* b_row = b_tile + kk * Tile::kTileN + c0;
              for (std::int64_t r = 0; r < Tile::kMicroM; ++r)
                for (std::int64_t c = 0; c < Tile::kMicroN; ++c) acc[r][c] += a_col[r] * b_row[c];
            }
            for (std::int64_t r = 0; r < Tile::kMicroM; ++r)
              for (std::int64_t c = 0; c < Tile::kMicroN; ++c) c_tile[(r0 + r) * Tile::kTileN + c0 + c] += acc[r][c];
          });
        }
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, Tile::kTileM * Tile::kTileN), [&](std::int64_t idx) {
          std::int64_t const r = idx / Tile::kTileN;
          std::int64_t const c = idx % Tile::kTileN;
          if (m0 + r < m && n0 + c < n) store(z, m0 + r, n0 + c, c_tile[idx]);
        });
      });
}

}  // namespace flashdeberta::kokkos_ops

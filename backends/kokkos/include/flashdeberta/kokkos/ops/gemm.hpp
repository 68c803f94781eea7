// Tiled team GEMM with the bias/activation epilogue: out (M, N) = act(alpha * a (M, K) . b (N, K)^T + bias).
//
// One team computes one (kTileM, kTileN) tile of out. Per step of kTileK along K it stages the a and b
// tiles in team scratch, transposed to (kTileK, kTileM) and (kTileK, kTileN), so that every thread's
// (kMicroM, kMicroN) register block is a sum of outer products of contiguous scratch rows (the inner
// loop vectorizes on CPUs and reads scratch without strides on GPUs). The tile accumulator lives in
// scratch because a team of one thread (Serial) must own every micro-tile of it.
#pragma once

#include "flashdeberta/kokkos/ops/common.hpp"
#include "flashdeberta/policy/op_args.hpp"

namespace flashdeberta::kokkos_ops {

struct GemmTile {
  static constexpr std::int64_t kTileM = 64;
  static constexpr std::int64_t kTileN = 64;
  static constexpr std::int64_t kTileK = 32;
  static constexpr std::int64_t kMicroM = 4;  // register block per thread: 4 x 8 accumulators
  static constexpr std::int64_t kMicroN = 8;
  static constexpr std::int64_t kMicroCols = kTileN / kMicroN;
  static constexpr std::int64_t kMicroTiles = (kTileM / kMicroM) * kMicroCols;
  static constexpr std::int64_t kScratchFloats = kTileK * kTileM + kTileK * kTileN + kTileM * kTileN;

  static_assert(kTileM % kMicroM == 0 && kTileN % kMicroN == 0, "micro-tiles must cover the tile exactly");

  static constexpr bool is_valid() { return kTileM > 0 && kTileN > 0 && kTileK > 0 && kMicroTiles > 0; }
};
static_assert(GemmTile::is_valid());

// GemmArgs::accumulate_f64: one output per thread, its products, alpha and bias summed in float64 and rounded
// once. Only the masked-LM decoder asks for it, over the rows it computes.
template <class ExecSpace>
void gemm_accumulate_f64(ExecSpace const& space, Strided<float const> const& a, Strided<float const> const& b,
                         Strided<float> const& out, GemmArgs const& g) {
  auto const* bias = static_cast<float const*>(g.bias);  // (N) or null
  Activation const act = g.activation;
  double const alpha = g.alpha;
  std::int64_t const n = out.cols;
  std::int64_t const k = a.cols;
  Kokkos::parallel_for(
      "flashdeberta::gemm_accumulate_f64", Kokkos::RangePolicy<ExecSpace>(space, 0, out.rows * n),
      KOKKOS_LAMBDA(std::int64_t idx) {
        std::int64_t const r = idx / n;
        std::int64_t const c = idx % n;
        double sum = 0.0;
        for (std::int64_t kk = 0; kk < k; ++kk) sum += static_cast<double>(a(r, kk)) * static_cast<double>(b(c, kk));
        sum *= alpha;
        if (bias != nullptr) sum += static_cast<double>(bias[c]);
        out(r, c) = apply_activation(act, static_cast<float>(sum));
      });
}

template <class ExecSpace>
void gemm(ExecSpace const& space, GemmArgs const& g) {
  using Tile = GemmTile;
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = typename Policy::member_type;
  Strided<float const> const a = cstrided(g.a, "gemm input");
  Strided<float const> const b = cstrided(g.b, "gemm weight");
  Strided<float> const out = strided(g.out, "gemm output");
  FLASHDEBERTA_REQUIRE(g.a.cols == g.b.cols && g.out.rows == g.a.rows && g.out.cols == g.b.rows,
                       "gemm shapes do not agree: a (" << g.a.rows << ", " << g.a.cols << "), b (" << g.b.rows << ", "
                                                       << g.b.cols << "), out (" << g.out.rows << ", " << g.out.cols
                                                       << ")");
  std::int64_t const m = out.rows;
  std::int64_t const n = out.cols;
  std::int64_t const k = a.cols;
  if (m == 0 || n == 0) return;
  if (g.accumulate_f64) {
    gemm_accumulate_f64(space, a, b, out, g);
    return;
  }
  auto const* bias = static_cast<float const*>(g.bias);  // (N) or null
  Activation const act = g.activation;
  float const alpha = g.alpha;
  std::int64_t const tiles_n = (n + Tile::kTileN - 1) / Tile::kTileN;
  std::int64_t const tiles_m = (m + Tile::kTileM - 1) / Tile::kTileM;

  std::size_t const bytes = scratch_bytes<ExecSpace>(Tile::kTileK * Tile::kTileM) +
                            scratch_bytes<ExecSpace>(Tile::kTileK * Tile::kTileN) +
                            scratch_bytes<ExecSpace>(Tile::kTileM * Tile::kTileN);
  int const level = scratch_level<ExecSpace>(bytes);
  Policy policy(space, static_cast<int>(tiles_m * tiles_n), Kokkos::AUTO);
  policy.set_scratch_size(level, Kokkos::PerTeam(static_cast<int>(bytes)));

  Kokkos::parallel_for(
      "flashdeberta::gemm", policy, KOKKOS_LAMBDA(Member const& team) {
        std::int64_t const m0 = (team.league_rank() / tiles_n) * Tile::kTileM;
        std::int64_t const n0 = (team.league_rank() % tiles_n) * Tile::kTileN;
        float* a_tile = scratch_floats<ExecSpace>(team, level, Tile::kTileK * Tile::kTileM);  // (TK, TM)
        float* b_tile = scratch_floats<ExecSpace>(team, level, Tile::kTileK * Tile::kTileN);  // (TK, TN)
        float* c_tile = scratch_floats<ExecSpace>(team, level, Tile::kTileM * Tile::kTileN);  // (TM, TN)
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, Tile::kTileM * Tile::kTileN),
                             [&](std::int64_t i) { c_tile[i] = 0.0f; });
        for (std::int64_t k0 = 0; k0 < k; k0 += Tile::kTileK) {
          team.team_barrier();  // the previous step's micro-kernels are done with the tiles
          // Consecutive indices walk along K: contiguous global reads. Out-of-range entries are zero, so
          // the micro-kernel runs without bounds checks.
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, Tile::kTileM * Tile::kTileK), [&](std::int64_t idx) {
            std::int64_t const r = idx / Tile::kTileK;
            std::int64_t const kk = idx % Tile::kTileK;
            bool const inside = m0 + r < m && k0 + kk < k;
            a_tile[kk * Tile::kTileM + r] = inside ? a(m0 + r, k0 + kk) : 0.0f;
          });
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, Tile::kTileN * Tile::kTileK), [&](std::int64_t idx) {
            std::int64_t const c = idx / Tile::kTileK;
            std::int64_t const kk = idx % Tile::kTileK;
            bool const inside = n0 + c < n && k0 + kk < k;
            b_tile[kk * Tile::kTileN + c] = inside ? b(n0 + c, k0 + kk) : 0.0f;
          });
          team.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, Tile::kMicroTiles), [&](std::int64_t micro) {
            std::int64_t const r0 = (micro / Tile::kMicroCols) * Tile::kMicroM;
            std::int64_t const c0 = (micro % Tile::kMicroCols) * Tile::kMicroN;
            float acc[Tile::kMicroM][Tile::kMicroN];
            for (std::int64_t r = 0; r < Tile::kMicroM; ++r)
              for (std::int64_t c = 0; c < Tile::kMicroN; ++c) acc[r][c] = c_tile[(r0 + r) * Tile::kTileN + c0 + c];
            for (std::int64_t kk = 0; kk < Tile::kTileK; ++kk) {
              float const* a_col = a_tile + kk * Tile::kTileM + r0;
              float const* b_row = b_tile + kk * Tile::kTileN + c0;
              for (std::int64_t r = 0; r < Tile::kMicroM; ++r)
                for (std::int64_t c = 0; c < Tile::kMicroN; ++c) acc[r][c] += a_col[r] * b_row[c];
            }
            for (std::int64_t r = 0; r < Tile::kMicroM; ++r)
              for (std::int64_t c = 0; c < Tile::kMicroN; ++c) c_tile[(r0 + r) * Tile::kTileN + c0 + c] = acc[r][c];
          });
        }
        team.team_barrier();
        // Epilogue in the order of the reference: alpha * (a . b^T), then + bias, then the activation.
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, Tile::kTileM * Tile::kTileN), [&](std::int64_t idx) {
          std::int64_t const r = idx / Tile::kTileN;
          std::int64_t const c = idx % Tile::kTileN;
          if (m0 + r >= m || n0 + c >= n) return;
          float v = alpha * c_tile[idx];
          if (bias != nullptr) v += bias[n0 + c];
          out(m0 + r, n0 + c) = apply_activation(act, v);
        });
      });
}

}  // namespace flashdeberta::kokkos_ops

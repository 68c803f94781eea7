// out (M, N) = alpha a (M, K) . w (N, K)^T for few rows M (the tokens of short sequences), AVX-512, with the bias
// and activation applied by the thread that wrote each column block.
//
// Why: Eigen packs both operands of every GEMM. At M <= 64 the weight it packs is many times larger than the
// activations and is used only M times, so packing the row-major weight into its 48-row panels (a transposing
// copy) took twice the time of the multiply itself (perf at 1 x 16, one thread: gemm_pack_lhs 48%, gebp_kernel
// 24% of the whole run). Here neither operand is copied: both are read along K, where they are contiguous, and
// each 4 x 4 block of outputs keeps 16 accumulators of 16 partial sums, reduced once at the end.
//
// Threads split N (the weight's rows), so each streams its own part of the weight once; at most one thread per
// kMinFmaPerThread of work, and one team per GEMM for product, bias and activation together.
#pragma once

#include <algorithm>
#include <cstdint>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "flashdeberta/eigen/ops/op_threads.hpp"

namespace flashdeberta::eigen_ops {

#if defined(__AVX512F__)
inline constexpr bool kHasSkinnyGemm = true;
#else
inline constexpr bool kHasSkinnyGemm = false;
#endif

// Rows of `a` up to which gemm uses the skinny kernel instead of Eigen's, and the row blocks it takes beyond.
// Measured on one core of the 2-core EPYC (Zen 4) VM, v3-base's four GEMM shapes with the weights cycled through
// 12 copies (from memory, as in a forward): at M = 16 the skinny kernel ran 1.9-2.9x Eigen's speed, at 64
// 1.15-1.5x, at 128 1.0-1.2x; at 256 0.9-1.04x and at 1024 0.77-0.93x, where packing is paid back. But Eigen's
// parallel GEMM splits the rows among threads, which then wait on each other for packed panels: on 16 cores of
// the GPU machine (bench_dense, 2026-12-02) its 160 x 768 x 2304 product took 3.5 ms, 6.4x the skinny kernel's
// 128-row one and slower than on 2 of those cores (2.9 ms). So gemm keeps the skinny kernel while a thread would
// get fewer than kEigenMinRowsPerThread rows of Eigen's split (skinny_max_rows).
inline constexpr std::int64_t kSkinnyMaxRows = 128;
inline constexpr std::int64_t kEigenMinRowsPerThread = 128;

inline std::int64_t skinny_max_rows(int threads) {
  return std::max<std::int64_t>(kSkinnyMaxRows, kEigenMinRowsPerThread * threads - 1);
}

namespace detail {

#if defined(__AVX512F__)

// Lane 4 i + j of the result is the sum of the 16 lanes of r[4 i + j]: a reduction tree of 45 shuffles and adds
// in place of 16 separate horizontal sums (128).
inline __m512 reduce_16x16(__m512 (&r)[16]) {
  __m512 s[8];
  for (int g = 0; g < 8; ++g)  // per 128-bit lane: [a0 + a2, b0 + b2, a1 + a3, b1 + b3]
    s[g] = _mm512_add_ps(_mm512_unpacklo_ps(r[2 * g], r[2 * g + 1]), _mm512_unpackhi_ps(r[2 * g], r[2 * g + 1]));
  __m512 u[4];
  for (int g = 0; g < 4; ++g)  // per 128-bit lane: element m holds that lane's sum of r[4 g + m]
    u[g] =
        _mm512_add_ps(_mm512_shuffle_ps(s[2 * g], s[2 * g + 1], 0x44), _mm512_shuffle_ps(s[2 * g], s[2 * g + 1], 0xEE));
  __m512 const y01 = _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], 0x44), _mm512_shuffle_f32x4(u[0], u[1], 0xEE));
  __m512 const y23 = _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], 0x44), _mm512_shuffle_f32x4(u[2], u[3], 0xEE));
  return _mm512_add_ps(_mm512_shuffle_f32x4(y01, y23, 0x88), _mm512_shuffle_f32x4(y01, y23, 0xDD));
}

// out[i][j] = alpha * a_i . w_j for i < MR rows of a, j < NR rows of w, over k values. With `ahead` (not null),
// the same part of NR rows at `ahead` is prefetched into L2 along the way.
template <int MR, int NR>
inline void skinny_block(float const* a, std::int64_t lda, float const* w, std::int64_t ldw, std::int64_t k,
                         float alpha, float* out, std::int64_t ldo, float const* ahead) {
  __m512 acc[16];
  for (auto& x : acc) x = _mm512_setzero_ps();
  std::int64_t p = 0;
  for (; p + 16 <= k; p += 16) {
    if (ahead != nullptr)
      for (int j = 0; j < NR; ++j) _mm_prefetch(reinterpret_cast<char const*>(ahead + j * ldw + p), _MM_HINT_T1);
    __m512 wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = _mm512_loadu_ps(w + j * ldw + p);
    for (int i = 0; i < MR; ++i) {
      __m512 const av = _mm512_loadu_ps(a + i * lda + p);
      for (int j = 0; j < NR; ++j) acc[4 * i + j] = _mm512_fmadd_ps(av, wv[j], acc[4 * i + j]);
    }
  }
  if (p < k) {  // masked tail: the lanes past k load as zero
    auto const mask = static_cast<__mmask16>((1u << (k - p)) - 1u);
    __m512 wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = _mm512_maskz_loadu_ps(mask, w + j * ldw + p);
    for (int i = 0; i < MR; ++i) {
      __m512 const av = _mm512_maskz_loadu_ps(mask, a + i * lda + p);
      for (int j = 0; j < NR; ++j) acc[4 * i + j] = _mm512_fmadd_ps(av, wv[j], acc[4 * i + j]);
    }
  }
  __m512 const sums = _mm512_mul_ps(reduce_16x16(acc), _mm512_set1_ps(alpha));
  auto const columns = static_cast<__mmask8>((1u << NR) - 1u);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sums);
  for (int i = 0; i < MR; ++i) _mm_mask_storeu_ps(out + i * ldo, columns, _mm_load_ps(lanes + 4 * i));
}

// Rows of the next panel of the weight that one slice of `a` prefetches while it runs over the current one:
// groups of 4 rows dealt round-robin to the slices, so that the stream spreads over the whole panel's time.
struct PanelAhead {
  float const* rows = nullptr;  // the next panel's first row, or null
  std::int64_t count = 0;       // its rows
  std::int64_t slice = 0, slices = 1;

  float const* group(std::int64_t j, std::int64_t ldw) const {
    bool const mine = rows != nullptr && j < count && (j / 4) % slices == slice;
    return mine ? rows + j * ldw : nullptr;
  }
};

// n rows of w against MR rows of a.
template <int MR>
inline void skinny_rows(float const* a, std::int64_t lda, float const* w, std::int64_t ldw, std::int64_t k, float alpha,
                        float* out, std::int64_t ldo, std::int64_t n, PanelAhead const& ahead) {
  std::int64_t j = 0;
  for (; j + 4 <= n; j += 4) skinny_block<MR, 4>(a, lda, w + j * ldw, ldw, k, alpha, out + j, ldo, ahead.group(j, ldw));
  float const* const tail = ahead.group(j, ldw);
  switch (n - j) {
    case 3:
      skinny_block<MR, 3>(a, lda, w + j * ldw, ldw, k, alpha, out + j, ldo, tail);
      break;
    case 2:
      skinny_block<MR, 2>(a, lda, w + j * ldw, ldw, k, alpha, out + j, ldo, tail);
      break;
    case 1:
      skinny_block<MR, 1>(a, lda, w + j * ldw, ldw, k, alpha, out + j, ldo, tail);
      break;
    default:
      break;
  }
}

// Columns [n0, n0 + n) of out for all m rows. The weight's rows are taken a panel of about 128 KB at a time
// (in L2), and every 4-row slice of `a` (in L1) runs over the panel before the next. The weight comes from
// memory (a v3-base layer's is 28 MB): the slices prefetch the next panel meanwhile, so that the stream
// overlaps the multiply instead of stalling it.
inline void skinny_columns(float const* a, std::int64_t lda, float const* w, std::int64_t ldw, std::int64_t m,
                           std::int64_t k, float alpha, float* out, std::int64_t ldo, std::int64_t n0, std::int64_t n) {
  std::int64_t const panel = std::clamp<std::int64_t>(32768 / std::max<std::int64_t>(k, 1), 4, 64) / 4 * 4;
  PanelAhead ahead;
  ahead.slices = (m + 3) / 4;
  for (std::int64_t j0 = n0; j0 < n0 + n; j0 += panel) {
    std::int64_t const cols = std::min(panel, n0 + n - j0);
    float const* wj = w + j0 * ldw;
    ahead.count = std::min(panel, n0 + n - j0 - cols);
    ahead.rows = ahead.count > 0 ? wj + cols * ldw : nullptr;
    std::int64_t i = 0;
    for (; i + 4 <= m; i += 4) {
      ahead.slice = i / 4;
      skinny_rows<4>(a + i * lda, lda, wj, ldw, k, alpha, out + i * ldo + j0, ldo, cols, ahead);
    }
    ahead.slice = i / 4;
    switch (m - i) {
      case 3:
        skinny_rows<3>(a + i * lda, lda, wj, ldw, k, alpha, out + i * ldo + j0, ldo, cols, ahead);
        break;
      case 2:
        skinny_rows<2>(a + i * lda, lda, wj, ldw, k, alpha, out + i * ldo + j0, ldo, cols, ahead);
        break;
      case 1:
        skinny_rows<1>(a + i * lda, lda, wj, ldw, k, alpha, out + i * ldo + j0, ldo, cols, ahead);
        break;
      default:
        break;
    }
  }
}

#endif

}  // namespace detail

#if defined(__AVX512F__)
// out = alpha a . w^T, then `epilogue(row, n0, cols)` on each row's columns [n0, n0 + cols) of the calling
// thread's share (bias and activation). Shares are multiples of 16 columns, so no two threads write one cache
// line of out, and no thread waits for another before the end. Beyond kSkinnyMaxRows rows, a share runs over
// blocks of that many rows of `a`, each against the same columns of w, which stay in L2 between blocks.
template <class Epilogue>
void skinny_gemm(float const* a, std::int64_t lda, float const* w, std::int64_t ldw, float* out, std::int64_t ldo,
                 std::int64_t m, std::int64_t n, std::int64_t k, float alpha, int threads, Epilogue const& epilogue) {
  constexpr std::int64_t kAlign = 16;
  std::int64_t const chunks = (n + kAlign - 1) / kAlign;
  OpThreads const team = threads_for(static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k),
                                     kMinFmaPerThread, threads, chunks);
  run_workers(team, [&](int t, int parts) {
    std::int64_t const begin = chunks * t / parts * kAlign;
    std::int64_t const end = std::min(n, chunks * (t + 1) / parts * kAlign);
    for (std::int64_t c0 = begin; c0 < end; c0 += 256) {
      std::int64_t const cols = std::min<std::int64_t>(256, end - c0);
      for (std::int64_t r0 = 0; r0 < m; r0 += kSkinnyMaxRows) {
        std::int64_t const rows = std::min(kSkinnyMaxRows, m - r0);
        float* const block = out + r0 * ldo;
        detail::skinny_columns(a + r0 * lda, lda, w, ldw, rows, k, alpha, block, ldo, c0, cols);
        for (std::int64_t r = 0; r < rows; ++r) epilogue(block + r * ldo, c0, cols);  // while still in cache
      }
    }
  });
}
#endif

}  // namespace flashdeberta::eigen_ops

// AVX-512 micro-kernels of the host flash attention for head size 64: the (BM, 64) . (64, BN) score tile,
// the (BM, BN) . (BN, 64) p.v product and the row softmax step, over per-head packed K and V.
//
// Why: Eigen packs both operands of every small per-tile GEMM again for every tile (K once per query block,
// i.e. L / BM times per head) and reached 100-120 GFLOP/s on the 2-core Xeon of docs/benchmarks.md. Here K
// is transposed into 64-column panels and V copied contiguous once per head (O(L d)), and each tile reads
// those panels straight from L1/L2 with broadcast-FMA register tiles.
//
// Only compiled with AVX-512F (-march=native on the benchmark machine); attention_flash.hpp keeps its
// Eigen path for other head sizes and builds without AVX-512, and chooses between them in one place.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__AVX512F__)
#include <immintrin.h>

#include <Eigen/Core>
#endif

#include "flashdeberta/eigen/ops/attention_common.hpp"

namespace flashdeberta::eigen_ops::detail {

#if defined(__AVX512F__)
inline constexpr bool kHasFlashMicrokernel = true;
#else
inline constexpr bool kHasFlashMicrokernel = false;
#endif

// Head size the micro-kernels are written for (v2/v3 base and large, v1 all use 64).
inline constexpr std::int64_t kMicroHeadSize = 64;
// Key columns per packed K panel: one row of a panel is four zmm registers.
inline constexpr std::int64_t kMicroPanel = 64;

#if defined(__AVX512F__)

// K of one head as panels of 64 keys: panel p holds kt[p][e][c] = k(64 p + c, e), 64 x 64 floats, so a
// score micro-tile reads 64 consecutive floats per step. Rows [j0, j0 + n) of k; j0 a multiple of 64.
inline void pack_k_panels(ConstMatrixMap const& k, float* kt, std::int64_t j0, std::int64_t n) {
  for (std::int64_t j = j0; j < j0 + n; ++j) {
    float* panel = kt + (j / kMicroPanel) * kMicroPanel * kMicroHeadSize + (j % kMicroPanel);
    float const* row = k.data() + j * k.outerStride();
    for (std::int64_t e = 0; e < kMicroHeadSize; ++e) panel[e * kMicroPanel] = row[e];
  }
}

// rows (n, 64) of a table as 64-row panels like pack_k_panels, each value times `factor`; n a multiple of 64.
inline void pack_table_panels(ConstMatrixMap const& t, float factor, float* kt) {
  for (std::int64_t j = 0; j < t.rows(); ++j) {
    float* panel = kt + (j / kMicroPanel) * kMicroPanel * kMicroHeadSize + (j % kMicroPanel);
    float const* row = t.data() + j * t.outerStride();
    for (std::int64_t e = 0; e < kMicroHeadSize; ++e) panel[e * kMicroPanel] = factor * row[e];
  }
}

// V rows [j0, j0 + n) copied to a contiguous (L, 64) array.
inline void pack_v_rows(ConstMatrixMap const& v, float* vp, std::int64_t j0, std::int64_t n) {
  for (std::int64_t j = j0; j < j0 + n; ++j) {
    float const* row = v.data() + j * v.outerStride();
    float* dst = vp + j * kMicroHeadSize;
    for (std::int64_t e = 0; e < kMicroHeadSize; e += 16) _mm512_storeu_ps(dst + e, _mm512_loadu_ps(row + e));
  }
}

// scores[r][c] for MR rows and the 64 columns of one panel: 4 MR accumulators, 4 panel loads and MR
// broadcasts per step of the 64-long dot product.
template <int MR>
inline void score_micro(float const* q, std::int64_t q_ld, float const* panel, float* scores, std::int64_t ld) {
  __m512 c[MR][4];
  for (int r = 0; r < MR; ++r)
    for (int x = 0; x < 4; ++x) c[r][x] = _mm512_setzero_ps();
  for (std::int64_t e = 0; e < kMicroHeadSize; ++e) {
    __m512 const b0 = _mm512_loadu_ps(panel + e * kMicroPanel);
    __m512 const b1 = _mm512_loadu_ps(panel + e * kMicroPanel + 16);
    __m512 const b2 = _mm512_loadu_ps(panel + e * kMicroPanel + 32);
    __m512 const b3 = _mm512_loadu_ps(panel + e * kMicroPanel + 48);
    for (int r = 0; r < MR; ++r) {
      __m512 const a = _mm512_set1_ps(q[r * q_ld + e]);
      c[r][0] = _mm512_fmadd_ps(a, b0, c[r][0]);
      c[r][1] = _mm512_fmadd_ps(a, b1, c[r][1]);
      c[r][2] = _mm512_fmadd_ps(a, b2, c[r][2]);
      c[r][3] = _mm512_fmadd_ps(a, b3, c[r][3]);
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int x = 0; x < 4; ++x) _mm512_storeu_ps(scores + r * ld + 16 * x, c[r][x]);
}

// MR = 6 rows per register tile: 24 accumulators + 4 panel registers + 1 broadcast of the 32 zmm registers,
// the largest tile that fits (chosen by register budget alone: no other MR has been measured).
inline constexpr int kScoreRows = 6;

// scores (rows, round_up(cols, 64)) = q (rows, 64, row stride q_ld) . K^T over the panels starting at key
// j0. Columns past cols are computed from whatever the last panel holds and ignored by the caller.
inline void score_tile(float const* q, std::int64_t q_ld, float const* kt, std::int64_t j0, std::int64_t rows,
                       std::int64_t cols, float* scores, std::int64_t ld) {
  for (std::int64_t p = 0; p * kMicroPanel < cols; ++p) {
    float const* panel = kt + (j0 / kMicroPanel + p) * kMicroPanel * kMicroHeadSize;
    float* out = scores + p * kMicroPanel;
    std::int64_t r = 0;
    for (; r + kScoreRows <= rows; r += kScoreRows)
      score_micro<kScoreRows>(q + r * q_ld, q_ld, panel, out + r * ld, ld);
    switch (rows - r) {
      case 5:
        score_micro<5>(q + r * q_ld, q_ld, panel, out + r * ld, ld);
        break;
      case 4:
        score_micro<4>(q + r * q_ld, q_ld, panel, out + r * ld, ld);
        break;
      case 3:
        score_micro<3>(q + r * q_ld, q_ld, panel, out + r * ld, ld);
        break;
      case 2:
        score_micro<2>(q + r * q_ld, q_ld, panel, out + r * ld, ld);
        break;
      case 1:
        score_micro<1>(q + r * q_ld, q_ld, panel, out + r * ld, ld);
        break;
      default:
        break;
    }
  }
}

// acc[m][:] += sum_x a[m * a_out + x * a_red] . b[x * ldb][:] for MR output rows m of 64 columns (acc rows acc_ld
// apart), x < n: the accumulator rows stay in registers over the whole reduction. The strides serve the forward's
// P . V (a_out = ld, a_red = 1) and the backward's transposed products dS^T Q, P^T dO (a_out = 1, a_red = ld) alike.
template <int MR>
inline void rank_update_micro(float const* a, std::int64_t a_out, std::int64_t a_red, float const* b, std::int64_t ldb,
                              std::int64_t n, float* acc, std::int64_t acc_ld) {
  __m512 c[MR][4];
  for (int m = 0; m < MR; ++m)
    for (int x = 0; x < 4; ++x) c[m][x] = _mm512_loadu_ps(acc + m * acc_ld + 16 * x);
  for (std::int64_t x = 0; x < n; ++x) {
    float const* brow = b + x * ldb;
    __m512 const b0 = _mm512_loadu_ps(brow);
    __m512 const b1 = _mm512_loadu_ps(brow + 16);
    __m512 const b2 = _mm512_loadu_ps(brow + 32);
    __m512 const b3 = _mm512_loadu_ps(brow + 48);
    float const* column = a + x * a_red;
    for (int m = 0; m < MR; ++m) {
      __m512 const s = _mm512_set1_ps(column[m * a_out]);
      c[m][0] = _mm512_fmadd_ps(s, b0, c[m][0]);
      c[m][1] = _mm512_fmadd_ps(s, b1, c[m][1]);
      c[m][2] = _mm512_fmadd_ps(s, b2, c[m][2]);
      c[m][3] = _mm512_fmadd_ps(s, b3, c[m][3]);
    }
  }
  for (int m = 0; m < MR; ++m)
    for (int x = 0; x < 4; ++x) _mm512_storeu_ps(acc + m * acc_ld + 16 * x, c[m][x]);
}

// acc (out_rows, 64; rows acc_ld apart) += A (out_rows, n) . b (n, 64; rows ldb apart), A's element (m, x) at
// a[m * a_out + x * a_red].
inline void rank_update_tile(float const* a, std::int64_t a_out, std::int64_t a_red, float const* b, std::int64_t ldb,
                             std::int64_t out_rows, std::int64_t n, float* acc, std::int64_t acc_ld) {
  std::int64_t m = 0;
  for (; m + kScoreRows <= out_rows; m += kScoreRows)
    rank_update_micro<kScoreRows>(a + m * a_out, a_out, a_red, b, ldb, n, acc + m * acc_ld, acc_ld);
  float const* rest = a + m * a_out;
  float* rest_acc = acc + m * acc_ld;
  switch (out_rows - m) {
    case 5:
      rank_update_micro<5>(rest, a_out, a_red, b, ldb, n, rest_acc, acc_ld);
      break;
    case 4:
      rank_update_micro<4>(rest, a_out, a_red, b, ldb, n, rest_acc, acc_ld);
      break;
    case 3:
      rank_update_micro<3>(rest, a_out, a_red, b, ldb, n, rest_acc, acc_ld);
      break;
    case 2:
      rank_update_micro<2>(rest, a_out, a_red, b, ldb, n, rest_acc, acc_ld);
      break;
    case 1:
      rank_update_micro<1>(rest, a_out, a_red, b, ldb, n, rest_acc, acc_ld);
      break;
    default:
      break;
  }
}

// acc (rows, 64) += p (rows, cols, ld) . V rows [j0, j0 + cols) of the packed head.
inline void pv_tile(float const* p, std::int64_t ld, float const* vp, std::int64_t j0, std::int64_t rows,
                    std::int64_t cols, float* acc) {
  rank_update_tile(p, ld, 1, vp + j0 * kMicroHeadSize, kMicroHeadSize, rows, cols, acc, kMicroHeadSize);
}

// e^x for x <= 0 (a score minus its row maximum): x log2(e) = n + f with |f| <= 1/2, 2^f by its degree-6
// Taylor polynomial (truncation < 1.3e-7 relative), 2^n by vscalefps. About half the instructions of Eigen's
// general pexp (range reduction for either sign, ldexp through integer ops), which perf put at ~10% of the
// flash time. Below 2^-126 the result stays a denormal-free tiny value instead of 0: a weight of 1e-38
// next to the row maximum's 1 changes nothing.
inline __m512 exp_nonpositive(__m512 x) {
  __m512 const t = _mm512_max_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _mm512_set1_ps(-126.0f));
  __m512 const n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 const f = _mm512_mul_ps(_mm512_sub_ps(t, n), _mm512_set1_ps(0.693147180559945309f));  // f ln 2
  __m512 p = _mm512_set1_ps(1.0f / 720.0f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

// Online-softmax step of one row: max, then exp(x - max) in place and its sum in one pass. Returns the
// row's sum; `row_max` is updated, `correction` is exp(old - new max) (1 without a call when the maximum
// stands, as it does for most tiles after the first few: the scalar exp was ~2% of the flash time).
inline float softmax_row(float* row, std::int64_t cols, float& row_max, float& correction) {
  __m512 m = _mm512_set1_ps(row_max);
  std::int64_t c = 0;
  for (; c + 16 <= cols; c += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(row + c));
  float new_max = _mm512_reduce_max_ps(m);
  for (; c < cols; ++c) new_max = row[c] > new_max ? row[c] : new_max;
  correction = new_max == row_max ? 1.0f : std::exp(row_max - new_max);
  row_max = new_max;
  __m512 const mv = _mm512_set1_ps(new_max);
  __m512 sum = _mm512_setzero_ps();
  c = 0;
  for (; c + 16 <= cols; c += 16) {
    __m512 const e = exp_nonpositive(_mm512_sub_ps(_mm512_loadu_ps(row + c), mv));
    _mm512_storeu_ps(row + c, e);
    sum = _mm512_add_ps(sum, e);
  }
  if (c < cols) {
    __mmask16 const k = static_cast<__mmask16>((1u << (cols - c)) - 1u);
    __m512 const x = _mm512_maskz_loadu_ps(k, row + c);
    __m512 const e = _mm512_maskz_mov_ps(k, exp_nonpositive(_mm512_sub_ps(x, mv)));
    _mm512_mask_storeu_ps(row + c, k, e);
    sum = _mm512_add_ps(sum, e);
  }
  return _mm512_reduce_add_ps(sum);
}

// Band of one score row (|i - j| < saturation): score[c] += c2p_row[slot[c]] + p2c[c][slot[c]] for c in
// [begin, end), p2c rows ld floats apart. Explicit gathers: inlined into the mainloop, g++ 12 compiled the
// restrict-qualified scalar loop of attention_flash.hpp to scalar code (perf: ~28% of the mainloop's
// samples at L = 2048, a third of all elements being in the band there).
template <bool C2p, bool P2c>
inline void add_band(float* score, float const* c2p_row, float const* p2c_rows, std::int64_t ld,
                     std::int32_t const* slot, std::int64_t begin, std::int64_t end) {
  __m512i const lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512i const ld_v = _mm512_set1_epi32(static_cast<std::int32_t>(ld));
  for (std::int64_t c = begin; c < end; c += 16) {
    __mmask16 const k = end - c >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (end - c)) - 1u);
    __m512i const s = _mm512_maskz_loadu_epi32(k, slot + c);
    __m512 t = _mm512_maskz_loadu_ps(k, score + c);
    if constexpr (C2p) t = _mm512_add_ps(t, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), k, s, c2p_row, 4));
    if constexpr (P2c) {
      __m512i const row = _mm512_add_epi32(_mm512_set1_epi32(static_cast<std::int32_t>(c)), lane);
      __m512i const idx = _mm512_add_epi32(_mm512_mullo_epi32(row, ld_v), s);
      t = _mm512_add_ps(t, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), k, idx, p2c_rows, 4));
    }
    _mm512_mask_storeu_ps(score + c, k, t);
  }
}

#endif  // __AVX512F__

}  // namespace flashdeberta::eigen_ops::detail

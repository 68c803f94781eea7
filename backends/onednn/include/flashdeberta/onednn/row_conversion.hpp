// The per-call passes around a low-precision matmul: a's rows to bf16 or to s8 with a scale per row, and the
// int8 output back to float32. Each is O(rows x cols) against the matmul's O(rows x cols x N), rows split
// across threads; AVX-512 where the build has it (-march=native), a scalar loop otherwise.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "flashdeberta/core/dtype.hpp"
#include "flashdeberta/core/matrix_ref.hpp"

namespace flashdeberta::onednn {

// dst (rows, cols) dense = a rounded to bf16, nearest even (float_to_bfloat16).
inline void rows_to_bf16(MatrixRef const& a, std::uint16_t* dst, int threads) {
  std::int64_t const cols = a.cols;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t r = 0; r < a.rows; ++r) {
    float const* x = a.as<float>() + r * a.ld;
    std::uint16_t* y = dst + r * cols;
    std::int64_t c = 0;
#if defined(__AVX512BF16__)
    for (; c + 16 <= cols; c += 16) {
      __m256bh const packed = _mm512_cvtneps_pbh(_mm512_loadu_ps(x + c));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + c), reinterpret_cast<__m256i const&>(packed));
    }
#endif
    for (; c < cols; ++c) y[c] = float_to_bfloat16(x[c]);
  }
}

// Symmetric per-row quantization: scales[r] = max |a[r, :]| / levels (1 for a row of zeros), dst (rows, cols)
// dense = a / scales[r] rounded to nearest even, in [-levels, levels].
inline void quantize_rows(MatrixRef const& a, std::int8_t* dst, float* scales, float levels, int threads) {
  std::int64_t const cols = a.cols;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t r = 0; r < a.rows; ++r) {
    float const* x = a.as<float>() + r * a.ld;
    std::int8_t* y = dst + r * cols;
    float peak = 0.0f;
    std::int64_t c = 0;
#if defined(__AVX512F__)
    __m512 peaks = _mm512_setzero_ps();
    for (; c + 16 <= cols; c += 16) peaks = _mm512_max_ps(peaks, _mm512_abs_ps(_mm512_loadu_ps(x + c)));
    peak = _mm512_reduce_max_ps(peaks);
#endif
    for (; c < cols; ++c) peak = std::max(peak, std::abs(x[c]));
    float const scale = peak > 0.0f ? peak / levels : 1.0f;
    float const inverse = levels / (peak > 0.0f ? peak : levels);
    scales[r] = scale;
    c = 0;
#if defined(__AVX512F__)
    __m512 const factor = _mm512_set1_ps(inverse);
    for (; c + 16 <= cols; c += 16) {
      __m512i const q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + c), factor));  // MXCSR: nearest even
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y + c), _mm512_cvtsepi32_epi8(q));
    }
#endif
    for (; c < cols; ++c) {
      float const q = std::nearbyint(x[c] * inverse);
      y[c] = static_cast<std::int8_t>(std::clamp(q, -levels, levels));
    }
  }
}

// out (rows, cols) holds the matmul's s32 sums in its float32 storage; each becomes
// sum * row_scales[r] * col_scales[c] + bias[c] (bias may be null), then `activate(row, cols)` runs on the row.
template <class Activate>
void dequantize_rows(MatrixRef const& out, float const* row_scales, float const* col_scales, float const* bias,
                     Activate const& activate, int threads) {
  std::int64_t const cols = out.cols;
#pragma omp parallel num_threads(threads)
  {
    std::vector<std::int32_t> sums(static_cast<std::size_t>(cols));  // the row, read before it is overwritten
#pragma omp for schedule(static)
    for (std::int64_t r = 0; r < out.rows; ++r) {
      auto* row = static_cast<float*>(out.data) + r * out.ld;
      std::memcpy(sums.data(), row, static_cast<std::size_t>(cols) * sizeof(std::int32_t));
      float const row_scale = row_scales[r];
      if (bias != nullptr) {
        for (std::int64_t c = 0; c < cols; ++c)
          row[c] = static_cast<float>(sums[c]) * (row_scale * col_scales[c]) + bias[c];
      } else {
        for (std::int64_t c = 0; c < cols; ++c) row[c] = static_cast<float>(sums[c]) * (row_scale * col_scales[c]);
      }
      activate(row, cols);
    }
  }
}

// activate(row, cols) over every row of out, for activations oneDNN did not fuse.
template <class Activate>
void activate_rows(MatrixRef const& out, Activate const& activate, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t r = 0; r < out.rows; ++r) activate(static_cast<float*>(out.data) + r * out.ld, out.cols);
}

}  // namespace flashdeberta::onednn

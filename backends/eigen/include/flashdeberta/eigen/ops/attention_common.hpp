// Per-sequence, per-head views shared by the eager and flash host attention.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "flashdeberta/eigen/ops/eigen_maps.hpp"
#include "flashdeberta/policy/op_args.hpp"
#include "flashdeberta/policy/training_op_args.hpp"

namespace flashdeberta::eigen_ops {

struct HeadViews {
  ConstMatrixMap q;  // (L, d)
  ConstMatrixMap k;  // (L, d)
  ConstMatrixMap v;  // (L, d)
  MatrixMap out;     // (L, d)
};

inline HeadViews head_views(AttentionArgs const& a, std::int64_t first_token, std::int64_t length, std::int64_t head) {
  std::int64_t const d = a.head_size;
  std::int64_t const col = head * a.head_stride;
  return {cmap(a.q.as<float>() + first_token * a.q.ld + col, length, d, a.q.ld),
          cmap(a.k.as<float>() + first_token * a.k.ld + col, length, d, a.k.ld),
          cmap(a.v.as<float>() + first_token * a.v.ld + col, length, d, a.v.ld),
          map(a.out.as<float>() + first_token * a.out.ld + head * d, length, d, a.out.ld)};
}

// (2k, d) rows of the projected relative table belonging to one head.
inline ConstMatrixMap relative_head(MatrixRef const& table, std::int64_t head, std::int64_t d) {
  return cmap(table.as<float>() + head * d, table.rows, d, table.ld);
}

// The dropout of the attention probabilities (AttentionArgs::dropout): the mask of pair (h, i, j) is a pure function
// of its counter, (h T + i) max_seqlen + (j - first_j) past dropout_offset, so every path redraws it, tile by tile.
// With AVX-512DQ a row is drawn 16 counters at a time (left scalar, the loop ran at ~2.7 ns an element inside the
// flash mainloop, +75% on its forward at L = 512), comparing the generator's 24 bits with an integer threshold:
// float(u) / 2^24 >= p, both sides exact, is u >= ceil(p 2^24), so the mask is dropout_uniform's bit for bit.
struct ProbsDropout {
  float probability = 0.0f;
  float keep_scale = 1.0f;  // 1 / (1 - probability), on the kept probabilities
  std::uint64_t seed = 0;
  std::uint64_t offset = 0;
  std::int64_t tokens = 0;      // T
  std::int64_t stride = 0;      // max_seqlen: counters between consecutive query rows
  std::uint64_t threshold = 0;  // kept where the draw's 24 bits are >= threshold

  explicit ProbsDropout(AttentionArgs const& a)
      : probability(a.dropout),
        keep_scale(1.0f / (1.0f - a.dropout)),
        seed(a.dropout_seed),
        offset(a.dropout_offset),
        tokens(a.sequences.total_tokens),
        stride(a.sequences.max_seqlen),
        threshold(a.dropout > 0.0f ? static_cast<std::uint64_t>(std::ceil(double{a.dropout} * 16777216.0)) : 0) {}

  bool active() const { return probability > 0.0f; }

  // Counter of the pair (query `token` (packed), the first key of its sequence) of `head`; key c of the sequence
  // adds c, the next query row adds `stride`.
  std::uint64_t row_counter(std::int64_t head, std::int64_t token) const {
    return offset + static_cast<std::uint64_t>((head * tokens + token) * stride);
  }

  // m / (1 - p) of the pair at `counter`: keep_scale or 0.
  float factor(std::uint64_t counter) const {
    return dropout_uniform(seed, counter) >= probability ? keep_scale : 0.0f;
  }

#if defined(__AVX512F__) && defined(__AVX512DQ__)
  // Bit c of the result: the pair at counter + c is kept (dropout_uniform's steps on 8 + 8 lanes).
  __mmask16 keep16(std::uint64_t counter) const {
    auto const mix = [&](__m512i z) {
      z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)),
                             _mm512_set1_epi64(static_cast<long long>(0xBF58476D1CE4E5B9ull)));
      z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)),
                             _mm512_set1_epi64(static_cast<long long>(0x94D049BB133111EBull)));
      z = _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
      return _mm512_cmpge_epu64_mask(_mm512_srli_epi64(z, 40), _mm512_set1_epi64(static_cast<long long>(threshold)));
    };
    std::uint64_t const z0 = seed * 0x9E3779B97F4A7C15ull + counter + 0x632BE59BD9B4E019ull;
    __m512i const lo =
        _mm512_add_epi64(_mm512_set1_epi64(static_cast<long long>(z0)), _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7));
    __m512i const hi = _mm512_add_epi64(lo, _mm512_set1_epi64(8));
    return static_cast<__mmask16>(mix(lo) | (static_cast<unsigned>(mix(hi)) << 8));
  }
#endif

  // row[c] = row[c] * factor(counter + c), or 0 where dropped, for c in [0, n).
  void apply(float* __restrict row, std::int64_t n, std::uint64_t counter) const {
    std::int64_t c = 0;
#if defined(__AVX512F__) && defined(__AVX512DQ__)
    __m512 const scale = _mm512_set1_ps(keep_scale);
    for (; c < n; c += 16) {
      __mmask16 const in = n - c >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - c)) - 1u);
      __mmask16 const keep = keep16(counter + static_cast<std::uint64_t>(c));
      __m512 const x = _mm512_maskz_loadu_ps(in, row + c);
      _mm512_mask_storeu_ps(row + c, in, _mm512_maskz_mul_ps(keep, x, scale));
    }
#endif
    for (; c < n; ++c)
      row[c] =
          dropout_uniform(seed, counter + static_cast<std::uint64_t>(c)) >= probability ? row[c] * keep_scale : 0.0f;
  }

  // out[c] = factor(counter + c) for c in [0, n).
  void factors(float* __restrict out, std::int64_t n, std::uint64_t counter) const {
    std::int64_t c = 0;
#if defined(__AVX512F__) && defined(__AVX512DQ__)
    __m512 const scale = _mm512_set1_ps(keep_scale);
    for (; c < n; c += 16) {
      __mmask16 const in = n - c >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - c)) - 1u);
      _mm512_mask_storeu_ps(out + c, in, _mm512_maskz_mov_ps(keep16(counter + static_cast<std::uint64_t>(c)), scale));
    }
#endif
    for (; c < n; ++c) out[c] = factor(counter + static_cast<std::uint64_t>(c));
  }
};

inline void check_attention_args(AttentionArgs const& a) {
  FLASHDEBERTA_REQUIRE(a.dropout >= 0.0f && a.dropout < 1.0f,
                       "attention dropout (attention_probs_dropout_prob) must lie in [0, 1), not " << a.dropout);
  require_f32(a.q, "attention query");
  require_f32(a.k, "attention key");
  require_f32(a.v, "attention value");
  require_f32(a.out, "attention output");
  FLASHDEBERTA_REQUIRE(
      a.pos_key.empty() || a.pos_query.empty() || a.pos_key.rows == a.pos_query.rows,
      "relative key and query tables differ in rows: " << a.pos_key.rows << " vs " << a.pos_query.rows);
  FLASHDEBERTA_REQUIRE((a.pos_key.empty() && a.pos_query.empty()) || a.relative_index != nullptr,
                       "position terms need the relative slot table");
}

}  // namespace flashdeberta::eigen_ops

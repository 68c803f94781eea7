// The host paths taken at short sequences: the skinny GEMM (few rows, no packing; skinny_gemm.hpp) against a
// float64 product, and flash attention on the window of relative slots a batch reaches (relative_window.hpp)
// against the eager reference, which always reads the full tables.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "flashdeberta/eigen/eigen_policy.hpp"
#include "flashdeberta/math/relative_position.hpp"

namespace {

using flashdeberta::Activation;
using flashdeberta::AttentionArgs;
using flashdeberta::AttentionImpl;
using flashdeberta::DType;
using flashdeberta::EigenPolicy;
using flashdeberta::GemmArgs;
using flashdeberta::MatrixRef;

std::vector<float> normal(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

float gelu(double x) { return static_cast<float>(0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)))); }

}  // namespace

// M up to 400: at 3 threads the skinny kernel takes up to skinny_max_rows(3) = 383 rows in blocks of 128 (the
// last one partial), at 1 thread Eigen from 129 on.
TEST_CASE("host gemm at few rows: every tail of M, N and K, strides, alpha, bias and GELU") {
  for (int threads : {1, 3}) {
    EigenPolicy const policy(threads);
    for (std::int64_t m : {1, 3, 4, 7, 16, 128, 129, 300, 400}) {
      for (std::int64_t n : {1, 5, 17, 70}) {
        for (std::int64_t k : {1, 15, 16, 33, 768}) {
          std::int64_t const lda = k + 3, ldo = n + 5;
          auto const a = normal(static_cast<std::size_t>(m * lda), 1);
          auto const w = normal(static_cast<std::size_t>(n * k), 2);
          auto const bias = normal(static_cast<std::size_t>(n), 3);
          std::vector<float> out(static_cast<std::size_t>(m * ldo), -7.0f);
          GemmArgs g;
          g.a = MatrixRef{const_cast<float*>(a.data()), DType::kF32, m, k, lda};
          g.b = MatrixRef{const_cast<float*>(w.data()), DType::kF32, n, k, k};
          g.out = MatrixRef{out.data(), DType::kF32, m, n, ldo};
          g.bias = bias.data();
          g.alpha = 0.5f;
          g.activation = Activation::kGelu;
          policy.gemm(g);
          double worst = 0.0;
          for (std::int64_t i = 0; i < m; ++i) {
            for (std::int64_t j = 0; j < n; ++j) {
              double sum = 0.0;
              for (std::int64_t p = 0; p < k; ++p) sum += static_cast<double>(a[i * lda + p]) * w[j * k + p];
              double const want = gelu(0.5 * sum + bias[j]);
              worst = std::max(worst, std::abs(out[i * ldo + j] - want) / (1.0 + std::abs(want)));
            }
            for (std::int64_t j = n; j < ldo; ++j) REQUIRE(out[i * ldo + j] == -7.0f);  // past the row: untouched
          }
          INFO("threads " << threads << ", M " << m << ", N " << n << ", K " << k);
          CHECK(worst < 2e-5 * std::sqrt(static_cast<double>(k)));
        }
      }
    }
  }
}

TEST_CASE("host flash attention on the relative window of short batches equals eager over the full tables") {
  flashdeberta::ModelConfig config;
  config.position_buckets = 256;
  config.max_relative_positions = 512;
  auto const slots = flashdeberta::make_relative_slot_table(config);
  std::int64_t const heads = 3, d = 64, a_cols = heads * d, rows = 2 * slots.span;
  auto const pos_key = normal(static_cast<std::size_t>(rows * a_cols), 4);
  auto const pos_query = normal(static_cast<std::size_t>(rows * a_cols), 5);
  // Lengths around the 64-row panels and query block; the last batch has holes (masked tokens dropped).
  struct Case {
    std::vector<std::int32_t> lengths;
    std::int32_t stride;  // distance between consecutive positions
  };
  for (Case const& c :
       {Case{{1}, 1}, Case{{16}, 1}, Case{{5, 33, 16}, 1}, Case{{64, 65}, 1}, Case{{130}, 1}, Case{{20, 9}, 3}}) {
    std::vector<std::int32_t> cu{0}, positions;
    for (std::int32_t len : c.lengths) {
      for (std::int32_t t = 0; t < len; ++t) positions.push_back(t * c.stride);
      cu.push_back(cu.back() + len);
    }
    std::int64_t const tokens = cu.back();
    auto const q = normal(static_cast<std::size_t>(tokens * a_cols), 6);
    auto const k = normal(static_cast<std::size_t>(tokens * a_cols), 7);
    auto const v = normal(static_cast<std::size_t>(tokens * a_cols), 8);
    auto run = [&](AttentionImpl impl, int threads) {
      std::vector<float> out(static_cast<std::size_t>(tokens * a_cols));
      AttentionArgs args;
      auto ref = [&](float const* p, std::int64_t r) {
        return MatrixRef{const_cast<float*>(p), DType::kF32, r, a_cols, a_cols};
      };
      args.q = ref(q.data(), tokens);
      args.k = ref(k.data(), tokens);
      args.v = ref(v.data(), tokens);
      args.out = ref(out.data(), tokens);
      args.num_heads = heads;
      args.head_size = d;
      args.head_stride = d;
      args.pos_key = ref(pos_key.data(), rows);
      args.pos_query = ref(pos_query.data(), rows);
      args.relative_index = slots.slots.data();
      args.saturation = slots.saturation;
      args.scale = std::sqrt(3.0f * static_cast<float>(d));
      args.sequences.cu_seqlens = cu.data();
      args.sequences.positions = positions.data();
      args.sequences.batch = static_cast<std::int64_t>(c.lengths.size());
      args.sequences.total_tokens = tokens;
      args.sequences.max_seqlen = *std::max_element(c.lengths.begin(), c.lengths.end());
      args.sequences.max_position = *std::max_element(positions.begin(), positions.end()) + 1;
      args.sequences.contiguous_positions = c.stride == 1;
      args.impl = impl;
      EigenPolicy(threads).disentangled_attention(args);
      return out;
    };
    auto const eager = run(AttentionImpl::kEager, 1);
    for (int threads : {1, 2, 8}) {
      auto const flash = run(AttentionImpl::kFlash, threads);
      double worst = 0.0;
      for (std::size_t i = 0; i < eager.size(); ++i) worst = std::max<double>(worst, std::abs(flash[i] - eager[i]));
      INFO("first length " << c.lengths.front() << ", stride " << c.stride << ", threads " << threads);
      CHECK(worst < 2e-6);
    }
  }
}

// The dense operations of one v3-base layer, per policy: the four GEMMs (fused q/k/v projection,
// attention output, FFN in with GELU, FFN out) and the residual LayerNorm, at T = 512 and 2048 tokens and at
// the short counts where the host policy's skinny GEMM (skinny_gemm.hpp, skinny_max_rows) competes
// with Eigen's: the bare Eigen rows there say where one overtakes the other.
//
// Baselines in the same file: a bare Eigen GEMM of the same shape (no bias, no activation: what the
// epilogue costs) and a fused add of two (T, H) arrays (the memory-bound floor LayerNorm can approach).
#include <Eigen/Core>

#include "bench_common.hpp"
#include "flashdeberta/eigen/ops/dense_ops.hpp"
#include "flashdeberta/policy/profiling_policy.hpp"

namespace flashdeberta::bench {
namespace {

struct GemmShape {
  char const* name;
  std::int64_t n;  // output features (rows of the PyTorch weight)
  std::int64_t k;  // input features
  Activation activation;
};

// v3-base: hidden 768, 12 x 64 heads, intermediate 3072.
constexpr GemmShape kGemmShapes[] = {
    {"qkv", 3 * 768, 768, Activation::kIdentity},
    {"attn_out", 768, 768, Activation::kIdentity},
    {"ffn_in_gelu", 3072, 768, Activation::kGelu},
    {"ffn_out", 768, 3072, Activation::kIdentity},
};
constexpr std::int64_t kTokenCounts[] = {16, 32, 64, 96, 128, 160, 512, 2048};
constexpr std::int64_t kHidden = 768;

void set_dense_counters(benchmark::State& state, double tokens, double flops, double bytes) {
  set_rate_counters(state, tokens, flops);
  state.counters["bytes/s"] = benchmark::Counter(bytes * static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate, benchmark::Counter::kIs1024);
}

double gemm_bytes(std::int64_t m, std::int64_t n, std::int64_t k) {
  return 4.0 * static_cast<double>(m * k + n * k + m * n);
}

template <ExecutionPolicy P>
void gemm(benchmark::State& state, std::int64_t tokens, GemmShape shape) {
  P const p = make_policy<P>();
  auto const a = random_matrix(p, tokens, shape.k, 21);
  auto const b = random_matrix(p, shape.n, shape.k, 22, 0.02f);
  auto const bias = random_matrix(p, 1, shape.n, 23, 0.02f);
  auto const out = empty_matrix(p, tokens, shape.n);
  GemmArgs const args{
      .a = a.ref, .b = b.ref, .bias = bias.buffer.data(), .out = out.ref, .activation = shape.activation};
  for (auto _ : state) {
    p.gemm(args);
    p.fence();
  }
  set_dense_counters(state, static_cast<double>(tokens), gemm_flops(args), gemm_bytes(tokens, shape.n, shape.k));
}

// The same product through Eigen directly, on one thread count with the policy's (all cores).
void eigen_baseline_gemm(benchmark::State& state, std::int64_t tokens, GemmShape shape) {
  EigenPolicy const p;
  using RowMatrix = eigen_ops::RowMatrix;
  RowMatrix const a = RowMatrix::Random(tokens, shape.k);
  RowMatrix const b = RowMatrix::Random(shape.n, shape.k);
  RowMatrix out(tokens, shape.n);
  for (auto _ : state) {
    out.noalias() = a * b.transpose();
    benchmark::DoNotOptimize(out.data());
  }
  set_dense_counters(state, static_cast<double>(tokens), 2.0 * static_cast<double>(tokens * shape.n * shape.k),
                     gemm_bytes(tokens, shape.n, shape.k));
}

template <ExecutionPolicy P>
void layer_norm(benchmark::State& state, std::int64_t tokens) {
  P const p = make_policy<P>();
  auto const x = random_matrix(p, tokens, kHidden, 31);
  auto const residual = random_matrix(p, tokens, kHidden, 32);
  auto const gamma = random_matrix(p, 1, kHidden, 33);
  auto const beta = random_matrix(p, 1, kHidden, 34);
  auto const out = empty_matrix(p, tokens, kHidden);
  LayerNormArgs const args{.x = x.ref,
                           .residual = residual.ref,
                           .gamma = gamma.buffer.data(),
                           .beta = beta.buffer.data(),
                           .eps = 1e-7f,
                           .out = out.ref};
  for (auto _ : state) {
    p.layer_norm(args);
    p.fence();
  }
  // About 8 FLOP per element (add, mean, centre, square, scale, shift); reads x and residual, writes out.
  double const elements = static_cast<double>(tokens * kHidden);
  set_dense_counters(state, static_cast<double>(tokens), 8.0 * elements, 12.0 * elements);
}

// out = x + residual with OpenMP over rows: the bandwidth a residual LayerNorm must at least pay.
void add_baseline(benchmark::State& state, std::int64_t tokens) {
  EigenPolicy const p;
  std::vector<float> const x = random_values(tokens * kHidden, 41);
  std::vector<float> const residual = random_values(tokens * kHidden, 42);
  std::vector<float> out(x.size());
  auto const count = static_cast<std::int64_t>(x.size());
  for (auto _ : state) {
#pragma omp parallel for num_threads(p.threads()) schedule(static)
    for (std::int64_t i = 0; i < count; ++i) out[i] = x[i] + residual[i];
    benchmark::DoNotOptimize(out.data());
  }
  double const elements = static_cast<double>(count);
  set_dense_counters(state, static_cast<double>(tokens), elements, 12.0 * elements);
}

bool const registered = [] {
  auto const configure = [](benchmark::internal::Benchmark* b) {
    b->Unit(benchmark::kMillisecond)->UseRealTime()->MinWarmUpTime(1e-9);  // one warm-up round, untimed
  };
  for (std::int64_t tokens : kTokenCounts) {
    std::string const t = "/T:" + std::to_string(tokens);
    for (GemmShape shape : kGemmShapes) {
      for_each_policy([&]<class P>() {
        std::string const name = std::string("gemm/") + P::name() + "/" + shape.name + t;
        configure(benchmark::RegisterBenchmark(name.c_str(), gemm<P>, tokens, shape));
      });
      std::string const base = std::string("gemm/eigen_bare/") + shape.name + t;
      configure(benchmark::RegisterBenchmark(base.c_str(), eigen_baseline_gemm, tokens, shape));
    }
    for_each_policy([&]<class P>() {
      std::string const name = std::string("layer_norm/") + P::name() + t;
      configure(benchmark::RegisterBenchmark(name.c_str(), layer_norm<P>, tokens));
    });
    configure(benchmark::RegisterBenchmark(("layer_norm/add_baseline" + t).c_str(), add_baseline, tokens));
  }
  return true;
}();

}  // namespace
}  // namespace flashdeberta::bench

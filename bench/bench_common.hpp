// Shared pieces of the benchmark suites: the policies under test, v3-base shapes, random inputs in
// policy memory, and the tokens/s and FLOP/s counters every suite reports.
#pragma once

#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "bench_shapes.hpp"
#include "flashdeberta/core/batch.hpp"
#include "flashdeberta/eigen/eigen_policy.hpp"
#include "flashdeberta/math/relative_position.hpp"
#include "flashdeberta/policy/concepts.hpp"
#include "random_checkpoint.hpp"

#if defined(FLASHDEBERTA_BENCH_KOKKOS)
#include "flashdeberta/kokkos/kokkos_policy.hpp"
#endif

namespace flashdeberta::bench {

// Calls fn.template operator()<P>() for every policy this build benchmarks.
template <class Fn>
void for_each_policy(Fn&& fn) {
  fn.template operator()<EigenPolicy>();
#if defined(FLASHDEBERTA_BENCH_KOKKOS)
  fn.template operator()<KokkosPolicy<>>();
#endif
}

// Every policy with its default resources (all cores for EigenPolicy, the default execution space).
template <ExecutionPolicy P>
P make_policy() {
  return P{};
}

inline char const* impl_name(AttentionImpl impl) { return impl == AttentionImpl::kFlash ? "flash" : "eager"; }

// The attention-relevant part of deberta-v3-base's config.json, parsed as the model would.
inline ModelConfig v3_base_config() {
  ModelConfig c;
  c.model_type = ModelType::kDebertaV2;
  c.vocab_size = 128100;
  c.hidden_size = 768;
  c.num_layers = 12;
  c.num_heads = 12;
  c.head_size = 64;
  c.intermediate_size = 3072;
  c.embedding_size = 768;
  c.max_position_embeddings = 512;
  c.max_relative_positions = 512;  // -1 in the file resolves to max_position_embeddings
  c.position_buckets = 256;
  c.relative_attention = true;
  c.position_biased_input = false;
  c.share_att_key = true;
  c.norm_rel_ebd_layer_norm = true;
  c.c2p = true;
  c.p2c = true;
  c.pos_att_type_count = 2;
  return c;
}

// Every shape gets a warm-up round first (first-touch pages, OpenMP teams, oneDNN's JIT). Shapes past fast_threshold
// run for a large fraction of a second or more per iteration, where Google Benchmark would time as few as one: they
// get exactly `fixed_iterations`, and their warm-up is the benchmark function's own untimed call before its loop
// (Google Benchmark 1.7 aborts at registration when MinWarmUpTime is set beside a fixed iteration count). The others
// get one untimed iteration from Google Benchmark (MinWarmUpTime), then as many timed ones as it picks.
inline void configure_run(benchmark::internal::Benchmark* b, double work_per_iteration, double fast_threshold,
                          int fixed_iterations = 3) {
  b->Unit(benchmark::kMillisecond)->UseRealTime();
  if (work_per_iteration > fast_threshold) {
    b->Iterations(fixed_iterations);
  } else {
    b->MinWarmUpTime(1e-9);
  }
}

inline std::vector<float> random_values(std::int64_t count, std::uint64_t seed, float scale = 1.0f) {
  return random_normal(seed, "bench-input", count, 0.0f, scale);
}

// A (rows, cols) random float matrix in policy memory with the buffer that owns it.
template <ExecutionPolicy P>
struct PolicyMatrix {
  typename P::Buffer buffer;
  MatrixRef ref;
};

template <ExecutionPolicy P>
PolicyMatrix<P> random_matrix(P const& p, std::int64_t rows, std::int64_t cols, std::uint64_t seed,
                              float scale = 1.0f) {
  std::vector<float> const host = random_values(rows * cols, seed, scale);
  auto buffer = p.upload(std::span<float const>(host), p.compute_dtype());
  MatrixRef const ref{buffer.data(), buffer.dtype(), rows, cols, cols};
  return {std::move(buffer), ref};
}

template <ExecutionPolicy P>
PolicyMatrix<P> empty_matrix(P const& p, std::int64_t rows, std::int64_t cols) {
  auto buffer = p.allocate(rows * cols, p.compute_dtype());
  MatrixRef const ref{buffer.data(), buffer.dtype(), rows, cols, cols};
  return {std::move(buffer), ref};
}

// The packed-batch description of B equal sequences of length L, in policy memory.
template <ExecutionPolicy P>
struct PolicySequences {
  typename P::Buffer cu_seqlens;
  typename P::Buffer positions;
  SequenceLayout layout;

  PolicySequences(P const& p, Shape s) {
    Batch const batch = random_batch(s, 2);
    cu_seqlens = p.upload_indices(std::span<std::int32_t const>(batch.cu_seqlens));
    positions = p.upload_indices(std::span<std::int32_t const>(batch.positions));
    layout.cu_seqlens = static_cast<std::int32_t const*>(cu_seqlens.data());
    layout.positions = static_cast<std::int32_t const*>(positions.data());
    layout.batch = s.batch;
    layout.total_tokens = batch.total_tokens();
    layout.max_seqlen = s.length;
    layout.max_position = s.length;
    layout.contiguous_positions = true;
  }
};

// Per-iteration totals turned into rates by Google Benchmark (divided by the measured time).
inline void set_rate_counters(benchmark::State& state, double tokens, double flops) {
  auto const iterations = static_cast<double>(state.iterations());
  state.counters["tokens/s"] = benchmark::Counter(tokens * iterations, benchmark::Counter::kIsRate);
  state.counters["FLOP/s"] = benchmark::Counter(flops * iterations, benchmark::Counter::kIsRate);
}

}  // namespace flashdeberta::bench

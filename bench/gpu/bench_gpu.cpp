// GPU benchmarks through CudaPolicy (bf16, deberta-v3-base shape: 12 heads of 64, 256 position buckets,
// c2p + p2c): disentangled attention alone, and the whole 12-layer forward on random weights.
//   attention/B/L   one attention call on random q, k, v and position tables
//   model/B/L       DebertaV3<CudaPolicy>::forward on random token ids (ends fenced, uploads included)
//   whole_model_graph/B/L  the same forward through CudaGraphForward (the id copy, one graph launch and
//            the fence per iteration; captured before timing), on the small shapes where launches dominate
//   model_profile/B/L  the same forward through ProfilingPolicy: milliseconds per kind of operation (<op>_ms)
// Each iteration is timed with CUDA events on the policy's stream (UseManualTime). Counters:
//   TFLOP/s  attention: 4 B L^2 D H (Q.K^T and P.V, the convention of docs/performance.md; the position
//            terms are not counted); model: that x layers + 2 T x (the linear layers' weights)
//   tokens/s B L per second
//   peak_MiB device memory in use at the peak of the timed iterations beyond what was in use before
//            them (the inputs and, for the model, the weights); for the graph runner, the device memory
//            its graph holds (its private pool, every block of which stays reserved while it is cached)
// bench/compare_gpu.py runs torch SDPA and HF eager on the same shapes and tabulates the ratios.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <vector>

#include "../random_checkpoint.hpp"
#include "flashdeberta/cuda/cuda_policy.hpp"
#include "flashdeberta/cuda/event_timer.hpp"
#include "flashdeberta/cuda/graph_forward.hpp"
#include "flashdeberta/math/relative_position.hpp"
#include "flashdeberta/model/deberta_model.hpp"
#include "flashdeberta/policy/profiling_policy.hpp"

namespace fd = flashdeberta;

namespace {

constexpr std::int64_t kHeads = 12, kHeadSize = 64, kHidden = kHeads * kHeadSize;

bool have_gpu() {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
}

fd::CudaPolicy const& policy() {
  static fd::CudaPolicy const p(fd::CudaOptions{.dtype = fd::DType::kBF16});
  return p;
}

std::vector<float> random_values(std::size_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// peak_bytes: the memory figure to report (see peak_MiB above).
void set_counters(benchmark::State& state, double flop_per_iteration, double tokens, std::size_t peak_bytes) {
  double const iterations = static_cast<double>(state.iterations());
  state.counters["TFLOP/s"] = benchmark::Counter(flop_per_iteration * iterations * 1e-12, benchmark::Counter::kIsRate);
  state.counters["tokens/s"] = benchmark::Counter(tokens * iterations, benchmark::Counter::kIsRate);
  state.counters["peak_MiB"] = static_cast<double>(peak_bytes) / (1 << 20);
}

// Peak device memory in use since `before` was taken (and reset_peak_memory called), beyond `before`.
std::size_t peak_since(std::size_t before) {
  std::size_t const peak = policy().memory_stats().peak_in_use_bytes;
  return peak > before ? peak - before : 0;
}

void attention(benchmark::State& state) {
  if (!have_gpu()) return state.SkipWithError("no CUDA device");
  fd::CudaPolicy const& p = policy();
  std::int64_t const batch = state.range(0), length = state.range(1), tokens = batch * length;
  fd::ModelConfig config;
  config.model_type = fd::ModelType::kDebertaV2;
  config.position_buckets = 256;
  config.max_relative_positions = 512;
  fd::RelativeSlotTable const slots = fd::make_relative_slot_table(config);
  std::vector<std::int32_t> cu(static_cast<std::size_t>(batch + 1)), positions(static_cast<std::size_t>(tokens));
  for (std::int64_t b = 0; b <= batch; ++b) cu[static_cast<std::size_t>(b)] = static_cast<std::int32_t>(b * length);
  for (std::int64_t t = 0; t < tokens; ++t)
    positions[static_cast<std::size_t>(t)] = static_cast<std::int32_t>(t % length);
  auto const up = [&](std::vector<float> const& v) { return p.upload(std::span<float const>(v), fd::DType::kBF16); };
  auto const qkv = up(random_values(static_cast<std::size_t>(3 * tokens * kHidden), 1));
  auto const pos_key = up(random_values(static_cast<std::size_t>(2 * slots.span * kHidden), 2));
  auto const pos_query = up(random_values(static_cast<std::size_t>(2 * slots.span * kHidden), 3));
  auto const slot_buf = p.upload_indices(std::span<std::int32_t const>(slots.slots));
  auto const cu_buf = p.upload_indices(std::span<std::int32_t const>(cu));
  auto const pos_buf = p.upload_indices(std::span<std::int32_t const>(positions));
  auto const out = p.allocate(tokens * kHidden, fd::DType::kBF16);
  fd::MatrixRef const fused{qkv.data(), fd::DType::kBF16, tokens, 3 * kHidden, 3 * kHidden};
  fd::AttentionArgs args;
  fd::view_fused_qkv(args, fused, kHeadSize, fd::QkvLayout::kStacked);
  args.num_heads = kHeads;
  args.head_size = kHeadSize;
  args.pos_key = {pos_key.data(), fd::DType::kBF16, 2 * slots.span, kHidden, kHidden};
  args.pos_query = {pos_query.data(), fd::DType::kBF16, 2 * slots.span, kHidden, kHidden};
  args.relative_index = static_cast<std::int32_t const*>(slot_buf.data());
  args.saturation = slots.saturation;
  args.scale = std::sqrt(3.0f * kHeadSize);
  args.out = {out.data(), fd::DType::kBF16, tokens, kHidden, kHidden};
  args.sequences = {static_cast<std::int32_t const*>(cu_buf.data()),
                    static_cast<std::int32_t const*>(pos_buf.data()),
                    batch,
                    tokens,
                    length,
                    length,
                    true};
  p.disentangled_attention(args);  // warm-up: module load, shared-memory attribute
  p.fence();
  std::size_t const before = p.memory_stats().in_use_bytes;
  p.reset_peak_memory();
  fd::CudaEventTimer const timer;
  for (auto _ : state)
    state.SetIterationTime(1e-3 * timer.milliseconds(p.stream(), [&] { p.disentangled_attention(args); }));
  double const flop = 4.0 * static_cast<double>(batch) * static_cast<double>(length) * length * kHeadSize * kHeads;
  set_counters(state, flop, static_cast<double>(tokens), peak_since(before));
}

std::filesystem::path checkpoint_dir() {
  char const* root = std::getenv("FLASHDEBERTA_BENCH_DIR");
  return fd::bench::random_checkpoint(fd::bench::RandomCheckpointSpec::v3_base_short_vocabulary(),
                                      root != nullptr ? root : "");
}

fd::DebertaV3<fd::CudaPolicy> const& model() {
  static fd::DebertaV3<fd::CudaPolicy> const m = fd::DebertaV3<fd::CudaPolicy>::load(policy(), checkpoint_dir());
  return m;
}

using Profiled = fd::ProfilingPolicy<fd::CudaPolicy>;

// The same weights through ProfilingPolicy: each operation fenced and timed (a copy of the weights of its own).
fd::DebertaV3<Profiled> const& profiled_model() {
  static fd::DebertaV3<Profiled> const m = fd::DebertaV3<Profiled>::load(Profiled(policy()), checkpoint_dir());
  return m;
}

fd::Batch random_batch(std::int64_t batch, std::int64_t length) {
  std::mt19937 gen(7);
  fd::Batch input;
  std::vector<std::int32_t> ids(static_cast<std::size_t>(length));
  for (std::int64_t b = 0; b < batch; ++b) {
    for (auto& id : ids)
      id = static_cast<std::int32_t>(gen() % static_cast<std::uint32_t>(model().config().vocab_size));
    input.add_sequence(ids);
  }
  return input;
}

// The model's forward FLOPs: 2 T x the linear layers' weights, plus 4 B L^2 H per layer for attention.
double model_flop(std::int64_t batch, std::int64_t length) {
  fd::ModelConfig const& c = model().config();
  double const tokens = static_cast<double>(batch * length);
  double const linear =
      2.0 * tokens * c.num_layers * (4.0 * c.hidden_size * c.hidden_size + 2.0 * c.hidden_size * c.intermediate_size);
  double const attn =
      4.0 * static_cast<double>(batch) * static_cast<double>(length) * length * c.hidden_size * c.num_layers;
  return linear + attn;
}

void whole_model(benchmark::State& state) {
  if (!have_gpu()) return state.SkipWithError("no CUDA device");
  auto const& m = model();
  std::int64_t const batch = state.range(0), length = state.range(1);
  fd::Batch const input = random_batch(batch, length);
  (void)m.forward(input);  // warm-up: plans, caches
  std::size_t const before = policy().memory_stats().in_use_bytes;
  policy().reset_peak_memory();
  fd::CudaEventTimer const timer;
  for (auto _ : state)
    state.SetIterationTime(1e-3 * timer.milliseconds(policy().stream(), [&] { (void)m.forward(input); }));
  set_counters(state, model_flop(batch, length), static_cast<double>(batch * length), peak_since(before));
}

void whole_model_graph(benchmark::State& state) {
  if (!have_gpu()) return state.SkipWithError("no CUDA device");
  std::int64_t const batch = state.range(0), length = state.range(1);
  fd::Batch const input = random_batch(batch, length);
  fd::CudaGraphForward graphs(model());
  (void)graphs.forward(input);  // warm-up and capture
  fd::CudaEventTimer const timer;
  for (auto _ : state)
    state.SetIterationTime(1e-3 * timer.milliseconds(policy().stream(), [&] { (void)graphs.forward(input); }));
  if (graphs.stats().captures != 1 || graphs.stats().uncaptured != 0)
    return state.SkipWithError("the batch did not replay one graph");
  fd::cuda_detail::CachingAllocator::Stats const pools = graphs.memory_stats();
  set_counters(state, model_flop(batch, length), static_cast<double>(batch * length),
               pools.in_use_bytes + pools.cached_bytes);
}

// Where a forward's time goes: per kind of operation, its milliseconds per forward (counters <op>_ms; each operation
// fenced on both sides, so the sum, ops_ms, exceeds the plain forward's time by the launch gaps it closes).
void model_profile(benchmark::State& state) {
  if (!have_gpu()) return state.SkipWithError("no CUDA device");
  auto const& m = profiled_model();
  std::int64_t const batch = state.range(0), length = state.range(1);
  fd::Batch const input = random_batch(batch, length);
  (void)m.forward(input);  // warm-up: plans, caches
  m.policy().fence();
  m.policy().reset();
  for (auto _ : state) {
    auto const start = std::chrono::steady_clock::now();
    (void)m.forward(input);
    m.policy().fence();
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  fd::ProfileReport const report = m.policy().report();
  double const forwards = static_cast<double>(state.iterations());
  for (std::size_t k = 0; k < fd::kProfiledOpCount; ++k) {
    auto const op = static_cast<fd::ProfiledOp>(k);
    if (report[op].calls > 0)
      state.counters[std::string(fd::profiled_op_name(op)) + "_ms"] = 1e3 * report[op].seconds / forwards;
  }
  state.counters["ops_ms"] = 1e3 * report.total_seconds() / forwards;
}

void timed(benchmark::internal::Benchmark* b) {
  b->ArgNames({"B", "L"})->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(0.3);
}

// B = 1 from 128 to 131072 tokens (one sequence as long as the position buckets allow long documents), then the
// issue's batched shapes.
void shapes(benchmark::internal::Benchmark* b) {
  for (std::int64_t length = 128; length <= 131072; length *= 2) b->Args({1, length});
  b->Args({8, 1024})->Args({32, 512});
  timed(b);
}

// Where launch overhead dominates: the graph runner, and the plain forward on the one shape shapes() lacks.
void small_shapes(benchmark::internal::Benchmark* b) {
  b->Args({1, 128})->Args({1, 256})->Args({1, 512})->Args({4, 128});
  timed(b);
}

}  // namespace

BENCHMARK(attention)->Apply(shapes);
BENCHMARK(whole_model)->Apply(shapes);
BENCHMARK(whole_model)->Args({4, 128})->Apply(timed);
BENCHMARK(whole_model_graph)->Apply(small_shapes);
BENCHMARK(model_profile)->Args({32, 512})->Args({1, 4096})->Args({1, 16384})->Apply(timed);

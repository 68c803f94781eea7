// The whole backbone forward of a v3-base-shaped model with random weights (bench/random_checkpoint.hpp),
// flash attention against eager as the in-file baseline, per policy.
//
// FLOP/s counts, per layer, 2 T (4 A H + 2 H I) for the q/k/v and output projections and the FFN, plus
// the attention work counted in bench_attention.cpp. The model/profile entries run the same
// forward through ProfilingPolicy and report the share of time per op kind as counters (in percent).
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "bench_common.hpp"
#include "flashdeberta/flashdeberta.hpp"
#include "flashdeberta/policy/profiling_policy.hpp"

namespace flashdeberta::bench {
namespace {

// Loading reads ~740 MB: done once per policy type and process, on the first benchmark that needs it.
template <ExecutionPolicy P>
DebertaV3<P>& shared_model() {
  static std::unique_ptr<DebertaV3<P>> model;
  static std::once_flag once;
  std::call_once(once, [] {
    model = std::make_unique<DebertaV3<P>>(
        DebertaV3<P>::load(make_policy<P>(), random_checkpoint(RandomCheckpointSpec::v3_base())));
  });
  return *model;
}

double forward_flops(ModelConfig const& c, Shape s) {
  auto const tokens = static_cast<double>(s.batch * s.length);
  auto const h = static_cast<double>(c.hidden_size);
  auto const a = static_cast<double>(c.all_head_size());
  auto const i = static_cast<double>(c.intermediate_size);
  double const dense = 2.0 * tokens * (4.0 * a * h + 2.0 * h * i);
  double const slots = 2.0 * static_cast<double>(c.relative_span());
  double const attention = 4.0 * tokens * static_cast<double>(s.length) * a + 2.0 * 2.0 * tokens * slots * a;
  return static_cast<double>(c.num_layers) * (dense + attention);
}

template <ExecutionPolicy P>
void forward(benchmark::State& state, Shape s, AttentionImpl impl) {
  DebertaV3<P>& model = shared_model<P>();
  model.set_attention(impl);
  Batch const batch = random_batch(s, model.config().vocab_size);
  (void)model.forward(batch);  // warm-up (configure_run)
  model.policy().fence();
  for (auto _ : state) {
    HiddenStates<P> const out = model.forward(batch);
    model.policy().fence();
    benchmark::DoNotOptimize(out.values.data());
  }
  set_rate_counters(state, static_cast<double>(s.batch * s.length), forward_flops(model.config(), s));
}

// Same forward through ProfilingPolicy<P>: per-op shares of the fenced op time, plus the total.
template <ExecutionPolicy P>
void profile(benchmark::State& state, Shape s, AttentionImpl impl) {
  using Profiled = ProfilingPolicy<P>;
  DebertaV3<Profiled>& model = shared_model<Profiled>();
  model.set_attention(impl);
  Batch const batch = random_batch(s, model.config().vocab_size);
  (void)model.forward(batch);  // warm-up: first-touch pages and the thread team, outside the profile
  model.policy().reset();
  for (auto _ : state) {
    HiddenStates<Profiled> const out = model.forward(batch);
    benchmark::DoNotOptimize(out.values.data());
  }
  ProfileReport const report = model.policy().report();
  for (std::size_t k = 0; k < kProfiledOpCount; ++k) {
    auto const op = static_cast<ProfiledOp>(k);
    if (report[op].calls > 0) state.counters[std::string(profiled_op_name(op)) + "%"] = 100.0 * report.share(op);
  }
  state.counters["ops_ms"] = 1e3 * report.total_seconds() / static_cast<double>(state.iterations());
  set_rate_counters(state, static_cast<double>(s.batch * s.length), forward_flops(model.config(), s));
}

// Where production classifiers run (issue 15): single short texts and a small batch.
constexpr Shape kShortShapes[] = {{1, 16}, {1, 32}, {1, 64}, {1, 128}, {8, 128}};

// The encoder's linear layers in float32 (Eigen), bf16 and int8 (oneDNN; docs/host-dtypes.md), at the short
// shapes where production classifiers run; one model per dtype, loaded on first use.
DebertaV3<EigenPolicy>& shared_dtype_model(DType dtype) {
  static std::mutex mutex;
  static std::map<DType, std::unique_ptr<DebertaV3<EigenPolicy>>> models;
  std::lock_guard const lock(mutex);
  auto& model = models[dtype];
  if (!model) {
    EigenPolicy const policy(EigenOptions{.threads = 0, .linear_dtype = dtype});
    model = std::make_unique<DebertaV3<EigenPolicy>>(
        DebertaV3<EigenPolicy>::load(policy, random_checkpoint(RandomCheckpointSpec::v3_base())));
  }
  return *model;
}

void forward_in_dtype(benchmark::State& state, Shape s, DType dtype) {
  DebertaV3<EigenPolicy>& model = shared_dtype_model(dtype);
  Batch const batch = random_batch(s, model.config().vocab_size);
  (void)model.forward(batch);  // creates the shape's oneDNN primitives, outside the timing
  for (auto _ : state) {
    HiddenStates<EigenPolicy> const out = model.forward(batch);
    benchmark::DoNotOptimize(out.values.data());
  }
  set_rate_counters(state, static_cast<double>(s.batch * s.length), forward_flops(model.config(), s));
}

bool const registered_dtypes = [] {
  std::vector<std::pair<char const*, DType>> dtypes{{"fp32", DType::kF32}};
  if (eigen_detail::kHasOnednn) {
    dtypes.emplace_back("bf16", DType::kBF16);
    dtypes.emplace_back("int8", DType::kI8);
  }
  for (auto const& [dtype_name, dtype] : dtypes) {
    for (Shape s : kShortShapes) {
      std::string const name = std::string("model/eigen-dtype/") + dtype_name + "/flash/" + shape_name(s);
      auto* b = benchmark::RegisterBenchmark(name.c_str(), forward_in_dtype, s, dtype);
      // Seconds each at 8 x 128 on 2 cores: a fixed count, at least 3.
      configure_run(b, static_cast<double>(s.batch * s.length), 0.0, s.batch * s.length <= 64 ? 10 : 3);
    }
  }
  return true;
}();

// A 12-layer forward from 128 tokens on takes from a third of a second to tens of seconds on two cores: 3 timed
// iterations.
bool const registered = [] {
  for_each_policy([]<class P>() {
    for (AttentionImpl impl : {AttentionImpl::kEager, AttentionImpl::kFlash}) {
      for (Shape s : kShapes) {
        std::string const name = std::string("model/") + P::name() + "/" + impl_name(impl) + "/" + shape_name(s);
        auto* b = benchmark::RegisterBenchmark(name.c_str(), forward<P>, s, impl);
        configure_run(b, static_cast<double>(s.batch * s.length), 64.0);
      }
    }
    for (Shape s : {Shape{1, 16}, Shape{1, 128}, Shape{1, 512}, Shape{1, 2048}}) {
      std::string const name = std::string("model/profile/") + P::name() + "/flash/" + shape_name(s);
      auto* b = benchmark::RegisterBenchmark(name.c_str(), profile<P>, s, AttentionImpl::kFlash);
      configure_run(b, static_cast<double>(s.batch * s.length), 64.0);
    }
  });
  return true;
}();

}  // namespace
}  // namespace flashdeberta::bench

// One full training step through CudaPolicy (float32, or bf16 / fp16 mixed precision): deberta-v3-base's shape (random
// initial weights, as HF's initializer draws them), sequence classification with 2 labels, flash attention, dropout
// off; the step is zero_grads, forward with the loss, backward, global-norm clipping at 1.0 and AdamW (lr 5e-5, weight
// decay 0.01), HF Trainer's defaults (bench/bench_training.cpp runs the same step on the host).
//   training/cuda/v3-base/DTYPE/ATTENTION/BxL   one step per iteration, wall time from the first call to the fence
//                                               after AdamW
// Counters per step: fwd_bwd_ms (forward, loss, backward; fenced by the loss's download), adamw_ms (norm, clipping,
// update; fenced), tokens/s, and peak_MiB: the device memory in use at the step's peak beyond what was in use before
// it (the weights, their gradients and AdamW's moments), from CudaPolicy's allocator.
//   bench_training_gpu [--shapes=32x512,8x2048,1x8192] [--steps=3] [--attention=flash|eager] [--dtype=fp32|bf16|fp16]
//                      [--profile] [Google Benchmark flags]
// --dtype bf16 / fp16: mixed precision as `flashdeberta train --dtype` runs it (float32 master weights and
// activations, 16-bit products; fp16 with the dynamic loss scale). --profile runs the step through
// ProfilingPolicy<CudaPolicy> (every operation fenced) and adds op_<op>_ms counters: milliseconds per step in each kind
// of operation (op_linear_backward_ms, op_attention_backward_ms, op_adamw_ms, ...), where the step's time goes.
// The shapes (32 x 512, 8 x 2048, 1 x 8192) by default; 1 x 16384 and 1 x 32768 show the memory growing
// linearly with L. Without a CUDA device each benchmark reports "no CUDA device" and times nothing.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "../bench_shapes.hpp"
#include "../random_checkpoint.hpp"
#include "flashdeberta/cuda/cuda_policy.hpp"
#include "flashdeberta/io/config_json.hpp"
#include "flashdeberta/policy/profiling_policy.hpp"
#include "flashdeberta/train/loss_scale.hpp"
#include "flashdeberta/train/optimizer.hpp"
#include "flashdeberta/train/training_model.hpp"

namespace flashdeberta::bench {
namespace {

using Clock = std::chrono::steady_clock;
using Profiled = ProfilingPolicy<CudaPolicy>;

struct Settings {
  std::int64_t steps = 3;
  AttentionImpl attention = AttentionImpl::kFlash;
  DType dtype = DType::kF32;
  bool profile = false;  // --profile: the step through ProfilingPolicy, milliseconds per kind of operation
  std::vector<Shape> shapes{{32, 512}, {8, 2048}, {1, 8192}};
};

Settings& settings() {
  static Settings s;
  return s;
}

bool have_gpu() {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
}

CudaPolicy const& cuda_of(CudaPolicy const& p) { return p; }
CudaPolicy const& cuda_of(Profiled const& p) { return p.inner(); }

// The model and its optimizer on policy P (CudaPolicy, or ProfilingPolicy over it), made on first use:
// deberta-v3-base's config.json as random_checkpoint.hpp writes it, every parameter from the initializer (no 740 MB
// file to write and upload).
template <class P>
struct Trainer {
  P policy{CudaPolicy{CudaOptions{.dtype = settings().dtype}}};
  std::unique_ptr<TrainingModel<V3, P>> model;
  AdamW<P> optimizer{
      {.learning_rate = 5e-5, .weight_decay = 0.01, .max_grad_norm = 1.0, .schedule = LearningRateSchedule::kConstant}};
  std::optional<DynamicLossScale> loss_scale = loss_scale_for(settings().dtype);
};

template <class P>
Trainer<P>& trainer() {
  static Trainer<P> t;
  if (!t.model) {
    ModelConfig config = parse_model_config(RandomCheckpointSpec::v3_base().config_json().dump(), "deberta-v3-base");
    TrainingModelOptions const options{.head = HeadKind::kSequenceClassification,
                                       .problem = ProblemType::kSingleLabel,
                                       .attention = settings().attention};
    t.model = std::make_unique<TrainingModel<V3, P>>(t.policy, std::move(config), nullptr, options);
  }
  return t;
}

struct Phases {
  double forward_backward = 0.0, optimizer = 0.0;
};

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// One step; the loss's download fences the forward and backward, cudaDeviceSynchronize the optimizer.
template <class P>
double train_step(Trainer<P>& t, Batch const& batch, TrainingTargets const& targets, Phases& phases) {
  auto const start = Clock::now();
  t.model->parameters().zero_grads();
  TrainingLoss const loss =
      t.model->forward_backward(batch, targets, {}, 0, t.loss_scale ? t.loss_scale->scale() : 1.0);
  auto const backward_done = Clock::now();
  t.optimizer.step(t.model->parameters(), 1.0, t.loss_scale ? &*t.loss_scale : nullptr);
  cudaDeviceSynchronize();
  auto const end = Clock::now();
  phases.forward_backward += seconds_between(start, backward_done);
  phases.optimizer += seconds_between(backward_done, end);
  return loss.loss;
}

template <class P>
void training_step(benchmark::State& state, Shape s) {
  if (!have_gpu()) {
    state.SkipWithError("no CUDA device");
    return;
  }
  Trainer<P>& t = trainer<P>();
  CudaPolicy const& cuda = cuda_of(t.policy);
  Batch const batch = random_batch(s, t.model->config().vocab_size);
  TrainingTargets targets;
  for (std::int64_t b = 0; b < s.batch; ++b) targets.classes.push_back(b % 2);
  Phases warm_up;
  (void)train_step(t, batch, targets, warm_up);  // AdamW's moments, the allocator's bins, cuBLASLt's heuristics
  std::size_t const before = cuda.memory_stats().in_use_bytes;
  cuda.reset_peak_memory();
  if constexpr (std::is_same_v<P, Profiled>) t.policy.reset();
  Phases phases;
  double loss = 0.0;
  for (auto _ : state) {
    loss = train_step(t, batch, targets, phases);
    benchmark::DoNotOptimize(loss);
  }
  double const steps = static_cast<double>(state.iterations());
  state.counters["fwd_bwd_ms"] = 1e3 * phases.forward_backward / steps;
  state.counters["adamw_ms"] = 1e3 * phases.optimizer / steps;
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(s.batch * s.length) * steps, benchmark::Counter::kIsRate);
  std::size_t const peak = cuda.memory_stats().peak_in_use_bytes;
  state.counters["peak_MiB"] = static_cast<double>(peak - std::min(peak, before)) / (1024.0 * 1024.0);
  state.counters["weights_MiB"] = static_cast<double>(before) / (1024.0 * 1024.0);
  state.counters["loss"] = loss;
  if constexpr (std::is_same_v<P, Profiled>) {  // each operation fenced: the step is slower than the plain one
    ProfileReport const report = t.policy.report();
    for (std::size_t k = 0; k < kProfiledOpCount; ++k) {
      auto const op = static_cast<ProfiledOp>(k);
      if (report[op].calls > 0)
        state.counters["op_" + std::string(profiled_op_name(op)) + "_ms"] = 1e3 * report[op].seconds / steps;
    }
    state.counters["op_total_ms"] = 1e3 * report.total_seconds() / steps;
  }
}

char const* dtype_label(DType d) { return d == DType::kBF16 ? "bf16" : d == DType::kF16 ? "fp16" : "fp32"; }

DType parse_dtype(std::string const& v) {
  if (v == "fp32") return DType::kF32;
  if (v == "bf16") return DType::kBF16;
  if (v == "fp16") return DType::kF16;
  FLASHDEBERTA_FAIL("--dtype=" << v << ": fp32, bf16 or fp16");
}

void register_benchmarks() {
  for (Shape s : settings().shapes) {
    std::string const label = std::string("training/cuda/v3-base/") + dtype_label(settings().dtype) + "/" +
                              (settings().attention == AttentionImpl::kEager ? "eager/" : "flash/") + shape_name(s);
    auto* const run = settings().profile ? training_step<Profiled> : training_step<CudaPolicy>;
    benchmark::RegisterBenchmark((settings().profile ? label + "/profile" : label).c_str(), run, s)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->Iterations(settings().steps);
  }
}

}  // namespace
}  // namespace flashdeberta::bench

int main(int argc, char** argv) {
  using namespace flashdeberta::bench;
  Settings& s = settings();
  std::vector<char*> rest{argv[0]};
  try {
    for (int i = 1; i < argc; ++i) {
      std::string_view const arg = argv[i];
      std::string v;
      if (take_flag(arg, "--steps=", v)) {
        s.steps = std::max<std::int64_t>(1, std::atoll(v.c_str()));
      } else if (take_flag(arg, "--attention=", v)) {
        s.attention = v == "eager" ? flashdeberta::AttentionImpl::kEager : flashdeberta::AttentionImpl::kFlash;
      } else if (arg == "--profile") {
        s.profile = true;
      } else if (take_flag(arg, "--dtype=", v)) {
        s.dtype = parse_dtype(v);
      } else if (take_flag(arg, "--shapes=", v)) {
        s.shapes = parse_shapes(v);
      } else {
        rest.push_back(argv[i]);
      }
    }
  } catch (std::exception const& e) {
    std::fprintf(stderr, "bench_training_gpu: %s\n", e.what());
    return 1;
  }
  register_benchmarks();
  return run_registered_benchmarks(rest);
}

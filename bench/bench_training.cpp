// One training step on the host: zero_grads + forward_backward (sequence classification, cross-entropy) + AdamW
// (clipping at 1.0, weight decay 0.01, constant learning rate), float32, EigenPolicy at a fixed thread count, flash
// attention unless told otherwise. Dropout is off (all rates 0), as on the torch side of bench/compare_training.py,
// which runs this binary against PyTorch.
//
// Models: tiny-en (models/tiny-en, its weights; the new head initialized) and the deberta-v3-base shape (hidden 768,
// 12 layers, 12 heads, intermediate 3072, vocabulary 128100, 256 buckets, c2p|p2c, shared keys; every parameter
// initialized from the config, no checkpoint: timings do not depend on the values).
//
//   bench_training [--threads=N] [--steps=S] [--shapes=8x128,1x512] [--model-dir=DIR] [--attention=flash|eager]
//                  [--f32-linear=onednn|eigen] [Google Benchmark flags]
//       training/eigen/<model>/<attention>/B:b/L:l, one untimed warm-up step, then S steps per repetition (default 3;
//       compare_training.py passes --steps=1 with --benchmark_repetitions=R and takes the median).
//   bench_training --profile --model=tiny-en|v3-base [--shapes=...] [--steps=S] [--threads=N] [--model-dir=DIR]
//       the same steps through ProfilingPolicy<EigenPolicy> (a clock around each operation): after a warm-up step,
//       the milliseconds per step spent in each kind of operation that ran, one JSON line per shape.
//   bench_training --memory --model=tiny-en|v3-base --length=L [--threads=N] [--attention=...] [--model-dir=DIR]
//       one step at 1 x L after a warm-up step at 1 x 16 (which allocates AdamW's moments and starts the threads);
//       the peak resident memory of that step (VmHWM, reset after the warm-up through /proc/self/clear_refs) less
//       the resident memory before it, printed as one JSON line.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bench_common.hpp"
#include "flashdeberta/io/config_json.hpp"
#include "flashdeberta/policy/profiling_policy.hpp"
#include "flashdeberta/train/optimizer.hpp"
#include "flashdeberta/train/training_model.hpp"
#include "proc_status.hpp"

#ifndef FLASHDEBERTA_TINY_EN_DIR
#define FLASHDEBERTA_TINY_EN_DIR "models/tiny-en"
#endif

namespace flashdeberta::bench {
namespace {

using Model = TrainingModel<V3, EigenPolicy>;

struct Settings {
  int threads = 2;
  std::int64_t steps = 3;
  std::string model_dir = FLASHDEBERTA_TINY_EN_DIR;  // tiny-en
  AttentionImpl attention = AttentionImpl::kFlash;
  std::vector<Shape> shapes{{8, 128}, {1, 512}};
  F32Linear f32_linear = F32Linear::kAuto;  // where the float32 GEMMs run: oneDNN (the default where built) or Eigen

  EigenOptions policy_options() const { return {.threads = threads, .f32_linear = f32_linear}; }
};

Settings& settings() {
  static Settings s;
  return s;
}

// HF TrainingArguments' AdamW with weight decay 0.01 and clipping at 1.0; constant rate, so that every step of a long
// benchmark run updates (a linear schedule with no length would run at rate 0).
OptimizerOptions optimizer_options() {
  return {
      .learning_rate = 5e-5, .weight_decay = 0.01, .max_grad_norm = 1.0, .schedule = LearningRateSchedule::kConstant};
}

template <class P>
std::unique_ptr<TrainingModel<V3, P>> make_model(std::string const& name, P const& policy) {
  using M = TrainingModel<V3, P>;
  TrainingModelOptions const options{.head = HeadKind::kSequenceClassification,
                                     .problem = ProblemType::kSingleLabel,
                                     .attention = settings().attention};
  if (name == "tiny-en") return std::make_unique<M>(M::load(policy, settings().model_dir, options));
  FLASHDEBERTA_REQUIRE(name == "v3-base", "unknown model '" << name << "' (tiny-en, v3-base)");
  // deberta-v3-base's config.json (random_checkpoint.hpp writes the same for the inference benchmarks): every
  // parameter starts from the initializer, no 740 MB file to write or read.
  ModelConfig config = parse_model_config(RandomCheckpointSpec::v3_base().config_json().dump(), "deberta-v3-base");
  return std::make_unique<M>(policy, std::move(config), nullptr, options);
}

// A model and its optimizer.
template <class P = EigenPolicy>
struct BasicTrainer {
  std::unique_ptr<TrainingModel<V3, P>> model;
  AdamW<P> optimizer{optimizer_options()};
};
using Trainer = BasicTrainer<>;

// One per name and process, made on first use.
Trainer& shared_trainer(std::string const& name) {
  static std::map<std::string, Trainer> trainers;
  Trainer& t = trainers[name];
  if (!t.model) t.model = make_model(name, EigenPolicy(settings().policy_options()));
  return t;
}

struct Step {
  Batch batch;
  TrainingTargets targets;
};

Step random_step(Shape s, std::int64_t vocab) {
  Step step{random_batch(s, vocab), {}};
  for (std::int64_t b = 0; b < s.batch; ++b) step.targets.classes.push_back(b % 2);
  return step;
}

// Seconds spent in each part of the steps run so far (the benchmark's counters).
struct Phases {
  double zero = 0.0, forward_backward = 0.0, optimizer = 0.0;
};

// The step every timing and the memory mode measure.
template <class P>
double train_step(BasicTrainer<P>& t, Step const& step, Phases* phases = nullptr) {
  using Clock = std::chrono::steady_clock;
  auto const seconds = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  auto const t0 = Clock::now();
  t.model->parameters().zero_grads();
  auto const t1 = Clock::now();
  TrainingLoss const loss = t.model->forward_backward(step.batch, step.targets);
  auto const t2 = Clock::now();
  t.optimizer.step(t.model->parameters());
  auto const t3 = Clock::now();
  if (phases != nullptr) {
    phases->zero += seconds(t0, t1);
    phases->forward_backward += seconds(t1, t2);
    phases->optimizer += seconds(t2, t3);
  }
  return loss.loss;
}

void training_step(benchmark::State& state, std::string const& name, Shape s) {
  Trainer& t = shared_trainer(name);
  Step const step = random_step(s, t.model->config().vocab_size);
  // One untimed step per case and process (AdamW's moments, first-touch pages, the thread team); once, not per
  // repetition. (Google Benchmark 1.7 refuses MinWarmUpTime beside a fixed iteration count.)
  static std::map<std::string, bool> warmed;
  bool& done = warmed[name + shape_name(s)];
  if (!done) {
    (void)train_step(t, step);
    done = true;
  }
  double loss = 0.0;
  Phases phases;
  for (auto _ : state) {
    loss = train_step(t, step, &phases);
    benchmark::DoNotOptimize(loss);
  }
  // Per step, in ms: zero_grads, forward_backward (forward, loss, backward), AdamW (norm, clipping, update).
  auto const per_step = [&](double total) { return 1e3 * total / static_cast<double>(state.iterations()); };
  state.counters["zero_ms"] = per_step(phases.zero);
  state.counters["fwd_bwd_ms"] = per_step(phases.forward_backward);
  state.counters["adamw_ms"] = per_step(phases.optimizer);
  // The forward and loss alone (evaluate: the same forward, tape included, without the backward), once, outside the
  // timing: how fwd_bwd_ms splits into forward and backward.
  auto const forward_start = std::chrono::steady_clock::now();
  (void)t.model->evaluate(step.batch, step.targets);
  state.counters["fwd_only_ms"] =
      1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - forward_start).count();
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(s.batch * s.length * state.iterations()), benchmark::Counter::kIsRate);
  state.counters["threads"] = settings().threads;
  state.counters["params_M"] = static_cast<double>([&] {
                                 std::int64_t n = 0;
                                 for (std::size_t i = 0; i < t.model->parameters().size(); ++i)
                                   n += t.model->parameters().info(i).count;
                                 return n;
                               }()) /
                               1e6;
  state.counters["loss"] = loss;
}

void register_benchmarks() {
  for (char const* name : {"tiny-en", "v3-base"}) {
    for (Shape s : settings().shapes) {
      std::string const label =
          std::string("training/eigen/") + name + "/" + impl_name(settings().attention) + "/" + shape_name(s);
      auto* b = benchmark::RegisterBenchmark(label.c_str(), training_step, std::string(name), s);
      b->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(settings().steps);
    }
  }
}

// --memory: see the header comment.
int memory_mode(std::string const& name, std::int64_t length) {
  auto const start = std::chrono::steady_clock::now();
  Trainer& t = shared_trainer(name);
  std::int64_t const vocab = t.model->config().vocab_size;
  double const loaded = status_mib("VmRSS:");
  (void)train_step(t, random_step({1, 16}, vocab));
  Step const step = random_step({1, length}, vocab);
  double const before = status_mib("VmRSS:");
  std::ofstream("/proc/self/clear_refs") << "5";  // peak RSS := current RSS
  double const reset = status_mib("VmHWM:");
  auto const step_start = std::chrono::steady_clock::now();
  double const loss = train_step(t, step);
  double const step_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count();
  double const peak = status_mib("VmHWM:");
  std::printf(
      "{\"side\": \"ours\", \"model\": \"%s\", \"attention\": \"%s\", \"length\": %lld, \"threads\": %d, "
      "\"loaded_mib\": %.1f, \"before_mib\": %.1f, \"peak_mib\": %.1f, \"delta_mib\": %.1f, "
      "\"hwm_reset\": %s, \"step_s\": %.3f, \"total_s\": %.3f, \"loss\": %.6f}\n",
      name.c_str(), impl_name(settings().attention), static_cast<long long>(length), settings().threads, loaded, before,
      peak, peak - before, reset <= before + 1.0 ? "true" : "false", step_s,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), loss);
  return 0;
}

// --profile: see the header comment.
int profile_mode(std::string const& name) {
  ProfilingPolicy<EigenPolicy> const policy{EigenPolicy(settings().policy_options())};
  BasicTrainer<ProfilingPolicy<EigenPolicy>> t;
  t.model = make_model(name, policy);
  for (Shape s : settings().shapes) {
    Step const step = random_step(s, t.model->config().vocab_size);
    (void)train_step(t, step);
    policy.reset();
    Phases phases;
    auto const start = std::chrono::steady_clock::now();
    for (std::int64_t i = 0; i < settings().steps; ++i) (void)train_step(t, step, &phases);
    double const total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    auto const ms = [&](double seconds) { return 1e3 * seconds / static_cast<double>(settings().steps); };
    std::printf(
        "{\"side\": \"ours\", \"model\": \"%s\", \"batch\": %lld, \"length\": %lld, \"threads\": %d, "
        "\"steps\": %lld, \"step_ms\": %.2f, \"fwd_bwd_ms\": %.2f, \"adamw_step_ms\": %.2f, \"ops_ms\": {",
        name.c_str(), static_cast<long long>(s.batch), static_cast<long long>(s.length), settings().threads,
        static_cast<long long>(settings().steps), ms(total), ms(phases.forward_backward), ms(phases.optimizer));
    ProfileReport const report = policy.report();
    char const* separator = "";
    for (std::size_t k = 0; k < kProfiledOpCount; ++k) {
      auto const op = static_cast<ProfiledOp>(k);
      if (report[op].calls == 0) continue;
      std::printf("%s\"%s\": %.2f", separator, profiled_op_name(op), ms(report[op].seconds));
      separator = ", ";
    }
    std::printf("}}\n");
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace flashdeberta::bench

int main(int argc, char** argv) {
  using namespace flashdeberta::bench;
  Settings& s = settings();
  bool memory = false;
  bool profile = false;
  std::string model = "tiny-en";
  std::int64_t length = 1024;
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    std::string_view const arg = argv[i];
    std::string v;
    if (take_flag(arg, "--threads=", v)) {
      s.threads = std::atoi(v.c_str());
    } else if (take_flag(arg, "--steps=", v)) {
      s.steps = std::max<std::int64_t>(1, std::atoll(v.c_str()));
    } else if (take_flag(arg, "--model-dir=", v)) {
      s.model_dir = v;
    } else if (take_flag(arg, "--attention=", v)) {
      s.attention = v == "eager" ? flashdeberta::AttentionImpl::kEager : flashdeberta::AttentionImpl::kFlash;
    } else if (take_flag(arg, "--shapes=", v)) {
      try {
        s.shapes = parse_shapes(v);
      } catch (std::exception const& e) {
        std::fprintf(stderr, "bench_training: %s\n", e.what());
        return 1;
      }
    } else if (take_flag(arg, "--f32-linear=", v)) {
      s.f32_linear = v == "eigen" ? flashdeberta::F32Linear::kEigen : flashdeberta::F32Linear::kOneDnn;
    } else if (take_flag(arg, "--model=", v)) {
      model = v;
    } else if (take_flag(arg, "--length=", v)) {
      length = std::atoll(v.c_str());
    } else if (arg == "--memory") {
      memory = true;
    } else if (arg == "--profile") {
      profile = true;
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (memory || profile) {
    try {
      return memory ? memory_mode(model, length) : profile_mode(model);
    } catch (std::exception const& e) {
      std::fprintf(stderr, "bench_training: %s\n", e.what());
      return 1;
    }
  }
  register_benchmarks();
  return run_registered_benchmarks(rest);
}

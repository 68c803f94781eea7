// flashdeberta bench: times the forward pass on random token ids.
//
// One warm-up run first (it pays for first-touch page faults, thread-pool start-up and, on GPUs, lazy
// module loading), then --repeat timed runs. Each timed run ends with the policy fenced, so the time is
// the whole forward pass and not its launch.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <sys/resource.h>

#include "commands.hpp"
#include "flashdeberta/io/json.hpp"
#include "flashdeberta/runtime/loaded_model.hpp"

namespace flashdeberta::cli {

using runtime::Backend;
using runtime::DeviceRun;
using runtime::LoadedModel;
using runtime::read_model_config;
using runtime::variant_name;

namespace {

// Fixed, so two runs (and two backends) time the same ids.
constexpr std::uint64_t kSeed = 20240229;

Batch random_batch(std::int64_t batch_size, std::int64_t length, std::int64_t vocab_size) {
  std::mt19937_64 rng(kSeed);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(length));
  Batch batch;
  for (std::int64_t b = 0; b < batch_size; ++b) {
    // Modulo bias is irrelevant for timing; the ids only have to be valid.
    for (auto& id : ids) id = static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(vocab_size));
    batch.add_sequence(ids);
  }
  return batch;
}

// Linear interpolation between the closest ranks (numpy's default), on sorted samples.
double percentile(std::vector<double> const& sorted, double q) {
  double const pos = q * static_cast<double>(sorted.size() - 1);
  auto const lo = static_cast<std::size_t>(std::floor(pos));
  std::size_t const hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

// Host peak resident set size. It includes the weights, which is what a user sizing a machine needs.
std::int64_t peak_host_bytes() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
#if defined(__APPLE__)
  return static_cast<std::int64_t>(usage.ru_maxrss);  // bytes on macOS
#else
  return static_cast<std::int64_t>(usage.ru_maxrss) * 1024;  // KiB on Linux
#endif
}

}  // namespace

int bench_command(BenchOptions const& o) {
  require_max_tokens(
      o.batch * o.seq_len, o.common.max_tokens,
      "the bench batch of --batch " + std::to_string(o.batch) + " x --seq-len " + std::to_string(o.seq_len));
  Backend const backend(o.common);
  ModelConfig const config = read_model_config(o.common.model);
  auto const load_start = std::chrono::steady_clock::now();
  std::unique_ptr<LoadedModel> const model = backend.load(o.common.model, config);
  double const load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start).count();
  Batch const batch = random_batch(o.batch, o.seq_len, config.vocab_size);

  // A device backend times itself (CUDA events) and reports its device memory; host backends are timed
  // here with the host clock.
  bool const device_timed = model->device_forward(batch).has_value();  // a device backend's warm-up run
  if (!device_timed) model->forward(batch);                            // a host backend's
  std::vector<double> times_ms;
  times_ms.reserve(static_cast<std::size_t>(o.repeat));
  std::int64_t peak_device = 0;
  for (int r = 0; r < o.repeat; ++r) {
    if (device_timed) {
      DeviceRun const run = *model->device_forward(batch);
      times_ms.push_back(run.ms);
      peak_device = std::max(peak_device, run.peak_extra_bytes);
      continue;
    }
    auto const start = std::chrono::steady_clock::now();
    model->forward(batch);
    times_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times_ms.begin(), times_ms.end());
  double const median = percentile(times_ms, 0.5);
  double const p10 = percentile(times_ms, 0.1);
  double const p90 = percentile(times_ms, 0.9);
  double const tokens = static_cast<double>(o.batch * o.seq_len);
  double const tokens_per_s = median > 0.0 ? tokens / (median / 1000.0) : 0.0;
  std::int64_t const peak = peak_host_bytes();

  if (o.json) {
    nlohmann::ordered_json out;
    out["median_ms"] = median;
    out["p10_ms"] = p10;
    out["p90_ms"] = p90;
    out["tokens_per_s"] = tokens_per_s;
    out["load_ms"] = load_ms;
    out["peak_bytes"] = peak;
    out["backend"] = backend_name(o.common.backend);
    out["attention"] = attention_name(o.common.attention);
    out["batch"] = o.batch;
    out["seq_len"] = o.seq_len;
    out["repeat"] = o.repeat;
    out["timer"] = device_timed ? "cuda_events" : "host_clock";
    if (device_timed) out["peak_device_bytes"] = peak_device;
    std::cout << out.dump() << '\n';
    return 0;
  }
  char line[512];
  std::cout << "model      " << o.common.model.string() << " (" << variant_name(config) << ")\n";
  std::cout << "backend    " << describe_backend(o.common, backend.threads()) << "\n";
  std::snprintf(line, sizeof(line),
                "shape      B=%lld x L=%lld (%.0f tokens), %d timed runs after 1 warm-up\n"
                "load       %.1f ms (weights, the backend's preparation of them)\n"
                "forward    median %.3f ms, p10 %.3f ms, p90 %.3f ms\n"
                "throughput %.0f tokens/s (at the median)\n"
                "peak mem   %.1f MiB host RSS\n",
                static_cast<long long>(o.batch), static_cast<long long>(o.seq_len), tokens, o.repeat, load_ms, median,
                p10, p90, tokens_per_s, static_cast<double>(peak) / (1024.0 * 1024.0));
  std::cout << line;
  if (device_timed) {
    std::snprintf(line, sizeof(line), "device     %.1f MiB peak beyond the weights; times are CUDA events\n",
                  static_cast<double>(peak_device) / (1024.0 * 1024.0));
    std::cout << line;
  }
  return 0;
}

}  // namespace flashdeberta::cli

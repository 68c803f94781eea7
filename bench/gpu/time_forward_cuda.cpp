// Times whole forward passes of a v3-base-shaped model (random weights, bench/random_checkpoint.hpp) through
// CudaPolicy with CUDA events: the B x L shapes of the CUDA issue, each dtype, median of repeated forwards after
// warm-up, and the peak device memory of a forward beyond the weights. Correctness in the same run: the relative
// error of each dtype's last hidden state against fp32 flash on the same weights and inputs.
//
//   time_forward_cuda [DIR] [--layers N] [--profile B L]
//   DIR: where the random checkpoint is written (default /tmp). --profile: bf16 only, two warm-up forwards of
//   B x L, then one between cudaProfilerStart / Stop (for `ncu --profile-from-start off`: a per-kernel
//   breakdown of one forward).
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "../random_checkpoint.hpp"
#include "flashdeberta/cuda/cuda_policy.hpp"
#include "flashdeberta/cuda/event_timer.hpp"
#include "flashdeberta/flashdeberta.hpp"

namespace fd = flashdeberta;

namespace {

fd::Batch random_batch(std::int64_t batch, std::int64_t length, std::int64_t vocab, std::uint32_t seed) {
  std::mt19937 gen(seed);
  fd::Batch b;
  std::vector<std::int32_t> ids(static_cast<std::size_t>(length));
  for (std::int64_t i = 0; i < batch; ++i) {
    for (auto& id : ids) id = static_cast<std::int32_t>(gen() % vocab);
    b.add_sequence(ids);
  }
  return b;
}

double relative_error(std::vector<float> const& ours, std::vector<float> const& reference) {
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < ours.size(); ++i) {
    double const e = static_cast<double>(ours[i]) - reference[i];
    diff += e * e;
    norm += static_cast<double>(reference[i]) * reference[i];
  }
  return std::sqrt(diff / norm);
}

struct Timing {
  double median_ms = 0.0, min_ms = 0.0;
  double peak_extra_mib = 0.0;
};

// Median of `repeats` forwards, each bracketed by events on the policy's stream (forward ends with a
// fence, so the interval covers the whole pass including its input uploads).
Timing time_forward(fd::DebertaV3<fd::CudaPolicy> const& model, fd::Batch const& batch, int repeats) {
  fd::CudaPolicy const& p = model.policy();
  for (int i = 0; i < 3; ++i) (void)model.forward(batch);  // warm-up: plans, caches, module load
  std::size_t const weights = p.memory_stats().in_use_bytes;
  p.reset_peak_memory();
  fd::CudaEventTimer const timer;
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) ms.push_back(timer.milliseconds(p.stream(), [&] { return model.forward(batch); }));
  std::sort(ms.begin(), ms.end());
  Timing t;
  t.median_ms = ms[ms.size() / 2];
  t.min_ms = ms.front();
  t.peak_extra_mib = static_cast<double>(p.memory_stats().peak_in_use_bytes - weights) / (1 << 20);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "no CUDA device available\n");
    return 0;
  }
  std::filesystem::path root = "/tmp";
  fd::bench::RandomCheckpointSpec spec = fd::bench::RandomCheckpointSpec::v3_base_short_vocabulary();
  std::int64_t profile_batch = 0, profile_length = 0;
  for (int i = 1; i < argc; ++i) {
    std::string const arg = argv[i];
    if (arg == "--layers" && i + 1 < argc) {
      spec.num_layers = std::atoi(argv[++i]);
    } else if (arg == "--profile" && i + 2 < argc) {
      profile_batch = std::atoll(argv[++i]);
      profile_length = std::atoll(argv[++i]);
    } else {
      root = arg;
    }
  }
  std::filesystem::path const dir = fd::bench::random_checkpoint(spec, root);
  cudaDeviceProp prop{};
  FLASHDEBERTA_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs; v3-base shape, %lld layers, random weights\n", prop.name, prop.multiProcessorCount,
              static_cast<long long>(spec.num_layers));
  if (profile_batch > 0) {
    auto const model =
        fd::DebertaV3<fd::CudaPolicy>::load(fd::CudaPolicy(fd::CudaOptions{.dtype = fd::DType::kBF16}), dir);
    fd::Batch const batch = random_batch(profile_batch, profile_length, spec.vocab_size, 7);
    for (int i = 0; i < 2; ++i) (void)model.forward(batch);
    FLASHDEBERTA_CUDA_CHECK(cudaProfilerStart());
    (void)model.forward(batch);
    FLASHDEBERTA_CUDA_CHECK(cudaProfilerStop());
    return 0;
  }
  std::printf("| B x L | dtype | median ms | min ms | tokens/s | peak extra MiB | rel. error vs fp32 |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  struct Case {
    std::int64_t batch, length;
    int repeats;
  };
  // The 16-bit rows fuse GELU as cuBLASLt's tanh form (the default); "bf16 erf" keeps the exact erf pass.
  struct Variant {
    fd::DType dtype;
    bool fuse_gelu_tanh;
    std::string name;
  };
  std::vector<Variant> const variants{{fd::DType::kF32, false, "f32"},
                                      {fd::DType::kBF16, true, "bf16"},
                                      {fd::DType::kBF16, false, "bf16 erf"},
                                      {fd::DType::kF16, true, "f16"}};
  std::vector<fd::DebertaV3<fd::CudaPolicy>> models;
  for (Variant const& v : variants)
    models.push_back(fd::DebertaV3<fd::CudaPolicy>::load(
        fd::CudaPolicy(fd::CudaOptions{.dtype = v.dtype, .fuse_gelu_tanh = v.fuse_gelu_tanh}), dir));
  for (Case const c : {Case{1, 128, 50}, Case{32, 512, 20}, Case{8, 1024, 10}, Case{1, 4096, 10}}) {
    fd::Batch const batch = random_batch(c.batch, c.length, spec.vocab_size, 7);
    std::vector<float> reference;
    for (std::size_t m = 0; m < models.size(); ++m) {
      std::vector<float> const out = models[m].forward_to_host(batch);
      double err = 0.0;
      if (m == 0) {
        reference = out;
      } else {
        err = relative_error(out, reference);
      }
      Timing const t = time_forward(models[m], batch, c.repeats);
      double const tokens = static_cast<double>(c.batch * c.length);
      std::printf("| %lld x %lld | %s | %.3f | %.3f | %.0f | %.1f | %.2e |\n", static_cast<long long>(c.batch),
                  static_cast<long long>(c.length), variants[m].name.c_str(), t.median_ms, t.min_ms,
                  tokens / (t.median_ms * 1e-3), t.peak_extra_mib, err);
      std::fflush(stdout);
    }
  }
  return 0;
}

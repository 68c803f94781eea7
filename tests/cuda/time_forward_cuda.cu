// Times whole forward passes of a v3-base-shaped model (random weights) through CudaPolicy with CUDA
// events: the B x L shapes of the CUDA issue, each dtype, median of repeated forwards after warm-up, and
// the peak device memory of a forward beyond the weights. Correctness in the same run: the relative
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
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "flashdeberta/cuda/cuda_policy.hpp"
#include "flashdeberta/flashdeberta.hpp"
#include "flashdeberta/io/safetensors_writer.hpp"

namespace fd = flashdeberta;

namespace {

struct Shape {
  std::int64_t hidden = 768, layers = 12, heads = 12, intermediate = 3072, vocab = 32000, buckets = 256;
};

// deberta-v3-base's config (vocabulary cut to 32000 rows: the gather costs the same, the file less).
void write_checkpoint(std::filesystem::path const& dir, Shape const& s) {
  std::filesystem::create_directories(dir);
  fd::io::Json const config = {
      {"model_type", "deberta-v2"},     {"vocab_size", s.vocab},          {"hidden_size", s.hidden},
      {"num_hidden_layers", s.layers},  {"num_attention_heads", s.heads}, {"intermediate_size", s.intermediate},
      {"hidden_act", "gelu"},           {"max_position_embeddings", 512}, {"type_vocab_size", 0},
      {"relative_attention", true},     {"position_buckets", s.buckets},  {"max_relative_positions", -1},
      {"norm_rel_ebd", "layer_norm"},   {"share_att_key", true},          {"pos_att_type", "p2c|c2p"},
      {"position_biased_input", false}, {"layer_norm_eps", 1e-7}};
  std::ofstream(dir / "config.json") << config.dump(1);

  std::vector<std::pair<std::string, std::vector<std::int64_t>>> specs;
  auto add = [&](std::string name, std::vector<std::int64_t> shape) { specs.emplace_back(std::move(name), shape); };
  std::int64_t const h = s.hidden;
  add("embeddings.word_embeddings.weight", {s.vocab, h});
  add("embeddings.LayerNorm.weight", {h});
  add("embeddings.LayerNorm.bias", {h});
  add("encoder.rel_embeddings.weight", {2 * s.buckets, h});
  add("encoder.LayerNorm.weight", {h});
  add("encoder.LayerNorm.bias", {h});
  for (std::int64_t l = 0; l < s.layers; ++l) {
    std::string const p = "encoder.layer." + std::to_string(l) + ".";
    for (char const* proj : {"query_proj", "key_proj", "value_proj"}) {
      add(p + "attention.self." + proj + ".weight", {h, h});
      add(p + "attention.self." + proj + ".bias", {h});
    }
    add(p + "attention.output.dense.weight", {h, h});
    add(p + "attention.output.dense.bias", {h});
    add(p + "attention.output.LayerNorm.weight", {h});
    add(p + "attention.output.LayerNorm.bias", {h});
    add(p + "intermediate.dense.weight", {s.intermediate, h});
    add(p + "intermediate.dense.bias", {s.intermediate});
    add(p + "output.dense.weight", {h, s.intermediate});
    add(p + "output.dense.bias", {h});
    add(p + "output.LayerNorm.weight", {h});
    add(p + "output.LayerNorm.bias", {h});
  }
  // HF's initializer: N(0, 0.02); LayerNorm gains 1 + N(0, 0.02) so that no product is trivially zero.
  std::mt19937 gen(20261130);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<std::vector<float>> values;
  std::vector<fd::TensorToWrite> tensors;
  values.reserve(specs.size());
  for (auto const& [name, shape] : specs) {
    std::int64_t n = 1;
    for (std::int64_t d : shape) n *= d;
    std::vector<float>& v = values.emplace_back(static_cast<std::size_t>(n));
    bool const gain = name.find("LayerNorm.weight") != std::string::npos;
    for (float& x : v) x = (gain ? 1.0f : 0.0f) + dist(gen);
    tensors.push_back({name, fd::DType::kF32, shape, std::as_bytes(std::span<float const>(v))});
  }
  fd::write_safetensors(dir / "model.safetensors", tensors);
}

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
  cudaEvent_t start, stop;
  FLASHDEBERTA_CUDA_CHECK(cudaEventCreate(&start));
  FLASHDEBERTA_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    FLASHDEBERTA_CUDA_CHECK(cudaEventRecord(start, p.stream()));
    auto const out = model.forward(batch);
    FLASHDEBERTA_CUDA_CHECK(cudaEventRecord(stop, p.stream()));
    FLASHDEBERTA_CUDA_CHECK(cudaEventSynchronize(stop));
    float elapsed = 0.0f;
    FLASHDEBERTA_CUDA_CHECK(cudaEventElapsedTime(&elapsed, start, stop));
    ms.push_back(elapsed);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
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
  Shape shape;
  std::int64_t profile_batch = 0, profile_length = 0;
  for (int i = 1; i < argc; ++i) {
    std::string const arg = argv[i];
    if (arg == "--layers" && i + 1 < argc) {
      shape.layers = std::atoi(argv[++i]);
    } else if (arg == "--profile" && i + 2 < argc) {
      profile_batch = std::atoll(argv[++i]);
      profile_length = std::atoll(argv[++i]);
    } else {
      root = arg;
    }
  }
  std::filesystem::path const dir = root / ("flashdeberta_v3_base_random_" + std::to_string(shape.layers));
  write_checkpoint(dir, shape);
  cudaDeviceProp prop{};
  FLASHDEBERTA_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs; v3-base shape, %lld layers, random weights\n", prop.name, prop.multiProcessorCount,
              static_cast<long long>(shape.layers));
  if (profile_batch > 0) {
    auto const model =
        fd::DebertaV3<fd::CudaPolicy>::load(fd::CudaPolicy(fd::CudaOptions{.dtype = fd::DType::kBF16}), dir);
    fd::Batch const batch = random_batch(profile_batch, profile_length, shape.vocab, 7);
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
    fd::Batch const batch = random_batch(c.batch, c.length, shape.vocab, 7);
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

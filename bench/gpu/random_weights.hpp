// A deberta-v3-base-shaped checkpoint with random weights, for the GPU benchmarks. Host code in its own
// translation unit, so the JSON and safetensors writers stay out of the nvcc one.
#pragma once

#include <cstdint>
#include <filesystem>

namespace flashdeberta::bench_gpu {

struct ModelShape {
  std::int64_t hidden = 768, layers = 12, heads = 12, intermediate = 3072, vocab = 32000, buckets = 256;
};

// Writes config.json and model.safetensors under `dir` (created if needed) unless they are there already;
// HF's initializer N(0, 0.02), LayerNorm gains 1 + N(0, 0.02), fixed seed.
void write_random_checkpoint(std::filesystem::path const& dir, ModelShape const& shape);

}  // namespace flashdeberta::bench_gpu

// DebertaV3<CudaPolicy> from a plain C++ file (compiled by the host compiler) against an installed package:
// one fixture's forward in fp32, flash and eager, compared with HF's float64 output (expected.safetensors)
// at 1e-5. Exits 77 (skipped) on a machine without a CUDA device.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <vector>

#include <flashdeberta/cuda/cuda_policy.hpp>
#include <flashdeberta/flashdeberta.hpp>
#include <flashdeberta/io/safetensors.hpp>

namespace fd = flashdeberta;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer_cuda V3_FIXTURE_DIR\n");
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("consumer_cuda: no CUDA device, skipped\n");
    return 77;
  }
  try {
    std::filesystem::path const dir = argv[1];
    fd::SafetensorsFile const expected = fd::SafetensorsFile::open(dir / "expected.safetensors");
    std::vector<std::int64_t> const shape = expected.info("last_hidden_state").shape;  // (B, L, H)
    fd::Batch const batch = fd::Batch::from_padded(shape[0], shape[1], expected.read_i64("input_ids"),
                                                   expected.read_i64("attention_mask"));
    std::vector<float> const theirs = expected.read_f32("last_hidden_state");
    auto model = fd::DebertaV3<fd::CudaPolicy>::load(fd::CudaPolicy{}, dir);
    double worst = 0.0;
    for (fd::AttentionImpl impl : {fd::AttentionImpl::kFlash, fd::AttentionImpl::kEager}) {
      model.set_attention(impl);
      std::vector<float> const ours = model.forward_to_host(batch);  // (T, H) packed
      for (std::int64_t b = 0; b < batch.batch_size(); ++b) {
        for (std::int64_t t = batch.cu_seqlens[b]; t < batch.cu_seqlens[b + 1]; ++t) {
          std::int64_t const row = b * shape[1] + batch.positions[t];
          for (std::int64_t c = 0; c < shape[2]; ++c) {
            double const err = std::abs(double(ours[t * shape[2] + c]) - theirs[row * shape[2] + c]);
            if (!(err <= worst)) worst = std::isnan(err) ? INFINITY : err;
          }
        }
      }
    }
    std::printf("consumer_cuda: %s on the GPU, flash and eager, max abs error %.3g against HF\n", argv[1], worst);
    return worst <= 1e-5 ? 0 : 1;
  } catch (fd::Error const& e) {
    std::fprintf(stderr, "consumer_cuda: %s\n", e.what());
    return 1;
  }
}

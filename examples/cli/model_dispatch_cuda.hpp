// The CLI's CUDA backend behind an interface host translation units can use: cuda_policy.hpp holds
// device code, so model_dispatch_cuda.cu (compiled by nvcc when the build has CUDA) is the only file of
// the CLI that includes it.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "flashdeberta/core/dtype.hpp"
#include "model_dispatch.hpp"

namespace flashdeberta::cli {

class CudaBackend {
 public:
  virtual ~CudaBackend() = default;
  virtual std::unique_ptr<LoadedModel> load(std::filesystem::path const& directory, ModelConfig const& config,
                                            AttentionImpl attention, HeadKind head) const = 0;
};

// A CudaPolicy computing in `dtype` (fp32, bf16 or fp16) on device 0. Throws flashdeberta::Error, naming
// the reason, when the machine has no CUDA device.
std::unique_ptr<CudaBackend> start_cuda_backend(DType dtype);

}  // namespace flashdeberta::cli

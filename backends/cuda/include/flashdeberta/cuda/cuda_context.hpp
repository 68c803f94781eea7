// What copies of one CudaPolicy share (cuda_policy.hpp): the options it was made with and the context that owns
// the stream, the cuBLASLt handle and workspace, the caching allocator and the pinned staging ring. Host C++.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "flashdeberta/cuda/caching_allocator.hpp"
#include "flashdeberta/cuda/cublaslt_gemm.hpp"
#include "flashdeberta/cuda/cuda_check.hpp"
#include "flashdeberta/cuda/kernels/launch.hpp"
#include "flashdeberta/cuda/pinned_staging.hpp"

namespace flashdeberta {

struct CudaOptions {
  DType dtype = DType::kF32;                     // compute dtype: kF32, kBF16 or kF16
  int device = 0;                                // CUDA device ordinal
  std::size_t gemm_workspace_bytes = 32u << 20;  // cuBLASLt workspace (Hopper kernels want up to 32 MiB)
  // BF16 / F16 only: run the erf GELU of hidden_act "gelu" as cuBLASLt's fused tanh-form GELU epilogue
  // instead of a separate pass over the (T, intermediate) activation (about a tenth of a v3-base forward at
  // 32 x 512 on an H200). The two forms differ by at most 4.7e-4 (at x = 2.7), a sixteenth of half a bf16
  // ulp there and a fifth of an fp16 one; docs/cuda-notes.md has the measured effect on whole-model error.
  // F32, the parity path, always computes erf.
  bool fuse_gelu_tanh = true;
};

namespace cuda_detail {

// The resources copies of one policy share. Members are destroyed in reverse order: the cuBLASLt handle
// and workspace before the stream; the allocator outlives both as long as a buffer holds it.
struct CudaContext {
  int device = 0;
  DType dtype = DType::kF32;
  bool fuse_gelu_tanh = true;  // CudaOptions::fuse_gelu_tanh
  cuda_kernels::DeviceLimits limits;
  std::shared_ptr<CachingAllocator> allocator;
  std::shared_ptr<CachingAllocator> pool;  // when set, allocations come from it instead (CudaPolicy::PoolScope)
  cudaStream_t stream = nullptr;
  std::unique_ptr<CublasLtGemm> gemm;
  std::unique_ptr<PinnedStaging> staging;  // index uploads: pinned, asynchronous

  explicit CudaContext(CudaOptions const& options)
      : device(options.device), dtype(options.dtype), fuse_gelu_tanh(options.fuse_gelu_tanh) {
    FLASHDEBERTA_REQUIRE(dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16,
                         "CudaPolicy computes in F32, BF16 or F16, not " << dtype_name(dtype));
    FLASHDEBERTA_CUDA_CHECK(cudaSetDevice(device));
    int optin = 0;
    FLASHDEBERTA_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    limits.max_smem_per_block = static_cast<std::size_t>(optin);
    int major = 0, minor = 0;
    FLASHDEBERTA_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    FLASHDEBERTA_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    int const device_capability = 10 * major + minor;
    // The kernels run the code the driver loaded for this device: a program that carries only compute_75 PTX
    // (a T4 build) runs the sm_75 paths on any GPU, and has no bfloat16 there either.
    int const code_arch = cuda_kernels::kernel_code_arch(device);
    limits.compute_capability = std::min(device_capability, code_arch);
    // cuBLASLt has no bfloat16 GEMMs below sm_80 (a T4 is sm_75): refused here rather than at the first GEMM.
    if (dtype == DType::kBF16 && limits.compute_capability < 80) {
      cudaDeviceProp properties{};
      FLASHDEBERTA_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
      if (device_capability < 80) {
        FLASHDEBERTA_FAIL("CudaPolicy: device " << device << " (" << properties.name << ", compute capability " << major
                                                << "." << minor
                                                << ") has no bfloat16 arithmetic, which needs 8.0 or newer; compute "
                                                   "in fp16 or fp32 there");
      }
      FLASHDEBERTA_FAIL("CudaPolicy: this program's kernels for device "
                        << device << " (" << properties.name << ") are compute_" << code_arch
                        << " code, which has no bfloat16 arithmetic (8.0 or newer); compute in fp16 or fp32, or "
                           "build with CMAKE_CUDA_ARCHITECTURES including "
                        << device_capability);
    }
    allocator = std::make_shared<CachingAllocator>(device);
    FLASHDEBERTA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    try {
      // FLASHDEBERTA_INITCHECK_GEMM=1, for compute-sanitizer's initcheck only: 16-bit GEMM outputs are
      // declared 2-byte aligned, which keeps cuBLASLt off the kernels whose (TMA) stores initcheck does not
      // see (tests/cuda/initcheck_gemm_probe.cpp: it reports every read of their output); slower kernels, the
      // same products.
      char const* initcheck = std::getenv("FLASHDEBERTA_INITCHECK_GEMM");
      bool const trackable_stores = initcheck != nullptr && std::string_view(initcheck) == "1";
      gemm = std::make_unique<CublasLtGemm>(options.gemm_workspace_bytes, trackable_stores ? 2u : 256u);
      staging = std::make_unique<PinnedStaging>();
    } catch (...) {
      cudaStreamDestroy(stream);
      throw;
    }
  }
  CudaContext(CudaContext const&) = delete;
  CudaContext& operator=(CudaContext const&) = delete;
  ~CudaContext() {
    cudaStreamSynchronize(stream);  // errors at teardown are not actionable
    staging.reset();
    gemm.reset();
    cudaStreamDestroy(stream);
  }

  // Makes the policy's device current for the calling thread (a no-op when it already is).
  void activate() const {
    int current = -1;
    FLASHDEBERTA_CUDA_CHECK(cudaGetDevice(&current));
    if (current != device) FLASHDEBERTA_CUDA_CHECK(cudaSetDevice(device));
  }
};

}  // namespace cuda_detail

}  // namespace flashdeberta

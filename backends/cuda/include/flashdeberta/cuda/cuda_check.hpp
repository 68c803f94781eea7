// The one check tier for CUDA runtime and cuBLASLt calls: a failure throws flashdeberta::Error naming the
// call, the error and the source location. Host code only; device code never throws.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "flashdeberta/core/error.hpp"

namespace flashdeberta::cuda_detail {

// cublasGetStatusName lives in libcublas, which this backend does not otherwise need.
inline char const* cublas_status_name(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "CUBLAS_STATUS_LICENSE_ERROR";
    default:
      return "CUBLAS_STATUS_<unknown>";
  }
}

}  // namespace flashdeberta::cuda_detail

// FLASHDEBERTA_CUDA_CHECK(cudaMalloc(&p, bytes)) throws "CUDA error cudaErrorMemoryAllocation (out of
// memory) in cudaMalloc(&p, bytes) at file:line".
#define FLASHDEBERTA_CUDA_CHECK(call)                                                                               \
  do {                                                                                                              \
    cudaError_t const fd_cuda_status_ = (call);                                                                     \
    if (fd_cuda_status_ != cudaSuccess)                                                                             \
      ::flashdeberta::detail::throw_error([&](std::ostringstream& fd_os_) {                                         \
        fd_os_ << "CUDA error " << cudaGetErrorName(fd_cuda_status_) << " (" << cudaGetErrorString(fd_cuda_status_) \
               << ") in " #call " at " << __FILE__ << ":" << __LINE__;                                              \
      });                                                                                                           \
  } while (false)

#define FLASHDEBERTA_CUBLAS_CHECK(call)                                                                 \
  do {                                                                                                  \
    cublasStatus_t const fd_cublas_status_ = (call);                                                    \
    if (fd_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                                     \
      ::flashdeberta::detail::throw_error([&](std::ostringstream& fd_os_) {                             \
        fd_os_ << "cuBLAS error " << ::flashdeberta::cuda_detail::cublas_status_name(fd_cublas_status_) \
               << " in " #call " at " << __FILE__ << ":" << __LINE__;                                   \
      });                                                                                               \
  } while (false)

// After a kernel launch: a bad configuration surfaces here, not at the next unrelated call.
#define FLASHDEBERTA_CUDA_CHECK_LAUNCH() FLASHDEBERTA_CUDA_CHECK(cudaGetLastError())

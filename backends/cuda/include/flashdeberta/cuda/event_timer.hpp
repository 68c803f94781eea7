// Device time of work enqueued on a stream, measured by two CUDA events: what the CLI's bench and the
// forward timings report (the host clock would also count the launch queue).
#pragma once

#include <cuda_runtime_api.h>

#include <type_traits>

#include "flashdeberta/cuda/cuda_check.hpp"

namespace flashdeberta {

class CudaEventTimer {
 public:
  CudaEventTimer() {
    FLASHDEBERTA_CUDA_CHECK(cudaEventCreate(&start_));
    FLASHDEBERTA_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  CudaEventTimer(CudaEventTimer const&) = delete;
  CudaEventTimer& operator=(CudaEventTimer const&) = delete;
  ~CudaEventTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }

  // Milliseconds of device time taken by what run() enqueues on `stream` (run() must not synchronize in
  // between); waits for it to finish. What run() returns lives until the stop event is recorded: a model's
  // output buffers return to the cache when destroyed, and the timed work is what fills them.
  template <class Run>
  double milliseconds(cudaStream_t stream, Run&& run) const {
    FLASHDEBERTA_CUDA_CHECK(cudaEventRecord(start_, stream));
    if constexpr (std::is_void_v<std::invoke_result_t<Run&>>) {
      run();
      FLASHDEBERTA_CUDA_CHECK(cudaEventRecord(stop_, stream));
    } else {
      auto const result = run();
      FLASHDEBERTA_CUDA_CHECK(cudaEventRecord(stop_, stream));
    }
    FLASHDEBERTA_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0.0f;
    FLASHDEBERTA_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return static_cast<double>(ms);
  }

 private:
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

}  // namespace flashdeberta

// PinnedStaging: small host -> device copies that neither block the caller nor need its memory to live.
// The bytes are copied into the next free part of a page-locked ring and sent with cudaMemcpyAsync on the
// policy's stream. The ring restarts at its beginning only after an event recorded behind its last copy
// has completed: one wait per ring's worth of uploads, none at all within a forward pass of small shapes
// (a synchronous upload would stall the stream at each of ForwardContext's four index uploads per forward).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <mutex>

#include "flashdeberta/cuda/cuda_check.hpp"

namespace flashdeberta::cuda_detail {

class PinnedStaging {
 public:
  explicit PinnedStaging(std::size_t capacity = std::size_t{1} << 20) {
    FLASHDEBERTA_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
    reserve(capacity);
  }
  PinnedStaging(PinnedStaging const&) = delete;
  PinnedStaging& operator=(PinnedStaging const&) = delete;
  ~PinnedStaging() {
    if (pending_) cudaEventSynchronize(done_);  // errors at teardown are not actionable
    if (host_ != nullptr) cudaFreeHost(host_);
    cudaEventDestroy(done_);
  }

  // dst (device) = src (host, `bytes`), ordered on `stream`; src may be released as soon as this returns.
  void copy_to_device(void* dst, void const* src, std::size_t bytes, cudaStream_t stream) {
    if (bytes == 0) return;
    std::size_t const span = (bytes + kAlign - 1) / kAlign * kAlign;
    std::lock_guard<std::mutex> const lock(mutex_);
    if (offset_ + span > capacity_) {
      if (pending_) FLASHDEBERTA_CUDA_CHECK(cudaEventSynchronize(done_));  // every copy out of the ring is done
      pending_ = false;
      offset_ = 0;
      if (span > capacity_) reserve(std::max(span, 2 * capacity_));
    }
    char* staged = host_ + offset_;
    std::memcpy(staged, src, bytes);
    FLASHDEBERTA_CUDA_CHECK(cudaMemcpyAsync(dst, staged, bytes, cudaMemcpyHostToDevice, stream));
    FLASHDEBERTA_CUDA_CHECK(cudaEventRecord(done_, stream));
    pending_ = true;
    offset_ += span;
  }

 private:
  static constexpr std::size_t kAlign = 256;

  // Called with no copy pending.
  void reserve(std::size_t capacity) {
    if (host_ != nullptr) FLASHDEBERTA_CUDA_CHECK(cudaFreeHost(host_));
    host_ = nullptr;
    capacity_ = 0;
    void* block = nullptr;
    FLASHDEBERTA_CUDA_CHECK(cudaMallocHost(&block, capacity));
    host_ = static_cast<char*>(block);
    capacity_ = capacity;
  }

  std::mutex mutex_;
  cudaEvent_t done_ = nullptr;
  char* host_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t offset_ = 0;
  bool pending_ = false;
};

}  // namespace flashdeberta::cuda_detail

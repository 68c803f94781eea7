// CachingAllocator: keeps freed device blocks for reuse, so that repeated forwards of the same shapes never
// call cudaMalloc (which synchronizes the device and cannot run while a stream is captured into a graph).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/cuda/cuda_check.hpp"

namespace flashdeberta::cuda_detail {

// Size-binned free lists of device blocks. Blocks are handed out and returned in host order while the
// kernels using them run later on one stream; that is safe because every user of a policy's memory is
// ordered on the policy's single stream (a block returned here is only reused by work enqueued after it).
// A policy has one shared cache; CudaGraphForward gives each captured graph a private one (a pool).
class CachingAllocator {
 public:
  struct Stats {
    std::size_t in_use_bytes = 0;  // handed out and not yet returned
    std::size_t peak_in_use_bytes = 0;
    std::size_t cached_bytes = 0;        // held in free lists
    std::size_t device_allocations = 0;  // cudaMalloc calls so far
  };

  explicit CachingAllocator(int device) : device_(device) {}
  CachingAllocator(CachingAllocator const&) = delete;
  CachingAllocator& operator=(CachingAllocator const&) = delete;
  ~CachingAllocator() { release_cached(); }

  // Block sizes: multiples of 512 B up to 1 MiB, of 2 MiB above, so shapes that differ slightly share bins.
  static std::size_t bin_size(std::size_t bytes) {
    constexpr std::size_t kSmall = 512, kLarge = std::size_t{2} << 20, kSplit = std::size_t{1} << 20;
    std::size_t const unit = bytes <= kSplit ? kSmall : kLarge;
    return (bytes + unit - 1) / unit * unit;
  }

  // `stream` is the stream the block is used on. A miss while that stream is being captured into a CUDA
  // graph throws instead of calling cudaMalloc: capture forbids it, and a graph would keep using an
  // address it never allocates on replay. Capturing code warms the cache up with an eager run first.
  void* allocate(std::size_t bytes, cudaStream_t stream) {
    if (bytes == 0) return nullptr;
    std::size_t const size = bin_size(bytes);
    std::lock_guard<std::mutex> const lock(mutex_);
    auto& bin = free_[size];
    void* block = nullptr;
    if (!bin.empty()) {
      block = bin.back();
      bin.pop_back();
      stats_.cached_bytes -= size;
    } else {
      cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
      FLASHDEBERTA_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
      FLASHDEBERTA_REQUIRE(capture == cudaStreamCaptureStatusNone,
                           "a block of " << size << " bytes was not in the device cache while its stream is "
                                         << "being captured into a CUDA graph, and capture cannot call cudaMalloc; "
                                         << "run the same work once uncaptured first, so the cache holds it");
      block = device_malloc(size);
    }
    stats_.in_use_bytes += size;
    if (stats_.in_use_bytes > stats_.peak_in_use_bytes) stats_.peak_in_use_bytes = stats_.in_use_bytes;
    return block;
  }

  void release(void* block, std::size_t bytes) noexcept {
    if (block == nullptr) return;
    std::size_t const size = bin_size(bytes);
    std::lock_guard<std::mutex> const lock(mutex_);
    free_[size].push_back(block);  // may throw bad_alloc only on host exhaustion; then the block leaks
    stats_.in_use_bytes -= size;
    stats_.cached_bytes += size;
  }

  // Returns every cached block to the device (blocks in use stay with their owners).
  void release_cached() noexcept {
    std::lock_guard<std::mutex> const lock(mutex_);
    release_cached_locked();
  }

  Stats stats() const {
    std::lock_guard<std::mutex> const lock(mutex_);
    return stats_;
  }

  void reset_peak() {
    std::lock_guard<std::mutex> const lock(mutex_);
    stats_.peak_in_use_bytes = stats_.in_use_bytes;
  }

  int device() const { return device_; }

 private:
  void release_cached_locked() noexcept {
    for (auto& [size, blocks] : free_) {
      for (void* block : blocks) cudaFree(block);
      stats_.cached_bytes -= size * blocks.size();
      blocks.clear();
    }
  }

  // Called with the mutex held. On failure the cache is returned to the device and the call retried once.
  void* device_malloc(std::size_t size) {
    void* block = nullptr;
    if (cudaMalloc(&block, size) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky-free allocation error before retrying
      release_cached_locked();
      FLASHDEBERTA_CUDA_CHECK(cudaMalloc(&block, size));
    }
    ++stats_.device_allocations;
    return block;
  }

  int device_;
  mutable std::mutex mutex_;
  std::unordered_map<std::size_t, std::vector<void*>> free_;
  Stats stats_;
};

}  // namespace flashdeberta::cuda_detail

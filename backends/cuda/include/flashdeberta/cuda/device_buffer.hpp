// DeviceBuffer: RAII for one cudaMalloc allocation (no managed memory), for storage that lives as long as
// its owner (the cuBLASLt workspace). Activations and weights come from caching_allocator.hpp instead.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "flashdeberta/cuda/cuda_check.hpp"

namespace flashdeberta::cuda_detail {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes > 0) FLASHDEBERTA_CUDA_CHECK(cudaMalloc(&data_, bytes));
  }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      data_ = std::exchange(other.data_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  DeviceBuffer(DeviceBuffer const&) = delete;
  DeviceBuffer& operator=(DeviceBuffer const&) = delete;
  ~DeviceBuffer() { reset(); }

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void reset() {
    if (data_ != nullptr) cudaFree(data_);  // errors at process teardown are not actionable
    data_ = nullptr;
    bytes_ = 0;
  }

  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace flashdeberta::cuda_detail

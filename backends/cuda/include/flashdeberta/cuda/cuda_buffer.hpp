// CudaBuffer: CudaPolicy's Buffer, an owning block of device memory from the policy's caching allocator.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "flashdeberta/core/dtype.hpp"
#include "flashdeberta/core/error.hpp"
#include "flashdeberta/cuda/caching_allocator.hpp"

namespace flashdeberta {

// Owning device storage from the policy's caching allocator; returns its block to the cache when destroyed.
class CudaBuffer {
 public:
  CudaBuffer() = default;
  // `stream`: the stream the buffer is used on (see CachingAllocator::allocate).
  CudaBuffer(std::shared_ptr<cuda_detail::CachingAllocator> allocator, std::int64_t size, DType dtype,
             cudaStream_t stream)
      : allocator_(std::move(allocator)), size_(size), dtype_(dtype) {
    FLASHDEBERTA_REQUIRE(size >= 0, "cannot allocate a buffer of " << size << " elements");
    data_ = allocator_->allocate(size_bytes(), stream);
  }
  CudaBuffer(CudaBuffer&& other) noexcept
      : allocator_(std::move(other.allocator_)),
        data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        dtype_(other.dtype_) {}
  CudaBuffer& operator=(CudaBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      allocator_ = std::move(other.allocator_);
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
      dtype_ = other.dtype_;
    }
    return *this;
  }
  CudaBuffer(CudaBuffer const&) = delete;
  CudaBuffer& operator=(CudaBuffer const&) = delete;
  ~CudaBuffer() { reset(); }

  void* data() const { return data_; }
  template <class T>
  T* as() const {  // a typed device pointer, for the training layers' op arguments (as HostBuffer::as)
    return static_cast<T*>(data_);
  }
  std::int64_t size() const { return size_; }
  DType dtype() const { return dtype_; }
  std::size_t size_bytes() const { return static_cast<std::size_t>(size_) * dtype_size(dtype_); }

 private:
  void reset() noexcept {
    if (allocator_ && data_ != nullptr) allocator_->release(data_, size_bytes());
    data_ = nullptr;
    size_ = 0;
  }

  std::shared_ptr<cuda_detail::CachingAllocator> allocator_;
  void* data_ = nullptr;
  std::int64_t size_ = 0;
  DType dtype_ = DType::kF32;
};

}  // namespace flashdeberta

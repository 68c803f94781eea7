// Owning host storage for the host policies: 64-byte aligned, typed at run time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

#include "flashdeberta/core/dtype.hpp"

namespace flashdeberta {

class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(std::int64_t size, DType dtype) : size_(size), dtype_(dtype) {
    FLASHDEBERTA_REQUIRE(size >= 0, "cannot allocate a buffer of " << size << " elements");
    std::size_t const bytes = static_cast<std::size_t>(size) * dtype_size(dtype);
    if (bytes > 0) {
      std::size_t const rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
      void* p = std::aligned_alloc(kAlignment, rounded);
      if (p == nullptr) throw Error("out of host memory allocating " + std::to_string(bytes) + " bytes");
      storage_.reset(static_cast<std::byte*>(p));
    }
  }

  void* data() const { return storage_.get(); }
  std::int64_t size() const { return size_; }
  DType dtype() const { return dtype_; }
  std::size_t size_bytes() const { return static_cast<std::size_t>(size_) * dtype_size(dtype_); }

  template <class T>
  T* as() const {
    return reinterpret_cast<T*>(storage_.get());
  }

 private:
  static constexpr std::size_t kAlignment = 64;  // a cache line: full-width SIMD loads never split
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> storage_;
  std::int64_t size_ = 0;
  DType dtype_ = DType::kF32;
};

}  // namespace flashdeberta

// Owning host storage for the host policies: 64-byte aligned, typed at run time. Large blocks come from and
// go back to the process's HostBlockCache, so repeated forwards of one shape reuse warm pages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "flashdeberta/core/dtype.hpp"
#include "flashdeberta/core/host_block_cache.hpp"

namespace flashdeberta {

namespace detail {
// Gives a HostBuffer's block back to the cache with the size it was allocated with.
struct HostBlockRelease {
  std::size_t bytes = 0;
  void operator()(std::byte* p) const noexcept { HostBlockCache::instance().release(p, bytes); }
};
}  // namespace detail

class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(std::int64_t size, DType dtype) : size_(size), dtype_(dtype) {
    FLASHDEBERTA_REQUIRE(size >= 0, "cannot allocate a buffer of " << size << " elements");
    std::size_t const bytes = static_cast<std::size_t>(size) * dtype_size(dtype);
    if (bytes > 0) {
      storage_ = std::unique_ptr<std::byte, detail::HostBlockRelease>(
          static_cast<std::byte*>(HostBlockCache::instance().allocate(bytes)), detail::HostBlockRelease{bytes});
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
  std::unique_ptr<std::byte, detail::HostBlockRelease> storage_;
  std::int64_t size_ = 0;
  DType dtype_ = DType::kF32;
};

}  // namespace flashdeberta

// Host storage for the host policies, typed at run time: either owned (64-byte aligned; large blocks come from
// and go back to the process's HostBlockCache, so repeated forwards of one shape reuse warm pages) or a
// read-only view of memory someone else owns (a weight inside a mapped checkpoint), kept alive by a shared
// owner for as long as the buffer lives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "flashdeberta/core/dtype.hpp"
#include "flashdeberta/core/error.hpp"
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
      data_ = storage_.get();
    }
  }

  // `size` elements of `dtype` at `data`, which `owner` keeps valid (and unchanged) while any copy of it lives.
  // Only as aligned as `data` is (at least the element's alignment): every host kernel loads unaligned. The
  // memory may be read-only (a PROT_READ mapping): a view is never written.
  static HostBuffer view(void const* data, std::int64_t size, DType dtype, std::shared_ptr<void const> owner) {
    FLASHDEBERTA_REQUIRE(size >= 0, "cannot view a buffer of " << size << " elements");
    FLASHDEBERTA_REQUIRE(size == 0 || reinterpret_cast<std::uintptr_t>(data) % dtype_size(dtype) == 0,
                         "a view of " << dtype_name(dtype) << " elements at address " << data
                                      << " is not aligned to their size of " << dtype_size(dtype) << " bytes");
    HostBuffer buffer;
    buffer.size_ = size;
    buffer.dtype_ = dtype;
    buffer.data_ = const_cast<void*>(data);  // read-only by contract, see above
    buffer.owner_ = std::move(owner);
    return buffer;
  }

  HostBuffer(HostBuffer&& other) noexcept
      : storage_(std::move(other.storage_)),
        owner_(std::move(other.owner_)),
        data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        dtype_(other.dtype_) {}
  HostBuffer& operator=(HostBuffer&& other) noexcept {
    if (this != &other) {
      storage_ = std::move(other.storage_);
      owner_ = std::move(other.owner_);
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
      dtype_ = other.dtype_;
    }
    return *this;
  }
  HostBuffer(HostBuffer const&) = delete;
  HostBuffer& operator=(HostBuffer const&) = delete;
  ~HostBuffer() = default;

  void* data() const { return data_; }
  std::int64_t size() const { return size_; }
  DType dtype() const { return dtype_; }
  std::size_t size_bytes() const { return static_cast<std::size_t>(size_) * dtype_size(dtype_); }
  // True for a view of memory this buffer does not own (view()).
  bool is_view() const { return data_ != nullptr && storage_ == nullptr; }

  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  std::unique_ptr<std::byte, detail::HostBlockRelease> storage_;  // null for a view
  std::shared_ptr<void const> owner_;                             // what keeps a view's memory valid
  void* data_ = nullptr;
  std::int64_t size_ = 0;
  DType dtype_ = DType::kF32;
};

}  // namespace flashdeberta

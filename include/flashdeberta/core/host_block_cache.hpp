// HostBlockCache: large host blocks freed by HostBuffers, kept for reuse, binned by size.
//
// A forward pass allocates and frees the same activations every call. glibc serves blocks above its mmap
// threshold with fresh mmap pages, or grows the heap and trims it again when they are freed, so every call
// pays the kernel for zeroed pages on first touch: measured at 8% of a 32 x 128 forward on 2 cores, and a
// few hundred microseconds per call on small ones. Keeping the freed blocks makes the second call of a shape
// touch only warm pages. ONNX Runtime's CPU arena and PyTorch's CUDA caching allocator do the same for the
// same reason.
//
// The cache is process-wide (HostBuffers move between models, threads and front ends) and bounded: at most
// limit() bytes are held; a block that does not fit evicts the largest cached blocks first, and one larger
// than the whole limit is freed at once. The limit is 1 GiB unless FLASHDEBERTA_HOST_CACHE_MB says otherwise
// (0 turns the cache off); under AddressSanitizer it is off, so that a use after free is still reported.
// release_host_cache() returns every cached block to the system.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "flashdeberta/core/error.hpp"

#if defined(__linux__)
#include <sys/mman.h>
#endif

#if defined(__SANITIZE_ADDRESS__)
#define FLASHDEBERTA_HOST_CACHE_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FLASHDEBERTA_HOST_CACHE_SANITIZED 1
#endif
#endif

namespace flashdeberta {

class HostBlockCache {
 public:
  static constexpr std::size_t kAlignment = 64;  // a cache line: full-width SIMD loads never split
  // Below this, malloc's own free lists serve a block from warm memory already; only larger ones are cached.
  static constexpr std::size_t kMinCachedBytes = std::size_t{64} << 10;
  static constexpr std::size_t kDefaultLimitBytes = std::size_t{1} << 30;
  // Blocks this large (weights converted at load, large activations) are aligned to a 2 MiB page and offered
  // transparent huge pages: their first touch then takes one page fault per 2 MiB instead of 512. Where a
  // fault costs 15-20 us (a virtual machine), a float16 v3-base load spent most of its time faulting in
  // the 1.1 GB it converts (bench/load_speed.py). The alignment wastes at most 2 MiB of address space per
  // block, never touched.
  static constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;
  static constexpr std::size_t kHugeBlockBytes = std::size_t{8} << 20;

  struct Stats {
    std::size_t cached_bytes = 0;  // held for reuse
    std::size_t limit_bytes = 0;
    std::size_t hits = 0;    // allocations served from the cache
    std::size_t misses = 0;  // allocations of a cacheable size that went to the system
  };

  // The process's cache. Never destroyed: HostBuffers with static storage may be freed after any other
  // static object, and a leaked cache at exit is memory the system takes back anyway.
  static HostBlockCache& instance() {
    static HostBlockCache* const cache = new HostBlockCache(initial_limit());
    return *cache;
  }

  // The size a request of `bytes` is served with: multiples of kAlignment below kMinCachedBytes, above it
  // eight size classes per power of two (at most 12.5% more than asked), so nearby shapes share blocks.
  static std::size_t block_size(std::size_t bytes) {
    std::size_t const unit =
        bytes < kMinCachedBytes ? kAlignment : std::max<std::size_t>(std::bit_floor(bytes) / 8, 4096);
    return (bytes + unit - 1) / unit * unit;
  }

  // A kAlignment-aligned block of block_size(bytes) bytes; throws Error when the system has none.
  void* allocate(std::size_t bytes) {
    std::size_t const size = block_size(bytes);
    if (size >= kMinCachedBytes) {
      std::lock_guard<std::mutex> const lock(mutex_);
      auto const bin = free_.find(size);
      if (bin != free_.end() && !bin->second.empty()) {
        void* block = bin->second.back();
        bin->second.pop_back();
        stats_.cached_bytes -= size;
        ++stats_.hits;
        return block;
      }
      ++stats_.misses;
    }
    std::size_t const alignment = size >= kHugeBlockBytes ? kHugePageBytes : kAlignment;
    // aligned_alloc takes whole multiples of the alignment (the tail past `size` is never touched).
    std::size_t const allocated = (size + alignment - 1) / alignment * alignment;
    void* block = std::aligned_alloc(alignment, allocated);
    if (block == nullptr) {
      release_host_cache_now();  // the cached blocks may be what the system lacks
      block = std::aligned_alloc(alignment, allocated);
    }
    if (block == nullptr) throw Error("out of host memory allocating " + std::to_string(bytes) + " bytes");
    if (alignment == kHugePageBytes) advise_huge_pages(block, allocated);
    return block;
  }

  // Linux's MADV_HUGEPAGE (THP in "madvise" mode serves only such ranges); elsewhere, or when refused, the
  // block keeps ordinary pages.
  static void advise_huge_pages([[maybe_unused]] void* block, [[maybe_unused]] std::size_t size) noexcept {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    ::madvise(block, size, MADV_HUGEPAGE);
#endif
  }

  // Takes back a block allocate(bytes) returned.
  void release(void* block, std::size_t bytes) noexcept {
    if (block == nullptr) return;
    std::size_t const size = block_size(bytes);
    if (size < kMinCachedBytes) {
      std::free(block);
      return;
    }
    std::lock_guard<std::mutex> const lock(mutex_);
    if (size > stats_.limit_bytes || !make_room_locked(size)) {
      std::free(block);
      return;
    }
    try {
      free_[size].push_back(block);
      stats_.cached_bytes += size;
    } catch (...) {
      std::free(block);  // no memory for the list entry: give the block back instead
    }
  }

  // Bounds the cache to `bytes` (0: off), freeing what no longer fits.
  void set_limit(std::size_t bytes) noexcept {
    std::lock_guard<std::mutex> const lock(mutex_);
    stats_.limit_bytes = bytes;
    evict_locked(bytes);
  }

  void release_host_cache_now() noexcept {
    std::lock_guard<std::mutex> const lock(mutex_);
    evict_locked(0);
  }

  Stats stats() const {
    std::lock_guard<std::mutex> const lock(mutex_);
    return stats_;
  }

 private:
  explicit HostBlockCache(std::size_t limit) { stats_.limit_bytes = limit; }

  static std::size_t initial_limit() {
#ifdef FLASHDEBERTA_HOST_CACHE_SANITIZED
    return 0;
#else
    char const* const megabytes = std::getenv("FLASHDEBERTA_HOST_CACHE_MB");
    if (megabytes == nullptr || *megabytes == '\0') return kDefaultLimitBytes;
    char* end = nullptr;
    unsigned long long const value = std::strtoull(megabytes, &end, 10);
    // An unreadable value keeps the default rather than failing a program over a tuning variable.
    if (end == megabytes || *end != '\0' || value > (std::size_t{1} << 24)) return kDefaultLimitBytes;
    return static_cast<std::size_t>(value) << 20;
#endif
  }

  // Frees the largest cached blocks until `incoming` more bytes fit under the limit.
  bool make_room_locked(std::size_t incoming) noexcept {
    if (stats_.cached_bytes + incoming <= stats_.limit_bytes) return true;
    evict_locked(stats_.limit_bytes - incoming);
    return stats_.cached_bytes + incoming <= stats_.limit_bytes;
  }

  // Frees cached blocks, largest first, until at most `keep` bytes are held.
  void evict_locked(std::size_t keep) noexcept {
    for (auto bin = free_.rbegin(); bin != free_.rend() && stats_.cached_bytes > keep; ++bin) {
      auto& blocks = bin->second;
      while (!blocks.empty() && stats_.cached_bytes > keep) {
        std::free(blocks.back());
        blocks.pop_back();
        stats_.cached_bytes -= bin->first;
      }
    }
  }

  mutable std::mutex mutex_;
  std::map<std::size_t, std::vector<void*>> free_;  // block size -> free blocks of that size
  Stats stats_;
};

// Returns every block the host cache holds to the system (a long-lived process after its last forward, say).
inline void release_host_cache() noexcept { HostBlockCache::instance().release_host_cache_now(); }

}  // namespace flashdeberta

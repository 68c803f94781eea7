// WeightArena: host memory for the weights of loaded models smaller than HostBlockCache::kHugeBlockBytes, carved
// from shared 2 MiB-aligned chunks offered transparent huge pages.
//
// Such weights (v3-base's 768 x 768 projections and its stacked q/k/v, every matrix of a small model, the packed
// copies oneDNN makes) would each take a block of ordinary 4 KiB pages of their own, and the first touch of those
// costs a page fault per 4 KiB. Where faults are expensive (a virtual machine: this project's 2-core VM first-touched
// 30 MB in 80 ms in 4 KiB pages against 2.8 ms in huge pages), that was most of a small model's load and the gap
// between a float16 v3-base load, which converts into fresh memory, and a float32 one, which maps the file.
//
// Carving is a bump of an offset under a lock. A chunk lives while any weight carved from it does (each weight's
// owner shares the chunk); its memory is not reused before then, so a process that loads and frees models keeps at
// most the current chunk beyond the models it holds. Under AddressSanitizer every weight gets its own block, so
// that a use after free is still reported.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/core/host_block_cache.hpp"

namespace flashdeberta {

class WeightArena {
 public:
  static constexpr std::size_t kAlignment = HostBlockCache::kAlignment;
  static constexpr std::size_t kChunkBytes = std::size_t{16} << 20;
  // Weights from this size on take a huge-page block of their own (HostBlockCache, oneDNN's packed storage).
  static constexpr std::size_t kLargestCarved = HostBlockCache::kHugeBlockBytes;

  // The process's arena. Never destroyed: weights with static storage may outlive any other static object.
  static WeightArena& instance() {
    static WeightArena* const arena = new WeightArena();
    return *arena;
  }

  // kAlignment-aligned storage of `bytes` (below kLargestCarved), valid while the returned owner or a copy lives.
  std::shared_ptr<void> allocate(std::size_t bytes) {
    std::size_t const size = (std::max<std::size_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
#if defined(FLASHDEBERTA_HOST_CACHE_SANITIZED)
    return std::shared_ptr<void>(checked_alloc(kAlignment, size), [](void* p) { std::free(p); });
#else
    std::lock_guard<std::mutex> const lock(mutex_);
    if (chunk_ == nullptr || used_ + size > chunk_bytes_) {
      std::size_t const page = HostBlockCache::kHugePageBytes;
      chunk_bytes_ = std::max(kChunkBytes, (size + page - 1) / page * page);
      void* const block = checked_alloc(page, chunk_bytes_);
      HostBlockCache::advise_huge_pages(block, chunk_bytes_);
      chunk_ = std::shared_ptr<std::byte>(static_cast<std::byte*>(block), [](std::byte* p) { std::free(p); });
      used_ = 0;
    }
    void* const carved = chunk_.get() + used_;
    used_ += size;
    return std::shared_ptr<void>(chunk_, carved);
#endif
  }

 private:
  static void* checked_alloc(std::size_t alignment, std::size_t bytes) {
    void* block = std::aligned_alloc(alignment, bytes);
    if (block == nullptr) {
      release_host_cache();  // the cached blocks may be what the system lacks
      block = std::aligned_alloc(alignment, bytes);
    }
    if (block == nullptr) throw Error("out of host memory allocating " + std::to_string(bytes) + " bytes for weights");
    return block;
  }

  std::mutex mutex_;
  std::shared_ptr<std::byte> chunk_;
  std::size_t chunk_bytes_ = 0;
  std::size_t used_ = 0;
};

}  // namespace flashdeberta

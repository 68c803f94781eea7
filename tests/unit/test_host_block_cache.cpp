// HostBlockCache: size classes, reuse, the limit and its eviction order, sharing between threads, and
// HostBuffer drawing on it; the WeightArena beside it. The process-wide cache is the one under test; each case sets the
// limit it needs (under AddressSanitizer the cache starts off) and restores it.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "flashdeberta/core/host_block_cache.hpp"
#include "flashdeberta/core/host_buffer.hpp"
#include "flashdeberta/core/weight_arena.hpp"

using flashdeberta::DType;
using flashdeberta::HostBlockCache;
using flashdeberta::HostBuffer;

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

// Sets the cache's limit for one test case, empties it, and puts the previous limit back afterwards.
class ScopedLimit {
 public:
  explicit ScopedLimit(std::size_t bytes) : previous_(HostBlockCache::instance().stats().limit_bytes) {
    HostBlockCache::instance().release_host_cache_now();
    HostBlockCache::instance().set_limit(bytes);
  }
  ~ScopedLimit() {
    HostBlockCache::instance().release_host_cache_now();
    HostBlockCache::instance().set_limit(previous_);
  }
  ScopedLimit(ScopedLimit const&) = delete;
  ScopedLimit& operator=(ScopedLimit const&) = delete;

 private:
  std::size_t previous_;
};

}  // namespace

TEST_CASE("block sizes: aligned, never smaller than asked, at most 12.5% larger above the cached minimum") {
  for (std::size_t bytes :
       {std::size_t{1}, std::size_t{63}, std::size_t{64}, std::size_t{65}, std::size_t{4000},
        HostBlockCache::kMinCachedBytes - 1, HostBlockCache::kMinCachedBytes, HostBlockCache::kMinCachedBytes + 1,
        std::size_t{3} * kMiB + 17, std::size_t{50} * kMiB, std::size_t{1} << 33}) {
    CAPTURE(bytes);
    std::size_t const size = HostBlockCache::block_size(bytes);
    CHECK(size >= bytes);
    CHECK(size % HostBlockCache::kAlignment == 0);
    if (bytes >= HostBlockCache::kMinCachedBytes) CHECK(size - bytes <= bytes / 8);
  }
  // Nearby sizes share a class, so a forward whose shapes vary a little still reuses blocks.
  CHECK(HostBlockCache::block_size(10 * kMiB + 1) == HostBlockCache::block_size(10 * kMiB + 4000));
}

TEST_CASE("a freed block is handed out again for the next request of its size class") {
  ScopedLimit const limit(64 * kMiB);
  auto& cache = HostBlockCache::instance();
  auto const before = cache.stats();
  void* const first = cache.allocate(3 * kMiB);
  REQUIRE(first != nullptr);
  CHECK(reinterpret_cast<std::uintptr_t>(first) % HostBlockCache::kAlignment == 0);
  std::memset(first, 1, 3 * kMiB);
  cache.release(first, 3 * kMiB);
  CHECK(cache.stats().cached_bytes == HostBlockCache::block_size(3 * kMiB));
  void* const second = cache.allocate(3 * kMiB - 100);  // the same size class
  CHECK(second == first);
  CHECK(cache.stats().hits == before.hits + 1);
  CHECK(cache.stats().cached_bytes == 0);
  cache.release(second, 3 * kMiB - 100);

  // Small blocks are malloc's business: never counted, never held.
  void* const small = cache.allocate(1000);
  cache.release(small, 1000);
  CHECK(cache.stats().cached_bytes == HostBlockCache::block_size(3 * kMiB));
}

TEST_CASE("the limit holds: blocks over it are freed, the largest cached blocks make room first") {
  ScopedLimit const limit(4 * kMiB);
  auto& cache = HostBlockCache::instance();
  void* const big = cache.allocate(5 * kMiB);  // larger than the whole limit: freed on release
  cache.release(big, 5 * kMiB);
  CHECK(cache.stats().cached_bytes == 0);

  void* const a = cache.allocate(2 * kMiB);
  void* const b = cache.allocate(kMiB);
  void* const c = cache.allocate(kMiB);
  void* const d = cache.allocate(2 * kMiB);
  cache.release(a, 2 * kMiB);
  cache.release(b, kMiB);
  cache.release(c, kMiB);
  CHECK(cache.stats().cached_bytes == 4 * kMiB);
  cache.release(d, 2 * kMiB);  // evicts the cached 2 MiB block, keeps the two of 1 MiB
  CHECK(cache.stats().cached_bytes == 4 * kMiB);
  void* const one = cache.allocate(kMiB);
  CHECK((one == b || one == c));
  cache.release(one, kMiB);

  cache.set_limit(kMiB);  // lowering the limit frees what no longer fits
  CHECK(cache.stats().cached_bytes <= kMiB);
  cache.set_limit(0);  // off
  CHECK(cache.stats().cached_bytes == 0);
  void* const e = cache.allocate(kMiB);
  cache.release(e, kMiB);
  CHECK(cache.stats().cached_bytes == 0);
}

TEST_CASE("eight threads allocating, writing and freeing share the cache without losing a byte") {
  ScopedLimit const limit(32 * kMiB);
  std::vector<std::thread> threads;
  std::vector<int> failures(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([t, &failures] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::uniform_int_distribution<std::size_t> sizes(HostBlockCache::kMinCachedBytes, 3 * kMiB);
      for (int i = 0; i < 200; ++i) {
        std::size_t const bytes = sizes(rng);
        auto* const block = static_cast<unsigned char*>(HostBlockCache::instance().allocate(bytes));
        std::memset(block, t + 1, bytes);
        if (block[0] != t + 1 || block[bytes - 1] != t + 1) ++failures[static_cast<std::size_t>(t)];
        HostBlockCache::instance().release(block, bytes);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int f : failures) CHECK(f == 0);
  CHECK(HostBlockCache::instance().stats().cached_bytes <= 32 * kMiB);
}

TEST_CASE("HostBuffer: a buffer of a shape seen before reuses the block of the last one") {
  ScopedLimit const limit(64 * kMiB);
  void* first = nullptr;
  {
    HostBuffer const buffer(768 * 1024, DType::kF32);  // 3 MiB of activations
    first = buffer.data();
    CHECK(reinterpret_cast<std::uintptr_t>(first) % HostBlockCache::kAlignment == 0);
  }
  HostBuffer const again(768 * 1024, DType::kF32);
  CHECK(again.data() == first);
  HostBuffer moved = HostBuffer(768 * 1024, DType::kF32);
  HostBuffer target = std::move(moved);  // the block goes back once, with its size, when target dies
  CHECK(target.data() != nullptr);
  CHECK(HostBuffer(0, DType::kF32).data() == nullptr);
}

TEST_CASE("HostBlockCache: a block of kHugeBlockBytes or more starts on a huge-page boundary") {
  ScopedLimit const limit(64 * kMiB);
  HostBuffer const large(HostBlockCache::kHugeBlockBytes / 4, DType::kF32);
  CHECK(reinterpret_cast<std::uintptr_t>(large.data()) % HostBlockCache::kHugePageBytes == 0);
  std::memset(large.data(), 1, large.size_bytes());  // the whole block is the caller's
  HostBuffer const small(1024 * 1024, DType::kF32);  // 4 MiB: a cache line is enough
  CHECK(reinterpret_cast<std::uintptr_t>(small.data()) % HostBlockCache::kAlignment == 0);
}

TEST_CASE("WeightArena: weights carved by eight threads are aligned, disjoint and outlive the chunk's turn") {
  using flashdeberta::WeightArena;
  // Each thread carves weights of assorted sizes (past a chunk's 16 MiB in total, so chunks turn over), fills each
  // with its own byte, and every weight must still hold its byte at the end: no two overlap, and a chunk the arena
  // has moved on from stays valid while its weights' owners live.
  constexpr int kThreads = 8;
  constexpr int kWeights = 40;
  std::vector<std::vector<std::shared_ptr<void>>> owners(kThreads);
  std::vector<std::vector<std::size_t>> sizes(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 gen(static_cast<std::uint32_t>(t + 1));
      for (int w = 0; w < kWeights; ++w) {
        std::size_t const bytes = 1 + gen() % (WeightArena::kLargestCarved / 64);
        std::shared_ptr<void> owner = WeightArena::instance().allocate(bytes);
        std::memset(owner.get(), (t * kWeights + w) % 251 + 1, bytes);
        owners[t].push_back(std::move(owner));
        sizes[t].push_back(bytes);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    for (int w = 0; w < kWeights; ++w) {
      auto const* bytes = static_cast<unsigned char const*>(owners[t][w].get());
      CHECK(reinterpret_cast<std::uintptr_t>(bytes) % WeightArena::kAlignment == 0);
      auto const expected = static_cast<unsigned char>((t * kWeights + w) % 251 + 1);
      bool intact = true;
      for (std::size_t x = 0; x < sizes[t][w]; ++x) intact = intact && bytes[x] == expected;
      CHECK_MESSAGE(intact, "weight " << w << " of thread " << t << " (" << sizes[t][w] << " bytes) was overwritten");
    }
  }
}

// A bounded cache of recent per-word results (HF's tokenizers keeps one of 10,000 words in its BPE), safe
// for the threads that share one tokenizer.
//
// Thread safety: mutex-guarded. Keys are spread over 16 shards, each behind its own std::mutex; a thread
// that finds a shard's mutex held does not wait, it treats the lookup as a miss (or skips the store) and
// computes the word itself, as HF's cache does with try_read/try_write. Results never depend on the cache.
//
// Bound: at most `capacity` entries in all, in two generations per shard: when the newer one is full,
// the older one is dropped and the newer one takes its place; a hit in the older one moves the entry
// into the newer one. Words recently seen therefore stay, at the cost of one map move per generation.
// Callers keep keys short (the BPE caches pre-tokens under 256 bytes, as HF does), so the memory is
// bounded too.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

namespace flashdeberta::tokenizer {

template <class Value>
class WordCache {
 public:
  explicit WordCache(std::size_t capacity = 10'000)
      : generation_capacity_(std::max<std::size_t>(1, capacity / (2 * kShards))) {}

  // A copy of the value stored for `key`, or nothing (not stored, or the shard is busy).
  std::optional<Value> find(std::string const& key) const {
    std::size_t const hash = std::hash<std::string>{}(key);
    Shard& shard = shards_[hash % kShards];
    std::unique_lock<std::mutex> lock(shard.mutex, std::try_to_lock);
    if (!lock.owns_lock()) return std::nullopt;
    if (auto it = shard.newer.find(key); it != shard.newer.end()) return it->second;
    auto it = shard.older.find(key);
    if (it == shard.older.end()) return std::nullopt;
    Value found = it->second;
    store(shard, key, found);
    return found;
  }

  // Stores `value` for `key`, unless the shard is busy.
  void insert(std::string const& key, Value const& value) const {
    std::size_t const hash = std::hash<std::string>{}(key);
    Shard& shard = shards_[hash % kShards];
    std::unique_lock<std::mutex> lock(shard.mutex, std::try_to_lock);
    if (lock.owns_lock()) store(shard, key, value);
  }

 private:
  static constexpr std::size_t kShards = 16;

  struct Shard {
    std::mutex mutex;
    std::unordered_map<std::string, Value> newer;
    std::unordered_map<std::string, Value> older;
  };

  void store(Shard& shard, std::string const& key, Value const& value) const {
    if (shard.newer.size() >= generation_capacity_) {
      shard.older = std::move(shard.newer);
      shard.newer.clear();
    }
    shard.newer.insert_or_assign(key, value);
  }

  std::size_t generation_capacity_;
  mutable std::array<Shard, kShards> shards_;
};

}  // namespace flashdeberta::tokenizer

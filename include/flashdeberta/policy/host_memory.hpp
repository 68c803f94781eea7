// The memory a host policy can still allocate, for the available_memory_bytes() hook of concepts.hpp.
//
// Linux: MemAvailable of /proc/meminfo (free memory plus the caches the kernel can drop without swapping),
// bounded by the cgroup v2 limit the process runs under, as in a container, whose own MemAvailable shows the
// whole machine. Elsewhere: the free physical pages sysconf reports, where it reports them. Plus what the
// process's HostBlockCache holds. The system's figure is read at most every 50 ms: every forward asks, and
// reading the files costs tens of microseconds, a percent of a short forward; a check against gross
// over-size batches loses nothing by a reading that old.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>

#include "flashdeberta/core/host_block_cache.hpp"

namespace flashdeberta {

namespace detail {

// The value of "key: value [kB]" / "key value" lines of a /proc or cgroup file, in the file's unit.
inline std::optional<std::int64_t> read_keyed_value(char const* path, std::string const& key) {
  std::ifstream in(path);
  std::string name;
  std::int64_t value = 0;
  while (in >> name >> value) {
    if (name == key) return value;
    in.ignore(1 << 20, '\n');
  }
  return std::nullopt;
}

// Room left under the cgroup v2 memory limit: memory.max - (memory.current - inactive_file), since the
// kernel reclaims the cgroup's inactive page cache before it refuses an allocation. nullopt without a limit.
inline std::optional<std::int64_t> cgroup_room_bytes() {
  std::ifstream max_file("/sys/fs/cgroup/memory.max");
  std::string limit_text;
  if (!(max_file >> limit_text) || limit_text == "max") return std::nullopt;
  std::ifstream current_file("/sys/fs/cgroup/memory.current");
  std::int64_t current = 0;
  if (!(current_file >> current)) return std::nullopt;
  std::int64_t limit = 0;
  try {
    limit = std::stoll(limit_text);
  } catch (...) {
    return std::nullopt;
  }
  std::int64_t const reclaimable = read_keyed_value("/sys/fs/cgroup/memory.stat", "inactive_file").value_or(0);
  return std::max<std::int64_t>(0, limit - std::max<std::int64_t>(0, current - reclaimable));
}

// What the system reports, uncached.
inline std::optional<std::int64_t> system_available_memory_bytes() {
  std::optional<std::int64_t> available;
  if (auto const kib = detail::read_keyed_value("/proc/meminfo", "MemAvailable:")) available = *kib * 1024;
#if defined(_SC_AVPHYS_PAGES) && defined(_SC_PAGESIZE)
  if (!available) {
    long const pages = ::sysconf(_SC_AVPHYS_PAGES);
    long const page_size = ::sysconf(_SC_PAGESIZE);
    if (pages > 0 && page_size > 0) available = static_cast<std::int64_t>(pages) * page_size;
  }
#endif
  if (auto const room = detail::cgroup_room_bytes()) available = available ? std::min(*available, *room) : *room;
  return available;
}

}  // namespace detail

// Bytes the process can still allocate on the host; nullopt when the system does not say.
inline std::optional<std::int64_t> host_available_memory_bytes() {
  using Clock = std::chrono::steady_clock;
  constexpr std::int64_t kUnknown = -1;
  constexpr std::int64_t kMaxAgeNs = 50'000'000;
  static std::atomic<std::int64_t> read_at_ns{0};  // 0: never read
  static std::atomic<std::int64_t> last_reading{kUnknown};
  std::int64_t const now =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
  std::int64_t const read_at = read_at_ns.load(std::memory_order_acquire);
  std::int64_t reading = kUnknown;
  if (read_at == 0 || now - read_at > kMaxAgeNs) {
    reading = detail::system_available_memory_bytes().value_or(kUnknown);
    last_reading.store(reading, std::memory_order_relaxed);
    read_at_ns.store(now, std::memory_order_release);
  } else {
    reading = last_reading.load(std::memory_order_relaxed);
  }
  if (reading == kUnknown) return std::nullopt;
  // Blocks held by the host cache are this process's to reuse, though the system counts them as used.
  return reading + static_cast<std::int64_t>(HostBlockCache::instance().stats().cached_bytes);
}

}  // namespace flashdeberta

// A read-only POSIX memory mapping of a whole file, owned RAII-style.
//
// Checkpoints are mapped rather than read so that opening a multi-GB file costs nothing until a tensor
// is touched, and tensors nobody asks for (heads, optimizer leftovers) are never paged in.
// Contract: the file must not be truncated while mapped (the kernel would deliver SIGBUS on access).
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/io/regular_file.hpp"

namespace flashdeberta::io {

class MappedFile {
 public:
  // `what` names the file's role in messages ("shard index"); only a regular file is opened (regular_file.hpp).
  static MappedFile open(std::filesystem::path const& path, std::string_view what = {}) {
    // The mapping outlives the descriptor, which closes on every path out of here.
    RegularFileDescriptor const file(path, what);
    FLASHDEBERTA_REQUIRE(
        file.size() >= 0 && static_cast<std::uintmax_t>(file.size()) <= std::numeric_limits<std::size_t>::max(),
        path.string() << ": file size " << file.size() << " cannot be mapped");
    auto const size = static_cast<std::size_t>(file.size());
    if (size == 0) return MappedFile(path, nullptr, 0);  // mmap rejects length 0

    void* const data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, file.get(), 0);
    int const map_errno = errno;
    FLASHDEBERTA_REQUIRE(data != MAP_FAILED,
                         path.string() << ": cannot map " << size << " bytes (" << std::strerror(map_errno) << ")");
    return MappedFile(path, data, size);
  }

  MappedFile(MappedFile&& other) noexcept
      : path_(std::move(other.path_)),
        data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)) {}

  MappedFile& operator=(MappedFile&& other) noexcept {
    if (this != &other) {
      unmap();
      path_ = std::move(other.path_);
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }

  MappedFile(MappedFile const&) = delete;
  MappedFile& operator=(MappedFile const&) = delete;
  ~MappedFile() { unmap(); }

  // Valid until this object is destroyed; moving the object keeps the same mapping (and the same span).
  std::span<std::byte const> bytes() const { return {static_cast<std::byte const*>(data_), size_}; }
  std::size_t size() const { return size_; }
  std::filesystem::path const& path() const { return path_; }

  // Drops the resident pages that lie wholly inside `range` (a part of this mapping) from memory.
  // Loading converts each tensor into policy memory once; without this, the file's pages and the
  // converted copy would both stay resident and double the peak memory of a load. The mapping is
  // private and never written, so the pages are simply read again from the file if touched later.
  void release(std::span<std::byte const> range) const {
    if (data_ == nullptr || range.empty()) return;
    auto const page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    auto const first = reinterpret_cast<std::uintptr_t>(range.data());
    auto const last = first + range.size();
    [[maybe_unused]] auto const base = reinterpret_cast<std::uintptr_t>(data_);  // checked in debug builds
    FLASHDEBERTA_ASSERT(first >= base && last <= base + size_);
    std::uintptr_t const begin = (first + page - 1) / page * page;
    std::uintptr_t const end = last / page * page;
    if (begin < end) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
  }

  // Maps every page of the file now, instead of at the first touch of each: a load that keeps weights in the
  // mapping moves the page faults of its first forward here (docs/loading.md). Reads the file
  // if it is not in the page cache.
  void prefault() const {
    if (data_ == nullptr) return;
#if defined(MADV_POPULATE_READ)
    if (::madvise(data_, size_, MADV_POPULATE_READ) == 0) return;
#endif
    // Kernels before 5.14: one read per page faults the same pages in.
    auto const page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    auto const* bytes = static_cast<unsigned char const volatile*>(data_);
    unsigned char sum = 0;
    for (std::size_t at = 0; at < size_; at += page) sum = static_cast<unsigned char>(sum + bytes[at]);
    static_cast<void>(sum);
  }

 private:
  MappedFile(std::filesystem::path path, void* data, std::size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}

  void unmap() noexcept {
    if (data_ != nullptr) ::munmap(data_, size_);
    data_ = nullptr;
    size_ = 0;
  }

  std::filesystem::path path_;
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace flashdeberta::io

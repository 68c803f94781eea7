// Reader for the zip container torch.save writes (PKWARE APPNOTE 6.3): the central directory, local
// headers and ZIP64 records, over bytes already in memory (a MappedFile). Only what a checkpoint needs:
// a name -> byte range table, with the data of STORED entries handed out as views. torch.save never
// compresses (it writes stored, 64-byte aligned records), so a compressed entry is an error when read.
//
// Every offset and size the archive claims is checked against the image before it is used, so a
// truncated or hostile file fails with a flashdeberta::Error naming the file, the entry and the sizes.
// CRCs are not checked: that would read every byte of a multi-GB checkpoint at open.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flashdeberta/core/error.hpp"

namespace flashdeberta::io {

struct ZipEntry {
  std::string name;
  std::uint16_t method = 0;           // 0: stored; anything else is compressed
  std::uint16_t flags = 0;            // general purpose bit flags
  std::uint64_t data_offset = 0;      // of the entry's (possibly compressed) bytes in the image
  std::uint64_t compressed_size = 0;  // bytes in the image
  std::uint64_t size = 0;             // bytes once extracted
};

class ZipArchive {
 public:
  // `bytes` must outlive the archive; `source` names the image in error messages.
  static ZipArchive parse(std::span<std::byte const> bytes, std::string source) {
    ZipArchive zip;
    zip.bytes_ = bytes;
    zip.source_ = std::move(source);
    zip.read_directory();
    return zip;
  }

  std::string const& source() const { return source_; }
  std::vector<ZipEntry> const& entries() const { return entries_; }  // central directory order

  ZipEntry const* find(std::string_view name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &entries_[it->second];
  }

  // The bytes of a stored entry, a view into the image.
  std::span<std::byte const> stored_data(ZipEntry const& entry) const {
    FLASHDEBERTA_REQUIRE(entry.method == 0, source_ << ": zip entry '" << entry.name << "' is compressed (method "
                                                    << entry.method
                                                    << "); torch.save writes stored entries only, so re-save the "
                                                       "checkpoint with torch.save instead of re-zipping it");
    return bytes_.subspan(entry.data_offset, entry.size);
  }

  // The bytes of the stored entry `name`, which must exist.
  std::span<std::byte const> stored_data(std::string_view name) const {
    ZipEntry const* entry = find(name);
    FLASHDEBERTA_REQUIRE(entry != nullptr, source_ << ": zip archive has no entry '" << name << "'");
    return stored_data(*entry);
  }

 private:
  static constexpr std::uint32_t kLocalSignature = 0x04034b50;
  static constexpr std::uint32_t kCentralSignature = 0x02014b50;
  static constexpr std::uint32_t kEndSignature = 0x06054b50;
  static constexpr std::uint32_t kZip64EndSignature = 0x06064b50;
  static constexpr std::uint32_t kZip64LocatorSignature = 0x07064b50;
  static constexpr std::size_t kLocalHeaderSize = 30;
  static constexpr std::size_t kCentralHeaderSize = 46;
  static constexpr std::size_t kEndSize = 22;
  static constexpr std::size_t kZip64EndSize = 56;
  static constexpr std::size_t kZip64LocatorSize = 20;
  static constexpr std::uint16_t kZip64ExtraId = 0x0001;

  ZipArchive() = default;

  // Little-endian reads; the caller has checked [at, at + n) lies inside the image.
  std::uint64_t le(std::uint64_t at, int n) const {
    std::uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | std::to_integer<std::uint64_t>(bytes_[at + i]);
    return v;
  }
  std::uint16_t u16(std::uint64_t at) const { return static_cast<std::uint16_t>(le(at, 2)); }
  std::uint32_t u32(std::uint64_t at) const { return static_cast<std::uint32_t>(le(at, 4)); }
  std::uint64_t u64(std::uint64_t at) const { return le(at, 8); }

  // True when [begin, begin + n) lies inside [0, limit); never overflows.
  static bool fits(std::uint64_t begin, std::uint64_t n, std::uint64_t limit) {
    return begin <= limit && n <= limit - begin;
  }

  // The end of central directory record: the last signature whose comment fits the image.
  std::uint64_t find_end_record() const {
    std::uint64_t const size = bytes_.size();
    FLASHDEBERTA_REQUIRE(size >= kEndSize, source_ << ": file is " << size
                                                   << " bytes, too short for a zip archive (the end of central "
                                                      "directory record alone is 22 bytes)");
    std::uint64_t const lowest = size - kEndSize > 0xFFFF ? size - kEndSize - 0xFFFF : 0;
    for (std::uint64_t at = size - kEndSize + 1; at-- > lowest;) {
      if (u32(at) == kEndSignature && u16(at + 20) <= size - kEndSize - at) return at;
    }
    FLASHDEBERTA_FAIL(source_ << ": no zip end of central directory record in the last " << size - lowest
                              << " bytes; the file is truncated or not a zip archive");
  }

  void read_directory() {
    std::uint64_t const end = find_end_record();
    FLASHDEBERTA_REQUIRE(u16(end + 4) == 0 && u16(end + 6) == 0,
                         source_ << ": zip archive spans several disks, which is not supported");
    std::uint64_t count = u16(end + 10);
    std::uint64_t cd_size = u32(end + 12);
    std::uint64_t cd_offset = u32(end + 16);
    std::uint64_t cd_limit = end;  // the central directory must end before this
    bool const has_locator = end >= kZip64LocatorSize && u32(end - kZip64LocatorSize) == kZip64LocatorSignature;
    if (has_locator) {
      std::uint64_t const locator = end - kZip64LocatorSize;
      std::uint64_t const record = u64(locator + 8);
      FLASHDEBERTA_REQUIRE(fits(record, kZip64EndSize, locator),
                           source_ << ": ZIP64 end of central directory record at offset " << record
                                   << " does not fit before its locator at offset " << locator);
      FLASHDEBERTA_REQUIRE(u32(record) == kZip64EndSignature,
                           source_ << ": no ZIP64 end of central directory record at offset " << record
                                   << " (the locator points there)");
      FLASHDEBERTA_REQUIRE(u32(record + 16) == 0 && u32(record + 20) == 0,
                           source_ << ": zip archive spans several disks, which is not supported");
      count = u64(record + 32);
      cd_size = u64(record + 40);
      cd_offset = u64(record + 48);
      cd_limit = record;
    } else {
      FLASHDEBERTA_REQUIRE(count != 0xFFFF && cd_size != 0xFFFFFFFF && cd_offset != 0xFFFFFFFF,
                           source_ << ": zip end record defers to a ZIP64 record, but there is no ZIP64 locator");
    }
    FLASHDEBERTA_REQUIRE(fits(cd_offset, cd_size, cd_limit),
                         source_ << ": zip central directory (offset " << cd_offset << ", " << cd_size
                                 << " bytes) does not fit before the end records at offset " << cd_limit
                                 << "; the file is truncated or corrupt");
    FLASHDEBERTA_REQUIRE(count <= cd_size / kCentralHeaderSize, source_ << ": zip central directory claims " << count
                                                                        << " entries, more than its " << cd_size
                                                                        << " bytes can hold");
    entries_.reserve(count);
    std::uint64_t at = cd_offset;
    std::uint64_t const cd_end = cd_offset + cd_size;
    for (std::uint64_t i = 0; i < count; ++i) {
      ZipEntry entry = read_central_header(at, cd_end, i);
      read_local_header(entry, cd_offset);
      auto const [it, inserted] = index_.emplace(entry.name, entries_.size());
      FLASHDEBERTA_REQUIRE(inserted, source_ << ": zip entry '" << entry.name << "' appears twice");
      entries_.push_back(std::move(entry));
    }
  }

  // Parses the central header at `at` and advances `at` past it.
  ZipEntry read_central_header(std::uint64_t& at, std::uint64_t cd_end, std::uint64_t i) const {
    FLASHDEBERTA_REQUIRE(fits(at, kCentralHeaderSize, cd_end) && u32(at) == kCentralSignature,
                         source_ << ": zip central directory entry " << i << " at offset " << at
                                 << " is missing or runs past the directory's end at " << cd_end);
    ZipEntry entry;
    entry.flags = u16(at + 8);
    entry.method = u16(at + 10);
    entry.compressed_size = u32(at + 20);
    entry.size = u32(at + 24);
    std::uint64_t const name_len = u16(at + 28);
    std::uint64_t const extra_len = u16(at + 30);
    std::uint64_t const comment_len = u16(at + 32);
    std::uint64_t disk = u16(at + 34);
    std::uint64_t local = u32(at + 42);
    std::uint64_t const name_at = at + kCentralHeaderSize;
    FLASHDEBERTA_REQUIRE(fits(name_at, name_len + extra_len + comment_len, cd_end),
                         source_ << ": zip central directory entry " << i << " (name " << name_len << ", extra "
                                 << extra_len << ", comment " << comment_len
                                 << " bytes) runs past the directory's end at " << cd_end);
    entry.name.assign(reinterpret_cast<char const*>(bytes_.data() + name_at), name_len);

    // ZIP64 extended information: the 64-bit values of exactly the fields saturated above, in this order.
    bool const needs_zip64 =
        entry.size == 0xFFFFFFFF || entry.compressed_size == 0xFFFFFFFF || local == 0xFFFFFFFF || disk == 0xFFFF;
    bool found_zip64 = false;
    for (std::uint64_t x = name_at + name_len, x_end = x + extra_len; x < x_end;) {
      FLASHDEBERTA_REQUIRE(fits(x, 4, x_end),
                           source_ << ": zip entry '" << entry.name << "' has a truncated extra field header");
      std::uint16_t const id = u16(x);
      std::uint64_t const len = u16(x + 2);
      FLASHDEBERTA_REQUIRE(fits(x + 4, len, x_end), source_ << ": zip entry '" << entry.name
                                                            << "' has an extra field of " << len
                                                            << " bytes that runs past its extra data");
      if (id == kZip64ExtraId && !found_zip64) {
        found_zip64 = true;
        std::uint64_t v = x + 4;
        auto take = [&](std::uint64_t& field, char const* what) {
          FLASHDEBERTA_REQUIRE(fits(v, 8, x + 4 + len), source_ << ": zip entry '" << entry.name
                                                                << "' has a ZIP64 extra field too short for its "
                                                                << what);
          field = u64(v);
          v += 8;
        };
        if (entry.size == 0xFFFFFFFF) take(entry.size, "size");
        if (entry.compressed_size == 0xFFFFFFFF) take(entry.compressed_size, "compressed size");
        if (local == 0xFFFFFFFF) take(local, "local header offset");
        if (disk == 0xFFFF) {
          FLASHDEBERTA_REQUIRE(fits(v, 4, x + 4 + len), source_ << ": zip entry '" << entry.name
                                                                << "' has a ZIP64 extra field too short for its disk");
          disk = u32(v);
        }
      }
      x += 4 + len;
    }
    FLASHDEBERTA_REQUIRE(!needs_zip64 || found_zip64, source_
                                                          << ": zip entry '" << entry.name
                                                          << "' has saturated 32-bit fields but no ZIP64 extra field");
    FLASHDEBERTA_REQUIRE(disk == 0, source_ << ": zip entry '" << entry.name << "' is on disk " << disk
                                            << "; multi-disk archives are not supported");
    FLASHDEBERTA_REQUIRE((entry.flags & 0x1) == 0, source_ << ": zip entry '" << entry.name << "' is encrypted");
    FLASHDEBERTA_REQUIRE(entry.method != 0 || entry.compressed_size == entry.size,
                         source_ << ": zip entry '" << entry.name << "' is stored but its compressed size "
                                 << entry.compressed_size << " differs from its size " << entry.size);
    entry.data_offset = local;  // the local header's offset until read_local_header resolves the data
    at = name_at + name_len + extra_len + comment_len;
    return entry;
  }

  // Resolves the entry's data offset from its local header; its data must end before the central directory.
  void read_local_header(ZipEntry& entry, std::uint64_t cd_offset) const {
    std::uint64_t const local = entry.data_offset;
    FLASHDEBERTA_REQUIRE(fits(local, kLocalHeaderSize, cd_offset) && u32(local) == kLocalSignature,
                         source_ << ": zip entry '" << entry.name << "': no local header at offset " << local
                                 << " (the central directory starts at " << cd_offset << ")");
    std::uint64_t const name_len = u16(local + 26);
    std::uint64_t const extra_len = u16(local + 28);
    std::uint64_t const data = local + kLocalHeaderSize + name_len + extra_len;
    FLASHDEBERTA_REQUIRE(data <= cd_offset && entry.compressed_size <= cd_offset - data,
                         source_ << ": zip entry '" << entry.name << "': its " << entry.compressed_size
                                 << " bytes of data at offset " << data
                                 << " run past the start of the central directory at " << cd_offset
                                 << "; the file is truncated or corrupt");
    std::string_view const local_name(reinterpret_cast<char const*>(bytes_.data() + local + kLocalHeaderSize),
                                      name_len);
    FLASHDEBERTA_REQUIRE(local_name == entry.name, source_ << ": zip entry '" << entry.name << "' is named '"
                                                           << local_name << "' in its local header");
    entry.data_offset = data;
  }

  std::span<std::byte const> bytes_;
  std::string source_;
  std::vector<ZipEntry> entries_;
  std::map<std::string, std::size_t, std::less<>> index_;
};

}  // namespace flashdeberta::io

// Checks of an HDF5 file's bytes made before libhdf5 (Debian's 1.10) decodes them: two structures on which
// libhdf5 itself does not stop on a corrupt file, found by fuzzing (tests/fuzz/fuzz_keras_weights.cpp).
//
// - Global heap collections ("GCOL", where variable-length strings such as Keras' layer names live): libhdf5
//   steps from object to object by their declared sizes and loops forever on a size that does not advance
//   (H5HG__cache_heap_deserialize).
// - Version-1 group B-trees ("TREE", the index of an old-style group, which h5py writes): libhdf5 lists a group
//   by recursing from a node into every child (H5B__iterate_helper) with no check that a child sits below it,
//   so a node naming itself or an ancestor as its child recurses without end, allocating as it goes, and
//   children shared between nodes multiply the links it collects before the first one reaches a callback.
//
// Both are found by their signatures, as libhdf5 finds them (it checks the signature of every node it reads);
// a signature inside tensor data that happens to look like a node is checked too, and such a node would have
// to point at real nodes to fail, so a sound file is not refused for one.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "flashdeberta/core/error.hpp"

namespace flashdeberta::io::detail {

// The most links one group's B-tree may lead libhdf5 to, shared children counted as often as libhdf5 visits
// them (Hdf5File's walk refuses groups of more links too).
inline constexpr std::uint64_t kMaxGroupTreeLinks = 100'000;

inline std::uint64_t read_le(std::span<std::byte const> bytes, std::size_t at, std::size_t width) {
  std::uint64_t v = 0;
  std::memcpy(&v, bytes.data() + at, width);  // x86-64 and aarch64 are little-endian, as HDF5 files are
  return v;
}

inline std::string_view as_text(std::span<std::byte const> bytes) {
  return {reinterpret_cast<char const*>(bytes.data()), bytes.size()};
}

// Every collection in the file (version 1, 8-byte lengths as h5py writes) walked with libhdf5's steps; one whose
// objects do not tile it is refused.
inline void require_sound_global_heaps(std::span<std::byte const> bytes, std::string const& source) {
  std::string_view const text = as_text(bytes);
  for (std::size_t at = text.find("GCOL"); at != std::string_view::npos; at = text.find("GCOL", at + 1)) {
    // Version 1 and three reserved zero bytes: anything else is not a collection libhdf5 would decode.
    if (bytes.size() - at < 16 || text.substr(at + 4, 4) != std::string_view("\x01\0\0\0", 4)) continue;
    std::uint64_t const size = read_le(bytes, at + 8, 8);
    FLASHDEBERTA_REQUIRE(size >= 16 && size <= bytes.size() - at, source << ": the global heap collection at byte "
                                                                         << at << " declares " << size
                                                                         << " bytes, beyond the file's end");
    std::size_t p = at + 16;
    std::size_t const end = at + static_cast<std::size_t>(size);
    while (p < end && end - p >= 16) {  // less than an object header left: free space
      auto const index = static_cast<std::uint16_t>(read_le(bytes, p, 2));
      std::uint64_t const object = read_le(bytes, p + 8, 8);
      std::uint64_t const need = index > 0 ? (object > end ? end : 16 + ((object + 7) & ~std::uint64_t{7})) : object;
      FLASHDEBERTA_REQUIRE(need > 0 && need <= end - p, source << ": the global heap collection at byte " << at
                                                               << " holds an object of " << object
                                                               << " bytes that does not fit it (at byte " << p << ")");
      p += static_cast<std::size_t>(need);
    }
  }
}

// The group B-tree nodes of the file and the links each leads libhdf5 to. Node layout (HDF5 format spec, "Version
// 1 B-trees"): "TREE", node type (0: group), level, entries used (2 bytes), left and right sibling addresses,
// then keys and child addresses alternating (a group's keys are heap offsets, `lengths` bytes each). Level-0
// children are symbol table nodes: "SNOD", version, reserved byte, number of symbols (2 bytes).
class GroupTreeCheck {
 public:
  GroupTreeCheck(std::span<std::byte const> bytes, std::string const& source, std::size_t offsets, std::size_t lengths,
                 std::uint64_t base)
      : bytes_(bytes), source_(source), offsets_(offsets), lengths_(lengths), base_(base) {}

  void run() {
    std::string_view const text = as_text(bytes_);
    for (std::size_t at = text.find("TREE"); at != std::string_view::npos; at = text.find("TREE", at + 1))
      if (is_group_node(at)) links_below(at);
  }

 private:
  std::size_t header_bytes() const { return 8 + 2 * offsets_; }

  bool is_group_node(std::size_t at) const {
    return bytes_.size() - at >= header_bytes() && text_at(at, 4) == "TREE" && bytes_[at + 4] == std::byte{0};
  }

  std::string_view text_at(std::size_t at, std::size_t n) const { return as_text(bytes_).substr(at, n); }

  // The file offset an address names, or npos where it is undefined or outside the file.
  std::size_t offset_of(std::uint64_t address) const {
    if (address >= bytes_.size() || base_ > bytes_.size() - address) return std::string_view::npos;
    return static_cast<std::size_t>(base_ + address);
  }

  // Links under the node at `at`, as libhdf5's recursion counts them (memoized: each node is read once here).
  std::uint64_t links_below(std::size_t at) {
    if (auto const done = links_.find(at); done != links_.end()) return done->second;
    auto const level = std::to_integer<unsigned>(bytes_[at + 5]);
    auto const entries = static_cast<std::size_t>(read_le(bytes_, at + 6, 2));
    std::size_t const stride = lengths_ + offsets_;
    std::uint64_t links = 0;
    // Entries past the file's end: libhdf5 fails to read the node, and nothing below it is listed.
    if (bytes_.size() - at - header_bytes() >= entries * stride + lengths_) {
      for (std::size_t i = 0; i < entries && links <= kMaxGroupTreeLinks; ++i) {
        std::size_t const child = offset_of(read_le(bytes_, at + header_bytes() + i * stride + lengths_, offsets_));
        if (child == std::string_view::npos) continue;
        if (level == 0) {
          if (bytes_.size() - child >= 8 && text_at(child, 4) == "SNOD") links += read_le(bytes_, child + 6, 2);
          continue;
        }
        if (!is_group_node(child)) continue;
        auto const child_level = std::to_integer<unsigned>(bytes_[child + 5]);
        FLASHDEBERTA_REQUIRE(child_level < level, source_ << ": the group B-tree node at byte " << at << " (level "
                                                          << level << ") has as its child " << i << " the node at byte "
                                                          << child << " (level " << child_level
                                                          << "): a corrupt index that would be walked without end");
        links += links_below(child);
      }
    }
    FLASHDEBERTA_REQUIRE(links <= kMaxGroupTreeLinks, source_ << ": the group B-tree node at byte " << at
                                                              << " leads to more than " << kMaxGroupTreeLinks
                                                              << " links (its children repeat)");
    links_.emplace(at, links);
    return links;
  }

  std::span<std::byte const> bytes_;
  std::string const& source_;
  std::size_t offsets_;
  std::size_t lengths_;
  std::uint64_t base_;
  std::unordered_map<std::size_t, std::uint64_t> links_;
};

// The superblock (the file starts with it: Hdf5File checks the signature) gives the sizes of addresses and lengths
// and the base address that addresses count from.
inline void require_sound_group_trees(std::span<std::byte const> bytes, std::string const& source) {
  if (bytes.size() < 16) return;  // libhdf5 refuses the file
  auto const version = std::to_integer<unsigned>(bytes[8]);
  std::size_t offsets = 0;
  std::size_t lengths = 0;
  std::size_t base_at = 0;
  if (version <= 1) {
    offsets = std::to_integer<std::size_t>(bytes[13]);
    lengths = std::to_integer<std::size_t>(bytes[14]);
    base_at = version == 0 ? 24 : 28;
  } else {
    offsets = std::to_integer<std::size_t>(bytes[9]);
    lengths = std::to_integer<std::size_t>(bytes[10]);
    base_at = 12;
  }
  FLASHDEBERTA_REQUIRE(offsets == 8 && lengths == 8,
                       source << ": the file's superblock (version " << version << ") declares " << offsets
                              << "-byte addresses and " << lengths << "-byte lengths; Keras and h5py write 8 and 8");
  if (bytes.size() < base_at + offsets) return;
  GroupTreeCheck(bytes, source, offsets, lengths, read_le(bytes, base_at, offsets)).run();
}

inline void require_sound_structure(std::span<std::byte const> bytes, std::string const& source) {
  require_sound_global_heaps(bytes, source);
  require_sound_group_trees(bytes, source);
}

// A file as it was when checked: loading a ZeroModels directory opens its weights twice (for the config HF would
// hold, then for the tensors), and the checks above read every byte, so a file unchanged since it passed (same
// device, inode, size and modification time) is not read again. The caller holds the HDF5 lock.
struct FileIdentity {
  std::uint64_t device = 0, inode = 0, size = 0, mtime_ns = 0;
  bool operator==(FileIdentity const&) const = default;
};

class CheckedFiles {
 public:
  bool contains(FileIdentity const& id) const { return std::find(files_.begin(), files_.end(), id) != files_.end(); }
  void add(FileIdentity const& id) {
    if (files_.size() == kKept) files_.erase(files_.begin());
    files_.push_back(id);
  }

 private:
  static constexpr std::size_t kKept = 64;  // a sharded checkpoint's files, with room to spare
  std::vector<FileIdentity> files_;
};

inline CheckedFiles& checked_files() {
  static CheckedFiles files;
  return files;
}

}  // namespace flashdeberta::io::detail

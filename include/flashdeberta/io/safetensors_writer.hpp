// Writer for the safetensors format (the reader is io/safetensors.hpp).
//
// Atomic from the reader's point of view: the file is written to a temporary in the destination
// directory and renamed over the destination only once complete, so a crash or an error never leaves
// a truncated checkpoint where a good one (or none) was. Everything is validated before the temporary
// is created.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "flashdeberta/core/dtype.hpp"
#include "flashdeberta/core/error.hpp"
#include "flashdeberta/io/json.hpp"
#include "flashdeberta/io/safetensors.hpp"

namespace flashdeberta {

struct TensorToWrite {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  std::span<std::byte const> bytes;  // little-endian, numel * dtype_size(dtype) bytes
};

// The file is renamed over `path`, which would put a regular file in place of a device, a FIFO or a socket
// there (run as root, --output /dev/null would delete /dev/null): only a regular file, or nothing, may be there.
inline void require_replaceable_output(std::filesystem::path const& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::file_status const status = fs::status(path, ec);  // follows symlinks
  if (!fs::exists(status) || fs::is_regular_file(status)) return;
  char const* const kind = fs::is_directory(status)        ? "a directory"
                           : fs::is_character_file(status) ? "a character device"
                           : fs::is_block_file(status)     ? "a block device"
                           : fs::is_fifo(status)           ? "a FIFO"
                           : fs::is_socket(status)         ? "a socket"
                                                           : "not a regular file";
  FLASHDEBERTA_FAIL(path.string() << " is " << kind
                                  << "; the output is written to a temporary file and renamed over it, which would "
                                     "replace it, so it must be a regular file or not exist");
}

namespace detail {

// Owns the temporary file until commit(); on any exit without commit() it is closed and removed.
class TempFileForRename {
 public:
  explicit TempFileForRename(std::filesystem::path const& destination) : destination_(destination) {
    require_replaceable_output(destination);
    std::filesystem::path const dir = destination.has_parent_path() ? destination.parent_path() : ".";
    std::string pattern = (dir / ("." + destination.filename().string() + ".tmp.XXXXXX")).string();
    fd_ = ::mkstemp(pattern.data());
    int const err = errno;
    FLASHDEBERTA_REQUIRE(fd_ >= 0, destination.string() << ": cannot create a temporary file in " << dir.string()
                                                        << " (" << std::strerror(err) << ")");
    temp_ = pattern;
    ::fchmod(fd_, 0644);  // mkstemp creates 0600; a checkpoint is meant to be shared like any data file
  }
  TempFileForRename(TempFileForRename const&) = delete;
  TempFileForRename& operator=(TempFileForRename const&) = delete;
  ~TempFileForRename() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(temp_.c_str());
  }

  void write(void const* data, std::size_t size) {
    auto const* p = static_cast<char const*>(data);
    while (size > 0) {
      ssize_t const n = ::write(fd_, p, size);
      if (n < 0 && errno == EINTR) continue;
      int const err = errno;
      FLASHDEBERTA_REQUIRE(n > 0, destination_.string()
                                      << ": write to " << temp_ << " failed (" << std::strerror(err) << ")");
      p += n;
      size -= static_cast<std::size_t>(n);
    }
  }

  // fsync before rename: otherwise a crash could leave the new name pointing at an empty file.
  void commit() {
    int const sync_result = ::fsync(fd_);
    int err = errno;
    FLASHDEBERTA_REQUIRE(sync_result == 0, destination_.string()
                                               << ": fsync of " << temp_ << " failed (" << std::strerror(err) << ")");
    int const close_result = ::close(fd_);
    err = errno;
    fd_ = -1;
    FLASHDEBERTA_REQUIRE(close_result == 0, destination_.string()
                                                << ": close of " << temp_ << " failed (" << std::strerror(err) << ")");
    int const rename_result = std::rename(temp_.c_str(), destination_.c_str());
    err = errno;
    FLASHDEBERTA_REQUIRE(rename_result == 0, destination_.string() << ": cannot rename " << temp_ << " onto it ("
                                                                   << std::strerror(err) << ")");
    committed_ = true;
  }

 private:
  std::filesystem::path destination_;
  std::string temp_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace detail

inline void write_safetensors(std::filesystem::path const& path, std::vector<TensorToWrite> const& tensors,
                              std::map<std::string, std::string> const& metadata = {}) {
  std::string const dest = path.string();
  io::Json header = io::Json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;

  std::set<std::string_view> seen;
  std::uint64_t offset = 0;
  for (TensorToWrite const& t : tensors) {
    FLASHDEBERTA_REQUIRE(!t.name.empty() && t.name != "__metadata__",
                         dest << ": tensor name '" << t.name << "' is reserved or empty");
    FLASHDEBERTA_REQUIRE(seen.insert(t.name).second, dest << ": tensor '" << t.name << "' is given twice");
    for (std::int64_t d : t.shape) {
      FLASHDEBERTA_REQUIRE(d >= 0, dest << ": tensor '" << t.name << "' has negative dimension in shape "
                                        << detail::format_shape(t.shape));
    }
    std::optional<std::int64_t> const numel = detail::checked_numel(t.shape);
    auto const elem = static_cast<std::int64_t>(dtype_size(t.dtype));
    FLASHDEBERTA_REQUIRE(numel && *numel <= std::numeric_limits<std::int64_t>::max() / elem,
                         dest << ": tensor '" << t.name << "' has shape " << detail::format_shape(t.shape)
                              << ", whose byte size overflows int64");
    auto const size = static_cast<std::uint64_t>(*numel * elem);
    FLASHDEBERTA_REQUIRE(t.bytes.size() == size, dest << ": tensor '" << t.name << "' has " << t.bytes.size()
                                                      << " bytes, but dtype " << dtype_name(t.dtype) << " and shape "
                                                      << detail::format_shape(t.shape) << " need " << size);
    header[t.name] = {
        {"dtype", std::string(dtype_name(t.dtype))}, {"shape", t.shape}, {"data_offsets", {offset, offset + size}}};
    offset += size;
  }

  std::string text;
  try {
    text = header.dump();
  } catch (io::Json::exception const& e) {  // names and metadata must be valid UTF-8
    FLASHDEBERTA_FAIL(dest << ": cannot encode the header (" << e.what() << ")");
  }
  // Padding to 8 bytes aligns the data section for readers that map it directly.
  text.append((8 - text.size() % 8) % 8, ' ');
  unsigned char length[8];
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<unsigned char>(static_cast<std::uint64_t>(text.size()) >> (8 * i));

  detail::TempFileForRename out(path);
  out.write(length, sizeof(length));
  out.write(text.data(), text.size());
  for (TensorToWrite const& t : tensors) out.write(t.bytes.data(), t.bytes.size());
  out.commit();
}

}  // namespace flashdeberta

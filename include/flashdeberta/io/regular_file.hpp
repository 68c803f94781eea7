// Every file the library reads (checkpoints, shard indexes, config.json, tokenizer files, the CLI's input) is
// opened here, and only if it is a regular file after following symbolic links. Opening a FIFO for reading
// waits for a writer, forever if none comes; a character device such as /dev/urandom or /dev/zero never ends;
// a directory or a symbolic link loop is no file to read. Each is refused with what the path really is.
//
// The kind is checked with stat() before the open, so that nothing else is opened at all (opening a device
// can have effects of its own), and again with fstat() on the descriptor, opened without blocking, so that a
// file swapped for a FIFO between the two checks cannot block the reader either.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <string_view>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "flashdeberta/core/error.hpp"

namespace flashdeberta::io {

enum class FileKind {
  kRegular,
  kMissing,       // nothing there, or a path component that is not a directory
  kDanglingLink,  // a symbolic link to nothing
  kSymlinkLoop,   // symbolic links that lead back to themselves (ELOOP)
  kDirectory,
  kFifo,
  kCharacterDevice,
  kBlockDevice,
  kSocket,
  kOther,  // stat() failed for another reason (permissions): FileStatus::error says why
};

struct FileStatus {
  FileKind kind = FileKind::kMissing;
  int error = 0;  // errno of stat() where it failed
};

inline FileKind file_kind_of_mode(mode_t mode) {
  if (S_ISREG(mode)) return FileKind::kRegular;
  if (S_ISDIR(mode)) return FileKind::kDirectory;
  if (S_ISFIFO(mode)) return FileKind::kFifo;
  if (S_ISCHR(mode)) return FileKind::kCharacterDevice;
  if (S_ISBLK(mode)) return FileKind::kBlockDevice;
  if (S_ISSOCK(mode)) return FileKind::kSocket;
  return FileKind::kOther;
}

// What `path` is, following symbolic links.
inline FileStatus file_status(std::filesystem::path const& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return {file_kind_of_mode(st.st_mode), 0};
  int const error = errno;
  if (error == ELOOP) return {FileKind::kSymlinkLoop, error};
  if (error == ENOENT || error == ENOTDIR) {
    struct stat link {};
    if (::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) return {FileKind::kDanglingLink, error};
    return {FileKind::kMissing, error};
  }
  return {FileKind::kOther, error};
}

// "a FIFO, not a regular file", "a symbolic link loop", ...: what follows "<path> is " in a message.
inline std::string describe_file_status(FileStatus status) {
  switch (status.kind) {
    case FileKind::kRegular:
      return "a regular file";
    case FileKind::kMissing:
      return "missing (no such file)";
    case FileKind::kDanglingLink:
      return "a symbolic link to a file that does not exist";
    case FileKind::kSymlinkLoop:
      return "a symbolic link loop";
    case FileKind::kDirectory:
      return "a directory, not a regular file";
    case FileKind::kFifo:
      return "a FIFO, not a regular file";
    case FileKind::kCharacterDevice:
      return "a character device, not a regular file";
    case FileKind::kBlockDevice:
      return "a block device, not a regular file";
    case FileKind::kSocket:
      return "a socket, not a regular file";
    case FileKind::kOther:
      break;
  }
  return status.error != 0 ? std::string("not readable (") + std::strerror(status.error) + ")"
                           : std::string("not a regular file");
}

// Throws FileError "<path>: cannot read the <what>: it is a FIFO, not a regular file" (a missing file: "<path>:
// cannot read the <what> (no such file)"). `what` names the file's role ("model config"); empty, the message
// says "cannot open".
[[noreturn]] inline void fail_not_regular_file(std::filesystem::path const& path, std::string_view what,
                                               FileStatus status) {
  ::flashdeberta::detail::throw_error<FileError>([&](std::ostringstream& os) {
    os << path.string() << ": cannot " << (what.empty() ? std::string("open") : "read the " + std::string(what));
    if (status.kind == FileKind::kMissing) {
      os << (what.empty() ? " (No such file or directory)" : " (no such file)");
    } else {
      os << ": it is " << describe_file_status(status);
    }
  });
}

inline void require_regular_file(std::filesystem::path const& path, std::string_view what) {
  FileStatus const status = file_status(path);
  if (status.kind != FileKind::kRegular) fail_not_regular_file(path, what, status);
}

// A read-only descriptor of a regular file, closed with the object.
class RegularFileDescriptor {
 public:
  // Refuses anything but a regular file (see the top of this file), without blocking on it.
  RegularFileDescriptor(std::filesystem::path const& path, std::string_view what) {
    FileStatus const before = file_status(path);
    if (before.kind != FileKind::kRegular) fail_not_regular_file(path, what, before);
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    int const open_errno = errno;  // captured before building the message can touch errno
    FLASHDEBERTA_REQUIRE_FILE(fd_ >= 0, path.string() << ": cannot open" << (what.empty() ? "" : " the ") << what
                                                      << " (" << std::strerror(open_errno) << ")");
    struct stat st {};
    int const stat_result = ::fstat(fd_, &st);
    int const stat_errno = errno;
    if (stat_result != 0) {
      ::close(fd_);
      FLASHDEBERTA_REQUIRE_FILE(false, path.string() << ": cannot stat (" << std::strerror(stat_errno) << ")");
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd_);
      fail_not_regular_file(path, what, {file_kind_of_mode(st.st_mode), 0});
    }
    size_ = st.st_size;
    // Reads of a regular file never block; the flag only had to keep open() from waiting.
    ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
  }
  RegularFileDescriptor(RegularFileDescriptor const&) = delete;
  RegularFileDescriptor& operator=(RegularFileDescriptor const&) = delete;
  ~RegularFileDescriptor() { ::close(fd_); }

  int get() const { return fd_; }
  off_t size() const { return size_; }  // at open

 private:
  int fd_ = -1;
  off_t size_ = 0;
};

// The whole of the regular file `path` (RegularFileDescriptor's checks first).
inline std::string read_regular_file(std::filesystem::path const& path, std::string_view what) {
  RegularFileDescriptor const file(path, what);
  std::string text;
  text.reserve(static_cast<std::size_t>(file.size()));
  char buffer[1 << 16];
  while (true) {
    ssize_t const got = ::read(file.get(), buffer, sizeof buffer);
    if (got == 0) break;
    if (got < 0) {
      int const read_errno = errno;
      if (read_errno == EINTR) continue;
      FLASHDEBERTA_REQUIRE_FILE(
          false, path.string() << ": error while reading the " << what << " (" << std::strerror(read_errno) << ")");
    }
    text.append(buffer, static_cast<std::size_t>(got));
  }
  return text;
}

}  // namespace flashdeberta::io

// Scratch directories and error capture for the tokenizer tests.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>

#include "flashdeberta/core/error.hpp"

namespace flashdeberta::test {

// Time bounds are ten times looser under AddressSanitizer (the clang build of scripts/test.sh).
#if defined(__SANITIZE_ADDRESS__)
constexpr double kSlowdown = 10.0;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr double kSlowdown = 10.0;
#else
constexpr double kSlowdown = 1.0;
#endif
#else
constexpr double kSlowdown = 1.0;
#endif

// A fresh directory per use, removed afterwards.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("flashdeberta_tokenizer_test." + std::to_string(::getpid()) + "." + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(TempDir const&) = delete;
  TempDir& operator=(TempDir const&) = delete;

  std::filesystem::path const& path() const { return path_; }
  void write(std::string const& name, std::string const& bytes) const {
    std::ofstream(path_ / name, std::ios::binary) << bytes;
  }
  void copy_from(std::filesystem::path const& source) const {
    for (auto const& e : std::filesystem::directory_iterator(source)) {
      std::filesystem::copy_file(e.path(), path_ / e.path().filename());
    }
  }

 private:
  std::filesystem::path path_;
};

// The message of the flashdeberta::Error `fn` throws; empty when it does not throw.
template <class Fn>
std::string error_message(Fn&& fn) {
  try {
    fn();
  } catch (Error const& e) {
    return e.what();
  }
  return "";
}

}  // namespace flashdeberta::test

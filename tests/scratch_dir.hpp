// A fresh directory under the system temp dir, removed with everything in it when the object goes: where a test
// writes files, copies a fixture to break it, or checks what a program left behind. Unique per object (mkdtemp),
// so tests running side by side never share one.
#pragma once

#include <stdlib.h>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace flashdeberta::testing {

class ScratchDir {
 public:
  // `tag` goes into the directory's name, to tell which test left it should a run be killed.
  explicit ScratchDir(std::string const& tag = "test") {
    std::string pattern = (std::filesystem::temp_directory_path() / ("flashdeberta_" + tag + "_XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + pattern);
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(ScratchDir const&) = delete;
  ScratchDir& operator=(ScratchDir const&) = delete;

  std::filesystem::path const& path() const { return path_; }
  std::filesystem::path operator/(std::filesystem::path const& name) const { return path_ / name; }

  void write(std::string const& name, std::string_view bytes) const {
    std::ofstream(path_ / name, std::ios::binary) << bytes;
  }

  // Copies every file of `source` (symbolic links followed: the copy holds the bytes).
  void copy_from(std::filesystem::path const& source) const {
    for (auto const& entry : std::filesystem::directory_iterator(source))
      std::filesystem::copy_file(entry.path(), path_ / entry.path().filename());
  }
  // Copies the named files of `source` only.
  void copy_from(std::filesystem::path const& source, std::initializer_list<char const*> names) const {
    for (char const* name : names) std::filesystem::copy_file(source / name, path_ / name);
  }

  // File names in the directory, sorted; temporaries of an interrupted write would show up here too.
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (auto const& e : std::filesystem::directory_iterator(path_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  std::size_t count() const { return entries().size(); }

 private:
  std::filesystem::path path_;
};

}  // namespace flashdeberta::testing

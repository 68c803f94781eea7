// A tokenizer.json fixture directory copied into a scratch directory with its tokenizer.json edited, for
// the tests of what the loader refuses.
#pragma once

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "flashdeberta/tokenizer/tokenizer.hpp"
#include "tokenizer_test_util.hpp"

namespace flashdeberta::test {

inline std::filesystem::path tokenizer_json_fixture(std::string const& name) {
  return std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR) / "tokenizer_json" / name;
}

class TokenizerJsonCopy {
 public:
  // `name`'s files with tokenizer.json passed through `edit`.
  TokenizerJsonCopy(std::string const& name, std::function<void(nlohmann::json&)> const& edit) {
    dir_.copy_from(tokenizer_json_fixture(name));
    std::filesystem::remove(dir_.path() / "expected.json");
    std::ifstream in(dir_.path() / "tokenizer.json");
    nlohmann::json doc = nlohmann::json::parse(in);
    edit(doc);
    dir_.write("tokenizer.json", doc.dump());
  }
  // `name`'s files with tokenizer.json replaced by `bytes`.
  TokenizerJsonCopy(std::string const& name, std::string const& bytes) {
    dir_.copy_from(tokenizer_json_fixture(name));
    std::filesystem::remove(dir_.path() / "expected.json");
    dir_.write("tokenizer.json", bytes);
  }

  std::filesystem::path file() const { return dir_.path() / "tokenizer.json"; }
  std::filesystem::path const& dir() const { return dir_.path(); }
  // The load error's message; empty if it loads.
  std::string error() const {
    return error_message([&] { load_tokenizer(dir_.path()); });
  }
  // Whether the load throws a FileError (and not only an Error).
  bool file_error() const {
    try {
      load_tokenizer(dir_.path());
    } catch (FileError const&) {
      return true;
    } catch (Error const&) {
      return false;
    }
    return false;
  }

 private:
  TempDir dir_;
};

}  // namespace flashdeberta::test

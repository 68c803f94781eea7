// flashdeberta convert: HF <-> ZeroModels directories (runtime/include/flashdeberta/runtime/convert.hpp).
//
// ZeroModels -> HF is the reader's own view written out: the config.json HF would hold (model_config_json) and
// the tensors the Checkpoint presents under HF's names. HF -> ZeroModels writes, for each ZeroModels layer role
// (io/zeromodels_roles.hpp), the Keras group save_weights gives it (zeromodels_writer.cpp) from the HF
// tensors the same role reads, transposed back to Keras' layouts; every HF tensor must find its place.
#include "flashdeberta/runtime/convert.hpp"

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "convert_support.hpp"
#include "flashdeberta/core/error.hpp"
#include "flashdeberta/io/checkpoint.hpp"
#include "flashdeberta/io/config_json.hpp"
#include "flashdeberta/io/safetensors_writer.hpp"

namespace flashdeberta::runtime {

namespace {

namespace fs = std::filesystem;

// The files HF and ZeroModels keep beside the weights for the tokenizer.
constexpr char const* kTokenizerFiles[] = {"tokenizer.json",
                                           "tokenizer_config.json",
                                           "special_tokens_map.json",
                                           "spm.model",
                                           "vocab.json",
                                           "merges.txt",
                                           "added_tokens.json",
                                           "vocab.txt"};

// `to` must be absent or an empty directory; the result is built in a sibling and renamed over it at the end.
class StagedDirectory {
 public:
  explicit StagedDirectory(fs::path const& to) : to_(to) {
    std::error_code ec;
    if (fs::exists(fs::symlink_status(to_, ec))) {
      FLASHDEBERTA_REQUIRE(fs::is_directory(to_, ec) && fs::is_empty(to_, ec),
                           "--to " << to_.string() << ": exists and is not an empty directory (the conversion writes "
                                   << "a new checkpoint directory)");
    }
    fs::path const parent = to_.has_parent_path() ? to_.parent_path() : ".";
    std::string pattern = (parent / ("." + to_.filename().string() + ".partial.XXXXXX")).string();
    FLASHDEBERTA_REQUIRE_FILE(::mkdtemp(pattern.data()) != nullptr,
                              "--to " << to_.string() << ": cannot create a directory in " << parent.string());
    staging_ = pattern;
    fs::permissions(staging_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                  fs::perms::others_read | fs::perms::others_exec);
  }
  StagedDirectory(StagedDirectory const&) = delete;
  StagedDirectory& operator=(StagedDirectory const&) = delete;
  ~StagedDirectory() {
    std::error_code ec;
    if (!committed_) fs::remove_all(staging_, ec);
  }

  fs::path const& path() const { return staging_; }

  void commit() {
    std::error_code ec;
    if (fs::exists(to_, ec)) fs::remove(to_, ec);  // the empty directory checked at the start
    fs::rename(staging_, to_, ec);
    FLASHDEBERTA_REQUIRE_FILE(
        !ec, "--to " << to_.string() << ": cannot move the converted checkpoint into place (" << ec.message() << ")");
    committed_ = true;
  }

 private:
  fs::path to_;
  fs::path staging_;
  bool committed_ = false;
};

std::size_t copy_tokenizer_files(fs::path const& from, fs::path const& to) {
  std::size_t copied = 0;
  for (char const* name : kTokenizerFiles) {
    if (io::file_status(from / name).kind != io::FileKind::kRegular) continue;
    fs::copy_file(from / name, to / name);
    ++copied;
  }
  return copied;
}

ConversionSummary zeromodels_to_hf(io::ZeroModelsDirectory const& zm, fs::path const& from, fs::path const& to) {
  ConversionSummary summary{CheckpointFormat::kZeroModels, CheckpointFormat::kHuggingFace, {}, 0, 0};
  std::string const config_text = model_config_json(from);
  ModelConfig const config = parse_model_config(config_text, zm.config_file.string());
  summary.model_class = config.architectures.empty() ? std::string() : config.architectures.front();
  Checkpoint const checkpoint = Checkpoint::open(from, {.zero_copy = false});
  std::vector<TensorToWrite> tensors;
  for (std::string const& name : checkpoint.names()) {
    TensorInfo const& t = checkpoint.info(name);
    tensors.push_back({name, t.dtype, t.shape, t.bytes});
  }
  StagedDirectory staged(to);
  write_safetensors(staged.path() / "model.safetensors", tensors, {{"format", "pt"}});
  std::ofstream(staged.path() / "config.json") << config_text << "\n";
  summary.tensors = tensors.size();
  summary.tokenizer_files = copy_tokenizer_files(from, staged.path());
  staged.commit();
  return summary;
}

}  // namespace

ConversionSummary convert_checkpoint(fs::path const& from, fs::path const& to) {
  io::FileStatus const status = io::file_status(from);
  FLASHDEBERTA_REQUIRE_FILE(status.kind == io::FileKind::kDirectory,
                            "--from " << from.string() << ": not a checkpoint directory ("
                                      << (status.kind == io::FileKind::kMissing ? std::string("nothing is there")
                                                                                : io::describe_file_status(status))
                                      << ")");
  if (auto const zm = io::zeromodels_directory_of(from)) return zeromodels_to_hf(*zm, from, to);
  StagedDirectory staged(to);
  ConversionSummary summary = write_zeromodels_directory(from, staged.path());
  summary.tokenizer_files = copy_tokenizer_files(from, staged.path());
  staged.commit();
  return summary;
}

}  // namespace flashdeberta::runtime

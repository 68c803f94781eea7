// A checkpoint directory as HF writes it: model.safetensors, model.safetensors.index.json plus its
// shards, pytorch_model.bin, or pytorch_model.bin.index.json plus its shards (picked in that order); or
// ZeroModels' Keras files where no config.json is (io/zeromodels.hpp), read under HF's names.
// Gives name -> TensorInfo lookup over all files and float32 reads with a shape check against what
// the config requires (spec section 7): converted into memory of the caller's, or lent straight from the
// mapped file where the bytes are float32 already (mapped_f32), the mapping kept alive by whoever keeps them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/io/json.hpp"
#include "flashdeberta/io/mapped_file.hpp"
#include "flashdeberta/io/regular_file.hpp"
#include "flashdeberta/io/safetensors.hpp"
#include "flashdeberta/io/torch_checkpoint.hpp"
#include "flashdeberta/io/zeromodels.hpp"

namespace flashdeberta {

// Runs body(begin, end) over ranges that tile [0, count), possibly on several threads at once (a policy's host
// threads); empty: the caller converts in one range on its own thread.
using HostRanges = std::function<void(std::int64_t count, std::function<void(std::int64_t, std::int64_t)> const& body)>;

namespace detail {

// One file of a checkpoint. Every format exposes its tensors as TensorInfo views over memory it keeps
// alive, so lookup, shape checks and dtype conversion above this are format-independent. A ZeroModels
// directory is one TensorStore: its Keras variables read into HF's names and layouts.
using CheckpointFile = std::variant<SafetensorsFile, TorchFile, TensorStore>;

// torch.save files by the names HF and torch users give them.
inline bool is_torch_file_name(std::filesystem::path const& path) {
  std::string const ext = path.extension().string();
  return ext == ".bin" || ext == ".pt" || ext == ".pth";
}

inline CheckpointFile open_checkpoint_file(std::filesystem::path const& path) {
  if (is_torch_file_name(path)) return TorchFile::open(path);
  return SafetensorsFile::open(path);
}

inline std::map<std::string, TensorInfo, std::less<>> const& checkpoint_file_tensors(CheckpointFile const& file) {
  return std::visit(
      [](auto const& f) -> auto const& { return f.tensors(); }, file);
}

inline std::string const& checkpoint_file_source(CheckpointFile const& file) {
  return std::visit(
      [](auto const& f) -> auto const& { return f.source(); }, file);
}

// Sorted file names of `dir`, cut after `limit`, for "the directory holds ..." messages.
inline std::string describe_directory(std::filesystem::path const& dir, std::size_t limit = 20) {
  std::vector<std::string> names;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  if (names.empty()) return "nothing";
  std::ostringstream os;
  for (std::size_t i = 0; i < names.size() && i < limit; ++i) os << (i ? ", " : "") << names[i];
  if (names.size() > limit) os << ", ... (" << names.size() - limit << " more)";
  return os.str();
}

inline std::shared_ptr<io::MappedFile const> const& checkpoint_file_mapping(CheckpointFile const& file) {
  return std::visit(
      [](auto const& f) -> auto const& { return f.mapping(); }, file);
}

}  // namespace detail

struct CheckpointOptions {
  // Lend float32 tensors from the mapped file to policies that can compute on them in place (WeightLoader),
  // so loading copies only what it converts or rearranges. A model loaded so keeps the file mapped while it
  // lives, and the file must not be truncated or rewritten in place meanwhile (MappedFile); false copies every
  // weight, and the model no longer needs the file once loaded.
  bool zero_copy = true;
  // Map every page of the files at open (MappedFile::prefault): the load pays the page faults the first
  // forward would otherwise pay for lent weights (docs/loading.md).
  bool prefault = false;
};

// A float32 tensor inside a mapped file, and the mapping that keeps it valid.
struct MappedTensor {
  std::span<float const> values;
  std::shared_ptr<void const> owner;
};

// A float16 or bfloat16 tensor inside a mapped file, as stored (any alignment), and the mapping that keeps it valid.
struct MappedStoredTensor {
  void const* data = nullptr;
  DType dtype = DType::kF16;
  std::int64_t numel = 0;
  std::shared_ptr<void const> owner;
};

class Checkpoint {
 public:
  // `path`: a checkpoint directory, or a single .safetensors or torch.save (.bin, .pt, .pth) file.
  static Checkpoint open(std::filesystem::path const& path, CheckpointOptions options = {}) {
    Checkpoint ckpt = open_files(path);
    ckpt.options_ = options;
    if (options.prefault) {
      for (auto const& file : ckpt.files_) {
        if (auto const& mapping = detail::checkpoint_file_mapping(file)) mapping->prefault();
      }
    }
    return ckpt;
  }

  CheckpointOptions const& options() const { return options_; }

  std::filesystem::path const& directory() const { return directory_; }

  // Tensor names in lexicographic order.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    out.reserve(entries_.size());
    for (auto const& entry : entries_) out.push_back(entry.first);
    return out;
  }
  std::size_t size() const { return entries_.size(); }

  bool contains(std::string_view name) const { return entries_.find(name) != entries_.end(); }

  TensorInfo const& info(std::string_view name) const { return *entry(name).info; }

  // The file holding `name`, for messages.
  std::string const& source_of(std::string_view name) const {
    return detail::checkpoint_file_source(files_[entry(name).file]);
  }

  // One past the highest n among the tensors named "<prefix><n>.<rest>" ("encoder.layer.11.output.dense.weight"
  // under "encoder.layer." gives 12), or 0: how many numbered blocks the checkpoint holds, for checking a config's
  // count against it before anything is sized from that count.
  std::int64_t count_numbered(std::string_view prefix) const {
    std::int64_t count = 0;
    for (auto it = entries_.lower_bound(prefix); it != entries_.end() && it->first.starts_with(prefix); ++it) {
      std::string_view const rest = std::string_view(it->first).substr(prefix.size());
      std::size_t digits = 0;
      while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
      if (digits == 0 || digits > 9 || digits == rest.size() || rest[digits] != '.') continue;
      count = std::max<std::int64_t>(count, std::stoll(std::string(rest.substr(0, digits))) + 1);
    }
    return count;
  }

  // The first candidate present, e.g. {"deberta.embeddings.word_embeddings.weight",
  // "embeddings.word_embeddings.weight"}.
  std::optional<std::string> find_first(std::initializer_list<std::string_view> candidates) const {
    for (std::string_view name : candidates) {
      if (contains(name)) return std::string(name);
    }
    return std::nullopt;
  }

  // Reads `name` as float32 after checking its shape against what the config requires.
  std::vector<float> read_f32(std::string_view name, std::vector<std::int64_t> const& expected_shape,
                              HostRanges const& ranges = {}) const {
    std::vector<float> values(static_cast<std::size_t>(checked(name, expected_shape).numel));
    read_f32_into(name, expected_shape, values, ranges);
    return values;
  }

  // Converts `name` to float32 into `out` (its numel floats) after the shape check, then lets the tensor's
  // pages leave memory (MappedFile::release): the copy is what stays. With `ranges` (a policy's host threads,
  // host_ranges in layers/weight_loader.hpp) the conversion and the page faults it takes are shared out.
  void read_f32_into(std::string_view name, std::vector<std::int64_t> const& expected_shape, std::span<float> out,
                     HostRanges const& ranges = {}) const {
    TensorInfo const& t = checked(name, expected_shape);
    FLASHDEBERTA_ASSERT(static_cast<std::int64_t>(out.size()) == t.numel);
    FLASHDEBERTA_REQUIRE(is_floating(t.dtype), source_of(name)
                                                   << ": tensor '" << t.name << "' has dtype " << dtype_name(t.dtype)
                                                   << "; a float tensor (F32, F16, BF16 or F64) is required");
    auto const convert = [&](std::int64_t begin, std::int64_t end) {
      detail::floats_to_f32(t.dtype, t.bytes.data(), static_cast<std::size_t>(begin),
                            out.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(end - begin)));
    };
    if (ranges) {
      ranges(t.numel, convert);
    } else {
      convert(0, t.numel);
    }
    release(name);
  }

  // `name`'s float32 values where they lie in its mapped file, after the shape check, or nullopt where they
  // cannot be read in place: another dtype, an address not aligned to a float (a hand-made safetensors
  // header; HF's writer keeps tensors 8-byte aligned) or a file parsed from memory. Lent or not is the
  // caller's choice (options().zero_copy); a caller that copies the values should release(name) after.
  std::optional<MappedTensor> mapped_f32(std::string_view name, std::vector<std::int64_t> const& expected_shape) const {
    TensorInfo const& t = checked(name, expected_shape);
    std::shared_ptr<io::MappedFile const> const& mapping = detail::checkpoint_file_mapping(files_[entry(name).file]);
    if (t.dtype != DType::kF32 || mapping == nullptr ||
        reinterpret_cast<std::uintptr_t>(t.bytes.data()) % alignof(float) != 0)
      return std::nullopt;
    return MappedTensor{{reinterpret_cast<float const*>(t.bytes.data()), static_cast<std::size_t>(t.numel)}, mapping};
  }

  // `name` as a mapped float16 or bfloat16 tensor, if it is one (shape-checked), for the one weight read row by
  // row where it lies (lend_stored_table in weight_loader.hpp); nullopt for any other dtype or an unmapped file.
  std::optional<MappedStoredTensor> mapped_16bit(std::string_view name,
                                                 std::vector<std::int64_t> const& expected_shape) const {
    TensorInfo const& t = checked(name, expected_shape);
    std::shared_ptr<io::MappedFile const> const& mapping = detail::checkpoint_file_mapping(files_[entry(name).file]);
    if ((t.dtype != DType::kF16 && t.dtype != DType::kBF16) || mapping == nullptr) return std::nullopt;
    return MappedStoredTensor{t.bytes.data(), t.dtype, t.numel, mapping};
  }

  // Lets the pages of `name`, already copied, leave memory (MappedFile::release).
  void release(std::string_view name) const {
    std::visit([&](auto const& file) { file.release(*entry(name).info); }, files_[entry(name).file]);
  }

 private:
  struct Entry {
    TensorInfo const* info;  // points into files_[file], which never moves its tensors once loaded
    std::size_t file;
  };

  Checkpoint() = default;

  static Checkpoint open_files(std::filesystem::path const& path) {
    Checkpoint ckpt;
    io::FileStatus const status = io::file_status(path);
    bool const file_name = path.extension() == ".safetensors" || detail::is_torch_file_name(path);
    if (status.kind != io::FileKind::kDirectory && file_name && status.kind != io::FileKind::kMissing) {
      // Whatever else it is (a FIFO, a link loop), opening it says so.
      ckpt.directory_ = path.has_parent_path() ? path.parent_path() : ".";
      ckpt.open_single(path);
      return ckpt;
    }
    ckpt.directory_ = path;
    if (status.kind != io::FileKind::kDirectory) {
      detail::throw_error<FileError>([&](std::ostringstream& os) {
        os << "checkpoint " << path.string() << ": not a directory (nor a .safetensors or .bin file): "
           << (status.kind == io::FileKind::kMissing ? std::string("nothing is there")
                                                     : "it is " + io::describe_file_status(status));
      });
    }
    if (auto const zeromodels = io::zeromodels_directory_of(path)) {
      ckpt.files_.emplace_back(io::read_zeromodels_tensors(*zeromodels));
      for (auto const& [name, info] : detail::checkpoint_file_tensors(ckpt.files_.back()))
        ckpt.entries_.emplace(name, Entry{&info, 0});
      return ckpt;
    }
    // safetensors first, as HF's from_pretrained prefers it. Any entry of the name counts as present, so that
    // a FIFO, a directory or a broken link there is reported as what it is rather than passed over.
    auto const present = [&](std::string const& name) {
      return io::file_status(path / name).kind != io::FileKind::kMissing;
    };
    for (std::string const name : {"model.safetensors", "pytorch_model.bin"}) {
      if (present(name)) {
        ckpt.open_single(path / name);
        return ckpt;
      }
      std::string const index = name + ".index.json";
      if (present(index)) {
        ckpt.open_sharded(path / index);
        return ckpt;
      }
    }
    detail::throw_error<FileError>([&](std::ostringstream& os) {
      os << "checkpoint " << path.string()
         << ": none of model.safetensors, model.safetensors.index.json, pytorch_model.bin, "
            "pytorch_model.bin.index.json (nor ZeroModels' zm_config.json or kf_config.json) found (the directory "
            "holds: "
         << detail::describe_directory(path) << ")";
    });
  }

  TensorInfo const& checked(std::string_view name, std::vector<std::int64_t> const& expected_shape) const {
    TensorInfo const& t = info(name);
    FLASHDEBERTA_REQUIRE(t.shape == expected_shape, "checkpoint " << directory_.string() << ": tensor '" << name
                                                                  << "' has shape " << detail::format_shape(t.shape)
                                                                  << ", the config requires "
                                                                  << detail::format_shape(expected_shape));
    return t;
  }

  Entry const& entry(std::string_view name) const {
    auto it = entries_.find(name);
    FLASHDEBERTA_REQUIRE(it != entries_.end(), "checkpoint " << directory_.string() << ": no tensor named '" << name
                                                             << "' (" << entries_.size() << " tensors present)");
    return it->second;
  }

  void open_single(std::filesystem::path const& file) {
    files_.emplace_back(detail::open_checkpoint_file(file));
    for (auto const& [name, info] : detail::checkpoint_file_tensors(files_.back()))
      entries_.emplace(name, Entry{&info, 0});
  }

  // HF's sharded layout: {"metadata": {...}, "weight_map": {tensor name: shard file name}}, the same
  // for safetensors and torch shards. The index is authoritative: a tensor is taken from the shard it
  // is mapped to and must be there.
  void open_sharded(std::filesystem::path const& index_path) {
    std::string const index_name = index_path.string();
    std::string const index_file = index_path.filename().string();
    bool const torch = index_file == "pytorch_model.bin.index.json";
    io::MappedFile const mapped = io::MappedFile::open(index_path, "shard index");
    std::string_view const text(reinterpret_cast<char const*>(mapped.bytes().data()), mapped.size());
    io::Json const index = io::parse_json(text, index_name, "shard index");
    io::JsonFields const fields(index, index_name);
    io::Json const* weight_map = fields.find("weight_map");
    FLASHDEBERTA_REQUIRE(weight_map != nullptr, index_name << ": key 'weight_map' is missing");
    if (!weight_map->is_object()) io::fail_json_type(index_name, "key 'weight_map'", "an object", *weight_map);

    std::map<std::string, std::size_t> file_ids;  // shard file name -> index in files_, each opened once
    std::vector<std::pair<std::string, std::size_t>> wanted;
    // No structured bindings here: clang < 16 cannot capture them in the message lambdas.
    for (auto const& item : weight_map->items()) {
      std::string const& name = item.key();
      io::Json const& value = item.value();
      std::string const& shard = io::json_as_string(value, index_name, "weight_map entry '" + name + "'");
      auto [it, inserted] = file_ids.emplace(shard, files_.size());
      if (inserted) {
        // A NUL ("\u0000" in the JSON) would cut the name short when it reaches the operating system
        // (and the message below short when printed, so the name is not quoted).
        std::size_t const nul = shard.find('\0');
        FLASHDEBERTA_REQUIRE(nul == std::string::npos, "checkpoint " << directory_.string() << ": " << index_file
                                                                     << " maps '" << name
                                                                     << "' to a shard name with a NUL byte at offset "
                                                                     << nul << ", which no file name can hold");
        // Only plain names: an index must not make the loader read files outside the checkpoint.
        std::filesystem::path const shard_path(shard);
        FLASHDEBERTA_REQUIRE(!shard.empty() && shard_path == shard_path.filename() && shard != "." && shard != "..",
                             "checkpoint " << directory_.string() << ": " << index_file << " maps '" << name << "' to '"
                                           << shard << "', which is not a file name in the directory");
        io::FileStatus const shard_status = io::file_status(directory_ / shard_path);
        FLASHDEBERTA_REQUIRE_FILE(shard_status.kind == io::FileKind::kRegular,
                                  "checkpoint " << directory_.string() << ": " << index_file << " maps '" << name
                                                << "' to shard '" << shard << "', which "
                                                << (shard_status.kind == io::FileKind::kMissing
                                                        ? std::string("does not exist")
                                                        : "is " + io::describe_file_status(shard_status)));
        if (torch) {
          files_.emplace_back(TorchFile::open(directory_ / shard_path));
        } else {
          files_.emplace_back(SafetensorsFile::open(directory_ / shard_path));
        }
      }
      wanted.emplace_back(name, it->second);
    }
    for (auto const& want : wanted) {
      std::string const& name = want.first;
      std::size_t const file = want.second;
      auto const& tensors = detail::checkpoint_file_tensors(files_[file]);
      auto it = tensors.find(name);
      FLASHDEBERTA_REQUIRE(it != tensors.end(), "checkpoint " << directory_.string() << ": " << index_file << " maps '"
                                                              << name << "' to shard '"
                                                              << detail::checkpoint_file_source(files_[file])
                                                              << "', which does not contain it");
      entries_.emplace(name, Entry{&it->second, file});
    }
  }

  std::filesystem::path directory_;
  CheckpointOptions options_;
  std::vector<detail::CheckpointFile> files_;
  std::map<std::string, Entry, std::less<>> entries_;
};

}  // namespace flashdeberta

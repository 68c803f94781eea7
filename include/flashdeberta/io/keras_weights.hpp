// Keras 3's weight files (Model.save_weights): one `*.weights.h5`, or a `*.weights.json` index naming
// `*_0000N.weights.h5` shards, read as the variables of each layer.
//
// Keras stores a layer's variables as datasets `vars/0`, `vars/1`, ... (creation order) under the layer's
// group, `layers/<snake_case class><_counter>`, sublayers held as attributes nesting under their attribute
// name. Since Keras 3.6 each `vars` group carries the layer's own name as attribute `name`; in a sharded save
// only the shard that created the group has it. The index maps each vars group ("/layers/dense/vars") to
// the shard holding it, or to a list of shards when its variables span several; it is authoritative: each
// group is read from the shards it names, every dataset of a shard must belong to a group the index gives that
// shard, and no variable may appear twice.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/io/hdf5_file.hpp"
#include "flashdeberta/io/json.hpp"
#include "flashdeberta/io/mapped_file.hpp"

namespace flashdeberta::io {

// One variable: dataset `index` of a vars group, in one file of the set.
struct KerasVariable {
  std::size_t file = 0;
  Hdf5Dataset dataset;
};

// A layer's variables: the vars group's path without its leading slash ("layers/dense_1/vars"), the layer
// name Keras recorded (if any shard has it), and the variables by index.
struct KerasVarsGroup {
  std::string path;
  std::optional<std::string> layer_name;
  std::map<std::int64_t, KerasVariable> variables;
};

class KerasWeights {
 public:
  // `path`: a `.weights.h5` file or a `.weights.json` index beside its shards.
  static KerasWeights open(std::filesystem::path const& path) {
    KerasWeights weights;
    if (path.extension() == ".json") {
      weights.open_sharded(path);
    } else {
      weights.source_ = path.string();
      weights.files_.push_back(std::make_shared<Hdf5File const>(Hdf5File::open(path, "Keras weights")));
      weights.add_file(0, nullptr);
    }
    weights.read_layer_names();
    return weights;
  }

  // From an image in memory: one file (the fuzz target).
  static KerasWeights open_image(std::span<std::byte const> bytes, std::string source) {
    KerasWeights weights;
    weights.source_ = source;
    weights.files_.push_back(std::make_shared<Hdf5File const>(Hdf5File::open_image(bytes, std::move(source))));
    weights.add_file(0, nullptr);
    weights.read_layer_names();
    return weights;
  }

  std::map<std::string, KerasVarsGroup> const& groups() const { return groups_; }
  std::string const& source(std::size_t file) const { return files_[file]->source(); }
  std::string const& source() const { return source_; }

  std::vector<std::byte> read(KerasVariable const& variable) const {
    return files_[variable.file]->read(variable.dataset);
  }

 private:
  // Splits "<group>/vars/<index>" (the index a decimal without sign or leading zeros), or refuses the dataset.
  static std::pair<std::string, std::int64_t> split_variable_path(std::string const& path, std::string const& file) {
    std::size_t const slash = path.rfind('/');
    std::string_view const index = std::string_view(path).substr(slash == std::string::npos ? 0 : slash + 1);
    std::string const group = slash == std::string::npos ? std::string() : path.substr(0, slash);
    bool const digits = !index.empty() && index.size() <= 9 && index.find_first_not_of("0123456789") == index.npos &&
                        (index.size() == 1 || index[0] != '0');
    FLASHDEBERTA_REQUIRE(
        digits && (group == "vars" || group.ends_with("/vars")),
        file << ": dataset '" << path << "' is not a Keras variable (Keras stores them as <layer>/vars/<index>)");
    return {group, std::stoll(std::string(index))};
  }

  // `allowed`: the vars groups the index gives this file (nullptr: a single file, every group allowed).
  void add_file(std::size_t file, std::map<std::string, std::vector<std::size_t>> const* allowed) {
    std::string const& name = files_[file]->source();
    for (Hdf5Dataset const& dataset : files_[file]->datasets()) {
      auto const split = split_variable_path(dataset.path, name);
      std::string const& group_path = split.first;
      std::int64_t const index = split.second;
      if (allowed != nullptr) {
        auto it = allowed->find(group_path);
        bool const listed =
            it != allowed->end() && std::find(it->second.begin(), it->second.end(), file) != it->second.end();
        FLASHDEBERTA_REQUIRE(listed, name << ": holds '" << dataset.path << "', but " << source_ << " does not map '/"
                                          << group_path << "' to this shard");
      }
      KerasVarsGroup& group = groups_[group_path];
      group.path = group_path;
      auto const placed = group.variables.emplace(index, KerasVariable{file, dataset});
      FLASHDEBERTA_REQUIRE(placed.second, name << ": variable '" << dataset.path << "' is also in "
                                               << files_[placed.first->second.file]->source());
    }
  }

  void read_layer_names() {
    for (auto& item : groups_) {
      std::string const& path = item.first;
      KerasVarsGroup& group = item.second;
      std::vector<std::size_t> files;
      for (auto const& variable : group.variables) {
        if (std::find(files.begin(), files.end(), variable.second.file) == files.end())
          files.push_back(variable.second.file);
      }
      for (std::size_t file : files) {
        std::optional<std::string> name = files_[file]->attribute(path, "name");
        if (!name) continue;
        FLASHDEBERTA_REQUIRE(!group.layer_name || *group.layer_name == *name,
                             source_ << ": '/" << path << "' is named '" << *group.layer_name << "' in one shard and '"
                                     << *name << "' in " << files_[file]->source());
        group.layer_name = std::move(name);
      }
    }
  }

  void open_sharded(std::filesystem::path const& index_path) {
    source_ = index_path.string();
    std::filesystem::path const directory = index_path.has_parent_path() ? index_path.parent_path() : ".";
    MappedFile const mapped = MappedFile::open(index_path, "Keras shard index");
    std::string_view const text(reinterpret_cast<char const*>(mapped.bytes().data()), mapped.size());
    Json const index = parse_json(text, source_, "Keras shard index");
    JsonFields const fields(index, source_);
    Json const* weight_map = fields.find("weight_map");
    FLASHDEBERTA_REQUIRE(weight_map != nullptr, source_ << ": key 'weight_map' is missing");
    if (!weight_map->is_object()) fail_json_type(source_, "key 'weight_map'", "an object", *weight_map);

    std::map<std::string, std::size_t> shard_ids;                  // shard file name -> index in files_
    std::map<std::string, std::vector<std::size_t>> group_shards;  // vars group -> the shards the index gives it
    for (auto const& item : weight_map->items()) {
      std::string const key = item.key();
      std::string const where = "weight_map entry '" + key + "'";
      FLASHDEBERTA_REQUIRE(key.size() > 1 && key[0] == '/',
                           source_ << ": " << where << " is not a vars group path (\"/layers/.../vars\")");
      std::vector<std::string> shards;
      if (item.value().is_array()) {
        for (std::size_t i = 0; i < item.value().size(); ++i)
          shards.push_back(json_as_string(item.value()[i], source_, where + "[" + std::to_string(i) + "]"));
      } else {
        shards.push_back(json_as_string(item.value(), source_, where));
      }
      FLASHDEBERTA_REQUIRE(!shards.empty(), source_ << ": " << where << " names no shard");
      for (std::string const& shard : shards) {
        auto [it, inserted] = shard_ids.emplace(shard, files_.size());
        if (inserted) {
          std::filesystem::path const shard_path(shard);
          FLASHDEBERTA_REQUIRE(
              !shard.empty() && shard.find('\0') == std::string::npos && shard_path == shard_path.filename() &&
                  shard != "." && shard != "..",
              source_ << ": " << where << " names '" << shard << "', which is not a file name in the directory");
          FileStatus const status = file_status(directory / shard_path);
          FLASHDEBERTA_REQUIRE_FILE(status.kind == FileKind::kRegular,
                                    source_
                                        << ": " << where << " names shard '" << shard << "', which "
                                        << (status.kind == FileKind::kMissing ? std::string("does not exist")
                                                                              : "is " + describe_file_status(status)));
          files_.push_back(
              std::make_shared<Hdf5File const>(Hdf5File::open(directory / shard_path, "Keras weights shard")));
        }
        group_shards[key.substr(1)].push_back(it->second);
      }
    }
    FLASHDEBERTA_REQUIRE(!files_.empty(), source_ << ": 'weight_map' names no shard");
    for (std::size_t file = 0; file < files_.size(); ++file) add_file(file, &group_shards);
    for (auto const& item : group_shards) {
      std::string const& group = item.first;
      FLASHDEBERTA_REQUIRE(groups_.count(group) != 0, source_ << ": maps '/" << group << "' to "
                                                              << files_[item.second.front()]->source()
                                                              << ", which holds no variable of it");
    }
  }

  std::string source_;
  std::vector<std::shared_ptr<Hdf5File const>> files_;
  std::map<std::string, KerasVarsGroup> groups_;
};

}  // namespace flashdeberta::io

// A ZeroModels checkpoint directory read as the HF checkpoint of the same model: its config as HF's
// config.json would say it (for io/config_json.hpp) and its variables as HF-named tensors in HF's layouts
// (a Checkpoint file kind), so that every model, head and front end loads it unchanged.
//
// Needs libhdf5 (FLASHDEBERTA_WITH_HDF5, set by CMake where it finds Debian's libhdf5-dev); a build
// without it refuses such a directory and names the package.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/io/json.hpp"
#include "flashdeberta/io/mapped_file.hpp"
#include "flashdeberta/io/safetensors.hpp"
#include "flashdeberta/io/zeromodels_config.hpp"
#if FLASHDEBERTA_WITH_HDF5
#include "flashdeberta/io/zeromodels_mapping.hpp"
#endif

namespace flashdeberta {

// Tensors held in memory: a checkpoint file whose tensors were converted while reading (ZeroModels' Keras
// variables, transposed to HF's layouts). Nothing is mapped and nothing is lent.
class TensorStore {
 public:
  explicit TensorStore(std::string source) : source_(std::move(source)) {}

  void add(std::string name, DType dtype, std::vector<std::int64_t> shape, std::vector<std::byte> bytes) {
    storage_.push_back(std::make_unique<std::vector<std::byte>>(std::move(bytes)));
    TensorInfo info;
    info.name = name;
    info.dtype = dtype;
    info.shape = std::move(shape);
    info.numel = 1;
    for (std::int64_t d : info.shape) info.numel *= d;
    info.bytes = std::span<std::byte const>(storage_.back()->data(), storage_.back()->size());
    tensors_.emplace(std::move(name), std::move(info));
  }

  std::string const& source() const { return source_; }
  std::map<std::string, TensorInfo, std::less<>> const& tensors() const { return tensors_; }
  std::shared_ptr<io::MappedFile const> const& mapping() const { return no_mapping_; }
  void release(TensorInfo const&) const {}

 private:
  std::string source_;
  std::vector<std::unique_ptr<std::vector<std::byte>>> storage_;  // stable addresses for the spans
  std::map<std::string, TensorInfo, std::less<>> tensors_;
  std::shared_ptr<io::MappedFile const> no_mapping_;
};

namespace io {

// The ZeroModels files of a checkpoint directory without HF's config.json (which, present, makes it HF's).
inline std::optional<ZeroModelsDirectory> zeromodels_directory_of(std::filesystem::path const& path) {
  if (file_status(path).kind != FileKind::kDirectory || file_status(path / "config.json").kind != FileKind::kMissing)
    return std::nullopt;
  return find_zeromodels_directory(path);
}

#if FLASHDEBERTA_WITH_HDF5

namespace detail {

struct OpenedZeroModels {
  ZeroModelsConfig config;
  KerasWeights weights;
  ZeroModelsMapping mapping;
};

inline OpenedZeroModels open_zeromodels(ZeroModelsDirectory const& dir) {
  ZeroModelsConfig config = read_zeromodels_config(dir.config_file);
  KerasWeights weights = KerasWeights::open(dir.weights_file);
  ZeroModelsMapping mapping = map_zeromodels(weights, config);
  return {std::move(config), std::move(weights), std::move(mapping)};
}

}  // namespace detail

// HF's config.json for the directory's model: the config's hyperparameters, ZeroModels' fixed structure, and
// what the weights say (the head and its label count, separate position projections).
inline Json zeromodels_hf_config(ZeroModelsDirectory const& dir) {
  detail::OpenedZeroModels const z = detail::open_zeromodels(dir);
  Json hf = z.config.hf_config;
  bool const v1 = z.config.family == ZeroModelsFamily::kV1;
  hf["architectures"] =
      Json::array({z.mapping.architecture.empty() ? (v1 ? "DebertaModel" : "DebertaV2Model") : z.mapping.architecture});
  if (!v1 && z.mapping.separate_position_projections) hf["share_att_key"] = false;
  if (z.mapping.architecture.ends_with("ForMaskedLM")) {
    hf["legacy"] = true;  // cls.predictions.*, with the decoder ZeroModels trains apart from the embeddings
    hf["tie_word_embeddings"] = false;
  }
  if (z.mapping.num_labels > 0 && !z.mapping.architecture.ends_with("ForMultipleChoice")) {
    Json id2label = Json::object(), label2id = Json::object();
    for (std::int64_t i = 0; i < z.mapping.num_labels; ++i) {
      id2label[std::to_string(i)] = "LABEL_" + std::to_string(i);
      label2id["LABEL_" + std::to_string(i)] = i;
    }
    hf["id2label"] = id2label;
    hf["label2id"] = label2id;
  }
  return hf;
}

// Every variable, read and rearranged into HF's layout under HF's name.
inline TensorStore read_zeromodels_tensors(ZeroModelsDirectory const& dir) {
  detail::OpenedZeroModels const z = detail::open_zeromodels(dir);
  TensorStore store(z.weights.source());
  for (ZeroModelsTensor const& t : z.mapping.tensors) {
    std::vector<std::int64_t> shape = t.variable->dataset.shape;
    DType const dtype = t.variable->dataset.dtype;
    std::vector<std::byte> bytes =
        relayout(z.weights.read(*t.variable), shape, t.layout, dtype_size(dtype), LayoutDirection::kKerasToTorch);
    store.add(t.hf_name, dtype, std::move(shape), std::move(bytes));
  }
  return store;
}

#else

[[noreturn]] inline void fail_without_hdf5(ZeroModelsDirectory const& dir) {
  FLASHDEBERTA_FAIL(dir.config_file.parent_path().string()
                    << ": a ZeroModels (Keras) checkpoint, whose weights are HDF5; this flashdeberta was built without "
                       "libhdf5: install Debian's libhdf5-dev and configure and build again");
}
inline Json zeromodels_hf_config(ZeroModelsDirectory const& dir) { fail_without_hdf5(dir); }
inline TensorStore read_zeromodels_tensors(ZeroModelsDirectory const& dir) { fail_without_hdf5(dir); }

#endif

}  // namespace io
}  // namespace flashdeberta

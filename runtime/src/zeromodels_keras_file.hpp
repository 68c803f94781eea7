// The Keras side of HF -> ZeroModels (zeromodels_writer.cpp): the vars groups Keras' save_weights writes for
// ZeroModels' classes, an HDF5 writer over libhdf5, and torch layouts turned back into Keras'.
//
// Keras names a layer's group after its class and its place among the layers of that class in its model
// ("layers/dense_4"), custom layers' sublayers after their attribute ("layers/deberta_v2_embeddings/
// word_embeddings"), and records the layer's own name on each vars group; io/zeromodels_mapping.hpp reads exactly
// this layout back.
#pragma once

#if !FLASHDEBERTA_WITH_HDF5
#error "zeromodels_keras_file.hpp needs libhdf5"
#endif

#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/io/zeromodels_mapping.hpp"

namespace flashdeberta::runtime::zeromodels {

namespace fs = std::filesystem;

// One vars group of the Keras file: its path, the layer name recorded on it, and its role.
struct KerasGroup {
  std::string path;  // "layers/dense_4/vars"
  std::string layer_name;
  std::string role;
};

inline std::string counted(std::string const& cls, std::size_t k) {
  return k == 0 ? cls : cls + "_" + std::to_string(k);
}

// The groups Keras' save_weights writes for ZeroModels' class, in the model's layer order (io/zeromodels_mapping.hpp
// reads them back through the same build order).
inline std::vector<KerasGroup> keras_groups(io::detail::ZeroModelsSizes const& s, bool separate_positions,
                                            std::vector<std::string> const& head_dense, bool lm_head_norm,
                                            std::string const& nested_backbone) {
  std::string const p = nested_backbone.empty() ? "layers/" : "layers/" + nested_backbone + "/layers/";
  std::string const emb = s.v1 ? "deberta_embeddings" : "deberta_v2_embeddings";
  std::vector<KerasGroup> out{{p + emb + "/word_embeddings/vars", "word_embeddings", "word_embeddings"},
                              {p + emb + "/layer_norm/vars", "LayerNorm", "embeddings_LayerNorm"},
                              {p + (s.v1 ? "deberta_relative_embedding" : "deberta_v2_relative_embedding") + "/vars",
                               "rel_embeddings", "rel_embeddings"}};
  if (s.conv_kernel > 0) {
    out.push_back({p + "deberta_v2_conv_layer/conv/vars", "conv", "conv"});
    out.push_back({p + "deberta_v2_conv_layer/layer_norm/vars", "LayerNorm", "conv_LayerNorm"});
  }
  for (std::int64_t b = 0; b < s.layers; ++b) {
    std::string const block = "blocks_" + std::to_string(b) + "_";
    std::string const att =
        p + counted(s.v1 ? "deberta_disentangled_self_attention" : "deberta_v2_disentangled_self_attention",
                    static_cast<std::size_t>(b));
    std::vector<std::string> parts;
    if (s.v1) {
      parts = {"in_proj"};
      if (s.c2p) parts.push_back("pos_proj");
      if (s.p2c) parts.push_back("pos_q_proj");
      out.push_back({att + "/vars", block + "attention_self", block + "attention_self"});
    } else {
      parts = {"query_proj", "key_proj", "value_proj"};
      if (separate_positions && s.c2p) parts.push_back("pos_key_proj");
      if (separate_positions && s.p2c) parts.push_back("pos_query_proj");
    }
    for (std::string const& part : parts) out.push_back({att + "/" + part + "/vars", block + part, block + part});
  }
  for (char const* cls : {"dense", "layer_normalization"}) {
    std::vector<std::string> roles = io::detail::backbone_plain_roles(cls, s);
    std::size_t const backbone = roles.size();
    if (std::string(cls) == "dense") roles.insert(roles.end(), head_dense.begin(), head_dense.end());
    if (std::string(cls) == "layer_normalization" && lm_head_norm) roles.push_back("lm_head_layernorm");
    for (std::size_t k = 0; k < roles.size(); ++k) {
      // A nested backbone (multiple choice) leaves the head's layers to the outer model, counted afresh.
      bool const head = k >= backbone;
      std::string const scope = head && !nested_backbone.empty() ? "layers/" : p;
      std::size_t const index = head && !nested_backbone.empty() ? k - backbone : k;
      out.push_back({scope + counted(cls, index) + "/vars", roles[k], roles[k]});
    }
  }
  return out;
}

// An HDF5 file written through libhdf5, groups created as paths need them.
class Hdf5Writer {
 public:
  explicit Hdf5Writer(fs::path const& path) : path_(path.string()) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    file_ = H5Fcreate(path_.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT);
    FLASHDEBERTA_REQUIRE_FILE(file_ >= 0, path_ << ": cannot create the HDF5 file");
    links_ = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(links_, 1);
  }
  Hdf5Writer(Hdf5Writer const&) = delete;
  Hdf5Writer& operator=(Hdf5Writer const&) = delete;
  ~Hdf5Writer() {
    if (links_ >= 0) H5Pclose(links_);
    if (file_ >= 0) H5Fclose(file_);
  }

  void group(std::string const& path, std::string const& layer_name) {
    if (H5Lexists(file_, path.c_str(), H5P_DEFAULT) <= 0) {
      hid_t const g = H5Gcreate2(file_, path.c_str(), links_, H5P_DEFAULT, H5P_DEFAULT);
      FLASHDEBERTA_REQUIRE(g >= 0, path_ << ": cannot create group '" << path << "'");
      H5Gclose(g);
    }
    // Keras records the layer's name as a variable-length UTF-8 string (h5py's str).
    hid_t const g = H5Gopen2(file_, path.c_str(), H5P_DEFAULT);
    hid_t const type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, H5T_VARIABLE);
    H5Tset_cset(type, H5T_CSET_UTF8);
    hid_t const space = H5Screate(H5S_SCALAR);
    hid_t const attribute = H5Acreate2(g, "name", type, space, H5P_DEFAULT, H5P_DEFAULT);
    char const* text = layer_name.c_str();
    herr_t const written = attribute >= 0 ? H5Awrite(attribute, type, &text) : -1;
    if (attribute >= 0) H5Aclose(attribute);
    H5Sclose(space);
    H5Tclose(type);
    H5Gclose(g);
    FLASHDEBERTA_REQUIRE(written >= 0, path_ << ": cannot write the name of '" << path << "'");
  }

  void dataset(std::string const& path, std::vector<std::int64_t> const& shape, std::vector<float> const& values) {
    std::vector<hsize_t> dims(shape.begin(), shape.end());
    hid_t const space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    hid_t const set = H5Dcreate2(file_, path.c_str(), H5T_IEEE_F32LE, space, links_, H5P_DEFAULT, H5P_DEFAULT);
    herr_t const written =
        set >= 0 ? H5Dwrite(set, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) : -1;
    if (set >= 0) H5Dclose(set);
    H5Sclose(space);
    FLASHDEBERTA_REQUIRE(written >= 0, path_ << ": cannot write dataset '" << path << "'");
  }

  void close() {
    FLASHDEBERTA_REQUIRE(H5Fclose(file_) >= 0, path_ << ": cannot finish the HDF5 file");
    file_ = -1;
  }

 private:
  std::string path_;
  hid_t file_ = -1;
  hid_t links_ = -1;
};

}  // namespace flashdeberta::runtime::zeromodels

// ZeroModels checkpoints other than the fixtures' float32 files of Keras >= 3.6, made from the fixtures by editing
// copies with libhdf5 itself: layer names stripped as Keras < 3.6 wrote them, float16 and bfloat16 weights as
// Keras stores them; and files that are not what they should be (a dataset deleted, added, retyped, dimensions
// declared beyond the file, the file cut short), each refused with one error naming the file and what is wrong.
#pragma once

#include <doctest/doctest.h>
#include <hdf5.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../scratch_dir.hpp"
#include "zeromodels_suite.hpp"

namespace flashdeberta::testing {

// An HDF5 file open read-write for the length of a scope.
struct Hdf5TestFile {
  explicit Hdf5TestFile(std::filesystem::path const& file) : id(H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)) {
    REQUIRE(id >= 0);
  }
  ~Hdf5TestFile() { H5Fclose(id); }
  hid_t id;
};

// Opens `file` read-write, runs `edit(file_id)`, closes it.
template <class Edit>
void edit_hdf5(std::filesystem::path const& file, Edit&& edit) {
  hid_t const id = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  REQUIRE(id >= 0);
  edit(id);
  REQUIRE(H5Fclose(id) >= 0);
}

// Deletes every `name` attribute of every vars group, as files written before Keras 3.6 lack them.
inline void strip_layer_names(hid_t file) {
  auto const visit = [](hid_t object, char const* name, H5O_info_t const*, void*) -> herr_t {
    std::string const path(name);
    if (path == "vars" || path.ends_with("/vars")) {
      if (H5Aexists_by_name(object, name, "name", H5P_DEFAULT) > 0)
        H5Adelete_by_name(object, name, "name", H5P_DEFAULT);
    }
    return 0;
  };
  REQUIRE(H5Ovisit(file, H5_INDEX_NAME, H5_ITER_INC, visit, nullptr) >= 0);
}

// A float dataset of `dims` at `path` (groups created), its storage allocated late, so never written: the file
// then declares it without holding its bytes.
inline void add_dataset(hid_t file, std::string const& path, std::vector<hsize_t> const& dims,
                        hid_t type = H5T_IEEE_F32LE, bool write = true) {
  hid_t const links = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(links, 1);
  hid_t const space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  hid_t const dataset = H5Dcreate2(file, path.c_str(), type, space, links, H5P_DEFAULT, H5P_DEFAULT);
  REQUIRE(dataset >= 0);
  if (write) {
    std::size_t count = 1;
    for (hsize_t d : dims) count *= d;
    std::vector<std::byte> zeros(count * H5Tget_size(type));
    H5Dwrite(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, zeros.data());
  }
  H5Dclose(dataset);
  H5Sclose(space);
  H5Pclose(links);
}

inline std::string load_error(std::filesystem::path const& dir) {
  try {
    ModelConfig const config = load_model_config(dir);
    Checkpoint const checkpoint = Checkpoint::open(dir);
    return "loaded (" + std::to_string(checkpoint.size()) + " tensors)";
  } catch (Error const& e) {
    return e.what();
  }
}

// The load fails, and its message contains `needle`.
inline void check_refused(std::filesystem::path const& dir, std::string const& needle) {
  std::string const message = load_error(dir);
  MESSAGE("refused: " << message);
  CHECK(message.find(needle) != std::string::npos);
}

// Rewrites every dataset of `file` in `dtype` (kF16: IEEE half as h5py writes numpy's float16; kBF16: Keras' 2-byte
// opaque type marked with the attribute dtype="bfloat16"), the values rounded from the float32 ones.
inline void retype_datasets(std::filesystem::path const& file, DType dtype) {
  Hdf5TestFile const h5(file);
  std::vector<std::string> paths;
  auto const collect = [](hid_t, char const* name, H5O_info_t const* info, void* out) -> herr_t {
    if (info->type == H5O_TYPE_DATASET) static_cast<std::vector<std::string>*>(out)->push_back(name);
    return 0;
  };
  REQUIRE(H5Ovisit(h5.id, H5_INDEX_NAME, H5_ITER_INC, collect, &paths) >= 0);
  for (std::string const& path : paths) {
    hid_t const old = H5Dopen2(h5.id, path.c_str(), H5P_DEFAULT);
    hid_t const space = H5Dget_space(old);
    std::vector<float> values(static_cast<std::size_t>(H5Sget_simple_extent_npoints(space)));
    REQUIRE(H5Dread(old, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0);
    H5Dclose(old);
    REQUIRE(H5Ldelete(h5.id, path.c_str(), H5P_DEFAULT) >= 0);
    std::vector<std::uint16_t> bits;
    for (float v : values) bits.push_back(dtype == DType::kF16 ? float_to_half(v) : float_to_bfloat16(v));
    hid_t type = -1;
    if (dtype == DType::kF16) {
      type = H5Tcopy(H5T_IEEE_F32LE);
      H5Tset_fields(type, 15, 10, 5, 0, 10);
      H5Tset_size(type, 2);
      H5Tset_ebias(type, 15);
    } else {
      type = H5Tcreate(H5T_OPAQUE, 2);
      H5Tset_tag(type, "bfloat16");
    }
    hid_t const created = H5Dcreate2(h5.id, path.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    REQUIRE(created >= 0);
    REQUIRE(H5Dwrite(created, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bits.data()) >= 0);
    if (dtype == DType::kBF16) {
      hid_t const text = H5Tcopy(H5T_C_S1);
      H5Tset_size(text, H5T_VARIABLE);
      hid_t const scalar = H5Screate(H5S_SCALAR);
      hid_t const attribute = H5Acreate2(created, "dtype", text, scalar, H5P_DEFAULT, H5P_DEFAULT);
      char const* mark = "bfloat16";
      REQUIRE(H5Awrite(attribute, text, &mark) >= 0);
      H5Aclose(attribute);
      H5Sclose(scalar);
      H5Tclose(text);
    }
    H5Dclose(created);
    H5Tclose(type);
    H5Sclose(space);
  }
}

template <ExecutionPolicy P>
void run_zeromodels_error_suite(P const& policy) {
  std::filesystem::path const fixtures = zeromodels_fixture_dir();
  auto const copy_of = [&](char const* name, char const* tag) {
    auto scratch = std::make_unique<ScratchDir>(tag);
    scratch->copy_from(fixtures / name);
    return scratch;
  };

  SUBCASE("files written before Keras 3.6 (no layer names) map through the build-order counters") {
    for (char const* name : {"v1_base", "v2_base", "v3_seq_cls", "v2_multiple_choice", "v3_qa", "v3_token_cls"}) {
      auto const dir = copy_of(name, "zm_unnamed");
      edit_hdf5(dir->path() / "model.weights.h5", strip_layer_names);
      std::filesystem::copy_file(fixtures / name / "expected.safetensors", dir->path() / "expected.safetensors",
                                 std::filesystem::copy_options::overwrite_existing);
      INFO("fixture " << std::string(name) << " without layer names");
      check_zeromodels_fixture(policy, dir->path());
    }
  }

  SUBCASE("float16 and bfloat16 weights, as Keras stores them, read as the float32 values rounded") {
    for (DType dtype : {DType::kF16, DType::kBF16}) {
      auto const dir = copy_of("v3_seq_cls", "zm_dtype16");
      retype_datasets(dir->path() / "model.weights.h5", dtype);
      Checkpoint const original = Checkpoint::open(fixtures / "v3_seq_cls");
      Checkpoint const rounded = Checkpoint::open(dir->path());
      REQUIRE(rounded.names() == original.names());
      for (std::string const& name : original.names()) {
        INFO(dtype_name(dtype) << " " << name);
        CHECK(rounded.info(name).dtype == dtype);
        std::vector<float> const exact = original.read_f32(name, original.info(name).shape);
        std::vector<float> const got = rounded.read_f32(name, rounded.info(name).shape);
        bool same = got.size() == exact.size();
        for (std::size_t i = 0; same && i < got.size(); ++i) {
          float const want = dtype == DType::kF16 ? half_to_float(float_to_half(exact[i]))
                                                  : bfloat16_to_float(float_to_bfloat16(exact[i]));
          same = got[i] == want;
        }
        CHECK(same);
      }
      auto const model = DebertaV3ForSequenceClassification<P>::load(policy, dir->path());
      CHECK(model.head().labels().size() == 3);
    }
  }

  SUBCASE("a file that is not HDF5, or cut short") {
    auto const dir = copy_of("v3_base", "zm_truncated");
    std::filesystem::path const file = dir->path() / "model.weights.h5";
    std::filesystem::resize_file(file, std::filesystem::file_size(file) / 2);
    check_refused(dir->path(), ("model.weights.h5: not a readable HDF5 file"));
    std::ofstream(file, std::ios::trunc) << "{\"not\": \"hdf5\"}";
    check_refused(dir->path(), ("model.weights.h5: not an HDF5 file (15 bytes"));
  }

  SUBCASE("a global heap whose objects do not advance, on which libhdf5 would loop forever") {
    auto const dir = copy_of("v3_base", "zm_heap");
    std::filesystem::path const file = dir->path() / "model.weights.h5";
    std::string bytes = io::read_regular_file(file, "weights");
    std::size_t const heap = bytes.find(std::string("GCOL\x01\0\0\0", 8));
    REQUIRE(heap != std::string::npos);                 // the layer names live there
    bytes.replace(heap + 16, 2, std::string(2, '\0'));  // the first object becomes free space ...
    bytes.replace(heap + 24, 8, std::string(8, '\0'));  // ... of 0 bytes
    dir->write("model.weights.h5", bytes);
    check_refused(dir->path(), "model.weights.h5: the global heap collection at byte " + std::to_string(heap) +
                                   " holds an object of 0 bytes that does not fit it");
  }

  SUBCASE("a group index whose B-tree loops or repeats its children, which libhdf5 would walk without end") {
    auto const dir = copy_of("v3_base", "zm_tree");
    std::filesystem::path const file = dir->path() / "model.weights.h5";
    std::string const original = io::read_regular_file(file, "weights");
    std::vector<std::size_t> nodes;  // group B-tree nodes: "TREE", type 0; the leaf of most entries last
    for (std::size_t at = original.find(std::string("TREE\0", 5)); at != std::string::npos && nodes.size() < 8;
         at = original.find(std::string("TREE\0", 5), at + 1))
      nodes.push_back(at);
    REQUIRE(nodes.size() == 8);
    std::ranges::sort(nodes, {}, [&](std::size_t at) { return static_cast<unsigned char>(original[at + 6]); });
    // Node layout: signature, type, level (byte 5), entries (2 bytes at 6), two sibling addresses, then an 8-byte
    // key and an 8-byte child address per entry: child i at byte 32 + 16 i.
    auto const make_node = [](std::string& bytes, std::size_t at, int level, std::vector<std::size_t> const& children) {
      bytes[at + 5] = static_cast<char>(level);
      std::uint16_t const n = static_cast<std::uint16_t>(children.size());
      bytes.replace(at + 6, 2, reinterpret_cast<char const*>(&n), 2);
      for (std::size_t i = 0; i < children.size(); ++i) {
        std::uint64_t const child = children[i];
        bytes.replace(at + 32 + 16 * i, 8, reinterpret_cast<char const*>(&child), 8);
      }
    };
    std::string cycle = original;  // a node of level 1 that is its own child
    make_node(cycle, nodes[0], 1, {nodes[0]});
    dir->write("model.weights.h5", cycle);
    std::string const at = std::to_string(nodes[0]);
    check_refused(dir->path(), "model.weights.h5: the group B-tree node at byte " + at +
                                   " (level 1) has as its child 0 "
                                   "the node at byte " +
                                   at + " (level 1): a corrupt index that would be walked without end");
    // Four levels of 32 children, each level's all the same node: 32^4 visits of the leaf's links.
    std::string lattice = original;
    std::vector<std::size_t> const chain{nodes[0], nodes[1], nodes[2], nodes[3], nodes.back()};
    for (int i = 0; i < 4; ++i) make_node(lattice, chain[i], 4 - i, std::vector<std::size_t>(32, chain[i + 1]));
    dir->write("model.weights.h5", lattice);
    check_refused(dir->path(), "leads to more than 100000 links (its children repeat)");
  }

  SUBCASE("a missing, an extra or a misshapen variable") {
    auto const missing = copy_of("v3_base", "zm_missing");
    edit_hdf5(missing->path() / "model.weights.h5",
              [](hid_t f) { REQUIRE(H5Ldelete(f, "layers/dense_4/vars/1", H5P_DEFAULT) >= 0); });
    check_refused(missing->path(), ("'/layers/dense_4/vars' (layer 'blocks_1_intermediate_dense') holds 1 variables, "
                                    "expected vars/0..1"));
    auto const gone = copy_of("v3_base", "zm_gone");
    edit_hdf5(gone->path() / "model.weights.h5",
              [](hid_t f) { REQUIRE(H5Ldelete(f, "layers/dense_4", H5P_DEFAULT) >= 0); });
    check_refused(gone->path(), ("layer 'blocks_1_intermediate_dense' is missing"));
    auto const extra = copy_of("v3_base", "zm_extra");
    edit_hdf5(extra->path() / "model.weights.h5", [](hid_t f) { add_dataset(f, "layers/dense_4/vars/2", {64}); });
    check_refused(extra->path(), ("holds 3 variables, expected vars/0..1"));
    auto const stray = copy_of("v3_base", "zm_stray");
    edit_hdf5(stray->path() / "model.weights.h5", [](hid_t f) { add_dataset(f, "layers/mystery/vars/0", {4}); });
    check_refused(stray->path(), ("'/layers/mystery/vars' is not a layer of ZeroModels' DeBERTa"));
    auto const shape = copy_of("v3_base", "zm_shape");
    std::string config = io::read_regular_file(shape->path() / "zm_config.json", "config");
    config.replace(config.find("\"mlp_dim\": 64"), 13, "\"mlp_dim\": 48");
    shape->write("zm_config.json", config);
    check_refused(shape->path(), ("'layers/dense_1/vars/0' (layer 'blocks_0_intermediate_dense', variable 0) has shape "
                                  "[32, 64]; "));
  }

  SUBCASE("a dtype Keras does not write, and dimensions declared beyond the file") {
    auto const dtype = copy_of("v3_base", "zm_dtype");
    edit_hdf5(dtype->path() / "model.weights.h5", [](hid_t f) {
      REQUIRE(H5Ldelete(f, "layers/dense_4/vars/1", H5P_DEFAULT) >= 0);
      add_dataset(f, "layers/dense_4/vars/1", {64}, H5T_STD_I32LE);
    });
    check_refused(dtype->path(),
                  ("dataset 'layers/dense_4/vars/1': an integer type of 4 bytes; Keras weights are float16"));
    auto const huge = copy_of("v3_base", "zm_huge");
    edit_hdf5(huge->path() / "model.weights.h5", [](hid_t f) {
      REQUIRE(H5Ldelete(f, "layers/dense_4/vars/1", H5P_DEFAULT) >= 0);
      add_dataset(f, "layers/dense_4/vars/1", {1u << 30, 1u << 30}, H5T_IEEE_F32LE, false);
    });
    check_refused(huge->path(), ("dataset 'layers/dense_4/vars/1': declared dimensions exceed what the file's"));
  }

  SUBCASE("a sharded index naming a missing shard, or a shard holding what the index does not give it") {
    auto const dir = copy_of("v3_sharded", "zm_shards");
    std::filesystem::remove(dir->path() / "model_00003.weights.h5");
    check_refused(dir->path(), ("names shard 'model_00003.weights.h5', which does not exist"));
    auto const moved = copy_of("v3_sharded", "zm_moved");
    std::string index = io::read_regular_file(moved->path() / "model.weights.json", "index");
    std::size_t const at = index.find("\"/layers/dense_1/vars\"");
    REQUIRE(at != std::string::npos);
    index.replace(index.find("model_00002", at), 11, "model_00004");
    moved->write("model.weights.json", index);
    check_refused(moved->path(), ("does not map '/layers/dense_1/vars' to this shard"));
  }

  SUBCASE("a head the file does not hold is refused naming the one it holds") {
    CHECK_THROWS_WITH_AS(DebertaV3ForSequenceClassification<P>::load(policy, fixtures / "v3_qa"),
                         doctest::Contains("sequence-classification"), Error);
  }
}

}  // namespace flashdeberta::testing

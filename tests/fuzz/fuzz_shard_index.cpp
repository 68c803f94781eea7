// libFuzzer target: a shard index (HF's {"metadata": ..., "weight_map": {tensor: shard file}}). Bit 0 of
// the first byte picks the name the rest is written under in a scratch folder:
//   0: model.safetensors.index.json, 1: pytorch_model.bin.index.json.
// The folder holds real shards (tests/fixtures/v3_sharded's safetensors, torch_bin/torch1/sharded's
// torch files) and a text file, so an index can name shards that exist, that do not, that hold the
// tensor or not, or that are no checkpoint at all. Checkpoint::open loads the folder; an accepted
// checkpoint must hold exactly the index's tensors, each readable at its full size. Any other outcome
// than that or a flashdeberta::Error is a bug.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string_view>

#include "flashdeberta/io/checkpoint.hpp"
#include "fuzz_support.hpp"

namespace fz = flashdeberta::fuzz;

namespace {

fz::ScratchDir const& checkpoint_dir() {
  static fz::ScratchDir const dir = [] {
    fz::ScratchDir d("fuzz_shard_index");
    std::filesystem::path const fixtures = FLASHDEBERTA_FIXTURE_DIR;
    for (char const* shard :
         {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors"}) {
      d.copy_in(fixtures / "v3_sharded" / shard);
    }
    for (char const* shard : {"pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin"}) {
      d.copy_in(fixtures / "torch_bin" / "torch1" / "sharded" / shard);
    }
    d.write("README.md", "not a checkpoint\n");
    return d;
  }();
  return dir;
}

}  // namespace

FLASHDEBERTA_FUZZ_TARGET(shard_index) {
  if (size == 0) return 0;
  fz::ScratchDir const& dir = checkpoint_dir();
  bool const torch = (data[0] & 1) != 0;
  std::string_view const text = fz::as_text(data + 1, size - 1);
  dir.remove(torch ? "model.safetensors.index.json" : "pytorch_model.bin.index.json");
  dir.write(torch ? "pytorch_model.bin.index.json" : "model.safetensors.index.json", text);
  try {
    flashdeberta::Checkpoint const ckpt = flashdeberta::Checkpoint::open(dir.path());
    // The loader accepted the index, so it is valid JSON with an object weight_map.
    auto const index = nlohmann::json::parse(text);
    fz::fuzz_check(ckpt.size() == index.at("weight_map").size(), "tensor count differs from the weight_map");
    for (auto const& item : index.at("weight_map").items()) {
      fz::fuzz_check(ckpt.contains(item.key()), "a weight_map tensor is missing from the checkpoint");
    }
    for (std::string const& name : ckpt.names()) {
      flashdeberta::TensorInfo const& info = ckpt.info(name);
      fz::fuzz_check(info.numel >= 0 && info.bytes.size() ==
                                            static_cast<std::size_t>(info.numel) * flashdeberta::dtype_size(info.dtype),
                     "a tensor's byte view does not match its size");
      std::size_t const values = flashdeberta::is_floating(info.dtype)
                                     ? ckpt.read_f32(name, info.shape).size()
                                     : flashdeberta::detail::tensor_to_i64(info, ckpt.source_of(name)).size();
      fz::fuzz_check(values == static_cast<std::size_t>(info.numel), "a tensor read back at the wrong size");
    }
  } catch (flashdeberta::Error const&) {
  }
  return 0;
}

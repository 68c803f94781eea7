// Checkpoint directories: single file, sharded index, and the ways an index or a directory can be wrong.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include "flashdeberta/core/host_buffer.hpp"
#include "flashdeberta/io/checkpoint.hpp"
#include "flashdeberta/io/safetensors_writer.hpp"
#include "io_test_util.hpp"

using flashdeberta::Checkpoint;
using flashdeberta::DType;
using flashdeberta::write_safetensors;
using flashdeberta::test::as_bytes_of;
using flashdeberta::test::error_message;
using flashdeberta::test::TempDir;
using flashdeberta::test::write_file;

namespace {

std::vector<float> const kWord = {1, 2, 3, 4, 5, 6};  // [3, 2]
std::vector<float> const kNorm = {0.5f, -0.5f};       // [2]

// Two shards as HF writes them, and the index mapping each tensor to its shard.
void write_sharded(TempDir const& dir, std::string const& weight_map) {
  write_safetensors(dir / "model-00001-of-00002.safetensors",
                    {{"embeddings.word_embeddings.weight", DType::kF32, {3, 2}, as_bytes_of(kWord)}});
  write_safetensors(dir / "model-00002-of-00002.safetensors",
                    {{"embeddings.LayerNorm.weight", DType::kF32, {2}, as_bytes_of(kNorm)}});
  write_file(dir / "model.safetensors.index.json",
             R"({"metadata": {"total_size": 32}, "weight_map": )" + weight_map + "}");
}

std::string const kGoodMap = R"({
  "embeddings.word_embeddings.weight": "model-00001-of-00002.safetensors",
  "embeddings.LayerNorm.weight": "model-00002-of-00002.safetensors"})";

}  // namespace

TEST_CASE("single model.safetensors") {
  TempDir dir;
  write_safetensors(dir / "model.safetensors",
                    {{"deberta.embeddings.word_embeddings.weight", DType::kF32, {3, 2}, as_bytes_of(kWord)},
                     {"deberta.embeddings.LayerNorm.weight", DType::kF32, {2}, as_bytes_of(kNorm)}});
  Checkpoint const ckpt = Checkpoint::open(dir.path());
  CHECK(ckpt.directory() == dir.path());
  CHECK(ckpt.names() ==
        std::vector<std::string>{"deberta.embeddings.LayerNorm.weight", "deberta.embeddings.word_embeddings.weight"});
  CHECK(ckpt.contains("deberta.embeddings.LayerNorm.weight"));
  CHECK(ckpt.read_f32("deberta.embeddings.word_embeddings.weight", {3, 2}) == kWord);
  CHECK(ckpt.info("deberta.embeddings.LayerNorm.weight").numel == 2);
  CHECK(ckpt.find_first({"embeddings.word_embeddings.weight", "deberta.embeddings.word_embeddings.weight"}) ==
        "deberta.embeddings.word_embeddings.weight");
  CHECK_FALSE(ckpt.find_first({"cls.predictions.bias", "lm_predictions.lm_head.bias"}).has_value());

  // The file itself can be named instead of its directory.
  CHECK(Checkpoint::open(dir / "model.safetensors").size() == 2);
}

TEST_CASE("shape mismatch and absent tensors name the checkpoint") {
  TempDir dir;
  write_safetensors(dir / "model.safetensors",
                    {{"embeddings.word_embeddings.weight", DType::kF32, {3, 2}, as_bytes_of(kWord)}});
  Checkpoint const ckpt = Checkpoint::open(dir.path());
  CHECK(error_message([&] {
          ckpt.read_f32("embeddings.word_embeddings.weight", {2, 3});
        }) == "checkpoint " + dir.path().string() +
                  ": tensor 'embeddings.word_embeddings.weight' has shape [3, 2], the config requires [2, 3]");
  CHECK(error_message([&] { ckpt.read_f32("embeddings.word_embeddings.weight", {6}); }).find("requires [6]") !=
        std::string::npos);
  CHECK(error_message([&] { ckpt.info("encoder.rel_embeddings.weight"); }) ==
        "checkpoint " + dir.path().string() + ": no tensor named 'encoder.rel_embeddings.weight' (1 tensors present)");
}

TEST_CASE("sharded index with two shards") {
  TempDir dir;
  write_sharded(dir, kGoodMap);
  Checkpoint const ckpt = Checkpoint::open(dir.path());
  CHECK(ckpt.size() == 2);
  CHECK(ckpt.read_f32("embeddings.word_embeddings.weight", {3, 2}) == kWord);
  CHECK(ckpt.read_f32("embeddings.LayerNorm.weight", {2}) == kNorm);
  CHECK(ckpt.source_of("embeddings.LayerNorm.weight") == (dir / "model-00002-of-00002.safetensors").string());
}

TEST_CASE("sharded index errors") {
  TempDir dir;
  std::string const prefix = "checkpoint " + dir.path().string() + ": ";
  SUBCASE("missing shard") {
    write_sharded(dir, R"({"embeddings.word_embeddings.weight": "model-00003-of-00002.safetensors"})");
    CHECK(error_message([&] { Checkpoint::open(dir.path()); }) ==
          prefix +
              "model.safetensors.index.json maps 'embeddings.word_embeddings.weight' to shard "
              "'model-00003-of-00002.safetensors', which does not exist");
  }
  SUBCASE("name mapped to the wrong shard") {
    write_sharded(dir, R"({"embeddings.word_embeddings.weight": "model-00002-of-00002.safetensors"})");
    CHECK(error_message([&] { Checkpoint::open(dir.path()); }) ==
          prefix + "model.safetensors.index.json maps 'embeddings.word_embeddings.weight' to shard '" +
              (dir / "model-00002-of-00002.safetensors").string() + "', which does not contain it");
  }
  SUBCASE("shard outside the directory") {
    write_sharded(dir, R"({"embeddings.word_embeddings.weight": "../model-00001-of-00002.safetensors"})");
    CHECK(error_message([&] { Checkpoint::open(dir.path()); }).find("which is not a file name in the directory") !=
          std::string::npos);
  }
  SUBCASE("index without weight_map") {
    write_file(dir / "model.safetensors.index.json", R"({"metadata": {}})");
    CHECK(error_message([&] { Checkpoint::open(dir.path()); }) ==
          (dir / "model.safetensors.index.json").string() + ": key 'weight_map' is missing");
  }
  SUBCASE("weight_map entry not a string") {
    write_file(dir / "model.safetensors.index.json", R"({"weight_map": {"a": 1}})");
    CHECK(error_message([&] { Checkpoint::open(dir.path()); }).find("weight_map entry 'a' must be a string") !=
          std::string::npos);
  }
  SUBCASE("a NUL byte, then anything, after the index") {
    write_sharded(dir, kGoodMap);
    std::string const index = (dir / "model.safetensors.index.json").string();
    std::string const text = R"({"metadata": {"total_size": 32}, "weight_map": )" + kGoodMap + "}";
    // Before, the parse stopped at the NUL and the second weight_map was never read.
    write_file(dir / "model.safetensors.index.json", text + std::string(1, '\0') + R"(, "weight_map": {}})");
    CHECK(error_message([&] { Checkpoint::open(dir.path()); }) ==
          index + ": shard index has a NUL byte at offset " + std::to_string(text.size()) +
              "; JSON text cannot contain one (the file is truncated, padded or not JSON)");
    write_file(dir / "model.safetensors.index.json", text + " garbage");
    CHECK(error_message([&] { Checkpoint::open(dir.path()); }).rfind(index + ": shard index is not valid JSON (", 0) ==
          0);
    write_file(dir / "model.safetensors.index.json", text + "\n");
    CHECK(Checkpoint::open(dir.path()).size() == 2);
  }
  SUBCASE("a shard name with an escaped NUL, which would cut the path short") {
    write_sharded(dir, R"({"embeddings.word_embeddings.weight": "model-00001-of-00002.safetensors\u0000.x"})");
    CHECK(error_message([&] { Checkpoint::open(dir.path()); }) ==
          prefix +
              "model.safetensors.index.json maps 'embeddings.word_embeddings.weight' to a shard name with a NUL byte "
              "at offset 32, which no file name can hold");
  }
  SUBCASE("a corrupt shard is reported with its own path") {
    write_sharded(dir, kGoodMap);
    write_file(dir / "model-00002-of-00002.safetensors", "short");
    CHECK(error_message([&] { Checkpoint::open(dir.path()); }) ==
          (dir / "model-00002-of-00002.safetensors").string() +
              ": file is 5 bytes, too short for the 8-byte safetensors header length");
  }
}

TEST_CASE("directories without a usable checkpoint") {
  TempDir dir;
  write_file(dir / "config.json", "{}");
  write_file(dir / "spm.model", "x");
  CHECK(error_message([&] { Checkpoint::open(dir.path()); }) ==
        "checkpoint " + dir.path().string() +
            ": none of model.safetensors, model.safetensors.index.json, pytorch_model.bin, "
            "pytorch_model.bin.index.json (nor ZeroModels' zm_config.json or kf_config.json) found (the directory "
            "holds: config.json, spm.model)");
  write_file(dir / "pytorch_model.bin", "PK");
  CHECK(error_message([&] { Checkpoint::open(dir.path()); }).find("pytorch_model.bin: not a torch.save file") !=
        std::string::npos);
  CHECK(error_message([&] { Checkpoint::open(dir / "nowhere"); }).find("not a directory") != std::string::npos);
}

// Weights used where they lie (CheckpointOptions::zero_copy, load_weight): only float32 tensors aligned to a float
// are lent, and what is lent outlives the Checkpoint.
TEST_CASE("float32 tensors lent from the mapped file") {
  TempDir dir;
  std::vector<std::uint16_t> const bf16 = {0x3f80, 0xc000};  // 1, -2
  write_safetensors(dir / "model.safetensors", {{"word", DType::kF32, {3, 2}, as_bytes_of(kWord)},
                                                {"norm", DType::kBF16, {2}, as_bytes_of(bf16)}});
  std::optional<flashdeberta::MappedTensor> lent;
  {
    Checkpoint const ckpt = Checkpoint::open(dir.path(), {.zero_copy = true, .prefault = true});
    lent = ckpt.mapped_f32("word", {3, 2});
    REQUIRE(lent.has_value());
    CHECK(static_cast<void const*>(lent->values.data()) == ckpt.info("word").bytes.data());
    CHECK_FALSE(ckpt.mapped_f32("norm", {2}).has_value());  // converted: read_f32
    CHECK(ckpt.read_f32("norm", {2}) == std::vector<float>{1.0f, -2.0f});
    CHECK(error_message([&] { ckpt.mapped_f32("word", {6}); }).find("requires [6]") != std::string::npos);
  }
  // The owner keeps the file mapped after the Checkpoint is gone, inside a buffer as a model holds it.
  auto const buffer = flashdeberta::HostBuffer::view(lent->values.data(), 6, DType::kF32, std::move(lent->owner));
  lent.reset();
  CHECK(buffer.is_view());
  CHECK(std::vector<float>(buffer.as<float>(), buffer.as<float>() + 6) == kWord);

  // A header padded to 2 bytes short of a float's alignment (hand-made; readers accept the spaces): the bytes
  // cannot be read as floats in place, so the tensor is converted, with the same values.
  flashdeberta::test::pad_safetensors_header(dir / "model.safetensors", dir / "padded.safetensors", 2);
  Checkpoint const padded = Checkpoint::open(dir / "padded.safetensors");
  CHECK(reinterpret_cast<std::uintptr_t>(padded.info("word").bytes.data()) % alignof(float) == 2);
  CHECK_FALSE(padded.mapped_f32("word", {3, 2}).has_value());
  CHECK(padded.read_f32("word", {3, 2}) == kWord);
}

namespace {

// A FIFO at `path`: opened for reading, it waits for a writer that never comes.
void make_fifo(std::filesystem::path const& path) { REQUIRE(::mkfifo(path.c_str(), 0600) == 0); }

// Fails the test (by SIGALRM ending the process) where a reader blocks instead of refusing.
struct HangGuard {
  HangGuard() { ::alarm(60); }
  ~HangGuard() { ::alarm(0); }
};

}  // namespace

TEST_CASE("checkpoint files that are not regular files are refused, naming what they are") {
  HangGuard const guard;
  for (std::string const name :
       {"model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json"}) {
    CAPTURE(name);
    TempDir dir;
    make_fifo(dir / name);
    CHECK(error_message([&] { Checkpoint::open(dir.path()); }) ==
          (dir / name).string() + ": cannot " + (name.ends_with(".json") ? "read the shard index" : "open") +
              ": it is a FIFO, not a regular file");
  }
  TempDir dir;
  make_fifo(dir / "x.safetensors");  // named instead of its directory
  CHECK(error_message([&] { Checkpoint::open(dir / "x.safetensors"); }) ==
        (dir / "x.safetensors").string() + ": cannot open: it is a FIFO, not a regular file");
  std::filesystem::create_directory(dir / "model.safetensors");
  CHECK(error_message([&] { Checkpoint::open(dir.path()); }) ==
        (dir / "model.safetensors").string() + ": cannot open: it is a directory, not a regular file");
  std::filesystem::remove(dir / "model.safetensors");
  std::filesystem::create_symlink("pytorch_model.bin", dir / "pytorch_model.bin");  // a loop of one
  CHECK(error_message([&] { Checkpoint::open(dir.path()); }) ==
        (dir / "pytorch_model.bin").string() + ": cannot open: it is a symbolic link loop");
  std::filesystem::remove(dir / "pytorch_model.bin");
  std::filesystem::create_symlink("/dev/zero", dir / "pytorch_model.bin");
  CHECK(error_message([&] { Checkpoint::open(dir.path()); }) ==
        (dir / "pytorch_model.bin").string() + ": cannot open: it is a character device, not a regular file");
  std::filesystem::remove(dir / "pytorch_model.bin");
  std::filesystem::create_symlink("gone.safetensors", dir / "model.safetensors");
  CHECK(error_message([&] { Checkpoint::open(dir.path()); }) ==
        (dir / "model.safetensors").string() + ": cannot open: it is a symbolic link to a file that does not exist");
  CHECK(error_message([&] { Checkpoint::open(dir / "fifo"); }) ==
        "checkpoint " + (dir / "fifo").string() +
            ": not a directory (nor a .safetensors or .bin file): nothing is there");
  make_fifo(dir / "fifo");
  CHECK(error_message([&] { Checkpoint::open(dir / "fifo"); }) ==
        "checkpoint " + (dir / "fifo").string() +
            ": not a directory (nor a .safetensors or .bin file): it is a FIFO, not a regular file");
}

TEST_CASE("a shard that is a FIFO is refused, naming it") {
  HangGuard const guard;
  TempDir dir;
  write_sharded(dir, kGoodMap);
  std::filesystem::remove(dir / "model-00002-of-00002.safetensors");
  make_fifo(dir / "model-00002-of-00002.safetensors");
  CHECK(error_message([&] { Checkpoint::open(dir.path()); }) ==
        "checkpoint " + dir.path().string() +
            ": model.safetensors.index.json maps 'embeddings.LayerNorm.weight' to shard "
            "'model-00002-of-00002.safetensors', which is a FIFO, not a regular file");
}

TEST_CASE("count_numbered: one past the highest block number stored") {
  TempDir dir;
  std::vector<float> const one = {1};
  write_safetensors(dir / "model.safetensors", {{"encoder.layer.0.w", DType::kF32, {1}, as_bytes_of(one)},
                                                {"encoder.layer.11.w", DType::kF32, {1}, as_bytes_of(one)},
                                                {"encoder.layer.x.w", DType::kF32, {1}, as_bytes_of(one)},
                                                {"encoder.layer.99", DType::kF32, {1}, as_bytes_of(one)},
                                                {"encoder.rel_embeddings.weight", DType::kF32, {1}, as_bytes_of(one)}});
  Checkpoint const ckpt = Checkpoint::open(dir.path());
  CHECK(ckpt.count_numbered("encoder.layer.") == 12);
  CHECK(ckpt.count_numbered("deberta.encoder.layer.") == 0);
}

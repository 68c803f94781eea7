// pytorch_model.bin: the zip and legacy torch.save formats against files torch itself wrote
// (tests/fixtures/torch_bin/torch*/, see make_torch_fixtures.py), sharding, directory selection, the
// model output against the safetensors checkpoint, and malformed or hostile files, each of which must
// give a flashdeberta::Error saying what is wrong.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "flashdeberta/io/checkpoint.hpp"
#include "flashdeberta/io/safetensors.hpp"
#include "flashdeberta/io/safetensors_writer.hpp"
#include "flashdeberta/io/torch_checkpoint.hpp"
#include "io_test_util.hpp"
#include "torch_bin_writer.hpp"

#if FLASHDEBERTA_TEST_EIGEN
#include "flashdeberta/eigen/eigen_policy.hpp"
#include "flashdeberta/flashdeberta.hpp"
#endif

using flashdeberta::Checkpoint;
using flashdeberta::DType;
using flashdeberta::SafetensorsFile;
using flashdeberta::TensorInfo;
using flashdeberta::TorchFile;
using flashdeberta::test::error_message;
using flashdeberta::test::TempDir;
using flashdeberta::test::write_file;
using namespace flashdeberta::test::torch_bin;
using namespace std::string_literals;

namespace {

std::filesystem::path const kFixtures = FLASHDEBERTA_FIXTURE_DIR;

// torch1 (torch 1.13, written on the development machine) and torch2 (torch 2.x, the GPU machine).
std::vector<std::filesystem::path> torch_fixture_dirs() {
  std::vector<std::filesystem::path> dirs;
  for (char const* version : {"torch1", "torch2"}) {
    auto const dir = kFixtures / "torch_bin" / version;
    if (std::filesystem::exists(dir / "expected.safetensors")) dirs.push_back(dir);
  }
  REQUIRE_MESSAGE(!dirs.empty(), "no torch fixtures under " << (kFixtures / "torch_bin").string());
  return dirs;
}

std::string read_file(std::filesystem::path const& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::span<std::byte const> bytes_of(std::string const& s) { return std::as_bytes(std::span(s.data(), s.size())); }

std::string parse_error(std::string const& image) {
  return error_message([&] { TorchFile::parse(bytes_of(image), "img.bin"); });
}

bool same_bytes(std::span<std::byte const> a, std::span<std::byte const> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

// Every tensor of `got` has the dtype, shape and bytes of the reference, and no tensor is missing.
void check_against_expected(std::map<std::string, TensorInfo, std::less<>> const& got, SafetensorsFile const& expected,
                            std::string const& what) {
  INFO(what);
  CHECK(got.size() == expected.size());
  for (auto const& entry : expected.tensors()) {
    // Named references, not a structured binding: INFO expands to a lambda, and clang before 16 cannot
    // capture structured bindings.
    auto const& name = entry.first;
    auto const& want = entry.second;
    INFO("tensor " << name);
    auto it = got.find(name);
    REQUIRE(it != got.end());
    CHECK(it->second.dtype == want.dtype);
    CHECK(it->second.shape == want.shape);
    CHECK(it->second.numel == want.numel);
    CHECK(same_bytes(it->second.bytes, want.bytes));
  }
}

std::string floats(std::vector<float> const& v) {
  return std::string(reinterpret_cast<char const*>(v.data()), v.size() * sizeof(float));
}

}  // namespace

TEST_CASE("torch-written files: every dtype, zip, legacy and ZIP64, against the numpy reference") {
  for (auto const& dir : torch_fixture_dirs()) {
    SafetensorsFile const expected = SafetensorsFile::open(dir / "expected.safetensors");
    for (char const* name : {"tensors.bin", "legacy.bin", "zip64.bin"}) {
      TorchFile const file = TorchFile::open(dir / name);
      CHECK(file.source() == (dir / name).string());
      check_against_expected(file.tensors(), expected, (dir / name).string());
      CHECK(file.read_f32("f16") == expected.read_f32("f16"));
      CHECK(file.read_f32("bf16") == expected.read_f32("bf16"));
      CHECK(file.read_i64("i64") ==
            std::vector<std::int64_t>{-3, 0, 7, (std::int64_t{1} << 40) + 5, -(std::int64_t{1} << 62)});
      CHECK(file.read_i64("bool") == std::vector<std::int64_t>{1, 0, 1});
      CHECK(file.info("scalar").shape.empty());
      CHECK(file.read_f32("scalar") == std::vector<float>{2.5f});
      CHECK(file.info("empty").shape == std::vector<std::int64_t>{0, 4});
      CHECK(file.info("row").shape == std::vector<std::int64_t>{1, 4});  // stride (1, 1): contiguous for torch
      CHECK(file.read_f32("row") == std::vector<float>{0, 1, 2, 3});
    }
  }
}

TEST_CASE("tied weights and views share one storage") {
  for (auto const& dir : torch_fixture_dirs()) {
    for (char const* name : {"tensors.bin", "legacy.bin"}) {
      INFO((dir / name).string());
      TorchFile const file = TorchFile::open(dir / name);
      TensorInfo const& encoder = file.info("tied.encoder");
      TensorInfo const& decoder = file.info("tied.decoder");
      CHECK(encoder.bytes.data() == decoder.bytes.data());  // the same bytes, not a copy
      CHECK(encoder.bytes.size() == 10 * sizeof(float));
      std::byte const* whole = file.info("view.whole").bytes.data();
      CHECK(file.info("view.row2").bytes.data() == whole + 6 * sizeof(float));
      CHECK(file.info("view.tail").bytes.data() == whole + 5 * sizeof(float));
      CHECK(file.info("view.tail").numel == 7);
    }
  }
}

TEST_CASE("sharded pytorch_model.bin.index.json") {
  for (auto const& dir : torch_fixture_dirs()) {
    SafetensorsFile const expected = SafetensorsFile::open(dir / "expected.safetensors");
    Checkpoint const ckpt = Checkpoint::open(dir / "sharded");
    CHECK(ckpt.names() == std::vector<std::string>{"bf16", "f16", "f32", "tied.decoder", "tied.encoder", "view.row2"});
    for (auto const& name : ckpt.names()) {
      INFO(name);
      CHECK(same_bytes(ckpt.info(name).bytes, expected.info(name).bytes));
      CHECK(ckpt.info(name).dtype == expected.info(name).dtype);
    }
    CHECK(ckpt.read_f32("f32", {2, 3}) == expected.read_f32("f32"));
    CHECK(ckpt.source_of("bf16") == (dir / "sharded" / "pytorch_model-00002-of-00002.bin").string());
    CHECK(ckpt.info("tied.encoder").bytes.data() == ckpt.info("tied.decoder").bytes.data());
  }
}

TEST_CASE("Checkpoint::open prefers safetensors, then its index, then pytorch_model.bin, then its index") {
  auto const torch_dir = torch_fixture_dirs().front();
  TempDir dir;
  std::filesystem::copy_file(torch_dir / "tensors.bin", dir / "pytorch_model.bin");
  CHECK(Checkpoint::open(dir.path()).contains("bf16"));
  CHECK(Checkpoint::open(dir / "pytorch_model.bin").size() == 18);  // the file itself
  CHECK(Checkpoint::open(dir / "pytorch_model.bin").directory() == dir.path());

  std::vector<float> const one = {1.0f};
  flashdeberta::write_safetensors(dir / "model.safetensors",
                                  {{"only", DType::kF32, {1}, flashdeberta::test::as_bytes_of(one)}});
  CHECK(Checkpoint::open(dir.path()).names() == std::vector<std::string>{"only"});

  TempDir index_only;
  for (auto const& entry : std::filesystem::directory_iterator(torch_dir / "sharded"))
    std::filesystem::copy_file(entry.path(), index_only / entry.path().filename().string());
  std::filesystem::copy_file(torch_dir / "tensors.bin", index_only / "other.bin");  // not named: ignored
  CHECK(Checkpoint::open(index_only.path()).size() == 6);

  write_file(index_only / "pytorch_model.bin.index.json", R"({"weight_map": {"f32": "missing.bin"}})");
  CHECK(error_message([&] { Checkpoint::open(index_only.path()); }) ==
        "checkpoint " + index_only.path().string() +
            ": pytorch_model.bin.index.json maps 'f32' to shard 'missing.bin', which does not exist");

  TempDir empty;
  CHECK(error_message([&] { Checkpoint::open(empty.path()); })
            .find("none of model.safetensors, model.safetensors.index.json, pytorch_model.bin, "
                  "pytorch_model.bin.index.json (nor ZeroModels' zm_config.json or kf_config.json) found") !=
        std::string::npos);
}

TEST_CASE("a model loaded from pytorch_model.bin gives exactly the safetensors output") {
  // The loader above Checkpoint is format-independent, so equal tensors mean an equal model; both the
  // tensors and (with Eigen) the forward pass are compared.
  struct Case {
    std::filesystem::path safetensors_dir, torch_dir;
  };
  std::vector<Case> cases;
  TempDir converted;  // v3_base_like written here as pytorch_model.bin
  std::filesystem::copy_file(kFixtures / "v3_base_like" / "config.json", converted / "config.json");
  convert_to_torch(kFixtures / "v3_base_like" / "model.safetensors", converted.path());
  cases.push_back({kFixtures / "v3_base_like", converted.path()});
  for (auto const& dir : torch_fixture_dirs())
    cases.push_back({kFixtures / "v3_fp16_storage", dir / "v3_fp16_storage"});

  for (auto const& c : cases) {
    INFO(c.torch_dir.string());
    Checkpoint const want = Checkpoint::open(c.safetensors_dir);
    Checkpoint const got = Checkpoint::open(c.torch_dir);
    REQUIRE(got.names() == want.names());
    for (auto const& name : want.names()) {
      INFO(name);
      CHECK(got.info(name).dtype == want.info(name).dtype);
      CHECK(got.read_f32(name, want.info(name).shape) == want.read_f32(name, want.info(name).shape));
    }
#if FLASHDEBERTA_TEST_EIGEN
    SafetensorsFile const golden = SafetensorsFile::open(c.safetensors_dir / "expected.safetensors");
    auto const& shape = golden.info("last_hidden_state").shape;
    std::vector<std::int64_t> const ids = golden.read_i64("input_ids");
    std::vector<std::int64_t> const mask = golden.read_i64("attention_mask");
    std::vector<std::int64_t> types;
    if (golden.contains("token_type_ids")) types = golden.read_i64("token_type_ids");
    auto const batch = flashdeberta::Batch::from_padded(shape[0], shape[1], ids, mask, types);
    using Model = flashdeberta::DebertaV3<flashdeberta::EigenPolicy>;
    std::vector<float> const from_safetensors =
        Model::load(flashdeberta::EigenPolicy(2), c.safetensors_dir).forward_to_host(batch);
    std::vector<float> const from_torch = Model::load(flashdeberta::EigenPolicy(2), c.torch_dir).forward_to_host(batch);
    CHECK(from_torch.size() == from_safetensors.size());
    CHECK(from_torch == from_safetensors);
#endif
  }
}

TEST_CASE("non-contiguous, out-of-range and inconsistent tensors") {
  auto const dir = torch_fixture_dirs().front();
  CHECK(error_message([&] { TorchFile::open(dir / "noncontiguous.bin"); }) ==
        (dir / "noncontiguous.bin").string() +
            ": tensor 't' is not contiguous: size [3, 2], stride [1, 3] (row-major needs stride 1 in dimension 1); "
            "save it after .contiguous()");

  std::string const six = floats({0, 1, 2, 3, 4, 5});
  auto one_tensor = [&](FakeTensor t, std::string data) {
    return parse_error(torch_zip(state_dict_pickle({t}), {{"0", data}}));
  };
  CHECK(one_tensor({"w", "0", 6, 1, {2, 3}, {3, 1}}, six) ==
        "img.bin: tensor 'w' (F32, size [2, 3]) at storage offset 1 needs elements [1, 1 + 6), but storage '0' "
        "holds 6");
  CHECK(one_tensor({"w", "0", 6, -1, {2}, {1}}, six).find("at storage offset -1") != std::string::npos);
  CHECK(one_tensor({"w", "0", 6, 0, {2, 3}, {1}}, six) ==
        "img.bin: tensor 'w' has size [2, 3] but stride [1] (a different number of dimensions)");
  CHECK(one_tensor({"w", "0", 6, 0, {-2, 3}, {3, 1}}, six) == "img.bin: tensor 'w' has negative size [-2, 3]");
  CHECK(one_tensor({"w", "0", 6, 0, {1LL << 40, 1LL << 40}, {1LL << 40, 1}}, six).find("overflows int64") !=
        std::string::npos);
  CHECK(one_tensor({"w", "0", 6, 0, {6}, {1}}, floats({0, 1, 2})) ==
        "img.bin: record 'archive/data/0' is 12 bytes, but FloatStorage '0' of 6 elements needs 24");
  CHECK(one_tensor({"w", "0", 3, 0, {3}, {1}, "HalfStorage"}, six) ==
        "img.bin: record 'archive/data/0' is 24 bytes, but HalfStorage '0' of 3 elements needs 6");
  CHECK(one_tensor({"w", "7", 6, 0, {6}, {1}}, six) ==
        "img.bin: storage '7' has no record 'archive/data/7' in the archive");
  CHECK(one_tensor({"w", "0", 6, 0, {6}, {1}, "ComplexFloatStorage"}, six)
            .find("global 'torch.ComplexFloatStorage' is not allowed") != std::string::npos);

  // A storage named twice with different types, and a name saved twice.
  std::string const twice_type =
      state_dict_pickle({{"a", "0", 6, 0, {6}, {1}}, {"b", "0", 12, 0, {12}, {1}, "HalfStorage"}});
  CHECK(
      parse_error(torch_zip(twice_type, {{"0", six}})).find("storage '0' is named twice, as F32 x 6 and as F16 x 12") !=
      std::string::npos);
  std::string const twice_name = state_dict_pickle({{"a", "0", 6, 0, {6}, {1}}, {"a", "0", 6, 0, {3}, {1}}});
  CHECK(parse_error(torch_zip(twice_name, {{"0", six}})) ==
        "img.bin: archive/data.pkl: tensor 'a' appears twice in the state dict");
  // What the memo could make a file copy many times is bounded.
  CHECK(one_tensor({"w", "0", 6, 0, std::vector<std::int64_t>(65, 1), std::vector<std::int64_t>(65, 1)}, six)
            .find("size has 65 dimensions; at most 64 are supported") != std::string::npos);
  CHECK(one_tensor({"w", std::string(300, 'k'), 6, 0, {6}, {1}}, six)
            .find("storage key must be a string of at most 256 bytes") != std::string::npos);

  // A hand-made file with ZIP64 records reads back (the image must outlive the views into it).
  std::string const image = torch_zip(state_dict_pickle({{"w", "0", 6, 2, {2, 2}, {2, 1}}}), {{"0", six}}, true);
  TorchFile const ok = TorchFile::parse(bytes_of(image), "zip64");
  CHECK(ok.read_f32("w") == std::vector<float>{2, 3, 4, 5});
}

TEST_CASE("hostile pickles are rejected without executing anything") {
  auto pickle_error = [](std::string const& pickle) { return parse_error(torch_zip(pickle)); };
  std::string const os_system = "\x80\x02" + global("os", "system") + str("touch /tmp/flashdeberta_pwned") + "\x85R.";
  CHECK(pickle_error(os_system) ==
        "img.bin: archive/data.pkl byte 2, opcode 'c' (GLOBAL): global 'os.system' is not allowed; a torch state dict "
        "uses only collections.OrderedDict, torch._utils._rebuild_tensor_v2 and the torch.*Storage types (nothing is "
        "executed)");
  CHECK_FALSE(std::filesystem::exists("/tmp/flashdeberta_pwned"));
  CHECK(pickle_error("\x80\x02" + global("posix", "system") + "q\x00."s).find("global 'posix.system' is not allowed") !=
        std::string::npos);
  // STACK_GLOBAL builds the name from strings on the stack: the same whitelist applies.
  CHECK(pickle_error("\x80\x04\x8c\x08"
                     "builtins"
                     "\x8c\x04"
                     "eval"
                     "\x93.")
            .find("opcode 0x93 (STACK_GLOBAL): global 'builtins.eval'") != std::string::npos);
  CHECK(pickle_error("\x80\x02" + global("torch.storage", "_load_from_bytes") + ".")
            .find("'torch.storage._load_from_bytes' is not allowed") != std::string::npos);

  // Opcodes that build arbitrary objects or read the extension registry.
  CHECK(pickle_error("\x80\x02(ios\nsystem\n.") ==
        "img.bin: archive/data.pkl byte 3, opcode 'i' (INST): opcode not "
        "allowed in a torch state dict (nothing is executed)");
  CHECK(pickle_error("\x80\x02(o.").find("opcode 'o' (OBJ): opcode not allowed") != std::string::npos);
  CHECK(pickle_error("\x80\x02\x81.").find("opcode 0x81 (NEWOBJ)") != std::string::npos);
  CHECK(pickle_error("\x80\x02\x82\x01.").find("opcode 0x82 (EXT1)") != std::string::npos);
  CHECK(pickle_error("\x80\x02I1\n.").find("opcode 'I' (INT)") != std::string::npos);
  CHECK(pickle_error("\x80\x02Pid\n.").find("opcode 'P' (PERSID)") != std::string::npos);

  // Whitelisted callables used the wrong way.
  CHECK(pickle_error("\x80\x02" + global("torch", "FloatStorage") + ")R.").find("calls a storage type") !=
        std::string::npos);
  CHECK(pickle_error("\x80\x02" + str("x") + ")R.").find("calls a string, which is not callable") != std::string::npos);
  CHECK(pickle_error("\x80\x02" + global("collections", "OrderedDict") + "]\x85R.")
            .find("collections.OrderedDict is called with 1 arguments") != std::string::npos);
  CHECK(pickle_error("\x80\x02" + global("torch._utils", "_rebuild_tensor_v2") + ")R.")
            .find("_rebuild_tensor_v2 is called with 0 arguments") != std::string::npos);
  CHECK(pickle_error("\x80\x02" + str("storage") + "\x85Q.")
            .find("a persistent id must be a tuple ('storage', type, key, "
                  "location, numel), found a tuple of 1") != std::string::npos);
  CHECK(pickle_error("\x80\x02}" + str("x") + "b.").find("sets the state of a dict from a string") !=
        std::string::npos);

  // Structure: what the pickle holds and malformed streams.
  CHECK(pickle_error("\x80\x02}" + str("a") + "K\x01s.") ==
        "img.bin: archive/data.pkl: state dict entry 'a' is an int, not a tensor");
  CHECK(pickle_error("\x80\x02]q\x00h\x00"
                     "a."s) == "img.bin: archive/data.pkl holds a list, not a state dict (a dict of tensors)");
  CHECK(pickle_error("\x80\x02}") ==
        "img.bin: archive/data.pkl ends at byte 3 without a STOP opcode; the file is truncated");
  CHECK(pickle_error("\x80\x02h\x05.").find("memo key 5 was never stored") != std::string::npos);
  CHECK(pickle_error("\x80\x02X\xff\xff\xff\x7f.").find("needs 2147483647 bytes, only 1 remain") != std::string::npos);
  CHECK(pickle_error("\x80\x02(R.").find("opcode 'R' (REDUCE): needs 1 value(s) on the stack above the last mark") !=
        std::string::npos);
  CHECK(pickle_error("\x80\x02t.").find("no MARK precedes it") != std::string::npos);
  CHECK(pickle_error("\x80\x02" + std::string(5000, '(') + ".").find("more than 4096 nested marks") !=
        std::string::npos);
  CHECK(pickle_error("\x80\x02\x8a\x09" + std::string(9, '\x01') + ".").find("a 9-byte integer does not fit") !=
        std::string::npos);
  CHECK(pickle_error("\x80\x09.").find("pickle protocol 9 is not supported") != std::string::npos);
  CHECK(pickle_error(".").find("needs 1 value(s)") != std::string::npos);
}

TEST_CASE("malformed zip archives") {
  std::string const good = read_file(torch_fixture_dirs().front() / "tensors.bin");
  REQUIRE(TorchFile::parse(bytes_of(good), "img.bin").size() == 18);

  // Every truncation fails cleanly.
  for (std::size_t n = 0; n < good.size(); n += 7) {
    CAPTURE(n);
    CHECK_THROWS_AS(TorchFile::parse(bytes_of(good.substr(0, n)), "img.bin"), flashdeberta::Error);
  }
  CHECK(parse_error(good.substr(0, good.size() / 2)).find("no zip end of central directory record in the last") !=
        std::string::npos);

  auto patched = [&](std::size_t at, std::uint64_t v, int n, std::string out = {}) {
    if (out.empty()) out = good;
    std::string le;
    put_le(le, v, n);
    out.replace(at, static_cast<std::size_t>(n), le);
    return out;
  };
  // torch (miniz) always ends with a ZIP64 end record, its locator, then the classic end record.
  std::size_t const z64 = good.rfind("PK\x06\x06");
  std::size_t const locator = good.rfind("PK\x06\x07");
  REQUIRE(z64 != std::string::npos);
  REQUIRE(locator == good.size() - 42);
  CHECK(parse_error(patched(z64 + 48, 0xFFFFFF00, 8)).find("zip central directory (offset 4294967040") !=
        std::string::npos);
  CHECK(parse_error(patched(z64 + 32, 5000, 8)).find("claims 5000 entries") != std::string::npos);
  CHECK(parse_error(patched(locator + 8, 1u << 30, 8))
            .find("ZIP64 end of central directory record at offset 1073741824 does not fit") != std::string::npos);
  CHECK(parse_error(patched(z64, 0, 4)).find("no ZIP64 end of central directory record at offset") !=
        std::string::npos);
  std::string const plain = torch_zip(state_dict_pickle({}));  // no ZIP64 records
  std::size_t const end = plain.size() - 22;
  CHECK(TorchFile::parse(bytes_of(plain), "img.bin").size() == 0);
  CHECK(parse_error(patched(end + 16, 0xFFFFFF00, 4, plain)).find("zip central directory (offset 4294967040") !=
        std::string::npos);
  CHECK(parse_error(patched(end + 16, 0xFFFFFFFF, 4, plain)).find("but there is no ZIP64 locator") !=
        std::string::npos);
  CHECK(parse_error(patched(end + 4, 1, 2, plain)).find("spans several disks") != std::string::npos);
  std::size_t const cd = good.find(std::string("PK\x01\x02", 4));
  CHECK(parse_error(patched(cd + 42, 12345, 4)).find("no local header at offset 12345") != std::string::npos);
  CHECK(parse_error(patched(cd + 20, 0x7FFFFFFF, 4)).find("is stored but its compressed size 2147483647 differs") !=
        std::string::npos);
  CHECK(parse_error(patched(cd + 20, 0x7FFFFFFF, 4).replace(cd + 24, 4, std::string("\xff\xff\xff\x7f", 4)))
            .find("run past the start of the central directory") != std::string::npos);
  CHECK(parse_error(patched(cd + 20, 0xFFFFFFFF, 4)).find("has saturated 32-bit fields but no ZIP64 extra field") !=
        std::string::npos);
  CHECK(parse_error(patched(cd + 8, 1, 2)).find("is encrypted") != std::string::npos);

  // A compressed record, a zip without data.pkl, big-endian data, unknown formats.
  CHECK(parse_error(make_zip({{"archive/data.pkl", "x", 8}})) ==
        "img.bin: zip entry 'archive/data.pkl' is compressed (method 8); torch.save writes stored entries only, so "
        "re-save the checkpoint with torch.save instead of re-zipping it");
  CHECK(parse_error(make_zip({{"model/code.py", "x"}})).find("zip archive has no 'model/data.pkl' record") !=
        std::string::npos);
  CHECK(parse_error(make_zip({{"archive/data.pkl", "}."}, {"archive/byteorder", "big"}}))
            .find("'archive/byteorder' is 'big'; only little-endian") != std::string::npos);
  CHECK(parse_error(make_zip({{"a/data.pkl", "x"}, {"a/data.pkl", "y"}})).find("'a/data.pkl' appears twice") !=
        std::string::npos);
  CHECK(parse_error("hello") ==
        "img.bin: not a torch.save file (neither a zip archive nor the legacy pickle format; "
        "the file is 5 bytes)");
  std::string tar(1024, '\0');
  tar.replace(257, 5, "ustar");
  CHECK(parse_error(tar).find("the torch.save format of torch < 0.4 is not supported") != std::string::npos);
  CHECK(TorchFile::parse(bytes_of(make_zip({{"archive/data.pkl", "\x80\x02}."}}, true)), "img.bin").size() == 0);
}

TEST_CASE("malformed legacy files") {
  std::string const good = read_file(torch_fixture_dirs().front() / "legacy.bin");
  REQUIRE(TorchFile::parse(bytes_of(good), "img.bin").size() == 18);
  for (std::size_t n = 15; n < good.size(); n += 5) {
    CAPTURE(n);
    CHECK_THROWS_AS(TorchFile::parse(bytes_of(good.substr(0, n)), "img.bin"), flashdeberta::Error);
  }
  CHECK(parse_error(good.substr(0, good.size() - 1)).find("runs past the end of the file") != std::string::npos);
  std::string wrong_protocol = good;
  wrong_protocol[18] = '\x00';  // BININT2 1001 -> 1000 + ...
  CHECK(parse_error(wrong_protocol).find("legacy torch.save protocol version is not 1001") != std::string::npos);
}

#if FLASHDEBERTA_TEST_EIGEN
TEST_CASE("num_hidden_layers past the layers the checkpoint holds is refused before anything is sized from it") {
  // A vector of 1e8 layers was reserved first, and the load ended in "out of memory".
  TempDir dir;
  std::filesystem::create_symlink(kFixtures / "v3_base_like" / "model.safetensors", dir / "model.safetensors");
  std::ifstream in(kFixtures / "v3_base_like" / "config.json");
  flashdeberta::io::Json config = flashdeberta::io::Json::parse(in);
  std::int64_t const layers = config["num_hidden_layers"].get<std::int64_t>();
  config["num_hidden_layers"] = 100000000;
  write_file(dir / "config.json", config.dump());
  using Model = flashdeberta::DebertaV3<flashdeberta::EigenPolicy>;
  CHECK(error_message([&] { Model::load(flashdeberta::EigenPolicy(1), dir.path()); }) ==
        "checkpoint " + dir.path().string() +
            ": config key 'num_hidden_layers' is 100000000, but the checkpoint holds " + std::to_string(layers) +
            " layers (encoder.layer.0.* to encoder.layer." + std::to_string(layers - 1) + ".*)");
}
#endif

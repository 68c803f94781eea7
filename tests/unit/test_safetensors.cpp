// safetensors: writer -> reader round trips, and a table of malformed files, each rejected with its own message.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "flashdeberta/core/float_convert.hpp"
#include "flashdeberta/io/safetensors.hpp"
#include "flashdeberta/io/safetensors_writer.hpp"
#include "io_test_util.hpp"

using flashdeberta::DType;
using flashdeberta::SafetensorsFile;
using flashdeberta::TensorToWrite;
using flashdeberta::write_safetensors;
using flashdeberta::test::as_bytes_of;
using flashdeberta::test::error_message;
using flashdeberta::test::TempDir;

namespace {

std::string read_all(std::filesystem::path const& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("round trip F32/F16/BF16/I64 with scalar and empty tensors") {
  TempDir dir;
  std::vector<float> const f32 = {1.5f, -2.0f, 3.25f, 0.0f, -0.0f, 1e-30f};
  std::vector<float> const f16_values = {1.0f, -0.5f, 65504.0f, 5.960464477539063e-08f};  // incl. largest, subnormal
  std::vector<std::uint16_t> f16;
  for (float v : f16_values) f16.push_back(flashdeberta::float_to_half(v));
  std::vector<float> const bf16_values = {1.0f, -3.0f, 1.7014118346046923e38f, 0.0078125f};  // 2^127: bf16-exact
  std::vector<std::uint16_t> bf16;
  for (float v : bf16_values) bf16.push_back(flashdeberta::float_to_bfloat16(v));
  std::vector<std::int64_t> const i64 = {-1, 0, 1LL << 40};
  std::vector<float> const scalar = {42.0f};
  std::vector<float> const empty;

  std::vector<TensorToWrite> const tensors = {
      {"w.f32", DType::kF32, {2, 3}, as_bytes_of(f32)},    {"w.f16", DType::kF16, {4}, as_bytes_of(f16)},
      {"w.bf16", DType::kBF16, {2, 2}, as_bytes_of(bf16)}, {"ids", DType::kI64, {3}, as_bytes_of(i64)},
      {"scalar", DType::kF32, {}, as_bytes_of(scalar)},    {"empty", DType::kF32, {0, 5}, as_bytes_of(empty)},
      {"empty_ids", DType::kI64, {0}, as_bytes_of(empty)},
  };
  auto const path = dir / "model.safetensors";
  write_safetensors(path, tensors, {{"format", "pt"}});

  std::string const raw = read_all(path);
  std::uint64_t header_size = 0;
  std::memcpy(&header_size, raw.data(), 8);
  CHECK(header_size % 8 == 0);  // the writer pads the header so the data section is 8-aligned

  SafetensorsFile const file = SafetensorsFile::open(path);
  CHECK(file.names() == std::vector<std::string>{"empty", "empty_ids", "ids", "scalar", "w.bf16", "w.f16", "w.f32"});
  CHECK(file.metadata().at("format") == "pt");
  CHECK(file.read_f32("w.f32") == f32);
  CHECK(file.read_f32("w.f16") == f16_values);  // exact: every value is representable in half
  CHECK(file.read_f32("w.bf16") == bf16_values);
  CHECK(file.read_i64("ids") == i64);
  CHECK(file.read_f32("scalar") == scalar);
  CHECK(file.info("scalar").shape.empty());
  CHECK(file.info("scalar").numel == 1);
  CHECK(file.read_f32("empty").empty());
  CHECK(file.info("empty").shape == std::vector<std::int64_t>{0, 5});
  CHECK(file.read_i64("empty_ids").empty());
  CHECK(file.info("w.bf16").dtype == DType::kBF16);
  CHECK(file.info("w.f32").shape == std::vector<std::int64_t>{2, 3});
  CHECK(file.contains("ids"));
  CHECK_FALSE(file.contains("nope"));

  std::string const absent = error_message([&] { file.info("nope"); });
  CHECK(absent == path.string() + ": no tensor named 'nope' (the file holds 7 tensors)");
  CHECK(error_message([&] { file.read_i64("w.f32"); }).find("tensor 'w.f32' has dtype F32; an integer tensor") !=
        std::string::npos);
  CHECK(error_message([&] { file.read_f32("ids"); }).find("tensor 'ids' has dtype I64; a float tensor") !=
        std::string::npos);
}

TEST_CASE("other integer dtypes, F64, and unaligned data") {
  TempDir dir;
  std::vector<std::uint8_t> const u8 = {0, 200, 255};  // 3 bytes: every later tensor starts unaligned
  std::vector<float> const f32 = {1.0f, 2.0f};
  std::vector<double> const f64 = {0.1, -2.5};
  std::vector<std::int32_t> const i32 = {-7, 1 << 30};
  std::vector<std::int16_t> const i16 = {-300, 300};
  std::vector<std::int8_t> const i8 = {-128, 127};
  std::vector<std::uint8_t> const flags = {0, 1, 7};
  auto const path = dir / "mixed.safetensors";
  write_safetensors(path, {{"u8", DType::kU8, {3}, as_bytes_of(u8)},
                           {"f32", DType::kF32, {2}, as_bytes_of(f32)},
                           {"f64", DType::kF64, {2}, as_bytes_of(f64)},
                           {"i32", DType::kI32, {2}, as_bytes_of(i32)},
                           {"i16", DType::kI16, {2}, as_bytes_of(i16)},
                           {"i8", DType::kI8, {2}, as_bytes_of(i8)},
                           {"flags", DType::kBool, {3}, as_bytes_of(flags)}});
  SafetensorsFile const file = SafetensorsFile::open(path);
  CHECK(reinterpret_cast<std::uintptr_t>(file.info("f32").bytes.data()) % 4 != 0);
  CHECK(file.read_f32("f32") == f32);
  CHECK(file.read_f32("f64") == std::vector<float>{0.1f, -2.5f});
  CHECK(file.read_i64("u8") == std::vector<std::int64_t>{0, 200, 255});
  CHECK(file.read_i64("i32") == std::vector<std::int64_t>{-7, 1 << 30});
  CHECK(file.read_i64("i16") == std::vector<std::int64_t>{-300, 300});
  CHECK(file.read_i64("i8") == std::vector<std::int64_t>{-128, 127});
  CHECK(file.read_i64("flags") == std::vector<std::int64_t>{0, 1, 1});
  CHECK(file.metadata().empty());
}

TEST_CASE("zero-length and header-only files") {
  TempDir dir;
  flashdeberta::test::write_file(dir / "empty.safetensors", "");
  CHECK(error_message([&] { SafetensorsFile::open(dir / "empty.safetensors"); }).find("file is 0 bytes") !=
        std::string::npos);
  flashdeberta::test::write_file(dir / "none.safetensors", flashdeberta::test::safetensors_image("{}", 0));
  CHECK(SafetensorsFile::open(dir / "none.safetensors").names().empty());
  CHECK(error_message([&] {
          SafetensorsFile::open(dir / "missing.safetensors");
        }).find("missing.safetensors: cannot open (No such file or directory)") != std::string::npos);
  CHECK(error_message([&] { SafetensorsFile::open(dir.path()); }).find("not a regular file") != std::string::npos);
}

TEST_CASE("malformed files are rejected, each with its own message") {
  struct Case {
    char const* what;
    std::string image;
    char const* needle;
  };
  auto const image = flashdeberta::test::safetensors_image;
  std::string huge_length(8, '\0');
  huge_length[3] = 0x10;  // 256 MiB; the limit's boundary is tested in test_safetensors_layout.cpp
  std::string past_eof = image("{}", 0);
  past_eof[0] = 100;
  auto const f32 = [](char const* shape, char const* offsets) {
    return std::string(R"({"dtype": "F32", "shape": )") + shape + R"(, "data_offsets": )" + offsets + "}";
  };
  Case const cases[] = {
      {"truncated header length", std::string("\x10\0\0", 3), "file is 3 bytes, too short for the 8-byte"},
      {"header length past EOF", past_eof, "header length 100 runs past the end of the file (only 2 bytes follow it)"},
      {"header length over the limit", huge_length + "{}",
       "header length 268435456 exceeds the limit of 100000000 bytes"},
      {"header not JSON", image("{\"a\": ", 0), "safetensors header is not valid JSON"},
      {"header not an object", image("[1, 2]", 0), "safetensors header must start with '{', found byte 0x5b"},
      {"entry not an object", image(R"({"a": 3})", 0), "tensor 'a' must be an object with dtype"},
      {"unknown dtype", image(R"({"a": {"dtype": "F8_E4M3", "shape": [1], "data_offsets": [0, 1]}})", 1),
       "tensor 'a' has unknown dtype 'F8_E4M3'"},
      {"missing key", image(R"({"a": {"dtype": "F32", "shape": [1]}})", 4), "tensor 'a' is missing 'data_offsets'"},
      {"extra key", image(R"({"a": {"dtype": "F32", "shape": [], "data_offsets": [0, 4], "x": 1}})", 4),
       "tensor 'a' has unexpected key 'x'"},
      {"negative shape", image("{\"a\": " + f32("[2, -1]", "[0, 8]") + "}", 8),
       "shape[1] of tensor 'a' is -1; it must be non-negative"},
      {"fractional shape", image("{\"a\": " + f32("[2.5]", "[0, 8]") + "}", 8),
       "shape[0] of tensor 'a' must be an integer, found number 2.5"},
      {"shape overflow", image("{\"a\": " + f32("[4611686018427387904, 4]", "[0, 8]") + "}", 8),
       "has shape [4611686018427387904, 4], whose byte size overflows int64"},
      {"offsets not a pair", image("{\"a\": " + f32("[1]", "[0, 4, 8]") + "}", 8),
       "data_offsets of tensor 'a' must be an array of exactly two integers"},
      {"offsets past data", image("{\"a\": " + f32("[8]", "[0, 32]") + "}", 16),
       "tensor 'a' has data_offsets end 32 past the end of the data section (16 bytes)"},
      {"begin after end", image("{\"a\": " + f32("[1]", "[8, 4]") + "}", 16),
       "tensor 'a' has data_offsets begin 8 > end 4"},
      {"size mismatch", image("{\"a\": " + f32("[2, 2]", "[0, 12]") + "}", 16),
       "tensor 'a' has data_offsets spanning 12 bytes, but dtype F32 and shape [2, 2] need 16"},
      {"overlapping tensors", image("{\"a\": " + f32("[4]", "[0, 16]") + ", \"b\": " + f32("[4]", "[8, 24]") + "}", 24),
       "tensors 'a' (data_offsets [0, 16]) and 'b' (data_offsets [8, 24]) overlap: 'b' starts 8 bytes before 'a' "
       "ends"},
      {"duplicate names", image("{\"a\": " + f32("[1]", "[0, 4]") + ", \"a\": " + f32("[1]", "[4, 8]") + "}", 8),
       "safetensors header has duplicate key 'a'"},
      {"metadata not an object", image(R"({"__metadata__": ["x"]})", 0),
       "__metadata__ must be an object of strings (or null), found array"},
      {"metadata value not a string", image(R"({"__metadata__": {"step": 3}})", 0),
       "__metadata__ value of 'step' must be a string, found integer 3"},
      {"deep nesting",
       image("{\"a\": " + f32((std::string(100, '[') + std::string(100, ']')).c_str(), "[0, 0]") + "}", 0),
       "shape[0] of tensor 'a' must be an integer, found array"},
  };

  TempDir dir;
  std::vector<std::string> messages;
  for (Case const& c : cases) {
    CAPTURE(c.what);
    auto const path = dir / "bad.safetensors";
    flashdeberta::test::write_file(path, c.image);
    std::string const message = error_message([&] { SafetensorsFile::open(path); });
    CAPTURE(message);
    CHECK(message.rfind(path.string() + ": ", 0) == 0);
    CHECK(message.find(c.needle) != std::string::npos);
    // The in-memory entry point gives the same verdict.
    auto const bytes = std::as_bytes(std::span<char const>(c.image.data(), c.image.size()));
    CHECK(error_message([&] { SafetensorsFile::parse(bytes, "mem"); }) == "mem" + message.substr(path.string().size()));
    messages.push_back(message);
  }
  // Each case is told apart: no needle matches another case's message.
  for (std::size_t i = 0; i < std::size(cases); ++i) {
    for (std::size_t j = 0; j < messages.size(); ++j) {
      if (i != j)
        CHECK_MESSAGE(messages[j].find(cases[i].needle) == std::string::npos, cases[i].what, " vs ", cases[j].what);
    }
  }
}

TEST_CASE("empty tensors sit where the previous tensor ends, never inside another's bytes") {
  auto const parse = [](std::string const& z_offsets) {
    std::string const header = R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                                   "z": {"dtype": "F32", "shape": [0], "data_offsets": )" +
                               z_offsets + "}}";
    std::string const img = flashdeberta::test::safetensors_image(header, 16);
    return SafetensorsFile::parse(std::as_bytes(std::span<char const>(img.data(), img.size())), "mem");
  };
  CHECK(parse("[16, 16]").info("z").numel == 0);
  CHECK(parse("[0, 0]").info("z").bytes.empty());
  // The Rust reader refuses [8, 8]: sorted by offsets it begins at 8, where the data covered so far ends at 16.
  CHECK(error_message([&] { parse("[8, 8]"); }) ==
        "mem: tensors 'a' (data_offsets [0, 16]) and 'z' (data_offsets [8, 8]) overlap: 'z' starts 8 bytes before 'a' "
        "ends");
}

TEST_CASE("a failing writer leaves the destination as it was") {
  TempDir dir;
  auto const path = dir / "model.safetensors";
  std::vector<float> const good = {1.0f, 2.0f};
  std::vector<float> const three = {1.0f, 2.0f, 3.0f};

  // Size mismatch: nothing is created at all.
  std::string const mismatch = error_message([&] {
    write_safetensors(path, {{"a", DType::kF32, {2, 2}, as_bytes_of(three)}});
  });
  CHECK(mismatch == path.string() + ": tensor 'a' has 12 bytes, but dtype F32 and shape [2, 2] need 16");
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK(dir.count() == 0);

  // An existing file survives a failed overwrite untouched, and no temporary is left behind.
  write_safetensors(path, {{"a", DType::kF32, {2}, as_bytes_of(good)}});
  std::string const before = read_all(path);
  CHECK(error_message([&] {
          write_safetensors(path,
                            {{"a", DType::kF32, {2}, as_bytes_of(good)}, {"a", DType::kF32, {2}, as_bytes_of(good)}});
        }).find("tensor 'a' is given twice") != std::string::npos);
  CHECK(error_message([&] {
          write_safetensors(path, {{"b", DType::kF32, {-2}, as_bytes_of(good)}});
        }).find("negative dimension") != std::string::npos);
  CHECK(error_message([&] {
          write_safetensors(path, {{"__metadata__", DType::kF32, {2}, as_bytes_of(good)}});
        }).find("reserved") != std::string::npos);
  CHECK(read_all(path) == before);
  CHECK(dir.count() == 1);

  // A destination that is not a regular file (here a directory) is refused before any temporary exists.
  std::filesystem::create_directory(dir / "taken");
  CHECK(error_message([&] {
          write_safetensors(dir / "taken", {{"a", DType::kF32, {2}, as_bytes_of(good)}});
        }) == (dir / "taken").string() +
                  " is a directory; the output is written to a temporary file and renamed over it, which would "
                  "replace it, so it must be a regular file or not exist");
  CHECK(std::filesystem::is_directory(dir / "taken"));
  CHECK(dir.count() == 2);
}

// float_convert.hpp: the vector conversions the CPU picks at run time (floats_to_f32's float16 and bfloat16
// paths) give exactly the scalar reference's bits (but for signaling NaNs, which come out quiet)
// for every float16 and bfloat16 value, from any alignment and for lengths that leave a scalar tail.
TEST_CASE("float16 and bfloat16 to float32: every value, any offset and length, bit-exact") {
  std::vector<std::uint16_t> all(65536);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint16_t>(i);
  std::vector<std::byte> bytes(2 * all.size() + 1);
  for (std::size_t shift : {0u, 1u}) {  // 1: every 16-bit value at an odd address
    std::memcpy(bytes.data() + shift, all.data(), 2 * all.size());
    for (DType dtype : {DType::kF16, DType::kBF16}) {
      CAPTURE(shift);
      CAPTURE(flashdeberta::dtype_name(dtype));
      auto const convert = [&](std::size_t begin, std::span<float> out) {
        std::byte const* const src = bytes.data() + shift + 2 * begin;
        if (dtype == DType::kF16) {
          flashdeberta::detail::half_to_float_n(src, out.data(), out.size());
        } else {
          flashdeberta::detail::bfloat16_to_float_n(src, out.data(), out.size());
        }
      };
      std::vector<float> out(all.size());
      convert(0, out);
#if defined(FLASHDEBERTA_X86_CONVERT)
      // The narrower F16C loop too, which a CPU with AVX-512 never picks (every x86-64-v3 CPU has F16C).
      if (dtype == DType::kF16 && __builtin_cpu_supports("avx2")) {
        std::vector<float> f16c(all.size());
        flashdeberta::detail::half_to_float_f16c(bytes.data() + shift, f16c.data(), f16c.size());
        CHECK(std::memcmp(f16c.data(), out.data(), 4 * out.size()) == 0);
      }
#endif
      // A signaling NaN comes out quiet from the CPU's conversion (the quiet bit set, sign and payload kept).
      auto const same = [](float got, float want) {
        std::uint32_t g, w;
        std::memcpy(&g, &got, 4);
        std::memcpy(&w, &want, 4);
        return g == w || (std::isnan(want) && g == (w | 0x00400000u));
      };
      std::size_t mismatches = 0;
      for (std::size_t i = 0; i < all.size(); ++i) {
        float const want =
            dtype == DType::kF16 ? flashdeberta::half_to_float(all[i]) : flashdeberta::bfloat16_to_float(all[i]);
        mismatches += !same(out[i], want);
      }
      CHECK(mismatches == 0);
      // A range starting inside the tensor, of a length that is no multiple of the vector width.
      std::vector<float> part(37);
      convert(60001, part);
      for (std::size_t i = 0; i < part.size(); ++i) {
        float const want = dtype == DType::kF16 ? flashdeberta::half_to_float(all[60001 + i])
                                                : flashdeberta::bfloat16_to_float(all[60001 + i]);
        CHECK(same(part[i], want));
      }
    }
  }
}

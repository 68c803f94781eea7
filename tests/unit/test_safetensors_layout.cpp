// safetensors files accepted exactly when the Rust `safetensors` crate accepts them
// (SafeTensors::read_metadata, Metadata::validate): the header length limit, the header's first byte,
// what may follow its JSON object, and the tiling of the data section by the tensors.
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <span>
#include <string>

#include <doctest/doctest.h>

#include "flashdeberta/io/safetensors.hpp"
#include "io_test_util.hpp"

using flashdeberta::SafetensorsFile;
using flashdeberta::test::error_message;
using flashdeberta::test::safetensors_image;
using flashdeberta::test::TempDir;
using namespace std::string_literals;

namespace {

SafetensorsFile parse_image(std::string const& image) {
  return SafetensorsFile::parse(std::as_bytes(std::span<char const>(image.data(), image.size())), "mem");
}
std::string parse_error(std::string const& image) {
  return error_message([&] { parse_image(image); });
}

// An 8-byte little-endian header length.
std::string length_prefix(std::uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out;
}

// A header naming F32 tensors by data_offsets, e.g. tensors({{"a", 0, 16}, {"b", 16, 32}}).
struct Span {
  char const* name;
  int begin, end;
};
std::string tensors(std::initializer_list<Span> spans) {
  std::string out = "{";
  for (Span const& s : spans) {
    out += std::string(out.size() > 1 ? ", " : "") + "\"" + s.name + "\": {\"dtype\": \"F32\", \"shape\": [" +
           std::to_string((s.end - s.begin) / 4) + "], \"data_offsets\": [" + std::to_string(s.begin) + ", " +
           std::to_string(s.end) + "]}";
  }
  return out + "}";
}

}  // namespace

TEST_CASE("header length: at most the reference's 100,000,000 bytes, not 100 MiB") {
  // At the limit the length rule passes and the next rule (the file is too short) speaks.
  CHECK(parse_error(length_prefix(100'000'000) + "{}") ==
        "mem: header length 100000000 runs past the end of the file (only 2 bytes follow it)");
  CHECK(parse_error(length_prefix(100'000'001) + "{}") ==
        "mem: header length 100000001 exceeds the limit of 100000000 bytes");
  CHECK(parse_error(length_prefix(std::uint64_t{100} << 20) + "{}").find("exceeds the limit of 100000000 bytes") !=
        std::string::npos);
  CHECK(parse_error(length_prefix(~std::uint64_t{0}) + "{}").find("exceeds the limit") != std::string::npos);
}

TEST_CASE("the header must start with '{'") {
  CHECK(parse_error(safetensors_image(" {}", 0)) == "mem: safetensors header must start with '{', found byte 0x20");
  CHECK(parse_error(safetensors_image("\n{}", 0)).find("found byte 0x0a") != std::string::npos);
  CHECK(parse_error(safetensors_image("\xEF\xBB\xBF{}", 0)).find("found byte 0xef") != std::string::npos);
  CHECK(parse_error(safetensors_image("[]", 0)).find("found byte 0x5b") != std::string::npos);
  CHECK(parse_error(safetensors_image("", 0)) == "mem: safetensors header must start with '{', found an empty header");
}

TEST_CASE("after the header's object: whitespace (the writer's padding), nothing else") {
  std::string const header = tensors({{"a", 0, 8}});
  CHECK(parse_image(safetensors_image(header + "      ", 8)).size() == 1);
  CHECK(parse_image(safetensors_image(header + " \t\r\n", 8)).size() == 1);  // serde_json's whitespace set
  // A NUL must not end the parse there, leaving the rest of the header unread.
  std::string const nul_garbage = header + "\0garbage"s;
  CHECK(parse_error(safetensors_image(nul_garbage, 8)) ==
        "mem: safetensors header has a NUL byte at offset " + std::to_string(header.size()) +
            "; JSON text cannot contain one (the file is truncated, padded or not JSON)");
  CHECK(parse_error(safetensors_image(header + std::string(6, '\0'), 8)).find("NUL byte at offset") !=
        std::string::npos);
  // A NUL hiding a second, contradicting entry.
  CHECK(parse_error(safetensors_image("{}\0, \"b\": 1}"s, 0)).find("NUL byte at offset 2") != std::string::npos);
  for (std::string const tail : {" garbage"s, " {}"s, "}"s, ","s}) {
    CAPTURE(tail);
    std::string const message = parse_error(safetensors_image(header + tail, 8));
    CHECK(message.rfind("mem: safetensors header is not valid JSON (", 0) == 0);
    CHECK(message.find("expected end of input") != std::string::npos);
  }
  CHECK(
      parse_error(safetensors_image(R"({"a)"
                                    "\xFF"
                                    R"(": 1})",
                                    0)) ==
      "mem: safetensors header is not valid UTF-8: byte 0xff at offset 3 does not start a well-formed UTF-8 sequence");
}

TEST_CASE("the tensors tile the data section from byte 0 to the end of the file") {
  // Order in the header does not matter; offsets do. Empty tensors fit at any seam.
  SafetensorsFile const ok = parse_image(safetensors_image(
      tensors({{"b", 16, 32}, {"e", 16, 16}, {"a", 0, 16}, {"f", 32, 32}, {"g", 0, 0}, {"h", 16, 16}}), 32));
  CHECK(ok.size() == 6);
  CHECK(ok.info("b").bytes.data() == ok.info("a").bytes.data() + 16);
  CHECK(parse_image(safetensors_image("{}", 0)).size() == 0);

  CHECK(parse_error(safetensors_image(tensors({{"a", 8, 24}}), 24)) ==
        "mem: tensor 'a' (data_offsets [8, 24]) is the first in the data section but starts at byte 8, leaving a hole "
        "of 8 bytes before it that no tensor owns");
  CHECK(parse_error(safetensors_image(tensors({{"a", 0, 16}, {"b", 24, 40}}), 40)) ==
        "mem: tensors 'a' (data_offsets [0, 16]) and 'b' (data_offsets [24, 40]) leave a hole of 8 bytes between them "
        "that no tensor owns");
  CHECK(parse_error(safetensors_image(tensors({{"a", 0, 16}}), 20)) ==
        "mem: the data section is 20 bytes, but its last tensor 'a' (data_offsets [0, 16]) ends at byte 16: 4 "
        "trailing bytes that no tensor owns (the file must end where its last tensor does)");
  CHECK(parse_error(safetensors_image("{}", 8)) ==
        "mem: the data section is 8 bytes, but the header names no tensor: 8 trailing bytes that no tensor owns (the "
        "file must end where its last tensor does)");
  CHECK(parse_error(safetensors_image(tensors({{"a", 0, 16}, {"b", 0, 16}}), 16)) ==
        "mem: tensors 'a' (data_offsets [0, 16]) and 'b' (data_offsets [0, 16]) overlap: 'b' starts 16 bytes before "
        "'a' ends");
  // An empty tensor in a hole does not fill it.
  CHECK(parse_error(safetensors_image(tensors({{"a", 0, 16}, {"e", 20, 20}, {"b", 20, 32}}), 32))
            .find("tensors 'a' (data_offsets [0, 16]) and 'e' (data_offsets [20, 20]) leave a hole of 4 bytes") !=
        std::string::npos);
  CHECK(parse_error(safetensors_image(tensors({{"a", 0, 16}, {"e", 24, 24}}), 16))
            .find("tensor 'e' has data_offsets end 24 past the end of the data section (16 bytes)") !=
        std::string::npos);

  // From a file, every message starts with its path.
  TempDir dir;
  flashdeberta::test::write_file(dir / "t.safetensors", safetensors_image(tensors({{"a", 0, 16}}), 17));
  CHECK(error_message([&] {
          SafetensorsFile::open(dir / "t.safetensors");
        }).rfind((dir / "t.safetensors").string() + ": the data section is 17 bytes", 0) == 0);
}

TEST_CASE("__metadata__: null means none, as in the reference, and values must be strings") {
  CHECK(parse_image(safetensors_image(R"({"__metadata__": null})", 0)).metadata().empty());
  CHECK(parse_image(safetensors_image(R"({"__metadata__": {"format": "pt"}})", 0)).metadata().at("format") == "pt");
  CHECK(parse_error(safetensors_image(R"({"__metadata__": {"format": null}})", 0)) ==
        "mem: __metadata__ value of 'format' must be a string, found null");
  CHECK(parse_error(safetensors_image(R"({"__metadata__": {"a": "x", "a": "y"}})", 0))
            .find("safetensors header has duplicate key 'a'") != std::string::npos);
}

TEST_CASE("header values of the wrong type are refused where they appear, without building a JSON tree") {
  auto const entry = [](std::string const& dtype, std::string const& shape, std::string const& offsets) {
    return safetensors_image(
        R"({"a": {"dtype": )" + dtype + R"(, "shape": )" + shape + R"(, "data_offsets": )" + offsets + "}}", 0);
  };
  CHECK(parse_error(entry("3", "[]", "[0, 0]")) == "mem: dtype of tensor 'a' must be a string, found integer 3");
  CHECK(parse_error(entry("[]", "[]", "[0, 0]")) == "mem: dtype of tensor 'a' must be a string, found array");
  CHECK(parse_error(entry(R"("F32")", R"("2x2")", "[0, 0]")) ==
        "mem: shape of tensor 'a' must be an array of integers, found string \"2x2\"");
  CHECK(parse_error(entry(R"("F32")", "[1, {}]", "[0, 0]")) ==
        "mem: shape[1] of tensor 'a' must be an integer, found object");
  CHECK(parse_error(entry(R"("F32")", "[1, true]", "[0, 0]")) ==
        "mem: shape[1] of tensor 'a' must be an integer, found boolean true");
  CHECK(parse_error(entry(R"("F32")", "[]", "[0]")) ==
        "mem: data_offsets of tensor 'a' must be an array of exactly two integers [begin, end], found an array of 1 "
        "integer");
  CHECK(parse_error(entry(R"("F32")", "[]", "[0, 4, 8]")) ==
        "mem: data_offsets of tensor 'a' must be an array of exactly two integers [begin, end], found an array of "
        "more than two");
  CHECK(parse_error(entry(R"("F32")", "[]", "{}")) ==
        "mem: data_offsets of tensor 'a' must be an array of exactly two integers [begin, end], found object");
  CHECK(parse_error(entry(R"("F32")", "[]", "[0, -4]")) ==
        "mem: data_offsets[1] of tensor 'a' is -4; it must be non-negative");
  CHECK(parse_error(entry(R"("F32")", "[]", "[0, 18446744073709551615]")) ==
        "mem: data_offsets[1] of tensor 'a' must be an integer that fits in int64, found integer 18446744073709551615");
  CHECK(parse_error(entry(R"("F32")", "[]", "[0, [0]]")) ==
        "mem: data_offsets[1] of tensor 'a' must be an integer, found array");
  CHECK(parse_error(safetensors_image(R"({"a": {"dtype": "F32", "dtype": "F32"}})", 0)) ==
        "mem: safetensors header has duplicate key 'dtype'");
  CHECK(parse_error(safetensors_image(R"({"__metadata__": null, "__metadata__": {}})", 0)) ==
        "mem: safetensors header has duplicate key '__metadata__'");
  CHECK(parse_error(safetensors_image(R"({"__metadata__": {"k": {"x": "y"}}})", 0)) ==
        "mem: __metadata__ value of 'k' must be a string, found object");
  CHECK(parse_error(safetensors_image(R"({"__metadata__": 7})", 0)) ==
        "mem: __metadata__ must be an object of strings (or null), found integer 7");

  // 10 MB of empty arrays: refused at the first one. As a JSON tree it took ~250 MB and about a second.
  std::string header = R"({"a": [)";
  while (header.size() < 10'000'000) header += "[],";
  header += "[]]}";
  std::string const image = safetensors_image(header, 0);
  std::clock_t const start = std::clock();  // CPU time: other load on the machine does not count
  CHECK(parse_error(image) == "mem: tensor 'a' must be an object with dtype, shape, data_offsets, found array");
  CHECK(static_cast<double>(std::clock() - start) / CLOCKS_PER_SEC < 0.25);
}

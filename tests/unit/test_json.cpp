// io::parse_json, the one JSON entry point (config.json, tokenizer files, shard indexes, safetensors
// headers, CLI input): exactly the text Python's json (after a strict UTF-8 decode) and serde_json
// accept, with duplicate keys and deep nesting refused on top. The UTF-8 table was checked against
// Python's bytes.decode("utf-8"), which reports the same offsets.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <doctest/doctest.h>

#include "flashdeberta/io/json.hpp"
#include "io_test_util.hpp"

using flashdeberta::io::find_invalid_utf8;
using flashdeberta::io::Json;
using flashdeberta::io::parse_json;
using flashdeberta::test::error_message;
using namespace std::string_literals;

namespace {

Json parse(std::string const& text) { return parse_json(text, "doc.json", "document"); }

}  // namespace

TEST_CASE("UTF-8: well-formed sequences pass, anything else is reported at its first byte") {
  for (std::string const valid :
       {""s, "plain ascii"s, "\xC3\xA9"s, "\xE2\x82\xAC"s, "\xF0\x9D\x84\x9E"s, "\xE0\xA0\x80"s, "\xED\x9F\xBF"s,
        "\xEE\x80\x80"s, "\xF4\x8F\xBF\xBF"s, "\xF0\x90\x80\x80"s, "a\xC3\xA9z"s}) {
    CAPTURE(valid);
    CHECK_FALSE(find_invalid_utf8(valid).has_value());
  }
  struct Bad {
    std::string text;
    std::size_t offset;
    char const* why;
  };
  Bad const bad[] = {
      {"\x80", 0, "a continuation byte with no lead"},
      {"a\xC0\x80", 1, "overlong two-byte NUL"},
      {"\xC1\xBF", 0, "overlong two-byte form"},
      {"\xE0\x80\x80", 0, "overlong three-byte form"},
      {"\xED\xA0\x80", 0, "a UTF-16 surrogate"},
      {"\xF0\x80\x80\x80", 0, "overlong four-byte form"},
      {"\xF4\x90\x80\x80", 0, "above U+10FFFF"},
      {"\xF5\x80\x80\x80", 0, "lead byte F5"},
      {"\xFF", 0, "byte FF"},
      {"ab\xE2\x82", 2, "truncated three-byte sequence"},
      {"\xC3", 0, "truncated two-byte sequence"},
      {"\xC3\x28", 0, "ASCII where a continuation belongs"},
      {"x\xE2\x28\xA1", 1, "bad second byte of three"},
      {"\xF0\x9D\x84\x28", 0, "bad fourth byte"},
  };
  for (Bad const& b : bad) {
    CAPTURE(b.why);
    CHECK(find_invalid_utf8(b.text) == std::optional<std::size_t>(b.offset));
  }
}

TEST_CASE("a NUL byte is refused wherever it is, naming its offset") {
  // nlohmann stops at a NUL, so each of these parsed before, with everything after the NUL unread.
  CHECK(error_message([] { parse("{\"a\": 1}\0garbage"s); }) ==
        "doc.json: document has a NUL byte at offset 8; JSON text cannot contain one (the file is truncated, padded "
        "or not JSON)");
  CHECK(error_message([] { parse("{\"a\": 1}\0"s); }).find("NUL byte at offset 8") != std::string::npos);
  CHECK(error_message([] { parse("{\"a\": 1}\0\0\0\0"s); }).find("NUL byte at offset 8") != std::string::npos);
  CHECK(error_message([] { parse("{\"a\": \"x\0y\"}"s); }).find("NUL byte at offset 8") != std::string::npos);
  CHECK(error_message([] { parse("\0{}"s); }).find("NUL byte at offset 0") != std::string::npos);
  // The escape \u0000 is JSON text without a NUL byte; the string value holds one.
  CHECK(parse(R"({"a": "x\u0000y"})").at("a").get<std::string>() == "x\0y"s);
}

TEST_CASE("only whitespace may follow the value") {
  CHECK(parse("{\"a\": 1}  \t\r\n").at("a") == 1);
  CHECK(parse("  \n{\"a\": 1}").at("a") == 1);  // leading whitespace is JSON too
  for (std::string const tail : {" garbage"s, "}"s, " {}"s, ","s, " 1"s, "//"s, "\x7f"s}) {
    CAPTURE(tail);
    std::string const message = error_message([&] { parse("{\"a\": 1}" + tail); });
    CHECK(message.rfind("doc.json: document is not valid JSON (", 0) == 0);
    CHECK(message.find("expected end of input") != std::string::npos);
  }
}

TEST_CASE("byte order marks and invalid UTF-8 are refused") {
  CHECK(error_message([] { parse("\xEF\xBB\xBF{}"); }) ==
        "doc.json: document starts with a UTF-8 byte order mark, which JSON readers (Python's json, serde_json) "
        "refuse; save the file as UTF-8 without a BOM");
  CHECK(error_message([] { parse("{\"a\": \"\xFF\"}"); }) ==
        "doc.json: document is not valid UTF-8: byte 0xff at offset 7 does not start a well-formed UTF-8 sequence");
  CHECK(error_message([] { parse("{\"\xED\xA0\x80\": 1}"); }).find("byte 0xed at offset 2") != std::string::npos);
  CHECK(parse("{\"\xC3\xA9\": \"\xF0\x9D\x84\x9E\"}").at("\xC3\xA9") == "\xF0\x9D\x84\x9E");
}

TEST_CASE("nesting deeper than 64 levels is refused") {
  CHECK(parse(std::string(64, '[') + std::string(64, ']')).is_array());
  CHECK(error_message([] { parse(std::string(100, '[') + std::string(100, ']')); }) ==
        "doc.json: document nests deeper than 64 levels");
}

// io::parse_json, the one JSON entry point (config.json, tokenizer files, shard indexes, safetensors
// headers, CLI input): exactly the text Python's json (after a strict UTF-8 decode) and serde_json
// accept, with duplicate keys and deep nesting refused on top. The UTF-8 table was checked against
// Python's bytes.decode("utf-8"), which reports the same offsets.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
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

Json parse_doc(std::string const& text) { return parse_json(text, "doc.json", "document"); }

// {"inputs": [{}, {}, ...]} with `n` objects, as a client sends a batch.
std::string many_objects(int n) {
  std::string text = R"({"inputs": [)";
  for (int i = 0; i < n; ++i) text += i ? ", {}" : "{}";
  return text + "]}";
}

// tokenizer_config.json's added_tokens_decoder with `n` entries, each an AddedToken object as HF writes it.
std::string many_added_tokens(int n) {
  std::string text = R"({"added_tokens_decoder": {)";
  for (int i = 0; i < n; ++i) {
    text += (i ? ", \"" : "\"") + std::to_string(i) + R"(": {"content": "[t)" + std::to_string(i) +
            R"(]", "lstrip": false, "normalized": false, "rstrip": false, "single_word": false, "special": true})";
  }
  return text + "}}";
}

// The fastest of five parses of each text, in seconds, taken in turns so that both meet the allocator and the
// caches in the same state; the fastest is the least disturbed by other work on the machine.
std::pair<double, double> parse_seconds(std::string const& first, std::string const& second) {
  auto const time = [](std::string const& text) {
    auto const start = std::chrono::steady_clock::now();
    Json const doc = parse_doc(text);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  std::pair<double, double> best{1e9, 1e9};
  for (int run = 0; run < 5; ++run) {
    best.first = std::min(best.first, time(first));
    best.second = std::min(best.second, time(second));
  }
  return best;
}

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
  CHECK(error_message([] { parse_doc("{\"a\": 1}\0garbage"s); }) ==
        "doc.json: document has a NUL byte at offset 8; JSON text cannot contain one (the file is truncated, padded "
        "or not JSON)");
  CHECK(error_message([] { parse_doc("{\"a\": 1}\0"s); }).find("NUL byte at offset 8") != std::string::npos);
  CHECK(error_message([] { parse_doc("{\"a\": 1}\0\0\0\0"s); }).find("NUL byte at offset 8") != std::string::npos);
  CHECK(error_message([] { parse_doc("{\"a\": \"x\0y\"}"s); }).find("NUL byte at offset 8") != std::string::npos);
  CHECK(error_message([] { parse_doc("\0{}"s); }).find("NUL byte at offset 0") != std::string::npos);
  // The escape \u0000 is JSON text without a NUL byte; the string value holds one.
  CHECK(parse_doc(R"({"a": "x\u0000y"})").at("a").get<std::string>() == "x\0y"s);
}

TEST_CASE("only whitespace may follow the value") {
  CHECK(parse_doc("{\"a\": 1}  \t\r\n").at("a") == 1);
  CHECK(parse_doc("  \n{\"a\": 1}").at("a") == 1);  // leading whitespace is JSON too
  for (std::string const tail : {" garbage"s, "}"s, " {}"s, ","s, " 1"s, "//"s, "\x7f"s}) {
    CAPTURE(tail);
    std::string const message = error_message([&] { parse_doc("{\"a\": 1}" + tail); });
    CHECK(message.rfind("doc.json: document is not valid JSON (", 0) == 0);
    CHECK(message.find("expected end of input") != std::string::npos);
  }
}

TEST_CASE("byte order marks and invalid UTF-8 are refused") {
  CHECK(error_message([] { parse_doc("\xEF\xBB\xBF{}"); }) ==
        "doc.json: document starts with a UTF-8 byte order mark, which JSON readers (Python's json, serde_json) "
        "refuse; save the file as UTF-8 without a BOM");
  CHECK(error_message([] { parse_doc("{\"a\": \"\xFF\"}"); }) ==
        "doc.json: document is not valid UTF-8: byte 0xff at offset 7 does not start a well-formed UTF-8 sequence");
  CHECK(error_message([] { parse_doc("{\"\xED\xA0\x80\": 1}"); }).find("byte 0xed at offset 2") != std::string::npos);
  CHECK(parse_doc("{\"\xC3\xA9\": \"\xF0\x9D\x84\x9E\"}").at("\xC3\xA9") == "\xF0\x9D\x84\x9E");
}

TEST_CASE("nesting deeper than 64 levels is refused") {
  CHECK(parse_doc(std::string(64, '[') + std::string(64, ']')).is_array());
  CHECK(error_message([] { parse_doc(std::string(100, '[') + std::string(100, ']')); }) ==
        "doc.json: document nests deeper than 64 levels");
}

TEST_CASE("duplicate keys are refused at any depth, naming the key and the object's path") {
  CHECK(error_message([] { parse_doc(R"({"a": 1, "b": 2, "a": 3})"); }) == "doc.json: document has duplicate key 'a'");
  CHECK(error_message([] { parse_doc(R"({"x": [0, {"k/~": {"a": 1, "a": 2}}]})"); }) ==
        "doc.json: document has duplicate key 'a' in the object at /x/1/k~1~0");
  CHECK(error_message([] { parse_doc(R"([{}, {"a": {}, "a": []}])"); }) ==
        "doc.json: document has duplicate key 'a' in the object at /1");
  // The same key in different objects is no duplicate; "\u0061" is "a".
  CHECK(parse_doc(R"({"a": {"a": {"a": 1}}, "b": [{"a": 1}, {"a": 2}]})").at("b").at(1).at("a") == 2);
  CHECK(error_message([] { parse_doc(R"({"a": 1, "\u0061": 2})"); }) == "doc.json: document has duplicate key 'a'");
  // ordered_json keeps the file's order and gets the same checks.
  using Ordered = nlohmann::ordered_json;
  Ordered const ordered = parse_json<Ordered>(R"({"z": 1, "a": {"y": [true, null]}, "m": 2.5})", "o.json", "doc");
  CHECK(ordered.dump() == R"({"z":1,"a":{"y":[true,null]},"m":2.5})");
  CHECK(error_message([] { parse_json<Ordered>(R"({"z": {"b": 1, "a": 2, "b": 3}})", "o.json", "doc"); }) ==
        "o.json: doc has duplicate key 'b' in the object at /z");
  CHECK(error_message([] { parse_json<Ordered>(std::string(65, '[') + std::string(65, ']'), "o.json", "doc"); }) ==
        "o.json: doc nests deeper than 64 levels");
}

TEST_CASE("values arrive as nlohmann's own parser builds them, and syntax errors name the position") {
  Json const doc = parse_doc(R"({"i": -3, "u": 18446744073709551615, "f": 0.5, "s": "x", "t": true, "n": null,
                             "a": [[], {}, [1, [2]]], "o": {}})");
  CHECK(doc == Json::parse(R"({"i": -3, "u": 18446744073709551615, "f": 0.5, "s": "x", "t": true, "n": null,
                               "a": [[], {}, [1, [2]]], "o": {}})"));
  CHECK(doc.at("i").is_number_integer());
  CHECK(doc.at("u").is_number_unsigned());
  CHECK(parse_doc("7") == 7);
  CHECK(parse_doc("\"s\"") == "s");
  std::string const message = error_message([] { parse_doc("{\"a\": [1,\n 2,, 3]}"); });
  CHECK(message.rfind("doc.json: document is not valid JSON (", 0) == 0);
  CHECK(message.find("parse error at line 2, column 4: syntax error") != std::string::npos);
  CHECK(error_message([] { parse_doc(""); }).find("doc.json: document is not valid JSON (") == 0);
  CHECK(error_message([] { parse_doc("1e999"); }).find("number overflow") != std::string::npos);
}

TEST_CASE("many objects in one array or object parse in linear time") {
  // nlohmann's callback parser scanned the parent container after every object: 160,000 {} took 35 s and
  // 40,000 added_tokens_decoder entries 10 s. Here both take well under a second.
  Json const body = parse_doc(many_objects(160'000));
  CHECK(body.at("inputs").size() == 160'000);
  Json const config = parse_doc(many_added_tokens(100'000));
  REQUIRE(config.at("added_tokens_decoder").size() == 100'000);
  CHECK(config.at("added_tokens_decoder").at("99999").at("content") == "[t99999]");

  // Four times the entries must take about four times as long, not sixteen. The bound of 10 leaves room for a
  // loaded machine and for memory: both sizes lie past the caches, yet allocation and page faults give this
  // reader ratios from 4 to 7 here (from 6 to 10 across the caches' edge, 100,000 {} against 400,000).
  struct Shape {
    char const* name;
    std::function<std::string(int)> make;
    int n;
  };
  for (Shape const& shape : {Shape{"objects in an array", many_objects, 200'000},
                             Shape{"objects in an object", many_added_tokens, 10'000}}) {
    auto const [small, large] = parse_seconds(shape.make(shape.n), shape.make(4 * shape.n));
    MESSAGE(std::string(shape.name) << ": " << shape.n << " in " << small << " s, " << 4 * shape.n << " in " << large
                                    << " s");
    CHECK(large < 10 * std::max(small, 1e-3));
  }
}

// Typed access to nlohmann::json values for the config and checkpoint parsers.
//
// Every accessor takes the source name (a file path) and a description of the value, so a failure
// reads "config.json: key 'hidden_size' must be an integer, found string \"768\"": the user can fix
// the file from the message alone, without a debugger.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "flashdeberta/core/error.hpp"

namespace flashdeberta::io {

using Json = nlohmann::json;

// No config or safetensors header nests deeper than a few levels; the cap bounds the parser's work on
// hostile input (and the recursion in nlohmann's dump()) long before the stack is at risk.
inline constexpr int kMaxJsonDepth = 64;

inline std::string_view json_type_name(Json const& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return "boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "integer";
    case Json::value_t::number_float:
      return "number";
    case Json::value_t::string:
      return "string";
    case Json::value_t::array:
      return "array";
    case Json::value_t::object:
      return "object";
    case Json::value_t::binary:
      return "binary";
    case Json::value_t::discarded:
      return "discarded";
  }
  return "unknown";
}

// "string \"768\"": type and a bounded rendering, so a 10 MB value cannot flood an error message; "null".
inline std::string json_describe(Json const& value, std::size_t limit = 80) {
  if (value.is_null()) return "null";
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > limit) {
    text.resize(limit);
    text += "...";
  }
  return std::string(json_type_name(value)) + " " + text;
}

// Offset of the first byte of `text` that is not part of well-formed UTF-8 (RFC 3629: no overlong
// forms, no surrogates, nothing above U+10FFFF, no truncated sequence), or nullopt. The same rule as
// Rust's str::from_utf8 and Python's strict "utf-8" codec, which the reference readers apply first.
inline std::optional<std::size_t> find_invalid_utf8(std::string_view text) {
  auto const byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  std::size_t i = 0;
  while (i < text.size()) {
    unsigned char const lead = byte(i);
    if (lead < 0x80) {
      ++i;
      continue;
    }
    std::size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;  // the range of the second byte; later ones are 80..BF
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) low = 0xA0;   // overlong below U+0800
      if (lead == 0xED) high = 0x9F;  // UTF-16 surrogates U+D800..U+DFFF
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) low = 0x90;   // overlong below U+10000
      if (lead == 0xF4) high = 0x8F;  // above U+10FFFF
    } else {
      return i;  // a continuation byte, an overlong lead (C0, C1) or F5..FF
    }
    if (length > text.size() - i || byte(i + 1) < low || byte(i + 1) > high) return i;
    for (std::size_t k = 2; k < length; ++k) {
      if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return i;
    }
    i += length;
  }
  return std::nullopt;
}

// The checks every JSON text gets before nlohmann sees it, to be as strict as the readers HF uses
// (Python's json over a UTF-8 decode, serde_json over str::from_utf8): UTF-8 without a byte order
// mark, and no NUL byte. nlohmann's lexer takes a NUL for the end of the input, so "{...}\0garbage"
// would otherwise parse, with nothing after the NUL ever looked at.
inline void check_json_text(std::string_view text, std::string_view source, std::string_view what) {
  if (std::size_t const nul = text.find('\0'); nul != std::string_view::npos) {
    FLASHDEBERTA_FAIL(source << ": " << what << " has a NUL byte at offset " << nul
                             << "; JSON text cannot contain one (the file is truncated, padded or not JSON)");
  }
  FLASHDEBERTA_REQUIRE(!text.starts_with("\xEF\xBB\xBF"),
                       source << ": " << what
                              << " starts with a UTF-8 byte order mark, which JSON readers (Python's json, serde_json) "
                                 "refuse; save the file as UTF-8 without a BOM");
  if (std::optional<std::size_t> const bad = find_invalid_utf8(text)) {
    FLASHDEBERTA_FAIL(source << ": " << what << " is not valid UTF-8: byte 0x" << std::hex
                             << static_cast<unsigned>(static_cast<unsigned char>(text[*bad])) << std::dec
                             << " at offset " << *bad << " does not start a well-formed UTF-8 sequence");
  }
}

// Parses `text` as one JSON document. `what` names the document in messages ("config"). The text
// passes check_json_text, and nothing but whitespace (space, tab, CR, LF) may follow the value.
// Duplicate keys in any object are rejected: nlohmann (and Python) silently keep the last one, so
// two readers of the same file could disagree about its contents. `JsonType` may be nlohmann::ordered_json
// where the keys' order matters (a config handed to Python as a dict in the file's order).
template <class JsonType = Json>
JsonType parse_json(std::string_view text, std::string_view source, std::string_view what) {
  check_json_text(text, source, what);
  std::vector<std::set<std::string>> open_objects;
  auto on_event = [&](int depth, typename JsonType::parse_event_t event, JsonType& parsed) -> bool {
    switch (event) {
      case JsonType::parse_event_t::object_start:
      case JsonType::parse_event_t::array_start:
        FLASHDEBERTA_REQUIRE(depth < kMaxJsonDepth,
                             source << ": " << what << " nests deeper than " << kMaxJsonDepth << " levels");
        if (event == JsonType::parse_event_t::object_start) open_objects.emplace_back();
        break;
      case JsonType::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case JsonType::parse_event_t::key: {
        auto const& key = parsed.template get_ref<std::string const&>();
        FLASHDEBERTA_REQUIRE(!open_objects.empty() && open_objects.back().insert(key).second,
                             source << ": " << what << " has duplicate key '" << key << "'");
        break;
      }
      default:
        break;
    }
    return true;
  };
  try {
    return JsonType::parse(text.begin(), text.end(), on_event, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (typename JsonType::exception const& e) {
    FLASHDEBERTA_FAIL(source << ": " << what << " is not valid JSON (" << e.what() << ")");
  }
}

// `what` below is an already formatted description of the value, e.g. "key 'hidden_size'".
[[noreturn]] inline void fail_json_type(std::string_view source, std::string_view what, std::string_view expected,
                                        Json const& found) {
  FLASHDEBERTA_FAIL(source << ": " << what << " must be " << expected << ", found " << json_describe(found));
}

// Integers only: 768.0 is rejected rather than truncated, since it signals a hand-edited or foreign file.
inline std::int64_t json_as_int64(Json const& value, std::string_view source, std::string_view what) {
  if (value.is_number_unsigned()) {
    auto const u = value.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      fail_json_type(source, what, "an integer that fits in int64", value);
    }
    return static_cast<std::int64_t>(u);
  }
  if (value.is_number_integer()) return value.get<std::int64_t>();
  fail_json_type(source, what, "an integer", value);
}

inline double json_as_double(Json const& value, std::string_view source, std::string_view what) {
  if (!value.is_number()) fail_json_type(source, what, "a number", value);
  return value.get<double>();
}

inline bool json_as_bool(Json const& value, std::string_view source, std::string_view what) {
  if (!value.is_boolean()) fail_json_type(source, what, "a boolean (true or false)", value);
  return value.get<bool>();
}

inline std::string const& json_as_string(Json const& value, std::string_view source, std::string_view what) {
  if (!value.is_string()) fail_json_type(source, what, "a string", value);
  return value.get_ref<std::string const&>();
}

// Reads the members of one JSON object with per-key defaults, as HF's "getattr(config, key, default)".
class JsonFields {
 public:
  JsonFields(Json const& object, std::string source) : object_(&object), source_(std::move(source)) {
    if (!object.is_object()) fail_json_type(source_, "the top-level value", "an object", object);
  }

  std::string const& source() const { return source_; }
  Json const& object() const { return *object_; }

  // nullptr when the key is absent.
  Json const* find(std::string_view key) const {
    auto it = object_->find(key);
    return it == object_->end() ? nullptr : &*it;
  }
  bool has(std::string_view key) const { return find(key) != nullptr; }

  static std::string describe_key(std::string_view key) { return "key '" + std::string(key) + "'"; }

  std::optional<std::int64_t> get_optional_int(std::string_view key) const {
    Json const* v = find(key);
    if (v == nullptr) return std::nullopt;
    return json_as_int64(*v, source_, describe_key(key));
  }
  std::int64_t get_int(std::string_view key, std::int64_t fallback) const {
    return get_optional_int(key).value_or(fallback);
  }
  double get_number(std::string_view key, double fallback) const {
    Json const* v = find(key);
    return v == nullptr ? fallback : json_as_double(*v, source_, describe_key(key));
  }
  bool get_bool(std::string_view key, bool fallback) const {
    Json const* v = find(key);
    return v == nullptr ? fallback : json_as_bool(*v, source_, describe_key(key));
  }
  std::string get_string(std::string_view key, std::string_view fallback) const {
    Json const* v = find(key);
    return v == nullptr ? std::string(fallback) : json_as_string(*v, source_, describe_key(key));
  }

 private:
  Json const* object_;
  std::string source_;
};

}  // namespace flashdeberta::io

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

namespace detail {

// The JSON pointer (RFC 6901) of the value `keys_and_indexes` leads to, for messages: "/inputs/3".
inline std::string json_pointer_text(std::vector<std::string> const& keys_and_indexes) {
  std::string out;
  for (std::string const& part : keys_and_indexes) {
    out += '/';
    for (char c : part) {
      if (c == '~') {
        out += "~0";
      } else if (c == '/') {
        out += "~1";
      } else {
        out += c;
      }
    }
  }
  return out;
}

// Builds the document from nlohmann's SAX events the way its own DOM parser does, with parse_json's checks
// on top. Not nlohmann's callback parser: after every object it scans the parent container for discarded
// values, so an array of n objects, or an object of n object members, took time quadratic in n (160,000
// {} in a request body: 35 s). Here each event costs O(log n) at most, whatever the document's shape.
template <class JsonType>
class StrictJsonBuilder {
 public:
  using number_integer_t = typename JsonType::number_integer_t;
  using number_unsigned_t = typename JsonType::number_unsigned_t;
  using number_float_t = typename JsonType::number_float_t;
  using string_t = typename JsonType::string_t;
  using binary_t = typename JsonType::binary_t;

  StrictJsonBuilder(std::string_view source, std::string_view what) : source_(source), what_(what) {}

  JsonType take() { return std::move(root_); }

  bool null() { return put(nullptr); }
  bool boolean(bool value) { return put(value); }
  bool number_integer(number_integer_t value) { return put(value); }
  bool number_unsigned(number_unsigned_t value) { return put(value); }
  bool number_float(number_float_t value, string_t const& /*text*/) { return put(value); }
  bool string(string_t& value) { return put(std::move(value)); }
  bool binary(binary_t& value) { return put(JsonType::binary(std::move(value))); }

  bool start_object(std::size_t /*size*/) { return open(JsonType::value_t::object); }
  bool start_array(std::size_t /*size*/) { return open(JsonType::value_t::array); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(string_t& key) {
    Frame& top = stack_.back();
    auto& members = top.value->template get_ref<typename JsonType::object_t&>();
    if constexpr (kVectorBacked) {
      // ordered_json keeps members in a vector whose find is linear: a side index keeps the check O(log n).
      if (!top.keys.insert(key).second) fail_duplicate(key);
      auto& in_order = static_cast<typename JsonType::object_t::Container&>(members);
      in_order.emplace_back(std::move(key), nullptr);
      top.member_key = &in_order.back().first;
      top.member = &in_order.back().second;
    } else {
      auto const [it, inserted] = members.emplace(std::move(key), nullptr);
      if (!inserted) fail_duplicate(it->first);
      top.member_key = &it->first;
      top.member = &it->second;
    }
    return true;
  }

  template <class Exception>
  bool parse_error(std::size_t /*position*/, std::string const& /*token*/, Exception const& error) {
    throw error;
  }

 private:
  // ordered_json's ordered_map derives from the vector it keeps its members in; json's std::map does not.
  static constexpr bool kVectorBacked = requires { typename JsonType::object_t::Container; };

  struct Frame {
    JsonType* value;                         // the open array or object
    JsonType* member = nullptr;              // an object's member whose value comes next
    string_t const* member_key = nullptr;    // its key, for the path in messages
    std::set<string_t, std::less<>> keys{};  // the keys seen so far, where kVectorBacked
  };

  template <class Value>
  JsonType* place(Value&& value) {
    if (stack_.empty()) {
      root_ = JsonType(std::forward<Value>(value));
      return &root_;
    }
    Frame& top = stack_.back();
    if (top.value->is_array()) {
      auto& elements = top.value->template get_ref<typename JsonType::array_t&>();
      elements.emplace_back(std::forward<Value>(value));
      return &elements.back();
    }
    *top.member = JsonType(std::forward<Value>(value));
    return top.member;
  }

  template <class Value>
  bool put(Value&& value) {
    place(std::forward<Value>(value));
    return true;
  }

  bool open(typename JsonType::value_t type) {
    FLASHDEBERTA_REQUIRE(stack_.size() < static_cast<std::size_t>(kMaxJsonDepth),
                         source_ << ": " << what_ << " nests deeper than " << kMaxJsonDepth << " levels");
    // The new container is complete storage already: its parent gets no other element while it is open,
    // so the pointer stays valid until close().
    stack_.push_back(Frame{place(type)});
    return true;
  }

  bool close() {
    stack_.pop_back();
    return true;
  }

  [[noreturn]] void fail_duplicate(string_t const& key) const {
    std::vector<std::string> path;  // of the object holding the duplicate
    for (std::size_t i = 0; i + 1 < stack_.size(); ++i) {
      Frame const& frame = stack_[i];
      path.push_back(frame.value->is_array() ? std::to_string(frame.value->size() - 1) : *frame.member_key);
    }
    if (path.empty()) FLASHDEBERTA_FAIL(source_ << ": " << what_ << " has duplicate key '" << key << "'");
    FLASHDEBERTA_FAIL(source_ << ": " << what_ << " has duplicate key '" << key << "' in the object at "
                              << json_pointer_text(path));
  }

  std::string_view source_;
  std::string_view what_;
  JsonType root_;
  std::vector<Frame> stack_;  // the open containers, outermost first
};

}  // namespace detail

// Parses `text` as one JSON document. `what` names the document in messages ("config"). The text
// passes check_json_text, and nothing but whitespace (space, tab, CR, LF) may follow the value.
// Duplicate keys in any object are rejected, naming the key and where the object is: nlohmann (and Python)
// silently keep the last one, so two readers of the same file could disagree about its contents. Nesting
// deeper than kMaxJsonDepth is rejected. Linear in the text's size (up to a log factor for the key checks).
// `JsonType` may be nlohmann::ordered_json where the keys' order matters (a config handed to Python as a
// dict in the file's order).
template <class JsonType = Json>
JsonType parse_json(std::string_view text, std::string_view source, std::string_view what) {
  check_json_text(text, source, what);
  detail::StrictJsonBuilder<JsonType> builder(source, what);
  try {
    JsonType::sax_parse(text.begin(), text.end(), &builder, JsonType::input_format_t::json, /*strict=*/true,
                        /*ignore_comments=*/false);
  } catch (typename JsonType::exception const& e) {
    FLASHDEBERTA_FAIL(source << ": " << what << " is not valid JSON (" << e.what() << ")");
  }
  return builder.take();
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

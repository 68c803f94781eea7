// Reading the parts of a tokenizer.json: typed members with errors that name the file and the field
// ("tokenizer.json: normalizer.normalizers[2].type ..."), and the refusal of what flashdeberta does not
// implement, as flashdeberta::FileError naming the field, its value and what is supported.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/io/json.hpp"

namespace flashdeberta::tokenizer::detail {

// One JSON value of the file and its path in it, for messages.
struct JsonNode {
  io::Json const& value;
  std::string const& file;  // the file's path as given
  std::string field;        // "normalizer.normalizers[2]", "" for the whole file

  std::string describe(std::string_view key) const {
    return field.empty() ? std::string(key) : field + "." + std::string(key);
  }

  // The member `key`, which must be there.
  JsonNode at(std::string_view key) const {
    require_object();
    auto it = value.find(key);
    FLASHDEBERTA_REQUIRE(it != value.end(),
                         file << ": " << (field.empty() ? "the file" : field) << " has no '" << key << "'");
    return {*it, file, describe(key)};
  }
  // The member `key`, or a null value when it is absent.
  JsonNode optional(std::string_view key) const {
    static io::Json const null_value;
    require_object();
    auto it = value.find(key);
    return {it == value.end() ? null_value : *it, file, describe(key)};
  }
  // The member `key`, or nullptr when it is absent or null.
  io::Json const* find(std::string_view key) const {
    require_object();
    auto it = value.find(key);
    return it == value.end() || it->is_null() ? nullptr : &*it;
  }
  JsonNode child(io::Json const& member, std::string_view key) const { return {member, file, describe(key)}; }
  JsonNode element(std::size_t index) const { return {value[index], file, field + "[" + std::to_string(index) + "]"}; }

  void require_object() const {
    if (!value.is_object()) io::fail_json_type(file, field.empty() ? "the top-level value" : field, "an object", value);
  }
  void require_array() const {
    if (!value.is_array()) io::fail_json_type(file, field, "an array", value);
  }
  std::string const& as_string() const { return io::json_as_string(value, file, field); }
  bool as_bool() const { return io::json_as_bool(value, file, field); }
  std::int64_t as_int() const { return io::json_as_int64(value, file, field); }
  double as_number() const { return io::json_as_double(value, file, field); }

  std::string get_string(std::string_view key, std::string_view fallback) const {
    io::Json const* v = find(key);
    return v == nullptr ? std::string(fallback) : child(*v, key).as_string();
  }
  bool get_bool(std::string_view key, bool fallback) const {
    io::Json const* v = find(key);
    return v == nullptr ? fallback : child(*v, key).as_bool();
  }
  // The object's "type" (every component of a tokenizer.json names its kind there).
  std::string const& type() const { return at("type").as_string(); }
};

// What flashdeberta does not implement: `field` "value" is not supported; supported: ...
[[noreturn]] inline void refuse_json_value(std::string const& file, std::string const& field, std::string_view value,
                                           std::string_view supported) {
  ::flashdeberta::detail::throw_error<FileError>([&](std::ostringstream& os) {
    os << file << ": " << field << " \"" << value << "\" is not supported; supported: " << supported;
  });
}

}  // namespace flashdeberta::tokenizer::detail

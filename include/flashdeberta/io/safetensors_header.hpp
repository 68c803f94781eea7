// The JSON header of a safetensors file, read straight into typed entries: a SAX parse that follows
// the header's schema ({name: {dtype, shape, data_offsets}, "__metadata__": {key: string} or null}),
// so a value of the wrong type is refused where it appears, as the typed serde parse of the Rust
// reference refuses it, and no JSON tree is ever built. (A tree of a hostile 100 MB header of empty
// arrays takes about 2.5 GB and 10 s to build before the first type check sees it.) The memory kept
// is the entries themselves: at most about 8 bytes per header byte, for a shape of many dimensions.
//
// Only structure and JSON types are checked here; what the values mean (dtype names, sizes against
// offsets, the data layout) is checked by SafetensorsFile, which has the file's sizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/io/json.hpp"

namespace flashdeberta::detail {

struct SafetensorsHeaderEntry {
  std::string name;
  std::string dtype;
  std::vector<std::int64_t> shape;  // each >= 0
  std::int64_t begin = 0, end = 0;  // data_offsets, each >= 0
};

struct SafetensorsHeader {
  std::vector<SafetensorsHeaderEntry> tensors;  // in header order; names may repeat (the caller checks)
  std::map<std::string, std::string> metadata;
};

// nlohmann's SAX interface, one callback per JSON event, as a state machine over the schema's levels.
class SafetensorsHeaderSax {
 public:
  using Json = io::Json;
  using number_integer_t = Json::number_integer_t;
  using number_unsigned_t = Json::number_unsigned_t;
  using number_float_t = Json::number_float_t;
  using string_t = Json::string_t;
  using binary_t = Json::binary_t;

  explicit SafetensorsHeaderSax(std::string const& source) : source_(source) {}
  SafetensorsHeader take() { return std::move(header_); }

  bool null() { return scalar(Json(nullptr)); }
  bool boolean(bool v) { return scalar(Json(v)); }
  // Sizes take the short path (a header may hold millions); anything else goes by scalar(), which
  // knows every message.
  bool number_integer(number_integer_t v) { return (v >= 0 && store_size(v)) || scalar(Json(v)); }
  bool number_unsigned(number_unsigned_t v) {
    return (v <= static_cast<number_unsigned_t>(std::numeric_limits<std::int64_t>::max()) &&
            store_size(static_cast<std::int64_t>(v))) ||
           scalar(Json(v));
  }
  bool number_float(number_float_t v, string_t const&) { return scalar(Json(v)); }
  bool string(string_t& v) { return scalar(Json(std::move(v))); }
  bool binary(binary_t&) { return scalar(Json::binary({})); }  // JSON text never produces one

  bool start_object(std::size_t) {
    switch (at_) {
      case At::kStart:
        at_ = At::kTop;
        return true;
      case At::kTopValue:
        if (key_ == "__metadata__") {
          at_ = At::kMetadata;
        } else {
          header_.tensors.push_back({key_, {}, {}, 0, 0});
          seen_ = 0;
          at_ = At::kEntry;
        }
        return true;
      default:
        return wrong_type("object");
    }
  }
  bool end_object() {
    if (at_ == At::kMetadata) {
      at_ = At::kTop;
    } else if (at_ == At::kEntry) {
      for (int k = 0; k < 3; ++k) {
        FLASHDEBERTA_REQUIRE(seen_ & (1u << k), source_ << ": " << tensor() << " is missing '" << kKeys[k] << "'");
      }
      at_ = At::kTop;
    } else {
      at_ = At::kDone;  // the top-level object; anything after it is nlohmann's to refuse
    }
    return true;
  }
  bool start_array(std::size_t) {
    if (at_ == At::kEntryValue && key_ == "shape") {
      at_ = At::kShape;
    } else if (at_ == At::kEntryValue && key_ == "data_offsets") {
      at_ = At::kOffsets;
      offsets_ = 0;
    } else {
      return wrong_type("array");
    }
    return true;
  }
  bool end_array() {
    if (at_ == At::kOffsets && offsets_ != 2) {
      fail_offsets("an array of " + std::to_string(offsets_) + (offsets_ == 1 ? " integer" : " integers"));
    }
    at_ = At::kEntry;
    return true;
  }

  bool key(string_t& k) {
    if (at_ == At::kTop) {
      if (k == "__metadata__") {
        FLASHDEBERTA_REQUIRE(!metadata_seen_, source_ << ": safetensors header has duplicate key '__metadata__'");
        metadata_seen_ = true;
      }
      key_ = k;
      at_ = At::kTopValue;
    } else if (at_ == At::kMetadata) {
      FLASHDEBERTA_REQUIRE(header_.metadata.emplace(k, std::string()).second,
                           source_ << ": safetensors header has duplicate key '" << k << "'");
      key_ = k;
      at_ = At::kMetadataValue;
    } else {  // kEntry: the only other state nlohmann reports keys in
      int index = 0;
      while (index < 3 && k != kKeys[index]) ++index;
      FLASHDEBERTA_REQUIRE(index < 3, source_ << ": " << tensor() << " has unexpected key '" << k
                                              << "' (expected exactly dtype, shape, data_offsets)");
      FLASHDEBERTA_REQUIRE(!(seen_ & (1u << index)), source_ << ": safetensors header has duplicate key '" << k << "'");
      seen_ |= 1u << index;
      key_ = k;
      at_ = At::kEntryValue;
    }
    return true;
  }

  bool parse_error(std::size_t, std::string const&, nlohmann::detail::exception const& e) {
    FLASHDEBERTA_FAIL(source_ << ": safetensors header is not valid JSON (" << e.what() << ")");
  }

 private:
  enum class At { kStart, kTop, kTopValue, kMetadata, kMetadataValue, kEntry, kEntryValue, kShape, kOffsets, kDone };
  static constexpr char const* kKeys[3] = {"dtype", "shape", "data_offsets"};

  std::string tensor() const { return "tensor '" + header_.tensors.back().name + "'"; }

  // Stores a non-negative size where the schema wants one (a dimension or an offset); false elsewhere.
  bool store_size(std::int64_t v) {
    if (at_ == At::kShape) {
      header_.tensors.back().shape.push_back(v);
      return true;
    }
    if (at_ == At::kOffsets && offsets_ < 2) {
      auto& entry = header_.tensors.back();
      (offsets_ == 0 ? entry.begin : entry.end) = v;
      ++offsets_;
      return true;
    }
    return false;
  }

  // A scalar `value` where the state says what is allowed; containers arrive as wrong_type.
  bool scalar(Json const& value) {
    switch (at_) {
      case At::kTopValue:
        if (key_ == "__metadata__" && value.is_null()) {
          at_ = At::kTop;
          return true;
        }
        return wrong_type(value);
      case At::kMetadataValue:
        header_.metadata[key_] = io::json_as_string(value, source_, "__metadata__ value of '" + key_ + "'");
        at_ = At::kMetadata;
        return true;
      case At::kEntryValue:
        if (key_ != "dtype") return wrong_type(value);
        header_.tensors.back().dtype = io::json_as_string(value, source_, "dtype of " + tensor());
        at_ = At::kEntry;
        return true;
      case At::kShape: {
        auto& shape = header_.tensors.back().shape;
        shape.push_back(non_negative(value, "shape[" + std::to_string(shape.size()) + "] of " + tensor()));
        return true;
      }
      case At::kOffsets: {
        auto& entry = header_.tensors.back();
        if (offsets_ == 2) fail_offsets("an array of more than two");
        std::string const what = "data_offsets[" + std::to_string(offsets_) + "] of " + tensor();
        (offsets_ == 0 ? entry.begin : entry.end) = non_negative(value, what);
        ++offsets_;
        return true;
      }
      default:
        return wrong_type(value);
    }
  }

  std::int64_t non_negative(Json const& value, std::string const& what) const {
    std::int64_t const v = io::json_as_int64(value, source_, what);
    FLASHDEBERTA_REQUIRE(v >= 0, source_ << ": " << what << " is " << v << "; it must be non-negative");
    return v;
  }

  [[noreturn]] void fail_offsets(std::string const& found) const {
    FLASHDEBERTA_FAIL(source_ << ": data_offsets of " << tensor()
                              << " must be an array of exactly two integers [begin, end], found " << found);
  }

  // A value (a scalar, or the container named by `found`) the schema has no place for here.
  template <class Found>
  bool wrong_type(Found const& found) {
    auto const describe = [&] {
      if constexpr (std::is_same_v<Found, Json>) {
        return io::json_describe(found);
      } else {
        return std::string(found);
      }
    };
    switch (at_) {
      case At::kTopValue:
        if (key_ == "__metadata__") {
          FLASHDEBERTA_FAIL(source_ << ": __metadata__ must be an object of strings (or null), found " << describe());
        }
        FLASHDEBERTA_FAIL(source_ << ": tensor '" << key_
                                  << "' must be an object with dtype, shape, data_offsets, found " << describe());
      case At::kMetadataValue:
        FLASHDEBERTA_FAIL(source_ << ": __metadata__ value of '" << key_ << "' must be a string, found " << describe());
      case At::kEntryValue:
        if (key_ == "dtype")
          FLASHDEBERTA_FAIL(source_ << ": dtype of " << tensor() << " must be a string, found " << describe());
        if (key_ == "shape")
          FLASHDEBERTA_FAIL(source_ << ": shape of " << tensor() << " must be an array of integers, found "
                                    << describe());
        fail_offsets(describe());
      case At::kShape:
        FLASHDEBERTA_FAIL(source_ << ": shape[" << header_.tensors.back().shape.size() << "] of " << tensor()
                                  << " must be an integer, found " << describe());
      case At::kOffsets:
        FLASHDEBERTA_FAIL(source_ << ": data_offsets[" << offsets_ << "] of " << tensor()
                                  << " must be an integer, found " << describe());
      default:  // kStart, kDone: the caller checked the first byte, and nlohmann refuses a second value
        FLASHDEBERTA_FAIL(source_ << ": safetensors header must be one JSON object, found " << describe());
    }
  }

  std::string const& source_;
  SafetensorsHeader header_;
  At at_ = At::kStart;
  std::string key_;    // the key whose value comes next
  unsigned seen_ = 0;  // bit k: kKeys[k] was seen in the current entry
  int offsets_ = 0;    // data_offsets values read so far in the current entry
  bool metadata_seen_ = false;
};

// Parses the header's text, whose first byte the caller has checked is '{'.
inline SafetensorsHeader parse_safetensors_header(std::string_view text, std::string const& source) {
  io::check_json_text(text, source, "safetensors header");
  SafetensorsHeaderSax sax(source);
  io::Json::sax_parse(text.begin(), text.end(), &sax, io::Json::input_format_t::json, /*strict=*/true,
                      /*ignore_comments=*/false);
  return sax.take();
}

}  // namespace flashdeberta::detail

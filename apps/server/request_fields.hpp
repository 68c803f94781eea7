// The pieces every request parser shares (requests.cpp for the task routes, tei_requests.cpp for TEI's other
// routes): the body read as a JSON object, its fields read by name with TEI's rules, and the refusals that
// name a field and what was found. Unknown fields are ignored, as TEI's serde structs ignore them (none of
// them is deny_unknown_fields); a field holding null counts as absent (TEI's optional fields are nullable).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/io/json.hpp"
#include "flashdeberta/tokenizer/encoding.hpp"
#include "server/api_error.hpp"
#include "server/requests.hpp"

namespace flashdeberta::cli::server::fields {

using io::Json;

inline std::string describe(Json const& value) { return io::json_describe(value, 60); }

// The body as a JSON object. Malformed JSON, invalid UTF-8, a NUL byte, nesting beyond 64 levels and
// duplicate keys are refused by the library's strict reader (the same one config.json goes through).
inline Json parse_object(std::string_view body, std::string_view route) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    fail_malformed("the request body is empty; " + std::string(route) +
                   " takes a JSON object such as {\"inputs\": \"some text\"}");
  }
  Json root;
  try {
    root = io::parse_json(body, route, "request body");
  } catch (Error const& e) {
    fail_malformed(e.what());
  }
  if (!root.is_object()) fail_malformed("the request body must be a JSON object, found " + describe(root));
  return root;
}

// An integer of at least `min`. The reader keeps a non-negative integer as unsigned (up to 2^64 - 1), so it is
// read as one: read as int64, 2^63 and above would wrap to negative and be refused as below `min`.
inline std::size_t count_value(Json const& value, std::string const& what, std::size_t min) {
  bool const valid = value.is_number_unsigned()  ? value.get<std::uint64_t>() >= min
                     : value.is_number_integer() ? value.get<std::int64_t>() >= static_cast<std::int64_t>(min)
                                                 : false;
  if (!valid)
    fail_validation(what + " must be an integer of at least " + std::to_string(min) + ", found " + describe(value));
  return value.is_number_unsigned() ? static_cast<std::size_t>(value.get<std::uint64_t>())
                                    : static_cast<std::size_t>(value.get<std::int64_t>());
}

// The fields of one JSON object, read by name; `accepted` lists them for the refusal of a missing one.
class Fields {
 public:
  Fields(Json const& object, std::string prefix, std::string accepted)
      : object_(object), prefix_(std::move(prefix)), accepted_(std::move(accepted)) {}

  std::string name(std::string_view key) const { return prefix_ + std::string(key); }

  Json const* take(std::string_view key) const {
    auto const it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }

  Json const& require(std::string_view key) const {
    Json const* value = take(key);
    if (value == nullptr) fail_validation("missing field '" + name(key) + "' (the request takes " + accepted_ + ")");
    return *value;
  }

  bool boolean(std::string_view key, bool fallback) const {
    Json const* value = take(key);
    if (value == nullptr) return fallback;
    if (!value->is_boolean()) fail_validation(name(key) + " must be true or false, found " + describe(*value));
    return value->get<bool>();
  }

  std::string string(Json const& value, std::string const& what) const {
    if (!value.is_string()) fail_validation(what + " must be a string, found " + describe(value));
    return value.get<std::string>();
  }

  std::optional<std::size_t> count(std::string_view key, std::size_t min) const {
    Json const* value = take(key);
    if (value == nullptr) return std::nullopt;
    return count_value(*value, name(key), min);
  }

  // A nested object ("parameters"), or nullptr.
  Json const* object(std::string_view key) const {
    Json const* value = take(key);
    if (value != nullptr && !value->is_object())
      fail_validation(name(key) + " must be a JSON object, found " + describe(*value));
    return value;
  }

 private:
  Json const& object_;
  std::string prefix_;
  std::string accepted_;
};

inline void check_batch_size(std::size_t size, std::string const& what, RequestLimits const& limits) {
  if (size > limits.max_client_batch_size) {
    throw ApiError(kPayloadTooLarge, ErrorType::kValidation,
                   what + " holds " + std::to_string(size) + " entries, more than the " +
                       std::to_string(limits.max_client_batch_size) +
                       " a request may hold (--max-client-batch-size); split it into several requests");
  }
}

// "text" or ["text", ...]: the texts, and whether they came as a list.
inline std::vector<std::string> text_list(Fields const& fields, Json const& value, std::string const& what,
                                          RequestLimits const& limits, bool& batch) {
  batch = value.is_array();
  if (!batch) return {fields.string(value, what)};
  if (value.empty()) fail_empty(what + " is an empty list; send at least one text");
  check_batch_size(value.size(), what, limits);
  std::vector<std::string> texts;
  for (std::size_t i = 0; i < value.size(); ++i)
    texts.push_back(fields.string(value[i], what + "[" + std::to_string(i) + "]"));
  return texts;
}

// TEI's truncation_direction: "Right" (the default, HF's) or "Left", either also in lower case.
inline tokenizer::TruncationSide truncation_side(Fields const& fields, std::string_view key = "truncation_direction") {
  Json const* value = fields.take(key);
  if (value == nullptr) return tokenizer::TruncationSide::kRight;
  if (value->is_string()) {
    std::string const& side = value->get_ref<std::string const&>();
    if (side == "Right" || side == "right") return tokenizer::TruncationSide::kRight;
    if (side == "Left" || side == "left") return tokenizer::TruncationSide::kLeft;
  }
  fail_validation(fields.name(key) + " must be \"Left\" or \"Right\", found " + describe(*value));
}

// TEI's prompt_name: sentence-transformers prompts, which DeBERTa checkpoints do not define.
inline void refuse_prompt_name(Fields const& fields) {
  if (Json const* value = fields.take("prompt_name"))
    fail_validation("prompt_name " + describe(*value) + " is not served: the checkpoint defines no prompts");
}

// The option `key` from the top level or from "parameters" (HF's Inference API), not both.
inline Json const* option(Fields const& top, Fields const* parameters, std::string_view key) {
  Json const* direct = top.take(key);
  Json const* nested = parameters != nullptr ? parameters->take(key) : nullptr;
  if (direct != nullptr && nested != nullptr)
    fail_validation(std::string(key) + " is given both at the top level and in parameters; give it once");
  return direct != nullptr ? direct : nested;
}

}  // namespace flashdeberta::cli::server::fields

#include "input_json.hpp"

#include <algorithm>
#include <optional>
#include <string_view>

#include "flashdeberta/io/json.hpp"
#include "flashdeberta/io/mapped_file.hpp"
#include "flashdeberta/io/safetensors.hpp"

namespace flashdeberta::cli {

namespace {

using runtime::element_name;
using runtime::kIds;
using runtime::kMask;
using runtime::kTypes;

// The shape a nested list claims through its first elements; the walk below holds every row to it.
std::vector<std::int64_t> leading_shape(io::Json const& value) {
  std::vector<std::int64_t> shape;
  io::Json const* v = &value;
  while (v->is_array()) {
    shape.push_back(static_cast<std::int64_t>(v->size()));
    if (v->empty()) break;
    v = &(*v)[0];
  }
  return shape;
}

// "input_ids[1] has 3 entries but input_ids[0] has 5; ...": a list that disagrees with the shape.
[[noreturn]] void fail_ragged(std::string const& source, std::string const& name, std::size_t size,
                              std::string_view field, std::size_t depth, std::int64_t expected) {
  std::string first(field);  // the element at the same depth whose length set the shape
  for (std::size_t d = 0; d < depth; ++d) first += "[0]";
  FLASHDEBERTA_FAIL(source << ": " << name << " has " << size << " entries but " << first << " has " << expected
                           << "; rows must have equal length (pad them and set attention_mask 0 on the padding)");
}

// Holds every list of `value` to `shape` without copying anything: the shape is checked whole before
// read_field reserves shape's product, so a file whose first row is long and the others short cannot make it
// reserve rows x that length.
void check_shape(io::Json const& value, std::vector<std::int64_t> const& shape, std::size_t depth,
                 std::string_view field, std::string const& name, std::string const& source) {
  if (depth == shape.size()) return;  // a leaf: collect checks its type
  if (!value.is_array()) io::fail_json_type(source, name, "a list", value);
  if (static_cast<std::int64_t>(value.size()) != shape[depth])
    fail_ragged(source, name, value.size(), field, depth, shape[depth]);
  if (depth + 1 == shape.size()) return;
  for (std::size_t i = 0; i < value.size(); ++i) {
    io::Json const& item = value[i];
    // The element's name is built only when a message needs it.
    if (item.is_array() && static_cast<std::int64_t>(item.size()) == shape[depth + 1] && depth + 2 == shape.size())
      continue;
    check_shape(item, shape, depth + 1, field, name + "[" + std::to_string(i) + "]", source);
  }
}

// The values of a list check_shape accepted, row-major.
void collect(io::Json const& value, std::vector<std::int64_t> const& shape, std::size_t depth, std::string const& name,
             std::string const& source, std::vector<std::int64_t>& out) {
  if (depth == shape.size()) {
    out.push_back(io::json_as_int64(value, source, name));
    return;
  }
  bool const leaves = depth + 1 == shape.size();
  for (std::size_t i = 0; i < value.size(); ++i) {
    io::Json const& item = value[i];
    // Fast path for the common case; the element's name is built only when a message needs it.
    if (leaves && item.is_number_integer() &&
        (!item.is_number_unsigned() || item.get<std::uint64_t>() <= static_cast<std::uint64_t>(INT64_MAX))) {
      out.push_back(item.get<std::int64_t>());
      continue;
    }
    collect(item, shape, depth + 1, name + "[" + std::to_string(i) + "]", source, out);
  }
}

// One field as (shape, values); `reference` is input_ids' shape, which the other fields must match. input_ids
// (no reference) is held to `max_tokens` positions before its values are copied.
std::vector<std::int64_t> read_field(io::Json const& value, std::string_view field, std::string const& source,
                                     std::vector<std::int64_t>& shape, std::vector<std::int64_t> const* reference,
                                     std::int64_t max_tokens) {
  shape = leading_shape(value);
  if (!value.is_array()) io::fail_json_type(source, "key '" + std::string(field) + "'", "a nested list [B][L]", value);
  FLASHDEBERTA_REQUIRE(!value.empty(), source << ": key '" << field << "' is an empty list");
  FLASHDEBERTA_REQUIRE(shape.size() == 2 || shape.size() == 3,
                       source << ": key '" << field << "' has rank " << shape.size()
                              << "; it must be a nested list [B][L] (or [B][C][L] for multiple choice)"
                              << (shape.size() == 1 ? ", e.g. [[1, 2, 3]] for one sequence" : ""));
  FLASHDEBERTA_REQUIRE(shape.back() > 0, source << ": key '" << field << "' has rows of length 0");
  if (reference != nullptr && shape != *reference) {
    FLASHDEBERTA_FAIL(source << ": " << field << " has shape " << detail::format_shape(shape) << " but " << kIds
                             << " has shape " << detail::format_shape(*reference));
  }
  check_shape(value, shape, 0, field, std::string(field), source);
  // Every entry of the shape counts an array the file holds, so the product cannot overflow in practice;
  // checked anyway, and held to --max-tokens before anything is reserved.
  std::optional<std::int64_t> const numel = detail::checked_numel(shape);
  FLASHDEBERTA_REQUIRE(numel.has_value(), source << ": " << field << " has shape " << detail::format_shape(shape)
                                                 << ", whose size overflows int64");
  if (reference == nullptr)
    require_max_tokens(*numel, max_tokens, source + ": " + std::string(field) + " " + detail::format_shape(shape));
  std::vector<std::int64_t> values;
  values.reserve(static_cast<std::size_t>(*numel));
  collect(value, shape, 0, std::string(field), source, values);
  return values;
}

}  // namespace

std::int64_t max_input_bytes(std::int64_t max_tokens) {
  return kMaxInputFields * kMaxBytesPerValue * max_tokens + kInputSlackBytes;
}

TokenInput read_token_input(std::filesystem::path const& path, std::int64_t max_tokens) {
  TokenInput input;
  input.source = path.string();
  std::string const& source = input.source;
  io::Json root;
  {
    // The mapping is released once parsed; only the integer fields are kept.
    io::MappedFile const file = io::MappedFile::open(path, "input");
    // The parsed document takes several times the text: a file no input of --max-tokens tokens needs is
    // refused before it is parsed.
    std::int64_t const limit = max_input_bytes(max_tokens);
    FLASHDEBERTA_REQUIRE(static_cast<std::int64_t>(file.size()) <= limit,
                         source << ": the file holds " << file.size() << " bytes, more than the " << limit
                                << " an input of --max-tokens " << max_tokens << " tokens can take (" << kMaxInputFields
                                << " fields of at most " << kMaxBytesPerValue << " bytes per token, plus "
                                << kInputSlackBytes << "); raise --max-tokens to read it");
    std::string_view const text(reinterpret_cast<char const*>(file.bytes().data()), file.size());
    root = io::parse_json(text, source, "input");
  }
  if (!root.is_object()) io::fail_json_type(source, "the input", "an object with key 'input_ids'", root);
  for (auto const& item : root.items()) {
    std::string const& key = item.key();
    // A misspelt attention_mask would otherwise be ignored and silently change the result.
    FLASHDEBERTA_REQUIRE(
        key == kIds || key == kMask || key == kTypes,
        source << ": unknown key '" << key << "' (accepted: input_ids, attention_mask, token_type_ids)");
  }
  FLASHDEBERTA_REQUIRE(root.contains(kIds), source << ": key 'input_ids' is missing");

  input.ids = read_field(root[kIds], kIds, source, input.shape, nullptr, max_tokens);
  std::vector<std::int64_t> shape;
  if (root.contains(kMask)) input.mask = read_field(root[kMask], kMask, source, shape, &input.shape, max_tokens);
  if (root.contains(kTypes)) input.types = read_field(root[kTypes], kTypes, source, shape, &input.shape, max_tokens);

  // Cu_seqlens and positions are int32 in Batch.
  FLASHDEBERTA_REQUIRE(static_cast<std::int64_t>(input.ids.size()) <= INT32_MAX,
                       source << ": input_ids has " << input.ids.size() << " values, more than one batch can hold");
  for (std::size_t i = 0; i < input.ids.size(); ++i) {
    FLASHDEBERTA_REQUIRE(input.ids[i] >= 0, source << ": " << element_name(kIds, input.shape, i) << " is "
                                                   << input.ids[i] << "; token ids must be non-negative");
  }
  for (std::size_t i = 0; i < input.mask.size(); ++i) {
    FLASHDEBERTA_REQUIRE(input.mask[i] == 0 || input.mask[i] == 1, source << ": " << element_name(kMask, input.shape, i)
                                                                          << " is " << input.mask[i]
                                                                          << "; attention_mask values must be 0 or 1");
  }
  for (std::size_t i = 0; i < input.types.size(); ++i) {
    FLASHDEBERTA_REQUIRE(input.types[i] >= 0, source << ": " << element_name(kTypes, input.shape, i) << " is "
                                                     << input.types[i] << "; token type ids must be non-negative");
  }
  return input;
}

}  // namespace flashdeberta::cli

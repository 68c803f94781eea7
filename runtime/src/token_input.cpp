#include "flashdeberta/runtime/token_input.hpp"

#include <algorithm>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/heads/head_kind.hpp"

namespace flashdeberta::runtime {

// "input_ids[1][0][5]" for the flat index of a value in a field of the given shape.
std::string element_name(std::string_view field, std::vector<std::int64_t> const& shape, std::int64_t flat) {
  std::vector<std::int64_t> index(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  std::string out(field);
  for (std::int64_t i : index) out += "[" + std::to_string(i) + "]";
  return out;
}

std::int64_t TokenInput::rows() const { return shape.size() == 3 ? shape[0] * shape[1] : shape[0]; }

bool TokenInput::dense() const {
  return std::all_of(mask.begin(), mask.end(), [](std::int64_t m) { return m == 1; });
}

void check_token_values(TokenInput const& input, std::int64_t max_tokens, TokenLimitNames const& names) {
  FLASHDEBERTA_REQUIRE(input.shape.size() == 2 || input.shape.size() == 3,
                       input.source << ": input_ids has " << input.shape.size()
                                    << " dimensions; [B, L], or [B, C, L] for multiple choice, is expected");
  std::int64_t positions = 1;
  for (std::int64_t d : input.shape) {
    FLASHDEBERTA_REQUIRE(d > 0, input.source << ": input_ids has an empty dimension (shape entries must be >= 1)");
    FLASHDEBERTA_REQUIRE(positions <= max_tokens / d, input.source << ": input_ids holds more than " << names.max_tokens
                                                                   << " " << max_tokens << " positions");
    positions *= d;
  }
  auto const check_size = [&](std::vector<std::int64_t> const& field, std::string_view name) {
    FLASHDEBERTA_REQUIRE(field.empty() || static_cast<std::int64_t>(field.size()) == positions,
                         input.source << ": " << name << " holds " << field.size() << " values, input_ids " << positions
                                      << "; they must have the same shape");
  };
  check_size(input.ids, kIds);
  FLASHDEBERTA_REQUIRE(!input.ids.empty(), input.source << ": input_ids is empty");
  check_size(input.mask, kMask);
  check_size(input.types, kTypes);
  for (std::size_t i = 0; i < input.ids.size(); ++i)
    FLASHDEBERTA_REQUIRE(input.ids[i] >= 0, input.source << ": " << element_name(kIds, input.shape, i) << " = "
                                                         << input.ids[i] << " is negative");
  for (std::size_t i = 0; i < input.mask.size(); ++i)
    FLASHDEBERTA_REQUIRE(input.mask[i] == 0 || input.mask[i] == 1,
                         input.source << ": " << element_name(kMask, input.shape, i) << " = " << input.mask[i]
                                      << "; attention_mask holds 0 and 1 only");
  for (std::size_t i = 0; i < input.types.size(); ++i)
    FLASHDEBERTA_REQUIRE(input.types[i] >= 0, input.source << ": " << element_name(kTypes, input.shape, i) << " = "
                                                           << input.types[i] << " is negative");
}

void check_against_config(TokenInput const& input, ModelConfig const& config, std::string const& config_source) {
  for (std::size_t i = 0; i < input.ids.size(); ++i) {
    FLASHDEBERTA_REQUIRE(input.ids[i] < config.vocab_size,
                         input.source << ": " << element_name(kIds, input.shape, i) << " = " << input.ids[i]
                                      << " is outside the vocabulary (vocab_size " << config.vocab_size << " in "
                                      << config_source << ")");
  }
  // HF adds token type embeddings only when type_vocab_size > 0 and ignores token_type_ids otherwise.
  if (config.type_vocab_size == 0) return;
  for (std::size_t i = 0; i < input.types.size(); ++i) {
    FLASHDEBERTA_REQUIRE(input.types[i] < config.type_vocab_size,
                         input.source << ": " << element_name(kTypes, input.shape, i) << " = " << input.types[i]
                                      << " is outside type_vocab_size " << config.type_vocab_size << " ("
                                      << config_source << ")");
  }
}

void check_against_head(TokenInput const& input, HeadKind head) {
  HeadFacts const& facts = head_facts(head);
  std::string const name(facts.name);
  if (facts.layout == HeadInputLayout::kChoices) {
    FLASHDEBERTA_REQUIRE(input.shape.size() == 3, input.source << ": the " << name
                                                               << " head needs input_ids as [B][C][L] (C "
                                                               << "choices per example); this input is [B][L]");
  } else if (facts.layout == HeadInputLayout::kRows) {
    FLASHDEBERTA_REQUIRE(input.shape.size() == 2, input.source
                                                      << ": the " << name << " head needs input_ids as [B][L]; "
                                                      << "this input is [B][C][L], which only mc and base take");
  }
  if (!facts.pools_first_token) return;
  std::int64_t const length = input.length();
  for (std::int64_t row = 0; row < input.rows() && !input.mask.empty(); ++row) {
    FLASHDEBERTA_REQUIRE(input.mask[row * length] == 1,
                         input.source << ": " << element_name(kMask, input.shape, row * length) << " is 0, but the "
                                      << name << " head pools position 0 of every row (HF's "
                                      << "hidden_states[:, 0]); pad on the right");
  }
}

Batch to_batch(TokenInput const& input, ModelConfig const& config) {
  std::span<std::int64_t const> types;
  if (config.type_vocab_size > 0) types = input.types;  // HF ignores them otherwise; so does the batch
  return Batch::from_padded(input.rows(), input.length(), input.ids, input.mask, types);
}

}  // namespace flashdeberta::runtime

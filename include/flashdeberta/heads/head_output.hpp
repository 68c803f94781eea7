// What a head produces: named tensors with HF's field names ("logits", "start_logits", "end_logits"),
// one row per packed token or per sequence, and their padded form ([B, L, ...], [B, ...], [B, C]).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flashdeberta/core/batch.hpp"
#include "flashdeberta/core/error.hpp"

namespace flashdeberta {

enum class HeadRows {
  kTokens,     // row r belongs to packed token tokens[r]
  kSequences,  // row r belongs to sequence r of the batch
};

// One head output, (row_count, width) row-major, in `Values` (a policy buffer or a host vector).
template <class Values>
struct HeadTensor {
  std::string name;  // HF's output field
  HeadRows rows = HeadRows::kTokens;
  std::vector<std::int64_t> tokens;  // kTokens: the packed token index of each row; empty for kSequences
  std::int64_t row_count = 0;
  std::int64_t width = 1;
  bool squeeze = false;  // HF drops the trailing dimension of 1 (start/end logits, multiple-choice logits)
  Values values;
};

using HostHeadTensor = HeadTensor<std::vector<float>>;

// A head's outputs in host memory, float32.
struct HeadOutput {
  std::vector<HostHeadTensor> tensors;

  bool contains(std::string_view name) const {
    return std::any_of(tensors.begin(), tensors.end(), [&](auto const& t) { return t.name == name; });
  }

  HostHeadTensor const& operator[](std::string_view name) const {
    for (auto const& t : tensors) {
      if (t.name == name) return t;
    }
    std::string present;
    for (auto const& t : tensors) present += (present.empty() ? "" : ", ") + t.name;
    FLASHDEBERTA_FAIL("head output has no field '" << std::string(name) << "' (fields: " << present << ")");
  }
};

// A packed (T, H) state of the backbone as a head tensor named `name` ("hidden_states.3").
inline HostHeadTensor hidden_state_tensor(std::string name, std::vector<float> packed, std::int64_t hidden_size) {
  std::int64_t const tokens = hidden_size > 0 ? static_cast<std::int64_t>(packed.size()) / hidden_size : 0;
  HostHeadTensor t{std::move(name), HeadRows::kTokens, {}, tokens, hidden_size, false, std::move(packed)};
  t.tokens.resize(static_cast<std::size_t>(tokens));
  std::iota(t.tokens.begin(), t.tokens.end(), std::int64_t{0});
  return t;
}

// The backbone's packed (T, H) output as a head tensor named as HF names it.
inline HostHeadTensor last_hidden_state_tensor(std::vector<float> packed, std::int64_t hidden_size) {
  return hidden_state_tensor("last_hidden_state", std::move(packed), hidden_size);
}

// A tensor laid out as HF returns it, float32, row-major.
struct PaddedTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<float> values;
};

namespace detail {

inline std::int64_t product(std::vector<std::int64_t> const& dims, std::size_t first, std::size_t last) {
  return std::accumulate(dims.begin() + static_cast<std::ptrdiff_t>(first),
                         dims.begin() + static_cast<std::ptrdiff_t>(last), std::int64_t{1}, std::multiplies<>());
}

}  // namespace detail

// Lays `t` out as HF does for an input of shape `input_shape` ([B, L], or [B, C, L] for multiple choice,
// whose B * C rows are the batch's sequences in order): per-token outputs become [..., L, width] (or
// [..., L] when squeezed) with zeros at positions the batch does not hold (attention_mask 0, or tokens
// the head was not asked for); per-sequence outputs become [..., width] (or [...]). L is input_shape's
// last entry, which must cover every position of the batch.
inline PaddedTensor to_padded(HostHeadTensor t, Batch const& batch, std::vector<std::int64_t> const& input_shape) {
  FLASHDEBERTA_REQUIRE(input_shape.size() >= 2, "to_padded: the input shape needs at least [B, L]");
  std::int64_t const sequences = detail::product(input_shape, 0, input_shape.size() - 1);
  std::int64_t const length = input_shape.back();
  FLASHDEBERTA_REQUIRE(sequences == batch.batch_size(),
                       "to_padded: input shape holds " << sequences << " sequences, the batch " << batch.batch_size());
  FLASHDEBERTA_REQUIRE(
      static_cast<std::int64_t>(t.values.size()) == t.row_count * t.width,
      "to_padded: " << t.name << " holds " << t.values.size() << " values, not " << t.row_count << " x " << t.width);
  PaddedTensor out{t.name, {}, {}};
  if (t.rows == HeadRows::kSequences) {
    FLASHDEBERTA_REQUIRE(t.row_count == sequences, "to_padded: " << t.name << " has " << t.row_count << " rows for "
                                                                 << sequences << " sequences");
    out.shape.assign(input_shape.begin(), input_shape.end() - 1);
    if (!(t.squeeze && t.width == 1)) out.shape.push_back(t.width);
    out.values = std::move(t.values);
    return out;
  }
  FLASHDEBERTA_REQUIRE(batch.max_position() <= length,
                       "to_padded: the batch has position " << batch.max_position() - 1 << ", beyond L = " << length);
  out.shape = input_shape;
  if (!(t.squeeze && t.width == 1)) out.shape.push_back(t.width);
  // Every position held and in order (no mask zero, all tokens asked for): the packed rows are the padded array.
  bool in_order = t.row_count == sequences * length && batch.total_tokens() == t.row_count;
  for (std::int64_t r = 0; in_order && r < t.row_count; ++r)
    in_order = t.tokens[r] == r && batch.positions[r] == r % length;
  if (in_order) {
    out.values = std::move(t.values);
    return out;
  }
  out.values.assign(static_cast<std::size_t>(sequences * length * t.width), 0.0f);
  for (std::int64_t r = 0; r < t.row_count; ++r) {
    std::int64_t const token = t.tokens[r];
    FLASHDEBERTA_REQUIRE(token >= 0 && token < batch.total_tokens(), "to_padded: " << t.name << " row " << r
                                                                                   << " names token " << token << " of "
                                                                                   << batch.total_tokens());
    auto const next = std::upper_bound(batch.cu_seqlens.begin(), batch.cu_seqlens.end(), token);
    std::int64_t const sequence = (next - batch.cu_seqlens.begin()) - 1;
    std::int64_t const offset = (sequence * length + batch.positions[token]) * t.width;
    std::copy_n(t.values.begin() + r * t.width, t.width, out.values.begin() + offset);
  }
  return out;
}

}  // namespace flashdeberta

// Packed variable-length batches: the natural C++ input, and the form every policy computes on.
//
// A padded [B][L] input with an attention mask is packed by dropping masked tokens. Each kept token
// remembers its index in the padded row, so relative positions (i - j), absolute position ids and the
// conv layer's neighbours stay exactly as HF computes them, also for left padding and masks with holes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/core/model_config.hpp"

namespace flashdeberta {

struct Batch {
  std::vector<std::int32_t> input_ids;       // (T)
  std::vector<std::int32_t> token_type_ids;  // (T), or empty for all zeros
  std::vector<std::int32_t> positions;       // (T) index in the original row
  std::vector<std::int32_t> cu_seqlens{0};   // (B + 1)
  std::int64_t padded_length = 0;            // L of the padded input it came from (0: built from sequences)

  std::int64_t batch_size() const { return static_cast<std::int64_t>(cu_seqlens.size()) - 1; }
  std::int64_t total_tokens() const { return static_cast<std::int64_t>(input_ids.size()); }
  std::int64_t sequence_length(std::int64_t b) const { return cu_seqlens[b + 1] - cu_seqlens[b]; }

  std::int64_t max_seqlen() const {
    std::int64_t longest = 0;
    for (std::int64_t b = 0; b < batch_size(); ++b) longest = std::max(longest, sequence_length(b));
    return longest;
  }

  std::int64_t max_position() const {
    std::int32_t largest = -1;
    for (std::int32_t p : positions) largest = std::max(largest, p);
    return static_cast<std::int64_t>(largest) + 1;
  }

  bool contiguous_positions() const {
    for (std::int64_t b = 0; b < batch_size(); ++b)
      for (std::int64_t t = cu_seqlens[b] + 1; t < cu_seqlens[b + 1]; ++t)
        if (positions[t] != positions[t - 1] + 1) return false;
    return true;
  }

  // Appends one sequence; positions count from 0.
  void add_sequence(std::span<std::int32_t const> ids, std::span<std::int32_t const> token_types = {}) {
    FLASHDEBERTA_REQUIRE(token_types.empty() || token_types.size() == ids.size(),
                         "sequence " << batch_size() << " has " << ids.size() << " input ids but " << token_types.size()
                                     << " token type ids");
    // Sequences without token types get zeros, also when others of the batch have them.
    if (!token_types.empty() && token_type_ids.empty()) token_type_ids.assign(input_ids.size(), 0);
    input_ids.insert(input_ids.end(), ids.begin(), ids.end());
    if (!token_types.empty()) {
      token_type_ids.insert(token_type_ids.end(), token_types.begin(), token_types.end());
    } else if (!token_type_ids.empty()) {
      token_type_ids.resize(input_ids.size(), 0);
    }
    for (std::size_t t = 0; t < ids.size(); ++t) positions.push_back(static_cast<std::int32_t>(t));
    cu_seqlens.push_back(static_cast<std::int32_t>(input_ids.size()));
  }

  static Batch from_sequences(std::vector<std::vector<std::int32_t>> const& sequences) {
    Batch batch;
    for (auto const& s : sequences) batch.add_sequence(s);
    return batch;
  }

  // ids, mask and token_types are row-major (B, L); an empty mask means all ones, empty token_types zeros.
  static Batch from_padded(std::int64_t batch_size, std::int64_t length, std::span<std::int64_t const> ids,
                           std::span<std::int64_t const> mask = {}, std::span<std::int64_t const> token_types = {}) {
    FLASHDEBERTA_REQUIRE(batch_size >= 0 && length >= 0 && (length == 0 || batch_size <= INT64_MAX / length),
                         "padded input of " << batch_size << " x " << length << " tokens");
    std::size_t const expected = static_cast<std::size_t>(batch_size * length);
    FLASHDEBERTA_REQUIRE(ids.size() == expected,
                         "input_ids has " << ids.size() << " values, expected " << batch_size << " x " << length);
    FLASHDEBERTA_REQUIRE(mask.empty() || mask.size() == expected,
                         "attention_mask has " << mask.size() << " values, expected " << batch_size << " x " << length);
    FLASHDEBERTA_REQUIRE(
        token_types.empty() || token_types.size() == expected,
        "token_type_ids has " << token_types.size() << " values, expected " << batch_size << " x " << length);
    Batch batch;
    batch.padded_length = length;
    for (std::int64_t b = 0; b < batch_size; ++b) {
      for (std::int64_t t = 0; t < length; ++t) {
        std::size_t const i = static_cast<std::size_t>(b * length + t);
        std::int64_t const m = mask.empty() ? 1 : mask[i];
        FLASHDEBERTA_REQUIRE(m == 0 || m == 1,
                             "attention_mask[" << b << "][" << t << "] is " << m << "; masks are 0 or 1");
        if (m == 0) continue;
        FLASHDEBERTA_REQUIRE(ids[i] >= 0 && ids[i] <= INT32_MAX,
                             "input_ids[" << b << "][" << t << "] = " << ids[i] << " is not a valid token id");
        batch.input_ids.push_back(static_cast<std::int32_t>(ids[i]));
        if (!token_types.empty()) {
          FLASHDEBERTA_REQUIRE(
              token_types[i] >= 0 && token_types[i] <= INT32_MAX,
              "token_type_ids[" << b << "][" << t << "] = " << token_types[i] << " is not a valid token type id");
          batch.token_type_ids.push_back(static_cast<std::int32_t>(token_types[i]));
        }
        batch.positions.push_back(static_cast<std::int32_t>(t));
      }
      FLASHDEBERTA_REQUIRE(batch.input_ids.size() <= static_cast<std::size_t>(INT32_MAX),
                           "padded input keeps more than " << INT32_MAX << " tokens by row " << b
                                                           << ", more than the int32 offsets of one batch address");
      batch.cu_seqlens.push_back(static_cast<std::int32_t>(batch.input_ids.size()));
    }
    return batch;
  }

  // Checks everything a kernel reads, before any of it reaches one: the packed structure
  // (validate_structure) and every index against the sizes of the model's tables.
  void validate(ModelConfig const& config) const {
    validate_structure();
    for (std::size_t t = 0; t < input_ids.size(); ++t)
      FLASHDEBERTA_REQUIRE(input_ids[t] >= 0 && input_ids[t] < config.vocab_size,
                           "token id " << input_ids[t] << " at packed position " << t
                                       << " is outside the vocabulary of " << config.vocab_size);
    if (config.type_vocab_size > 0) {
      for (std::size_t t = 0; t < token_type_ids.size(); ++t)
        FLASHDEBERTA_REQUIRE(token_type_ids[t] >= 0 && token_type_ids[t] < config.type_vocab_size,
                             "token type id " << token_type_ids[t] << " at packed position " << t
                                              << " is outside type_vocab_size " << config.type_vocab_size);
    }
    if (config.position_biased_input)
      FLASHDEBERTA_REQUIRE(max_position() <= config.max_position_embeddings,
                           "sequence position " << max_position() - 1 << " needs more than the "
                                                << config.max_position_embeddings
                                                << " absolute position embeddings of this model");
  }

  // The invariants from_sequences and from_padded establish and the kernels rely on:
  //   - cu_seqlens starts at 0, never decreases and ends at input_ids.size(), which fits int32. Empty
  //     sequences are allowed: from_padded makes one from a row whose mask is all zeros, and every layer
  //     and head skips them (the pooling heads refuse them, naming the row).
  //   - positions has one entry per token, non-negative and strictly increasing within each sequence: the
  //     conv layer finds a token's neighbours by that order, the embedding reads position[positions[t]],
  //     and unpack_to_padded / to_padded scatter rows to them.
  //   - token_type_ids is empty or has one entry per token.
  //   - padded_length, when set, lies beyond every position (it is the L the rows came from).
  void validate_structure() const {
    FLASHDEBERTA_REQUIRE(!cu_seqlens.empty(), "batch cu_seqlens is empty; it holds B + 1 offsets starting at 0");
    FLASHDEBERTA_REQUIRE(cu_seqlens.front() == 0,
                         "batch cu_seqlens[0] is " << cu_seqlens.front() << "; packed offsets start at 0");
    FLASHDEBERTA_REQUIRE(input_ids.size() <= static_cast<std::size_t>(INT32_MAX),
                         "batch input_ids has " << input_ids.size() << " tokens, more than the int32 offsets of one "
                                                << "batch can address (" << INT32_MAX << ")");
    for (std::size_t b = 1; b < cu_seqlens.size(); ++b)
      FLASHDEBERTA_REQUIRE(cu_seqlens[b] >= cu_seqlens[b - 1],
                           "batch cu_seqlens[" << b << "] = " << cu_seqlens[b] << " is below cu_seqlens[" << b - 1
                                               << "] = " << cu_seqlens[b - 1] << "; offsets must not decrease");
    FLASHDEBERTA_REQUIRE(static_cast<std::size_t>(cu_seqlens.back()) == input_ids.size(),
                         "batch cu_seqlens[" << cu_seqlens.size() - 1 << "] = " << cu_seqlens.back()
                                             << " but input_ids has " << input_ids.size()
                                             << " tokens; the last offset is the token count");
    FLASHDEBERTA_REQUIRE(positions.size() == input_ids.size(), "batch positions has " << positions.size()
                                                                                      << " entries for "
                                                                                      << input_ids.size() << " tokens");
    FLASHDEBERTA_REQUIRE(token_type_ids.empty() || token_type_ids.size() == input_ids.size(),
                         "batch token_type_ids has " << token_type_ids.size() << " entries for " << input_ids.size()
                                                     << " tokens (give one per token, or none for all zeros)");
    FLASHDEBERTA_REQUIRE(padded_length >= 0, "batch padded_length is " << padded_length << "; it must be >= 0");
    for (std::int64_t b = 0; b < batch_size(); ++b) {
      for (std::int64_t t = cu_seqlens[b]; t < cu_seqlens[b + 1]; ++t) {
        FLASHDEBERTA_REQUIRE(positions[t] >= 0, "batch positions[" << t << "] = " << positions[t] << " (sequence " << b
                                                                   << ") is negative");
        FLASHDEBERTA_REQUIRE(t == cu_seqlens[b] || positions[t] > positions[t - 1],
                             "batch positions[" << t << "] = " << positions[t] << " does not exceed positions[" << t - 1
                                                << "] = " << positions[t - 1] << " in sequence " << b
                                                << "; positions increase strictly within a sequence");
        FLASHDEBERTA_REQUIRE(padded_length == 0 || positions[t] < padded_length,
                             "batch positions[" << t << "] = " << positions[t] << " (sequence " << b
                                                << ") lies beyond padded_length " << padded_length);
      }
    }
  }
};

}  // namespace flashdeberta

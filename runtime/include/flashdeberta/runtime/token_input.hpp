// Token inputs as HF's models take them: input_ids, attention_mask and token_type_ids as padded [B][L]
// (or [B][C][L] for multiple choice) rows, from the CLI's run files or Python's numpy arrays, checked
// against the model and the head and packed into a Batch.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "flashdeberta/core/batch.hpp"
#include "flashdeberta/core/model_config.hpp"
#include "flashdeberta/heads/head_kind.hpp"
#include "flashdeberta/runtime/options.hpp"

namespace flashdeberta::runtime {

inline constexpr std::string_view kIds = "input_ids";
inline constexpr std::string_view kMask = "attention_mask";
inline constexpr std::string_view kTypes = "token_type_ids";

// Row-major integer fields of one input (a run file, numpy arrays). A [B][C][L] input is kept as B*C rows of L tokens;
// `shape` remembers the original leading dimensions so the output can be given the same ones.
struct TokenInput {
  std::string source;               // the file name, for messages
  std::vector<std::int64_t> shape;  // [B, L] or [B, C, L]
  std::vector<std::int64_t> ids;    // (rows, L)
  std::vector<std::int64_t> mask;   // (rows, L), or empty: all ones
  std::vector<std::int64_t> types;  // (rows, L), or empty: all zeros

  std::int64_t rows() const;  // B, or B * C
  std::int64_t length() const { return shape.back(); }
  bool dense() const;  // no attention_mask zero anywhere: padded and packed layouts agree
};

// "input_ids[1][0][5]" for the flat index of a value in a field of the given shape.
std::string element_name(std::string_view field, std::vector<std::int64_t> const& shape, std::int64_t flat);

// Checks an input built in memory (Python's arrays) as the CLI's reader checks a file: rank 2 or 3,
// at most max_tokens positions (padding included: outputs are padded to them), non-negative ids, masks of
// 0 and 1, the same number of values in every field.
void check_token_values(TokenInput const& input, std::int64_t max_tokens, TokenLimitNames const& names = {});

// Checks the ids against the model: every input id (masked ones too, as HF looks them all up) below
// vocab_size, token types below type_vocab_size when the model has token type embeddings.
void check_against_config(TokenInput const& input, ModelConfig const& config, std::string const& config_source);

// Checks the input's layout against the head: [B][C][L] for multiple choice, [B][L] for the other heads
// (the backbone takes both), and for the pooling heads (seqcls, mc) attention_mask 1 at position 0 of
// every row, since HF pools that position.
void check_against_head(TokenInput const& input, HeadKind head);

// The packed batch of the input (masked tokens dropped); token types only when the model uses them.
Batch to_batch(TokenInput const& input, ModelConfig const& config);

}  // namespace flashdeberta::runtime

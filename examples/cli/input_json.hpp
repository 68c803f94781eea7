// The run command's input file: {"input_ids": [[...]], "attention_mask": [[...]], "token_type_ids": [[...]]},
// each a nested list [B][L], or [B][C][L] for multiple choice.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "args.hpp"
#include "flashdeberta/heads/head_kind.hpp"
#include "flashdeberta/core/batch.hpp"
#include "flashdeberta/core/model_config.hpp"

namespace flashdeberta::cli {

// Row-major integer fields of one input file. A [B][C][L] input is kept as B*C rows of L tokens; `shape`
// remembers the original leading dimensions so the output can be given the same ones.
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

// Bounds on what read_token_input reads for --max-tokens N: a file of at most
// kMaxInputFields x kMaxBytesPerValue x N + kInputSlackBytes bytes (an integer with its separator and any
// indentation takes far less than 64 bytes; the slack covers short inputs and the keys).
inline constexpr std::int64_t kMaxInputFields = 3;  // input_ids, attention_mask, token_type_ids
inline constexpr std::int64_t kMaxBytesPerValue = 64;
inline constexpr std::int64_t kInputSlackBytes = std::int64_t{1} << 20;
std::int64_t max_input_bytes(std::int64_t max_tokens);

// Reads and checks the file on its own: its size against max_tokens, JSON syntax, known keys, rectangular
// shapes of rank 2 or 3 that agree across fields, at most max_tokens positions ([B][L] or [B][C][L], padding
// included: outputs are padded to them), integer values, non-negative ids, masks of 0 and 1. Shapes and sizes
// are checked before any value is copied. Throws flashdeberta::Error.
TokenInput read_token_input(std::filesystem::path const& path, std::int64_t max_tokens = kDefaultMaxTokens);

// Checks the ids against the model: every input id (masked ones too, as HF looks them all up) below
// vocab_size, token types below type_vocab_size when the model has token type embeddings.
void check_against_config(TokenInput const& input, ModelConfig const& config, std::string const& config_source);

// Checks the input's layout against the head: [B][C][L] for multiple choice, [B][L] for the other heads
// (the backbone takes both), and for the pooling heads (seqcls, mc) attention_mask 1 at position 0 of
// every row, since HF pools that position.
void check_against_head(TokenInput const& input, HeadKind head);

// The packed batch of the input (masked tokens dropped); token types only when the model uses them.
Batch to_batch(TokenInput const& input, ModelConfig const& config);

}  // namespace flashdeberta::cli

// The run command's input file: {"input_ids": [[...]], "attention_mask": [[...]], "token_type_ids": [[...]]},
// each a nested list [B][L], or [B][C][L] for multiple choice.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "flashdeberta/heads/head_kind.hpp"
#include "flashdeberta/model/batch.hpp"
#include "flashdeberta/model/model_config.hpp"

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

// Reads and checks the file on its own: JSON syntax, known keys, rectangular shapes of rank 2 or 3 that
// agree across fields, integer values, non-negative ids, masks of 0 and 1. Throws flashdeberta::Error.
TokenInput read_token_input(std::filesystem::path const& path);

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

// The run command's input file: {"input_ids": [[...]], "attention_mask": [[...]], "token_type_ids": [[...]]},
// each a nested list [B][L], or [B][C][L] for multiple choice.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "args.hpp"
#include "flashdeberta/core/batch.hpp"
#include "flashdeberta/core/model_config.hpp"
#include "flashdeberta/heads/head_kind.hpp"
#include "flashdeberta/runtime/token_input.hpp"

namespace flashdeberta::cli {

using runtime::check_against_config;
using runtime::check_against_head;
using runtime::to_batch;
using runtime::TokenInput;

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

}  // namespace flashdeberta::cli

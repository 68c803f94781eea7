// The request bodies of text-embeddings-inference's embedding routes and its other routes beside the task
// routes (requests.hpp): /embed, /embed_all, /similarity, /v1/embeddings (OpenAI's body), /decode, and
// /text-classification (HF's Inference API body, which the @huggingface/inference client sends). Parsed
// and checked before any work, refusals naming the field as requests.hpp's do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flashdeberta/pipelines/text_classification.hpp"
#include "flashdeberta/tokenizer/encoding.hpp"
#include "server/requests.hpp"

namespace flashdeberta::cli::server {

// One input of TEI's `Input`: a text, or the token ids of one (TEI's InputType::Ids), taken as the sequence
// the model runs (no special token added; ids checked against the vocabulary when run).
struct EmbedInput {
  std::string text;
  std::optional<std::vector<std::int64_t>> ids;
};

// TEI's `Input` as /embed, /embed_all and /v1/embeddings read it: "text" | [id, ...] | ["text" or [id, ...],
// ...]. `batch`: given as a list of inputs.
struct EmbedInputs {
  std::vector<EmbedInput> inputs;
  bool batch = false;
};

// POST /embed {"inputs", "normalize", "truncate", "truncation_direction"}.
struct EmbedRequest {
  EmbedInputs inputs;
  bool normalize = true;  // TEI's default
  bool truncate = false;
  tokenizer::TruncationSide side = tokenizer::TruncationSide::kRight;
};

// POST /embed_all {"inputs", "truncate", "truncation_direction"}: every token's last hidden state.
struct EmbedAllRequest {
  EmbedInputs inputs;
  bool truncate = false;
  tokenizer::TruncationSide side = tokenizer::TruncationSide::kRight;
};

// POST /similarity {"inputs": {"source_sentence", "sentences"}, "parameters": {"truncate",
// "truncation_direction"}}: sentence-transformers' sentence-similarity, the cosine of each sentence's
// embedding with the source sentence's.
struct SimilarityRequest {
  std::string source_sentence;
  std::vector<std::string> sentences;
  bool truncate = false;
  tokenizer::TruncationSide side = tokenizer::TruncationSide::kRight;
};

// POST /v1/embeddings (and /embeddings) {"input", "model", "user", "encoding_format": "float" | "base64",
// "dimensions"}: OpenAI's embeddings body.
struct OpenAiEmbeddingsRequest {
  EmbedInputs inputs;
  bool base64 = false;
};

// POST /decode {"ids": [id, ...] | [[id, ...], ...], "skip_special_tokens"}: always a list of texts.
struct DecodeRequest {
  std::vector<std::vector<std::int64_t>> ids;
  bool skip_special_tokens = true;  // TEI's default
};

// POST /text-classification {"inputs": "text" | ["text", ...], "parameters": {"top_k", "function_to_apply"}}:
// HF's Inference API for text-classification, answered in its shape (a list of labels per input, even for
// one input).
struct TextClassificationRequest {
  std::vector<std::string> inputs;
  std::optional<std::size_t> top_k;
  std::optional<pipelines::ScoreFunction> function;  // "softmax", "sigmoid", "none"
};

EmbedRequest parse_embed_request(std::string_view body, RequestLimits const& limits);
EmbedAllRequest parse_embed_all_request(std::string_view body, RequestLimits const& limits);
SimilarityRequest parse_similarity_request(std::string_view body, RequestLimits const& limits);
OpenAiEmbeddingsRequest parse_openai_embeddings_request(std::string_view body, RequestLimits const& limits);
DecodeRequest parse_decode_request(std::string_view body, RequestLimits const& limits);
TextClassificationRequest parse_text_classification_request(std::string_view body, RequestLimits const& limits);

}  // namespace flashdeberta::cli::server

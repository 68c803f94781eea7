// The request bodies of the server's routes, parsed and checked before any work: text-embeddings-
// inference's shapes for /predict, /rerank and /tokenize (its other routes: tei_requests.hpp), HF's pipeline arguments
// for /zero-shot, /fill-mask and /ner, GLiNER's for /gliner. A body that is not what the route takes is refused with an
// ApiError naming the field and what was found ("inputs[2] must be a string, found integer 5").
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flashdeberta/gliner/gliner_decoding.hpp"
#include "flashdeberta/runtime/text_input.hpp"
#include "flashdeberta/tokenizer/encoding.hpp"

namespace flashdeberta::cli::server {

// What a request may hold, from the serve options.
struct RequestLimits {
  std::size_t max_client_batch_size = 32;  // inputs (or rerank texts, or candidate labels) per request
};

// One input of /predict: a text, or a text and its pair.
using runtime::TextInput;

// POST /predict {"inputs": "text" | ["text", "pair"] | [["text"], ["text", "pair"], ...], "raw_scores",
// "truncate", "truncation_direction"}. `batch`: the answer is a list per input (TEI answers a single input with its
// list alone).
struct PredictRequest {
  std::vector<TextInput> inputs;
  bool batch = false;
  bool raw_scores = false;
  bool truncate = false;
  tokenizer::TruncationSide side = tokenizer::TruncationSide::kRight;  // truncation_direction
};

// POST /rerank {"query", "texts", "raw_scores", "return_text", "truncate", "truncation_direction", "top_n"}.
struct RerankRequest {
  std::string query;
  std::vector<std::string> texts;
  bool raw_scores = false;
  bool return_text = false;
  bool truncate = false;
  tokenizer::TruncationSide side = tokenizer::TruncationSide::kRight;
  std::optional<std::size_t> top_n;
};

// POST /tokenize {"inputs": "text" | ["text", ...], "add_special_tokens"}.
struct TokenizeRequest {
  std::vector<std::string> inputs;
  bool add_special_tokens = true;
};

// POST /zero-shot {"inputs", "candidate_labels", "hypothesis_template", "multi_label"}; the three options
// may also come inside "parameters", as HF's Inference API sends them.
struct ZeroShotRequest {
  std::vector<std::string> inputs;
  bool batch = false;
  std::vector<std::string> candidate_labels;
  bool labels_as_text = false;                     // one text "a, b, c", split on commas as HF does
  std::optional<std::string> hypothesis_template;  // unset: HF's default
  bool multi_label = false;
};

// POST /fill-mask {"inputs", "top_k"} and POST /ner {"inputs"} (top_k also inside "parameters").
struct FillMaskRequest {
  std::vector<std::string> inputs;
  bool batch = false;
  std::size_t top_k = 5;
};
struct NerRequest {
  std::vector<std::string> inputs;
  bool batch = false;
};

// POST /gliner {"text": "..." | "texts": [...], "labels": [...], "threshold", "flat_ner", "multi_label",
// "long_text", "window_overlap"} (GLiNER's predict_entities / batch_predict_entities arguments, and our
// long-text options, docs/gliner.md section 11). `batch`: "texts" was given, so the answer is a list of
// entity lists.
struct GlinerRequest {
  std::vector<std::string> texts;
  bool batch = false;
  std::vector<std::string> labels;
  double threshold = 0.5;
  bool flat_ner = true;
  bool multi_label = false;
  GlinerLongText long_text = GlinerLongText::kTruncate;
  std::optional<std::int64_t> window_overlap;  // checked against the model's max_len when run
};

PredictRequest parse_predict_request(std::string_view body, RequestLimits const& limits);
RerankRequest parse_rerank_request(std::string_view body, RequestLimits const& limits);
TokenizeRequest parse_tokenize_request(std::string_view body, RequestLimits const& limits);
ZeroShotRequest parse_zero_shot_request(std::string_view body, RequestLimits const& limits);
FillMaskRequest parse_fill_mask_request(std::string_view body, RequestLimits const& limits);
NerRequest parse_ner_request(std::string_view body, RequestLimits const& limits);
GlinerRequest parse_gliner_request(std::string_view body, RequestLimits const& limits);

}  // namespace flashdeberta::cli::server

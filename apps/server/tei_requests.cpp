#include "server/tei_requests.hpp"

#include <limits>

#include "server/request_fields.hpp"

namespace flashdeberta::cli::server {

using namespace fields;

namespace {

// TEI's ids are u32: a JSON integer from 0 to 2^32 - 1 (the vocabulary is checked when the ids run).
constexpr std::uint64_t kMaxTokenId = std::numeric_limits<std::uint32_t>::max();

bool is_token_id(Json const& value) { return value.is_number_unsigned() && value.get<std::uint64_t>() <= kMaxTokenId; }

// A JSON array every element of which is a token id (an empty array included, as serde reads it).
bool is_id_list(Json const& value) {
  if (!value.is_array()) return false;
  for (Json const& element : value)
    if (!is_token_id(element)) return false;
  return true;
}

std::vector<std::int64_t> id_list(Json const& value, std::string const& what) {
  if (!value.is_array()) fail_validation(what + " must be a list of token ids, found " + describe(value));
  std::vector<std::int64_t> ids;
  ids.reserve(value.size());
  for (std::size_t i = 0; i < value.size(); ++i) {
    if (!is_token_id(value[i])) {
      fail_validation(what + "[" + std::to_string(i) + "] must be a token id (an integer from 0 to " +
                      std::to_string(kMaxTokenId) + "), found " + describe(value[i]));
    }
    ids.push_back(static_cast<std::int64_t>(value[i].get<std::uint64_t>()));
  }
  if (ids.empty()) fail_empty(what + " is an empty list of token ids; send at least one");
  return ids;
}

// TEI's untagged `Input`: a text; a list of ids is one input (serde tries Single first); any other list is a
// batch whose entries are texts or lists of ids.
EmbedInputs embed_inputs(Fields const& fields, Json const& value, std::string const& what,
                         RequestLimits const& limits) {
  EmbedInputs out;
  if (value.is_string()) {
    out.inputs.push_back({value.get<std::string>(), std::nullopt});
    return out;
  }
  if (!value.is_array()) {
    fail_validation(what + " must be a text, a list of token ids, or a list of texts and lists of token ids, found " +
                    describe(value));
  }
  if (is_id_list(value)) {
    out.inputs.push_back({"", id_list(value, what)});
    return out;
  }
  out.batch = true;
  check_batch_size(value.size(), what, limits);
  for (std::size_t i = 0; i < value.size(); ++i) {
    std::string const name = what + "[" + std::to_string(i) + "]";
    if (value[i].is_array()) {
      out.inputs.push_back({"", id_list(value[i], name)});
    } else {
      out.inputs.push_back({fields.string(value[i], name), std::nullopt});
    }
  }
  return out;
}

void refuse_dimensions(Fields const& fields) {
  if (Json const* dimensions = fields.take("dimensions"))
    fail_validation("dimensions " + describe(*dimensions) + " is not served: embeddings have the model's hidden size");
}

}  // namespace

EmbedRequest parse_embed_request(std::string_view body, RequestLimits const& limits) {
  Json const root = parse_object(body, "/embed");
  Fields const fields(root, "", "inputs, normalize, truncate, truncation_direction");
  EmbedRequest request;
  request.inputs = embed_inputs(fields, fields.require("inputs"), "inputs", limits);
  request.normalize = fields.boolean("normalize", true);
  request.truncate = fields.boolean("truncate", false);
  request.side = truncation_side(fields);
  refuse_prompt_name(fields);
  refuse_dimensions(fields);
  return request;
}

EmbedAllRequest parse_embed_all_request(std::string_view body, RequestLimits const& limits) {
  Json const root = parse_object(body, "/embed_all");
  Fields const fields(root, "", "inputs, truncate, truncation_direction");
  EmbedAllRequest request;
  request.inputs = embed_inputs(fields, fields.require("inputs"), "inputs", limits);
  request.truncate = fields.boolean("truncate", false);
  request.side = truncation_side(fields);
  refuse_prompt_name(fields);
  return request;
}

SimilarityRequest parse_similarity_request(std::string_view body, RequestLimits const& limits) {
  Json const root = parse_object(body, "/similarity");
  Fields const fields(root, "", "inputs {source_sentence, sentences}, parameters {truncate, truncation_direction}");
  Json const& inputs_value = fields.require("inputs");
  if (!inputs_value.is_object())
    fail_validation("inputs must be an object {\"source_sentence\", \"sentences\"}, found " + describe(inputs_value));
  Fields const inputs(inputs_value, "inputs.", "source_sentence, sentences");
  SimilarityRequest request;
  request.source_sentence = inputs.string(inputs.require("source_sentence"), "inputs.source_sentence");
  Json const& sentences = inputs.require("sentences");
  if (!sentences.is_array()) fail_validation("inputs.sentences must be a list of texts, found " + describe(sentences));
  if (sentences.empty()) fail_empty("inputs.sentences is an empty list; send at least one text");
  // The source sentence runs with the others: TEI counts it against --max-client-batch-size too.
  check_batch_size(sentences.size() + 1, "inputs.sentences (with the source sentence)", limits);
  bool batch = true;
  request.sentences = text_list(inputs, sentences, "inputs.sentences", limits, batch);
  if (Json const* parameters_value = fields.object("parameters")) {
    Fields const parameters(*parameters_value, "parameters.", "truncate, truncation_direction, prompt_name");
    request.truncate = parameters.boolean("truncate", false);
    request.side = truncation_side(parameters);
    refuse_prompt_name(parameters);
  }
  return request;
}

OpenAiEmbeddingsRequest parse_openai_embeddings_request(std::string_view body, RequestLimits const& limits) {
  Json const root = parse_object(body, "/v1/embeddings");
  Fields const fields(root, "", "input, model, user, encoding_format, dimensions");
  OpenAiEmbeddingsRequest request;
  request.inputs = embed_inputs(fields, fields.require("input"), "input", limits);
  // One model is served: `model` and `user` are read and not checked, as TEI does.
  for (char const* key : {"model", "user"}) {
    if (Json const* value = fields.take(key)) fields.string(*value, key);
  }
  if (Json const* format = fields.take("encoding_format")) {
    bool const known = format->is_string() && (*format == "float" || *format == "base64");
    if (!known) fail_validation("encoding_format must be \"float\" or \"base64\", found " + describe(*format));
    request.base64 = *format == "base64";
  }
  refuse_dimensions(fields);
  return request;
}

DecodeRequest parse_decode_request(std::string_view body, RequestLimits const& limits) {
  Json const root = parse_object(body, "/decode");
  Fields const fields(root, "", "ids, skip_special_tokens");
  DecodeRequest request;
  Json const& ids = fields.require("ids");
  if (is_id_list(ids)) {
    request.ids.push_back(id_list(ids, "ids"));
  } else if (ids.is_array()) {
    if (ids.empty()) fail_empty("ids is an empty list; send at least one token id");
    check_batch_size(ids.size(), "ids", limits);
    for (std::size_t i = 0; i < ids.size(); ++i)
      request.ids.push_back(id_list(ids[i], "ids[" + std::to_string(i) + "]"));
  } else {
    fail_validation("ids must be a list of token ids or a list of such lists, found " + describe(ids));
  }
  request.skip_special_tokens = fields.boolean("skip_special_tokens", true);
  return request;
}

TextClassificationRequest parse_text_classification_request(std::string_view body, RequestLimits const& limits) {
  Json const root = parse_object(body, "/text-classification");
  Fields const fields(root, "", "inputs, parameters {top_k, function_to_apply}");
  TextClassificationRequest request;
  bool batch = false;
  request.inputs = text_list(fields, fields.require("inputs"), "inputs", limits, batch);
  if (Json const* parameters_value = fields.object("parameters")) {
    Fields const parameters(*parameters_value, "parameters.", "top_k, function_to_apply");
    request.top_k = parameters.count("top_k", 1);
    if (Json const* function = parameters.take("function_to_apply")) {
      std::string const name = function->is_string() ? function->get<std::string>() : "";
      if (name == "softmax") {
        request.function = pipelines::ScoreFunction::kSoftmax;
      } else if (name == "sigmoid") {
        request.function = pipelines::ScoreFunction::kSigmoid;
      } else if (name == "none") {
        request.function = pipelines::ScoreFunction::kNone;
      } else {
        fail_validation("parameters.function_to_apply must be \"softmax\", \"sigmoid\" or \"none\", found " +
                        describe(*function));
      }
    }
  }
  return request;
}

}  // namespace flashdeberta::cli::server

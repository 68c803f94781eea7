#include "server/requests.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/core/quoted_excerpt.hpp"
#include "flashdeberta/gliner/gliner_long_text.hpp"
#include "flashdeberta/io/json.hpp"
#include "server/api_error.hpp"

namespace flashdeberta::cli::server {

namespace {

using io::Json;

std::string describe(Json const& value) { return io::json_describe(value, 60); }

// The body as a JSON object. Malformed JSON, invalid UTF-8, a NUL byte, nesting beyond 64 levels and
// duplicate keys are refused by the library's strict reader (the same one config.json goes through).
Json parse_object(std::string_view body, std::string_view route) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    fail_malformed("the request body is empty; " + std::string(route) +
                   " takes a JSON object such as {\"inputs\": \"some text\"}");
  }
  Json root;
  try {
    root = io::parse_json(body, route, "request body");
  } catch (Error const& e) {
    fail_malformed(e.what());
  }
  if (!root.is_object()) fail_malformed("the request body must be a JSON object, found " + describe(root));
  return root;
}

// An integer of at least `min`. The reader keeps a non-negative integer as unsigned (up to 2^64 - 1), so it is
// read as one: read as int64, 2^63 and above would wrap to negative and be refused as below `min`.
std::size_t count_value(Json const& value, std::string const& what, std::size_t min) {
  bool const valid = value.is_number_unsigned()  ? value.get<std::uint64_t>() >= min
                     : value.is_number_integer() ? value.get<std::int64_t>() >= static_cast<std::int64_t>(min)
                                                 : false;
  if (!valid)
    fail_validation(what + " must be an integer of at least " + std::to_string(min) + ", found " + describe(value));
  return value.is_number_unsigned() ? static_cast<std::size_t>(value.get<std::uint64_t>())
                                    : static_cast<std::size_t>(value.get<std::int64_t>());
}

// The fields of one JSON object, each read at most once; finish() refuses the fields nobody read, so a
// misspelt option ("raw_score") is named instead of silently ignored. A field holding null counts as
// absent (TEI's optional fields are nullable).
class Fields {
 public:
  Fields(Json const& object, std::string prefix, std::string accepted)
      : object_(object), prefix_(std::move(prefix)), accepted_(std::move(accepted)) {}

  std::string name(std::string_view key) const { return prefix_ + std::string(key); }

  Json const* take(std::string_view key) {
    read_.insert(std::string(key));
    auto const it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }

  Json const& require(std::string_view key) {
    Json const* value = take(key);
    if (value == nullptr) fail_validation("missing field '" + name(key) + "' (the request takes " + accepted_ + ")");
    return *value;
  }

  bool boolean(std::string_view key, bool fallback) {
    Json const* value = take(key);
    if (value == nullptr) return fallback;
    if (!value->is_boolean()) fail_validation(name(key) + " must be true or false, found " + describe(*value));
    return value->get<bool>();
  }

  std::string string(Json const& value, std::string const& what) const {
    if (!value.is_string()) fail_validation(what + " must be a string, found " + describe(value));
    return value.get<std::string>();
  }

  std::optional<std::size_t> count(std::string_view key, std::size_t min) {
    Json const* value = take(key);
    if (value == nullptr) return std::nullopt;
    return count_value(*value, name(key), min);
  }

  // A nested object ("parameters"), or nullptr.
  Json const* object(std::string_view key) {
    Json const* value = take(key);
    if (value != nullptr && !value->is_object())
      fail_validation(name(key) + " must be a JSON object, found " + describe(*value));
    return value;
  }

  void finish() const {
    for (auto const& [key, value] : object_.items()) {
      if (!read_.contains(key))
        fail_validation("unknown field '" + name(key) + "' (the request takes " + accepted_ + ")");
    }
  }

 private:
  Json const& object_;
  std::string prefix_;
  std::string accepted_;
  std::set<std::string, std::less<>> read_;
};

void check_batch_size(std::size_t size, std::string const& what, RequestLimits const& limits) {
  if (size > limits.max_client_batch_size) {
    throw ApiError(kPayloadTooLarge, ErrorType::kValidation,
                   what + " holds " + std::to_string(size) + " entries, more than the " +
                       std::to_string(limits.max_client_batch_size) +
                       " a request may hold (--max-client-batch-size); split it into several requests");
  }
}

// "text" or ["text", ...]: the texts, and whether they came as a list.
std::vector<std::string> text_list(Fields const& fields, Json const& value, std::string const& what,
                                   RequestLimits const& limits, bool& batch) {
  batch = value.is_array();
  if (!batch) return {fields.string(value, what)};
  if (value.empty()) fail_empty(what + " is an empty list; send at least one text");
  check_batch_size(value.size(), what, limits);
  std::vector<std::string> texts;
  for (std::size_t i = 0; i < value.size(); ++i)
    texts.push_back(fields.string(value[i], what + "[" + std::to_string(i) + "]"));
  return texts;
}

// TEI's truncation_direction: only "Right" (HF's default, what the tokenizer does) is served.
void check_truncation_direction(Fields& fields) {
  Json const* value = fields.take("truncation_direction");
  if (value == nullptr) return;
  std::string const direction = fields.string(*value, "truncation_direction");
  if (direction != "Right" && direction != "right")
    fail_validation("truncation_direction " + quoted_excerpt(direction) +
                    " is not served: texts are truncated on the right");
}

// TEI's prompt_name: sentence-transformers prompts, which DeBERTa checkpoints do not define.
void refuse_prompt_name(Fields& fields) {
  if (Json const* value = fields.take("prompt_name"))
    fail_validation("prompt_name " + describe(*value) + " is not served: the checkpoint defines no prompts");
}

// The option `key` from the top level or from "parameters" (HF's Inference API), not both.
Json const* option(Fields& top, Fields* parameters, std::string_view key) {
  Json const* direct = top.take(key);
  Json const* nested = parameters != nullptr ? parameters->take(key) : nullptr;
  if (direct != nullptr && nested != nullptr)
    fail_validation(std::string(key) + " is given both at the top level and in parameters; give it once");
  return direct != nullptr ? direct : nested;
}

}  // namespace

PredictRequest parse_predict_request(std::string_view body, RequestLimits const& limits) {
  Json const root = parse_object(body, "/predict");
  Fields fields(root, "", "inputs, raw_scores, truncate, truncation_direction");
  PredictRequest request;
  Json const& inputs = fields.require("inputs");
  auto const pair_of = [&](Json const& value, std::string const& what) {
    if (!value.is_array() || value.empty() || value.size() > 2) {
      fail_validation(what + " must be a text or a pair [text, text_pair], found " + describe(value));
    }
    TextInput input{fields.string(value[0], what + "[0]"), std::nullopt};
    if (value.size() == 2) input.pair = fields.string(value[1], what + "[1]");
    return input;
  };
  if (inputs.is_string()) {
    request.inputs.push_back({inputs.get<std::string>(), std::nullopt});
  } else if (inputs.is_array() && !inputs.empty() && inputs[0].is_string()) {
    request.inputs.push_back(pair_of(inputs, "inputs"));  // ["text"] or ["text", "pair"]: one input, as TEI
  } else if (inputs.is_array()) {
    if (inputs.empty()) fail_empty("inputs is an empty list; send at least one text");
    check_batch_size(inputs.size(), "inputs", limits);
    request.batch = true;
    for (std::size_t i = 0; i < inputs.size(); ++i)
      request.inputs.push_back(pair_of(inputs[i], "inputs[" + std::to_string(i) + "]"));
  } else {
    fail_validation(
        "inputs must be a text, a pair [text, text_pair] or a list of [text] and [text, text_pair], found " +
        describe(inputs));
  }
  request.raw_scores = fields.boolean("raw_scores", false);
  request.truncate = fields.boolean("truncate", false);
  check_truncation_direction(fields);
  fields.finish();
  return request;
}

RerankRequest parse_rerank_request(std::string_view body, RequestLimits const& limits) {
  Json const root = parse_object(body, "/rerank");
  Fields fields(root, "", "query, texts, raw_scores, return_text, truncate, truncation_direction, top_n");
  RerankRequest request;
  request.query = fields.string(fields.require("query"), "query");
  Json const& texts = fields.require("texts");
  if (!texts.is_array()) fail_validation("texts must be a list of texts, found " + describe(texts));
  bool batch = true;
  request.texts = text_list(fields, texts, "texts", limits, batch);
  request.raw_scores = fields.boolean("raw_scores", false);
  request.return_text = fields.boolean("return_text", false);
  request.truncate = fields.boolean("truncate", false);
  request.top_n = fields.count("top_n", 1);
  check_truncation_direction(fields);
  fields.finish();
  return request;
}

EmbedRequest parse_embed_request(std::string_view body, RequestLimits const& limits) {
  Json const root = parse_object(body, "/embed");
  Fields fields(root, "", "inputs, normalize, truncate, truncation_direction");
  EmbedRequest request;
  bool batch = false;
  request.inputs = text_list(fields, fields.require("inputs"), "inputs", limits, batch);
  request.normalize = fields.boolean("normalize", true);
  request.truncate = fields.boolean("truncate", false);
  check_truncation_direction(fields);
  refuse_prompt_name(fields);
  if (Json const* dimensions = fields.take("dimensions"))
    fail_validation("dimensions " + describe(*dimensions) + " is not served: embeddings have the model's hidden size");
  fields.finish();
  return request;
}

TokenizeRequest parse_tokenize_request(std::string_view body, RequestLimits const& limits) {
  Json const root = parse_object(body, "/tokenize");
  Fields fields(root, "", "inputs, add_special_tokens");
  TokenizeRequest request;
  bool batch = false;
  request.inputs = text_list(fields, fields.require("inputs"), "inputs", limits, batch);
  request.add_special_tokens = fields.boolean("add_special_tokens", true);
  refuse_prompt_name(fields);
  fields.finish();
  return request;
}

ZeroShotRequest parse_zero_shot_request(std::string_view body, RequestLimits const& limits) {
  Json const root = parse_object(body, "/zero-shot");
  Fields fields(root, "", "inputs, candidate_labels, hypothesis_template, multi_label, parameters");
  ZeroShotRequest request;
  request.inputs = text_list(fields, fields.require("inputs"), "inputs", limits, request.batch);
  Json const* parameters_object = fields.object("parameters");
  std::optional<Fields> parameters;
  if (parameters_object != nullptr)
    parameters.emplace(*parameters_object, "parameters.", "candidate_labels, hypothesis_template, multi_label");
  Fields* nested = parameters ? &*parameters : nullptr;
  Json const* labels = option(fields, nested, "candidate_labels");
  if (labels == nullptr)
    fail_validation("missing field 'candidate_labels' (a list of labels, or one text \"a, b, c\")");
  if (labels->is_string()) {
    request.candidate_labels.push_back(labels->get<std::string>());  // split on commas by the task, as HF
    request.labels_as_text = true;
  } else {
    bool batch = true;
    if (!labels->is_array()) fail_validation("candidate_labels must be a list of labels, found " + describe(*labels));
    request.candidate_labels = text_list(fields, *labels, "candidate_labels", limits, batch);
  }
  if (Json const* value = option(fields, nested, "hypothesis_template"))
    request.hypothesis_template = fields.string(*value, "hypothesis_template");
  if (Json const* value = option(fields, nested, "multi_label")) {
    if (!value->is_boolean()) fail_validation("multi_label must be true or false, found " + describe(*value));
    request.multi_label = value->get<bool>();
  }
  fields.finish();
  if (nested != nullptr) nested->finish();
  return request;
}

FillMaskRequest parse_fill_mask_request(std::string_view body, RequestLimits const& limits) {
  Json const root = parse_object(body, "/fill-mask");
  Fields fields(root, "", "inputs, top_k, parameters");
  FillMaskRequest request;
  request.inputs = text_list(fields, fields.require("inputs"), "inputs", limits, request.batch);
  Json const* parameters_object = fields.object("parameters");
  std::optional<Fields> parameters;
  if (parameters_object != nullptr) parameters.emplace(*parameters_object, "parameters.", "top_k");
  if (Json const* value = option(fields, parameters ? &*parameters : nullptr, "top_k"))
    request.top_k = count_value(*value, "top_k", 1);
  fields.finish();
  if (parameters) parameters->finish();
  return request;
}

GlinerRequest parse_gliner_request(std::string_view body, RequestLimits const& limits) {
  Json const root = parse_object(body, "/gliner");
  Fields fields(root, "", "text or texts, labels, threshold, flat_ner, multi_label, long_text, window_overlap");
  GlinerRequest request;
  Json const* text = fields.take("text");
  Json const* texts = fields.take("texts");
  if ((text == nullptr) == (texts == nullptr))
    fail_validation(text == nullptr ? "missing field 'text' (one text) or 'texts' (a list of texts)"
                                    : "give 'text' or 'texts', not both");
  if (text != nullptr) {
    request.texts.push_back(fields.string(*text, "text"));
  } else {
    if (!texts->is_array()) fail_validation("texts must be a list of texts, found " + describe(*texts));
    request.texts = text_list(fields, *texts, "texts", limits, request.batch);
  }
  Json const& labels = fields.require("labels");
  if (!labels.is_array()) fail_validation("labels must be a list of labels, found " + describe(labels));
  bool labels_batch = true;
  request.labels = text_list(fields, labels, "labels", limits, labels_batch);
  for (std::size_t i = 0; i < request.labels.size(); ++i) {
    if (request.labels[i].empty()) fail_validation("labels[" + std::to_string(i) + "] is an empty text");
  }
  if (Json const* value = fields.take("threshold")) {
    if (!value->is_number() || !(value->get<double>() >= 0.0 && value->get<double>() <= 1.0))
      fail_validation("threshold must be a number in [0, 1], found " + describe(*value));
    request.threshold = value->get<double>();
  }
  request.flat_ner = fields.boolean("flat_ner", true);
  request.multi_label = fields.boolean("multi_label", false);
  if (Json const* value = fields.take("long_text")) {
    std::optional<GlinerLongText> const mode =
        value->is_string() ? parse_gliner_long_text(value->get<std::string>()) : std::nullopt;
    if (!mode)
      fail_validation("long_text must be \"truncate\", \"windows\" or \"single_pass\", found " + describe(*value));
    request.long_text = *mode;
  }
  if (Json const* value = fields.take("window_overlap")) {
    // Beyond int64 is beyond every max_len too: the task names the range.
    std::size_t const overlap = count_value(*value, "window_overlap", 0);
    request.window_overlap = static_cast<std::int64_t>(
        std::min<std::size_t>(overlap, static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max())));
  }
  fields.finish();
  return request;
}

NerRequest parse_ner_request(std::string_view body, RequestLimits const& limits) {
  Json const root = parse_object(body, "/ner");
  Fields fields(root, "", "inputs");
  NerRequest request;
  request.inputs = text_list(fields, fields.require("inputs"), "inputs", limits, request.batch);
  fields.finish();
  return request;
}

}  // namespace flashdeberta::cli::server

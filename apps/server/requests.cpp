#include "server/requests.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>

#include "flashdeberta/gliner/gliner_long_text.hpp"
#include "server/request_fields.hpp"

namespace flashdeberta::cli::server {

using namespace fields;

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
  request.side = truncation_side(fields);
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
  request.side = truncation_side(fields);
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
  Fields const* nested = parameters ? &*parameters : nullptr;
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
  return request;
}

NerRequest parse_ner_request(std::string_view body, RequestLimits const& limits) {
  Json const root = parse_object(body, "/ner");
  Fields fields(root, "", "inputs");
  NerRequest request;
  request.inputs = text_list(fields, fields.require("inputs"), "inputs", limits, request.batch);
  return request;
}

}  // namespace flashdeberta::cli::server

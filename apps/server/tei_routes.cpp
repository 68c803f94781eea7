// text-embeddings-inference's routes beside the task routes (task_routes.cpp): the embedding model's /embed,
// /embed_all, /similarity and /v1/embeddings, all from the backbone's last hidden states of the request's
// inputs (texts, or token ids as TEI's InputType::Ids); /decode; HF's Inference API /text-classification;
// and POST / (and SageMaker's /invocations), which runs the route TEI runs for the model's kind.
#include <bit>
#include <cmath>
#include <cstdint>

#include "flashdeberta/pipelines/embedding.hpp"
#include "server/api_error.hpp"
#include "server/model_service.hpp"

namespace flashdeberta::cli::server {

namespace {

// The name of each of `count` inputs as the request body names them: "inputs" alone, "inputs[2]" in a list.
std::vector<std::string> body_names(std::string const& field, bool batch, std::size_t count) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < count; ++i) names.push_back(batch ? field + "[" + std::to_string(i) + "]" : field);
  return names;
}

// Standard base64 (RFC 4648, padded) of the floats' little-endian bytes: OpenAI's encoding_format "base64",
// which clients decode as a Float32Array.
std::string base64_floats(std::vector<float> const& values) {
  static constexpr char kDigits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  static_assert(std::endian::native == std::endian::little, "the floats' bytes are sent as they lie in memory");
  auto const* bytes = reinterpret_cast<unsigned char const*>(values.data());
  std::size_t const size = values.size() * sizeof(float);
  std::string out;
  out.reserve((size + 2) / 3 * 4);
  for (std::size_t i = 0; i < size; i += 3) {
    std::uint32_t chunk = std::uint32_t{bytes[i]} << 16;
    if (i + 1 < size) chunk |= std::uint32_t{bytes[i + 1]} << 8;
    if (i + 2 < size) chunk |= bytes[i + 2];
    out += kDigits[(chunk >> 18) & 63];
    out += kDigits[(chunk >> 12) & 63];
    out += i + 1 < size ? kDigits[(chunk >> 6) & 63] : '=';
    out += i + 2 < size ? kDigits[chunk & 63] : '=';
  }
  return out;
}

// The cosine of two vectors, in double; 0 against a zero vector, as sentence-transformers' cos_sim (whose
// normalize leaves a zero vector zero).
float cosine(std::vector<float> const& a, std::vector<float> const& b) {
  double dot = 0.0, aa = 0.0, bb = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    dot += static_cast<double>(a[i]) * b[i];
    aa += static_cast<double>(a[i]) * a[i];
    bb += static_cast<double>(b[i]) * b[i];
  }
  double const norms = std::sqrt(aa) * std::sqrt(bb);
  return norms == 0.0 ? 0.0f : static_cast<float>(dot / norms);
}

}  // namespace

std::vector<std::string_view> companion_paths(ModelRoute route) {
  switch (route) {
    case ModelRoute::kEmbed:
      return {"/embed_all", "/similarity", "/v1/embeddings", "/embeddings"};
    case ModelRoute::kPredict:
      return {"/text-classification"};
    default:
      return {};
  }
}

tokenizer::Encoding ModelService::ids_encoding(std::vector<std::int64_t> ids, std::string const& name, bool truncate,
                                               tokenizer::TruncationSide side, runtime::InputLimit const& limit) const {
  tokenizer::Tokenizer const& tok = pipeline_->tokenizer();
  std::int64_t const vocab_size = pipeline_->config().vocab_size;
  tokenizer::Encoding e;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= vocab_size) {
      fail_validation(name + "[" + std::to_string(i) + "] is token id " + std::to_string(ids[i]) +
                      ", outside the model's vocabulary (ids 0 to " + std::to_string(vocab_size - 1) + ")");
    }
  }
  auto const cut = static_cast<std::size_t>(max_input_length_);
  if (truncate && ids.size() > cut) {
    if (side == tokenizer::TruncationSide::kLeft) {
      ids.erase(ids.begin(), ids.end() - static_cast<std::ptrdiff_t>(cut));
    } else {
      ids.resize(cut);
    }
  }
  runtime::require_run_bound(ids.size(), name, limit);
  for (std::int64_t id : ids) {
    e.input_ids.push_back(id);
    e.token_type_ids.push_back(0);
    e.attention_mask.push_back(1);
    e.offsets.push_back({});
    e.tokens.push_back(tok.id_to_token(id).value_or(""));
    e.sequence_ids.push_back(0);
  }
  return e;
}

ModelService::TokenStates ModelService::token_states(std::vector<EmbedInput> const& inputs,
                                                     std::vector<std::string> const& names, bool truncate,
                                                     tokenizer::TruncationSide side) const {
  require(ModelRoute::kEmbed);
  runtime::TaskRun const run = request_run(runtime::InputNames::indexed("inputs"));
  std::vector<tokenizer::Encoding> encodings;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].ids) {
      encodings.push_back(ids_encoding(*inputs[i].ids, names[i], truncate, side, run.limit));
    } else {
      encodings.push_back(runtime::encode_input(pipeline_->tokenizer(), pipeline_->config(), inputs[i].text, nullptr,
                                                names[i], run.limit, truncation(truncate, side)));
    }
  }
  std::vector<std::size_t> const sizes = runtime::sequence_sizes(encodings);
  HeadOutput const out = run.forward(encodings);  // the base head: the backbone's states
  HostHeadTensor const& hidden = out["last_hidden_state"];
  TokenStates states{runtime::rows_by_sequence(hidden, sizes), static_cast<std::size_t>(hidden.width), 0};
  for (std::size_t size : sizes) states.tokens += size;
  return states;
}

JsonOut ModelService::embed(EmbedRequest const& request) const {
  EmbedInputs const& inputs = request.inputs;
  TokenStates const states = token_states(inputs.inputs, body_names("inputs", inputs.batch, inputs.inputs.size()),
                                          request.truncate, request.side);
  JsonOut all = JsonOut::array();
  for (std::vector<float> const& rows : states.rows) {
    std::vector<float> v = pipelines::pool(rows, states.hidden_size, options_.pooling);
    if (request.normalize) pipelines::l2_normalize(v);
    all.push_back(v);
  }
  return all;  // TEI answers a list of vectors whatever the input
}

JsonOut ModelService::embed_all(EmbedAllRequest const& request) const {
  EmbedInputs const& inputs = request.inputs;
  TokenStates const states = token_states(inputs.inputs, body_names("inputs", inputs.batch, inputs.inputs.size()),
                                          request.truncate, request.side);
  JsonOut all = JsonOut::array();
  for (std::vector<float> const& rows : states.rows) {
    JsonOut tokens = JsonOut::array();
    for (std::size_t at = 0; at < rows.size(); at += states.hidden_size)
      tokens.push_back(std::vector<float>(rows.begin() + at, rows.begin() + at + states.hidden_size));
    all.push_back(std::move(tokens));
  }
  return all;  // a list per input, as TEI, whatever the input
}

JsonOut ModelService::similarity(SimilarityRequest const& request) const {
  // TEI embeds the source sentence and the sentences in one batch, unnormalized, then takes cosines.
  std::vector<EmbedInput> inputs{{request.source_sentence, std::nullopt}};
  std::vector<std::string> names{"inputs.source_sentence"};
  for (std::size_t i = 0; i < request.sentences.size(); ++i) {
    inputs.push_back({request.sentences[i], std::nullopt});
    names.push_back("inputs.sentences[" + std::to_string(i) + "]");
  }
  TokenStates const states = token_states(inputs, names, request.truncate, request.side);
  std::vector<float> const source = pipelines::pool(states.rows[0], states.hidden_size, options_.pooling);
  JsonOut all = JsonOut::array();
  for (std::size_t i = 1; i < states.rows.size(); ++i)
    all.push_back(cosine(source, pipelines::pool(states.rows[i], states.hidden_size, options_.pooling)));
  return all;
}

JsonOut ModelService::openai_embeddings(OpenAiEmbeddingsRequest const& request) const {
  // TEI's OpenAI route: normalized, no truncation (TEI's --auto-truncate, which this server does not have).
  EmbedInputs const& inputs = request.inputs;
  TokenStates const states =
      token_states(inputs.inputs, body_names("input", inputs.batch, inputs.inputs.size()), false, {});
  JsonOut data = JsonOut::array();
  for (std::size_t i = 0; i < states.rows.size(); ++i) {
    std::vector<float> v = pipelines::pool(states.rows[i], states.hidden_size, options_.pooling);
    pipelines::l2_normalize(v);
    JsonOut item;
    item["object"] = "embedding";
    item["embedding"] = request.base64 ? JsonOut(base64_floats(v)) : JsonOut(v);
    item["index"] = i;
    data.push_back(std::move(item));
  }
  JsonOut answer;
  answer["object"] = "list";
  answer["data"] = std::move(data);
  answer["model"] = options_.model_id;
  answer["usage"] = {{"prompt_tokens", states.tokens}, {"total_tokens", states.tokens}};
  return answer;
}

JsonOut ModelService::decode(DecodeRequest const& request) const {
  if (gliner_) {
    throw ApiError(kFailedDependency, ErrorType::kBackend,
                   "/decode is not served for a GLiNER model; this server runs " + describe());
  }
  tokenizer::Tokenizer const& tok = pipeline_->tokenizer();
  bool const batch = request.ids.size() > 1;
  JsonOut all = JsonOut::array();
  for (std::size_t s = 0; s < request.ids.size(); ++s) {
    std::string const name = batch ? "ids[" + std::to_string(s) + "]" : "ids";
    std::vector<std::int64_t> const& ids = request.ids[s];
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (!tok.id_to_token(ids[i])) {
        fail_validation(name + "[" + std::to_string(i) + "] is token id " + std::to_string(ids[i]) +
                        ", outside the tokenizer's vocabulary of " + std::to_string(tok.vocab_size()) + " tokens");
      }
    }
    try {
      all.push_back(tok.decode(ids, request.skip_special_tokens));
    } catch (Error const& e) {
      throw ApiError(kUnprocessable, ErrorType::kTokenizer, name + ": " + e.what());
    }
  }
  return all;
}

JsonOut ModelService::text_classification(TextClassificationRequest const& request) const {
  require(ModelRoute::kPredict);
  runtime::ClassifyOptions const options{.top_k = request.top_k, .function = request.function};
  std::vector<TextInput> inputs;
  for (std::string const& text : request.inputs) inputs.push_back({text, std::nullopt});
  bool const batch = request.inputs.size() > 1;
  auto const results = pipeline_->classify(
      inputs, options,
      request_run(batch ? runtime::InputNames::indexed("inputs") : runtime::InputNames::single("inputs")));
  JsonOut all = JsonOut::array();
  for (auto const& labels : results) all.push_back(runtime::labels_json(labels));
  return all;  // HF's Inference API: a list of labels per input, one input too
}

JsonOut ModelService::default_route(std::string_view body, RequestLimits const& limits) const {
  if (gliner_) return gliner(parse_gliner_request(body, limits));
  switch (head_) {
    case HeadKind::kSequenceClassification:  // TEI: a reranker (one label) reranks, a classifier predicts
      if (serves(ModelRoute::kRerank)) return rerank(parse_rerank_request(body, limits));
      return predict(parse_predict_request(body, limits));
    case HeadKind::kBase:
      return embed(parse_embed_request(body, limits));
    case HeadKind::kMaskedLM:
      return fill_mask(parse_fill_mask_request(body, limits));
    case HeadKind::kTokenClassification:
      return ner(parse_ner_request(body, limits));
    default:
      throw ApiError(kFailedDependency, ErrorType::kBackend,
                     "POST / runs the model's task, and this server's model has none: " + describe());
  }
}

}  // namespace flashdeberta::cli::server

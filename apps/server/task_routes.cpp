// The model routes: each parses nothing (requests.cpp did) and decides no task rule (the runtime's task
// units in runtime::Pipeline and runtime::GlinerModel do, for the CLI and Python too); it names the
// request's inputs as its body does, runs the task through the batching queue (request_run) and answers
// with the tasks' JSON writer (task_json.hpp) in TEI's or HF's envelope: a single input's result alone, a
// list for a list.
#include <algorithm>
#include <span>

#include "flashdeberta/core/error.hpp"
#include "server/api_error.hpp"
#include "server/model_service.hpp"

namespace flashdeberta::cli::server {

namespace {

// Kept below what the answer can hold: each prediction is the whole input decoded once more, so a top_k of
// the vocabulary's size would occupy a thread for minutes.
constexpr std::size_t kMaxFillMaskTopK = 100;

// The request's inputs as its body names them: "inputs" for one input, "inputs[3]" in a list.
runtime::InputNames body_names(std::string field, bool batch) {
  return batch ? runtime::InputNames::indexed(std::move(field)) : runtime::InputNames::single(std::move(field));
}

// A single input is answered with its own result, a list with the list of results (TEI's and HF's shape).
JsonOut one_or_all(JsonOut all, bool batch) { return batch ? std::move(all) : std::move(all.at(0)); }

// Byte offset of each code point of `text`, and the text's size at the end: TEI gives token spans in bytes.
std::vector<std::size_t> code_point_bytes(std::string const& text) {
  std::vector<std::size_t> bytes;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) bytes.push_back(i);
  }
  bytes.push_back(text.size());
  return bytes;
}

}  // namespace

JsonOut ModelService::predict(PredictRequest const& request) const {
  require(ModelRoute::kPredict);
  runtime::ClassifyOptions options{.truncate = truncation(request.truncate, request.side)};
  if (request.raw_scores) options.function = pipelines::ScoreFunction::kNone;  // TEI: the logits, highest first
  auto const results = pipeline_->classify(request.inputs, options, request_run(body_names("inputs", request.batch)));
  JsonOut all = JsonOut::array();
  for (auto const& labels : results) all.push_back(runtime::labels_json(labels));
  return one_or_all(std::move(all), request.batch);
}

JsonOut ModelService::fill_mask(FillMaskRequest const& request) const {
  require(ModelRoute::kFillMask);
  if (request.top_k > kMaxFillMaskTopK) {
    fail_validation("top_k " + std::to_string(request.top_k) + " is more than the " + std::to_string(kMaxFillMaskTopK) +
                    " predictions a mask may ask for");
  }
  auto const results =
      pipeline_->fill_mask(request.inputs, {.top_k = request.top_k}, request_run(body_names("inputs", request.batch)));
  JsonOut all = JsonOut::array();
  for (auto const& masks : results) all.push_back(runtime::fill_mask_answer_json(masks));
  return one_or_all(std::move(all), request.batch);
}

JsonOut ModelService::ner(NerRequest const& request) const {
  require(ModelRoute::kNer);
  auto const results = pipeline_->ner(request.inputs, request_run(body_names("inputs", request.batch)));
  JsonOut all = JsonOut::array();
  for (auto const& entities : results) all.push_back(runtime::entities_json(entities));
  return one_or_all(std::move(all), request.batch);
}

JsonOut ModelService::rerank(RerankRequest const& request) const {
  require(ModelRoute::kRerank);
  runtime::RerankOptions const options{
      .top_n = request.top_n, .raw_scores = request.raw_scores, .truncate = truncation(request.truncate, request.side)};
  auto const ranked =
      pipeline_->rerank(request.query, request.texts, options, request_run(runtime::InputNames::indexed("texts")));
  return runtime::rerank_json(ranked, request.texts, request.return_text);
}

JsonOut ModelService::zero_shot(ZeroShotRequest const& request) const {
  require(ModelRoute::kZeroShot);
  // Labels as one comma-separated text are bounded as a list of them is.
  runtime::ZeroShotOptions options{.multi_label = request.multi_label,
                                   .max_candidate_labels = options_.max_client_batch_size,
                                   .max_labels_option = "--max-client-batch-size"};
  options.candidate_labels = request.labels_as_text ? pipelines::parse_candidate_labels(request.candidate_labels.at(0))
                                                    : request.candidate_labels;
  if (options.candidate_labels.empty()) fail_empty("candidate_labels names no label; send at least one");
  if (request.hypothesis_template) options.hypothesis_template = *request.hypothesis_template;
  auto const results = pipeline_->zero_shot(request.inputs, options, request_run(body_names("inputs", request.batch)));
  JsonOut all = JsonOut::array();
  for (std::size_t i = 0; i < results.size(); ++i)
    all.push_back(runtime::zero_shot_json(request.inputs[i], results[i]));
  return one_or_all(std::move(all), request.batch);
}

// GLiNER requests do not go through the batching queue (its batches are of one head's rows): each runs on
// its HTTP thread, one at a time (the forward uses every thread of the backend), in the forwards the
// runtime plans (8 texts and --max-batch-tokens tokens at most).
JsonOut ModelService::gliner(GlinerRequest const& request) const {
  require(ModelRoute::kGliner);
  GlinerOptions const options{.threshold = request.threshold,
                              .flat_ner = request.flat_ner,
                              .multi_label = request.multi_label,
                              .long_text = request.long_text,
                              .window_overlap = request.window_overlap};
  std::vector<std::vector<GlinerEntity>> results;
  {
    std::lock_guard const lock(gliner_mutex_);
    results = gliner_->predict_entities(request.texts, request.labels, options,
                                        {.names = body_names(request.batch ? "texts" : "text", request.batch)});
  }
  JsonOut all = JsonOut::array();
  for (auto const& entities : results) all.push_back(runtime::gliner_entities_json(entities));
  return one_or_all(std::move(all), request.batch);
}

// TEI's /tokenize: per input, its tokens with id, text, special, and start/stop as byte offsets of the
// input (null for special tokens, whose text is the token itself). Always a list of lists, as TEI.
JsonOut ModelService::tokenize(TokenizeRequest const& request) const {
  if (gliner_) {
    throw ApiError(kFailedDependency, ErrorType::kBackend,
                   "/tokenize is not served for a GLiNER model (it tokenizes each word with the labels' prompt); "
                   "this server runs " +
                       describe());
  }
  // Nothing runs the tokens, so the request is bounded as one forward is: its texts hold at most
  // --max-batch-tokens tokens together (each refused by its bytes before tokenizing, then as its tokens are
  // made), which also bounds the answer (about 400 bytes per token while it is built).
  runtime::TokenBound const read{options_.max_batch_tokens, "--max-batch-tokens", "raise --max-batch-tokens"};
  tokenizer::EncodeOptions options;
  options.add_special_tokens = request.add_special_tokens;
  runtime::InputNames const names = body_names("inputs", request.inputs.size() > 1);
  std::size_t tokens = 0;  // of the texts before this one
  JsonOut all = JsonOut::array();
  for (std::size_t i = 0; i < request.inputs.size(); ++i) {
    std::string const& text = request.inputs[i];
    runtime::require_text_bytes(text.size(), names(i), read);
    options.token_limit = static_cast<std::size_t>(read.tokens) - tokens;
    tokenizer::Encoding e;
    try {
      e = pipeline_->tokenizer().encode(text, options);
    } catch (tokenizer::TokenLimitError const&) {
      if (tokens == 0) runtime::refuse_token_limit(names(i), read);
      throw runtime::InputError(runtime::InputError::Kind::kTooLong,
                                names(i) + ": the texts up to this one hold more than " + std::to_string(read.tokens) +
                                    " tokens together, more than --max-batch-tokens " + std::to_string(read.tokens) +
                                    " (tokenizing stopped there; send them in several requests)");
    } catch (Error const& error) {
      throw ApiError(kUnprocessable, ErrorType::kTokenizer, names(i) + ": " + error.what());
    }
    tokens += e.size();
    std::vector<std::size_t> const bytes = code_point_bytes(text);
    JsonOut tokens = JsonOut::array();
    for (std::size_t t = 0; t < e.size(); ++t) {
      JsonOut token;
      token["id"] = e.input_ids[t];
      bool const special = e.sequence_ids[t] < 0;
      std::size_t const start = special ? 0 : bytes[static_cast<std::size_t>(e.offsets[t].begin)];
      std::size_t const stop = special ? 0 : bytes[static_cast<std::size_t>(e.offsets[t].end)];
      token["text"] = special ? e.tokens[t] : text.substr(start, stop - start);
      token["special"] = special;
      token["start"] = special ? JsonOut(nullptr) : JsonOut(start);
      token["stop"] = special ? JsonOut(nullptr) : JsonOut(stop);
      tokens.push_back(std::move(token));
    }
    all.push_back(std::move(tokens));
  }
  return all;
}

}  // namespace flashdeberta::cli::server

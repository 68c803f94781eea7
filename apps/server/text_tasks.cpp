// The routes over single texts (and /predict's pairs): /predict, /fill-mask, /ner and /tokenize. Each
// mirrors the runtime's task of the same name (runtime/src/pipeline.cpp, what the CLI runs): the same
// encodings, the same head rows, the same pipelines/ post-processing, so the answers are the CLI's.
#include <algorithm>

#include "flashdeberta/pipelines/fill_mask.hpp"
#include "flashdeberta/pipelines/token_classification.hpp"
#include "server/api_error.hpp"
#include "server/model_service.hpp"

namespace flashdeberta::cli::server {

namespace {

// The most predictions /fill-mask returns per mask: each is the whole input decoded once more, so a
// top_k of the vocabulary's size would occupy a thread for minutes.
constexpr std::size_t kMaxFillMaskTopK = 100;

// "inputs" for a request of one input, "inputs[3]" for one of a list: how messages name the input.
std::string input_name(bool batch, std::size_t i) { return batch ? "inputs[" + std::to_string(i) + "]" : "inputs"; }

std::vector<std::size_t> sizes_of(std::vector<tokenizer::Encoding> const& encodings) {
  std::vector<std::size_t> sizes;
  for (tokenizer::Encoding const& e : encodings) sizes.push_back(e.size());
  return sizes;
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
  std::vector<tokenizer::Encoding> encodings;
  for (std::size_t i = 0; i < request.inputs.size(); ++i) {
    TextInput const& input = request.inputs[i];
    encodings.push_back(
        encode(input.text, input.pair ? &*input.pair : nullptr, request.truncate, input_name(request.batch, i)));
  }
  std::vector<std::size_t> const sizes = sizes_of(encodings);
  HeadOutput const out = forward(encodings);
  std::vector<std::vector<float>> const logits = runtime::rows_by_sequence(out["logits"], sizes);
  JsonOut all = JsonOut::array();
  for (std::size_t i = 0; i < encodings.size(); ++i) {
    std::vector<pipelines::LabelScore> scores;
    if (request.raw_scores) {  // TEI: the logits themselves, highest first
      for (std::size_t k = 0; k < labels_.size(); ++k) scores.push_back({labels_[k], logits[i][k]});
      std::stable_sort(scores.begin(), scores.end(), [](auto const& a, auto const& b) { return a.score > b.score; });
    } else {
      scores = pipelines::classify(logits[i], labels_, score_function_);
    }
    JsonOut list = JsonOut::array();
    for (pipelines::LabelScore const& s : scores) list.push_back({{"label", s.label}, {"score", s.score}});
    all.push_back(std::move(list));
  }
  return one_or_all(std::move(all), request.batch);
}

JsonOut ModelService::fill_mask(FillMaskRequest const& request) const {
  require(ModelRoute::kFillMask);
  if (request.top_k > kMaxFillMaskTopK) {
    fail_validation("top_k " + std::to_string(request.top_k) + " is more than the " + std::to_string(kMaxFillMaskTopK) +
                    " predictions a mask may ask for");
  }
  tokenizer::Tokenizer const& tok = pipeline_->tokenizer();
  std::int64_t const mask_id = tok.mask_token_id();
  std::vector<tokenizer::Encoding> encodings;
  std::vector<std::vector<std::size_t>> masks;  // per text, where its masks are
  std::vector<std::size_t> starts = {0};        // per text, its first token in the request's rows
  for (std::size_t i = 0; i < request.inputs.size(); ++i) {
    std::string const name = input_name(request.batch, i);
    encodings.push_back(encode(request.inputs[i], nullptr, false, name));
    std::vector<std::size_t> at;
    for (std::size_t t = 0; t < encodings.back().size(); ++t)
      if (encodings.back().input_ids[t] == mask_id) at.push_back(t);
    if (at.empty())
      fail_validation(name + " has no mask token (" + *tok.id_to_token(mask_id) + "); fill-mask needs one");
    masks.push_back(std::move(at));
    starts.push_back(starts.back() + encodings.back().size());
  }
  HeadOutput const out = forward(encodings);
  // The logits of the mask tokens only ([M, V] in token order), each row to its text.
  HostHeadTensor const& logits = out["logits"];
  auto const vocab = static_cast<std::size_t>(logits.width);
  std::vector<std::vector<float>> rows(encodings.size());
  for (std::int64_t r = 0; r < logits.row_count; ++r) {
    auto const token = static_cast<std::size_t>(logits.tokens[r]);
    auto const i = static_cast<std::size_t>(std::upper_bound(starts.begin(), starts.end(), token) - starts.begin()) - 1;
    rows[i].insert(rows[i].end(), logits.values.begin() + r * vocab, logits.values.begin() + (r + 1) * vocab);
  }
  auto const decode = [&](std::span<std::int64_t const> ids, bool skip) { return tok.decode(ids, skip); };
  JsonOut all = JsonOut::array();
  for (std::size_t i = 0; i < encodings.size(); ++i) {
    auto const predictions = pipelines::fill_mask(encodings[i].input_ids, masks[i], rows[i], vocab, request.top_k,
                                                  tok.special_ids().pad, decode);
    JsonOut per_mask = JsonOut::array();
    for (auto const& row : predictions) {
      JsonOut list = JsonOut::array();
      for (pipelines::MaskPrediction const& p : row)
        list.push_back({{"score", p.score}, {"token", p.token}, {"token_str", p.token_str}, {"sequence", p.sequence}});
      per_mask.push_back(std::move(list));
    }
    // HF's shape: the list of predictions for a text with one mask, a list of them per mask otherwise.
    all.push_back(per_mask.size() == 1 ? std::move(per_mask[0]) : std::move(per_mask));
  }
  return one_or_all(std::move(all), request.batch);
}

JsonOut ModelService::ner(NerRequest const& request) const {
  require(ModelRoute::kNer);
  tokenizer::Tokenizer const& tok = pipeline_->tokenizer();
  std::vector<tokenizer::Encoding> encodings;
  for (std::size_t i = 0; i < request.inputs.size(); ++i)
    encodings.push_back(encode(request.inputs[i], nullptr, false, input_name(request.batch, i)));
  std::vector<std::size_t> const sizes = sizes_of(encodings);
  HeadOutput const out = forward(encodings);
  std::vector<std::vector<float>> const logits = runtime::rows_by_sequence(out["logits"], sizes);
  auto const decode = [&](std::span<std::int64_t const> ids) { return tok.decode(ids); };
  JsonOut all = JsonOut::array();
  for (std::size_t i = 0; i < encodings.size(); ++i) {
    auto const predictions = pipelines::token_predictions(encodings[i], logits[i], labels_.size());
    JsonOut list = JsonOut::array();
    for (pipelines::Entity const& e : pipelines::group_entities_simple(encodings[i], predictions, labels_, decode)) {
      list.push_back(
          {{"entity_group", e.entity_group}, {"score", e.score}, {"word", e.word}, {"start", e.start}, {"end", e.end}});
    }
    all.push_back(std::move(list));
  }
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
  tokenizer::EncodeOptions options;
  options.add_special_tokens = request.add_special_tokens;
  JsonOut all = JsonOut::array();
  for (std::size_t i = 0; i < request.inputs.size(); ++i) {
    std::string const& text = request.inputs[i];
    tokenizer::Encoding e;
    try {
      e = pipeline_->tokenizer().encode(text, options);
    } catch (Error const& error) {
      throw ApiError(kUnprocessable, ErrorType::kTokenizer,
                     input_name(request.inputs.size() > 1, i) + ": " + error.what());
    }
    std::vector<std::size_t> const bytes = code_point_bytes(text);
    JsonOut tokens = JsonOut::array();
    for (std::size_t t = 0; t < e.size(); ++t) {
      JsonOut token;
      token["id"] = e.input_ids[t];
      if (e.sequence_ids[t] < 0) {
        token["text"] = e.tokens[t];
        token["special"] = true;
        token["start"] = nullptr;
        token["stop"] = nullptr;
      } else {
        std::size_t const start = bytes[static_cast<std::size_t>(e.offsets[t].begin)];
        std::size_t const stop = bytes[static_cast<std::size_t>(e.offsets[t].end)];
        token["text"] = text.substr(start, stop - start);
        token["special"] = false;
        token["start"] = start;
        token["stop"] = stop;
      }
      tokens.push_back(std::move(token));
    }
    all.push_back(std::move(tokens));
  }
  return all;
}

}  // namespace flashdeberta::cli::server

// The /gliner route: GLiNER's named entities (runtime::GlinerModel, what the CLI's gliner command runs) of
// the request's texts for its labels, when the server was started on a GLiNER directory. GLiNER requests do
// not go through the batching queue (its batches are of one head's rows): each request runs on its HTTP
// thread, one at a time (the forward uses every thread of the backend), its texts in forwards of at most
// kGlinerTextsPerForward texts and --max-batch-tokens tokens.
#include <algorithm>
#include <span>

#include "flashdeberta/config.hpp"
#include "flashdeberta/core/error.hpp"
#include "server/api_error.hpp"
#include "server/model_service.hpp"

namespace flashdeberta::cli::server {

namespace {

constexpr std::size_t kGlinerTextsPerForward = 8;

}  // namespace

JsonOut ModelService::gliner(GlinerRequest const& request) const {
  require(ModelRoute::kGliner);
  GlinerOptions const options{.threshold = request.threshold,
                              .flat_ner = request.flat_ner,
                              .multi_label = request.multi_label,
                              .long_text = request.long_text,
                              .window_overlap = request.window_overlap};
  auto const predict = [&](std::size_t first, std::size_t count) {
    return gliner_->predict_entities(std::span<std::string const>(request.texts).subspan(first, count), request.labels,
                                     options, first + 1);
  };
  JsonOut all = JsonOut::array();
  std::lock_guard const lock(gliner_mutex_);
  for (std::size_t first = 0; first < request.texts.size(); first += kGlinerTextsPerForward) {
    std::size_t const count = std::min(kGlinerTextsPerForward, request.texts.size() - first);
    std::vector<std::vector<GlinerEntity>> results;
    try {
      try {
        results = predict(first, count);
      } catch (Error const&) {
        // Texts that fit --max-batch-tokens alone but not together (long texts, many labels): a forward per
        // text. A text refused for itself (the tokenizer, its own tokens) fails again, alone, naming itself.
        if (count == 1) throw;
        results.clear();
        for (std::size_t i = first; i < first + count; ++i) results.push_back(std::move(predict(i, 1).front()));
      }
    } catch (runtime::UsageError const& e) {
      fail_validation(e.what());
    } catch (Error const& e) {  // a text the tokenizer refuses, or over --max-batch-tokens with its prompt
      fail_validation(std::string(e.what()) + " (texts are numbered from 1)");
    }
    for (auto const& entities : results) {
      JsonOut list = JsonOut::array();
      for (GlinerEntity const& e : entities) {
        list.push_back({{"start", e.start}, {"end", e.end}, {"text", e.text}, {"label", e.label}, {"score", e.score}});
      }
      all.push_back(std::move(list));
    }
  }
  return request.batch ? all : std::move(all.at(0));
}

JsonOut ModelService::gliner_info() const {
  GlinerConfig const& config = gliner_->config();
  JsonOut info;
  info["model_id"] = options_.model_id;
  info["model_sha"] = nullptr;
  info["model_dtype"] = "float32";
  JsonOut gliner;
  gliner["span_mode"] = std::string(span_mode_name(config.span_mode));
  gliner["max_width"] = config.max_width;
  gliner["max_len"] = config.max_len;
  info["model_type"] = {{"gliner", gliner}};
  info["max_concurrent_requests"] = options_.max_concurrent_requests;
  info["max_batch_tokens"] = options_.max_batch_tokens;
  info["max_client_batch_size"] = options_.max_client_batch_size;
  info["payload_limit"] = options_.payload_limit;
  info["version"] = FLASHDEBERTA_VERSION_STRING;
  info["model_dir"] = options_.runtime.model.string();
  info["variant"] = runtime::variant_name(config.encoder);
  info["head"] = "gliner";
  info["routes"] = routes();
  info["backend"] = runtime::backend_name(options_.runtime.backend);
  info["attention"] = runtime::attention_name(options_.runtime.attention);
  info["dtype"] = runtime::dtype_option_name(options_.runtime.dtype);
  info["threads"] = gliner_->threads();
  return info;
}

}  // namespace flashdeberta::cli::server

// GLiNER for the front ends (the CLI's gliner command, the Python package's GLiNER class, the server's
// /gliner route): a GLiNER directory (docs/gliner.md) loaded over the backend RuntimeOptions picks (its
// GLiNER<P> instantiated once, by the backend: policy_backend.hpp), and predict_entities with the limits every
// front end applies (the bytes of a text, the tokens of a batch).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "flashdeberta/gliner/gliner_config.hpp"
#include "flashdeberta/gliner/gliner_decoding.hpp"
#include "flashdeberta/gliner/gliner_inputs.hpp"
#include "flashdeberta/runtime/loaded_model.hpp"
#include "flashdeberta/runtime/options.hpp"
#include "flashdeberta/runtime/task_run.hpp"
#include "flashdeberta/tokenizer/tokenizer.hpp"

namespace flashdeberta {
struct GlinerLogits;  // gliner_model.hpp: one text's logits
}  // namespace flashdeberta

namespace flashdeberta::runtime {

// Whether `directory` holds gliner_config.json (a GLiNER model rather than a transformers checkpoint).
bool is_gliner_directory(std::filesystem::path const& directory);

// The GLiNER<P> a backend instantiates for its policy (policy_backend.hpp): the encoder and GLiNER's layers.
// GlinerModel does the rest on the host, the same for every backend: planning the windows and batches of the
// texts, counting their tokens, decoding the entities.
class LoadedGliner {
 public:
  virtual ~LoadedGliner() = default;
  virtual GlinerConfig const& config() const = 0;
  virtual tokenizer::Tokenizer const& tokenizer() const = 0;
  // GLiNER<P>::logits: one forward over the prepared windows of every text.
  virtual std::vector<GlinerLogits> logits(std::vector<GlinerInput> const& inputs) const = 0;
};

// How a front end runs predict_entities: what texts are called in messages and how many run per forward
// (at most; a forward also holds at most max_tokens tokens with the labels' prompts, so texts that do not
// fit together run in more forwards).
struct GlinerRun {
  InputNames names = InputNames::numbered();
  std::size_t batch_size = 8;
};

class GlinerModel {
 public:
  // Loads options.model (gliner_config.json, the weights, the tokenizer files) over options.backend with
  // options.attention and options.threads. A directory without gliner_config.json is refused naming it.
  explicit GlinerModel(RuntimeOptions const& options);
  ~GlinerModel();
  GlinerModel(GlinerModel const&) = delete;
  GlinerModel& operator=(GlinerModel const&) = delete;

  GlinerConfig const& config() const { return model_->config(); }
  tokenizer::Tokenizer const& tokenizer() const { return model_->tokenizer(); }
  std::int64_t max_tokens() const { return max_tokens_; }
  int threads() const { return backend_->threads(); }
  // "GLiNER span (markerV0, max_width 12) on DeBERTa v3, hidden 512": what the front ends print.
  std::string describe() const;

  // The entities of each text with `labels` (GLiNER's batch_predict_entities), in GLiNER's order; blank
  // texts give none. options.long_text picks what happens past max_len words (docs/gliner.md section 11).
  // Refused before any work: no label, an empty label, a threshold outside [0, 1], a window_overlap
  // without long_text windows or not below max_len (UsageError); then per text (InputError, named by
  // run.names): more than max_text_bytes(max_tokens) bytes, a text GLiNER's splitter or tokenizer refuses,
  // or one that holds more than max_tokens tokens with its prompt on its own (every window counted).
  std::vector<std::vector<GlinerEntity>> predict_entities(std::span<std::string const> texts,
                                                          std::vector<std::string> const& labels,
                                                          GlinerOptions const& options,
                                                          GlinerRun const& run = {}) const;

 private:
  std::int64_t max_tokens_ = kDefaultMaxTokens;
  TokenLimitNames limit_names_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<LoadedGliner> model_;  // destroyed before backend_ (declared after it)
};

}  // namespace flashdeberta::runtime

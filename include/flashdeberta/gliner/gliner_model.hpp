// GLiNER<P>: GLiNER 0.2.27's uni-encoder span and token-level zero-shot NER models (docs/gliner.md) over our
// DeBERTa backbone, loaded from a directory as GLiNER's save_pretrained writes it.
//
//   auto ner = flashdeberta::GLiNER<flashdeberta::EigenPolicy>::load(flashdeberta::EigenPolicy(0), "gliner-dir");
//   auto entities = ner.predict_entities({"Paris is the capital of France."}, {"city", "country"},
//                                        {.threshold = 0.5});  // per text: {start, end, text, label, score}
//
// Where each step runs: the backbone, the projection, the BiLSTM's input GEMM, every Linear of the span
// layers, prompt_rep_layer, LayersFuser's squeeze and output projection, the scorer and the span x label logits are
// policy GEMMs. The word and label gathers, the LSTM recurrence, the span concatenations and windows, and the decoding
// run on the host (each file says why). Each text of a batch is one packed sequence: no padding, its own labels,
// GLiNER's batch-of-one results (docs/gliner.md section 7).
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "flashdeberta/gliner/gliner_config.hpp"
#include "flashdeberta/gliner/gliner_decoding.hpp"
#include "flashdeberta/gliner/gliner_inputs.hpp"
#include "flashdeberta/gliner/gliner_layers.hpp"
#include "flashdeberta/gliner/gliner_long_text.hpp"
#include "flashdeberta/gliner/gliner_lstm.hpp"
#include "flashdeberta/gliner/layers_fuser.hpp"
#include "flashdeberta/gliner/span_representation.hpp"
#include "flashdeberta/gliner/token_scorer.hpp"
#include "flashdeberta/model/deberta_model.hpp"
#include "flashdeberta/tokenizer/tokenizer.hpp"

namespace flashdeberta {

inline constexpr char const* kGlinerBackbonePrefix = "token_rep_layer.bert_layer.model.";

// One text's logits: span models (n K, C) with row s K + k; token-level (n C, 3) with row w C + c.
struct GlinerLogits {
  std::vector<float> values;
  std::int64_t words = 0;   // n
  std::int64_t labels = 0;  // C
};

template <ExecutionPolicy P>
class GLiNER {
 public:
  static GLiNER load(P policy, std::filesystem::path const& dir, ModelOptions options = {}) {
    GlinerConfig config = load_gliner_config(dir);
    tokenizer::Tokenizer tok = load_tokenizer(dir);
    Checkpoint const checkpoint = Checkpoint::open(dir);
    return GLiNER(std::move(policy), std::move(config), std::move(tok), checkpoint, dir, options);
  }

  GlinerConfig const& config() const { return config_; }
  tokenizer::Tokenizer const& tokenizer() const { return tokenizer_; }
  P const& policy() const { return policy_; }

  // The encoder input of one text (labels already deduplicated).
  GlinerInput prepare(std::string_view text, std::vector<std::string> const& labels) const {
    return prepare_gliner_input(tokenizer_, config_, text, labels);
  }

  // Logits of prepared texts, all in one packed backbone forward.
  std::vector<GlinerLogits> logits(std::vector<GlinerInput> const& inputs) const {
    std::vector<GlinerLogits> out(inputs.size());
    if (inputs.empty()) return out;
    std::vector<std::vector<std::int32_t>> sequences;
    for (auto const& in : inputs) sequences.emplace_back(in.input_ids.begin(), in.input_ids.end());
    Batch const batch = Batch::from_sequences(sequences);
    HostMatrix const tokens = token_vectors(batch);  // (T, D)
    std::int64_t const d = config_.hidden_size;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      GlinerInput const& in = inputs[i];
      std::int64_t const first = batch.cu_seqlens[i];
      std::int64_t const n = in.num_words();
      auto const c = static_cast<std::int64_t>(in.label_tokens.size());
      HostMatrix words(n, d);  // slots of words cut off by truncation stay zero
      for (std::size_t t = 0; t < in.words_mask.size(); ++t) {
        std::int64_t const slot = in.words_mask[t];
        if (slot > 0 && slot <= n) std::copy_n(tokens.row(first + t), d, words.row(slot - 1));
      }
      HostMatrix prompts(c, d);
      for (std::int64_t l = 0; l < c; ++l) std::copy_n(tokens.row(first + in.label_tokens[l]), d, prompts.row(l));
      if (!lstm_.empty()) words = lstm_.forward(policy_, std::move(words));
      out[i].words = n;
      out[i].labels = c;
      if (config_.token_level()) {
        out[i].values = scorer_.forward(policy_, words, prompts).values;
      } else {
        PolicyMatrix<P> const reps = span_layer_.forward(policy_, words);  // (n K, D)
        PolicyMatrix<P> const pp = to_policy(policy_, prompts);
        PolicyMatrix<P> const q = prompt_rep_.forward(policy_, pp.ref());  // (C, D)
        PolicyMatrix<P> logits = allocate_matrix(policy_, reps.rows, c);
        if (reps.rows > 0) policy_.gemm({.a = reps.ref(), .b = q.ref(), .out = logits.ref()});
        out[i].values = to_host(policy_, logits).values;
      }
    }
    return out;
  }

  // Entities of each text with the same labels (GLiNER's inference(texts, labels)).
  std::vector<std::vector<GlinerEntity>> predict_entities(std::vector<std::string> const& texts,
                                                          std::vector<std::string> const& labels,
                                                          GlinerOptions const& options = {}) const {
    return predict_entities(texts, std::vector<std::vector<std::string>>(texts.size(), labels), options);
  }

  // Entities of each text with its own labels (a list of lists in GLiNER).
  std::vector<std::vector<GlinerEntity>> predict_entities(std::vector<std::string> const& texts,
                                                          std::vector<std::vector<std::string>> const& labels,
                                                          GlinerOptions const& options = {}) const {
    FLASHDEBERTA_REQUIRE(labels.size() == texts.size(),
                         "GLiNER: " << texts.size() << " texts but " << labels.size() << " label lists");
    std::vector<std::vector<GlinerEntity>> out(texts.size());
    std::vector<GlinerTextPlan> plans;  // one window per text, except under long_text windows
    std::vector<GlinerInput> inputs;    // every window of every text: one logits() call
    std::vector<std::size_t> which;
    std::vector<std::vector<std::string>> used;
    for (std::size_t i = 0; i < texts.size(); ++i) {
      if (gliner_blank_text(texts[i])) continue;  // GLiNER: [] and nothing encoded
      used.push_back(dedup_gliner_labels(labels[i]));
      plans.push_back(plan_gliner_text(tokenizer_, config_, texts[i], used.back(), options));
      append_gliner_inputs(tokenizer_, config_, plans.back(), used.back(), options, inputs);
      which.push_back(i);
    }
    std::vector<GlinerLogits> const all = logits(inputs);
    std::span<GlinerLogits const> rest(all);
    for (std::size_t j = 0; j < plans.size(); ++j) {
      std::span<GlinerLogits const> const windows = rest.first(plans[j].windows.size());
      rest = rest.subspan(windows.size());
      out[which[j]] = gliner_text_entities(config_, texts[which[j]], plans[j], windows, used[j], options);
    }
    return out;
  }

  // One text (GLiNER's predict_entities).
  std::vector<GlinerEntity> predict_entities(std::string const& text, std::vector<std::string> const& labels,
                                             GlinerOptions const& options = {}) const {
    return predict_entities(std::vector<std::string>{text}, labels, options).front();
  }

 private:
  using Backbone = std::variant<DebertaModel<V2, P>, DebertaModel<V3, P>>;

  GLiNER(P policy, GlinerConfig config, tokenizer::Tokenizer tok, Checkpoint const& checkpoint,
         std::filesystem::path const& dir, ModelOptions options)
      : policy_(std::move(policy)),
        config_(std::move(config)),
        tokenizer_(std::move(tok)),
        backbone_(make_backbone(policy_, config_, checkpoint, options)) {
    std::string const source = (dir / "gliner_config.json").string();
    check_tokenizer(source);
    GlinerTensors const t(checkpoint);
    std::int64_t const hb = config_.encoder.hidden_size;
    std::int64_t const d = config_.hidden_size;
    if (config_.fuse_layers) fuser_ = GlinerLayersFuser<P>::load(policy_, t, hb, config_.encoder.num_layers);
    has_projection_ = d != hb || t.has("token_rep_layer.projection.weight");
    if (has_projection_) projection_ = GlinerLinear<P>::load(policy_, t, "token_rep_layer.projection", d, hb);
    if (config_.num_rnn_layers > 0) lstm_ = GlinerBiLstm<P>::load(policy_, t, d, config_.num_rnn_layers);
    if (config_.token_level()) {
      scorer_ = GlinerTokenScorer<P>::load(policy_, t, d);
    } else {
      span_layer_ = GlinerSpanLayer<P>::load(policy_, t, config_);
      prompt_rep_ = GlinerMlp<P>::load(policy_, t, "prompt_rep_layer", d, 4 * d, d);
    }
    policy_.fence();
  }

  static Backbone make_backbone(P const& policy, GlinerConfig const& c, Checkpoint const& checkpoint,
                                ModelOptions options) {
    if (c.encoder.conv_kernel_size > 0)
      return Backbone(std::in_place_index<0>, policy, c.encoder, checkpoint, kGlinerBackbonePrefix, options);
    return Backbone(std::in_place_index<1>, policy, c.encoder, checkpoint, kGlinerBackbonePrefix, options);
  }

  // GLiNER's class_token_index: the tokenizer's id of ent_token, over an embedding of len(tokenizer) rows.
  void check_tokenizer(std::string const& source) {
    std::optional<std::int64_t> const ent = tokenizer_.token_to_id(config_.ent_token);
    std::optional<std::int64_t> const sep = tokenizer_.token_to_id(config_.sep_token);
    FLASHDEBERTA_REQUIRE(ent && sep, source << ": the tokenizer has no '" << config_.ent_token << "' or '"
                                            << config_.sep_token << "' token (GLiNER adds them when it saves)");
    if (config_.class_token_index < 0) config_.class_token_index = *ent;
    FLASHDEBERTA_REQUIRE(config_.class_token_index == *ent,
                         source << ": key 'class_token_index' is " << config_.class_token_index
                                << " but the tokenizer's '" << config_.ent_token << "' is token " << *ent);
    auto const len = static_cast<std::int64_t>(tokenizer_.vocab_size());
    FLASHDEBERTA_REQUIRE(config_.encoder.vocab_size == len, source << ": encoder_config.vocab_size is "
                                                                   << config_.encoder.vocab_size
                                                                   << " but the tokenizer holds " << len
                                                                   << " tokens (GLiNER resizes the embeddings to it)");
  }

  // The backbone's last hidden state, projected to D when D != Hb: (T, D) on the host.
  HostMatrix token_vectors(Batch const& batch) const {
    return std::visit(
        [&](auto const& model) {
          if (config_.fuse_layers) {
            PolicyMatrix<P> const fused = fuser_.forward(policy_, batch, model.forward_all_layers(batch));
            if (!has_projection_) return to_host(policy_, fused);
            return to_host(policy_, projection_.forward(policy_, fused.ref()));
          }
          HiddenStates<P> hidden = model.forward(batch);
          if (!has_projection_) {
            return to_host(policy_, PolicyMatrix<P>{std::move(hidden.values), hidden.tokens, hidden.hidden_size});
          }
          return to_host(policy_, projection_.forward(policy_, hidden.ref()));
        },
        backbone_);
  }

  P policy_;
  GlinerConfig config_;
  tokenizer::Tokenizer tokenizer_;
  Backbone backbone_;
  bool has_projection_ = false;
  GlinerLinear<P> projection_;
  GlinerLayersFuser<P> fuser_;
  GlinerBiLstm<P> lstm_;
  GlinerSpanLayer<P> span_layer_;
  GlinerMlp<P> prompt_rep_;
  GlinerTokenScorer<P> scorer_;
};

}  // namespace flashdeberta

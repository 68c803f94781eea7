// GLiNER<P>: GLiNER 0.2.27's uni-encoder span and token-level zero-shot NER models (docs/gliner.md) over our
// DeBERTa backbone, loaded from a directory as GLiNER's save_pretrained writes it.
//
//   auto ner = flashdeberta::GLiNER<flashdeberta::EigenPolicy>::load(flashdeberta::EigenPolicy(0), "gliner-dir");
//   auto entities = ner.predict_entities({"Paris is the capital of France."}, {"city", "country"},
//                                        {.threshold = 0.5});  // per text: {start, end, text, label, score}
//
// Where each step runs: everything between the tokenizer and the decoding runs on the policy, for all texts of a
// call at once: one packed backbone forward, the word and label-prompt gathers, the BiLSTM (all texts packed,
// one GEMM and one lstm_cell per step), the span layers and prompt_rep_layer over every text's rows, then one
// span x label GEMM per text (texts differ in labels) into one buffer, downloaded once. Each text keeps its own
// words and labels: GLiNER's batch-of-one results (docs/gliner.md section 7). On the host, batched over the
// texts: LayersFuser's per-text gates, markerV1's mean, the conv_max/mean/sum pooling and the token-level
// scorer's pair matrix (the files say why).
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "flashdeberta/gliner/gliner_batch.hpp"
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
    Checkpoint const checkpoint = Checkpoint::open(dir, options.checkpoint);
    return GLiNER(std::move(policy), std::move(config), std::move(tok), checkpoint, dir, options);
  }

  GlinerConfig const& config() const { return config_; }
  tokenizer::Tokenizer const& tokenizer() const { return tokenizer_; }
  P const& policy() const { return policy_; }

  // The encoder input of one text (labels already deduplicated).
  GlinerInput prepare(std::string_view text, std::vector<std::string> const& labels) const {
    return prepare_gliner_input(tokenizer_, config_, text, labels);
  }

  // Logits of prepared texts: one packed backbone forward, GLiNER's layers over all texts together, one download.
  std::vector<GlinerLogits> logits(std::vector<GlinerInput> const& inputs) const {
    std::vector<GlinerLogits> out(inputs.size());
    if (inputs.empty()) return out;
    std::vector<std::vector<std::int32_t>> sequences;
    for (auto const& in : inputs) sequences.emplace_back(in.input_ids.begin(), in.input_ids.end());
    Batch const batch = Batch::from_sequences(sequences);
    GlinerBatch const layout = GlinerBatch::make(inputs, batch);
    require_spans_fit(layout);
    P const& p = policy_;
    std::int64_t const d = config_.hidden_size;
    std::int64_t const w = layout.words();
    PolicyMatrix<P> const tokens = token_vectors(batch);         // (T + 1, D), row T zero
    PolicyMatrix<P> const words = allocate_matrix(p, w + 1, d);  // (W + 1, D), row W zero
    gather_rows(p, tokens.ref(), upload_rows(p, layout.word_rows), words.ref().row_range(0, w));
    zero_.fill_last_row(p, words.ref());
    PolicyMatrix<P> const prompts = allocate_matrix(p, layout.labels(), d);  // (C, D)
    gather_rows(p, tokens.ref(), upload_rows(p, layout.label_rows), prompts.ref());
    if (!lstm_.empty()) lstm_.forward(p, words.ref().row_range(0, w), layout.word_offset);

    // Text i's values start at first[i] of one flat buffer.
    std::vector<std::int64_t> first(inputs.size() + 1, 0);
    std::int64_t const per_word = config_.token_level() ? 3 : config_.max_width;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      auto const n = static_cast<std::int64_t>(i);
      first[i + 1] = first[i] + layout.words_of(n) * per_word * layout.labels_of(n);
    }
    PolicyMatrix<P> values;
    if (config_.token_level()) {
      values = scorer_.forward(p, words.ref().row_range(0, w), prompts.ref(), layout);  // (sum n_i C_i, 3)
    } else {
      std::int64_t const kk = config_.max_width;
      PolicyMatrix<P> const reps = span_layer_.forward(p, words, layout, zero_);  // (W K, D)
      PolicyMatrix<P> const q = prompt_rep_.forward(p, prompts.ref());            // (C, D)
      values = allocate_matrix(p, first.back(), 1);
      std::size_t const element = dtype_size(values.buffer.dtype());
      for (std::size_t i = 0; i < inputs.size(); ++i) {
        auto const n = static_cast<std::int64_t>(i);
        std::int64_t const rows = layout.words_of(n) * kk;
        std::int64_t const c = layout.labels_of(n);
        if (rows == 0 || c == 0) continue;
        MatrixRef const scores{static_cast<char*>(values.buffer.data()) + first[i] * element, values.buffer.dtype(),
                               rows, c, c};  // (n_i K, C_i)
        p.gemm({.a = reps.ref().row_range(layout.word_offset[i] * kk, rows),
                .b = q.ref().row_range(layout.label_offset[i], c),
                .out = scores});
      }
    }
    HostMatrix const all = to_host(p, PolicyMatrix<P>{std::move(values.buffer), first.back(), 1});
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      out[i].words = inputs[i].num_words();
      out[i].labels = static_cast<std::int64_t>(inputs[i].label_tokens.size());
      out[i].values.assign(all.values.begin() + first[i], all.values.begin() + first[i + 1]);
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
    zero_ = GlinerZeroRow<P>::make(policy_, 2 * d);  // the widest gathered-from matrix: markers' [start | end]
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

  // A span model holds W x max_width span rows of 4 D values (markers' hidden layer) and their int32 row indices;
  // a hostile max_width (10^9 in gliner_config.json) is refused here, naming the sizes, before any of it is built.
  void require_spans_fit(GlinerBatch const& layout) const {
    if (config_.token_level()) return;
    double const rows = static_cast<double>(layout.words()) * static_cast<double>(config_.max_width);
    double const bytes = rows * (4.0 * static_cast<double>(config_.hidden_size) * sizeof(float) + 3.0 * sizeof(int));
    std::optional<std::int64_t> available;
    if constexpr (ReportsAvailableMemory<P>) available = policy_.available_memory_bytes();
    bool const too_many_rows = rows > static_cast<double>(std::numeric_limits<std::int32_t>::max());
    if (!too_many_rows && (!available || bytes <= static_cast<double>(*available))) return;
    auto const shown = static_cast<std::int64_t>(std::min(bytes, 9.0e18));
    FLASHDEBERTA_FAIL("GLiNER: the spans of "
                      << layout.words() << " words up to max_width " << config_.max_width
                      << " (gliner_config.json) are " << static_cast<std::int64_t>(rows) << " rows of "
                      << 4 * config_.hidden_size << " values, about " << detail::format_gib(shown)
                      << (too_many_rows ? ", more rows than int32 indices reach"
                                        : ", but only " + detail::format_gib(*available) + " are available to the " +
                                              P::name() + " policy")
                      << "; use fewer or shorter texts per forward, or a smaller max_width");
  }

  // GLiNER's class_token_index: the tokenizer's id of ent_token, over an embedding of len(tokenizer) rows.
  void check_tokenizer(std::string const& source) {
    std::optional<std::int64_t> const ent = tokenizer_.token_to_id(config_.ent_token);
    std::optional<std::int64_t> const sep = tokenizer_.token_to_id(config_.sep_token);
    FLASHDEBERTA_REQUIRE(ent && sep, source << ": the tokenizer has no '" << config_.ent_token << "' or '"
                                            << config_.sep_token << "' token (GLiNER adds them when it saves)");
    if (config_.class_token_index == -1) config_.class_token_index = *ent;
    FLASHDEBERTA_REQUIRE(config_.class_token_index == *ent,
                         source << ": key 'class_token_index' is " << config_.class_token_index
                                << " but the tokenizer's '" << config_.ent_token << "' is token " << *ent);
    auto const len = static_cast<std::int64_t>(tokenizer_.vocab_size());
    FLASHDEBERTA_REQUIRE(config_.encoder.vocab_size == len, source << ": encoder_config.vocab_size is "
                                                                   << config_.encoder.vocab_size
                                                                   << " but the tokenizer holds " << len
                                                                   << " tokens (GLiNER resizes the embeddings to it)");
  }

  // The backbone's last hidden state (or LayersFuser's output), projected to D when D != Hb, in policy memory:
  // (T + 1, D), row T zero for the words the truncation cut off (gliner_batch.hpp).
  PolicyMatrix<P> token_vectors(Batch const& batch) const {
    std::int64_t const t = batch.total_tokens();
    PolicyMatrix<P> out = allocate_matrix(policy_, t + 1, config_.hidden_size);
    MatrixRef const rows = out.ref().row_range(0, t);
    auto const project = [&](MatrixRef x) {  // (T, Hb) -> rows
      if (has_projection_) {
        projection_.forward_into(policy_, x, rows);
      } else {
        std::vector<std::int32_t> identity(static_cast<std::size_t>(t));
        for (std::int64_t i = 0; i < t; ++i) identity[i] = static_cast<std::int32_t>(i);
        gather_rows(policy_, x, upload_rows(policy_, identity), rows);
      }
    };
    std::visit(
        [&](auto const& model) {
          if (config_.fuse_layers) {
            std::vector<HiddenStates<P>> const layers = model.forward_all_layers(batch);
            if (has_projection_) {
              project(fuser_.forward(policy_, batch, layers).ref());
            } else {
              fuser_.forward_into(policy_, batch, layers, rows);
            }
          } else {
            project(model.forward(batch).ref());
          }
        },
        backbone_);
    zero_.fill_last_row(policy_, out.ref());
    return out;
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
  GlinerZeroRow<P> zero_;
};

}  // namespace flashdeberta

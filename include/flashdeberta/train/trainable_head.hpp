// The heads for training (heads/ holds the inference versions, spec 6), each with its loss as HF computes it:
//   sequence classification, multiple choice  pooler (dropout, dense, act) on each row's first token, dropout,
//                                             classifier; CE / MSE / BCE by problem type (multiple choice: CE over
//                                             the C choices' logits)
//   token classification, question answering  dropout (token classification only), a Linear on every token; CE
//                                             ignoring -100 / (CE(start) + CE(end)) / 2
//   masked LM                                 on the labelled tokens only: dense, act, LayerNorm, the word embeddings
//                                             (tied) as decoder plus a bias; CE
// Logits and their gradient pass through host memory: they are (rows, labels), small beside the backbone, and the
// loss is host code (losses.hpp).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "flashdeberta/core/batch.hpp"
#include "flashdeberta/heads/head_kind.hpp"
#include "flashdeberta/train/losses.hpp"
#include "flashdeberta/train/row_subset.hpp"
#include "flashdeberta/train/train_context.hpp"

namespace flashdeberta {

enum class ProblemType { kSingleLabel, kRegression, kMultiLabel };

// What a batch is trained towards; which fields are read depends on the head and problem type.
struct TrainingTargets {
  std::vector<std::int64_t> classes;  // (B) classes; (B) choices; (T) token classes or vocabulary ids, -100 ignored
  std::vector<float> values;          // (B) regression targets or (B, labels) multi-hot targets
  std::vector<std::int64_t> starts, ends;  // (B) question answering, -100 ignored
};

template <TrainingPolicy P>
class TrainableHead {
 public:
  using Buffer = typename P::Buffer;

  struct Saved {
    MatrixRef hidden;  // (T, H) the backbone's output, owned by its tape; (rows, H) when it gathered them
    bool hidden_gathered = false;
    RowSubset<P> const* read = nullptr;  // the rows the head reads (forward's `rows`), owned by the caller
    std::int64_t rows = 0;
    Buffer gathered;          // (rows, H)
    Buffer pre;               // (rows, W) the pooler or transform before its activation
    Buffer activated;         // (rows, W)
    Buffer normalized;        // (rows, E) masked LM: after the transform's LayerNorm
    Buffer classifier_input;  // (rows, H) after the classifier's dropout, when active
    DropoutSite pooler_dropout, classifier_dropout;
    std::vector<float> logits;  // host (rows, width)
  };

  TrainableHead(ParameterSet<P>& s, ParameterSource const& src, ModelConfig const& c, HeadKind kind,
                ProblemType problem, std::size_t word_embeddings)
      : config_(c), kind_(kind), problem_(problem), word_embeddings_(word_embeddings) {
    Checkpoint const* const ckpt = src.checkpoint;
    std::int64_t const h = c.hidden_size;
    switch (kind) {
      case HeadKind::kSequenceClassification:
      case HeadKind::kMultipleChoice:
        FLASHDEBERTA_REQUIRE(c.pooler_hidden_size == h, "training: pooler_hidden_size "
                                                            << c.pooler_hidden_size << " must equal hidden_size " << h);
        pooler_ = add_linear(s, src, "pooler.dense", h, h);
        width_ = kind == HeadKind::kMultipleChoice ? 1 : c.num_labels;
        classifier_ = add_linear(s, src, "classifier", width_, h);
        break;
      case HeadKind::kTokenClassification:
        width_ = c.num_labels;
        classifier_ = add_linear(s, src, "classifier", width_, h);
        break;
      case HeadKind::kQuestionAnswering:
        width_ = 2;
        classifier_ = add_linear(s, src, "qa_outputs", 2, h);
        break;
      case HeadKind::kMaskedLM: {
        bool const lm_head = !c.legacy || (ckpt != nullptr && ckpt->contains("lm_predictions.lm_head.dense.weight") &&
                                           !ckpt->contains("cls.predictions.transform.dense.weight"));
        std::string const p = lm_head ? "lm_predictions.lm_head." : "cls.predictions.transform.";
        transform_width_ = lm_head ? h : c.embedding_size;
        FLASHDEBERTA_REQUIRE(transform_width_ == c.embedding_size,
                             "training: the masked-LM head lm_predictions.lm_head.* needs embedding_size ("
                                 << c.embedding_size << ") = hidden_size (" << h << ")");
        pooler_ = add_linear(s, src, p + "dense", transform_width_, h);
        norm_ = TrainableLayerNorm::add(s, src, p + "LayerNorm", transform_width_, c.layer_norm_eps);
        std::string const bias = lm_head ? "lm_predictions.lm_head.bias"
                                 : (ckpt != nullptr && ckpt->contains("cls.predictions.decoder.bias") &&
                                    !ckpt->contains("cls.predictions.bias"))
                                     ? "cls.predictions.decoder.bias"
                                     : "cls.predictions.bias";
        decoder_bias_ = s.add({bias, {c.vocab_size}, ParameterInit::kZeros}, src);
        width_ = c.vocab_size;
        break;
      }
      case HeadKind::kBase:
        FLASHDEBERTA_FAIL("training needs a head: the backbone alone has no loss");
    }
  }

  HeadKind kind() const { return kind_; }
  std::int64_t width() const { return width_; }

  // The packed rows the head reads when it reads fewer than all (row_subset.hpp): each sequence's first token
  // (pooling heads) or the labelled tokens (masked LM); empty for the per-token heads.
  std::vector<std::int32_t> read_rows(Batch const& batch, TrainingTargets const& targets) const {
    std::vector<std::int32_t> rows;
    if (kind_ == HeadKind::kMaskedLM) {
      FLASHDEBERTA_REQUIRE(
          static_cast<std::int64_t>(targets.classes.size()) == batch.total_tokens(),
          "masked LM: " << targets.classes.size() << " labels for " << batch.total_tokens() << " tokens");
      for (std::size_t t = 0; t < targets.classes.size(); ++t)
        if (targets.classes[t] != kIgnoredLabel) rows.push_back(static_cast<std::int32_t>(t));
    } else if (pooled()) {
      for (std::int64_t b = 0; b < batch.batch_size(); ++b) {
        FLASHDEBERTA_REQUIRE(
            batch.sequence_length(b) > 0 && batch.positions[batch.cu_seqlens[b]] == 0,
            "sequence " << b << ": the pooler reads position 0, which this row lacks (pad on the right)");
        rows.push_back(batch.cu_seqlens[b]);
      }
    }
    return rows;
  }

  // The head's logits (rows, width) in host memory, also kept in saved.logits. rows: read_rows() as a RowSubset,
  // alive until the backward ends. hidden: the backbone's (T, H) output, which the head gathers those rows of, or
  // with `hidden_gathered` those rows alone, (rows, H), which the backbone computed.
  std::vector<float> const& forward(TrainContext<P>& ctx, MatrixRef const& hidden, RowSubset<P> const& rows,
                                    Saved& saved, bool hidden_gathered = false) const {
    P const& p = ctx.policy();
    ParameterSet<P> const& s = ctx.parameters;
    std::int64_t const h = config_.hidden_size;
    saved.hidden = hidden;
    saved.hidden_gathered = hidden_gathered;
    saved.read = &rows;
    MatrixRef x = hidden;
    if (hidden_gathered) {
      saved.rows = hidden.rows;
    } else if (gathers()) {
      saved.rows = rows.size();
      saved.gathered = ctx.allocate(saved.rows, h);
      x = rows_of(saved.gathered, saved.rows, h);
      rows.gather(p, hidden, x);
    } else {
      saved.rows = hidden.rows;
    }
    std::int64_t const m = saved.rows;
    saved.logits.assign(static_cast<std::size_t>(m * width_), 0.0f);
    if (m == 0) return saved.logits;
    Buffer logits = ctx.allocate(m, width_);
    if (kind_ == HeadKind::kMaskedLM) {
      std::int64_t const e = transform_width_;
      saved.pre = ctx.allocate(m, e);
      pooler_.forward(s, x, rows_of(saved.pre, m, e));
      saved.activated = ctx.allocate(m, e);
      p.activation(
          {.x = rows_of(saved.pre, m, e), .out = rows_of(saved.activated, m, e), .activation = config_.hidden_act});
      saved.normalized = ctx.allocate(m, e);
      norm_.forward(s, rows_of(saved.activated, m, e), MatrixRef{}, rows_of(saved.normalized, m, e));
      p.gemm({.a = rows_of(saved.normalized, m, e),
              .b = s.value(word_embeddings_, config_.vocab_size, e),
              .bias = s.value_data(decoder_bias_),
              .out = rows_of(logits, m, width_)});
    } else {
      MatrixRef classifier_in = x;
      if (pooled()) {
        saved.pooler_dropout = DropoutSite::reserve(ctx, ctx.dropout.pooler, m * h);
        if (saved.pooler_dropout.active()) saved.pooler_dropout.apply(p, x, x);
        saved.pre = ctx.allocate(m, h);
        pooler_.forward(s, x, rows_of(saved.pre, m, h));
        saved.activated = ctx.allocate(m, h);
        p.activation({.x = rows_of(saved.pre, m, h),
                      .out = rows_of(saved.activated, m, h),
                      .activation = config_.pooler_hidden_act});
        classifier_in = rows_of(saved.activated, m, h);
      }
      if (kind_ != HeadKind::kQuestionAnswering) {
        saved.classifier_dropout = DropoutSite::reserve(ctx, ctx.dropout.classifier, m * h);
        if (saved.classifier_dropout.active()) {
          saved.classifier_input = ctx.allocate(m, h);
          saved.classifier_dropout.apply(p, classifier_in, rows_of(saved.classifier_input, m, h));
          classifier_in = rows_of(saved.classifier_input, m, h);
        }
      }
      classifier_.forward(s, classifier_in, rows_of(logits, m, width_));
    }
    p.download(logits, std::span<float>(saved.logits));
    return saved.logits;
  }

  // The loss of saved.logits against `targets` and its gradient.
  LossGradient loss(Saved const& saved, Batch const& batch, TrainingTargets const& targets) const {
    std::span<float const> const logits(saved.logits);
    switch (kind_) {
      case HeadKind::kSequenceClassification:
        if (problem_ == ProblemType::kRegression) return mean_squared_error(logits, targets.values);
        if (problem_ == ProblemType::kMultiLabel) return binary_cross_entropy(logits, targets.values);
        return cross_entropy(logits, width_, targets.classes);
      case HeadKind::kMultipleChoice: {
        auto const questions = static_cast<std::int64_t>(targets.classes.size());
        FLASHDEBERTA_REQUIRE(
            questions > 0 && saved.rows % questions == 0,
            "multiple choice: " << saved.rows << " sequences do not split into " << questions << " questions");
        return cross_entropy(logits, saved.rows / questions, targets.classes);
      }
      case HeadKind::kQuestionAnswering: {
        auto const t = static_cast<std::size_t>(saved.rows);
        std::vector<float> start(t), end(t);
        for (std::size_t i = 0; i < t; ++i) {
          start[i] = saved.logits[2 * i];
          end[i] = saved.logits[2 * i + 1];
        }
        LossGradient split = question_answering_loss(start, end, batch.cu_seqlens, targets.starts, targets.ends);
        LossGradient out{split.loss, std::vector<float>(2 * t), split.counted};
        for (std::size_t i = 0; i < t; ++i) {
          out.dlogits[2 * i] = split.dlogits[i];
          out.dlogits[2 * i + 1] = split.dlogits[t + i];
        }
        return out;
      }
      case HeadKind::kMaskedLM: {
        std::vector<std::int64_t> labels;
        for (std::int64_t label : targets.classes)
          if (label != kIgnoredLabel) labels.push_back(label);
        return cross_entropy(logits, width_, labels);
      }
      default:
        return cross_entropy(logits, width_, targets.classes);
    }
  }

  // dlogits (rows, width) on the host -> d hidden (T, H), a fresh buffer; (rows, H) when the forward's hidden was
  // gathered.
  Buffer backward(TrainContext<P>& ctx, Saved& saved, std::span<float const> dlogits) const {
    P const& p = ctx.policy();
    ParameterSet<P> const& s = ctx.parameters;
    std::int64_t const t = ctx.tokens();
    std::int64_t const h = config_.hidden_size;
    std::int64_t const m = saved.rows;
    bool const gathers = this->gathers() && !saved.hidden_gathered;
    Buffer dhidden = saved.hidden_gathered ? ctx.allocate(m, h) : ctx.activation(h);
    if (!saved.hidden_gathered) p.fill(rows_of(dhidden, t, h), 0.0f);
    if (m == 0) return dhidden;
    Buffer const dlog = p.upload(dlogits, DType::kF32);
    Buffer dgathered = gathers ? ctx.allocate(m, h) : Buffer{};
    MatrixRef const dx = gathers ? rows_of(dgathered, m, h) : rows_of(dhidden, saved.hidden.rows, h);
    MatrixRef const x = gathers ? rows_of(saved.gathered, m, h) : saved.hidden;
    if (kind_ == HeadKind::kMaskedLM) {
      std::int64_t const e = transform_width_;
      Buffer dnormalized = ctx.allocate(m, e);
      p.linear_backward({.x = rows_of(saved.normalized, m, e),
                         .w = s.value(word_embeddings_, config_.vocab_size, e),
                         .dy = rows_of(dlog, m, width_),
                         .dx = rows_of(dnormalized, m, e),
                         .dw = s.grad(word_embeddings_, config_.vocab_size, e),
                         .db = s.grad_data(decoder_bias_)});
      Buffer dactivated = ctx.allocate(m, e);
      norm_.backward(s, rows_of(saved.activated, m, e), MatrixRef{}, rows_of(dnormalized, m, e),
                     rows_of(dactivated, m, e));
      p.activation({.x = rows_of(saved.pre, m, e),
                    .dy = rows_of(dactivated, m, e),
                    .out = rows_of(dactivated, m, e),
                    .activation = config_.hidden_act});
      pooler_.backward(s, x, rows_of(dactivated, m, e), dx);
    } else {
      MatrixRef classifier_in = gathers ? x : saved.hidden;
      if (pooled()) classifier_in = rows_of(saved.activated, m, h);
      if (saved.classifier_dropout.active()) classifier_in = rows_of(saved.classifier_input, m, h);
      Buffer dclassifier_in = pooled() ? ctx.allocate(m, h) : Buffer{};
      MatrixRef const dcin = pooled() ? rows_of(dclassifier_in, m, h) : dx;
      classifier_.backward(s, classifier_in, rows_of(dlog, m, width_), dcin);
      if (saved.classifier_dropout.active()) saved.classifier_dropout.apply(p, dcin, dcin);
      if (pooled()) {
        p.activation({.x = rows_of(saved.pre, m, h), .dy = dcin, .out = dcin, .activation = config_.pooler_hidden_act});
        pooler_.backward(s, x, dcin, dx);
        if (saved.pooler_dropout.active()) saved.pooler_dropout.apply(p, dx, dx);
      }
    }
    if (gathers) saved.read->scatter_add(p, dx, rows_of(dhidden, t, h));
    return dhidden;
  }

 private:
  bool pooled() const { return kind_ == HeadKind::kSequenceClassification || kind_ == HeadKind::kMultipleChoice; }
  bool gathers() const { return kind_ != HeadKind::kTokenClassification && kind_ != HeadKind::kQuestionAnswering; }

  ModelConfig config_;
  HeadKind kind_;
  ProblemType problem_;
  std::size_t word_embeddings_;
  std::int64_t width_ = 0;
  std::int64_t transform_width_ = 0;
  TrainableLinear pooler_;  // the pooler's dense, or the masked LM's transform
  TrainableLinear classifier_;
  TrainableLayerNorm norm_;
  std::size_t decoder_bias_ = TrainableLinear::kNone;
};

}  // namespace flashdeberta

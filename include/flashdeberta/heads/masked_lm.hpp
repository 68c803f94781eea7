// The masked-LM head (spec 6.1), both layouts found in real files:
//   legacy     cls.predictions.transform.dense [E, H], transform.LayerNorm [E], cls.predictions.bias [V],
//              decoder cls.predictions.decoder.weight [V, E] (tied to the word embeddings; usually omitted)
//   non-legacy lm_predictions.lm_head.dense [H, H], lm_predictions.lm_head.LayerNorm [H],
//              lm_predictions.lm_head.bias [V], decoder = the word embeddings (needs E = H)
//   logits = LayerNorm(act(h . W^T + b)) . decoder^T + bias,  act = hidden_act.
// The file decides the layout (config.json's `legacy` breaks a tie): the Microsoft checkpoints ship
// lm_predictions.* while HF's default legacy=true ignores them and initializes a random head, so HF
// reproduces their logits only with legacy=false, which is what loading them here gives.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "flashdeberta/heads/head_support.hpp"
#include "flashdeberta/heads/registered_head.hpp"

namespace flashdeberta {

enum class MaskedLMLayout {
  kLegacy,  // cls.predictions.*
  kLMHead,  // lm_predictions.lm_head.*
};

template <class P>
class MaskedLMHead {
  static_assert(ExecutionPolicy<P>, "MaskedLMHead<P> needs an execution policy");

 public:
  using Matrix = DeviceMatrix<typename P::Buffer>;
  static constexpr HeadKind kKind = HeadKind::kMaskedLM;

  MaskedLMHead(P const& policy, Checkpoint const& checkpoint, ModelConfig const& c)
      : vocab_(c.vocab_size), activation_(c.hidden_act), eps_(c.layer_norm_eps) {
    HeadWeights<P> const w(policy, checkpoint, "masked-LM head");
    bool const legacy_present = w.has("cls.predictions.transform.dense.weight");
    bool const lm_head_present = w.has("lm_predictions.lm_head.dense.weight");
    layout_ = legacy_present && lm_head_present ? (c.legacy ? MaskedLMLayout::kLegacy : MaskedLMLayout::kLMHead)
              : lm_head_present                 ? MaskedLMLayout::kLMHead
              : legacy_present                  ? MaskedLMLayout::kLegacy
                                                : (c.legacy ? MaskedLMLayout::kLegacy : MaskedLMLayout::kLMHead);
    std::int64_t const e = c.embedding_size;
    std::int64_t const h = c.hidden_size;
    if (layout_ == MaskedLMLayout::kLegacy) {
      std::string const p = "cls.predictions.";
      std::string const why = "embedding_size x hidden_size from config.json";
      width_ = e;
      dense_ = w.matrix(p + "transform.dense.weight", e, h, why);
      dense_bias_ = w.vector(p + "transform.dense.bias", e, why);
      gamma_ = w.vector(p + "transform.LayerNorm.weight", e, why);
      beta_ = w.vector(p + "transform.LayerNorm.bias", e, why);
      // HF's decoder is Linear(E, V) and adds its own bias, tied to cls.predictions.bias when the word
      // embeddings are tied (then the file usually holds only cls.predictions.bias); a file saved untied
      // holds both, and decoder.bias is the one HF adds.
      std::string const bias = w.has(p + "decoder.bias") ? p + "decoder.bias" : p + "bias";
      bias_ = w.vector(bias, vocab_, "vocab_size from config.json");
      // Tied to the word embeddings and then left out of the file; a file that has it (saved with
      // tie_word_embeddings false, or by older code) is used as it is.
      if (w.has(p + "decoder.weight"))
        decoder_ = w.matrix(p + "decoder.weight", vocab_, e, "vocab_size x embedding_size from config.json");
    } else {
      std::string const p = "lm_predictions.lm_head.";
      std::string const why = "hidden_size from config.json";
      FLASHDEBERTA_REQUIRE(e == h, w.files() << ": the masked-LM head lm_predictions.lm_head.* multiplies by the word "
                                             << "embeddings [V, " << e
                                             << "], which needs embedding_size = hidden_size (" << h << ")");
      width_ = h;
      dense_ = w.matrix(p + "dense.weight", h, h, why);
      dense_bias_ = w.vector(p + "dense.bias", h, why);
      gamma_ = w.vector(p + "LayerNorm.weight", h, why);
      beta_ = w.vector(p + "LayerNorm.bias", h, why);
      bias_ = w.vector(p + "bias", vocab_, "vocab_size from config.json");
    }
    if (!decoder_) tied_copy_ = w.word_embeddings_for_gemm(vocab_, width_);
  }

  MaskedLMLayout layout() const { return layout_; }
  bool decoder_tied() const { return !decoder_.has_value(); }

  // What forward allocates in policy memory for `batch` and `request`, besides the hidden states: the
  // gathered rows (M, H), the transform and its LayerNorm (M, E) each, and the logits (M, V), which at
  // V = 128k dominate (512 KB per token in fp32; DebertaWith::forward checks they fit).
  std::int64_t output_bytes(Batch const& batch, HeadRequest const& request, std::int64_t hidden_size,
                            DType dtype) const {
    double const m = static_cast<double>(request.tokens ? request.tokens->size() : batch.input_ids.size());
    double const columns = static_cast<double>(hidden_size + 2 * width_ + vocab_);
    return detail::saturated_bytes(m * columns * static_cast<double>(dtype_size(dtype)));
  }

  // logits (M, V) for the requested tokens (all T by default), as HF's "logits" rows.
  DeviceHeadOutput<P> forward(HeadInput<P> const& in) const {
    P const& p = in.policy;
    std::int64_t const tokens = in.hidden.tokens;
    std::int64_t const h = in.hidden.hidden_size;
    DeviceHeadTensor<P> logits{.name = "logits", .rows = HeadRows::kTokens, .width = vocab_};
    typename P::Buffer indices, gathered;
    MatrixRef x = in.hidden.ref();  // (M, H)
    if (in.request.tokens) {
      std::vector<std::int32_t> rows;
      rows.reserve(in.request.tokens->size());
      for (std::int64_t t : *in.request.tokens) {
        FLASHDEBERTA_REQUIRE(t >= 0 && t < tokens,
                             "masked LM: requested token " << t << " is outside the batch's " << tokens << " tokens");
        rows.push_back(static_cast<std::int32_t>(t));
        logits.tokens.push_back(t);
      }
      gathered = gather_rows(p, x, std::span<std::int32_t const>(rows), indices);
      x = rows_of(gathered, static_cast<std::int64_t>(rows.size()), h);
    } else {
      logits.tokens.resize(static_cast<std::size_t>(tokens));
      for (std::int64_t t = 0; t < tokens; ++t) logits.tokens[t] = t;
    }
    std::int64_t const m = static_cast<std::int64_t>(logits.tokens.size());
    logits.row_count = m;
    logits.values = p.allocate(m * vocab_, p.compute_dtype());
    if (m > 0) {
      auto transformed = p.allocate(m * width_, p.compute_dtype());  // (M, E)
      p.gemm({.a = x,
              .b = dense_.ref(),
              .bias = dense_bias_.data(),
              .out = rows_of(transformed, m, width_),
              .activation = activation_});
      auto normalized = p.allocate(m * width_, p.compute_dtype());  // (M, E)
      p.layer_norm({.x = rows_of(transformed, m, width_),
                    .gamma = gamma_.data(),
                    .beta = beta_.data(),
                    .eps = eps_,
                    .out = rows_of(normalized, m, width_)});
      MatrixRef const decoder = decoder_     ? decoder_->ref()
                                : tied_copy_ ? tied_copy_->ref()
                                             : in.word_embeddings;  // (V, E)
      FLASHDEBERTA_REQUIRE(decoder.rows == vocab_ && decoder.cols == width_,
                           "masked LM: the decoder is (" << decoder.rows << ", " << decoder.cols << "), expected ("
                                                         << vocab_ << ", " << width_ << ")");
      p.gemm({.a = rows_of(normalized, m, width_),
              .b = decoder,
              .bias = bias_.data(),
              .out = rows_of(logits.values, m, vocab_),
              .accumulate_f64 = true});
      p.fence();
    }
    DeviceHeadOutput<P> out;
    out.tensors.push_back(std::move(logits));
    return out;
  }

 private:
  MaskedLMLayout layout_ = MaskedLMLayout::kLegacy;
  std::int64_t vocab_ = 0;
  std::int64_t width_ = 0;  // E (legacy) or H
  Activation activation_ = Activation::kGelu;
  float eps_ = 1e-7f;
  Matrix dense_;
  typename P::Buffer dense_bias_, gamma_, beta_, bias_;
  std::optional<Matrix> decoder_;
  // The tied decoder's own float32 copy where the backbone keeps a 16-bit table as stored (word_embeddings_for_gemm).
  std::optional<Matrix> tied_copy_;
};

template <>
struct RegisteredHead<HeadKind::kMaskedLM> : HeadTemplate<MaskedLMHead> {};

}  // namespace flashdeberta

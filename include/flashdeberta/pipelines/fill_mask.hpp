// HF's fill-mask pipeline after the model: for each mask token, the top_k tokens of the softmax over the
// vocabulary, each with its score, the token's text and the input with the mask replaced by it (padding
// removed; special tokens skipped when the input has a single mask, kept otherwise so the other masks
// stay visible, as HF does). With targets (HF's targets=, as ids: target_ids() resolves the strings), the
// softmax is still over the whole vocabulary but only the targets compete for the top_k, which is capped
// at their number.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/pipelines/scores.hpp"

namespace flashdeberta::pipelines {

struct MaskPrediction {
  float score = 0.0f;
  std::int64_t token = 0;
  std::string token_str;
  std::string sequence;
};

// `input_ids`: the encoded input; `mask_positions`: where its masks are, in order; `logits`:
// (mask count, vocab) row-major, a row per mask. `decode(ids, skip_special_tokens)` is Tokenizer::decode.
// `targets`: empty, or the only ids that may be predicted (each below vocab). Returns a list of predictions
// per mask.
template <class Decode>
std::vector<std::vector<MaskPrediction>> fill_mask(std::span<std::int64_t const> input_ids,
                                                   std::span<std::size_t const> mask_positions,
                                                   std::span<float const> logits, std::size_t vocab, std::size_t k,
                                                   std::int64_t pad_id, Decode&& decode,
                                                   std::span<std::int64_t const> targets = {}) {
  FLASHDEBERTA_REQUIRE(
      vocab > 0 && logits.size() == mask_positions.size() * vocab,
      "fill-mask: " << logits.size() << " logits for " << mask_positions.size() << " masks of " << vocab << " tokens");
  bool const single = mask_positions.size() == 1;
  std::vector<std::vector<MaskPrediction>> out;
  for (std::size_t m = 0; m < mask_positions.size(); ++m) {
    std::vector<float> const p = softmax(logits.subspan(m * vocab, vocab));
    std::vector<std::int64_t> best;
    if (targets.empty()) {
      best = top_k(p, k);
    } else {
      std::vector<float> among;  // the targets' probabilities, in the targets' order
      for (std::int64_t id : targets) {
        FLASHDEBERTA_REQUIRE(id >= 0 && static_cast<std::size_t>(id) < vocab,
                             "fill-mask: target id " << id << " is outside the model's " << vocab << " rows");
        among.push_back(p[id]);
      }
      for (std::int64_t i : top_k(among, k)) best.push_back(targets[i]);
    }
    std::vector<MaskPrediction> row;
    for (std::int64_t id : best) {
      std::vector<std::int64_t> filled;
      for (std::size_t t = 0; t < input_ids.size(); ++t) {
        std::int64_t const v = t == mask_positions[m] ? id : input_ids[t];
        if (v != pad_id) filled.push_back(v);
      }
      std::int64_t const one[1] = {id};
      row.push_back({p[id], id, decode(std::span<std::int64_t const>(one), false),
                     decode(std::span<std::int64_t const>(filled), single)});
    }
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace flashdeberta::pipelines

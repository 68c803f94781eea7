// Where the texts of one GLiNER<P>::logits() call sit in the batched matrices of GLiNER's layers, and the
// row indices the policy's gathers read them with (the embedding op as a row gather, gliner_layers.hpp).
//
// Texts keep their order. Text i owns words [word_offset[i], word_offset[i + 1]) of the (W, D) word matrix,
// labels [label_offset[i], label_offset[i + 1]) of the (C, D) prompt matrix and span rows
// [K word_offset[i], K word_offset[i + 1]) of the (W K, D) span matrix (row (w, k): the span of words w .. w+k).
// Every matrix a gather reads has one zero row after its data rows (row T of the token matrix, row W of the
// word matrix): words the tokenizer's truncation cut off, and spans or windows past the end of their text,
// read it, so they stay zeros as in GLiNER's padded tensors.
#pragma once

#include <cstdint>
#include <vector>

#include "flashdeberta/core/batch.hpp"
#include "flashdeberta/core/error.hpp"
#include "flashdeberta/gliner/gliner_inputs.hpp"

namespace flashdeberta {

struct GlinerBatch {
  std::vector<std::int64_t> word_offset{0};   // (B + 1)
  std::vector<std::int64_t> label_offset{0};  // (B + 1)
  std::vector<std::int32_t> word_rows;        // (W) token row of each word's first token; T for a word cut off
  std::vector<std::int32_t> label_rows;       // (C) token row of each label's prompt token

  // inputs packed into `batch` in order (Batch::from_sequences of their input ids).
  static GlinerBatch make(std::vector<GlinerInput> const& inputs, Batch const& batch) {
    FLASHDEBERTA_REQUIRE(batch.batch_size() == static_cast<std::int64_t>(inputs.size()),
                         "GLiNER: " << inputs.size() << " inputs packed into a batch of " << batch.batch_size());
    GlinerBatch b;
    auto const zero_row = static_cast<std::int32_t>(batch.total_tokens());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      GlinerInput const& in = inputs[i];
      std::int32_t const first = batch.cu_seqlens[i];
      std::int64_t const n = in.num_words();
      std::size_t const start = b.word_rows.size();
      b.word_rows.resize(start + static_cast<std::size_t>(n), zero_row);
      for (std::size_t t = 0; t < in.words_mask.size(); ++t) {
        std::int64_t const slot = in.words_mask[t];
        if (slot > 0 && slot <= n) b.word_rows[start + slot - 1] = first + static_cast<std::int32_t>(t);
      }
      for (std::int64_t const token : in.label_tokens) b.label_rows.push_back(first + static_cast<std::int32_t>(token));
      b.word_offset.push_back(b.word_offset.back() + n);
      b.label_offset.push_back(b.label_offset.back() + static_cast<std::int64_t>(in.label_tokens.size()));
    }
    return b;
  }

  std::int64_t texts() const { return static_cast<std::int64_t>(word_offset.size()) - 1; }
  std::int64_t words() const { return word_offset.back(); }
  std::int64_t labels() const { return label_offset.back(); }
  std::int64_t words_of(std::int64_t i) const { return word_offset[i + 1] - word_offset[i]; }
  std::int64_t labels_of(std::int64_t i) const { return label_offset[i + 1] - label_offset[i]; }

  // (W) for each word w (at s in its text of n words): word w + j if s + j < n, else W (the zero row).
  std::vector<std::int32_t> window_rows(std::int64_t j) const {
    std::vector<std::int32_t> rows;
    rows.reserve(static_cast<std::size_t>(words()));
    for (std::int64_t i = 0; i < texts(); ++i)
      for (std::int64_t s = 0; s < words_of(i); ++s)
        rows.push_back(static_cast<std::int32_t>(s + j < words_of(i) ? word_offset[i] + s + j : words()));
    return rows;
  }

  // (W K) for each span row (w, k) of a valid span (s + k < n): word w (its start) or w + k (its end);
  // W (the zero row) for spans past the text.
  std::vector<std::int32_t> span_rows(std::int64_t k_max, bool end) const {
    std::vector<std::int32_t> rows;
    rows.reserve(static_cast<std::size_t>(words() * k_max));
    for (std::int64_t i = 0; i < texts(); ++i) {
      for (std::int64_t s = 0; s < words_of(i); ++s) {
        for (std::int64_t k = 0; k < k_max; ++k) {
          std::int64_t const w = word_offset[i] + s + (end ? k : 0);
          rows.push_back(static_cast<std::int32_t>(s + k < words_of(i) ? w : words()));
        }
      }
    }
    return rows;
  }

  // (W K) the text of each span row, B (a zero row after the B per-text rows) for spans past the text.
  std::vector<std::int32_t> span_texts(std::int64_t k_max) const {
    std::vector<std::int32_t> rows;
    rows.reserve(static_cast<std::size_t>(words() * k_max));
    for (std::int64_t i = 0; i < texts(); ++i)
      for (std::int64_t s = 0; s < words_of(i); ++s)
        for (std::int64_t k = 0; k < k_max; ++k)
          rows.push_back(static_cast<std::int32_t>(s + k < words_of(i) ? i : texts()));
    return rows;
  }
};

}  // namespace flashdeberta

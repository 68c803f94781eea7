// RowSubset<P>: the rows of the packed (T, .) activations that a head reads, when it reads fewer than all: each
// sequence's first token (sequence classification, multiple choice) or the labelled tokens (masked LM). No loss
// reads the other rows of the last layer's output, so that layer runs its output projection, dropout, LayerNorms
// and feed-forward on these rows only; its attention still reads every row's keys and values. Those parts are
// three quarters of a layer's GEMM work: at 12 layers about 6% of a step's, forward and backward.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "flashdeberta/train/train_context.hpp"

namespace flashdeberta {

template <TrainingPolicy P>
class RowSubset {
 public:
  RowSubset() = default;
  RowSubset(P const& p, std::vector<std::int32_t> rows)
      : rows_(std::move(rows)), indices_(p.upload_indices(std::span<std::int32_t const>(rows_))) {}

  std::int64_t size() const { return static_cast<std::int64_t>(rows_.size()); }
  std::vector<std::int32_t> const& rows() const { return rows_; }

  // to (m, W) = the subset's rows of from (T, W).
  void gather(P const& p, MatrixRef const& from, MatrixRef const& to) const {
    if (rows_.empty()) return;
    EmbeddingArgs gather;
    gather.ids = indices();
    gather.word = from;
    gather.out = to;
    p.embedding(gather);
  }

  // to (T, W): the subset's rows += from (m, W); the caller zeroes the rest.
  void scatter_add(P const& p, MatrixRef const& from, MatrixRef const& to) const {
    if (rows_.empty()) return;
    EmbeddingBackwardArgs scatter;
    scatter.ids = indices();
    scatter.dout = from;
    scatter.dword = to;
    p.embedding_backward(scatter);
  }

  // out (m, W) = dropout(x (m, W)) with the mask the full (T, W) matrix would draw on these rows: row r of the
  // subset takes the counters of its packed row, so a step drops the same elements with or without the subset.
  void dropout(P const& p, DropoutSite const& site, MatrixRef const& x, MatrixRef const& out) const {
    auto const width = static_cast<std::uint64_t>(x.cols);
    for (std::size_t r = 0; r < rows_.size(); ++r) {
      DropoutSite row_site = site;
      row_site.offset += static_cast<std::uint64_t>(rows_[r]) * width;
      auto const at = static_cast<std::int64_t>(r);
      row_site.apply(p, x.row_range(at, 1), out.row_range(at, 1));
    }
  }

 private:
  std::int32_t const* indices() const { return static_cast<std::int32_t const*>(indices_.data()); }

  std::vector<std::int32_t> rows_;
  typename P::Buffer indices_;
};

// Dropout of an activation of `subset`'s rows (m, W), or of all T rows when subset is null.
template <TrainingPolicy P>
void drop_rows(P const& p, DropoutSite const& site, RowSubset<P> const* subset, MatrixRef const& x,
               MatrixRef const& out) {
  if (!site.active()) return;
  if (subset != nullptr) {
    subset->dropout(p, site, x, out);
  } else {
    site.apply(p, x, out);
  }
}

}  // namespace flashdeberta

// The backward of dense_ops' conv1d (Conv1dBackwardArgs): the transpose of the same taps and shifts.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include <Eigen/Core>

#include "flashdeberta/eigen/ops/eigen_maps.hpp"
#include "flashdeberta/eigen/ops/op_threads.hpp"
#include "flashdeberta/eigen/ops/training_elementwise_ops.hpp"
#include "flashdeberta/policy/training_op_args.hpp"

namespace flashdeberta::eigen_ops {

// The forward computes, for each tap u and offset = u - (kernel - 1) / 2, out[t] += shift_u(x)[t] . W_u^T per
// group, where shift_u(x)[t] = x[t + offset] when token t + offset is in t's sequence at position
// positions[t] + offset (no hole between them), else zero. Its transpose, tap by tap:
//   dW_u  += dpre_g^T . shift_u(x)_g                          (C / groups, C / groups) per group g
//   dx[s] += (dpre_g . W_u,g)[s - offset]  for each s whose pair (s - offset, s) the forward linked
//   dbias += column sums of dpre
// The pairs are one-to-one for a given tap, so dx gathers: one writer per row, no atomics.
inline void conv1d_backward(Conv1dBackwardArgs const& c, int threads) {
  char const* op = "conv1d_backward";
  std::int64_t const tokens = c.dpre.rows;
  std::int64_t const channels = c.dpre.cols;
  require_conv1d_backward_args(c);
  FLASHDEBERTA_REQUIRE(
      c.sequences.batch == 0 || (c.sequences.cu_seqlens != nullptr && c.sequences.positions != nullptr &&
                                 c.sequences.cu_seqlens[c.sequences.batch] <= tokens),
      op << ": the sequence layout does not describe " << tokens << " tokens");
  std::int64_t const group_width = channels / c.groups;
  std::int64_t const pad = (c.kernel_size - 1) / 2;

  // The sequence [begin, end) of each token; a token outside every sequence has the empty one.
  std::vector<std::int64_t> sequence_begin(static_cast<std::size_t>(tokens), 0);
  std::vector<std::int64_t> sequence_end(static_cast<std::size_t>(tokens), 0);
  for (std::int64_t b = 0; b < c.sequences.batch; ++b) {
    for (std::int64_t t = c.sequences.cu_seqlens[b]; t < c.sequences.cu_seqlens[b + 1]; ++t) {
      sequence_begin[static_cast<std::size_t>(t)] = c.sequences.cu_seqlens[b];
      sequence_end[static_cast<std::size_t>(t)] = c.sequences.cu_seqlens[b + 1];
    }
  }
  // Whether the forward read token t + offset as the neighbour of token t (the same test as conv1d's).
  auto const linked = [&](std::int64_t t, std::int64_t offset) {
    std::int64_t const s = t + offset;
    auto const i = static_cast<std::size_t>(t);
    return s >= sequence_begin[i] && s < sequence_end[i] &&
           c.sequences.positions[s] - c.sequences.positions[t] == offset;
  };

  auto const* weight = static_cast<float const*>(c.weight);  // (C, C / groups, kernel)
  auto const dpre = cmap(c.dpre);
  OpThreads const rows_team =
      threads_for(static_cast<double>(tokens * channels), kMinElementsPerThread, threads, tokens);
  RowMatrix shifted(tokens, channels);    // shift_u(x)
  RowMatrix tap(channels, group_width);   // W[:, :, u]
  RowMatrix dtap(channels, group_width);  // its gradient
  RowMatrix dshifted(tokens, channels);   // dpre . W_u per group, the gradient of shift_u(x)
  if (!c.dx.empty()) map(c.dx).setZero();
  for (std::int64_t u = 0; u < c.kernel_size; ++u) {
    std::int64_t const offset = u - pad;
    if (c.dweight != nullptr) {
      for_each_index(rows_team, tokens, [&](std::int64_t t) {
        if (linked(t, offset)) {
          shifted.row(t) = cmap(c.x).row(t + offset);
        } else {
          shifted.row(t).setZero();
        }
      });
      for (std::int64_t g = 0; g < c.groups; ++g) {
        dtap.middleRows(g * group_width, group_width).noalias() =
            dpre.middleCols(g * group_width, group_width).transpose() *
            shifted.middleCols(g * group_width, group_width);
      }
      for (std::int64_t o = 0; o < channels; ++o)
        for (std::int64_t i = 0; i < group_width; ++i)
          c.dweight[(o * group_width + i) * c.kernel_size + u] += dtap(o, i);
    }
    if (!c.dx.empty()) {
      for (std::int64_t o = 0; o < channels; ++o)
        for (std::int64_t i = 0; i < group_width; ++i) tap(o, i) = weight[(o * group_width + i) * c.kernel_size + u];
      for (std::int64_t g = 0; g < c.groups; ++g) {
        dshifted.middleCols(g * group_width, group_width).noalias() =
            dpre.middleCols(g * group_width, group_width) * tap.middleRows(g * group_width, group_width);
      }
      auto dx = map(c.dx);
      for_each_index(rows_team, tokens, [&](std::int64_t s) {
        std::int64_t const t = s - offset;
        if (t >= 0 && t < tokens && linked(t, offset)) dx.row(s) += dshifted.row(t);
      });
    }
  }
  if (c.dbias != nullptr) add_column_sums(c.dpre, c.dbias, threads);
}

}  // namespace flashdeberta::eigen_ops

// What training requires of an execution policy beyond the forward (concepts.hpp): the backward ops, dropout and
// the optimizer's update of training_op_args.hpp, all in float32.
#pragma once

#include <concepts>
#include <cstdint>
#include <span>

#include "flashdeberta/policy/concepts.hpp"
#include "flashdeberta/policy/training_op_args.hpp"

namespace flashdeberta {

template <class P>
concept TrainingPolicy = ExecutionPolicy<P> &&
    requires(P const& p, LinearBackwardArgs const& linear, LayerNormBackwardArgs const& norm,
             ActivationArgs const& activation, EmbeddingBackwardArgs const& embedding, Conv1dBackwardArgs const& conv,
             AttentionBackwardArgs const& attention, DropoutArgs const& dropout, AdamWArgs const& adamw,
             MatrixRef const& matrix, float const* values, std::int64_t count, float value) {
  p.linear_backward(linear);
  p.layer_norm_backward(norm);
  p.activation(activation);
  p.embedding_backward(embedding);
  p.conv1d_backward(conv);
  p.disentangled_attention_backward(attention);
  p.dropout(dropout);
  p.adamw(adamw);
  p.fill(matrix, value);                                        // every element of matrix = value
  { p.sum_of_squares(values, count) } -> std::same_as<double>;  // in float64
};

// A policy whose every call costs a launch, and whose reductions a round trip to the host (a GPU), takes the many
// contiguous runs of the optimizer's bookkeeping (every gradient block; the touched rows of the word embeddings, a
// run per few rows) in one call each, as PyTorch's foreach ops and clip_grad_norm_ do: ParameterSet makes one call
// where it would make thousands. Policies without it get one call per run.
//   fill(runs, value): every element of every run = value;  sum_of_squares(runs): the float64 sum of the squares of
//   every element of every run.
template <class P>
concept BatchesFloatRuns = requires(P const& p, std::span<FloatRun const> runs, float value) {
  p.fill(runs, value);
  { p.sum_of_squares(runs) } -> std::same_as<double>;
};

}  // namespace flashdeberta

// Kokkos kernels of the row-wise dense operations: LayerNorm with residual, embedding gather, conv1d, LSTM cell.
#pragma once

#include "flashdeberta/kokkos/ops/common.hpp"
#include "flashdeberta/policy/op_args.hpp"

namespace flashdeberta::kokkos_ops {

// One team per row. The sum x + residual is formed in float32 as PyTorch does, the statistics
// accumulate in double (as the reference policy); the sum is recomputed in every pass instead of being
// staged in out, so out may alias x or residual.
template <class ExecSpace>
void layer_norm(ExecSpace const& space, LayerNormArgs const& args) {
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = typename Policy::member_type;
  Strided<float const> const x = cstrided(args.x, "layer_norm input");
  Strided<float> const out = strided(args.out, "layer_norm output");
  bool const has_residual = !args.residual.empty();
  Strided<float const> const residual = has_residual ? cstrided(args.residual, "layer_norm residual") : x;
  FLASHDEBERTA_REQUIRE(out.rows == x.rows && out.cols == x.cols &&
                           (!has_residual || (residual.rows == x.rows && residual.cols == x.cols)),
                       "layer_norm shapes do not agree: x (" << x.rows << ", " << x.cols << "), out (" << out.rows
                                                             << ", " << out.cols << ")");
  FLASHDEBERTA_REQUIRE(args.gamma != nullptr && args.beta != nullptr, "layer_norm needs gamma and beta");
  if (x.rows == 0) return;
  auto const* gamma = static_cast<float const*>(args.gamma);  // (N)
  auto const* beta = static_cast<float const*>(args.beta);    // (N)
  float const eps = args.eps;
  std::int64_t const cols = x.cols;

  Kokkos::parallel_for(
      "flashdeberta::layer_norm", Policy(space, static_cast<int>(x.rows), Kokkos::AUTO),
      KOKKOS_LAMBDA(Member const& team) {
        std::int64_t const r = team.league_rank();
        float const* xr = x.row(r);
        float const* rr = has_residual ? residual.row(r) : nullptr;
        float* yr = out.row(r);
        double sum = 0.0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, cols),
            [&](std::int64_t c, double& partial) { partial += rr != nullptr ? xr[c] + rr[c] : xr[c]; }, sum);
        float const mean = static_cast<float>(sum / static_cast<double>(cols));
        double squares = 0.0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(team, cols),
            [&](std::int64_t c, double& partial) {
              float const v = rr != nullptr ? xr[c] + rr[c] : xr[c];
              double const d = static_cast<double>(v - mean);
              partial += d * d;
            },
            squares);
        float const variance = static_cast<float>(squares / static_cast<double>(cols));
        float const inv_std = 1.0f / math::sqrt(variance + eps);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, cols), [&](std::int64_t c) {
          float const v = rr != nullptr ? xr[c] + rr[c] : xr[c];
          yr[c] = (v - mean) * inv_std * gamma[c] + beta[c];
        });
      });
}

// out (T, E) = word[ids] + position[positions] + token_type[token_types], in HF's order of additions.
template <class ExecSpace>
void embedding(ExecSpace const& space, EmbeddingArgs const& args) {
  Strided<float const> const word = cstrided(args.word, "word embeddings");
  Strided<float> const out = strided(args.out, "embedding output");
  bool const has_position = !args.position.empty();
  bool const has_token_type = !args.token_type.empty();
  Strided<float const> const position = has_position ? cstrided(args.position, "position embeddings") : word;
  Strided<float const> const token_type = has_token_type ? cstrided(args.token_type, "token type embeddings") : word;
  FLASHDEBERTA_REQUIRE(word.cols == out.cols && (!has_position || position.cols == out.cols) &&
                           (!has_token_type || token_type.cols == out.cols),
                       "embedding tables and output differ in width: word " << word.cols << ", output " << out.cols);
  std::int32_t const* ids = args.ids;
  std::int32_t const* positions = args.positions;
  std::int32_t const* token_types = args.token_types;
  std::int64_t const width = out.cols;
  bool const relu = args.relu;
  Kokkos::parallel_for(
      "flashdeberta::embedding", Kokkos::RangePolicy<ExecSpace>(space, 0, out.rows * width),
      KOKKOS_LAMBDA(std::int64_t idx) {
        std::int64_t const t = idx / width;
        std::int64_t const c = idx % width;
        float v = word(ids[t], c);
        if (has_position) v += position(positions[t], c);
        if (has_token_type) v += token_type(token_types[t], c);
        out(t, c) = relu && v < 0.0f ? 0.0f : v;
      });
}

// out (T, C) = act(conv1d(x) + bias) within each sequence. One team per token gathers its kernel-size
// neighbourhood (zero where the neighbour lies outside the sequence or across a hole in positions) into
// scratch laid out (C, kernel) like a weight row, so each output channel is one contiguous dot product
// over its group's (C / groups, kernel) weights.
template <class ExecSpace>
void conv1d(ExecSpace const& space, Conv1dArgs const& args) {
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = typename Policy::member_type;
  Strided<float const> const x = cstrided(args.x, "conv input");
  Strided<float> const out = strided(args.out, "conv output");
  std::int64_t const channels = x.cols;
  std::int64_t const kernel = args.kernel_size;
  FLASHDEBERTA_REQUIRE(args.groups > 0 && channels % args.groups == 0 && kernel > 0,
                       "conv1d with " << channels << " channels, " << args.groups << " groups, kernel " << kernel);
  FLASHDEBERTA_REQUIRE(out.rows == x.rows && out.cols == channels, "conv1d output (" << out.rows << ", " << out.cols
                                                                                     << ") for input (" << x.rows
                                                                                     << ", " << channels << ")");
  if (x.rows == 0) return;
  std::int64_t const group_width = channels / args.groups;
  std::int64_t const pad = (kernel - 1) / 2;
  auto const* weight = static_cast<float const*>(args.weight);  // (C, C / groups, kernel)
  auto const* bias = static_cast<float const*>(args.bias);      // (C)
  Activation const act = args.activation;
  std::int32_t const* cu_seqlens = args.sequences.cu_seqlens;
  std::int32_t const* positions = args.sequences.positions;
  std::int64_t const batch = args.sequences.batch;

  std::size_t const bytes = scratch_bytes<ExecSpace>(channels * kernel);
  int const level = scratch_level<ExecSpace>(bytes);
  Policy policy(space, static_cast<int>(x.rows), Kokkos::AUTO);
  policy.set_scratch_size(level, Kokkos::PerTeam(static_cast<int>(bytes)));
  Kokkos::parallel_for(
      "flashdeberta::conv1d", policy, KOKKOS_LAMBDA(Member const& team) {
        std::int64_t const t = team.league_rank();
        std::int64_t const b = sequence_of(cu_seqlens, batch, t);
        std::int64_t const begin = cu_seqlens[b];
        std::int64_t const end = cu_seqlens[b + 1];
        float* window = scratch_floats<ExecSpace>(team, level, channels * kernel);  // (C, kernel)
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, channels * kernel), [&](std::int64_t idx) {
          std::int64_t const u = idx / channels;
          std::int64_t const ch = idx % channels;
          std::int64_t const offset = u - pad;
          std::int64_t const s = t + offset;
          // Positions increase within a sequence, so the neighbour `offset` away in the original row can
          // only be the packed token `offset` away, and only if no hole lies between them.
          bool const valid = s >= begin && s < end && positions[s] - positions[t] == offset;
          window[ch * kernel + u] = valid ? x(s, ch) : 0.0f;
        });
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, channels), [&](std::int64_t o) {
          float const* w = weight + o * group_width * kernel;
          float const* in = window + (o / group_width) * group_width * kernel;
          float sum = 0.0f;
          for (std::int64_t i = 0; i < group_width * kernel; ++i) sum += in[i] * w[i];
          out(t, o) = apply_activation(act, sum + (bias != nullptr ? bias[o] : 0.0f));
        });
      });
}

// One work item per (row, direction, unit): the four gates of a unit are read together, the cell and
// hidden values written once.
template <class ExecSpace>
void lstm_cell(ExecSpace const& space, LstmCellArgs const& args) {
  std::int64_t const units = lstm_cell_units(args);
  Strided<float const> const gates_in = cstrided(args.gates_in, "lstm_cell gates");
  bool const has_rec = !args.gates_rec.empty();
  bool const has_prev = !args.cell_prev.empty();
  Strided<float const> const gates_rec = has_rec ? cstrided(args.gates_rec, "lstm_cell recurrent gates") : gates_in;
  Strided<float> const cell = strided(args.cell, "lstm_cell cell state");
  Strided<float const> const cell_prev = has_prev ? cstrided(args.cell_prev, "lstm_cell previous cell state")
                                                  : Strided<float const>{cell.data, cell.rows, cell.cols, cell.ld};
  Strided<float> const hidden = strided(args.hidden, "lstm_cell hidden state");
  std::int64_t const width = hidden.cols;  // directions x units
  Kokkos::parallel_for(
      "flashdeberta::lstm_cell", Kokkos::RangePolicy<ExecSpace>(space, 0, hidden.rows * width),
      KOKKOS_LAMBDA(std::int64_t idx) {
        std::int64_t const r = idx / width;
        std::int64_t const u = idx % width;
        std::int64_t const g = 4 * units * (u / units) + u % units;  // gate i of this unit
        float z[4];
        for (int q = 0; q < 4; ++q) {
          z[q] = gates_in(r, g + q * units);
          if (has_rec) z[q] += gates_rec(r, g + q * units);
        }
        auto const sigmoid = [](float x) { return 1.0f / (1.0f + math::exp(-x)); };
        float const c_prev = has_prev ? cell_prev(r, u) : 0.0f;
        float const c = sigmoid(z[1]) * c_prev + sigmoid(z[0]) * math::tanh(z[2]);
        cell(r, u) = c;
        hidden(r, u) = sigmoid(z[3]) * math::tanh(c);
      });
}

}  // namespace flashdeberta::kokkos_ops

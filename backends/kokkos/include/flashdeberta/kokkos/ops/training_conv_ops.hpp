// The backward of dense_ops' conv1d (Conv1dBackwardArgs) in Kokkos: the transpose of the same taps, as two
// batched GEMMs (training_gemm.hpp) over gathered operands, and column sums for the bias.
#pragma once

#include <cstdint>

#include "flashdeberta/kokkos/ops/training_elementwise_ops.hpp"
#include "flashdeberta/kokkos/ops/training_gemm.hpp"
#include "flashdeberta/policy/training_op_args.hpp"

namespace flashdeberta::kokkos_ops {

// Whether the forward read packed token t + offset as the neighbour of token t: both in t's sequence and their
// positions `offset` apart (no hole between them), conv1d's test. bounds (T, 2): each token's sequence
// [begin, end), empty for a token outside every sequence.
struct ConvLinks {
  std::int64_t const* bounds = nullptr;
  std::int32_t const* positions = nullptr;

  KOKKOS_INLINE_FUNCTION bool operator()(std::int64_t t, std::int64_t offset) const {
    std::int64_t const s = t + offset;
    return s >= bounds[2 * t] && s < bounds[2 * t + 1] && positions[s] - positions[t] == offset;
  }
};

// The forward computes, per tap u with offset = u - (kernel - 1) / 2 and per group g,
// out[t] += shift_u(x)[t] . W_u,g^T, where shift_u(x)[t] = x[t + offset] when the pair is linked, else zero. So
//   dW[o, i, u] += sum_t dpre[t, o] shift_u(x)[t, i]          one GEMM per (tap, group), K = the tokens
//   dx[s, i]     = sum_(u, o) dpre[s - offset_u, o] W[o, i, u]  over the pairs (s - offset_u, s) the forward linked:
//                  one GEMM per group, K = kernel x C / groups, every row of dx gathered by its own writer
//   dbias       += column sums of dpre
template <class ExecSpace>
void conv1d_backward(ExecSpace const& space, Conv1dBackwardArgs const& c) {
  char const* op = "conv1d_backward";
  std::int64_t const tokens = c.dpre.rows;
  std::int64_t const channels = c.dpre.cols;
  require_conv1d_backward_args(c);
  std::int64_t const batch = c.sequences.batch;
  std::int32_t const* cu_seqlens = c.sequences.cu_seqlens;
  FLASHDEBERTA_REQUIRE(batch == 0 || (cu_seqlens != nullptr && c.sequences.positions != nullptr &&
                                      read_element(space, cu_seqlens, batch) <= tokens),
                       op << ": the sequence layout does not describe " << tokens << " tokens");
  if (tokens == 0) return;
  std::int64_t const group_width = channels / c.groups;
  std::int64_t const groups = c.groups;
  std::int64_t const kernel = c.kernel_size;
  std::int64_t const pad = (kernel - 1) / 2;

  Kokkos::View<std::int64_t*, typename ExecSpace::memory_space> bounds_view(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, "flashdeberta::conv1d_backward_bounds"),
      static_cast<std::size_t>(2 * tokens));
  std::int64_t* bounds = bounds_view.data();
  Kokkos::parallel_for(
      "flashdeberta::conv1d_backward_bounds", Kokkos::RangePolicy<ExecSpace>(space, 0, tokens),
      KOKKOS_LAMBDA(std::int64_t t) {
        bool const inside = batch > 0 && t >= cu_seqlens[0] && t < cu_seqlens[batch];
        std::int64_t const b = inside ? sequence_of(cu_seqlens, batch, t) : 0;
        bounds[2 * t] = inside ? cu_seqlens[b] : 0;
        bounds[2 * t + 1] = inside ? cu_seqlens[b + 1] : 0;
      });
  ConvLinks const linked{bounds, c.sequences.positions};
  Strided<float const> const x = cstrided(c.x, "conv1d_backward x");
  Strided<float const> const dpre = cstrided(c.dpre, "conv1d_backward dpre");
  auto const* weight = static_cast<float const*>(c.weight);  // (C, C / groups, kernel)

  if (c.dweight != nullptr) {
    float* dweight = c.dweight;
    batched_gemm(
        space, "flashdeberta::conv1d_backward_dweight", GemmShape{kernel * groups, group_width, group_width, tokens},
        KOKKOS_LAMBDA(std::int64_t z, std::int64_t o, std::int64_t t) {
          return dpre(t, (z % groups) * group_width + o);
        },
        KOKKOS_LAMBDA(std::int64_t z, std::int64_t t, std::int64_t i) {
          std::int64_t const offset = z / groups - pad;
          return linked(t, offset) ? x(t + offset, (z % groups) * group_width + i) : 0.0f;
        },
        KOKKOS_LAMBDA(std::int64_t z, std::int64_t o, std::int64_t i, float sum) {
          std::int64_t const out_channel = (z % groups) * group_width + o;
          dweight[(out_channel * group_width + i) * kernel + z / groups] += sum;
        });
  }
  if (!c.dx.empty()) {
    Strided<float> const dx = strided(c.dx, "conv1d_backward dx");
    batched_gemm(
        space, "flashdeberta::conv1d_backward_dx", GemmShape{groups, tokens, group_width, kernel * group_width},
        KOKKOS_LAMBDA(std::int64_t g, std::int64_t s, std::int64_t kk) {
          std::int64_t const offset = kk / group_width - pad;
          std::int64_t const t = s - offset;
          bool const valid = t >= 0 && t < tokens && linked(t, offset);
          return valid ? dpre(t, g * group_width + kk % group_width) : 0.0f;
        },
        KOKKOS_LAMBDA(std::int64_t g, std::int64_t kk, std::int64_t i) {
          std::int64_t const out_channel = g * group_width + kk % group_width;
          return weight[(out_channel * group_width + i) * kernel + kk / group_width];
        },
        KOKKOS_LAMBDA(std::int64_t g, std::int64_t s, std::int64_t i, float sum) { dx(s, g * group_width + i) = sum; });
  }
  if (c.dbias != nullptr) add_column_sums(space, dpre, c.dbias);
}

}  // namespace flashdeberta::kokkos_ops

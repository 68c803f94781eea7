// Pieces shared by the Kokkos kernels: portable math names, device-side strided matrices, team scratch.
//
// Everything here is usable inside KOKKOS_LAMBDA bodies for any execution space (Serial, OpenMP, CUDA,
// HIP): plain structs of pointers and sizes, no host-only calls.
#pragma once

#include <Kokkos_Core.hpp>
#include <cstddef>
#include <cstdint>

#include "flashdeberta/core/matrix_ref.hpp"
#include "flashdeberta/math/activation.hpp"

namespace flashdeberta::kokkos_ops {

// Kokkos 3.7 moved the math functions from Kokkos::Experimental to Kokkos (4.x drops the old names).
namespace math {
#if KOKKOS_VERSION >= 30700
using Kokkos::exp;
using Kokkos::sqrt;
using Kokkos::tanh;
#else
using Kokkos::Experimental::exp;
using Kokkos::Experimental::sqrt;
using Kokkos::Experimental::tanh;
#endif
}  // namespace math

KOKKOS_INLINE_FUNCTION float max_of(float a, float b) { return a > b ? a : b; }

KOKKOS_INLINE_FUNCTION std::int64_t clamp_index(std::int64_t v, std::int64_t lo, std::int64_t hi) {
  return v < lo ? lo : (v > hi ? hi : v);
}

// A row-major (rows, cols) float matrix with row stride ld, in the execution space's memory.
template <class T>
struct Strided {
  T* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t ld = 0;

  KOKKOS_INLINE_FUNCTION T& operator()(std::int64_t r, std::int64_t c) const { return data[r * ld + c]; }
  KOKKOS_INLINE_FUNCTION T* row(std::int64_t r) const { return data + r * ld; }
};

inline void require_f32(MatrixRef const& m, char const* what) {
  FLASHDEBERTA_REQUIRE(m.dtype == DType::kF32,
                       "KokkosPolicy computes in float32 only; " << what << " is " << dtype_name(m.dtype));
}

inline Strided<float> strided(MatrixRef const& m, char const* what) {
  require_f32(m, what);
  return {static_cast<float*>(m.data), m.rows, m.cols, m.ld};
}

inline Strided<float const> cstrided(MatrixRef const& m, char const* what) {
  require_f32(m, what);
  return {static_cast<float const*>(m.data), m.rows, m.cols, m.ld};
}

// Team scratch in floats. A kernel asks for its per-team bytes at one level: level 0 (on-chip, small)
// when the request fits, level 1 (device memory, large) otherwise, so the same kernel runs for every
// head size and table size; the hot tiles of each kernel are sized to fit level 0 on GPUs.
template <class ExecSpace>
using ScratchFloats =
    Kokkos::View<float*, typename ExecSpace::scratch_memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

template <class ExecSpace>
std::size_t scratch_bytes(std::int64_t floats) {
  return ScratchFloats<ExecSpace>::shmem_size(static_cast<std::size_t>(floats));
}

template <class ExecSpace>
int scratch_level(std::size_t bytes) {
  return bytes <= static_cast<std::size_t>(Kokkos::TeamPolicy<ExecSpace>::scratch_size_max(0)) ? 0 : 1;
}

template <class ExecSpace, class Member>
KOKKOS_INLINE_FUNCTION float* scratch_floats(Member const& team, int level, std::int64_t floats) {
  return ScratchFloats<ExecSpace>(team.team_scratch(level), static_cast<std::size_t>(floats)).data();
}

// Index of the sequence holding packed token t: the last b with cu_seqlens[b] <= t (cu_seqlens is sorted).
KOKKOS_INLINE_FUNCTION std::int64_t sequence_of(std::int32_t const* cu_seqlens, std::int64_t batch, std::int64_t t) {
  std::int64_t lo = 0;
  std::int64_t hi = batch - 1;
  while (lo < hi) {
    std::int64_t const mid = (lo + hi + 1) / 2;
    if (cu_seqlens[mid] <= t) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

}  // namespace flashdeberta::kokkos_ops

// Stored floats (float16, bfloat16, float64; any alignment) to float32, at memory speed: a checkpoint's
// tensors are converted once at load, straight from the mapped file, and DeBERTa-v3's published checkpoints
// are float16, so this loop is most of what loading them costs.
//
// float16 goes through the CPU's conversion instructions, chosen at run time (AVX-512F: 16 values per
// instruction; F16C: 8), exact as half_to_float is (VCVTPH2PS widens every binary16, subnormals and
// infinities included, independent of MXCSR), but for a signaling NaN, which comes out quiet (sign and
// payload kept): a NaN weight is a NaN either way. bfloat16 is a 16-bit shift, written so that the
// compiler vectorizes it for whatever the build targets. Elsewhere (other CPUs, the CUDA compiler's host
// pass) the portable scalar loops run; they give the same bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "flashdeberta/core/dtype.hpp"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__)
#define FLASHDEBERTA_X86_CONVERT 1
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace flashdeberta::detail {

inline void half_to_float_portable(std::byte const* src, float* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    std::uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    out[i] = half_to_float(h);
  }
}

#if defined(FLASHDEBERTA_X86_CONVERT)
__attribute__((target("avx512f"))) inline void half_to_float_avx512(std::byte const* src, float* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i const h = _mm256_loadu_si256(reinterpret_cast<__m256i const*>(src + 2 * i));
    _mm512_storeu_ps(out + i, _mm512_cvtph_ps(h));
  }
  half_to_float_portable(src + 2 * i, out + i, n - i);
}

__attribute__((target("avx,f16c"))) inline void half_to_float_f16c(std::byte const* src, float* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i const h = _mm_loadu_si128(reinterpret_cast<__m128i const*>(src + 2 * i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  half_to_float_portable(src + 2 * i, out + i, n - i);
}
#endif

// The widest float16 conversion this CPU runs, chosen once per process.
inline void half_to_float_n(std::byte const* src, float* out, std::size_t n) {
#if defined(FLASHDEBERTA_X86_CONVERT)
  using Convert = void (*)(std::byte const*, float*, std::size_t);
  static Convert const convert = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return Convert{&half_to_float_avx512};
    // F16C through CPUID leaf 1 (ECX bit 29): clang does not know "f16c" as a __builtin_cpu_supports name.
    // "avx" there covers the OS saving the YMM registers, which F16C's 256-bit form needs too.
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    bool const f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
    if (f16c && __builtin_cpu_supports("avx")) return Convert{&half_to_float_f16c};
    return Convert{&half_to_float_portable};
  }();
  convert(src, out, n);
#else
  half_to_float_portable(src, out, n);
#endif
}

// Blocks moved with memcpy on both sides (the source has any alignment, and float memory is not written
// through an integer pointer), widened in between by a loop the compiler vectorizes.
inline void bfloat16_to_float_n(std::byte const* src, float* out, std::size_t n) {
  constexpr std::size_t kBlock = 512;
  std::uint16_t narrow[kBlock];
  std::uint32_t wide[kBlock];
  for (std::size_t begin = 0; begin < n; begin += kBlock) {
    std::size_t const count = n - begin < kBlock ? n - begin : kBlock;
    std::memcpy(narrow, src + 2 * begin, 2 * count);
    for (std::size_t i = 0; i < count; ++i) wide[i] = static_cast<std::uint32_t>(narrow[i]) << 16;
    std::memcpy(out + begin, wide, 4 * count);
  }
}

inline void double_to_float_n(std::byte const* src, float* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    double d;
    std::memcpy(&d, src + 8 * i, 8);
    out[i] = static_cast<float>(d);
  }
}

// Values [begin, begin + out.size()) of a tensor of floating dtype `dtype` whose data starts at `src`.
// Exact for F32, F16 and BF16; F64 rounds to nearest. `dtype` must be one of the four.
inline void floats_to_f32(DType dtype, std::byte const* src, std::size_t begin, std::span<float> out) {
  std::size_t const n = out.size();
  if (n == 0) return;
  switch (dtype) {
    case DType::kF32:
      std::memcpy(out.data(), src + 4 * begin, 4 * n);
      return;
    case DType::kF16:
      half_to_float_n(src + 2 * begin, out.data(), n);
      return;
    case DType::kBF16:
      bfloat16_to_float_n(src + 2 * begin, out.data(), n);
      return;
    case DType::kF64:
      double_to_float_n(src + 8 * begin, out.data(), n);
      return;
    default:
      FLASHDEBERTA_FAIL("floats_to_f32: dtype " << dtype_name(dtype) << " is not a float type");
  }
}

}  // namespace flashdeberta::detail

// The warp-level tensor-core primitives of the mma flash kernel (sm_80+): 16-byte asynchronous copies
// into shared memory, ldmatrix, mma.sync m16n8k16 with fp32 accumulation, and the swizzled layout of a
// (rows, 64) tile of 16-bit elements that keeps both the copies and ldmatrix free of bank conflicts.
//
// Fragment layout of m16n8k16 (g = lane / 4, t = lane % 4), used by every caller:
//   A (16 x 16, row-major): a0 (g, 2t..2t+1), a1 (g + 8, 2t..), a2 (g, 2t + 8..), a3 (g + 8, 2t + 8..)
//   B (16 x 8, k-major):    b0 (k 2t..2t+1, n g), b1 (k 2t + 8.., n g)
//   C (16 x 8, fp32):       c0, c1 (g, 2t..2t+1), c2, c3 (g + 8, 2t..2t+1)
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace flashdeberta::cuda_kernels::mma {

// A (rows, 64) tile of 16-bit elements: each row is eight 16-byte chunks, and chunk c of row r is stored
// at chunk position c ^ (r % 8), so the eight rows an ldmatrix phase reads (one chunk column) fall in
// eight different bank groups.
__device__ __forceinline__ int swizzle(int row, int chunk) { return row * 64 + ((chunk ^ (row & 7)) << 3); }

__device__ __forceinline__ std::uint32_t smem_address(void const* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, bypassing L1; the destination is zero-filled when !valid (src is not read).
__device__ __forceinline__ void cp_async_16(void* dst, void const* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// Rows [0, rows) x 64 columns of a 16-bit matrix into a swizzled tile: rows >= valid_rows and columns
// >= cols (a multiple of 8) are zero-filled. src row r starts at src + r * ld elements.
template <int kThreads, class T>
__device__ __forceinline__ void load_tile_async(T* tile, T const* src, std::int64_t ld, int rows, int valid_rows,
                                                int cols) {
  for (int idx = threadIdx.x; idx < rows * 8; idx += kThreads) {
    int const r = idx / 8;
    int const c = idx % 8;
    bool const valid = r < valid_rows && c * 8 < cols;
    cp_async_16(tile + swizzle(r, c), valid ? src + r * ld + c * 8 : src, valid);
  }
}

// The same for a tile with every row valid and all 64 columns: thread x always copies chunk x % 8 of rows
// x / 8 + k * kThreads / 8, so the row's swizzle and the source offset are fixed and each copy is one
// address add. Issuing the generic loop (64-bit row products, bounds, selects) was about a fifth of the
// kernel's instructions at L = 16384 (Nsight Compute source counters).
template <int kThreads, int kRows, class T>
__device__ __forceinline__ void load_full_tile_async(T* tile, T const* src, std::int64_t ld) {
  static_assert(kThreads % 8 == 0 && kRows % (kThreads / 8) == 0, "whole rows per pass");
  constexpr int kRowStep = kThreads / 8;
  int const r0 = threadIdx.x / 8, c = threadIdx.x % 8;
  T* dst = tile + swizzle(r0, c);  // r0 + k * kRowStep has the same r % 8 (kRowStep is a multiple of 8)
  T const* from = src + r0 * ld + c * 8;
  static_assert(kRowStep % 8 == 0, "the swizzle repeats every 8 rows");
#pragma unroll
  for (int k = 0; k < kRows / kRowStep; ++k) cp_async_16(dst + k * kRowStep * 64, from + k * kRowStep * ld, true);
}

// Four 8x8 matrices; lane l supplies the row address of matrix l / 8, row l % 8.
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], void const* row_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(row_address)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], void const* row_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(row_address)));
}

// The same at a shared-memory address (smem_address), for callers that keep their addresses in registers.
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], std::uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// x, opaque to the compiler: a value derived from the thread index is otherwise re-derived where it is
// used (rematerialized) instead of kept in its register, in every iteration of a mainloop.
__device__ __forceinline__ std::uint32_t opaque(std::uint32_t x) {
  asm volatile("" : "+r"(x));
  return x;
}

// A fragment of rows [row0, row0 + 16), columns [col0, col0 + 16) of a swizzled tile.
template <class T>
__device__ __forceinline__ void load_a(std::uint32_t (&a)[4], T const* tile, int row0, int col0) {
  int const lane = threadIdx.x % 32;
  ldmatrix_x4(a, tile + swizzle(row0 + lane % 16, col0 / 8 + lane / 16));
}

// B fragments of two n8 tiles whose n index is the tile's row (keys, relative slots): rows [row0, row0
// + 16) give b[0..1] (rows row0..+7) and b[2..3] (rows row0 + 8..), over columns (the k index) [col0, col0 + 16).
template <class T>
__device__ __forceinline__ void load_b_rows(std::uint32_t (&b)[4], T const* tile, int row0, int col0) {
  int const lane = threadIdx.x % 32;
  int const m = lane / 8;
  ldmatrix_x4(b, tile + swizzle(row0 + (m >> 1) * 8 + lane % 8, col0 / 8 + (m & 1)));
}

// B fragments of two n8 tiles whose k index is the tile's row (P.V: k = keys, n = value columns): rows
// [row0, row0 + 16), columns [col0, col0 + 16); b[0..1] for columns col0..+7, b[2..3] for col0 + 8...
template <class T>
__device__ __forceinline__ void load_b_cols(std::uint32_t (&b)[4], T const* tile, int row0, int col0) {
  int const lane = threadIdx.x % 32;
  int const m = lane / 8;
  ldmatrix_x4_trans(b, tile + swizzle(row0 + (m & 1) * 8 + lane % 8, col0 / 8 + (m >> 1)));
}

// The per-thread parts of load_b_rows / load_b_cols addresses. A tile's swizzle depends on row % 8 only,
// and the fragment's first row is a multiple of 16, so load_b_rows(b, tile, row0, 16 kk) reads at
// tile + 64 row0 + b_rows_offset(kk) and load_b_cols(b, tile, 16 kk, 16 np) at tile + 1024 kk +
// b_cols_offset(np). The mainloop keeps the four offsets of each kind in registers: computing the swizzle per
// ldmatrix was about a fifth of the kernel's instructions (Nsight Compute source counters, 32 x 512).
__device__ __forceinline__ int b_rows_offset(int kk) {
  int const lane = threadIdx.x % 32;
  int const m = lane / 8;
  return swizzle((m >> 1) * 8 + lane % 8, 2 * kk + (m & 1));
}
__device__ __forceinline__ int b_cols_offset(int np) {
  int const lane = threadIdx.x % 32;
  int const m = lane / 8;
  return swizzle((m & 1) * 8 + lane % 8, 2 * np + (m >> 1));
}

// c += a . b, fp32 accumulation.
template <class T>
__device__ __forceinline__ void mma_16816(float (&c)[4], std::uint32_t const (&a)[4], std::uint32_t b0,
                                          std::uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// c = a . b (the accumulator's previous value unused: no zeroing before the first k-step).
template <class T>
__device__ __forceinline__ void mma_16816_first(float (&c)[4], std::uint32_t const (&a)[4], std::uint32_t b0,
                                                std::uint32_t b1) {
  float const zero = 0.0f;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%10, %10, %10, %10};\n"
        : "=f"(c[0]), "=f"(c[1]), "=f"(c[2]), "=f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(zero));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%10, %10, %10, %10};\n"
        : "=f"(c[0]), "=f"(c[1]), "=f"(c[2]), "=f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(zero));
  }
}

// Two floats as one register of two 16-bit values, the lower column first (round-to-nearest-even).
template <class T>
__device__ __forceinline__ std::uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 const v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<std::uint32_t const*>(&v);
  } else {
    __half2 const v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<std::uint32_t const*>(&v);
  }
}

// The register of two 16-bit values times a float, rounded back to the element type.
template <class T>
__device__ __forceinline__ std::uint32_t scale_pair(std::uint32_t pair, float scale) {
  float lo, hi;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    float2 const v = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162 const*>(&pair));
    lo = v.x;
    hi = v.y;
  } else {
    float2 const v = __half22float2(*reinterpret_cast<__half2 const*>(&pair));
    lo = v.x;
    hi = v.y;
  }
  return pack2<T>(lo * scale, hi * scale);
}

// Two floats as fp16x2 (lo in the lower half), rounded to nearest and saturated to +-65504 in one
// instruction (NaN stays NaN).
__device__ __forceinline__ std::uint32_t pack_half2_satfinite(float lo, float hi) {
  std::uint32_t r;
  asm("cvt.rn.satfinite.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace flashdeberta::cuda_kernels::mma

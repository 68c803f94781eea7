// What the two passes of the tensor-core flash backward share (attention_backward_mma.cuh): the traits with the
// shared-memory plan, the float32 -> 16-bit staging of the operand tiles, the ldmatrix addresses, the two kinds of
// product of a step (S and dP recomputed; a gradient += a step tile times a swept tile), the step's dropout bits and
// its band sums.
//
// Both passes are the float32 kernels' (attention_backward_flash.cuh) with the products on tensor cores: a CTA owns 64
// rows (query rows in the row pass, keys in the column pass), warp w the 16 rows [16w, 16w + 16), and sweeps the other
// side 64 at a time. Every product is mma.sync m16n8k16 over operands rounded to T (round-to-nearest-even) with fp32
// accumulation; the scores' position terms, the softmax, the dropout mask, D and every band sum stay float32.
// Accumulator layout (mma.cuh; g = lane / 4, t = lane % 4): element (nt, e) of a warp's (16, 64) step tile is owned row
// g + 8 (e / 2), swept column 8 nt + 2 t + e % 2.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "flashdeberta/cuda/attention/mma.cuh"
#include "flashdeberta/cuda/training/attention_backward_common.cuh"

namespace flashdeberta::cuda_kernels::training {

// The tensor-core backward's traits: head sizes up to 64, zero-padded; 16-bit products of element type T (bf16 or
// fp16); kOwnedRows owned rows per CTA (32, 64 or 128: FLASHDEBERTA_BWD_BLOCK_M, attention_backward_mma.cuh), one warp
// per 16. Shared memory, in bytes: four swizzled tiles of T, 64 wide (the owned side's two, q and dO or k and v, staged
// once; the swept side's two, k and v or q and dO, per step); one float32 region holding first the step's position
// terms along the swept side and then its dS / scale for the band sums (band rows padded to 68 floats: 16-byte aligned
// for the float4 reads of the band walk, and 4 banks apart so that the walk's eight rows per phase hit distinct banks;
// term rows to 72: see stage_position_terms); the step's position terms along the owned side; the swept side's
// positions, lse and D.
template <class ElementT, int kOwnedRows = 64>
struct MmaBackwardTraits {
  using Element = ElementT;
  static constexpr int kHeadDim = 64;  // the swizzled tile's width (mma.cuh)
  static constexpr int kWarps = kOwnedRows / 16;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kBlockOwned = 16 * kWarps;       // query rows (row pass) or keys (column pass) of a CTA
  static constexpr int kBlockSweep = 64;                // keys (row pass) or queries (column pass) per step
  static constexpr int kSweepTiles = kBlockSweep / 8;   // n8 accumulator tiles of a warp's step scores
  static constexpr int kHeadTiles = kHeadDim / 8;       // n8 accumulator tiles of a warp's gradient rows
  static constexpr int kBandLd = kBlockSweep + 4;       // floats per row of the dS staging
  static constexpr int kSweptTermLd = kBlockSweep + 8;  // floats per owned row of the terms along the swept side
  static constexpr int kOwnedTermLd = kBlockOwned + 4;  // floats per swept row of the terms along the owned side
  static constexpr int kBandRegionLd = kBandLd > kSweptTermLd ? kBandLd : kSweptTermLd;

  static constexpr int kOwnedTileBytes = kBlockOwned * kHeadDim * static_cast<int>(sizeof(Element));
  static constexpr int kSweepTileBytes = kBlockSweep * kHeadDim * static_cast<int>(sizeof(Element));
  static constexpr int kOwnedAOffset = 0;                                // (BO, 64) q or k
  static constexpr int kOwnedBOffset = kOwnedAOffset + kOwnedTileBytes;  // (BO, 64) dO or v
  static constexpr int kSweepAOffset = kOwnedBOffset + kOwnedTileBytes;  // (BS, 64) k or q
  static constexpr int kSweepBOffset = kSweepAOffset + kSweepTileBytes;  // (BS, 64) v or dO
  static constexpr int kBandOffset = kSweepBOffset + kSweepTileBytes;    // (BO, 72) terms, then dS / scale
  static constexpr int kOwnedTermOffset = kBandOffset + kBlockOwned * kBandRegionLd * 4;     // (BS, BO + 4) terms
  static constexpr int kPositionOffset = kOwnedTermOffset + kBlockSweep * kOwnedTermLd * 4;  // int (BS) positions
  static constexpr int kLseOffset = kPositionOffset + kBlockSweep * 4;  // float (BS) lse (column pass)
  static constexpr int kDotOffset = kLseOffset + kBlockSweep * 4;       // float (BS) D (column pass)
  static constexpr std::size_t kSmemBytes = kDotOffset + kBlockSweep * 4;

  static_assert(sizeof(Element) == 2, "tensor-core products take 16-bit operands");
  static_assert(kOwnedRows == 32 || kOwnedRows == 64 || kOwnedRows == 128, "32, 64 or 128 owned rows");
  static_assert(kBlockSweep == 64, "64 swept rows: the position look-ups take two per lane, the dropout bits 32");
  static_assert(kBlockSweep % 16 == 0 && kHeadDim % 16 == 0, "mma k-steps are 16 wide");
  static_assert(kBandLd % 4 == 0 && (kBandLd / 4) % 2 == 1, "band rows: float4-aligned, odd in 16-byte units");
  static_assert(kBandOffset % 16 == 0 && kOwnedTermOffset % 16 == 0 && kPositionOffset % 16 == 0,
                "tiles start on 16-byte boundaries");
  static_assert(kOwnedRows != 64 || kSmemBytes <= 100 * 1024, "the default fits an Ampere or Hopper SM twice");
  static_assert(kSmemBytes <= 160 * 1024, "fits an A100's 163 KB per block");

  static constexpr bool is_valid(std::size_t max_smem_per_block) { return kSmemBytes <= max_smem_per_block; }
};

// Which operands' rows the staging may read as float4 (16-byte aligned rows and head starts); else scalar loads.
struct MmaBackwardLoads {
  bool q = false, k = false, v = false, dout = false;
};

// A (kRows, 64) swizzled tile of T = src rows [0, valid_rows) x columns [0, d), rounded to nearest even; zeros
// elsewhere. src row r starts at src + r ld. Every load of a thread is issued before its first conversion.
template <class Tr, int kRows>
__device__ __forceinline__ void stage_tile(typename Tr::Element* tile, float const* src, std::int64_t ld,
                                           int valid_rows, int d, bool vector_loads) {
  using T = typename Tr::Element;
  constexpr int kPerThread = kRows * 8 / Tr::kThreads;  // 16-byte chunks (8 elements) per thread
  static_assert(kRows * 8 % Tr::kThreads == 0, "whole chunks per thread");
  float v[kPerThread][8];
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    int const idx = threadIdx.x + k * Tr::kThreads;
    int const r = idx / 8, c = idx % 8;
    float const* row = src + r * ld + 8 * c;
    if (r < valid_rows && vector_loads && 8 * c + 8 <= d) {
      float4 const lo = __ldg(reinterpret_cast<float4 const*>(row));
      float4 const hi = __ldg(reinterpret_cast<float4 const*>(row) + 1);
      v[k][0] = lo.x, v[k][1] = lo.y, v[k][2] = lo.z, v[k][3] = lo.w;
      v[k][4] = hi.x, v[k][5] = hi.y, v[k][6] = hi.z, v[k][7] = hi.w;
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) v[k][e] = r < valid_rows && 8 * c + e < d ? __ldg(row + e) : 0.0f;
    }
  }
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    int const idx = threadIdx.x + k * Tr::kThreads;
    uint4 const packed{mma::pack2<T>(v[k][0], v[k][1]), mma::pack2<T>(v[k][2], v[k][3]),
                       mma::pack2<T>(v[k][4], v[k][5]), mma::pack2<T>(v[k][6], v[k][7])};
    *reinterpret_cast<uint4*>(tile + mma::swizzle(idx / 8, idx % 8)) = packed;
  }
}

// The thread's ldmatrix addresses, in bytes of shared memory from the kernel's dynamic shared memory, less the tile's
// offset (a Traits constant added at each use). A tile's swizzle depends on row % 8 only and fragments start every 16
// rows, so each fragment of a tile is one of these plus a multiple of kStep16 (mma.cuh, b_rows_offset). Twelve
// registers, kept opaque (mma::opaque) as the forward keeps its own: otherwise the compiler re-derives the swizzle from
// the thread index per fragment or holds every fragment address of a step (with them and dropout_bits, the column
// pass compiles without spills).
struct FragmentAddresses {
  std::uint32_t a[4];     // A of the warp's 16 owned rows, head columns 16 kk..
  std::uint32_t rows[4];  // B with n = the tile's rows [0, 16) (+ kStep16 np), k = head columns 16 kk..
  std::uint32_t cols[4];  // B with k = the tile's rows [0, 16) (+ kStep16 kk), n = head columns 16 np..
};
inline constexpr int kStep16 = 16 * 64 * 2;  // 16 rows of a swizzled (rows, 64) 16-bit tile, in bytes

__device__ __forceinline__ FragmentAddresses fragment_addresses(void const* smem, int warp) {
  int const lane = threadIdx.x % 32;
  std::uint32_t const base = mma::smem_address(smem);
  FragmentAddresses f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f.a[i] = mma::opaque(base + 2 * (warp * 16 * 64 + mma::swizzle(lane % 16, 2 * i + lane / 16)));
    f.rows[i] = mma::opaque(base + 2 * mma::b_rows_offset(i));
    f.cols[i] = mma::opaque(base + 2 * mma::b_cols_offset(i));
  }
  return f;
}

// c = A B^T of this warp's 16 owned rows (tile kA) against the 64 swept rows of tile kB, over the 64 head columns: S
// (q . k) or dP (dO . v) in the row pass, their transposes in the column pass. kA, kB: the tiles' Traits offsets.
template <class Tr, int kA, int kB>
__device__ __forceinline__ void owned_times_swept(float (&c)[Tr::kSweepTiles][4], FragmentAddresses const& f) {
  using T = typename Tr::Element;
#pragma unroll
  for (int kk = 0; kk < Tr::kHeadDim / 16; ++kk) {
    std::uint32_t a[4];
    mma::ldmatrix_x4(a, f.a[kk] + kA);
#pragma unroll
    for (int np = 0; np < Tr::kBlockSweep / 16; ++np) {
      std::uint32_t b[4];
      mma::ldmatrix_x4(b, f.rows[kk] + kB + np * kStep16);
      if (kk == 0) {
        mma::mma_16816_first<T>(c[2 * np], a, b[0], b[1]);
        mma::mma_16816_first<T>(c[2 * np + 1], a, b[2], b[3]);
      } else {
        mma::mma_16816<T>(c[2 * np], a, b[0], b[1]);
        mma::mma_16816<T>(c[2 * np + 1], a, b[2], b[3]);
      }
    }
  }
}

// acc += X Y with X (16, 64) this warp's step tile in registers (dS, or (P * M)^T) and Y (64, 64) the swept side's tile
// kY (k, q or dO; k index = the tile's rows): dQ, dK and dV's content terms. X is rounded to T here, its only rounding.
template <class Tr, int kY>
__device__ __forceinline__ void accumulate_product(float (&acc)[Tr::kHeadTiles][4],
                                                   float const (&x)[Tr::kSweepTiles][4], FragmentAddresses const& f) {
  using T = typename Tr::Element;
#pragma unroll
  for (int kk = 0; kk < Tr::kBlockSweep / 16; ++kk) {
    std::uint32_t const a[4] = {mma::pack2<T>(x[2 * kk][0], x[2 * kk][1]), mma::pack2<T>(x[2 * kk][2], x[2 * kk][3]),
                                mma::pack2<T>(x[2 * kk + 1][0], x[2 * kk + 1][1]),
                                mma::pack2<T>(x[2 * kk + 1][2], x[2 * kk + 1][3])};
#pragma unroll
    for (int np = 0; np < Tr::kHeadDim / 16; ++np) {
      std::uint32_t b[4];
      mma::ldmatrix_x4_trans(b, f.cols[np] + kY + kk * kStep16);
      mma::mma_16816<T>(acc[2 * np], a, b[0], b[1]);
      mma::mma_16816<T>(acc[2 * np + 1], a, b[2], b[3]);
    }
  }
}

// The 16-bit word of a T as a float.
template <class T>
__device__ __forceinline__ float widened(unsigned short bits) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(__ushort_as_bfloat16(bits));
  } else {
    return __half2float(__ushort_as_half(bits));
  }
}

// x rounded to T (round-to-nearest-even) and back: what a product on tensor cores sees of x.
template <class T>
__device__ __forceinline__ float rounded_to(float x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(__float2bfloat16_rn(x));
  } else {
    return __half2float(__float2half_rn(x));
  }
}

// The dropout mask of a warp's step tile, one bit per accumulator element ((nt, e) at bit 4 nt + e): kept(nt, e)
// draws it (dropout_factor, the forward's counter). Drawn into one register before dP is formed, so that the
// hash's 64-bit temporaries never meet both step tiles and the gradient accumulators in registers.
template <class Tr, class Kept>
__device__ __forceinline__ std::uint32_t dropout_bits(Kept const& kept) {
  static_assert(Tr::kSweepTiles * 4 <= 32, "one bit per element of the thread's step tile");
  std::uint32_t bits = 0;
#pragma unroll
  for (int nt = 0; nt < Tr::kSweepTiles; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) bits |= static_cast<std::uint32_t>(kept(nt, e)) << (4 * nt + e);
  return bits;
}

// The step's position terms (c2p + p2c, unscaled) of every (owned row o, swept row c) pair, staged in shared memory
// from the projected (T, heads, 2k) tables (elements of T), as two float32 tiles each read along one table row: the
// owned side's table (c2p of a query row in the row pass and the forward, p2c of a key in the column pass) at (o, c) of
// a row-major (BO, kSweptTermLd) tile, and the swept side's table at (c, o) of a (BS, kOwnedTermLd) tile. For a fixed
// table row the slots of consecutive pairs are consecutive (or equal) with contiguous positions, so each warp-wide load
// of the staging reads a few 32-byte sectors, where gathering per score read one sector per lane for the swept side's
// table (every lane in another table row). Reads (staged_terms) follow the accumulator layout: a float2 of the first
// tile (half a warp, rows 72 floats = 8 banks apart, covers the 32 banks once) and a float of the second (lanes 4 t + g
// banks apart). kOwnedQueries: the owned rows are queries (the slot is slot(owned, swept)), else keys. Owned and swept
// rows past their valid counts repeat the last valid token. The caller orders the staging after the previous step's
// reads of both tiles and of the band rows (the first tile is the band staging's region), and the reads after it, by
// __syncthreads.
template <class Tr, bool kOwnedQueries>
__device__ __forceinline__ void stage_position_terms(BackwardParams const& b, unsigned char* smem, int h,
                                                     std::int64_t owned0, int owned_valid, std::int64_t swept0,
                                                     int swept_valid) {
  constexpr int BO = Tr::kBlockOwned, BS = Tr::kBlockSweep;
  static_assert(Tr::kThreads % BS == 0 && Tr::kThreads % BO == 0, "each thread keeps one column of each tile");
  using T = typename Tr::Element;
  AttentionParams const& p = b.p;
  // the tables in T (launch_mma_backward, attention_forward_mixed check it), read as 16-bit words
  auto const* const c2p = static_cast<unsigned short const*>(p.c2p ? b.buffers.c2p_all : nullptr);
  auto const* const p2c = static_cast<unsigned short const*>(p.p2c ? b.buffers.p2c_all : nullptr);
  auto const* const owned_table = kOwnedQueries ? c2p : p2c;
  auto const* const swept_table = kOwnedQueries ? p2c : c2p;
  auto const load = [](unsigned short const* at) { return widened<T>(__ldg(at)); };
  auto const slot = [&](int owned_pos, int swept_pos) {
    return kOwnedQueries ? b.slot(owned_pos, swept_pos) : b.slot(swept_pos, owned_pos);
  };
  auto* const along_swept = reinterpret_cast<float*>(smem + Tr::kBandOffset);
  auto* const along_owned = reinterpret_cast<float*>(smem + Tr::kOwnedTermOffset);
  {  // lanes along the swept rows c: consecutive slots of one owned row's table row
    int const c = threadIdx.x % BS;
    std::int64_t const swept = swept0 + min(c, swept_valid - 1);
    int const swept_pos = __ldg(p.positions + swept);
#pragma unroll 8
    for (int o = threadIdx.x / BS; o < BO; o += Tr::kThreads / BS) {
      std::int64_t const owned = owned0 + min(o, owned_valid - 1);
      float term = 0.0f;
      if (owned_table != nullptr)
        term = load(owned_table + b.band_row(owned, h) + slot(__ldg(p.positions + owned), swept_pos));
      along_swept[o * Tr::kSweptTermLd + c] = term;
    }
  }
  {  // lanes along the owned rows o: consecutive slots of one swept row's table row
    int const o = threadIdx.x % BO;
    std::int64_t const owned = owned0 + min(o, owned_valid - 1);
    int const owned_pos = __ldg(p.positions + owned);
#pragma unroll 8
    for (int c = threadIdx.x / BO; c < BS; c += Tr::kThreads / BO) {
      std::int64_t const swept = swept0 + min(c, swept_valid - 1);
      float term = 0.0f;
      if (swept_table != nullptr)
        term = load(swept_table + b.band_row(swept, h) + slot(owned_pos, __ldg(p.positions + swept)));
      along_owned[c * Tr::kOwnedTermLd + o] = term;
    }
  }
}

// The staged terms of owned row o with swept rows c and c + 1 (c even): {term(o, c), term(o, c + 1)}.
template <class Tr>
__device__ __forceinline__ float2 staged_terms(unsigned char const* smem, int o, int c) {
  auto const* const along_swept = reinterpret_cast<float const*>(smem + Tr::kBandOffset);
  auto const* const along_owned = reinterpret_cast<float const*>(smem + Tr::kOwnedTermOffset);
  float2 const first = *reinterpret_cast<float2 const*>(along_swept + o * Tr::kSweptTermLd + c);
  return {first.x + along_owned[c * Tr::kOwnedTermLd + o], first.y + along_owned[(c + 1) * Tr::kOwnedTermLd + o]};
}

// A warp's step scores (accumulator layout) plus the staged terms, each element then finished where it is formed:
// s[nt][e] = finish(s[nt][e] + term, rr, c) with g + 8 rr the owned row of the warp and c the swept row. relative
// false: no terms were staged (none are added).
template <class Tr, class Finish>
__device__ __forceinline__ void finish_scores(float (&s)[Tr::kSweepTiles][4], unsigned char const* smem, int warp,
                                              bool relative, Finish const& finish) {
  int const lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int nt = 0; nt < Tr::kSweepTiles; ++nt)
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      float2 const terms =
          relative ? staged_terms<Tr>(smem, 16 * warp + g + 8 * rr, 8 * nt + 2 * t) : make_float2(0.0f, 0.0f);
#pragma unroll
      for (int e = 2 * rr; e < 2 * rr + 2; ++e)
        s[nt][e] = finish(s[nt][e] + (e % 2 == 0 ? terms.x : terms.y), rr, 8 * nt + 2 * t + e % 2);
    }
}

// An owned row as the band sums see it: whether it is a valid row of the sequence, its position and its band row
// ((T, heads, 2k) buffer, row of the owned token and head).
struct OwnedBand {
  bool valid = false;
  int pos = 0;
  float* band = nullptr;
};

// The step's band sums of this warp's 16 owned rows added to their band rows in global memory (each row's band has
// this CTA as its only writer: no atomics). ds: the warp's dS / scale (accumulator layout); ds_s: the CTA's staging,
// of which the warp uses its own 16 rows only (__syncwarp orders it). quad[rr]: owned row g + 8 rr of the warp; mine:
// owned row lane % 16. The swept side's padding columns hold dS = 0 and repeat the last valid position, so they join
// the last valid column's slot and add nothing.
//   single(pos): the row's one slot when every swept column of the step gives it the same one (saturated
//     differences), else -1;  slot(pos, c): the slot of swept column c.
// A single-slot row adds its row sum (its quad's 64 values in a fixed order).
//
// monotone (contiguous positions): a row's slots are monotone along the whole sweep (slots are monotone in the
// distance), so each run of equal slots is summed at once and stored, not added: only a run that continues the previous
// step's last one (previous(pos): that run's slot, -1 on the first step) reads the band. The whole warp walks each row,
// two columns a lane: a segmented scan over the lanes sums the runs and each run's last lane stores it, so a row's
// stores are consecutive floats (whole sectors; a lane per row stored one float per sector, and the L2 filled every
// partial sector from memory first). Else (holes) one lane walks each row, adding each run into the band.
template <class Tr, class Single, class Slot, class Previous>
__device__ __forceinline__ void add_band_step(float const (&ds)[Tr::kSweepTiles][4], float* ds_s, int warp, int lane,
                                              OwnedBand const (&quad)[2], OwnedBand const& mine, Single const& single,
                                              Slot const& slot, bool monotone, Previous const& previous) {
  constexpr unsigned kAll = 0xffffffffu;
  int const g = lane / 4, t = lane % 4;
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    float sum = 0.0f;
#pragma unroll
    for (int nt = 0; nt < Tr::kSweepTiles; ++nt) sum += ds[nt][2 * rr] + ds[nt][2 * rr + 1];
    sum += __shfl_xor_sync(kAll, sum, 1);
    sum += __shfl_xor_sync(kAll, sum, 2);
    if (quad[rr].valid && t == 0) {
      int const s = single(quad[rr].pos);
      if (s >= 0 && (!monotone || s == previous(quad[rr].pos))) {
        quad[rr].band[s] += sum;
      } else if (s >= 0) {
        quad[rr].band[s] = sum;
      }
    }
  }
  bool const walk = lane < 16 && mine.valid && single(mine.pos) < 0;
  if (!__any_sync(kAll, walk)) return;
  // the warp's band rows lie within its own rows of the region (kBandRegionLd apart per row of the region), where its
  // own terms were staged: other warps may still be reading theirs
  float* const rows = ds_s + 16 * warp * Tr::kBandRegionLd;
#pragma unroll
  for (int rr = 0; rr < 2; ++rr)
#pragma unroll
    for (int nt = 0; nt < Tr::kSweepTiles; ++nt)
      *reinterpret_cast<float2*>(rows + (g + 8 * rr) * Tr::kBandLd + 8 * nt + 2 * t) =
          make_float2(ds[nt][2 * rr], ds[nt][2 * rr + 1]);
  __syncwarp();
  static_assert(Tr::kBlockSweep == 64, "two swept columns a lane");
  if (monotone) {
    for (int r = 0; r < 16; ++r) {                            // owned row r is lane r's `mine`
      if (__shfl_sync(kAll, walk ? 1 : 0, r) == 0) continue;  // warp-uniform
      int const pos = __shfl_sync(kAll, mine.pos, r);
      auto* const band = reinterpret_cast<float*>(
          __shfl_sync(kAll, static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(mine.band)), r));
      float2 const v = *reinterpret_cast<float2 const*>(rows + r * Tr::kBandLd + 2 * lane);
      int const s0 = slot(pos, 2 * lane), s1 = slot(pos, 2 * lane + 1);
      int const before = __shfl_up_sync(kAll, s1, 1);   // the previous lane's last slot
      int const after = __shfl_down_sync(kAll, s0, 1);  // the next lane's first
      bool const head = lane == 0 || s0 != before;      // column 2 lane starts a run
      // The lane's last run's partial sum, and whether that run starts in this lane; the segmented scan extends
      // each partial over the lanes before it back to its run's start.
      float total = s1 == s0 ? v.x + v.y : v.y;
      bool starts = s1 != s0 || head;
#pragma unroll
      for (int offset = 1; offset < 32; offset *= 2) {
        float const up = __shfl_up_sync(kAll, total, offset);
        bool const up_starts = __shfl_up_sync(kAll, starts ? 1 : 0, offset) != 0;
        if (lane >= offset) {
          if (!starts) total += up;
          starts = starts || up_starts;
        }
      }
      float carry = __shfl_up_sync(kAll, total, 1);  // the run that flows into column 2 lane, summed so far
      if (head) carry = 0.0f;
      int const first = __shfl_sync(kAll, s0, 0);
      int const continued = previous(pos);
      auto const put = [&](int s, float x) {
        if (s == first && s == continued) {
          band[s] += x;
        } else {
          band[s] = x;
        }
      };
      if (s0 != s1) put(s0, carry + v.x);             // a run ends at column 2 lane
      if (lane == 31 || s1 != after) put(s1, total);  // and at column 2 lane + 1
    }
  } else if (walk) {
    float const* row = rows + lane * Tr::kBandLd;
    int open = slot(mine.pos, 0);
    float sum = 0.0f;
    for (int c4 = 0; c4 < Tr::kBlockSweep; c4 += 4) {
      float4 const v = *reinterpret_cast<float4 const*>(row + c4);
      float const vs[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        int const s = slot(mine.pos, c4 + e);
        if (s != open) {
          mine.band[open] += sum;
          open = s;
          sum = 0.0f;
        }
        sum += vs[e];
      }
    }
    mine.band[open] += sum;
  }
  __syncwarp();  // the next step's staging overwrites the rows only after every lane has read them
}

}  // namespace flashdeberta::cuda_kernels::training

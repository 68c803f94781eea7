// The attention kernels' traits: tile extents, the thread layout and the shared-memory plan, every derived
// constant in one place.
#pragma once

#include <cstddef>
#include <cstdint>

namespace flashdeberta::cuda_kernels {

// The flash kernel family's traits. The primary template is the CUDA-core plan (any element type, head
// sizes 32 / 64 / 128 zero-padded); FlashTraits<T, 64, true> below is the tensor-core plan that
// dispatch.cuh picks for 16-bit elements and head sizes 40 to 64.
template <class ElementT, int kHeadDim_, bool kTensorCores_ = false>
struct FlashTraits;

// Flash forward, CUDA cores, fp32 arithmetic. One CTA per (query block, head, sequence); each warp owns
// kRowsPerWarp query rows for the whole mainloop, and lane j of a warp owns key column j of a tile, so
// the row max and sum of the online softmax are warp shuffles and the output accumulator stays in
// registers. The position terms of a tile are computed for the tile's slot window only (at most
// kBlockM + kBlockN - 1 distinct slots for contiguous positions; one in saturated tiles).
template <class ElementT, int kHeadDim_>
struct FlashTraits<ElementT, kHeadDim_, false> {
  using Element = ElementT;
  static constexpr bool kTensorCores = false;
  static constexpr int kHeadDim = kHeadDim_;  // head sizes up to this run here, zero-padded
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kBlockN = 32;  // one key column per lane
  static constexpr int kRowsPerWarp = 8;
  static constexpr int kBlockM = kWarps * kRowsPerWarp;
  static constexpr int kColsPerLane = kHeadDim / 32;  // output columns per lane in the accumulator
  static constexpr int kSlotChunk = 32;               // relative-table rows staged at once: one per lane
  static constexpr int kWindow = 2 * kSlotChunk;      // slot capacity of a tile's c2p/p2c window

  // Shared memory, in floats. Row strides of tiles read one row per lane are padded by one so that
  // consecutive lanes hit consecutive banks; p2c is padded by two because its lanes also walk the
  // slot axis backwards (slot falls by one as the key column rises by one).
  static constexpr int kQLd = kHeadDim;
  static constexpr int kKLd = kHeadDim + 1;
  static constexpr int kRelLd = kHeadDim + 1;
  static constexpr int kVLd = kHeadDim;
  static constexpr int kC2pLd = kWindow + 1;
  static constexpr int kP2cLd = kWindow + 2;
  static constexpr int kPLd = kBlockN + 1;
  static constexpr int kQOffset = 0;                                   // (BM, D) q / scale
  static constexpr int kKOffset = kQOffset + kBlockM * kQLd;           // (BN, D + 1) keys
  static constexpr int kRelOffset = kKOffset + kBlockN * kKLd;         // (32, D + 1) Kr/Qr rows; then (BN, D) values
  static constexpr int kC2pOffset = kRelOffset + kSlotChunk * kRelLd;  // (BM, W + 1)
  static constexpr int kP2cOffset = kC2pOffset + kBlockM * kC2pLd;     // (BN, W + 2)
  static constexpr int kPOffset = kP2cOffset + kBlockN * kP2cLd;       // (BM, BN + 1) probabilities
  static constexpr int kPosOffset = kPOffset + kBlockM * kPLd;         // int: BM + BN positions, 2 window bounds
  static constexpr int kSmemWords = kPosOffset + kBlockM + kBlockN + 2;
  static constexpr std::size_t kSmemBytes = static_cast<std::size_t>(kSmemWords) * 4;

  static_assert(kHeadDim % 32 == 0 && kHeadDim > 0, "the head size is split evenly across the 32 lanes");
  static_assert(kBlockN == 32, "lane j owns key column j");
  static_assert(kBlockM <= 32, "warp 0 reduces the block's query positions, one per lane");
  static_assert(kWindow >= kBlockM + kBlockN - 1, "the window must hold every slot of a contiguous tile");
  static_assert(kBlockN * kVLd <= kSlotChunk * kRelLd, "the value tile reuses the relative rows' space");

  static constexpr bool is_valid(std::size_t max_smem_per_block) { return kSmemBytes <= max_smem_per_block; }
};

// Flash forward on tensor cores (mma.sync m16n8k16, fp32 accumulation), 16-bit elements, head size 64
// (smaller multiples of 8 zero-padded). One CTA per (query block of 64, head, sequence); warp w owns
// query rows [16w, 16w + 16) and keeps their Q fragments, scores, output accumulator and softmax state
// in registers. Keys, values, key positions and the slot tables are double-buffered; a tile's window is
// requested while the previous tile finishes. Per key tile the position terms are computed on tensor
// cores for the tile's slot window only, kWindow slots at a time (one chunk for contiguous positions: at
// most BM + BN - 1 = 127 slots), stored pre-scaled in fp16 and gathered per score; a tile whose window
// is one edge slot (every saturated tile) is plain flash plus a row bias (c2p, once per CTA) and a
// column bias (p2c, in the Q.K^T accumulators), with no window, gather or extra barrier.
template <class ElementT>
struct FlashTraits<ElementT, 64, true> {
  using Element = ElementT;
  static constexpr bool kTensorCores = true;
  static constexpr int kHeadDim = 64;
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kMinBlocksPerSm = 2;  // 2 x 100 KB of shared memory fit a Hopper or Ampere SM
  static constexpr int kBlockM = 16 * kWarps;
  static constexpr int kBlockN = 64;
  static constexpr int kWindow = 128;          // slots per window chunk
  static constexpr int kWindowStep = 16;       // windows are computed in n16 steps: two mma n8 tiles
  static constexpr int kTermLd = kWindow + 8;  // fp16 row stride of the term tiles: rows 4 banks apart

  // Shared memory, in bytes. Tiles of 16-bit elements are (rows, 64), swizzled (mma.cuh). The query
  // tile shares the key window's space: it lives in registers before the first window arrives.
  static constexpr int kTileBytes = kBlockN * kHeadDim * 2;
  static constexpr int kKOffset = 0;                                                    // 2 x (BN, 64) keys
  static constexpr int kVOffset = kKOffset + 2 * kTileBytes;                            // 2 x (BN, 64) values
  static constexpr int kKeyWindowOffset = kVOffset + 2 * kTileBytes;                    // (W, 64) Kr rows; (BM, 64) q
  static constexpr int kQueryWindowOffset = kKeyWindowOffset + kWindow * kHeadDim * 2;  // (W, 64) Qr rows
  static constexpr int kC2pOffset = kQueryWindowOffset + kWindow * kHeadDim * 2;        // (BM, W) fp16
  static constexpr int kP2cOffset = kC2pOffset + kBlockM * kTermLd * 2;                 // (BN, W) fp16
  static constexpr int kKeyPosOffset = kP2cOffset + kBlockN * kTermLd * 2;              // int 2 x BN
  static constexpr int kSlotOffset = kKeyPosOffset + 2 * kBlockN * 4;  // int 2 x (BM + BN): diff -> slot
  static constexpr std::size_t kSmemBytes = kSlotOffset + 2 * (kBlockM + kBlockN) * 4;

  static_assert(kBlockM == kBlockN, "the p2c window of a warp covers the keys of the rows it owns");
  static_assert(kWindow >= kBlockM + kBlockN - 1, "one chunk must hold every slot of a contiguous tile");
  static_assert(kWindow % kWindowStep == 0 && kBlockN % 16 == 0, "mma tiles are 16 wide");
  static_assert(kBlockM * kHeadDim <= kWindow * kHeadDim, "the query tile fits in the key window's space");
  static_assert(kSlotOffset % 16 == 0 && kC2pOffset % 16 == 0, "tiles start on 16-byte boundaries");

  static constexpr bool is_valid(std::size_t max_smem_per_block) { return kSmemBytes <= max_smem_per_block; }
};

// Eager path: one CTA per (query row, head, sequence); the row of scores lives in shared memory.
struct EagerTraits {
  static constexpr int kThreads = 128;
  static std::size_t smem_bytes(std::int64_t max_seqlen, int head_size) {
    return static_cast<std::size_t>(max_seqlen + head_size) * sizeof(float);
  }
};

}  // namespace flashdeberta::cuda_kernels

// The attention backward tests' cases, shared by the Eigen op test (test_attention_backward_eigen.cpp) and the Kokkos
// training test: what a case is made of, its inputs on the host, and the forward's arguments over any storage (the
// host vectors for the float64 reference, or a policy's buffers).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "flashdeberta/math/relative_position.hpp"
#include "flashdeberta/policy/op_args.hpp"
#include "training_test_support.hpp"

namespace flashdeberta::attention_tests {

struct Spec {
  std::vector<std::int32_t> lengths{37};
  std::int64_t heads = 2;
  std::int64_t head_size = 16;
  bool c2p = true;
  bool p2c = true;
  QkvLayout layout = QkvLayout::kStacked;
  bool holes = false;       // positions with gaps, flagged non-contiguous
  std::int64_t span = 16;   // k: the tables have 2k rows
  bool log_buckets = true;  // v2/v3's log buckets up to distance 64, else v1's clamp at k (a short window)
  std::uint32_t seed = 1;
  float dropout = 0.0f;  // on the probabilities (AttentionArgs::dropout), with the two below
  std::uint64_t dropout_seed = 0;
  std::uint64_t dropout_offset = 0;

  std::string name() const {
    std::ostringstream os;
    os << "L {";
    for (auto l : lengths) os << l << ' ';
    os << "} H " << heads << " d " << head_size << (c2p ? " c2p" : "") << (p2c ? " p2c" : "")
       << (layout == QkvLayout::kStacked ? " stacked" : " interleaved") << (holes ? " holes" : "")
       << (log_buckets ? " log" : " clamp") << " k " << span;
    if (dropout > 0.0f) os << " dropout " << dropout << " seed " << dropout_seed << " offset " << dropout_offset;
    return os.str();
  }
};

inline constexpr float kTableStart = 0.5f;  // dpos_* hold this before the backward adds into them

// Packed sequences of lengths 1 to 130 with holes, v1's interleaved layout, 3 heads of 16 and 64, each set of position
// terms (c2p and p2c, either, none): eight cases seeded first_seed, first_seed + 1, ...
inline std::vector<Spec> packed_position_term_specs(std::uint32_t first_seed) {
  std::vector<Spec> specs;
  for (std::int64_t d : {16, 64}) {
    for (auto [c2p, p2c] : {std::pair{true, true}, {true, false}, {false, true}, {false, false}}) {
      Spec s;
      s.lengths = {5, 130, 1, 37, 70};
      s.heads = 3;
      s.head_size = d;
      s.c2p = c2p;
      s.p2c = p2c;
      s.layout = QkvLayout::kInterleavedPerHead;
      s.holes = true;
      s.seed = first_seed++;
      specs.push_back(s);
    }
  }
  return specs;
}

// A case's inputs on the host: packed sequences (positions with holes where asked), the relative slot table, the fused
// (T, 3A) q/k/v, both (2k, A) tables and dout (T, A + 3): a row stride wider than the gradient.
struct Inputs {
  Spec spec;
  std::int64_t tokens = 0, width = 0, slots = 0, saturation = 0, max_length = 0, dout_ld = 0;
  std::vector<std::int32_t> cu{0}, positions, index;
  std::vector<float> qkv, pos_key, pos_query, dout;

  explicit Inputs(Spec const& s) : spec(s) {
    width = s.heads * s.head_size;
    std::mt19937 gen(s.seed);
    for (std::int32_t length : s.lengths) {
      std::int32_t p = s.holes ? static_cast<std::int32_t>(gen() % 4) : 0;
      for (std::int32_t i = 0; i < length; ++i) {
        positions.push_back(p);
        p += (s.holes && gen() % 5 == 0) ? 2 + static_cast<std::int32_t>(gen() % 5) : 1;
      }
      cu.push_back(cu.back() + length);
      max_length = std::max<std::int64_t>(max_length, length);
    }
    tokens = cu.back();
    auto const bucket = [&](std::int64_t x) { return s.log_buckets ? log_bucket_position(x, s.span, 64) : x; };
    while (bucket(saturation) < s.span) ++saturation;
    for (std::int64_t x = -saturation; x <= saturation; ++x)
      index.push_back(static_cast<std::int32_t>(s.span + std::clamp<std::int64_t>(bucket(x), -s.span, s.span - 1)));
    slots = 2 * s.span;
    dout_ld = width + 3;
    using training_tests::random_values;
    qkv = random_values(static_cast<std::size_t>(tokens * 3 * width), 1.5f, s.seed + 1);
    pos_key = random_values(static_cast<std::size_t>(slots * width), 1.0f, s.seed + 2);
    pos_query = random_values(static_cast<std::size_t>(slots * width), 1.0f, s.seed + 3);
    dout = random_values(static_cast<std::size_t>(tokens * dout_ld), 1.0f, s.seed + 4);
  }

  // The forward's arguments over the given storage: the fused q/k/v, the tables, out, and the sequence layout.
  AttentionArgs args(float* qkv_data, float* key_table, float* query_table, float* out, std::int32_t const* cu_data,
                     std::int32_t const* positions_data, std::int32_t const* index_data) const {
    AttentionArgs a;
    view_fused_qkv(a, {qkv_data, DType::kF32, tokens, 3 * width, 3 * width}, spec.head_size, spec.layout);
    a.num_heads = spec.heads;
    a.head_size = spec.head_size;
    if (spec.c2p) a.pos_key = {key_table, DType::kF32, slots, width, width};
    if (spec.p2c) a.pos_query = {query_table, DType::kF32, slots, width, width};
    a.relative_index = index_data;
    a.saturation = saturation;
    a.scale = std::sqrt(static_cast<float>(spec.head_size * (1 + int{spec.c2p} + int{spec.p2c})));
    a.out = {out, DType::kF32, tokens, width, width};
    a.sequences.cu_seqlens = cu_data;
    a.sequences.positions = positions_data;
    a.sequences.batch = static_cast<std::int64_t>(spec.lengths.size());
    a.sequences.total_tokens = tokens;
    a.sequences.max_seqlen = max_length;
    a.sequences.max_position = *std::max_element(positions.begin(), positions.end()) + 1;
    a.sequences.contiguous_positions = !spec.holes;
    a.dropout = spec.dropout;
    a.dropout_seed = spec.dropout_seed;
    a.dropout_offset = spec.dropout_offset;
    return a;
  }
};

}  // namespace flashdeberta::attention_tests

// Relative positions (spec 3): the log-bucket function and the precomputed slot table.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/core/model_config.hpp"

namespace flashdeberta {

// beta(x) of spec 3.2, evaluated in float32 exactly as HF's make_log_bucket_position.
inline std::int64_t log_bucket_position(std::int64_t relative_pos, std::int64_t bucket_size,
                                        std::int64_t max_position) {
  std::int64_t const sign = (relative_pos > 0) - (relative_pos < 0);
  std::int64_t const mid = bucket_size / 2;
  std::int64_t const magnitude = relative_pos < 0 ? -relative_pos : relative_pos;
  std::int64_t const abs_pos = (relative_pos < mid && relative_pos > -mid) ? mid - 1 : magnitude;
  if (abs_pos <= mid) return relative_pos;
  float const numerator = std::log(static_cast<float>(abs_pos) / static_cast<float>(mid));
  // HF: torch.log(torch.tensor((max_position - 1) / mid)): the ratio in double, stored as float32.
  float const denominator =
      std::log(static_cast<float>(static_cast<double>(max_position - 1) / static_cast<double>(mid)));
  float const scaled = (numerator / denominator) * static_cast<float>(mid - 1);
  return sign * (static_cast<std::int64_t>(std::ceil(scaled)) + mid);
}

// The table delta(diff) = k + clamp(beta(diff), -k, k - 1) for diff in [-S, S]; every |diff| >= S maps to
// the value at the edge (the saturated region where position terms become per-row/per-column constants).
struct RelativeSlotTable {
  std::int64_t span = 0;            // k: the relative-embedding table has 2k rows
  std::int64_t saturation = 0;      // S
  std::vector<std::int32_t> slots;  // (2S + 1): slots[diff + S]

  std::int32_t slot(std::int64_t diff) const {
    std::int64_t const clamped = diff < -saturation ? -saturation : (diff > saturation ? saturation : diff);
    return slots[static_cast<std::size_t>(clamped + saturation)];
  }

  // The table rows [first, first + count) that pairs at most `reach` positions apart read: from the slot of -reach
  // to that of +reach (slots are monotone in the distance).
  struct Rows {
    std::int64_t first = 0, count = 0;
  };
  Rows reached_rows(std::int64_t reach) const { return {slot(-reach), slot(reach) - slot(-reach) + 1}; }
};

inline std::int64_t bucketed_relative_position(ModelConfig const& config, std::int64_t diff) {
  if (config.uses_log_buckets())
    return log_bucket_position(diff, config.position_buckets, config.max_relative_positions);
  return diff;
}

inline RelativeSlotTable make_relative_slot_table(ModelConfig const& config) {
  RelativeSlotTable table;
  table.span = config.relative_span();
  FLASHDEBERTA_REQUIRE(
      table.span > 0,
      "relative attention needs a positive span (position_buckets or max_relative_positions), got " << table.span);
  // beta is odd and monotone, so S is the first distance whose bucket reaches k (then -S reaches -k too).
  constexpr std::int64_t kSearchLimit = std::int64_t{1} << 26;
  std::int64_t s = 0;
  while (bucketed_relative_position(config, s) < table.span) {
    ++s;
    FLASHDEBERTA_REQUIRE(s < kSearchLimit, "relative positions never saturate for position_buckets="
                                               << config.position_buckets
                                               << " max_relative_positions=" << config.max_relative_positions);
  }
  table.saturation = s;
  table.slots.resize(static_cast<std::size_t>(2 * s + 1));
  for (std::int64_t diff = -s; diff <= s; ++diff) {
    std::int64_t bucket = bucketed_relative_position(config, diff);
    bucket = bucket < -table.span ? -table.span : (bucket > table.span - 1 ? table.span - 1 : bucket);
    table.slots[static_cast<std::size_t>(diff + s)] = static_cast<std::int32_t>(table.span + bucket);
  }
  return table;
}

}  // namespace flashdeberta

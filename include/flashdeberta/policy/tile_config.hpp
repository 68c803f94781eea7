// Tile configurations of the attention kernels and their run-time overrides, as FlashDeBERTa's kernels offer them:
// FLASHDEBERTA_FWD_{BLOCK_M,BLOCK_N,NUM_STAGES,NUM_WARPS} for the forward, FLASHDEBERTA_BWD_* for both backward
// kernels, FLASHDEBERTA_BWD_KV_* or FLASHDEBERTA_BWD_Q_* for one of them (over the shared group). A group is set whole
// or not at all; what a kernel cannot run is refused by name, and what does not fit the device's shared memory is
// shrunk with a one-line note. Backend-neutral: a backend describes its kernels' choices and shared-memory needs.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "flashdeberta/core/error.hpp"

namespace flashdeberta {

struct TileConfig {
  int block_m = 0;     // query rows per CTA
  int block_n = 0;     // key columns per step
  int num_stages = 0;  // tiles in flight (the copy pipeline's depth)
  int num_warps = 0;

  bool operator==(TileConfig const&) const = default;
};

inline std::string to_string(TileConfig const& c) {
  std::ostringstream os;
  os << "(BLOCK_M " << c.block_m << ", BLOCK_N " << c.block_n << ", NUM_STAGES " << c.num_stages << ", NUM_WARPS "
     << c.num_warps << ")";
  return os.str();
}

// What a kernel family can run: the values each field may take (its compiled instantiations), each list ascending.
struct TileChoices {
  std::vector<int> block_m, block_n, num_stages, num_warps;
};

// The environment as getenv sees it; tests pass their own.
using EnvironmentLookup = std::function<char const*(char const* name)>;

namespace detail {

inline constexpr char const* kTileFields[4] = {"BLOCK_M", "BLOCK_N", "NUM_STAGES", "NUM_WARPS"};

inline std::string list_of(std::vector<int> const& values) {
  std::ostringstream os;
  for (std::size_t i = 0; i < values.size(); ++i) os << (i == 0 ? "" : ", ") << values[i];
  return os.str();
}

inline bool contains(std::vector<int> const& values, int v) {
  for (int x : values)
    if (x == v) return true;
  return false;
}

// A positive decimal integer that fits an int, the whole text.
inline std::optional<int> positive_int(char const* text) {
  if (text == nullptr || *text < '0' || *text > '9') return std::nullopt;
  char* end = nullptr;
  errno = 0;
  long const v = std::strtol(text, &end, 10);
  if (errno != 0 || *end != '\0' || v <= 0 || v > (1 << 20)) return std::nullopt;
  return static_cast<int>(v);
}

}  // namespace detail

// The group `prefix` (e.g. "FLASHDEBERTA_FWD") from the environment: nullopt when none of its four variables is set.
// One to three set, a value that is not a positive integer, or one the kernel cannot run: flashdeberta::Error naming
// the variables and what they may be.
inline std::optional<TileConfig> tile_override(
    std::string_view prefix, TileChoices const& choices,
    EnvironmentLookup const& lookup = [](char const* name) { return static_cast<char const*>(std::getenv(name)); }) {
  std::vector<int> const* const allowed[4] = {&choices.block_m, &choices.block_n, &choices.num_stages,
                                              &choices.num_warps};
  int values[4] = {};
  std::vector<std::string> set, unset;
  for (int f = 0; f < 4; ++f) {
    std::string const name = std::string(prefix) + "_" + detail::kTileFields[f];
    char const* const text = lookup(name.c_str());
    if (text == nullptr) {
      unset.push_back(name);
      continue;
    }
    set.push_back(name);
    std::optional<int> const v = detail::positive_int(text);
    FLASHDEBERTA_REQUIRE(v.has_value(), name << "=\"" << text << "\" is not a positive integer");
    FLASHDEBERTA_REQUIRE(detail::contains(*allowed[f], *v),
                         name << "=" << *v << " is not one this kernel runs (" << detail::list_of(*allowed[f]) << ")");
    values[f] = *v;
  }
  if (set.empty()) return std::nullopt;
  if (!unset.empty()) {
    std::ostringstream os;
    for (std::size_t i = 0; i < unset.size(); ++i) os << (i == 0 ? "" : ", ") << unset[i];
    FLASHDEBERTA_FAIL(prefix << "_*: " << set.size() << " of the group's four variables are set; set " << os.str()
                             << " too, or none of them");
  }
  return TileConfig{values[0], values[1], values[2], values[3]};
}

// A backward kernel's override: its own group (`kernel_prefix`, e.g. "FLASHDEBERTA_BWD_KV") over the shared one
// (`shared_prefix`, "FLASHDEBERTA_BWD"); each group is checked whole even when the other wins.
inline std::optional<TileConfig> tile_override(
    std::string_view kernel_prefix, std::string_view shared_prefix, TileChoices const& choices,
    EnvironmentLookup const& lookup = [](char const* name) { return static_cast<char const*>(std::getenv(name)); }) {
  std::optional<TileConfig> const shared = tile_override(shared_prefix, choices, lookup);
  std::optional<TileConfig> const own = tile_override(kernel_prefix, choices, lookup);
  return own ? own : shared;
}

// The configuration to launch: `config` where its shared memory fits `smem_limit`, else the largest smaller one that
// does, reached by halving NUM_STAGES, then BLOCK_N, then BLOCK_M within `choices` (one field a step, the first that
// can still shrink), reported through `note` in one line. None fits: flashdeberta::Error naming the kernel.
inline TileConfig fit_shared_memory(std::string_view kernel, TileConfig const& config, TileChoices const& choices,
                                    std::function<std::size_t(TileConfig const&)> const& smem_bytes,
                                    std::size_t smem_limit, std::function<void(std::string const&)> const& note) {
  // The next smaller value of `values` than v, or v itself when it is the smallest.
  auto const smaller = [](std::vector<int> const& values, int v) {
    int best = v;
    for (int x : values)
      if (x < v && (best == v || x > best)) best = x;
    return best;
  };
  TileConfig c = config;
  while (smem_bytes(c) > smem_limit) {
    TileConfig next = c;
    if (int s = smaller(choices.num_stages, c.num_stages); s != c.num_stages) {
      next.num_stages = s;
    } else if (int n = smaller(choices.block_n, c.block_n); n != c.block_n) {
      next.block_n = n;
    } else if (int m = smaller(choices.block_m, c.block_m); m != c.block_m) {
      next.block_m = m;
    } else {
      FLASHDEBERTA_FAIL(kernel << ": no tile configuration fits the device's " << smem_limit
                               << " bytes of shared memory per block (the smallest, " << to_string(c) << ", needs "
                               << smem_bytes(c) << ")");
    }
    c = next;
  }
  if (!(c == config)) {
    std::ostringstream os;
    os << "flashdeberta: " << kernel << " tile " << to_string(config) << " needs " << smem_bytes(config)
       << " bytes of shared memory, the device has " << smem_limit << ": using " << to_string(c);
    note(os.str());
  }
  return c;
}

}  // namespace flashdeberta

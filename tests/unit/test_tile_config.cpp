// The attention kernels' tile overrides (policy/tile_config.hpp): a group of four variables set whole or not at all,
// values a kernel cannot run refused by name, a kernel's own group over the shared one, and the shrinking of a
// configuration that does not fit the device's shared memory, with its one-line note.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "flashdeberta/policy/tile_config.hpp"

namespace fd = flashdeberta;

namespace {

fd::TileChoices const kChoices{
    .block_m = {16, 32, 64, 128}, .block_n = {32, 64, 128}, .num_stages = {1, 2, 3}, .num_warps = {4, 8}};

// An environment of exactly `vars`.
fd::EnvironmentLookup environment(std::map<std::string, std::string> const& vars) {
  return [vars](char const* name) -> char const* {
    auto const it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

std::map<std::string, std::string> group(std::string const& prefix, std::string m, std::string n, std::string s,
                                         std::string w) {
  return {{prefix + "_BLOCK_M", m}, {prefix + "_BLOCK_N", n}, {prefix + "_NUM_STAGES", s}, {prefix + "_NUM_WARPS", w}};
}

// Shared memory of a forward-like kernel: the query tile, and NUM_STAGES key and value tiles, at head size 64 in
// 2-byte elements.
std::size_t smem(fd::TileConfig const& c) {
  return static_cast<std::size_t>(c.block_m + 2 * c.num_stages * c.block_n) * 64 * 2;
}

}  // namespace

TEST_CASE("tile overrides: none set, all four set, values read as given") {
  CHECK_FALSE(fd::tile_override("FLASHDEBERTA_FWD", kChoices, environment({})).has_value());
  auto const c =
      fd::tile_override("FLASHDEBERTA_FWD", kChoices, environment(group("FLASHDEBERTA_FWD", "128", "64", "2", "8")));
  REQUIRE(c.has_value());
  CHECK(*c == fd::TileConfig{128, 64, 2, 8});
  // Another group's variables are not this one's.
  CHECK_FALSE(
      fd::tile_override("FLASHDEBERTA_FWD", kChoices, environment(group("FLASHDEBERTA_BWD", "64", "64", "1", "4")))
          .has_value());
}

TEST_CASE("tile overrides: a partial group, a malformed value and one the kernel cannot run are refused by name") {
  auto partial = group("FLASHDEBERTA_FWD", "64", "64", "1", "4");
  partial.erase("FLASHDEBERTA_FWD_NUM_STAGES");
  CHECK_THROWS_WITH_AS(
      fd::tile_override("FLASHDEBERTA_FWD", kChoices, environment(partial)),
      doctest::Contains("3 of the group's four variables are set; set FLASHDEBERTA_FWD_NUM_STAGES too"), fd::Error);
  for (char const* bad : {"", "abc", "0", "-64", "64x", " 64", "1e2", "99999999999"}) {
    CAPTURE(bad);
    std::string const expected = "FLASHDEBERTA_FWD_BLOCK_N=\"" + std::string(bad) + "\" is not a positive integer";
    CHECK_THROWS_WITH_AS(
        fd::tile_override("FLASHDEBERTA_FWD", kChoices, environment(group("FLASHDEBERTA_FWD", "64", bad, "1", "4"))),
        doctest::Contains(expected.c_str()), fd::Error);
  }
  CHECK_THROWS_WITH_AS(
      fd::tile_override("FLASHDEBERTA_FWD", kChoices, environment(group("FLASHDEBERTA_FWD", "48", "64", "1", "4"))),
      doctest::Contains("FLASHDEBERTA_FWD_BLOCK_M=48 is not one this kernel runs (16, 32, 64, 128)"), fd::Error);
  CHECK_THROWS_WITH_AS(
      fd::tile_override("FLASHDEBERTA_FWD", kChoices, environment(group("FLASHDEBERTA_FWD", "64", "64", "1", "5"))),
      doctest::Contains("FLASHDEBERTA_FWD_NUM_WARPS=5 is not one this kernel runs (4, 8)"), fd::Error);
}

TEST_CASE("tile overrides: a backward kernel's own group wins over the shared one, and both are checked") {
  auto env = group("FLASHDEBERTA_BWD", "64", "32", "1", "4");
  CHECK(*fd::tile_override("FLASHDEBERTA_BWD_KV", "FLASHDEBERTA_BWD", kChoices, environment(env)) ==
        fd::TileConfig{64, 32, 1, 4});
  auto const q = group("FLASHDEBERTA_BWD_Q", "16", "64", "1", "4");
  env.insert(q.begin(), q.end());
  CHECK(*fd::tile_override("FLASHDEBERTA_BWD_Q", "FLASHDEBERTA_BWD", kChoices, environment(env)) ==
        fd::TileConfig{16, 64, 1, 4});
  CHECK(*fd::tile_override("FLASHDEBERTA_BWD_KV", "FLASHDEBERTA_BWD", kChoices, environment(env)) ==
        fd::TileConfig{64, 32, 1, 4});
  CHECK_FALSE(fd::tile_override("FLASHDEBERTA_BWD_KV", "FLASHDEBERTA_BWD", kChoices, environment({})).has_value());
  env["FLASHDEBERTA_BWD_NUM_WARPS"] = "3";  // the shared group is wrong even where the kernel's own would win
  CHECK_THROWS_WITH_AS(fd::tile_override("FLASHDEBERTA_BWD_Q", "FLASHDEBERTA_BWD", kChoices, environment(env)),
                       doctest::Contains("FLASHDEBERTA_BWD_NUM_WARPS=3"), fd::Error);
}

TEST_CASE("tile configurations that do not fit shared memory shrink, stages first, with one note") {
  std::vector<std::string> notes;
  auto const record = [&](std::string const& line) { notes.push_back(line); };
  fd::TileConfig const big{128, 128, 3, 8};  // (128 + 768) x 128 = 114,688 bytes
  CHECK(fd::fit_shared_memory("attention forward", big, kChoices, smem, 232448, record) == big);
  CHECK(notes.empty());
  // 99 KiB (an sm_86 / sm_89 block): two stages fit (81,920 bytes).
  fd::TileConfig const fitted = fd::fit_shared_memory("attention forward", big, kChoices, smem, 101376, record);
  CHECK(fitted == fd::TileConfig{128, 128, 2, 8});
  REQUIRE(notes.size() == 1);
  CHECK(notes[0] ==
        "flashdeberta: attention forward tile (BLOCK_M 128, BLOCK_N 128, NUM_STAGES 3, NUM_WARPS 8) needs 114688 bytes "
        "of shared memory, the device has 101376: using (BLOCK_M 128, BLOCK_N 128, NUM_STAGES 2, NUM_WARPS 8)");
  // 48 KiB exactly fits one stage ((128 + 256) x 128 = 49,152 bytes); a byte less takes BLOCK_N to 64 (32,768).
  CHECK(fd::fit_shared_memory("attention forward", big, kChoices, smem, 49152, record) ==
        fd::TileConfig{128, 128, 1, 8});
  CHECK(fd::fit_shared_memory("attention forward", big, kChoices, smem, 49151, record) ==
        fd::TileConfig{128, 64, 1, 8});
  // 8 KiB: down to the smallest BLOCK_N, then BLOCK_M ((16 + 64) x 128 = 10,240 bytes still too many): refused.
  CHECK_THROWS_WITH_AS(fd::fit_shared_memory("attention forward", big, kChoices, smem, 8192, record),
                       doctest::Contains("attention forward: no tile configuration fits the device's 8192 bytes"),
                       fd::Error);
}

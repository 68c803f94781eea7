// What every benchmark program shares without a backend: the (B, L) shapes and their names, random token ids, and
// the command-line helpers of the programs that take their own flags before Google Benchmark's (bench_training,
// bench_training_gpu).
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "flashdeberta/core/batch.hpp"
#include "flashdeberta/core/error.hpp"
#include "random_checkpoint.hpp"

namespace flashdeberta::bench {

// (B, L) shapes of the suites: single sequences of growing length, and a batch of typical length.
struct Shape {
  std::int64_t batch;
  std::int64_t length;
};
inline constexpr Shape kShapes[] = {{1, 128}, {1, 512}, {1, 2048}, {1, 8192}, {8, 512}};

inline std::string shape_name(Shape s) { return "B:" + std::to_string(s.batch) + "/L:" + std::to_string(s.length); }

inline std::vector<std::int32_t> random_ids(std::int64_t count, std::int64_t vocab, std::uint64_t seed) {
  detail::SplitMix64 rng{seed};
  std::vector<std::int32_t> ids(static_cast<std::size_t>(count));
  for (auto& id : ids) id = static_cast<std::int32_t>(rng.next() % static_cast<std::uint64_t>(vocab));
  return ids;
}

// B sequences of L random ids each.
inline Batch random_batch(Shape s, std::int64_t vocab, std::uint64_t seed = 7) {
  Batch batch;
  for (std::int64_t b = 0; b < s.batch; ++b) {
    std::vector<std::int32_t> const ids = random_ids(s.length, vocab, seed + static_cast<std::uint64_t>(b));
    batch.add_sequence(ids);
  }
  return batch;
}

// `arg` is `key` followed by the value ("--steps=3"): the value into `value`.
inline bool take_flag(std::string_view arg, std::string_view key, std::string& value) {
  if (arg.substr(0, key.size()) != key) return false;
  value = std::string(arg.substr(key.size()));
  return true;
}

// "32x512,8x2048": (B, L) pairs; an item without a positive B and L is refused by name.
inline std::vector<Shape> parse_shapes(std::string const& text) {
  std::vector<Shape> shapes;
  for (std::size_t at = 0; at <= text.size();) {
    std::size_t const end = std::min(text.find(',', at), text.size());
    std::string const item = text.substr(at, end - at);
    std::size_t const x = item.find('x');
    long long const b = x == std::string::npos ? 0 : std::atoll(item.substr(0, x).c_str());
    long long const l = x == std::string::npos ? 0 : std::atoll(item.substr(x + 1).c_str());
    FLASHDEBERTA_REQUIRE(b > 0 && l > 0, "--shapes: '" << item << "' is not BxL with B and L positive (e.g. 8x2048)");
    shapes.push_back({b, l});
    at = end + 1;
  }
  return shapes;
}

// Google Benchmark over the arguments the program left to it (`rest`, argv[0] first): 1 for one it does not know.
inline int run_registered_benchmarks(std::vector<char*>& rest) {
  int count = static_cast<int>(rest.size());
  benchmark::Initialize(&count, rest.data());
  if (benchmark::ReportUnrecognizedArguments(count, rest.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace flashdeberta::bench

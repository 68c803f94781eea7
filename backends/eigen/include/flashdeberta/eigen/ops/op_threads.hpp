// How many of a policy's threads one operation should use, from the work it has.
//
// Every host op opens an OpenMP team of its own. Waking a team and meeting at its closing barrier costs a few
// microseconds with spinning workers and tens when they sleep (or share a core with another process), which is
// the whole cost of a LayerNorm over 16 tokens. At short sequences (B x L <= 128 tokens) a forward is about 120
// such ops, so each op gets only as many threads as it has work for: at least `min_work` units per thread.
#pragma once

#include <algorithm>
#include <cstdint>

namespace flashdeberta::eigen_ops {

// Minimum work per thread, in the unit of each op:
// - elementwise passes (LayerNorm, bias + activation, embedding): float elements touched; 16 x 768 (one
//   LayerNorm at 1 x 16) is a few microseconds of one core, about what a team's start and barrier cost.
inline constexpr double kMinElementsPerThread = 32.0 * 1024.0;
// - GEMMs: multiply-adds (M N K); 2^20 is ~20-40 us on one AVX-512 core.
inline constexpr double kMinFmaPerThread = 1024.0 * 1024.0;

// threads, or fewer so that each gets at least min_work of `work`; never more than `tasks` (the units that
// cannot be split further), never fewer than 1.
inline int threads_for(double work, double min_work, int threads, std::int64_t tasks = INT64_MAX) {
  double const by_work = std::max(1.0, work / min_work);
  std::int64_t const cap = std::min<std::int64_t>(threads, std::max<std::int64_t>(tasks, 1));
  return static_cast<int>(std::clamp<double>(by_work, 1.0, static_cast<double>(cap)));
}

// body(i) for i in [0, count), split statically over `team` threads, or on the calling thread alone when team
// is 1: libgomp closes even a one-thread team at a barrier that makes a futex system call (about a microsecond on
// a VM; a small forward opens dozens of teams). No orphaned omp constructs here: libomp leaks the buffers it
// makes for one outside a team (LeakSanitizer).
template <class Body>
void for_each_index(int team, std::int64_t count, Body&& body) {
#if defined(_OPENMP)
  if (team > 1) {
#pragma omp parallel for num_threads(team) schedule(static)
    for (std::int64_t i = 0; i < count; ++i) body(i);
    return;
  }
#endif
  for (std::int64_t i = 0; i < count; ++i) body(i);
}

}  // namespace flashdeberta::eigen_ops

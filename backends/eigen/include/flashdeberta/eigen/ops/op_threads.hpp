// How many of a policy's threads one operation works with, and the one place host ops open OpenMP teams.
//
// Waking a team and meeting at its closing barrier costs a few microseconds with spinning workers and tens when
// they sleep (or share a core with another process), which is the whole cost of a LayerNorm over 16 tokens. At
// short sequences (B x L <= 128 tokens) a forward is about 120 such ops, so each op puts only as many threads to
// work as it has work for: at least `min_work` units per thread.
//
// Those workers still run inside a team of the policy's full size. libgomp keeps one pool of threads per calling
// thread and, when a team is smaller than the one before, ends the pool threads it leaves out; the next larger
// team creates them again (libgomp team.c: "those that aren't part of the team will exit"). A forward that
// alternates 16-thread GEMMs with 3-thread LayerNorms made and ended a few thousand threads: 1 x 128 tokens ran
// 3.9x slower than 1 x 64 on 16 cores of the GPU machine. Idle team members only pass the closing barrier.
#pragma once

#include <algorithm>
#include <cstdint>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace flashdeberta::eigen_ops {

// Minimum work per thread, in the unit of each op:
// - elementwise passes (LayerNorm, bias + activation, embedding): float elements touched; 16 x 768 (one
//   LayerNorm at 1 x 16) is a few microseconds of one core, about what a team's start and barrier cost.
inline constexpr double kMinElementsPerThread = 32.0 * 1024.0;
// - GEMMs: multiply-adds (M N K); 2^20 is ~20-40 us on one AVX-512 core.
inline constexpr double kMinFmaPerThread = 1024.0 * 1024.0;

// The threads of one op: `workers` share its work inside an OpenMP team of `team` threads (the policy's count).
struct OpThreads {
  int workers = 1;
  int team = 1;
};

// `threads` (the policy's count), of which as many work as get at least min_work of `work` each; never more
// workers than `tasks` (the units that cannot be split further), never fewer than 1.
inline OpThreads threads_for(double work, double min_work, int threads, std::int64_t tasks = INT64_MAX) {
  double const by_work = std::max(1.0, work / min_work);
  std::int64_t const cap = std::min<std::int64_t>(threads, std::max<std::int64_t>(tasks, 1));
  return {static_cast<int>(std::clamp<double>(by_work, 1.0, static_cast<double>(cap))), std::max(threads, 1)};
}

// body(worker, workers) on each of threads.workers threads of a team of threads.team, or body(0, 1) on the
// calling thread alone when one worker suffices: libgomp closes even a one-thread team at a barrier that makes a
// futex system call (about a microsecond on a VM; a small forward opens dozens of teams). workers shrinks to
// the team OpenMP actually gives (nested regions, thread limits). No orphaned omp constructs here: libomp leaks
// the buffers it makes for one outside a team (LeakSanitizer).
template <class Body>
void run_workers(OpThreads threads, Body&& body) {
#if defined(_OPENMP)
  if (threads.workers > 1) {
#pragma omp parallel num_threads(std::max(threads.team, threads.workers))
    {
      int const workers = std::min(threads.workers, omp_get_num_threads());
      int const worker = omp_get_thread_num();
      if (worker < workers) body(worker, workers);
    }
    return;
  }
#endif
  body(0, 1);
}

// body(i) for i in [0, count), split into contiguous ranges over threads.workers.
template <class Body>
void for_each_index(OpThreads threads, std::int64_t count, Body&& body) {
  run_workers(threads, [&](int worker, int workers) {
    std::int64_t const begin = count * worker / workers;
    std::int64_t const end = count * (worker + 1) / workers;
    for (std::int64_t i = begin; i < end; ++i) body(i);
  });
}

}  // namespace flashdeberta::eigen_ops

// The calling thread's OpenMP team size for one scope: the host backends' operations and the oneDNN primitives
// they run size their teams from it (omp_get_max_threads).
#pragma once

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace flashdeberta {

// Sets the calling thread's OpenMP thread count (its nthreads-var, which omp_get_max_threads reads) for one
// operation and restores it after. Eigen's GEMM sizes its OpenMP team from omp_get_max_threads() unless
// Eigen::setNbThreads was called; that setting is a process-wide variable, so a policy that set it would
// change the GEMMs of every other policy and race with threads constructing or running them. The
// per-thread value keeps each policy's count its own; regions opened inside an operation inherit it.
class OmpThreadsScope {
 public:
  explicit OmpThreadsScope([[maybe_unused]] int threads) {
#if defined(_OPENMP)
    previous_ = omp_get_max_threads();
    if (previous_ != threads) omp_set_num_threads(threads);
#endif
  }
  ~OmpThreadsScope() {
#if defined(_OPENMP)
    if (omp_get_max_threads() != previous_) omp_set_num_threads(previous_);
#endif
  }
  OmpThreadsScope(OmpThreadsScope const&) = delete;
  OmpThreadsScope& operator=(OmpThreadsScope const&) = delete;

 private:
  [[maybe_unused]] int previous_ = 1;
};

}  // namespace flashdeberta

// The main of every suite: Google Benchmark's, inside Kokkos' lifetime when the Kokkos policy is built
// (Kokkos must be initialized before the first policy is made and finalized after the last is gone).
#include <benchmark/benchmark.h>

#if defined(FLASHDEBERTA_BENCH_KOKKOS)
#include <Kokkos_Core.hpp>
#endif

int main(int argc, char** argv) {
#if defined(FLASHDEBERTA_BENCH_KOKKOS)
  Kokkos::ScopeGuard const kokkos(argc, argv);
#endif
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

#!/usr/bin/env bash
# ThreadSanitizer run of tests/concurrency: configures a minimal build in BUILD_DIR (FLASHDEBERTA_TSAN, host
# backends only, no CUDA, benchmarks, examples or fuzzers), builds only the target test_concurrency and runs
# each of its executables (one per host backend, one for the tokenizers); the first race TSan reports stops
# the run with a non-zero exit.
#
#   tests/concurrency/run_tsan.sh ROOT BUILD_DIR
#
# OpenMP is off in this build: libgomp is not built with TSan, so TSan cannot see the synchronization of
# its barriers and reports races inside every parallel region. Without it EigenPolicy runs each operation
# on the calling thread and opens no OpenMP region (docs/thread-safety.md); the 8 std::threads of the test
# are what TSan watches. CXX selects the compiler (g++ 12 and clang++ 14 both work; g++ by default).
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 ROOT BUILD_DIR" >&2
  exit 2
fi
root=$(cd "$1" && pwd)
build=$2
jobs=${FLASHDEBERTA_TSAN_JOBS:-$(nproc)}

generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLASHDEBERTA_TSAN=ON \
  -DFLASHDEBERTA_WITH_OPENMP=OFF -DFLASHDEBERTA_WITH_CUDA=OFF -DFLASHDEBERTA_WITH_ONEDNN=OFF -DFLASHDEBERTA_BUILD_BENCH=OFF \
  -DFLASHDEBERTA_BUILD_APPS=OFF -DFLASHDEBERTA_BUILD_EXAMPLES=OFF -DFLASHDEBERTA_BUILD_FUZZ=OFF -DFLASHDEBERTA_NATIVE=ON >/dev/null
cmake --build "$build" -j"$jobs" --target test_concurrency
# halt_on_error: the first report fails the run (exit 66) instead of a warning lost in the log. A backend this
# build lacks has no executable.
ran=0
for test in test_concurrency_eigen test_concurrency_kokkos test_concurrency_tokenizer; do
  exe=$build/tests/concurrency/$test
  [ -x "$exe" ] || continue
  echo "== $test"
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" "$exe"
  ran=$((ran + 1))
done
[ "$ran" -gt 0 ] || { echo "run_tsan.sh: no concurrency test was built" >&2; exit 1; }

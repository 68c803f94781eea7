#!/usr/bin/env bash
# Quick start, step 2 (and CI): build everything once and run the whole test suite, then build everything
# again with clang under AddressSanitizer + UBSan, run the suite there, and fuzz the parsers with that build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/install_deps.sh"
jobs=$(nproc)
# Each step's start, in seconds since this script began, so a CI log shows where the time goes.
phase() { echo "== [${SECONDS} s] $*"; }
build=${FLASHDEBERTA_BUILD_DIR:-$root/build}

# The two builds target different host code: the main build this machine (-march=native: the AVX-512
# attention kernels where the CPU has them), the clang build any x86-64 (the Eigen path), so the golden, head
# and op tests run on both paths; test_host_kernels checks that each build compiled the path it should.
# Without a GPU the GPU tests only compile (and report skipped), so the kernels compile once per code path, not
# per GPU of the default list (75 80 86 89 90): sm_90 code (the GPU machine's) and the PTX of compute_75 (no
# tensor cores: a T4) and compute_80 (what sm_86 and sm_89 run too), 28 s of nvcc against 80 s for their
# binaries. The tests' host code compiles at -O0 there too (tests/cuda/CMakeLists.txt): about 4 minutes of CPU less.
cuda_arch=(-DFLASHDEBERTA_GPU_TESTS_COMPILE_OPTIONS=)  # with a GPU: the build type's flags, whatever the cache held
if ! nvidia-smi >/dev/null 2>&1; then
  cuda_arch=("-DCMAKE_CUDA_ARCHITECTURES=75-virtual;80-virtual;90" -DFLASHDEBERTA_GPU_TESTS_COMPILE_OPTIONS=-O0)
fi
phase "build (g++, Release, native): library, tests, examples, benchmarks"
# The API samples only have to compile and run on the fixtures here: -O0 (examples/CMakeLists.txt); the tests' own
# files -O1 (tests/CMakeLists.txt), the library, its kernels and the programs Release.
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DFLASHDEBERTA_NATIVE=ON "${cuda_arch[@]}" \
  -DFLASHDEBERTA_EXAMPLES_COMPILE_OPTIONS=-O0 -DFLASHDEBERTA_TESTS_COMPILE_OPTIONS=-O1 >/dev/null
cmake --build "$build" -j"$jobs"
phase "tests"
ctest --test-dir "$build" --output-on-failure -j"$jobs"

# One clang build serves the sanitizer run and the fuzzers: the library, the tests and the CLI under ASan +
# UBSan (the CLI and server tests run the program, so it is checked too), and the libFuzzer targets, which add
# -fsanitize=fuzzer to the same sanitizers. Kokkos (Debian's is Serial-only; its op tests run in the main
# build), CUDA, oneDNN (Debian's threads through libgomp, clang's programs through libomp; its bf16/int8 tests
# run in the main build), the benchmarks and the API samples of examples/ are left out: the samples call the
# library the tests cover, and they cost a sixth of this build (7 programs, 670 CPU-s of its 3,150 on 2 cores,
# 2026-12-05). -O1 and line tables only, as the
# sanitizer and libFuzzer documentation suggest: half the compile time of -O2 -g (an Eigen test file: 92 s
# against 180 s).
phase "build (clang, -O1, portable, AddressSanitizer + UBSan): library, tests, CLI, fuzzers"
clang_build=$build-clang
CXX=clang++ cmake -S "$root" -B "$clang_build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" -DFLASHDEBERTA_NATIVE=OFF \
  -DFLASHDEBERTA_SANITIZE=ON -DFLASHDEBERTA_BUILD_FUZZ=ON -DFLASHDEBERTA_BUILD_APPS=ON -DFLASHDEBERTA_BUILD_EXAMPLES=OFF \
  -DFLASHDEBERTA_BUILD_BENCH=OFF -DFLASHDEBERTA_WITH_KOKKOS=OFF -DFLASHDEBERTA_WITH_CUDA=OFF \
  -DFLASHDEBERTA_WITH_ONEDNN=OFF -DFLASHDEBERTA_BUILD_PYTHON=OFF >/dev/null
cmake --build "$clang_build" -j"$jobs"
phase "tests under AddressSanitizer + UBSan"
UBSAN_OPTIONS=print_stacktrace=1 LSAN_OPTIONS=suppressions="$root/tests/lsan.supp" \
  ctest --test-dir "$clang_build" --output-on-failure -j"$jobs"

phase "libFuzzer: the parsers of untrusted input"
bash "$root/tests/fuzz/run_fuzzers.sh" "$clang_build" "${FLASHDEBERTA_FUZZ_SECONDS:-12}"
phase "ThreadSanitizer: one model, head model and tokenizer shared by 8 threads"
bash "$root/tests/concurrency/run_tsan.sh" "$root" "$build-tsan"
echo "all test steps passed in ${SECONDS} s"

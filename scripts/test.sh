#!/usr/bin/env bash
# Quick start, step 2 (and CI): build everything once, run the whole test suite, then the sanitizer
# and fuzz steps.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/install_deps.sh"
jobs=$(nproc)
build=${FLASHDEBERTA_BUILD_DIR:-$root/build}

# The main build targets this machine (-march=native: the AVX-512 host kernels); the sanitizer build below
# stays portable, so both host code paths are tested.
echo "== build (Release, native): library, tests, examples, benchmarks"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DFLASHDEBERTA_NATIVE=ON >/dev/null
cmake --build "$build" -j"$jobs"
echo "== tests"
ctest --test-dir "$build" --output-on-failure -j"$jobs"

echo "== AddressSanitizer + UBSan: host tests"
asan=$build-asan
cmake -S "$root" -B "$asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLASHDEBERTA_SANITIZE=ON \
  -DFLASHDEBERTA_BUILD_BENCH=OFF -DFLASHDEBERTA_BUILD_EXAMPLES=OFF -DFLASHDEBERTA_WITH_KOKKOS=OFF \
  -DFLASHDEBERTA_WITH_CUDA=OFF >/dev/null
cmake --build "$asan" -j"$jobs"
ctest --test-dir "$asan" --output-on-failure -j"$jobs"

if [ -f "$root/tests/fuzz/CMakeLists.txt" ]; then
  echo "== libFuzzer: checkpoint and config parsers"
  fuzz=$build-fuzz
  CXX=clang++ cmake -S "$root" -B "$fuzz" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLASHDEBERTA_BUILD_FUZZ=ON \
    -DFLASHDEBERTA_BUILD_BENCH=OFF -DFLASHDEBERTA_BUILD_EXAMPLES=OFF -DFLASHDEBERTA_WITH_KOKKOS=OFF \
    -DFLASHDEBERTA_WITH_EIGEN=OFF -DFLASHDEBERTA_WITH_CUDA=OFF >/dev/null
  cmake --build "$fuzz" -j"$jobs" --target fuzz_safetensors fuzz_config fuzz_torch_pickle
  for target in fuzz_safetensors fuzz_config fuzz_torch_pickle; do
    # Seeds from tests/fuzz/corpus/<name> are copied, since libFuzzer adds what it finds to its corpus folder.
    corpus=$(mktemp -d)
    if [ -d "$root/tests/fuzz/corpus/${target#fuzz_}" ]; then cp "$root/tests/fuzz/corpus/${target#fuzz_}"/* "$corpus"/; fi
    "$fuzz/tests/fuzz/$target" -max_total_time="${FLASHDEBERTA_FUZZ_SECONDS:-45}" -rss_limit_mb=2048 \
      -dict="$root/tests/fuzz/${target#fuzz_}.dict" "$corpus" 2>&1 | tail -n 2
    rm -rf "$corpus"
  done
fi
echo "all test steps passed"

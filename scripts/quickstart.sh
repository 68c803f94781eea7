#!/usr/bin/env bash
# Quick start, step 1: build the CLI and run the embedded default checkpoint end to end.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/install_deps.sh"
build=${FLASHDEBERTA_BUILD_DIR:-$root/build}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DFLASHDEBERTA_NATIVE=ON -DFLASHDEBERTA_BUILD_TESTS=OFF -DFLASHDEBERTA_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target flashdeberta_cli
out=$(mktemp -d)/last_hidden_state.safetensors
"$build/examples/flashdeberta" run --model "$root/tests/fixtures/v3_base_like" \
  --input "$root/examples/data/input.json" --output "$out"

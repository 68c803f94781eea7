#!/usr/bin/env bash
# Quick start, step 1: build the CLI and run the two models we ship (models/README.md): fill-mask with
# models/tiny-en, and Debian-section classification of package descriptions (none of them in its training
# set) with models/tiny-en-sections, each with its load and run times.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/install_deps.sh"
build=${FLASHDEBERTA_BUILD_DIR:-$root/build}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DFLASHDEBERTA_NATIVE=ON -DFLASHDEBERTA_BUILD_TESTS=OFF -DFLASHDEBERTA_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target flashdeberta_cli
cli="$build/bin/flashdeberta"

echo "== flashdeberta fill-mask --model models/tiny-en --top-k 3"
"$cli" fill-mask --model "$root/models/tiny-en" --top-k 3 --timing \
  "In the beginning God created the heaven and the [MASK]." \
  "This is a command-line [MASK] for managing packages." \
  "This package contains the [MASK] files for the library." \
  "the capital city of [MASK]"

echo "== flashdeberta classify --model models/tiny-en-sections --top-k 2"
"$cli" classify --model "$root/models/tiny-en-sections" --top-k 2 --timing \
  "A fast-paced space shooter with twenty levels, joystick support and a built-in level editor." \
  "Python bindings for the libzstd compression library, for use in Python 3 programs." \
  "This package contains the header files and static library needed to build programs against libfoo." \
  "A small web server with support for CGI scripts, virtual hosts and TLS." \
  "A tool to convert scanned pages to searchable PDF documents."

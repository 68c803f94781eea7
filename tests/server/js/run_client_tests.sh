#!/bin/sh
# CTest's server.js_client: installs @huggingface/inference from package-lock.json into WORK_DIR (kept there,
# so a rerun with the same lock file installs nothing and needs no network) and runs the client tests.
# Exit 77 (skipped) only when node or npm is missing; any other failure, an install included, fails.
#   run_client_tests.sh SOURCE_DIR WORK_DIR     (FLASHDEBERTA_CLI: the CLI to serve with)
set -eu
src=$1
work=$2
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "node or npm is not installed: the @huggingface/inference client tests are skipped"
  exit 77
fi
mkdir -p "$work"
if ! cmp -s "$src/package-lock.json" "$work/package-lock.json" || [ ! -d "$work/node_modules/@huggingface/inference" ]; then
  cp "$src/package.json" "$src/package-lock.json" "$work/"
  (cd "$work" && npm ci --no-audit --no-fund --prefer-offline --loglevel=error)
fi
cp "$src/test_hf_inference_client.mjs" "$work/"
FLASHDEBERTA_FIXTURES="$src/../../fixtures" exec node "$work/test_hf_inference_client.mjs"

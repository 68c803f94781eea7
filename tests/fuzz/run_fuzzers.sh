#!/usr/bin/env bash
# Runs the libFuzzer targets of a build for SECONDS each and prints one line per target:
#   run_fuzzers.sh BUILD_DIR SECONDS [target...]      (no targets: every fuzz_* built in BUILD_DIR/tests/fuzz)
# Each target starts from a copy of tests/fuzz/corpus/<name>/ (libFuzzer adds what it finds to its corpus
# folder, and the committed seeds must stay as they are) with tests/fuzz/<name>.dict, <name> being the
# target without "fuzz_". Inputs go up to 1 MiB and the memory limits are low on purpose: a parser that
# needs more than 512 MiB for a 1 MiB input amplifies, and that is a finding, not a reason to raise them.
#
# Exits non-zero when any target finds something (crash, sanitizer report, leak, out-of-memory, timeout);
# the message names the input libFuzzer saved and the log, both kept under OUT/<target>/, where OUT is
# $FLASHDEBERTA_FUZZ_OUT or BUILD_DIR/fuzz-out (emptied per target at its start).
# Environment: FLASHDEBERTA_FUZZ_TIMEOUT, seconds one input may take (default 60: a 1 MiB text takes the
# tokenizer targets up to ~20 s under the sanitizers, against ~1 s in a release build); ASAN_OPTIONS
# (default quarantine_size_mb=64: ASan's 256 MiB quarantine of freed blocks would otherwise count
# against -rss_limit_mb and leave the parser only half of it); FLASHDEBERTA_FUZZ_ARGS, more libFuzzer flags
# (e.g. -len_control=0 to try long inputs from the start).
set -uo pipefail

if [ $# -lt 2 ]; then
  echo "usage: $0 BUILD_DIR SECONDS [target...]" >&2
  exit 2
fi
build=$(cd "$1" && pwd) || exit 2
seconds=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
bin_dir=$build/tests/fuzz
out_root=${FLASHDEBERTA_FUZZ_OUT:-$build/fuzz-out}
timeout_s=${FLASHDEBERTA_FUZZ_TIMEOUT:-60}
export ASAN_OPTIONS=${ASAN_OPTIONS:-quarantine_size_mb=64}
# Leaks of third-party libraries the targets cannot fix (libhdf5's error paths) are listed in tests/lsan.supp.
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$(cd "$(dirname "$0")/.." && pwd)/lsan.supp}

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for exe in "$bin_dir"/fuzz_*; do
    [ -f "$exe" ] && [ -x "$exe" ] && targets+=("$(basename "$exe")")
  done
fi
if [ ${#targets[@]} -eq 0 ]; then
  echo "run_fuzzers: no fuzz_* executables in $bin_dir (configure with -DFLASHDEBERTA_BUILD_FUZZ=ON, CXX=clang++)" >&2
  exit 2
fi

# One target's run; prints its report line(s) and returns 1 on a finding.
fuzz_one() {
  local target=$1 exe name out log work seeds args rc corpus execs rate rss status cov ft line artifacts reason
  exe=$bin_dir/$target
  name=${target#fuzz_}
  if [ ! -x "$exe" ]; then
    echo "$target: FAILED: not built ($exe missing)"
    return 1
  fi
  out=$out_root/$target
  rm -rf "$out"
  mkdir -p "$out"
  log=$out/fuzz.log
  # Scratch space for the run: the corpus copy and TMPDIR, under which the path-based targets write.
  work=$(mktemp -d)
  mkdir "$work/corpus" "$work/tmp"
  if [ -d "$here/corpus/$name" ]; then cp "$here/corpus/$name"/* "$work/corpus"/ 2>/dev/null; fi
  seeds=$(find "$work/corpus" -type f | wc -l)
  args=(-max_total_time="$seconds" -max_len=1048576 -rss_limit_mb=512 -malloc_limit_mb=512 -timeout="$timeout_s"
        -print_final_stats=1 -artifact_prefix="$out/")
  if [ -f "$here/$name.dict" ]; then args+=(-dict="$here/$name.dict"); fi
  # <name>.options: what one target runs with beside the common flags, as shell assignments: FUZZ_FLAGS (libFuzzer
  # flags, after the common ones, so they win) and ASAN_EXTRA (appended to ASAN_OPTIONS).
  local FUZZ_FLAGS="" ASAN_EXTRA=""
  # shellcheck disable=SC1090 # the file is the target's
  if [ -f "$here/$name.options" ]; then source "$here/$name.options"; fi
  # shellcheck disable=SC2206 # word splitting wanted: several flags in one variable
  args+=($FUZZ_FLAGS ${FLASHDEBERTA_FUZZ_ARGS:-})
  TMPDIR=$work/tmp ASAN_OPTIONS="$ASAN_OPTIONS${ASAN_EXTRA:+:$ASAN_EXTRA}" "$exe" "${args[@]}" "$work/corpus" >"$log" 2>&1
  rc=$?
  corpus=$(find "$work/corpus" -type f | wc -l)
  rm -rf "$work"

  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -n 1)
  # The last status line (#N DONE / pulse / NEW ...) holds the final coverage counters.
  status=$(grep -E '^#[0-9]+.* cov: ' "$log" | tail -n 1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$status")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$status")
  line="$target: ${execs:-?} execs (${rate:-?}/s), cov: ${cov:-?} ft: ${ft:-?}, corpus $seeds -> $corpus, peak rss ${rss:-?} MB"

  # Inputs libFuzzer saved for a finding; slow-unit-* files only mark slow inputs below the timeout.
  artifacts=$(find "$out" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'oom-*' \
    -o -name 'timeout-*' \) | sort)
  if [ $rc -ne 0 ] || [ -n "$artifacts" ]; then
    reason=$(grep -m 1 -E '^(==[0-9]+==ERROR|SUMMARY: |fuzz invariant broken|.*runtime error:|==[0-9]+== ERROR)' "$log")
    echo "$line"
    echo "  FINDING in $target (exit $rc): ${reason:-see the log}"
    for a in $artifacts; do echo "  input: $a"; done
    echo "  log: $log"
    return 1
  fi
  echo "$line"
}

# The targets run $FLASHDEBERTA_FUZZ_JOBS at a time (default: one per core); each is single-threaded, so this
# divides the step's wall time by the cores without shortening any target's SECONDS. Reports are printed in
# the targets' order once all have finished.
jobs=${FLASHDEBERTA_FUZZ_JOBS:-$(nproc)}
report_dir=$(mktemp -d)
trap 'rm -rf "$report_dir"' EXIT
for i in "${!targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  { fuzz_one "${targets[$i]}"; echo $? >"$report_dir/$i.status"; } >"$report_dir/$i" 2>&1 &
done
wait
failures=0
for i in "${!targets[@]}"; do
  cat "$report_dir/$i"
  [ "$(cat "$report_dir/$i.status" 2>/dev/null)" = 0 ] || failures=$((failures + 1))
done

if [ $failures -ne 0 ]; then
  echo "run_fuzzers: $failures of ${#targets[@]} targets failed; inputs and logs under $out_root" >&2
  exit 1
fi

#!/usr/bin/env bash
# The CUDA checks in one device call: op tests, golden suite (fp32, bf16, fp16), forward timings, HF's
# own bf16/fp16 error on the fixtures, then compute-sanitizer memcheck over both test binaries; the
# sanitize step runs all four compute-sanitizer tools over every GPU test binary.
# Binaries come prebuilt in a bundle made on the build machine (../shared/tools/device-bundle):
#   tests/cuda/run_on_device.sh BUNDLE [STEP...]
#   STEP: ops golden time hf memcheck (the default set), cli (test_cli with the bundled flashdeberta),
#         heads (test_heads_cuda: every head, and the shipped models against HF float64),
#         gliner (test_gliner_cuda: GLiNER's own fixtures, tests/fixtures/gliner),
#         consumer (consumer_cuda: the g++-compiled program built against the installed package),
#         python (tests/python with the package built for the machine's python3 by
#                 tests/python/build_for_interpreter.sh, in BUNDLE/python; pytest from BUNDLE/site if it lacks one),
#         bench (bench_gpu, then bench/compare_gpu.py: torch SDPA and HF eager in the same call),
#         graph (test_graph_cuda: CudaGraphForward against the plain forward, then under memcheck),
#         concurrency (test_concurrency_cuda: 8 host threads sharing the weights),
#         training (test_training_cuda: the float32 training ops and whole-model gradients, mixed precision against
#                   HF's autocast error, then memcheck and racecheck over its attention cases),
#         hf_training (tests/cuda/hf_training_low_precision_error.py: HF's own bf16 / fp16 autocast gradient error on
#                      the training fixtures, the JSON the mixed-precision suite reads),
#         training_bench (bench_training_gpu: one float32 training step of deberta-v3-base per shape, its phases and
#                        peak device memory, JSON under $OUT; extra arguments in $FLASHDEBERTA_TRAINING_BENCH_ARGS),
#         training_compare (bench/compare_training_gpu.py: that step against HF transformers on the same GPU, eager
#                           fp32, eager / sdpa under bf16 autocast, torch.compile, and FlashDeBERTa where its source is
#                           in .reference/flashdeberta_src, carried as that folder or .reference/flashdeberta_src.tar.gz;
#                           extra arguments in $FLASHDEBERTA_TRAINING_COMPARE_ARGS),
#         sanitize (memcheck, racecheck, initcheck, synccheck over every GPU test binary, run side by side),
#         cpu_compare (bench/compare_cpu.py: the bundled flashdeberta on --backend eigen fp32/bf16/int8 against
#                      ONNX Runtime and torch fp32/bf16 on the machine's CPU, ~6-7 min; needs a flashdeberta built
#                      with oneDNN; extra arguments in $FLASHDEBERTA_CPU_COMPARE_ARGS),
#         gliner_bench (bench/compare_gliner.py: flashdeberta gliner on CUDA and eigen against GLiNER's own
#                       PyTorch (GPU) and ONNX Runtime (CPU) paths, ~3-5 min; needs GLiNER's source in
#                       .reference/gliner_src, carried as that folder or as .reference/gliner_src.tar.gz, and a
#                       flashdeberta built with CUDA; extra arguments in $FLASHDEBERTA_GLINER_BENCH_ARGS)
#       (bench/README.md: the device calls for the last two, what to carry)
# Logs go to $OUT (the device tool's output folder) or /tmp/cuda_logs; a summary is printed.
set -uo pipefail
bundle=$(cd "${1:?bundle directory}" && pwd)
shift
steps=${*:-ops golden time hf memcheck}
out=${OUT:-/tmp/cuda_logs}
mkdir -p "$out"
# The test binaries find the fixtures at the path they were built with.
if [ ! -e /work/main/tests/fixtures ]; then mkdir -p /work && ln -sfn "$PWD" /work/main; fi
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

step() {  # step NAME SECONDS COMMAND...
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  echo "== $name: exit $rc, $((SECONDS - start)) s"
  tail -n 4 "$out/$name.log"
}

for s in $steps; do
  case $s in
    ops)
      step ops 240 "$bundle/bin/test_ops_cuda"
      grep -o "[a-z].*: max abs error.*" "$out/ops.log" | sort -t'(' -k1,1 | awk '{print "   " $0}' | head -n 200 >"$out/ops_summary.txt"
      grep -c "max abs error" "$out/ops.log"
      ;;
    golden)
      step golden 240 "$bundle/bin/test_golden_cuda"
      grep -o "fixture .*error.*" "$out/golden.log" >"$out/golden_summary.txt"
      cat "$out/golden_summary.txt"
      ;;
    heads) step heads 240 "$bundle/bin/test_heads_cuda" ;;
    gliner) step gliner 240 "$bundle/bin/test_gliner_cuda" ;;
    python)
      step python 300 env PYTHONPATH="$bundle/python" python3 -c "import sys; sys.path.append('$bundle/site'); \
import pytest; sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '-rs', 'tests/python']))"
      grep -E "passed|failed" "$out/python.log" | tail -n 1
      ;;
    consumer) step consumer 120 "$bundle/bin/consumer_cuda" tests/fixtures/v3_c2p && cat "$out/consumer.log" ;;
    time) step time 300 "$bundle/bin/time_forward_cuda" /tmp && cat "$out/time.log" ;;
    hf) step hf 180 python3 tests/cuda/hf_low_precision_error.py tests/fixtures && cat "$out/hf.log" ;;
    hf_training)
      # HF's own autocast gradient error on the training fixtures: the committed bound of the mixed-precision suite
      # (tests/fixtures/training/hf_autocast_error.json; copy $out's over it to regenerate)
      step hf_training 180 python3 tests/cuda/hf_training_low_precision_error.py tests/fixtures/training \
        "$out/hf_autocast_error.json"
      ;;
    cli)
      # test_cli runs the flashdeberta binary at the path it was built with, under /work/main (linked above).
      cli=$(strings "$bundle/bin/test_cli" | grep -m1 '/bin/flashdeberta$')
      mkdir -p "$(dirname "$cli")" && cp -f "$bundle/bin/flashdeberta" "$cli"
      # --backend cuda opens the CUDA backend module beside the program (backends/cuda/runtime/): bundle
      # build/lib/libflashdeberta_backend_cuda.so with it.
      cp -f "$bundle/bin/libflashdeberta_backend_cuda.so" "$(dirname "$cli")/"
      step cli 300 "$bundle/bin/test_cli"
      ;;
    bench)
      step bench_gpu 420 env FLASHDEBERTA_BENCH_DIR=/tmp "$bundle/bin/bench_gpu" --benchmark_out="$out/bench_gpu.json" \
        --benchmark_out_format=json --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
      step compare 300 python3 bench/compare_gpu.py --ours "$out/bench_gpu.json" \
        --out "$out/gpu-$(date +%F).md" --commit "${FLASHDEBERTA_COMMIT:-unknown}"
      cat "$out/gpu-$(date +%F).md"
      ;;
    graph)
      step graph 300 "$bundle/bin/test_graph_cuda"
      step memcheck_graph 420 "$sanitizer" --tool memcheck --error-exitcode 9 "$bundle/bin/test_graph_cuda"
      grep -h "ERROR SUMMARY" "$out/memcheck_graph.log"
      ;;
    concurrency) step concurrency 300 "$bundle/bin/test_concurrency_cuda" ;;
    training)
      # The float32 training ops against the host's references and HF autograd, then memcheck and racecheck over
      # the attention backward's cases (its shared-memory tiles and the single-writer bands).
      step training 300 "$bundle/bin/test_training_cuda"
      step memcheck_training 420 "$sanitizer" --tool memcheck --error-exitcode 9 "$bundle/bin/test_training_cuda" \
        '-tc=*attention*'
      step racecheck_training 420 "$sanitizer" --tool racecheck --error-exitcode 9 "$bundle/bin/test_training_cuda" \
        '-tc=*attention backward against*'
      grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" "$out/memcheck_training.log" "$out/racecheck_training.log"
      ;;
    training_bench)
      # shellcheck disable=SC2086  # the extra arguments are split on purpose
      step training_bench 540 "$bundle/bin/bench_training_gpu" --benchmark_out="$out/training_bench.json" \
        --benchmark_out_format=json ${FLASHDEBERTA_TRAINING_BENCH_ARGS:-}
      ;;
    training_compare)
      if [ ! -e .reference/flashdeberta_src/flashdeberta/__init__.py ] && [ -e .reference/flashdeberta_src.tar.gz ]; then
        tar xf .reference/flashdeberta_src.tar.gz -C .reference
      fi
      flashdeberta_src=()
      [ -e .reference/flashdeberta_src/flashdeberta/__init__.py ] && flashdeberta_src=(--flashdeberta-src .reference/flashdeberta_src)
      report="$out/training-gpu-$(date +%F).md"
      # shellcheck disable=SC2086  # the extra arguments are split on purpose
      step training_compare 580 python3 bench/compare_training_gpu.py --ours "$bundle/bin/bench_training_gpu" \
        "${flashdeberta_src[@]}" --out "$report" --commit "${FLASHDEBERTA_COMMIT:-unknown}" \
        ${FLASHDEBERTA_TRAINING_COMPARE_ARGS:-}
      [ -e "$report" ] && cat "$report"
      ;;
    cpu_compare)
      # Work files (the random v3-base checkpoint, its ONNX export, worker logs) stay in /tmp: only the
      # log and the report come back through $OUT.
      report="$out/cpu-$(date +%F).md"
      # shellcheck disable=SC2086  # the extra arguments are split on purpose
      step cpu_compare 580 python3 bench/compare_cpu.py --cli "$bundle/bin/flashdeberta" --out "$report" \
        --commit "${FLASHDEBERTA_COMMIT:-unknown}" ${FLASHDEBERTA_CPU_COMPARE_ARGS:-}
      [ -e "$report" ] && cat "$report"
      ;;
    gliner_bench)
      # GLiNER's source (never committed) arrives as the carried folder or a carried tar of it.
      if [ ! -e .reference/gliner_src/gliner/__init__.py ]; then
        for t in .reference/gliner_src.tar.gz .reference/gliner_src.tar; do
          [ -e "$t" ] && tar xf "$t" -C .reference && break
        done
      fi
      report="$out/gliner-$(date +%F).md"
      # shellcheck disable=SC2086
      step gliner_bench 580 python3 bench/compare_gliner.py --cli "$bundle/bin/flashdeberta" --out "$report" \
        --commit "${FLASHDEBERTA_COMMIT:-unknown}" ${FLASHDEBERTA_GLINER_BENCH_ARGS:-}
      [ -e "$report" ] && cat "$report"
      ;;
    sanitize)
      # Runs side by side on the one GPU (each process gets its own context). A run is TOOL:BINARY or
      # TOOL:BINARY:DOCTEST_FILTER (e.g. racecheck:test_concurrency_cuda:-tc=*shared*), so the slow pairs
      # (racecheck tracks every shared-memory access; initcheck every global one) can be split per test case.
      # The default: every tool over every binary, and the initcheck probe of cuBLASLt's stores.
      start=$SECONDS
      runs=${FLASHDEBERTA_SANITIZE_RUNS:-}
      if [ -z "$runs" ]; then
        runs="initcheck:initcheck_gemm_probe"
        for bin in test_ops_cuda test_golden_cuda test_heads_cuda test_graph_cuda test_concurrency_cuda test_training_cuda; do
          for tool in memcheck racecheck initcheck synccheck; do runs="$runs $tool:$bin"; done
        done
      fi
      n=0
      for run in $runs; do
        IFS=: read -r tool bin filter <<<"$run"
        [ -x "$bundle/bin/$bin" ] || { echo "sanitize: $bin is not in the bundle"; continue; }
        n=$((n + 1))
        # Up to 1000 reports printed (the summary counts them by kernel; ERROR SUMMARY counts all), without
        # host backtraces. initcheck runs with FLASHDEBERTA_INITCHECK_GEMM=1: cuBLASLt kept off the kernels
        # whose stores it does not see (initcheck_gemm_probe.cpp), so that every report is about our code.
        initcheck_gemm=0
        [ "$tool" = initcheck ] && initcheck_gemm=1
        FLASHDEBERTA_INITCHECK_GEMM=$initcheck_gemm timeout "${FLASHDEBERTA_SANITIZE_SECONDS:-500}" "$sanitizer" \
          --tool "$tool" --error-exitcode 9 --print-limit 1000 --show-backtrace device "$bundle/bin/$bin" \
          ${filter:+"$filter"} >"$out/${tool}_${bin#test_}_$n.log" 2>&1 &
      done
      wait
      echo "== sanitize: $((SECONDS - start)) s"
      for f in "$out"/{memcheck,racecheck,initcheck,synccheck}_*.log; do
        [ -e "$f" ] || continue
        printf '%-40s %s | %s\n' "$(basename "$f" .log)" \
          "$(grep -h -m1 'ERROR SUMMARY\|RACECHECK SUMMARY' "$f" || echo 'no summary (timed out?)')" \
          "$(grep -h -m1 -o '\[doctest\] test cases:.*' "$f")"
        # Reports per kernel (or host API call): which code the tool points at, and how often.
        grep -h -A1 -E '^========= +(Uninitialized|Invalid|Race|Barrier|Host API|Malloc|Error)' "$f" |
          sed -n 's/^=========  *at \(void \)\{0,1\}\([A-Za-z_:0-9]*\).*/\2/p; s/^=========  *\(Host API[^0-9]*\).*/\1/p' |
          sort | uniq -c | sort -rn | head -n 8 | sed 's/^/    /'
      done
      ;;
    memcheck)
      step memcheck_ops 300 "$sanitizer" --tool memcheck --error-exitcode 9 "$bundle/bin/test_ops_cuda"
      step memcheck_golden 300 "$sanitizer" --tool memcheck --error-exitcode 9 "$bundle/bin/test_golden_cuda"
      grep -h "ERROR SUMMARY" "$out"/memcheck_*.log
      ;;
  esac
done

#!/usr/bin/env python3
"""Our host backend next to ONNX Runtime and torch on the same CPU, same weights, same affinity, in one run
(issue 15 item 4; bench/compare_gpu.py is the GPU counterpart).

On the GPU machine (python3 with torch, transformers, onnxruntime, onnx, numpy), from the repository root:

    python3 bench/compare_cpu.py --cli BUNDLE/bin/flashdeberta [--out bench/results/cpu-<date>.md]

or as a step of tests/cuda/run_on_device.sh (`cpu_compare`, see bench/README.md). Here, without torch or
onnxruntime, the parts that run our CLI are testable on a small checkpoint:

    python3 bench/compare_cpu.py --skip-ort --skip-torch --model models/tiny-en --threads 1,2 \\
        --shapes 1x16,2x64 --cli build/bin/flashdeberta --out /tmp/cpu.md

What it does:
 1. Model: a random-weight transformers DebertaV2Model of deberta-v3-base shape (12 layers, hidden 768, 12 heads,
    intermediate 3072, 256 log buckets, c2p|p2c, shared keys, vocabulary --vocab-size, 128100 as the real one),
    built from a config (no network) with torch.manual_seed(0), saved with save_pretrained (config.json +
    model.safetensors) into --work-dir, and exported to ONNX by torch.onnx.export (the TorchScript exporter,
    dynamo=False, opset 17; the dynamo exporter if that fails) once per shape, static (transformers 5 freezes
    DeBERTa's relative positions at the traced shape), each checked against torch there on other ids. Our CLI reads that directory (--model), ONNX Runtime the .onnx graphs, torch the
    directory: one set of weights.
    --model DIR uses an existing checkpoint instead (exported to ONNX the same way).
 2. For each thread count N (--threads, default 16,2; the first N CPUs this process may use), every system
    runs pinned to those CPUs (os.sched_setaffinity in the child, as taskset -c) with OMP_NUM_THREADS=N:
      ours   `flashdeberta bench --backend eigen --dtype fp32|bf16|int8 --threads N --batch B --seq-len L
             --repeat R --json` (one warm-up run, then R timed runs; its median), one process per shape;
      ORT    onnxruntime.InferenceSession, ORT_ENABLE_ALL, intra_op_num_threads N, inter_op_num_threads 1,
             sequential execution, CPUExecutionProvider;
      torch  fp32 and bf16 (model.to(torch.bfloat16): oneDNN, AMX where the CPU has it), torch.set_num_threads(N),
             inference_mode, HF's eager attention (DeBERTa-v2 has no other);
    ORT and torch run in long-lived worker processes of this script (one per system and thread count), so that
    their start-up is paid once. Every system: one warm-up run, then the median of R runs, R between
    --min-repeat (5) and --max-repeat (30) so that the timed runs take about --budget-s seconds (small shapes get
    more runs); ids random in [5, vocab) with all-ones masks.
 3. Accuracy, at the first thread count: last_hidden_state of every system and dtype on one input
    (--accuracy-shape, default 2x128, fixed ids), max abs difference against torch fp32 and against the same
    system's fp32 (ours: `flashdeberta run`).
 4. Peak memory per process: VmHWM from /proc/PID/status (never ru_maxrss, which a child inherits from its parent
    across fork and exec; see compare_common.py). Ours: one process per shape, its own peak. ORT and torch: the
    worker's peak after that shape (cumulative over the shapes it ran before).

Budget: about 6-7 minutes on the 16-core GPU machine with the defaults (2 x 32x128 is skipped by default as in
issue 15's table; --skip none keeps it). No measurement starts after --deadline-s seconds (default 480): what is
left is marked "deadline" and the report is still written. The report (Markdown: date, machine from lscpu,
commit, versions, settings, one table per thread count, accuracy) goes to --out (default
bench/results/cpu-<date>.md) and to stdout.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_common import (REPO, BenchError, check_cli, first_cores, fmt, max_abs, max_abs_diff,  # noqa: E402
                            python_modules_missing, read_f32, read_safetensors_f32, run_sampled, short_error,
                            thread_env, today, write_report)
from cpu_report import report, systems  # noqa: E402
from cpu_workers import TAG, Worker, worker_build, worker_loop  # noqa: E402

SHAPES = [(1, 16), (1, 32), (1, 64), (1, 128), (8, 128), (32, 128), (1, 512), (1, 2048)]
DEFAULT_SKIPS = ["2:32x128"]
OURS_DTYPES = ("fp32", "bf16", "int8")


# ------------------------------------------------------------------------------------------------------------
# The harness (standard library only)
# ------------------------------------------------------------------------------------------------------------

def parse_shapes(text):
    shapes = []
    for item in text.split(","):
        item = item.strip().lower()
        if not item:
            continue
        try:
            b, l = item.split("x")
            shapes.append((int(b), int(l)))
        except ValueError:
            raise argparse.ArgumentTypeError(f"shape {item!r} is not BxL (e.g. 8x128)")
        if shapes[-1][0] < 1 or shapes[-1][1] < 1:
            raise argparse.ArgumentTypeError(f"shape {item!r}: B and L must be positive")
    if not shapes:
        raise argparse.ArgumentTypeError("no shape given")
    return shapes


def parse_int_list(text):
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers")
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give positive integers, e.g. 16,2")
    return values


def parse_dtypes(text):
    values = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in values if x not in OURS_DTYPES]
    if bad or not values:
        raise argparse.ArgumentTypeError(f"{text!r}: our dtypes are a comma-separated subset of fp32,bf16,int8")
    return values


def parse_skips(items):
    """{(threads, B, L)} from 'N:BxL' items; 'none' clears the defaults."""
    if items is None:
        items = DEFAULT_SKIPS
    out = set()
    for item in items:
        for part in item.split(","):
            part = part.strip()
            if not part or part == "none":
                continue
            try:
                t, shape = part.split(":")
                (b, l), = parse_shapes(shape)
                out.add((int(t), b, l))
            except (ValueError, argparse.ArgumentTypeError):
                raise BenchError(f"--skip {part!r} is not THREADS:BxL (e.g. 2:32x128) or none")
    return out


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--cli", default=os.environ.get("FLASHDEBERTA_CLI", str(REPO / "build/bin/flashdeberta")),
                   help="our CLI (default $FLASHDEBERTA_CLI or build/bin/flashdeberta)")
    p.add_argument("--model", help="an existing HF DeBERTa checkpoint directory instead of the random v3-base")
    p.add_argument("--work-dir", default=os.path.join(tempfile.gettempdir(), "flashdeberta-compare-cpu"),
                   help="where the random model, its ONNX export and the logs go (default %(default)s)")
    p.add_argument("--vocab-size", type=int, default=128100, help="of the random model (default %(default)s)")
    p.add_argument("--threads", type=parse_int_list, default=[16, 2], help="thread counts (default 16,2)")
    p.add_argument("--shapes", type=parse_shapes, default=SHAPES,
                   help="BxL list (default " + ",".join(f"{b}x{l}" for b, l in SHAPES) + ")")
    p.add_argument("--skip", action="append", metavar="N:BxL",
                   help="a shape not run at N threads (repeatable; default " + ",".join(DEFAULT_SKIPS) +
                        "; 'none' runs every shape at every thread count)")
    p.add_argument("--ours-dtypes", type=parse_dtypes, default=list(OURS_DTYPES), help="default fp32,bf16,int8")
    p.add_argument("--skip-ours", action="store_true", help="no run of our CLI")
    p.add_argument("--skip-ort", action="store_true", help="no ONNX Runtime (and no ONNX export)")
    p.add_argument("--skip-torch", action="store_true", help="no torch fp32 nor bf16 (needs --model then)")
    p.add_argument("--skip-torch-bf16", action="store_true", help="no torch bf16")
    p.add_argument("--no-accuracy", action="store_true", help="no last_hidden_state comparison")
    p.add_argument("--accuracy-shape", type=parse_shapes, default=[(2, 128)], help="BxL (default 2x128)")
    p.add_argument("--min-repeat", type=int, default=5, help="timed runs at least (default %(default)s)")
    p.add_argument("--max-repeat", type=int, default=30, help="timed runs at most (default %(default)s)")
    p.add_argument("--budget-s", type=float, default=1.0,
                   help="seconds of timed runs aimed at per measurement, within the repeat bounds (default %(default)s)")
    p.add_argument("--deadline-s", type=float, default=480.0,
                   help="no measurement starts after this many seconds from the start (default %(default)s)")
    p.add_argument("--out", help="report path (default bench/results/cpu-<date>.md)")
    p.add_argument("--commit", help="commit named in the report (default $FLASHDEBERTA_COMMIT or git's HEAD)")
    p.add_argument("--python", default=sys.executable, help=argparse.SUPPRESS)
    # worker mode (internal)
    p.add_argument("--worker", choices=["build", "ort", "torch"], help=argparse.SUPPRESS)
    p.add_argument("--model-dir", help=argparse.SUPPRESS)
    p.add_argument("--source", help=argparse.SUPPRESS)
    p.add_argument("--onnx", help=argparse.SUPPRESS)  # a directory of <B>x<L>.onnx graphs
    p.add_argument("--onnx-shapes", type=parse_shapes, default=[], help=argparse.SUPPRESS)
    p.add_argument("--dtype", default="fp32", help=argparse.SUPPRESS)
    return p


def validate(a):
    if a.min_repeat < 1 or a.max_repeat < a.min_repeat:
        raise BenchError("--min-repeat must be >= 1 and --max-repeat >= --min-repeat")
    if a.skip_torch and not a.model and python_modules_missing(["torch"], a.python):
        raise BenchError("--skip-torch without torch needs --model DIR: the random v3-base model is built with "
                         "torch (for a test of our CLI alone: --skip-ort --skip-torch --model models/tiny-en)")
    if a.model and not os.path.isfile(os.path.join(a.model, "config.json")):
        raise BenchError(f"--model {a.model}: no config.json there (an HF checkpoint directory is expected)")
    if a.skip_ours and a.skip_ort and a.skip_torch:
        raise BenchError("every system is skipped: nothing to measure")


class Run:
    """The state of one benchmark run: settings, measurements, notes."""

    def __init__(self, a):
        self.a = a
        self.start = time.monotonic()
        self.results = {}  # (threads, B, L, system) -> dict (median_ms, ... or error / skipped)
        self.notes = []
        self.versions = {}
        self.build = {}
        self.accuracy = []
        self.unsupported = {}  # our dtype -> why
        self.affinity = {}

    def elapsed(self):
        return time.monotonic() - self.start

    def past_deadline(self):
        return self.elapsed() > self.a.deadline_s

    def timeout(self):
        """Seconds a single step may still take: up to the deadline plus a grace of 120 s, 30 s at least."""
        return max(30.0, self.a.deadline_s + 120.0 - self.elapsed())

    def note(self, msg):
        self.notes.append(msg)
        sys.stderr.write("note: " + msg + "\n")


def build_model(run, model_dir, onnx_path):
    a = run.a
    argv = [a.python, os.path.abspath(__file__), "--worker", "build", "--model-dir", model_dir,
            "--vocab-size", str(a.vocab_size), "--threads", str(len(os.sched_getaffinity(0)))]
    if a.model:
        argv += ["--source", a.model]
    if onnx_path:
        shapes = sorted(set(a.shapes) | set(a.accuracy_shape))
        argv += ["--onnx", onnx_path, "--onnx-shapes", ",".join(f"{b}x{l}" for b, l in shapes)]
    sys.stderr.write(f"building the model in {model_dir}{' and its ONNX export' if onnx_path else ''} ...\n")
    log_path = os.path.join(a.work_dir, "build.log")
    with open(log_path, "w") as log:
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=log, text=True, timeout=run.timeout())
    lines = [json.loads(l[len(TAG):]) for l in r.stdout.splitlines() if l.startswith(TAG)]
    if r.returncode != 0 or not lines:
        raise BenchError(f"building the model failed (exit {r.returncode}): "
                         f"{short_error(Path(log_path).read_text(errors='replace'))} (log: {log_path})")
    run.build = lines[-1]["build"]
    run.versions.update({k: v for k, v in run.build.items() if k in ("torch", "transformers", "numpy")})
    sys.stderr.write(f"model ready: {json.dumps(run.build)}\n")


def ours_cmd(a, cli, model_dir, dtype, threads, extra):
    return [cli, *extra[:1], "--model", model_dir, "--backend", "eigen", "--dtype", dtype, "--threads", str(threads),
            *extra[1:]]


def ours_time(run, cli, model_dir, dtype, threads, cores, b, l, estimate_ms):
    a = run.a
    runs = a.min_repeat
    if estimate_ms:
        runs = min(a.max_repeat, max(a.min_repeat, math.ceil(a.budget_s * 1e3 / estimate_ms)))
    extra = ["bench", "--batch", str(b), "--seq-len", str(l), "--repeat", str(runs), "--json",
             "--max-tokens", str(max(65536, b * l))]
    rc, out, err, peak, secs = run_sampled(ours_cmd(a, cli, model_dir, dtype, threads, extra), run.timeout(),
                                           cores=cores, env=thread_env(threads))
    if rc is None:
        return {"error": f"timed out after {secs:.0f} s"}
    if rc != 0:
        msg = short_error(err)
        if rc == 2:  # a usage error: this build or backend does not do this dtype; not retried per shape
            run.unsupported[dtype] = msg
        return {"error": msg}
    try:
        j = json.loads([x for x in out.splitlines() if x.startswith("{")][-1])
    except (IndexError, ValueError):
        return {"error": f"no JSON line in the output of bench: {short_error(out + err)}"}
    return {"median_ms": j["median_ms"], "p10_ms": j.get("p10_ms"), "p90_ms": j.get("p90_ms"), "runs": runs,
            "load_ms": j.get("load_ms"),
            "vmhwm_kib": peak, "ru_maxrss_kib": (j.get("peak_bytes") or 0) // 1024, "wall_s": round(secs, 2)}


def estimate(run, threads, b, l, system):
    """A guess of one run's ms for choosing our repeat count: another system's time at the same shape
    (ours fp32 first), else our time at the largest smaller shape scaled by tokens."""
    for other in ("ours_fp32", "ort", "torch_fp32", "ours_bf16", "torch_bf16"):
        r = run.results.get((threads, b, l, other))
        if other != system and r and r.get("median_ms"):
            return r["median_ms"]
    best = None
    for (t, bb, ll, s), r in run.results.items():
        if t == threads and s == system and r.get("median_ms") and bb * ll <= b * l:
            if best is None or bb * ll > best[0]:
                best = (bb * ll, r["median_ms"])
    return best[1] * (b * l) / best[0] if best else None


def accuracy(run, cli, model_dir, workers, threads, cores):
    """last_hidden_state of each system on one fixed input, compared with torch fp32 and own fp32."""
    a = run.a
    (b, l), = a.accuracy_shape
    vocab = run.vocab_size
    state = 12345
    ids = []
    for _ in range(b):  # a fixed LCG: the same ids for every system, no numpy needed here
        row = []
        for _ in range(l):
            state = (state * 1103515245 + 12345) % 2**31
            row.append(5 + state % (vocab - 5))
        ids.append(row)
    adir = os.path.join(a.work_dir, "accuracy")
    os.makedirs(adir, exist_ok=True)
    with open(os.path.join(adir, "ids.json"), "w") as f:
        json.dump({"input_ids": ids}, f)
    outs, errors = {}, {}
    for name, w in workers.items():
        path = os.path.join(adir, name + ".f32")
        try:
            ans = w.call({"op": "hidden", "ids": ids, "out": path}, run.timeout())
            if "error" in ans:
                errors[name] = ans["error"]
            else:
                outs[name] = read_f32(path)
        except BenchError as e:
            errors[name] = str(e)
    if not a.skip_ours:
        for dtype in a.ours_dtypes:
            name = "ours_" + dtype
            if dtype in run.unsupported:
                errors[name] = run.unsupported[dtype]
                continue
            path = os.path.join(adir, name + ".safetensors")
            extra = ["run", "--input", os.path.join(adir, "ids.json"), "--output", path, "--head", "base"]
            rc, out, err, _, _ = run_sampled(ours_cmd(a, cli, model_dir, dtype, threads, extra), run.timeout(),
                                             cores=cores, env=thread_env(threads))
            if rc != 0:
                errors[name] = short_error(err) if rc is not None else "timed out"
                if rc == 2:
                    run.unsupported[dtype] = errors[name]
                continue
            try:
                outs[name] = read_safetensors_f32(path, "last_hidden_state")[1]
            except (BenchError, OSError, KeyError, ValueError) as e:
                errors[name] = str(e)
    ref = outs.get("torch_fp32")
    rows = []
    for name in ("ours_fp32", "ort", "ours_bf16", "ours_int8", "torch_bf16"):
        if name not in outs and name not in errors:
            continue
        if name in errors:
            rows.append((name, errors[name], "-", "-"))
            continue
        vs_ref = max_abs_diff(outs[name], ref) if ref is not None and name != "torch_fp32" else None
        own = {"ours_bf16": "ours_fp32", "ours_int8": "ours_fp32", "torch_bf16": "torch_fp32"}.get(name)
        vs_own = max_abs_diff(outs[name], outs[own]) if own in outs else None
        rows.append((name, vs_ref, vs_ref / max_abs(ref) if vs_ref is not None and max_abs(ref) > 0 else None, vs_own))
    run.accuracy = {"shape": (b, l), "threads": threads, "rows": rows,
                    "ref_max_abs": max_abs(ref) if ref is not None else None,
                    "ours_fp32_max_abs": max_abs(outs["ours_fp32"]) if "ours_fp32" in outs else None}


def measure_threads(run, cli, model_dir, onnx_path, threads, do_accuracy):
    a = run.a
    cores = first_cores(threads)
    run.affinity[threads] = cores
    workers = {}
    for name in systems(a):
        if name.startswith("ours_"):
            continue
        if run.past_deadline():
            break
        argv = (["--worker", "ort", "--onnx", onnx_path, "--vocab-size", str(run.vocab_size)] if name == "ort" else
                ["--worker", "torch", "--model-dir", model_dir, "--dtype", name.split("_")[1]])
        try:
            w = Worker(f"{name} worker ({threads} threads)", argv, threads, cores,
                       os.path.join(a.work_dir, f"{name}-{threads}.log"), start_timeout=min(300.0, run.timeout()))
            workers[name] = w
            run.versions.update(w.hello.get("versions", {}))
        except BenchError as e:
            run.note(str(e))
            for b, l in a.shapes:
                run.results[(threads, b, l, name)] = {"error": "worker failed to start"}
    try:
        if do_accuracy and not a.no_accuracy:
            try:
                accuracy(run, cli, model_dir, workers, threads, cores)
            except BenchError as e:
                run.note(f"accuracy: {e}")
        skips = parse_skips(a.skip)
        for b, l in a.shapes:
            for name in systems(a):
                key = (threads, b, l, name)
                if key in run.results:
                    continue
                if (threads, b, l) in skips:
                    run.results[key] = {"skipped": "skipped"}
                    continue
                if run.past_deadline():
                    run.results[key] = {"skipped": "deadline"}
                    continue
                if name.startswith("ours_"):
                    dtype = name[5:]
                    if dtype in run.unsupported:
                        run.results[key] = {"error": "unsupported"}
                        continue
                    r = ours_time(run, cli, model_dir, dtype, threads, cores, b, l, estimate(run, threads, b, l, name))
                else:
                    w = workers.get(name)
                    if w is None:
                        r = {"error": "no worker"}
                    else:
                        try:
                            r = w.call({"op": "time", "batch": b, "seq_len": l, "budget_s": a.budget_s,
                                        "min_repeat": a.min_repeat, "max_repeat": a.max_repeat}, run.timeout())
                        except BenchError as e:
                            r = {"error": str(e)}
                            run.note(str(e))
                            workers.pop(name).close()
                    time.sleep(0.1)  # let the worker's pool threads stop spinning before the next system
                run.results[key] = r
                show = fmt(r.get("median_ms"), 2) if "median_ms" in r else (r.get("error") or r.get("skipped"))
                sys.stderr.write(f"[{run.elapsed():6.1f} s] {threads:>2} threads {b:>3} x {l:<5} {name:<11} {show}"
                                 f"{'' if 'runs' not in r else ' (%d runs)' % r['runs']}\n")
    finally:
        for w in workers.values():
            w.close()


def main(argv=None):
    a = build_parser().parse_args(argv)
    if a.worker:
        a.threads = a.threads[0]  # a worker is started with one thread count
    if a.worker == "build":
        return worker_build(a)
    if a.worker:
        return worker_loop(a)
    try:
        validate(a)
        parse_skips(a.skip)
        run = Run(a)
        cli = None if a.skip_ours else check_cli(a.cli)
        need = []
        if not a.skip_torch or not a.model or not a.skip_ort:  # torch times, builds and exports the model
            need += ["numpy", "torch", "transformers"]
        if not a.skip_ort:
            need += ["numpy", "onnxruntime"]
        if need:
            missing = python_modules_missing(sorted(set(need)), a.python)
            if missing:
                raise BenchError("python modules missing: " + "; ".join(f"{m} ({e})" for m, e in missing.items()) +
                                 ". Run where they are installed, or leave their systems out (--skip-ort, "
                                 "--skip-torch --model DIR)")
        for threads in a.threads:
            first_cores(threads)  # fails before any work when a count is too large
        os.makedirs(a.work_dir, exist_ok=True)
        model_dir = os.path.abspath(a.model) if a.model else os.path.join(a.work_dir, "v3-base-random")
        onnx_path = None if a.skip_ort else os.path.join(a.work_dir, "onnx")
        if not a.model or onnx_path:
            build_model(run, model_dir, onnx_path)
            if onnx_path and run.build.get("onnx_error"):
                run.note("ONNX Runtime not run: the export failed: " + run.build["onnx_error"])
                a.skip_ort, onnx_path = True, None
        with open(os.path.join(model_dir, "config.json")) as f:
            run.vocab_size = json.load(f)["vocab_size"]
        for i, threads in enumerate(a.threads):
            measure_threads(run, cli, model_dir, onnx_path, threads, do_accuracy=(i == 0))
        out = a.out or str(REPO / "bench" / "results" / f"cpu-{today()}.md")
        write_report(report(run, cli, model_dir, onnx_path), out)
    except BenchError as e:
        sys.stderr.write(f"compare_cpu.py: error: {e}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

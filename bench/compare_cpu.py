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
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_common import (REPO, BenchError, check_cli, commit, first_cores, fmt, machine, max_abs, max_abs_diff,  # noqa: E402
                            pinned, python_modules_missing, ratio, read_f32, read_safetensors_f32, run_sampled,
                            short_error, table, thread_env, today, vmhwm_kib, write_report)

SHAPES = [(1, 16), (1, 32), (1, 64), (1, 128), (8, 128), (32, 128), (1, 512), (1, 2048)]
DEFAULT_SKIPS = ["2:32x128"]
OURS_DTYPES = ("fp32", "bf16", "int8")
V3_BASE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
               hidden_act="gelu", max_position_embeddings=512, type_vocab_size=0, relative_attention=True,
               position_buckets=256, max_relative_positions=-1, norm_rel_ebd="layer_norm", share_att_key=True,
               pos_att_type=["p2c", "c2p"], position_biased_input=False, layer_norm_eps=1e-7, pad_token_id=0)
TAG = "@@"  # worker protocol lines start with it; anything else a library prints is ignored


# ------------------------------------------------------------------------------------------------------------
# Workers (run on the GPU machine only: they import numpy, torch, transformers, onnxruntime)
# ------------------------------------------------------------------------------------------------------------

def say(obj):
    sys.stdout.write(TAG + json.dumps(obj) + "\n")
    sys.stdout.flush()


def random_ids(np, batch, length, vocab, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(5, vocab, size=(batch, length), dtype=np.int64)


def onnx_path_for(onnx_dir, batch, length):
    return os.path.join(onnx_dir, f"{batch}x{length}.onnx")


def onnx_export(np, torch, model, onnx_dir, shapes, vocab, log):
    """Exports model's last_hidden_state once per (batch, length) shape into onnx_dir and checks ONNX Runtime's
    output against torch's there on other ids: the TorchScript exporter first (dynamo=False, as GLiNER and most
    users export), the dynamo exporter where that fails. One static graph per shape, because transformers 5's
    DeBERTa-v2 computes its relative positions from Python ints, which an export freezes at the traced shape (a
    graph exported at 2 x 32 with dynamic axes gives outputs off by ~3 at 3 x 50). Returns how it was exported."""
    import onnxruntime as ort

    class LastHidden(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask):
            return self.m(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    wrapper = LastHidden(model).eval()
    os.makedirs(onnx_dir, exist_ok=True)
    exporters, worst, seconds, errors = set(), 0.0, 0.0, []
    for batch, length in sorted(set(shapes)):
        path = onnx_path_for(onnx_dir, batch, length)
        gen = torch.Generator().manual_seed(length)
        ids = torch.randint(5, vocab, (batch, length), generator=gen)
        mask = torch.ones_like(ids)
        for dynamo, opset in ((False, 17), (True, 18)):
            try:
                if os.path.exists(path):
                    os.remove(path)
                t0 = time.time()
                with torch.no_grad():
                    torch.onnx.export(wrapper, (ids, mask), path, input_names=["input_ids", "attention_mask"],
                                      output_names=["last_hidden_state"], opset_version=opset, dynamo=dynamo)
                seconds += time.time() - t0
                sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
                xi = random_ids(np, batch, length, vocab, length + 7)  # other ids than the export's
                xm = np.ones_like(xi)
                got = sess.run(["last_hidden_state"], {"input_ids": xi, "attention_mask": xm})[0]
                with torch.inference_mode():
                    want = model(input_ids=torch.from_numpy(xi), attention_mask=torch.from_numpy(xm))
                diff = float(np.abs(got - want.last_hidden_state.numpy()).max())
                if not diff < 1e-2:
                    raise RuntimeError(f"ONNX Runtime's output differs from torch's by {diff:g} (max abs) at "
                                       f"{batch} x {length}")
                log(f"exported {path} (dynamo={dynamo}, opset {opset}); against torch: {diff:.2e}")
                worst = max(worst, diff)
                exporters.add(("dynamo" if dynamo else "TorchScript (dynamo=False)", opset))
                break
            except Exception as e:  # noqa: BLE001 (any exporter failure: try the other one)
                errors.append(f"{batch}x{length} dynamo={dynamo}: {type(e).__name__}: {str(e)[:300]}")
                log("ONNX export failed: " + errors[-1])
        else:
            raise RuntimeError("torch.onnx.export failed both ways: " + " | ".join(errors[-2:]))
    return {"exporter": ", ".join(f"{name} opset {opset}" for name, opset in sorted(exporters)),
            "export_s": round(seconds, 1), "onnx_vs_torch_max_abs": worst, "onnx_shapes": len(set(shapes)),
            "failed_before": errors}


def worker_build(a):
    """Builds (or loads) the HF model, saves it for our CLI, exports ONNX; prints one result line."""
    import numpy as np
    import torch
    import transformers
    from transformers import DebertaV2Config, DebertaV2Model

    def log(msg):
        sys.stderr.write(f"[build] {msg}\n")
        sys.stderr.flush()

    torch.set_num_threads(max(1, a.threads))
    info = {"torch": torch.__version__, "transformers": transformers.__version__, "numpy": np.__version__}
    t0 = time.time()
    if a.source:
        model = DebertaV2Model.from_pretrained(a.source).eval()
        info["source"] = a.source
    else:
        config = DebertaV2Config(vocab_size=a.vocab_size, **V3_BASE)
        torch.manual_seed(0)
        model = DebertaV2Model(config).eval()
        model.save_pretrained(a.model_dir)  # transformers 5 writes model.safetensors
        if not os.path.exists(os.path.join(a.model_dir, "model.safetensors")):
            raise RuntimeError(f"save_pretrained wrote no model.safetensors in {a.model_dir}: "
                               f"{sorted(os.listdir(a.model_dir))}")
    vocab = model.config.vocab_size
    info.update(vocab_size=vocab, parameters=sum(p.numel() for p in model.parameters()),
                build_s=round(time.time() - t0, 1))
    log(f"model ready ({info['parameters'] / 1e6:.1f} M parameters) in {info['build_s']} s")
    if a.onnx:
        try:
            info.update(onnx_export(np, torch, model, a.onnx, a.onnx_shapes, vocab, log))
        except Exception as e:  # noqa: BLE001 (ours and torch still run; ORT is reported as failed)
            info["onnx_error"] = f"{type(e).__name__}: {str(e)[:500]}"
            log("ONNX: " + info["onnx_error"])
    say({"build": info})


def worker_loop(a):
    """A long-lived timing worker: answers one JSON request per stdin line."""
    import numpy as np
    t0 = time.time()
    versions = {"numpy": np.__version__}
    if a.worker == "ort":
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.intra_op_num_threads = a.threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        sessions = {}  # one graph per shape (onnx_export)
        versions["onnxruntime"] = ort.__version__
        vocab = a.vocab_size

        def prepare(shape):
            if shape not in sessions:
                sessions[shape] = ort.InferenceSession(onnx_path_for(a.onnx, *shape), so,
                                                       providers=["CPUExecutionProvider"])

        def forward(ids, mask):
            prepare(ids.shape)
            return sessions[ids.shape].run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask})[0]

        def to_numpy(out):
            return out
    else:
        import torch
        import transformers
        from transformers import DebertaV2Model
        torch.set_num_threads(a.threads)
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:
            pass
        model = DebertaV2Model.from_pretrained(a.model_dir).eval()
        if a.dtype == "bf16":
            model = model.to(torch.bfloat16)
        versions.update(torch=torch.__version__, transformers=transformers.__version__,
                        mkldnn_bf16=bool(getattr(torch.backends.mkldnn, "is_available", lambda: False)()))
        vocab = model.config.vocab_size

        def prepare(shape):
            pass

        def forward(ids, mask):
            with torch.inference_mode():
                return model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask)).last_hidden_state

        def to_numpy(out):
            return out.float().numpy()
    say({"ready": True, "versions": versions, "load_s": round(time.time() - t0, 2), "vmhwm_kib": vmhwm_kib(),
         "affinity": sorted(os.sched_getaffinity(0))})
    for line in sys.stdin:
        req = json.loads(line)
        op = req.get("op")
        if op == "quit":
            break
        try:
            if op == "time":
                b, l = req["batch"], req["seq_len"]
                ids = random_ids(np, b, l, vocab, b * 100003 + l)
                mask = np.ones_like(ids)
                prepare(ids.shape)  # loading a graph is not a warm-up's work
                start = time.perf_counter()
                forward(ids, mask)  # warm-up
                warm = time.perf_counter() - start
                if warm < 0.05:  # a second warm-up where it is cheap: caches, thread pools, oneDNN primitives
                    start = time.perf_counter()
                    forward(ids, mask)
                    warm = time.perf_counter() - start
                runs = min(req["max_repeat"], max(req["min_repeat"], math.ceil(req["budget_s"] / max(warm, 1e-6))))
                times = []
                for _ in range(runs):
                    start = time.perf_counter()
                    forward(ids, mask)
                    times.append((time.perf_counter() - start) * 1e3)
                times.sort()
                say({"median_ms": times[len(times) // 2] if len(times) % 2 else
                     (times[len(times) // 2 - 1] + times[len(times) // 2]) / 2,
                     "p10_ms": times[int(0.1 * (len(times) - 1))], "p90_ms": times[int(0.9 * (len(times) - 1) + 0.5)],
                     "runs": runs, "warmup_ms": warm * 1e3, "vmhwm_kib": vmhwm_kib()})
            elif op == "hidden":
                ids = np.array(req["ids"], dtype=np.int64)
                out = to_numpy(forward(ids, np.ones_like(ids)))
                out.astype("<f4").tofile(req["out"])
                say({"shape": list(out.shape)})
            else:
                say({"error": f"unknown op {op!r}"})
        except Exception as e:  # noqa: BLE001 (reported in the table, the worker goes on)
            say({"error": f"{type(e).__name__}: {e}"})


# ------------------------------------------------------------------------------------------------------------
# The harness (standard library only)
# ------------------------------------------------------------------------------------------------------------

class Worker:
    """A timing worker process (ORT or torch) pinned to `cores`; requests and answers are JSON lines."""

    def __init__(self, name, argv, threads, cores, log_path, start_timeout):
        self.name = name
        self.log_path = log_path
        self.log = open(log_path, "w")
        cmd = [sys.executable, os.path.abspath(__file__), *argv, "--threads", str(threads)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                     env=thread_env(threads), preexec_fn=pinned(cores))
        self.lines = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.hello = self._answer(start_timeout)

    def _pump(self):
        for line in self.proc.stdout:
            if line.startswith(TAG):
                self.lines.put(json.loads(line[len(TAG):]))
        self.lines.put(None)

    def _answer(self, timeout):
        try:
            msg = self.lines.get(timeout=timeout)
        except queue.Empty:
            self.close()
            raise BenchError(f"{self.name}: no answer within {timeout:.0f} s (log: {self.log_path})")
        if msg is None:
            self.proc.wait()
            self.log.flush()
            raise BenchError(f"{self.name} exited ({self.proc.returncode}): "
                             f"{short_error(Path(self.log_path).read_text(errors='replace'))} (log: {self.log_path})")
        return msg

    def call(self, request, timeout):
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return self._answer(timeout)

    def close(self):
        try:
            if self.proc.poll() is None:
                self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=20)
        except (OSError, subprocess.TimeoutExpired, ValueError):
            self.proc.kill()
            self.proc.wait()
        self.log.close()


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


def systems(a):
    out = []
    if not a.skip_ort:
        out.append("ort")
    if not a.skip_torch:
        out.append("torch_fp32")
        if not a.skip_torch_bf16:
            out.append("torch_bf16")
    if not a.skip_ours:
        out += ["ours_" + d for d in a.ours_dtypes]
    return out


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


def cell(r):
    if r is None:
        return "-"
    if "median_ms" in r:
        return fmt(r["median_ms"], 2)
    return r.get("skipped") or ("error" if r.get("error") else "-")


def mib(r):
    return f"{r['vmhwm_kib'] / 1024:.0f}" if r and r.get("vmhwm_kib") else "-"


def report(run, cli, model_dir, onnx_path):
    a = run.a
    res = run.results
    vers = run.versions
    lines = [f"# CPU: flashdeberta vs ONNX Runtime vs torch, {today()}", "",
             f"- machine: {machine()}",
             f"- commit: {commit(a.commit)}; our CLI: `{cli}`" if not a.skip_ours else f"- commit: {commit(a.commit)}",
             "- versions: Python " + sys.version.split()[0] +
             "".join(f", {k} {v}" for k, v in sorted(vers.items()) if k != "mkldnn_bf16")]
    if a.model:
        lines.append(f"- model: `{a.model}` (given), {run.vocab_size} tokens of vocabulary")
    else:
        lines.append(f"- model: random DebertaV2Model of deberta-v3-base shape (12 layers, hidden 768, 12 heads, "
                     f"intermediate 3072, 256 buckets, c2p|p2c, vocabulary {run.vocab_size}; "
                     f"{(run.build.get('parameters') or 0) / 1e6:.1f} M parameters), torch.manual_seed(0), "
                     "saved with save_pretrained (safetensors): ours and torch read that directory")
    if onnx_path and run.build.get("exporter"):
        d = run.build.get("onnx_vs_torch_max_abs")
        lines.append(f"- ONNX: torch.onnx.export ({run.build['exporter']}), one static graph per shape "
                     "(transformers 5's DeBERTa-v2 freezes its relative positions at the traced shape: a graph with "
                     "dynamic axes gives wrong outputs at other shapes); each against torch fp32 on other ids: "
                     f"max abs diff {'-' if d is None else f'{d:.1e}'}; export time {run.build.get('export_s')} s")
    lines += [
        "- every system pinned to the first N CPUs (os.sched_setaffinity in the child, as taskset -c), "
        "OMP_NUM_THREADS=N; ours: `flashdeberta bench --backend eigen --dtype D --threads N --repeat R --json` "
        "(one process per shape; linear layers through oneDNN in a build with it: float32 by default, bf16 and int8 always); ORT: ORT_ENABLE_ALL, intra_op N, "
        "inter_op 1, sequential; torch: set_num_threads(N), inference_mode, eager attention, bf16 = "
        "model.to(torch.bfloat16) (oneDNN)",
        f"- times: ms per forward, one warm-up then the median of R runs, R in [{a.min_repeat}, {a.max_repeat}] "
        f"aiming at {a.budget_s:g} s of timed runs; random ids, all-ones masks",
        "- peak: VmHWM in MiB (/proc/PID/status; not ru_maxrss, which a child inherits from its parent). Ours: "
        "its own process per shape. ORT and torch: the worker's peak after that shape, cumulative over the "
        "shapes before it (shapes run in table order)",
        f"- whole run: {run.elapsed():.0f} s", ""]
    sysl = systems(a)
    for threads in a.threads:
        cores = run.affinity.get(threads)
        span = f"CPUs {cores[0]}-{cores[-1]}" if cores else "not run"
        lines += [f"## {threads} thread{'s' if threads > 1 else ''} ({span})", ""]
        header = ["B x L"]
        if "ours_fp32" in sysl:
            header.append("ours fp32")
        if "ort" in sysl:
            header += ["ORT fp32", "ours vs ORT"]
        if "torch_fp32" in sysl:
            header.append("torch fp32")
        if "ours_bf16" in sysl:
            header.append("ours bf16")
        if "torch_bf16" in sysl:
            header += ["torch bf16", "ours bf16 vs torch bf16"]
        if "ours_int8" in sysl:
            header += ["ours int8", "int8 vs our fp32"]
        header.append("peak MiB: " + " / ".join(s.replace("_", " ") for s in sysl))
        rows = []
        for b, l in a.shapes:
            g = {s: res.get((threads, b, l, s)) for s in sysl}
            ms = {s: (g[s] or {}).get("median_ms") for s in sysl}
            row = [f"{b} x {l}"]
            if "ours_fp32" in sysl:
                row.append(cell(g["ours_fp32"]))
            if "ort" in sysl:
                row += [cell(g["ort"]), ratio(ms["ort"], ms.get("ours_fp32"))]
            if "torch_fp32" in sysl:
                row.append(cell(g["torch_fp32"]))
            if "ours_bf16" in sysl:
                row.append(cell(g["ours_bf16"]))
            if "torch_bf16" in sysl:
                row += [cell(g["torch_bf16"]), ratio(ms["torch_bf16"], ms.get("ours_bf16"))]
            if "ours_int8" in sysl:
                row += [cell(g["ours_int8"]), ratio(ms.get("ours_fp32"), ms["ours_int8"])]
            row.append(" / ".join(mib(g[s]) for s in sysl))
            rows.append(row)
        lines += table(header, rows)
        runs = {s: sorted({(res.get((threads, b, l, s)) or {}).get("runs") for b, l in a.shapes} - {None})
                for s in sysl}
        lines += ["", "Ratios are speed ratios (the other's time / ours; above 1x: ours is faster). Timed runs: " +
                  "; ".join(f"{s.replace('_', ' ')} {r[0]}-{r[-1]}" for s, r in runs.items() if r) + ".", ""]
        for s in ("ours_fp32", "ours_bf16", "ours_int8"):
            loads = sorted(r["load_ms"] for (t, b, l, sys_), r in res.items()
                           if t == threads and sys_ == s and r.get("load_ms"))
            if loads:  # every bench process loads the model once, from a warm page cache after the first
                lines.append(f"- {s.replace('_', ' ')} load (`bench`'s load_ms, {len(loads)} processes): median "
                             f"{statistics.median(loads):.0f} ms, min {loads[0]:.0f}, max {loads[-1]:.0f}")
        if any(r.get("load_ms") for (t, b, l, s), r in res.items() if t == threads):
            lines.append("")
    if run.accuracy:
        acc = run.accuracy
        b, l = acc["shape"]
        ref = acc["ref_max_abs"]
        t = acc["threads"]
        lines += [f"## Accuracy: last_hidden_state on one {b} x {l} input ({t} thread{'s' if t > 1 else ''})", "",
                  "Max abs difference against torch fp32 (" +
                  (f"its largest |value|: {ref:.3g}" if ref is not None else "not run") +
                  ") and against the same system's fp32 (ours: `flashdeberta run --head base`).", ""]
        rows = []
        for name, vs_ref, rel, vs_own in acc["rows"]:
            if isinstance(vs_ref, str):
                rows.append([name.replace("_", " "), "error: " + vs_ref, "-", "-"])
            else:
                rows.append([name.replace("_", " "), "-" if vs_ref is None else f"{vs_ref:.2e}",
                             "-" if rel is None else f"{rel:.2e}", "-" if vs_own is None else f"{vs_own:.2e}"])
        lines += table(["system", "vs torch fp32", "relative (/ max abs)", "vs own fp32"], rows) + [""]
    errors = sorted({(s, r["error"]) for (t, b, l, s), r in res.items() if r.get("error")})
    if errors or run.notes or run.unsupported:
        lines += ["## Errors and notes", ""]
        lines += [f"- {s}: {e}" for s, e in errors]
        lines += [f"- our {d}: {m}" for d, m in sorted(run.unsupported.items())]
        lines += [f"- {n}" for n in run.notes]
        lines.append("")
    return "\n".join(lines) + "\n"


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

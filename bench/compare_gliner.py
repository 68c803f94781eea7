#!/usr/bin/env python3
"""GLiNER on our engine next to GLiNER's own code: PyTorch on the H200 and ONNX Runtime on the CPU, one model,
one run (issue 16 item 5).

On the GPU machine (python3 with torch, transformers, tokenizers, sentencepiece, onnxruntime, numpy; GLiNER's
source, not installed, in the git-ignored .reference/gliner_src/gliner, carried there), from the repository root:

    python3 bench/compare_gliner.py --cli BUNDLE/bin/flashdeberta [--out bench/results/gliner-<date>.md]

or as the `gliner_bench` step of tests/cuda/run_on_device.sh (bench/README.md). GLiNER's source is GLiNER 0.2.27
(github:urchade/GLiNER at c2bb58ddf569480ef7a9de03bef653723a42f5c2), put there as tests/fixtures/README.md says
("GLiNER fixtures"). Here, without torch, only our CLI's part runs, on a fixture model:

    python3 bench/compare_gliner.py --parts ours-cpu --model tests/fixtures/gliner/span_markerV0 \\
        --cli build/bin/flashdeberta --threads 2 --out /tmp/gliner.md

Parts (--parts, default all, in this order):
  build     the model, by GLiNER's own code: a random DebertaV2Model of deberta-v3-base shape (12 layers, hidden
            768, 12 heads, 256 buckets, c2p|p2c) saved with models/tiny-en's SentencePiece vocabulary (12,000
            pieces), then UniEncoderSpanGLiNER.load_from_config({span_mode markerV0, hidden_size 512,
            num_rnn_layers 1, max_width 12, max_len 384, words_splitter_type whitespace},
            backbone_from_pretrained=True) (the gliner_medium-v2.1 shape), every parameter re-randomized with fan-in
            scaling and the label projection calibrated (tests/fixtures/gliner_model.py's randomize and calibrate,
            the GLiNER fixtures' rules: logits of a calibration text with mean --calib-mean and std 2, so scores
            do not saturate and a realistic few spans per text pass the threshold), saved with save_pretrained (safetensors) into
            WORK/gliner-medium-random; then GLiNER's export_to_onnx (torch.onnx.export, dynamo=False, opset 19)
            into WORK/gliner-medium-random-onnx. Both systems load that one directory.
  torch     GLiNER's PyTorch model on the GPU (UniEncoderSpanGLiNER.from_pretrained(map_location="cuda")), fp32
            and bf16 (from_pretrained(dtype="bf16"), GLiNER's own option), stock HF DebertaV2Model backbone.
  ours-cuda `flashdeberta gliner --backend cuda --dtype bf16|fp32 --batch-size B --timing`.
  ort       GLiNER's ONNX Runtime path on the CPU (from_pretrained(load_onnx_model=True, session_options:
            ORT_ENABLE_ALL, intra_op_num_threads --threads, inter_op 1)), pinned to the first --threads CPUs.
  ours-cpu  `flashdeberta gliner --backend eigen --threads N --batch-size B --timing`, pinned the same way.

Texts: --texts (64) texts of 180-220 words (GLiNER's whitespace splitter's words: punctuation counts) made of
sentences with capitalized names, places, organizations and dates (a fixed-seed generator), 5 labels, threshold
0.5, flat NER. Batch 64: GLiNER's inference(texts, labels, batch_size=64) called --warmup times, then --repeat
times, its median; ours: the same 64 texts (--warmup + --repeat) times through stdin in one process, each batch
timed by when its last output line arrives (ours flushes per batch). Batch 1: predict_entities per text, and ours
with --batch-size 1, --single-texts texts after warm-up texts, total time. Both include tokenization and
decoding. Agreement: the batch-64 entities of every run against GLiNER PyTorch fp32 (ONNX Runtime's when that
did not run): texts whose (start, end, label) lists are identical, entities missing and extra, max score
difference over the common ones. Peak host memory: VmHWM of each process (/proc; see compare_common.py).

No part starts after --deadline-s (default 330) seconds; the report is written in any case, to --out (default
bench/results/gliner-<date>.md) and stdout. The whole default run takes about 3-5 minutes on the GPU machine.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_common import (REPO, BenchError, check_cli, first_cores, pinned,  # noqa: E402
                            python_modules_missing, short_error, thread_env, today, vmhwm_kib, write_report)
from gliner_report import gpu_name, report  # noqa: E402
from gliner_texts import make_texts  # noqa: E402
from gliner_workers import log, save_json, worker_build, worker_run  # noqa: E402

PARTS = ("build", "torch", "ours-cuda", "ort", "ours-cpu")
LABELS = ["person", "organization", "location", "date", "event"]
GLINER_COMMIT = "c2bb58ddf569480ef7a9de03bef653723a42f5c2"


# ------------------------------------------------------------------------------------------------------------
# Our CLI
# ------------------------------------------------------------------------------------------------------------

def run_cli_stream(cmd, stdin_path, timeout, cores=None, env=None):
    """Runs cmd with stdin from a file; returns (rc, [(arrival seconds, line)], stderr, peak VmHWM KiB)."""
    with open(stdin_path, "rb") as fin:
        proc = subprocess.Popen(cmd, stdin=fin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                preexec_fn=pinned(cores) if cores else None)
    err_chunks, peak = [], [None]
    done = threading.Event()

    def drain_err():
        for block in iter(lambda: proc.stderr.read(65536), b""):
            err_chunks.append(block)

    def sample():
        while not done.is_set():
            v = vmhwm_kib(proc.pid)
            if v is not None:
                peak[0] = v if peak[0] is None else max(peak[0], v)
            done.wait(0.01)

    killer = threading.Timer(timeout, proc.kill)
    threads = [threading.Thread(target=drain_err, daemon=True), threading.Thread(target=sample, daemon=True)]
    for t in threads:
        t.start()
    killer.start()
    start = time.perf_counter()
    lines = []
    for raw in proc.stdout:
        lines.append((time.perf_counter() - start, raw.decode("utf-8", "replace")))
    rc = proc.wait()
    killer.cancel()
    done.set()
    for t in threads:
        t.join(timeout=10)
    return rc, lines, b"".join(err_chunks).decode("utf-8", "replace"), peak[0]


def ours_run(a, cli, model_dir, backend, dtype, batch, texts, labels, threshold, cores, timeout, work):
    """Our CLI on (warmup + repeat) batches of `batch` texts (batch 1: warm-up texts, then --single-texts)."""
    if batch == 1:
        warm, timed = a.warmup_single, a.single_texts
        lines_in = [texts[i % len(texts)] for i in range(warm + timed)]
    else:
        warm, timed = a.warmup, a.repeat
        lines_in = [texts[i % batch] for i in range((warm + timed) * batch)]
        if batch > len(texts):
            return {"error": f"batch {batch} is more than the {len(texts)} texts (--texts)"}
    stdin_path = os.path.join(work, f"stdin-{batch}.txt")
    with open(stdin_path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines_in) + "\n")
    cmd = [cli, "gliner", "--model", model_dir, "--labels", ",".join(labels), "--threshold", repr(threshold),
           "--backend", backend, "--dtype", dtype, "--batch-size", str(batch), "--timing"]
    if backend == "eigen":
        cmd += ["--threads", str(a.threads)]
    env = thread_env(a.threads) if backend == "eigen" else dict(os.environ)
    rc, lines, err, peak = run_cli_stream(cmd, stdin_path, timeout, cores=cores, env=env)
    if rc != 0:
        return {"error": f"exit {rc}: {short_error(err)}"}
    if len(lines) != len(lines_in):
        return {"error": f"{len(lines)} output lines for {len(lines_in)} texts: {short_error(err)}"}
    ends = [lines[i][0] for i in range(batch - 1, len(lines), batch)]  # when each batch's last line came
    rec = {"vmhwm_kib": peak}
    m = re.search(r"loaded \S+ in ([0-9.]+) ms", err)
    if m:
        rec["load_ms"] = float(m.group(1))
    if batch == 1:
        per = [ends[i] - ends[i - 1] for i in range(warm, len(ends))] if warm > 0 else None
        if not per:
            return {"error": "batch 1 needs at least one warm-up text (--warmup-single)"}
        rec.update(texts_per_s=len(per) / sum(per), median_ms=statistics.median(per) * 1e3, texts=len(per))
        return rec
    per = [ends[i] - ends[i - 1] for i in range(max(warm, 1), len(ends))]
    if not per:
        return {"error": "no timed batch: --warmup must be at least 1 and --repeat at least 1"}
    med = statistics.median(per)
    last = [json.loads(l) for _, l in lines[-batch:]]
    rec.update(texts_per_s=batch / med, median_ms=med * 1e3, runs=len(per),
               entities=[[[e["start"], e["end"], e["label"], float(e["score"])] for e in d["entities"]]
                         for d in last])
    return rec


# ------------------------------------------------------------------------------------------------------------
# The harness
# ------------------------------------------------------------------------------------------------------------

def parse_list(kind, allowed=None):
    def parse(text):
        values = [x.strip() for x in text.split(",") if x.strip()]
        if not values:
            raise argparse.ArgumentTypeError(f"no {kind} given")
        if allowed is not None:
            bad = [x for x in values if x not in allowed]
            if bad:
                raise argparse.ArgumentTypeError(f"{kind} {bad} not among {', '.join(allowed)}")
        return values
    return parse


def parse_batches(text):
    try:
        values = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of batch sizes")
    if not values or values[0] < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: batch sizes are positive integers")
    return values


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--cli", default=os.environ.get("FLASHDEBERTA_CLI", str(REPO / "build/bin/flashdeberta")))
    p.add_argument("--parts", type=parse_list("parts", PARTS), default=list(PARTS),
                   help="comma-separated subset of " + ",".join(PARTS) + " (default all)")
    p.add_argument("--model", help="a GLiNER model directory to use instead of building one (no build part then)")
    p.add_argument("--onnx-dir", help="its ONNX export (GLiNER's export_to_onnx layout) for the ort part")
    p.add_argument("--work-dir", default=os.path.join(tempfile.gettempdir(), "flashdeberta-compare-gliner"))
    p.add_argument("--gliner-src", default=str(REPO / ".reference" / "gliner_src"),
                   help="folder holding GLiNER's gliner/ package (default .reference/gliner_src)")
    p.add_argument("--texts", type=int, default=64, help="distinct texts (default 64)")
    p.add_argument("--batch-sizes", type=parse_batches, default=[1, 64], help="default 1,64")
    p.add_argument("--labels", type=parse_list("labels"), default=LABELS, help="default " + ",".join(LABELS))
    p.add_argument("--threshold", type=float, default=0.5)
    p.add_argument("--threads", type=int, default=16, help="CPU threads of the ort and ours-cpu parts (default 16)")
    p.add_argument("--torch-dtypes", type=parse_list("dtypes", ("fp32", "bf16", "fp16")), default=["fp32", "bf16"])
    p.add_argument("--cuda-dtypes", type=parse_list("dtypes", ("bf16", "fp32", "fp16")), default=["bf16", "fp32"],
                   help="ours on CUDA (default bf16,fp32)")
    p.add_argument("--cpu-dtypes", type=parse_list("dtypes", ("fp32", "bf16", "int8")), default=["fp32"],
                   help="ours on eigen (default fp32)")
    p.add_argument("--warmup", type=int, default=2, help="warm-up batches of the big batch size (default 2)")
    p.add_argument("--repeat", type=int, default=5, help="timed batches of the big batch size (default 5)")
    p.add_argument("--cpu-warmup", type=int, default=1, help="--warmup of the CPU parts (default 1)")
    p.add_argument("--cpu-repeat", type=int, default=3, help="--repeat of the CPU parts (default 3)")
    p.add_argument("--single-texts", type=int, default=32, help="texts timed at batch 1 (default 32; CPU: half)")
    p.add_argument("--warmup-single", type=int, default=3, help="warm-up texts at batch 1 (default 3)")
    p.add_argument("--calib-mean", type=float, default=-5.0,
                   help="mean logit of the calibration text (default -5: a few spans per text over 0.5)")
    p.add_argument("--seed", type=int, default=2027)
    p.add_argument("--deadline-s", type=float, default=330.0, help="no part starts after this (default 330 s)")
    p.add_argument("--out", help="report path (default bench/results/gliner-<date>.md)")
    p.add_argument("--commit")
    p.add_argument("--python", default=sys.executable, help=argparse.SUPPRESS)
    # worker mode (internal)
    p.add_argument("--worker", choices=["build", "torch", "ort"], help=argparse.SUPPRESS)
    p.add_argument("--texts-file", help=argparse.SUPPRESS)
    p.add_argument("--model-dir", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    p.add_argument("--dtypes", default="fp32", help=argparse.SUPPRESS)
    p.add_argument("--deadline", type=float, default=float("inf"), help=argparse.SUPPRESS)
    return p


def gliner_env(a, threads=None):
    """The environment of a GLiNER process: its source alone on PYTHONPATH, FlashDeBERTa off."""
    env = thread_env(threads) if threads else dict(os.environ)
    env["PYTHONPATH"] = os.path.abspath(a.gliner_src)
    env.pop("USE_FLASHDEBERTA", None)
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def preflight(a, parts):
    """Everything cheap that can fail, before any work."""
    if a.texts < max(a.batch_sizes):
        raise BenchError(f"--texts {a.texts} is fewer than the largest batch size {max(a.batch_sizes)}")
    if min(a.warmup, a.repeat, a.cpu_warmup, a.cpu_repeat, a.warmup_single, a.single_texts) < 1:
        raise BenchError("--warmup, --repeat, --cpu-warmup, --cpu-repeat, --warmup-single and --single-texts must be >= 1")
    if any("," in l for l in a.labels):
        raise BenchError("a label may not hold a comma")
    cli = check_cli(a.cli) if {"ours-cuda", "ours-cpu"} & set(parts) else None
    if {"ort", "ours-cpu"} & set(parts):
        first_cores(a.threads)
    gl_parts = {"build", "torch", "ort"} & set(parts)
    if gl_parts:
        if not os.path.isfile(os.path.join(a.gliner_src, "gliner", "__init__.py")):
            raise BenchError(
                f"GLiNER's source is not in {a.gliner_src}/gliner: fetch github:urchade/GLiNER at {GLINER_COMMIT} "
                f"(GLiNER 0.2.27) and put its gliner/ package there (tests/fixtures/README.md, 'GLiNER fixtures'); "
                f"on the GPU machine carry .reference/gliner_src; or leave out the parts {sorted(gl_parts)} (--parts)")
        need = ["numpy", "torch", "transformers", "gliner"] + (["onnxruntime"] if {"build", "ort"} & gl_parts else [])
        missing = python_modules_missing(need, a.python, env=gliner_env(a))
        if missing:
            raise BenchError("GLiNER's parts cannot run: " + "; ".join(f"{m}: {e}" for m, e in missing.items()) +
                             f" (python {a.python}, PYTHONPATH={os.path.abspath(a.gliner_src)}); leave them out with "
                             "--parts ours-cuda,ours-cpu --model DIR")
    if "build" not in parts:
        if not a.model:
            raise BenchError("without the build part, --model DIR (a GLiNER model directory) is needed")
        if not os.path.isfile(os.path.join(a.model, "gliner_config.json")):
            raise BenchError(f"--model {a.model}: no gliner_config.json (a GLiNER save_pretrained directory)")
        if "ort" in parts and not (a.onnx_dir and os.path.isfile(os.path.join(a.onnx_dir, "model.onnx"))):
            raise BenchError("the ort part without the build part needs --onnx-dir DIR holding model.onnx")
    elif a.model:
        raise BenchError("--model and the build part exclude each other: give --parts without build")
    return cli


class State:
    def __init__(self, a):
        self.a = a
        self.start = time.monotonic()
        self.build = {}
        self.gliner = {}  # part -> worker result
        self.ours = {}  # (backend, dtype, batch) -> record
        self.notes = []
        self.versions = {}
        self.device = None

    def elapsed(self):
        return time.monotonic() - self.start

    def past_deadline(self):
        return self.elapsed() > self.a.deadline_s

    def epoch_deadline(self):
        return time.time() + max(0.0, self.a.deadline_s - self.elapsed())

    def timeout(self):
        return max(60.0, self.a.deadline_s + 150.0 - self.elapsed())

    def note(self, msg):
        self.notes.append(msg)
        sys.stderr.write("note: " + msg + "\n")


def run_worker(st, kind, extra, cores=None, threads=None):
    a = st.a
    result = os.path.join(a.work_dir, f"{kind}.json")
    if os.path.exists(result):
        os.remove(result)
    log_path = os.path.join(a.work_dir, f"{kind}.log")
    cmd = [a.python, os.path.abspath(__file__), "--worker", kind, "--texts-file",
           os.path.join(a.work_dir, "texts.json"), "--result", result, "--threads", str(threads or a.threads),
           "--deadline", repr(st.epoch_deadline()), "--batch-sizes", ",".join(map(str, a.batch_sizes)),
           "--seed", str(a.seed), *extra]
    log(f"{kind}: {' '.join(cmd[2:])}")
    with open(log_path, "w") as lf:
        try:
            rc = subprocess.run(cmd, stdout=lf, stderr=subprocess.STDOUT, env=gliner_env(a, threads),
                                preexec_fn=pinned(cores) if cores else None, timeout=st.timeout()).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    out = json.load(open(result, encoding="utf-8")) if os.path.exists(result) else {}
    if rc != 0:
        msg = f"{kind} worker: exit {rc}: {short_error(Path(log_path).read_text(errors='replace'))} (log {log_path})"
        out.setdefault("error", msg)
        st.note(msg)
    return out


def run_parts(st, cli, parts, texts):
    a = st.a
    os.makedirs(a.work_dir, exist_ok=True)
    save_json(os.path.join(a.work_dir, "texts.json"), {"texts": texts, "labels": a.labels, "threshold": a.threshold})
    model_dir = a.model or os.path.join(a.work_dir, "gliner-medium-random")
    onnx_dir = a.onnx_dir or os.path.join(a.work_dir, "gliner-medium-random-onnx")
    if "build" in parts:
        extra = ["--model-dir", model_dir, "--calib-mean", repr(a.calib_mean)]
        if "ort" in parts:
            extra += ["--onnx-dir", onnx_dir]
        res = run_worker(st, "build", extra, threads=None)
        st.build = res.get("build", {})
        if "error" in res and not os.path.isfile(os.path.join(model_dir, "gliner_config.json")):
            raise BenchError("the model could not be built: " + res["error"])
    cpu_cores = first_cores(a.threads) if {"ort", "ours-cpu"} & set(parts) else None
    cpu_args = ["--warmup", str(a.cpu_warmup), "--repeat", str(a.cpu_repeat),
                "--single-texts", str(max(1, a.single_texts // 2)), "--warmup-single", str(a.warmup_single)]
    gpu_args = ["--warmup", str(a.warmup), "--repeat", str(a.repeat), "--single-texts", str(a.single_texts),
                "--warmup-single", str(a.warmup_single)]
    for part in parts:
        if part == "build":
            continue
        if st.past_deadline():
            st.note(f"part {part} not run: past --deadline-s {a.deadline_s:g}")
            continue
        t0 = st.elapsed()
        if part == "torch":
            st.gliner["torch"] = run_worker(st, "torch", ["--model-dir", model_dir, "--dtypes",
                                                          ",".join(a.torch_dtypes), *gpu_args])
        elif part == "ort":
            if not os.path.isfile(os.path.join(onnx_dir, "model.onnx")):
                st.gliner["ort"] = {"error": "no ONNX model: " + st.build.get("onnx_error", f"{onnx_dir}/model.onnx missing")}
                continue
            st.gliner["ort"] = run_worker(st, "ort", ["--model-dir", onnx_dir, *cpu_args], cores=cpu_cores,
                                          threads=a.threads)
        else:
            backend = "cuda" if part == "ours-cuda" else "eigen"
            dtypes = a.cuda_dtypes if backend == "cuda" else a.cpu_dtypes
            sub = argparse.Namespace(**vars(a))
            if backend == "eigen":
                sub.warmup, sub.repeat, sub.single_texts = a.cpu_warmup, a.cpu_repeat, max(1, a.single_texts // 2)
            for dtype in dtypes:
                for b in sorted(a.batch_sizes, reverse=True):
                    if st.past_deadline():
                        st.ours[(backend, dtype, b)] = {"skipped": "deadline"}
                        continue
                    r = ours_run(sub, cli, model_dir, backend, dtype, b, texts, a.labels, a.threshold,
                                 cpu_cores if backend == "eigen" else None, st.timeout(), a.work_dir)
                    st.ours[(backend, dtype, b)] = r
                    log(f"ours {backend} {dtype} batch {b}: " +
                        json.dumps({k: v for k, v in r.items() if k != "entities"}))
        log(f"part {part}: {st.elapsed() - t0:.0f} s")


def main(argv=None):
    a = build_parser().parse_args(argv)
    if a.worker == "build":  # workers: a failure is a traceback in the worker's log and exit status 1
        return worker_build(a)
    if a.worker:
        return worker_run(a)
    try:
        parts = [p for p in PARTS if p in a.parts]
        st = State(a)
        st.cli = preflight(a, parts)
        if "ours-cuda" in parts or "torch" in parts:
            st.device = gpu_name()
        texts = make_texts(a.texts, seed=a.seed)
        run_parts(st, st.cli, parts, texts)
        if st.gliner.get("torch", {}).get("device"):
            st.device = st.device or st.gliner["torch"]["device"]
        out = a.out or str(REPO / "bench" / "results" / f"gliner-{today()}.md")
        write_report(report(st, texts, parts), out)
    except BenchError as e:
        sys.stderr.write(f"compare_gliner.py: error: {e}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""What the Python package costs on top of the C++ program, and the Dask job's throughput.

  PYTHONPATH=build-py/python python3 bench/python_overhead.py [--cli build/bin/flashdeberta]
      [--model models/tiny-en-sections] [--tokenizer DIR] [--threads 1] [--repeat 20] [--texts 512]
      [--batch-size 32] [--dask-lines 4000] [--no-dask] [--out bench/results/python-<date>.md]

1. Forward: the backbone through flashdeberta.AutoModel(...)(input_ids) on random ids (B x L), median of
   --repeat calls after a warm-up; in the same process, each call's wall time minus the time the library spent
   in C++ during it (flashdeberta._native.native_seconds) is Python's overhead: argument checks, the copy of
   the ids in and of last_hidden_state out to numpy, the binding. `flashdeberta bench --json` (another
   process) times the same forward for reference.
2. Pipeline: flashdeberta.pipeline("text-classification")(texts, top_k=None) over --texts texts in batches,
   its overhead measured the same way and divided by the number of forward calls; `flashdeberta classify
   --timing` on the same texts and batch size (another process; it also writes a JSON line per text) for
   reference.
   The binding alone: the same on a model of a few kilobytes, with warm caches and with the caches
   evicted before each call as a large forward evicts them (what the overhead of the rows above is made of).
3. Dask: flashdeberta.dask_job.run_job over a generated JSON-lines corpus on a LocalCluster of 1 and 2
   worker processes (one thread each; cluster start-up timed apart), next to one process running the
   pipeline over the same lines.

Prints a Markdown report (date, machine, commit, settings, tables) and writes it to --out.
"""
import argparse
import datetime
import json
import logging
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SHAPES = [(1, 16), (1, 128), (8, 64), (32, 128)]
WORDS = ("a small tool for managing packages library bindings server network game levels editor data file "
         "system support Python command-line graphical interface documentation").split()


def machine():
    model = platform.processor() or "unknown"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        model = re.search(r"^Model name:\s*(.+)$", out, re.M).group(1).strip()
    except (OSError, subprocess.CalledProcessError, AttributeError):
        pass
    return f"{model}, {os.cpu_count()} cores"


def commit():
    def git(*args):
        return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True).stdout.strip()
    sha = git("rev-parse", "--short", "HEAD") or "unknown"
    return sha + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def load_average():
    try:
        return "1-minute load average %.2f on %d cores" % (os.getloadavg()[0], os.cpu_count())
    except OSError:
        return "unknown"


def make_texts(count, seed=3):
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 48))) for _ in range(count)]


def median_ms(fn, repeat):
    fn()  # warm-up: first-touch pages, thread start-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def in_process(fd, fn, repeat, before=None):
    """fn() timed in this process: (median wall ms, median ms inside the library, median overhead us, median
    CPU overhead us). The library counts the time its calls spend in C++ with the GIL released, as wall time
    (flashdeberta._native.native_seconds) and as the calling thread's CPU time (native_cpu_seconds); the rest of
    each call's wall time is what the Python layer and the binding add, and the rest of its CPU time the work
    they do, which a busy machine does not inflate (with threads=1 the forward runs on the calling thread)."""
    native = fd._native.native_seconds
    native_cpu = fd._native.native_cpu_seconds
    fn()
    walls, inside, over, over_cpu = [], [], [], []
    for _ in range(repeat):
        if before is not None:
            before()  # untimed
        native(reset=True)
        native_cpu(reset=True)
        start, start_cpu = time.perf_counter(), time.thread_time()
        fn()
        wall, cpu = time.perf_counter() - start, time.thread_time() - start_cpu
        cpp, cpp_cpu = native(reset=True), native_cpu(reset=True)
        walls.append(wall * 1e3)
        inside.append(cpp * 1e3)
        over.append((wall - cpp) * 1e6)
        over_cpu.append((cpu - cpp_cpu) * 1e6)
    return (statistics.median(walls), statistics.median(inside), statistics.median(over),
            statistics.median(over_cpu))


def cli_bench_ms(cli, model, batch, length, threads, repeat):
    out = subprocess.run([cli, "bench", "--model", model, "--batch", str(batch), "--seq-len", str(length),
                          "--threads", str(threads), "--repeat", str(repeat), "--json"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["median_ms"]


def forward_rows(fd, args):
    model = fd.AutoModel.from_pretrained(args.model, threads=args.threads)
    vocab = model.config["vocab_size"]
    rows = []
    for batch, length in SHAPES:
        ids = np.random.default_rng(batch * 1000 + length).integers(5, vocab, size=(batch, length), dtype=np.int64)
        mask = np.ones_like(ids)
        py, inside, overhead, overhead_cpu = in_process(fd, lambda: model(ids, attention_mask=mask), args.repeat)
        cpp = cli_bench_ms(args.cli, args.model, batch, length, args.threads, args.repeat)
        rows.append((f"{batch} x {length}", cpp, inside, py, overhead, overhead_cpu))
    return rows


def binding_rows(fd, repeat):
    """The binding's own cost, apart from the forward's effect on the caches: a model of a few kilobytes
    (tests/fixtures/v3_c2p, 1 x 4 ids) called back to back (warm caches), then with 64 MB of memory written
    between calls, as a large forward evicts the caches the Python layer runs in afterwards (cold caches)."""
    model = fd.AutoModel.from_pretrained(str(REPO / "tests/fixtures/v3_c2p"), threads=1)
    ids = np.array([[1, 5, 6, 2]], dtype=np.int64)
    mask = np.ones_like(ids)
    sweep = np.ones(16 << 20, dtype=np.float32)
    rows = []
    for name, before in (("warm caches", None),
                         ("cold caches (64 MB written before each call)", lambda: np.add(sweep, 1.0, out=sweep))):
        _, inside, overhead, overhead_cpu = in_process(fd, lambda: model(ids, attention_mask=mask),
                                                       max(repeat * 10, 200), before)
        rows.append((name, inside * 1e3, overhead, overhead_cpu))
    return rows


def cli_classify_ms(cli, args, texts):
    """The texts' time `flashdeberta classify --timing` reports (load excluded)."""
    command = [cli, "classify", "--model", args.model, "--batch-size", str(args.batch_size), "--threads",
               str(args.threads), "--timing"]
    if args.tokenizer:
        command += ["--tokenizer", args.tokenizer]
    r = subprocess.run(command, input="\n".join(texts) + "\n", capture_output=True, text=True, check=True)
    match = re.search(r"flashdeberta: (\d+) texts? in ([0-9.]+) ms", r.stderr)
    if not match or int(match.group(1)) != len(texts):
        raise RuntimeError(f"no timing line for {len(texts)} texts in: {r.stderr}")
    return float(match.group(2))


def pipeline_rows(fd, args):
    texts = make_texts(args.texts)
    pipe = fd.pipeline("text-classification", model=args.model, tokenizer=args.tokenizer, threads=args.threads,
                       batch_size=args.batch_size)
    calls = -(-len(texts) // args.batch_size)
    runs = max(3, args.repeat // 4)
    py, inside, overhead, overhead_cpu = in_process(fd, lambda: pipe(texts, top_k=None), runs)
    cpp = statistics.median(cli_classify_ms(args.cli, args, texts) for _ in range(runs))
    return [(f"{len(texts)} texts, batches of {args.batch_size} ({calls} calls)", cpp, inside, py, overhead / calls,
             overhead_cpu / calls)]


def write_corpus(path, count):
    with open(path, "w", encoding="utf-8") as f:
        for i, text in enumerate(make_texts(count, seed=5)):
            f.write(json.dumps({"id": i, "text": text}) + "\n")


def dask_rows(fd, args):
    import distributed
    from flashdeberta import dask_job
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        write_corpus(corpus, args.dask_lines)
        texts = [json.loads(line)["text"] for line in corpus.read_text(encoding="utf-8").splitlines()]
        pipe = fd.pipeline("text-classification", model=args.model, tokenizer=args.tokenizer, threads=1,
                           batch_size=args.batch_size)
        start = time.perf_counter()
        pipe(texts)
        seconds = time.perf_counter() - start
        rows.append(("one process, no Dask", "", seconds, len(texts) / seconds))
        for workers in (1, 2):
            start = time.perf_counter()
            with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                          dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
                    distributed.Client(cluster) as client:
                started = time.perf_counter() - start
                result = dask_job.run_job(str(corpus), str(Path(tmp) / f"out{workers}"), client=client,
                                          task="text-classification", model=args.model, tokenizer=args.tokenizer,
                                          batch_size=args.batch_size, shard_lines=max(1, args.dask_lines // 16),
                                          threads=1, progress=False)
            rows.append((f"LocalCluster, {workers} worker{'s' if workers > 1 else ''}", f"{started:.1f} s",
                         result["seconds"], result["lines"] / result["seconds"]))
    return rows


def report(args, forward, binding, pipeline, dask):
    lines = [f"# Python overhead and Dask throughput, {datetime.date.today().isoformat()}", "",
             f"- machine: {machine()}", f"- commit: {commit()}", f"- Python {platform.python_version()}, "
             f"model `{os.path.relpath(args.model, REPO)}`, float32, eigen, flash attention, "
             f"threads {args.threads}, median of {args.repeat} runs after a warm-up", "",
             "## Forward call (backbone, random ids)", "",
             "| B x L | C++ `flashdeberta bench` (its own process) | in the library, per call | Python "
             "`AutoModel(...)(ids)` | Python's overhead per call (wall) | (CPU time) |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {s} | {c:.3f} ms | {i:.3f} ms | {p:.3f} ms | {o:.0f} us | {oc:.0f} us |"
              for s, c, i, p, o, oc in forward]
    lines += ["", "## The binding alone (`tests/fixtures/v3_c2p`, 1 x 4)", "",
              "| caches | in the library, per call | Python's overhead per call (wall) | (CPU time) |",
              "|---|---|---|---|"]
    lines += [f"| {s} | {i:.1f} us | {o:.1f} us | {oc:.1f} us |" for s, i, o, oc in binding]
    lines += ["", "## Pipeline (text-classification, every label)", "",
              "| texts | C++ `flashdeberta classify --timing` (its own process) | in the library | Python "
              "`pipeline(...)(texts)` | Python's overhead per forward call (wall) | (CPU time) |",
              "|---|---|---|---|---|---|"]
    lines += [f"| {s} | {c:.1f} ms | {i:.1f} ms | {p:.1f} ms | {o:.0f} us | {oc:.0f} us |"
              for s, c, i, p, o, oc in pipeline]
    if dask:
        lines += ["", f"## Dask job ({args.dask_lines} lines, shards of {max(1, args.dask_lines // 16)}, "
                      f"batches of {args.batch_size}, one thread per worker)", "",
                  "| run | cluster start | job time | lines/s |", "|---|---|---|---|"]
        lines += [f"| {s} | {st} | {sec:.2f} s | {rate:.0f} |" for s, st, sec, rate in dask]
    lines += ["", f"- load when the measurement began: {args.load}", "",
              "Python's overhead is measured in one process: each call's wall time minus the time the library spent "
              "in C++ during it (flashdeberta._native.native_seconds), median over the calls; the CPU-time column "
              "does the same with the calling thread's CPU time (time.thread_time against native_cpu_seconds), "
              "which waiting for a core on a busy machine does not inflate. The C++ programs' own "
              "times, from another process, are for reference (the CLI's classify time also includes writing its "
              "JSON lines)."]
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cli", default=os.environ.get("FLASHDEBERTA_CLI", str(REPO / "build/bin/flashdeberta")))
    p.add_argument("--model", default=str(REPO / "models/tiny-en-sections"))
    p.add_argument("--tokenizer", help="tokenizer directory (default: the model's)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--texts", type=int, default=512)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--dask-lines", type=int, default=4000)
    p.add_argument("--no-dask", action="store_true")
    p.add_argument("--out", default=str(REPO / f"bench/results/python-{datetime.date.today().isoformat()}.md"))
    args = p.parse_args()
    import flashdeberta as fd
    args.load = load_average()
    forward = forward_rows(fd, args)
    binding = binding_rows(fd, args.repeat)
    pipeline = pipeline_rows(fd, args)
    dask = None if args.no_dask else dask_rows(fd, args)
    text = report(args, forward, binding, pipeline, dask)
    sys.stdout.write(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text, encoding="utf-8")
    sys.stderr.write(f"written to {args.out}\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Throughput and latency of `flashdeberta serve` under concurrent clients, against the CLI's batched throughput
on the same texts (the batching efficiency).

  python3 bench/server_load.py [--cli build/bin/flashdeberta] [--model models/tiny-en-sections]
      [--tokenizer DIR] [--backend eigen|kokkos|cuda] [--dtype fp32|bf16|fp16] [--threads 0]
      [--concurrency 1,8,64] [--seconds 10] [--texts 2048] [--cli-batch-size 64] [--max-batch-tokens 16384]
      [--client-processes N] [--serve-args "--forward-thread worker"] [--perf /usr/bin/perf]
      [--out bench/results/server-<date>-<host>.md]

1. Texts: --texts short texts (6 to 20 words, about 10 to 30 tokens: classification requests as they come),
   generated from a fixed seed.
2. CLI: `flashdeberta classify --timing --batch-size B` over the texts on stdin, best of four runs (two before
   the server's, two after): the texts' time (tokenizing, forward passes, output; load excluded), in texts/s and tokens/s (tokens counted by the
   server's /tokenize, special tokens included).
3. Server: `flashdeberta serve --port 0` with the same model and backend options; for each concurrency C,
   C clients (threads spread over --client-processes processes, each thread with one keep-alive connection)
   send POST /predict {"inputs": text} back to back, one text per request, for --seconds after a warm-up.
   Requests/s, p50/p99 latency (client side), tokens/s (the server's flashdeberta_tokens_total over the
   window), the mean batch (sequences per forward, from /metrics), and the efficiency: server tokens/s over
   the CLI's.
4. Where a request's time goes: the clients' mean latency beside the server's own means over the same window
   (its /metrics histograms: the /predict handler, from the parsed request to the rendered answer; the queue;
   the forward); their difference is the HTTP layer and the client on either side of the handler. And the
   server's CPU time (all its threads, /proc) per request over the window: where the clients share the cores,
   what the server burns is taken from them. --perf PERF: perf record of the server over each row's window, its
   top symbols and busiest threads in the report.

The clients run on the same machine as the server: on a host with few cores they take CPU from it (the
report says how many cores there are). Prints a Markdown report and writes it to --out.
"""
import argparse
import datetime
import http.client
import json
import multiprocessing
import os
import platform
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORDS = ("a small tool for managing packages library bindings server network game levels editor data file "
         "system daemon font theme graphical interface command line utility python module documentation audio "
         "video player converter image viewer terminal emulator kernel driver firmware database client web "
         "browser extension plugin desktop environment").split()


def texts(count, seed=2026):
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 20))) for _ in range(count)]


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        model = re.search(r"Model name:\s*(.+)", out)
        return model.group(1).strip() if model else platform.processor()
    except (OSError, subprocess.CalledProcessError):
        return platform.processor()


def gpu_model():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, check=True).stdout.strip()
        return out.splitlines()[0] if out else None
    except (OSError, subprocess.CalledProcessError):
        return None


def commit():
    try:
        return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def model_options(args):
    options = ["--model", args.model, "--backend", args.backend, "--dtype", args.dtype, "--threads", str(args.threads)]
    if args.tokenizer:
        options += ["--tokenizer", args.tokenizer]
    return options


def run_cli(args, lines):
    """Texts/s of `flashdeberta classify --timing` over the texts (best of two runs)."""
    best = 0.0
    for _ in range(2):
        result = subprocess.run([args.cli, "classify", *model_options(args), "--batch-size", str(args.cli_batch_size),
                                 "--timing"], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
        match = re.search(r"(\d+) texts? in ([\d.]+) ms", result.stderr)
        if not match:
            sys.exit("no timing line in the CLI's stderr:\n" + result.stderr)
        best = max(best, int(match.group(1)) / (float(match.group(2)) / 1000.0))
    return best


class Server:
    def __init__(self, args):
        command = [args.cli, "serve", *model_options(args), "--port", "0", "--max-batch-tokens",
                   str(args.max_batch_tokens), "--max-concurrent-requests", str(max(512, 2 * max(args.concurrency))),
                   *args.serve_args.split()]
        self.process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        self.port = None
        for line in self.process.stderr:
            sys.stderr.write(line)
            match = re.search(r" on http://[^:]+:(\d+) ", line)
            if match:
                self.port = int(match.group(1))
                break
        if self.port is None:
            sys.exit(f"the server did not start (exit status {self.process.wait()})")
        threading.Thread(target=lambda: [sys.stderr.write(line) for line in self.process.stderr], daemon=True).start()

    def get(self, path, body=None):
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        connection.request("POST" if body is not None else "GET", path,
                           body=json.dumps(body) if body is not None else None,
                           headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        payload = response.read()
        connection.close()
        return response.status, payload.decode()

    def metrics(self):
        _, text = self.get("/metrics")
        values = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)  # a labelled sample keeps its labels in the name
                values[name] = float(value)
        return values

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=120)


def client_process(port, lines, threads, start_at, stop_at, results):
    """`threads` clients of one process, each on a keep-alive connection, sending one text per request."""
    latencies, errors = [], []
    lock = threading.Lock()

    def client(offset):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        own, failed = [], []
        i = offset
        while time.time() < stop_at:
            body = json.dumps({"inputs": lines[i % len(lines)]})
            i += 7
            begin = time.perf_counter()
            try:
                connection.request("POST", "/predict", body=body, headers={"Content-Type": "application/json"})
                response = connection.getresponse()
                response.read()
                status = response.status
            except (OSError, http.client.HTTPException) as error:
                failed.append(str(error))
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                continue
            end = time.perf_counter()
            if status != 200:
                failed.append(f"status {status}")
            elif time.time() >= start_at:
                own.append(end - begin)
        connection.close()
        with lock:
            latencies.extend(own)
            errors.extend(failed)

    workers = [threading.Thread(target=client, args=(os.getpid() * 131 + k * 17,)) for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    results.put((latencies, errors))


def measure(server, lines, concurrency, args):
    processes = max(1, min(args.client_processes or os.cpu_count() or 1, concurrency))
    shares = [concurrency // processes + (1 if k < concurrency % processes else 0) for k in range(processes)]
    results = multiprocessing.Queue()
    warmup = min(2.0, args.seconds / 4)
    start_at = time.time() + warmup
    stop_at = start_at + args.seconds
    children = [multiprocessing.Process(target=client_process, args=(server.port, lines, n, start_at, stop_at, results))
                for n in shares]
    for child in children:
        child.start()
    time.sleep(max(0.0, start_at - time.time()))
    before = server.metrics()
    cpu_before = process_cpu_seconds(server.process.pid)
    profiler = None
    if args.perf:
        perf_data = Path(tempfile.gettempdir()) / f"server-load-{server.process.pid}-{concurrency}.perf"
        profiler = subprocess.Popen([args.perf, "record", "-F", "997", "-g", "-p", str(server.process.pid), "-o",
                                     str(perf_data), "--", "sleep", str(max(0.5, stop_at - time.time() - 0.2))],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(max(0.0, stop_at - time.time()))
    after = server.metrics()
    cpu_after = process_cpu_seconds(server.process.pid)
    profile = perf_summary(args.perf, profiler, perf_data) if profiler else None
    latencies, errors = [], []
    for _ in children:
        own, failed = results.get()
        latencies.extend(own)
        errors.extend(failed)
    for child in children:
        child.join()
    latencies.sort()
    delta = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    batches = delta.get("flashdeberta_batch_size_count", 0.0)

    def mean_ms(histogram, labels=""):
        count = delta.get(histogram + "_count" + labels, 0.0)
        return 1000 * delta.get(histogram + "_sum" + labels, 0.0) / count if count else float("nan")

    return {
        "concurrency": concurrency,
        "requests_per_s": len(latencies) / args.seconds,
        "p50_ms": 1000 * statistics.median(latencies) if latencies else float("nan"),
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] if latencies else float("nan"),
        "mean_ms": 1000 * statistics.fmean(latencies) if latencies else float("nan"),
        "handler_ms": mean_ms("flashdeberta_request_duration_seconds", '{route="/predict"}'),
        "queue_ms": mean_ms("flashdeberta_queue_duration_seconds"),
        "forward_ms": mean_ms("flashdeberta_forward_duration_seconds"),
        "tokens_per_s": delta.get("flashdeberta_tokens_total", 0.0) / args.seconds,
        "mean_batch": delta.get("flashdeberta_batch_size_sum", 0.0) / batches if batches else float("nan"),
        "server_cpu_ms": 1000 * (cpu_after - cpu_before) / len(latencies) if latencies else float("nan"),
        "errors": len(errors),
        "error_sample": errors[:3],
        "profile": profile,
    }


def process_cpu_seconds(pid):
    """User + system CPU time of process `pid` (all its threads) so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def perf_summary(perf, profiler, data):
    """The server's samples over the window: the top symbols and the time per kind of thread (perf report by thread name), or why not."""
    _, err = profiler.communicate()
    if profiler.returncode != 0 or not data.exists():
        return f"perf record failed (exit {profiler.returncode}): {(err or '').strip().splitlines()[-1:]}"
    parts = []
    for sort in ("dso,sym", "comm"):
        out = subprocess.run([perf, "report", "-i", str(data), "--stdio", "--no-children", "-g", "none", "--sort",
                              sort, "--percent-limit", "1"], capture_output=True, text=True)
        parts.append("\n".join(l for l in out.stdout.splitlines() if l.strip() and not l.startswith("#"))[:4000])
    data.unlink(missing_ok=True)
    return "\n\n".join(parts)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cli", default=str(REPO / "build" / "bin" / "flashdeberta"))
    parser.add_argument("--model", default=str(REPO / "models" / "tiny-en-sections"))
    parser.add_argument("--tokenizer", default=None)
    parser.add_argument("--backend", default="eigen")
    parser.add_argument("--dtype", default="fp32")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--concurrency", default="1,8,64")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--texts", type=int, default=2048)
    parser.add_argument("--cli-batch-size", type=int, default=64)
    parser.add_argument("--max-batch-tokens", type=int, default=16384)
    parser.add_argument("--client-processes", type=int, default=0, help="default: one per core, at most C")
    parser.add_argument("--serve-args", default="", help="more options for serve, e.g. '--forward-thread worker'")
    parser.add_argument("--perf", default=None,
                        help="perf's path: profile the server over each row's window (perf record -p), top symbols "
                             "and threads in the report")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    args.concurrency = [int(c) for c in args.concurrency.split(",")]
    lines = texts(args.texts)

    # The CLI runs before and after the server (two runs each, the best kept), so a machine whose load
    # changes during the run does not favour one side.
    cli_texts_per_s = run_cli(args, lines)
    server = Server(args)
    try:
        tokens = sum(len(t) for t in json.loads(server.get("/tokenize", {"inputs": lines[:32]})[1]))
        tokens_per_text = tokens / 32
        rows = [measure(server, lines, c, args) for c in args.concurrency]
    finally:
        status = server.stop()
    cli_texts_per_s = max(cli_texts_per_s, run_cli(args, lines))
    cli_tokens_per_s = cli_texts_per_s * tokens_per_text

    load = os.getloadavg()
    date = datetime.date.today().isoformat()
    gpu = gpu_model() if args.backend == "cuda" else None
    machine = f"{cpu_model()}, {os.cpu_count()} cores" + (f", {gpu}" if gpu else "")
    report = [
        f"# flashdeberta serve under load, {date}",
        "",
        f"- machine: {machine} ({platform.system()} {platform.release()}); load average at the end "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min: other processes share the cores)",
        f"- commit {commit()}; model `{args.model}`; backend {args.backend}, dtype {args.dtype}, threads "
        f"{args.threads or 'all'}; --max-batch-tokens {args.max_batch_tokens}"
        + (f"; serve {args.serve_args}" if args.serve_args else ""),
        f"- texts: {len(lines)} short texts of 6-20 words, {tokens_per_text:.1f} tokens on average; one text per "
        f"request (POST /predict), clients on keep-alive connections on the same machine, {args.seconds:g} s per "
        f"row after a warm-up",
        f"- CLI: `flashdeberta classify --batch-size {args.cli_batch_size}` over the same texts: "
        f"{cli_texts_per_s:.0f} texts/s, {cli_tokens_per_s:.0f} tokens/s (best of four runs, two before and two after "
        f"the server's, load excluded)",
        f"- server exit status after SIGTERM: {status}",
        "",
        "| clients | requests/s | p50 ms | p99 ms | tokens/s | mean batch (sequences) | efficiency vs CLI | errors |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        report.append(f"| {r['concurrency']} | {r['requests_per_s']:.0f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | "
                      f"{r['tokens_per_s']:.0f} | {r['mean_batch']:.1f} | "
                      f"{100 * r['tokens_per_s'] / cli_tokens_per_s:.0f}% | {r['errors']} |")
    report += [
        "",
        "Where a request's time goes (means over the same window; the server's from its /metrics histograms): "
        "the handler runs from the parsed request to its rendered answer (JSON, tokens, queue, forward); the rest "
        "is the HTTP layer and the client (Python's http.client) on either side of it.",
        "",
        "| clients | client mean ms | handler ms | queue ms | forward ms (per batch) | client - handler ms | "
        "server CPU ms per request |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        report.append(f"| {r['concurrency']} | {r['mean_ms']:.3f} | {r['handler_ms']:.3f} | {r['queue_ms']:.3f} | "
                      f"{r['forward_ms']:.3f} | {r['mean_ms'] - r['handler_ms']:.3f} | {r['server_cpu_ms']:.3f} |")
    report.append("")
    for r in rows:
        if r["profile"]:
            report += [f"Server profile at {r['concurrency']} clients (perf, the window's samples):", "", "```",
                       r["profile"], "```", ""]
    text = "\n".join(report)
    print(text)
    for r in rows:
        if r["errors"]:
            print(f"errors at {r['concurrency']} clients, e.g. {r['error_sample']}", file=sys.stderr)
    out = Path(args.out or REPO / "bench" / "results" / f"server-{date}-{platform.node() or 'host'}.md")
    out.write_text(text)
    print(f"written to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()

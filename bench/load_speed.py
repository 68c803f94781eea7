#!/usr/bin/env python3
"""How long loading a checkpoint takes, by the dtype it is stored in: the random deberta-v3-base-shaped
checkpoint (bench/random_checkpoint) in float32, and the same values stored as float16 and bfloat16 (as
DeBERTa-v3's published checkpoints are float16), and the shipped models (models/tiny-en, tiny-en-sections,
float16), each loaded by `flashdeberta bench` (its load_ms: config, checkpoint, weights in the backend's memory,
tokenizer not included), warm page cache.

  python3 bench/load_speed.py [--cli build/bin/flashdeberta] [--random-checkpoint build/bench/random_checkpoint]
      [--threads 2] [--runs 7] [--work /tmp/flashdeberta-load-speed] [--out bench/results/load-<date>-host.md]
      [--shipped tiny-en,tiny-en-sections] [--grouped]

Every checkpoint is loaded once first (the page cache), then --runs times, the checkpoints taking turns run by
run so that a drift of the machine touches all of them alike (--grouped: a checkpoint's runs back to back); each
load is its own process, as a user's is. On a VM whose host takes back the memory the guest frees (free page
reporting), a load that needs more memory than the process before it gets pages the host must fault in again:
on the 2-core VM, taking turns after the float32 load (which lends most of its weights from the file), the
float16 load then took 0.9-1.9 s of kernel time instead of 0.3 s, with the old CLI as with the new, while the
same loads back to back did not (bench/results/load-2026-12-07-host.md). --grouped measures the loader itself.
Prints the median and min-max of load_ms per checkpoint, float16 / float32 and bfloat16 / float32, and the median
peak resident memory of the loading process (its ru_maxrss).

The issue's bar (issue 27): float16 within 1.2x of float32, both under 600 ms on this 2-core machine at 2
threads and under 200 ms on the GPU machine's Xeon at 16; the shipped models under 50 ms here.
"""
import argparse
import datetime
import json
import multiprocessing
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from startup_time import commit_of, machine  # noqa: E402


def stored_as(source, dtype, work):
    """`source` (a float32 checkpoint directory) with every tensor stored as `dtype` ("F16" or "BF16"): the
    values rounded to it (bfloat16: to nearest even), the other files copied. Converted in a process of its own:
    a child forked later inherits this process's peak resident memory as the floor of its ru_maxrss, so the
    measuring process must never hold a whole checkpoint."""
    out = work / f"{source.name}-{dtype.lower()}"
    if not (out / "model.safetensors").exists():
        converter = multiprocessing.get_context("spawn").Process(target=convert, args=(source, dtype, out))
        converter.start()
        converter.join()
        if converter.exitcode != 0:
            sys.exit(f"converting {source} to {dtype} failed (exit {converter.exitcode})")
    return out


def convert(source, dtype, out):
    out.mkdir(parents=True, exist_ok=True)
    for f in source.iterdir():
        if f.name != "model.safetensors":
            shutil.copy(f, out / f.name)
    raw = (source / "model.safetensors").read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + size])
    data = memoryview(raw)[8 + size:]
    tensors, chunks, offset = {}, [], 0
    for name, entry in header.items():
        if name == "__metadata__":
            tensors[name] = entry
            continue
        begin, end = entry["data_offsets"]
        values = np.frombuffer(data[begin:end], dtype=np.float32)
        if dtype == "F16":
            stored = values.astype(np.float16).tobytes()
        else:
            bits = values.view(np.uint32).astype(np.uint64)
            stored = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16).tobytes()
        tensors[name] = {"dtype": dtype, "shape": entry["shape"], "data_offsets": [offset, offset + len(stored)]}
        chunks.append(stored)
        offset += len(stored)
    text = json.dumps(tensors).encode()
    text += b" " * (-len(text) % 8)
    with open(out / "model.safetensors.tmp", "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for chunk in chunks:
            f.write(chunk)
    (out / "model.safetensors.tmp").rename(out / "model.safetensors")


def load_ms(cli, model, threads):
    """load_ms of one `flashdeberta bench` process, and that process's peak resident memory in MB (its ru_maxrss,
    read by waiting for it with os.wait4)."""
    command = [cli, "bench", "--model", str(model), "--threads", str(threads), "--batch", "1", "--seq-len", "8",
               "--repeat", "1", "--json"]
    with tempfile.TemporaryFile() as err:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err)
        out = process.stdout.read()
        process.stdout.close()
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            err.seek(0)
            sys.exit(f"{' '.join(command)} failed: {err.read().decode(errors='replace').strip()}")
    return json.loads(out)["load_ms"], usage.ru_maxrss / 1024.0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cli", default=str(REPO / "build/bin/flashdeberta"))
    parser.add_argument("--random-checkpoint", default=str(REPO / "build/bench/random_checkpoint"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--work", default="/tmp/flashdeberta-load-speed")
    parser.add_argument("--out", default=None)
    parser.add_argument("--shipped", default="tiny-en,tiny-en-sections",
                        help="the shipped models (under models/) to load besides the v3-base checkpoints, comma "
                             "separated; empty for none (a machine the repository reached without them)")
    parser.add_argument("--grouped", action="store_true",
                        help="every run of a checkpoint back to back instead of taking turns (see the notes above)")
    args = parser.parse_args()
    work = Path(args.work)
    base = Path(subprocess.run([args.random_checkpoint, "--root", str(work)], capture_output=True, text=True,
                               check=True).stdout.strip())
    models = {"v3-base float32": base, "v3-base float16": stored_as(base, "F16", work),
              "v3-base bfloat16": stored_as(base, "BF16", work)}
    for name in filter(None, args.shipped.split(",")):
        models[f"{name} (shipped)"] = REPO / "models" / name
    for model in models.values():
        load_ms(args.cli, model, args.threads)
    times = {name: [] for name in models}
    peaks = {name: [] for name in models}

    def measure(name):
        ms, peak = load_ms(args.cli, models[name], args.threads)
        times[name].append(ms)
        peaks[name].append(peak)

    for _ in range(args.runs) if not args.grouped else [0]:
        for name in models:
            for _ in range(args.runs if args.grouped else 1):
                measure(name)

    f32 = statistics.median(times["v3-base float32"])
    lines = [f"# Checkpoint load time by stored dtype ({datetime.date.today()})", "",
             f"Machine: {machine()}. CLI: {args.cli} (commit {commit_of(REPO)}), --threads {args.threads}. "
             f"`flashdeberta bench` load_ms, warm page cache, {args.runs} runs (median, min-max), each its own "
             "process, " + ("a checkpoint's runs back to back" if args.grouped else "the checkpoints taking turns") +
             ".", "", "| checkpoint | load ms | / float32 | peak RSS MB |", "|---|---|---|---|"]
    for name, values in times.items():
        ratio = f"{statistics.median(values) / f32:.2f}" if name.startswith("v3-base") else ""
        lines.append(f"| {name} | {statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f}) | {ratio} | "
                     f"{statistics.median(peaks[name]):.0f} |")
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        Path(args.out).write_text(report)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Per-kernel totals of an Nsight Compute CSV (`ncu --metrics gpu__time_duration.sum --csv --print-units base`),
plain or gzipped, with the program's own output before the CSV header skipped: each kernel's launches, total ms and,
with --layers N, ms per layer (the window's total over N layers). Sorted by total time.

    python3 bench/ncu_kernel_times.py bench/results/training-gpu-2026-12-07-h100-3/ncu-backward.csv.gz --layers 7
"""
import argparse
import collections
import csv
import gzip
import io
import sys


def kernel_times(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        lines = f.read().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        raise SystemExit(f"{path}: no ncu CSV header (a line starting with \"ID\")")
    totals = collections.OrderedDict()
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        if row["Metric Name"] != "gpu__time_duration.sum":
            continue
        entry = totals.setdefault(row["Kernel Name"], [0, 0.0])
        entry[0] += 1
        entry[1] += float(row["Metric Value"].replace(",", "")) / 1e6  # ns -> ms
    return totals


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("csv")
    p.add_argument("--layers", type=float, help="layers the window covers: adds a ms-per-layer column")
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args(argv)
    totals = kernel_times(args.csv)
    print("| kernel | launches | ms |" + (" ms per layer |" if args.layers else ""))
    print("|---|---|---|" + ("---|" if args.layers else ""))
    for name, (count, ms) in sorted(totals.items(), key=lambda kv: -kv[1][1])[: args.top]:
        per_layer = f" {ms / args.layers:.3f} |" if args.layers else ""
        print(f"| {name[:100]} | {count} | {ms:.3f} |{per_layer}")
    print(f"\n{sum(c for c, _ in totals.values())} launches, {sum(m for _, m in totals.values()):.3f} ms in all")


if __name__ == "__main__":
    sys.exit(main())

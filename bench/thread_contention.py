#!/usr/bin/env python3
"""Default threads on a machine that other processes keep busy: `flashdeberta classify` with its default
thread count (every core) against `--threads 1`, alone and while one busy process per core competes, under
the OpenMP wait policies that matter.

  python3 bench/thread_contention.py [--cli build/bin/flashdeberta] [--model models/tiny-en-sections]
      [--texts 256] [--runs 5] [--policies bounded,libgomp,passive] [--out bench/results/threads-<date>-host.md]

Policies (each a set of environment variables for the CLI's process):
  bounded     none set: the CLI's own default (apps/cli/openmp_wait.cpp: GOMP_SPINCOUNT bounded)
  libgomp     GOMP_SPINCOUNT=300000: libgomp's default, what the CLI ran with before it set a bound
  passive     OMP_WAIT_POLICY=passive: workers sleep at once
For each policy, load (quiet / busy) and thread setting (default; --threads 1; --threads N, every core fixed, as
the default was before it followed the cores other processes leave free), the wall time of the whole
command (load, tokenization and forwards of --texts texts read from stdin) over --runs runs, the settings
taking turns run by run so that drifts of the machine touch all of them alike. The busy load is one Python
process per core spinning in a loop, started before and stopped after the busy runs.

The issue's bar (issue 27): busy, the default (bounded) is no slower than --threads 1; quiet, no slower than
before (every core, libgomp's spin). Beside the medians, the runs' paired ratios (default over --threads 1 of
the same round, which ran back to back) with a 90% bootstrap interval of their median: a bar met beyond the
noise has the interval's upper end at or below 1.
"""
import argparse
import datetime
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from startup_time import commit_of, machine  # noqa: E402

POLICIES = {"bounded": {}, "libgomp": {"GOMP_SPINCOUNT": "300000"}, "passive": {"OMP_WAIT_POLICY": "passive"}}
WORDS = ("the a package library tool for with support python data server fast small web program files header "
         "game network science desktop documents compression images sound").split()


# Every core, fixed: what the default was before it followed the free cores (eigen/free_cores.hpp).
ALL = str(os.cpu_count())


def texts(count):
    rng = random.Random(1)
    return "".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40))) + "\n" for _ in range(count))


def clean_environment(policy):
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_NUM_THREADS")}
    env.update(POLICIES[policy])
    return env


def timed(cli, model, threads, policy, stdin):
    command = [cli, "classify", "--model", model] + ([] if threads == "default" else ["--threads", threads])
    start = time.perf_counter()
    done = subprocess.run(command, input=stdin, capture_output=True, text=True, env=clean_environment(policy))
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()}")
    return elapsed * 1000.0


def busy_processes(count):
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def paired_ratio(default, one, draws=2000):
    """The median of the runs' default / --threads 1 ratios and a 90% bootstrap interval of it."""
    ratios = [d / o for d, o in zip(default, one)]
    rng = random.Random(7)
    medians = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(draws))
    return statistics.median(ratios), medians[int(0.05 * draws)], medians[int(0.95 * draws) - 1]


def measure(args, stdin, load):
    settings = [(policy, threads) for policy in args.policies for threads in ("default", "1", ALL)]
    times = {s: [] for s in settings}
    spinners = busy_processes(os.cpu_count()) if load == "busy" else []
    try:
        time.sleep(0.5 if spinners else 0.0)
        for _ in range(args.runs):
            for policy, threads in settings:
                times[(policy, threads)].append(timed(args.cli, args.model, threads, policy, stdin))
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cli", default=str(REPO / "build/bin/flashdeberta"))
    parser.add_argument("--model", default=str(REPO / "models/tiny-en-sections"))
    parser.add_argument("--texts", type=int, default=256)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--policies", default=",".join(POLICIES),
                        help="the wait policies to measure, comma separated (default: all)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    args.policies = [p for p in args.policies.split(",") if p]
    unknown = [p for p in args.policies if p not in POLICIES]
    if unknown:
        sys.exit(f"--policies: {', '.join(unknown)} not among {', '.join(POLICIES)}")
    stdin = texts(args.texts)
    timed(args.cli, args.model, "default", "bounded", stdin)  # the page cache
    results = {load: measure(args, stdin, load) for load in ("quiet", "busy")}

    lines = [f"# Default threads under contention ({datetime.date.today()})", "",
             f"Machine: {machine()}. CLI: {args.cli} (commit {commit_of(REPO)}). Model: {args.model}; "
             f"`classify` of {args.texts} texts from stdin, wall time of the command in ms over {args.runs} runs "
             "(median, min-max). Busy: one spinning Python process per core.", "",
             f"| load | policy | default threads | --threads 1 | --threads {ALL} | default / 1 | default / {ALL} | "
             "paired default / 1 (90% interval) |",
             "|---|---|---|---|---|---|---|---|"]

    def cell(t):
        return f"{statistics.median(t):.0f} ({min(t):.0f}-{max(t):.0f})"

    for load, times in results.items():
        for policy in args.policies:
            d, one, every = times[(policy, "default")], times[(policy, "1")], times[(policy, ALL)]
            ratio, low, high = paired_ratio(d, one)
            lines.append(f"| {load} | {policy} | {cell(d)} | {cell(one)} | {cell(every)} | "
                         f"{statistics.median(d) / statistics.median(one):.2f} | "
                         f"{statistics.median(d) / statistics.median(every):.2f} | "
                         f"{ratio:.3f} ({low:.3f}-{high:.3f}) |")
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        Path(args.out).write_text(report)


if __name__ == "__main__":
    main()

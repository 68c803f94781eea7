#!/usr/bin/env python3
"""What a process pays to start: `flashdeberta --version`, `flashdeberta --help` and `import flashdeberta`.

  python3 bench/startup_time.py [--build after=build] [--build before=/path/to/old/build] [--runs 30]
      [--serve-model models/tiny-en] [--out bench/results/startup-<date>-host.md]

Each --build LABEL=DIR names a build tree with bin/flashdeberta and python/flashdeberta (default: this=build);
its CMakeCache.txt, where there is one, gives the commit and the Python the package was built for. Every
command runs --runs times per build in its own process, the builds taking turns run by run so that a machine
busy with other work slows all of them alike, after --warmup runs that fill the page cache. For each command and
build: the median, min and max wall time of the process (spawn to exit, as a shell sees it), the median of its
CPU time (user + system, which a busy machine inflates less than the wall time), the median of its peak RSS over
3 more runs under /usr/bin/time, and which CUDA libraries it loaded (the dynamic loader's LD_DEBUG=files list,
one more run). `/bin/true`, `python3 -c pass` and `import numpy` (which the package imports) are timed the same
way: what any process and the interpreter cost before any of ours, and how much the machine's other work
inflates them. With --serve-model, also what an idle `flashdeberta serve` of that model holds (VmRSS once
/health answers).

The issue's bar (issue 25), for a build with CUDA support on a machine without a GPU: `flashdeberta --version`
under 50 ms and `import flashdeberta` under 300 ms.

Prints a Markdown report (date, machine, commits, settings, table) and writes it to --out.
"""
import argparse
import datetime
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CUDA_LIBRARIES = ("libcudart", "libcublasLt", "libcublas", "libcuda.so")


def machine():
    model = platform.processor() or "unknown"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        model = re.search(r"^Model name:\s*(.+)$", out, re.M).group(1).strip()
    except (OSError, subprocess.CalledProcessError, AttributeError):
        pass
    gpu = "no NVIDIA device" if not Path("/dev/nvidia0").exists() else "an NVIDIA device"
    return f"{model}, {os.cpu_count()} cores, {gpu}"


def commit_of(path):
    def git(*args):
        return subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True).stdout.strip()

    head = git("rev-parse", "--short", "HEAD")
    if not head:
        return "unknown"
    return head + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


class Build:
    def __init__(self, label, directory):
        self.label = label
        self.directory = Path(directory).resolve()
        self.cli = self.directory / "bin" / "flashdeberta"
        self.python_path = self.directory / "python"
        for needed in (self.cli, self.python_path / "flashdeberta"):
            if not needed.exists():
                sys.exit(f"startup_time.py: --build {label}={directory}: {needed} does not exist")
        # The source tree the build was configured from (its commit) and the interpreter it built the package for.
        cache_file = self.directory / "CMakeCache.txt"
        cache = cache_file.read_text() if cache_file.exists() else ""
        source = re.search(r"^CMAKE_HOME_DIRECTORY:INTERNAL=(.+)$", cache, re.M)
        self.commit = commit_of(source.group(1)) if source else "unknown"
        python = re.search(r"^Python_EXECUTABLE:FILEPATH=(.+)$", cache, re.M)
        self.python = python.group(1) if python else sys.executable

    def environment(self):
        env = dict(os.environ)
        env["PYTHONPATH"] = str(self.python_path)
        return env


def commands(build):
    """(name, argv, ours) of what each build runs; `ours` is False for the reference rows, alike in every build."""
    return [
        ("flashdeberta --version", [str(build.cli), "--version"], True),
        ("flashdeberta --help", [str(build.cli), "--help"], True),
        ("python3 -c 'import flashdeberta'", [build.python, "-c", "import flashdeberta"], True),
        ("/bin/true (any process)", ["/bin/true"], False),
        ("python3 -c pass", [build.python, "-c", "pass"], False),
        ("python3 -c 'import numpy'", [build.python, "-c", "import numpy"], False),
    ]


def run_once(argv, env):
    """Wall seconds from spawn to exit and CPU seconds (user + system) of `argv`."""
    start = time.perf_counter()
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    error = process.stderr.read().decode(errors="replace")
    process.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"startup_time.py: {' '.join(argv)} exited with {os.waitstatus_to_exitcode(status)}: {error.strip()}")
    return seconds, usage.ru_utime + usage.ru_stime


def peak_rss(argv, env):
    """The peak RSS of `argv` in MiB, as /usr/bin/time reports it. Not ru_maxrss of a child spawned from here:
    Python spawns with vfork, and exec records the borrowed memory's high-water mark, this script's size."""
    out = subprocess.run(["/usr/bin/time", "-f", "maxrss_kib=%M", *argv], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True).stderr
    return int(re.search(r"maxrss_kib=(\d+)\s*$", out).group(1)) / 1024.0


def cuda_libraries_loaded(argv, env):
    """The CUDA libraries the dynamic loader opened for `argv` (LD_DEBUG=files), or 'none'."""
    traced = dict(env, LD_DEBUG="files")
    out = subprocess.run(argv, env=traced, capture_output=True, text=True).stderr
    loaded = set()
    for line in out.splitlines():
        match = re.search(r"file=(\S+)\s+\[\d+\];\s+(?:generating link map|needed by)", line)
        if match and any(name in match.group(1) for name in CUDA_LIBRARIES):
            loaded.add(Path(match.group(1)).name)
    return ", ".join(sorted(loaded)) or "none"


def idle_server_rss(build, model, settle):
    """VmRSS in MiB of `flashdeberta serve --model MODEL` once /health answers and `settle` seconds passed."""
    argv = [str(build.cli), "serve", "--model", str(model), "--port", "0", "--threads", "1"]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stderr.readline()
        match = re.search(r"on http://([^:]+):(\d+)", line)
        if not match:
            sys.exit(f"startup_time.py: {' '.join(argv)} did not start: {line.strip()}")
        url = f"http://{match.group(1)}:{match.group(2)}/health"
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        time.sleep(settle)
        status = Path(f"/proc/{process.pid}/status").read_text()
        return int(re.search(r"^VmRSS:\s+(\d+) kB", status, re.M).group(1)) / 1024.0
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        process.stderr.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", action="append", default=[], metavar="LABEL=DIR")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--serve-model", type=Path, help="also the RSS of an idle `flashdeberta serve` of this model")
    parser.add_argument("--serve-runs", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    builds = []
    for spec in args.build or ["this=build"]:
        label, _, directory = spec.partition("=")
        if not directory:
            sys.exit(f"startup_time.py: --build {spec}: expected LABEL=DIR")
        builds.append(Build(label, directory))

    # Each (build, command) once; the reference rows for the first build only.
    jobs = [(build, name, argv, ours) for i, build in enumerate(builds) for name, argv, ours in commands(build)
            if ours or i == 0]

    load_before = os.getloadavg()[0]
    times = {(b.label, n): [] for b, n, _, _ in jobs}
    cpu = {(b.label, n): [] for b, n, _, _ in jobs}
    rss = {(b.label, n): [] for b, n, _, _ in jobs}
    for round_index in range(args.warmup + args.runs):
        for build, name, argv, _ in jobs:
            seconds, cpu_seconds = run_once(argv, build.environment())
            if round_index >= args.warmup:
                times[(build.label, name)].append(seconds)
                cpu[(build.label, name)].append(cpu_seconds)
    for build, name, argv, _ in jobs:
        rss[(build.label, name)] = [peak_rss(argv, build.environment()) for _ in range(3)]
    load_after = os.getloadavg()[0]

    lines = [
        f"# Process start-up, {datetime.date.today().isoformat()}",
        "",
        f"- machine: {machine()}; load average {load_before:.2f} before, {load_after:.2f} after (other work shares it)",
        f"- Python: the builds' own ({', '.join(sorted({b.python for b in builds}))}); {args.runs} runs per row "
        f"after {args.warmup} warm-up runs, the builds taking turns run by run",
    ]
    for build in builds:
        lines.append(f"- {build.label}: `{build.directory}` (commit {build.commit})")
    lines += [
        "- time: the process's wall time from spawn to exit; CPU: its user + system time, which other work on the "
        "machine does not inflate as it does the wall time; peak RSS: /usr/bin/time's %M, median of 3 runs; "
        "CUDA libraries: what "
        "the dynamic loader opened (LD_DEBUG=files)",
        "",
        "| command | build | median ms | min ms | max ms | CPU ms (median) | peak RSS MiB "
        "| CUDA libraries loaded |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for build, name, argv, ours in jobs:
        key = (build.label, name)
        t = [1000.0 * s for s in times[key]]
        label = build.label if ours else "(reference)"
        lines.append(f"| `{name}` | {label} | {statistics.median(t):.1f} | {min(t):.1f} | {max(t):.1f} | "
                     f"{1000.0 * statistics.median(cpu[key]):.1f} | {statistics.median(rss[key]):.0f} | "
                     f"{cuda_libraries_loaded(argv, build.environment())} |")
    lines += ["", "The issue's bar (medians of wall time): `flashdeberta --version` under 50 ms, `import flashdeberta` "
              "under 300 ms."]
    for build in builds:
        version = 1000.0 * statistics.median(times[(build.label, "flashdeberta --version")])
        imported = 1000.0 * statistics.median(times[(build.label, "python3 -c 'import flashdeberta'")])
        lines.append(f"- {build.label}: --version {version:.1f} ms ({'met' if version < 50 else 'not met'}), import "
                     f"{imported:.1f} ms ({'met' if imported < 300 else 'not met'})")
    if args.serve_model:
        lines += ["", f"Idle server: `flashdeberta serve --model {args.serve_model} --threads 1`, its VmRSS once "
                  f"/health answers and 1 s passed, median of {args.serve_runs} starts", "",
                  "| build | VmRSS MiB (median) | min | max |", "|---|---|---|---|"]
        for build in builds:
            held = [idle_server_rss(build, args.serve_model, 1.0) for _ in range(args.serve_runs)]
            lines.append(f"| {build.label} | {statistics.median(held):.0f} | {min(held):.0f} | {max(held):.0f} |")
    report = "\n".join(lines) + "\n"
    print(report, end="")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report)


if __name__ == "__main__":
    main()

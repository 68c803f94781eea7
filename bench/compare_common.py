"""Helpers shared by bench/compare_cpu.py and bench/compare_gliner.py (standard library only).

The machine and commit lines of a report, process affinity, peak memory read from /proc (VmHWM), our CLI run
with its peak sampled while it runs, safetensors and raw float32 readers, and Markdown table formatting.

Peak memory: VmHWM in /proc/PID/status is the peak resident set of the process's own address space since its
exec. ru_maxrss (getrusage, what `flashdeberta bench --json` reports as peak_bytes) is not: Linux keeps the
largest RSS a process had across fork and exec, so a child of a large Python harness inherits the harness's
high-water mark (issue 15 item 4: `bench` reported 3.9 GB for a 0.94 GB process). A child's VmHWM has to be read
while it is alive: run_sampled() polls it every few milliseconds; the peak of a forward pass is reached in the
warm-up run already, so the last value read before exit is the peak.
"""
import datetime
import json
import os
import platform
import re
import shutil
import struct
import subprocess
import sys
import threading
import time
from array import array
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


class BenchError(RuntimeError):
    """A failure with a message meant for the person running the benchmark (printed without a traceback)."""


def today():
    return datetime.date.today().isoformat()


def lscpu():
    """{field: value} from lscpu, {} where it is missing."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    fields = {}
    for line in out.splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            fields[k.strip()] = v.strip()
    return fields


def machine():
    """One line: CPU model, sockets x cores x threads, the SIMD features that matter here, memory."""
    f = lscpu()
    model = f.get("Model name") or platform.processor() or "unknown CPU"
    cpus = f.get("CPU(s)", str(os.cpu_count()))
    topo = []
    for key, name in (("Socket(s)", "sockets"), ("Core(s) per socket", "cores per socket"),
                      ("Thread(s) per core", "threads per core")):
        if key in f:
            topo.append(f"{f[key]} {name}")
    flags = set(f.get("Flags", "").split())
    simd = [x for x in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8") if x in flags]
    mem = ""
    try:
        with open("/proc/meminfo") as fh:
            kib = int(re.search(r"MemTotal:\s+(\d+)", fh.read()).group(1))
        mem = f", {kib / 2**20:.0f} GiB RAM"
    except (OSError, AttributeError):
        pass
    line = f"{model}, {cpus} CPUs ({', '.join(topo)})" if topo else f"{model}, {cpus} CPUs"
    return line + (f"; {' '.join(simd)}" if simd else "") + mem + f"; Linux {platform.release()}"


def commit(explicit=None):
    """--commit, else $FLASHDEBERTA_COMMIT, else git's HEAD (with -dirty), else 'unknown'."""
    if explicit:
        return explicit
    if os.environ.get("FLASHDEBERTA_COMMIT"):
        return os.environ["FLASHDEBERTA_COMMIT"]
    try:
        def git(*a):
            return subprocess.run(["git", "-C", str(REPO), *a], capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        sha = git("rev-parse", "--short", "HEAD")
        if sha:
            return sha + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"


def first_cores(n):
    """The first n CPUs this process may run on (sorted ids): the affinity every system of a row gets."""
    allowed = sorted(os.sched_getaffinity(0))
    if n > len(allowed):
        raise BenchError(f"{n} threads asked for, but this process may run on {len(allowed)} CPUs only "
                         f"({allowed}); give fewer threads (--threads)")
    return allowed[:n]


def pinned(cores):
    """preexec_fn for subprocess: the child runs on these cores only (as `taskset -c`)."""
    cores = list(cores)
    return lambda: os.sched_setaffinity(0, cores)


def thread_env(n, base=None):
    """The environment of a child timed at n threads: OpenMP (ours, torch) and MKL limited to n."""
    env = dict(os.environ if base is None else base)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[var] = str(n)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def vmhwm_kib(pid="self"):
    """VmHWM of a process in KiB (None when it cannot be read: the process is gone, or no /proc)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            m = re.search(r"^VmHWM:\s+(\d+)\s+kB", fh.read(), re.M)
        return int(m.group(1)) if m else None
    except OSError:
        return None


def run_sampled(cmd, timeout, cores=None, env=None, stdin=None, interval=0.005):
    """Runs cmd, polling its VmHWM until it exits. Returns (returncode, stdout, stderr, peak_kib, seconds).
    A child still running after `timeout` seconds is killed (returncode None)."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=stdin, env=env,
                            preexec_fn=pinned(cores) if cores else None)
    chunks = {"out": [], "err": []}

    def drain(stream, key):
        for block in iter(lambda: stream.read(65536), b""):
            chunks[key].append(block)

    readers = [threading.Thread(target=drain, args=(proc.stdout, "out"), daemon=True),
               threading.Thread(target=drain, args=(proc.stderr, "err"), daemon=True)]
    for t in readers:
        t.start()
    peak = None
    rc = None
    while True:
        v = vmhwm_kib(proc.pid)
        if v is not None:
            peak = v if peak is None else max(peak, v)
        rc = proc.poll()
        if rc is not None:
            break
        if time.monotonic() - start > timeout:
            proc.kill()
            proc.wait()
            rc = None
            break
        time.sleep(interval)
    for t in readers:
        t.join(timeout=10)
    out = b"".join(chunks["out"]).decode("utf-8", "replace")
    err = b"".join(chunks["err"]).decode("utf-8", "replace")
    return rc, out, err, peak, time.monotonic() - start


def check_cli(cli):
    """The CLI path, checked: exists, runs, prints its help. Fails early with what to do otherwise."""
    path = shutil.which(cli) if os.sep not in cli else cli
    if not path or not os.path.isfile(path) or not os.access(path, os.X_OK):
        raise BenchError(f"our CLI {cli!r} is not an executable file; build it (cmake --build build --target "
                         f"flashdeberta_cli) or pass --cli PATH (on the GPU machine: the bundle's bin/flashdeberta)")
    r = subprocess.run([path, "--help"], capture_output=True, text=True)
    if r.returncode != 0:
        raise BenchError(f"{path} --help failed (exit {r.returncode}): {(r.stderr or r.stdout).strip()[:400]}; "
                         "a bundled binary needs LD_LIBRARY_PATH=BUNDLE/lib (tests/cuda/run_on_device.sh sets it)")
    return os.path.abspath(path)


def python_modules_missing(modules, python=sys.executable, env=None):
    """The modules of `modules` that `python` cannot import, each with the error, checked in a child process
    (so that this process stays small and free of torch)."""
    code = ("import importlib, json, sys\nbad = {}\nfor m in sys.argv[1:]:\n    try:\n        importlib.import_module(m)\n"
            "    except Exception as e:\n        bad[m] = '%s: %s' % (type(e).__name__, e)\nprint(json.dumps(bad))\n")
    r = subprocess.run([python, "-c", code, *modules], capture_output=True, text=True, env=env, timeout=300)
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {m: f"the check failed: {r.stderr.strip()[-300:]}" for m in modules}


def read_safetensors_f32(path, name=None):
    """(shape, array('f')) of one float32 tensor of a safetensors file (the first one when name is None)."""
    with open(path, "rb") as fh:
        n = struct.unpack("<Q", fh.read(8))[0]
        header = json.loads(fh.read(n))
        header.pop("__metadata__", None)
        if name is None:
            name = sorted(header)[0]
        if name not in header:
            raise BenchError(f"{path} holds no tensor {name!r} (it holds {sorted(header)})")
        info = header[name]
        if info["dtype"] != "F32":
            raise BenchError(f"{path}: {name} is {info['dtype']}, float32 expected")
        begin, end = info["data_offsets"]
        fh.seek(8 + n + begin)
        data = array("f")
        data.frombytes(fh.read(end - begin))
    if sys.byteorder != "little":
        data.byteswap()
    return info["shape"], data


def read_f32(path):
    """array('f') of a raw little-endian float32 file."""
    data = array("f")
    with open(path, "rb") as fh:
        data.frombytes(fh.read())
    if sys.byteorder != "little":
        data.byteswap()
    return data


def max_abs_diff(a, b):
    if len(a) != len(b):
        raise BenchError(f"cannot compare {len(a)} values with {len(b)}")
    return max((abs(x - y) for x, y in zip(a, b)), default=0.0)


def max_abs(a):
    return max((abs(x) for x in a), default=0.0)


def fmt(v, digits=1, unit=""):
    """A number for a table cell; '-' for None; a string is kept (an error or 'skipped' note)."""
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    if abs(v) >= 100:
        return f"{v:.0f}{unit}"
    return f"{v:.{digits}f}{unit}"


def ratio(num, den):
    """num / den as '1.23x', '-' when either is missing."""
    if not isinstance(num, (int, float)) or not isinstance(den, (int, float)) or den <= 0:
        return "-"
    return f"{num / den:.2f}x"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out


def write_report(text, out_path):
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    Path(out_path).write_text(text, encoding="utf-8")
    sys.stdout.write(text)
    sys.stdout.flush()
    sys.stderr.write(f"wrote {out_path}\n")


def short_error(text, limit=240):
    """The last meaningful line of an error output, cut for a table cell (no '|', which would break it)."""
    lines = [l.strip() for l in (text or "").strip().splitlines() if l.strip()]
    msg = lines[-1] if lines else "no output"
    msg = msg.replace("|", "/")
    return msg if len(msg) <= limit else msg[:limit - 3] + "..."

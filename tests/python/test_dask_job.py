"""flashdeberta.dask_job on LocalClusters of worker processes, over a generated corpus of 10,000 JSON lines:
the same lines as one process running the pipeline, also when a worker is SIGKILLed mid-job; resuming;
one pipeline per worker process; the command line with a LocalCluster and with a scheduler address; the
one-line errors. Uses the small classify fixture (tests/fixtures/pipelines/classify, tokenizers/spm).
"""
import json
import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import PIPELINES, SPM

distributed = pytest.importorskip("distributed", reason="flashdeberta.dask_job needs dask.distributed")

LINES = 10_000
BATCH = 25  # divides the shard sizes used below, so the job's batches are the single-process run's
MODEL = str(PIPELINES / "classify")
WORDS = ("the package library tool network game data file system server client small editor levels support "
         "bindings Zürich naïve São café 東京 😀 don't x86_64 C++ 3.14").split()


@pytest.fixture(scope="module")
def dask_job(fd):
    try:
        from flashdeberta import dask_job
    except ImportError as e:
        pytest.fail(f"flashdeberta.dask_job is not importable next to the package ({e}): is it built/installed?",
                    pytrace=False)
    return dask_job


def write_corpus(path, count, seed=11):
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for i in range(count):
            words = rng.randint(0, 60) if i % 997 else 0  # an empty text now and then
            record = {"id": f"doc-{i:05d}", "text": " ".join(rng.choice(WORDS) for _ in range(words)),
                      "extra": {"n": i}}
            f.write(json.dumps(record, ensure_ascii=i % 2 == 0) + "\n")
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus") / "corpus.jsonl", LINES)


@pytest.fixture(scope="module")
def reference(fd, corpus):
    """What one process running the pipeline over the corpus gives, as the job's output lines (parsed)."""
    with open(corpus, encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    pipe = fd.pipeline("text-classification", model=MODEL, tokenizer=str(SPM), threads=1, batch_size=BATCH)
    out = []
    for start in range(0, len(records), BATCH):
        batch = records[start:start + BATCH]
        for k, (record, result) in enumerate(zip(batch, pipe([r["text"] for r in batch]), strict=True)):
            out.append({"line": start + k, "id": record["id"], "result": result})
    # Through JSON as the job writes it (numpy scalars become numbers; floats round-trip exactly).
    return json.loads(json.dumps(out, default=lambda v: v.tolist()))


def local_cluster(workers=2):
    return distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                                    silence_logs=logging.ERROR)


@pytest.fixture(scope="module")
def cluster():
    with local_cluster() as c, distributed.Client(c) as client:
        yield c, client


def read_output(outdir):
    """(parsed lines of every part in shard order, manifest)."""
    with open(outdir / "_SUCCESS", encoding="utf-8") as f:
        manifest = json.load(f)
    lines = []
    for name in manifest["parts"]:
        with open(outdir / name, encoding="utf-8") as f:
            lines += [json.loads(line) for line in f]
    return lines, manifest


def check_output(outdir, reference, shards):
    lines, manifest = read_output(outdir)
    assert manifest["shards"] == shards and manifest["lines"] == LINES
    assert sorted(p.name for p in outdir.glob("part-*.jsonl")) == manifest["parts"]
    assert [x["line"] for x in lines] == list(range(LINES)), "lines lost, duplicated or out of order"
    assert [p.name for p in outdir.iterdir() if p.name.startswith(".")] == [], "temporary files left"
    for got, want in zip(lines, reference, strict=True):
        assert got == want, f"line {want['line']}: {got} != {want}"


def job_kwargs(**overrides):
    kwargs = dict(task="text-classification", model=MODEL, tokenizer=str(SPM), id_field="id", batch_size=BATCH,
                  shard_lines=1000, progress=False)
    kwargs.update(overrides)
    return kwargs


def test_job_equals_single_process_and_resumes(dask_job, cluster, corpus, reference, tmp_path):
    _, client = cluster
    outdir = tmp_path / "out"
    result = dask_job.run_job(str(corpus), str(outdir), client=client, **job_kwargs())
    assert (result["shards"], result["lines"], result["computed"], result["skipped"]) == (10, LINES, 10, 0)
    check_output(outdir, reference, 10)
    # One pipeline per worker process, not per task (10 tasks ran on 2 workers).
    loads = client.run(dask_job.pipeline_loads)
    assert len(loads) == 2 and all(n <= 1 for n in loads.values()) and sum(loads.values()) >= 1, loads

    # Resume: a lost part (and manifest) is recomputed alone; finished parts are kept as they are.
    kept = (outdir / "part-00004.jsonl").stat().st_mtime_ns
    (outdir / "part-00003.jsonl").unlink()
    (outdir / "_SUCCESS").unlink()
    result = dask_job.run_job(str(corpus), str(outdir), client=client, **job_kwargs())
    assert (result["computed"], result["skipped"]) == (1, 9)
    assert (outdir / "part-00004.jsonl").stat().st_mtime_ns == kept
    check_output(outdir, reference, 10)
    assert client.run(dask_job.pipeline_loads) == loads, "the cached pipelines were loaded again"

    # A complete job is not run again; other settings on the same OUTDIR are refused.
    assert dask_job.run_job(str(corpus), str(outdir), client=client, **job_kwargs())["computed"] == 0
    with pytest.raises(ValueError, match="another job .*batch_size"):
        dask_job.run_job(str(corpus), str(outdir), client=client, **job_kwargs(batch_size=50))


def test_worker_killed_mid_job(dask_job, corpus, reference, tmp_path):
    outdir = tmp_path / "out"
    shards = LINES // 250
    with local_cluster() as c, distributed.Client(c) as client:
        pids = client.run(os.getpid)
        assert len(pids) == 2
        victim = sorted(pids.values())[0]
        killed_at = []

        def killer():
            # SIGKILL one worker once a few parts exist: both workers are then busy with shards.
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                done = len(list(outdir.glob("part-*.jsonl"))) if outdir.exists() else 0
                if done >= 3:
                    os.kill(victim, signal.SIGKILL)
                    killed_at.append(done)
                    return
                time.sleep(0.005)

        thread = threading.Thread(target=killer)
        thread.start()
        try:
            result = dask_job.run_job(str(corpus), str(outdir), client=client, **job_kwargs(shard_lines=250))
        finally:
            thread.join()
        assert killed_at and killed_at[0] < shards, f"the worker was not killed mid-job ({killed_at})"
        assert result["computed"] == shards
        # The killed process is gone from the cluster (its nanny starts another in its place, in its own time).
        assert victim not in client.run(os.getpid).values()
    check_output(outdir, reference, shards)


def run_module(*args, timeout=180):
    return subprocess.run([sys.executable, "-m", "flashdeberta.dask_job", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout)


def cli_args(corpus, outdir, *where):
    return ["--task", "text-classification", "--model", MODEL, "--tokenizer", SPM, "--id-field", "id",
            "--batch-size", BATCH, "--shard-lines", 100, *where, corpus, outdir]


def one_line_error(r, *needles):
    assert r.returncode == 1, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("flashdeberta: error: "), r.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_command_line_with_a_local_cluster_and_a_scheduler(dask_job, cluster, reference, tmp_path):
    small = write_corpus(tmp_path / "small.jsonl", 300)  # the corpus's first 300 lines
    c, _ = cluster
    for name, where in (("local", ["--local-workers", 2]), ("scheduler", ["--scheduler", c.scheduler_address])):
        outdir = tmp_path / name
        r = run_module(*cli_args(small, outdir, *where))
        assert r.returncode == 0, r.stderr
        assert r.stdout == ""  # no progress bar when stdout is not a terminal
        lines, manifest = read_output(outdir)
        assert (manifest["shards"], manifest["lines"]) == (3, 300)
        assert lines == reference[:300]


def test_progress_bar_on_a_terminal(dask_job, cluster, tmp_path):
    # Dask's console progress bar (distributed.progress) when stdout is a terminal.
    import pty
    small = write_corpus(tmp_path / "small.jsonl", 200)
    c, _ = cluster
    primary, secondary = pty.openpty()
    args = cli_args(small, tmp_path / "out", "--scheduler", c.scheduler_address)
    proc = subprocess.Popen([sys.executable, "-m", "flashdeberta.dask_job", *map(str, args)], stdout=secondary,
                            stderr=subprocess.PIPE)
    os.close(secondary)
    shown = b""
    while True:
        try:
            chunk = os.read(primary, 4096)
        except OSError:  # EIO: the program closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    os.close(primary)
    assert proc.wait(timeout=120) == 0, proc.stderr.read()
    assert b"100% Completed" in shown, shown


def test_command_line_errors(dask_job, cluster, tmp_path):
    c, client = cluster
    one_line_error(run_module(*cli_args(tmp_path / "missing.jsonl", tmp_path / "o1", "--local-workers", 1)),
                   "missing.jsonl", "no such file")
    bad = tmp_path / "bad.jsonl"
    write_corpus(bad, 12)
    lines = bad.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[6] = '{"id": "x", "text": unquoted}\n'
    bad.write_text("".join(lines), encoding="utf-8")
    # A LocalCluster of the command's own: the worker's warnings must not reach stderr.
    one_line_error(run_module(*cli_args(bad, tmp_path / "o2", "--local-workers", 1)), "bad.jsonl line 7", "not JSON")
    lines[6] = '{"id": "x", "body": "no text field"}\n'
    bad.write_text("".join(lines), encoding="utf-8")
    one_line_error(run_module(*cli_args(bad, tmp_path / "o3", "--scheduler", c.scheduler_address)),
                   "bad.jsonl line 7", "'text'")
    lines[6] = '{"text": "fine"}\n'
    bad.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(ValueError, match="bad.jsonl line 7: no id field 'id'"):
        dask_job.run_job(str(bad), str(tmp_path / "o4"), client=client, **job_kwargs())
    # A start with a wrong --model fails before any part is written; the corrected command then runs.
    small = write_corpus(tmp_path / "small.jsonl", 20)
    wrong = cli_args(small, tmp_path / "o6", "--local-workers", 1)
    wrong[wrong.index("--model") + 1] = tmp_path / "no-such-model"
    one_line_error(run_module(*wrong), "no-such-model")
    assert (tmp_path / "o6" / "_job.json").exists() and not list((tmp_path / "o6").glob("part-*.jsonl"))
    assert run_module(*cli_args(small, tmp_path / "o6", "--local-workers", 1)).returncode == 0
    r = run_module("--task", "text-classification", "--model", MODEL, bad, tmp_path / "o5")
    assert r.returncode == 2 and r.stderr.startswith("flashdeberta: error: one of the arguments"), r.stderr


def test_index_shards(dask_job, tmp_path):
    path = tmp_path / "f.jsonl"
    for content, shard_lines, want in (
        (b"", 2, []),
        (b"a\nb\nc\n", 2, [(0, 4, 0, 2), (4, 6, 2, 1)]),
        (b"a\nb\nc", 2, [(0, 4, 0, 2), (4, 5, 2, 1)]),  # no newline at the end
        (b"a\nb\nc\nd\n", 2, [(0, 4, 0, 2), (4, 8, 2, 2)]),
        (b"a\r\nbb\r\n", 1, [(0, 3, 0, 1), (3, 7, 1, 1)]),
    ):
        path.write_bytes(content)
        got = [(s.start, s.end, s.first_line, s.lines) for s in dask_job.index_shards(str(path), shard_lines)]
        assert got == want, content
    # Shard boundaries falling across the reading chunks.
    path.write_bytes(b"".join(b"x" * (i % 7) + b"\n" for i in range(1000)))
    small = dask_job.index_shards(str(path), 33, chunk_bytes=64)
    assert small == dask_job.index_shards(str(path), 33)
    assert sum(s.lines for s in small) == 1000 and all(s.lines == 33 for s in small[:-1])

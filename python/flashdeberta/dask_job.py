"""Run a flashdeberta pipeline over a JSON-lines corpus, sharded across a Dask cluster.

    python3 -m flashdeberta.dask_job --task text-classification --model DIR [--tokenizer DIR]
        [--text-field text] [--id-field ID] [--batch-size 32] [--shard-lines 1000] [--threads 1]
        (--scheduler tcp://host:8786 | --local-workers N) INPUT.jsonl OUTDIR

The client only indexes INPUT (the byte offset of every --shard-lines-th line); each task reads its own
byte range of INPUT, so INPUT and OUTDIR must be paths every worker can reach (a shared file system), and
no text goes through the scheduler. Each worker process loads the pipeline once and keeps it for every
task it runs. Shard k is written as OUTDIR/part-0000k.jsonl, one line per input line in input order:

    {"line": <0-based line number in INPUT>, "<ID>": <the record's ID field, with --id-field>, "result": ...}

where result is what flashdeberta.pipeline returns for that text (question-answering reads the record's
"question" and "context" fields). Parts are written to a temporary file and renamed, so a part exists only
when complete: a re-run skips finished parts (the job is resumable) and a task that runs again after its
worker died writes the same part again, never a second copy. OUTDIR/_job.json holds what the parts depend
on (a re-run with other settings or a changed INPUT is refused); OUTDIR/_SUCCESS, written last, holds the
shard and line counts. Line numbers in error messages count from 1, as editors do.

run_job() is the same job as a function; it takes a Client, a scheduler address or a LocalCluster size.
Needs dask.distributed (importing this module without it raises ImportError).
"""
import argparse
import dataclasses
import json
import logging
import os
import sys
import threading
import time
import uuid

import distributed
import numpy as np

TASKS = ("fill-mask", "text-classification", "sentiment-analysis", "token-classification", "ner",
         "question-answering")
MANIFEST = "_SUCCESS"
JOB_FILE = "_job.json"
_TEMP = ".tmp-"  # temporary files are ".<name>.tmp-<unique>": hidden, and never matched by part-*.jsonl


def part_name(index):
    return f"part-{index:05d}.jsonl"


@dataclasses.dataclass(frozen=True)
class Shard:
    index: int
    start: int  # byte range [start, end) of INPUT
    end: int
    first_line: int  # 0-based number of its first line
    lines: int


@dataclasses.dataclass(frozen=True)
class JobSpec:
    """Everything a task needs; small, so that it travels with every task."""
    input: str
    outdir: str
    task: str
    model: str
    tokenizer: str = None
    text_field: str = "text"
    id_field: str = None
    question_field: str = "question"
    context_field: str = "context"
    batch_size: int = 32
    threads: int = 1
    device: str = "cpu"
    dtype: str = "float32"
    attention: str = "flash"
    max_tokens: int = 65536

    def pipeline_args(self):
        """The flashdeberta.pipeline arguments: the key of the per-process pipeline cache."""
        return (("task", self.task), ("model", self.model), ("tokenizer", self.tokenizer), ("device", self.device),
                ("dtype", self.dtype), ("attention", self.attention), ("threads", self.threads),
                ("batch_size", self.batch_size), ("max_tokens", self.max_tokens))


# --- worker side ---------------------------------------------------------------------------------------

_pipelines = {}
_pipelines_lock = threading.Lock()  # one load per process even when a worker runs several threads
_loads = 0


def _pipeline(args):
    global _loads
    with _pipelines_lock:
        pipe = _pipelines.get(args)
        if pipe is None:
            import flashdeberta
            kwargs = dict(args)
            pipe = flashdeberta.pipeline(kwargs.pop("task"), **kwargs)
            _pipelines[args] = pipe
            _loads += 1
        return pipe


def pipeline_loads():
    """How many pipelines this process has loaded (client.run(pipeline_loads) asks every worker)."""
    return _loads


def _read_shard(spec, shard):
    """[(0-based line number, pipeline input, id)] of the shard's lines, checked as they are parsed."""
    with open(spec.input, "rb") as f:
        f.seek(shard.start)
        data = f.read(shard.end - shard.start)
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if len(lines) != shard.lines:
        raise RuntimeError(f"{spec.input}: shard {shard.index} holds {len(lines)} lines where the index found "
                           f"{shard.lines}; was the file changed during the job?")
    out = []
    for k, raw in enumerate(lines):
        n = shard.first_line + k
        where = f"{spec.input} line {n + 1}"
        try:
            record = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise ValueError(f"{where}: not valid UTF-8 ({e.reason} at byte {e.start})") from None
        except json.JSONDecodeError as e:
            raise ValueError(f"{where}: not JSON ({e.msg} at column {e.colno})") from None
        if not isinstance(record, dict):
            raise ValueError(f"{where}: a JSON {type(record).__name__} where an object is expected")
        if spec.task == "question-answering":
            fields = (spec.question_field, spec.context_field)
        else:
            fields = (spec.text_field,)
        for name in fields:
            if not isinstance(record.get(name), str):
                found = "no such field" if name not in record else f"a {type(record[name]).__name__}"
                raise ValueError(f"{where}: field {name!r} must be a string ({found})")
        if spec.id_field is not None and spec.id_field not in record:
            raise ValueError(f"{where}: no id field {spec.id_field!r}")
        if spec.task == "question-answering":
            value = {"question": record[spec.question_field], "context": record[spec.context_field]}
        else:
            value = record[spec.text_field]
        out.append((n, value, record.get(spec.id_field) if spec.id_field is not None else None))
    return out


def _run_batch(pipe, task, inputs):
    """One pipeline result per input. The call forms differ (HF's): fill-mask returns the bare result for a
    list of one text, and question-answering takes one {"question", "context"} at a time."""
    if task == "question-answering":
        return [pipe(x) for x in inputs]
    if task == "fill-mask" and len(inputs) == 1:
        return [pipe(inputs[0])]
    results = pipe(list(inputs))
    if len(results) != len(inputs):
        raise RuntimeError(f"the pipeline returned {len(results)} results for {len(inputs)} texts")
    return results


def _plain(value):
    """json.dumps fallback for the numpy scalars and arrays a pipeline may return (HF's ner scores are)."""
    if isinstance(value, (np.generic, np.ndarray)):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _write_atomically(path, lines):
    temp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}{_TEMP}{os.getpid()}-{uuid.uuid4().hex}")
    try:
        with open(temp, "w", encoding="utf-8") as f:
            f.writelines(lines)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise


def run_shard(spec, shard):
    """The task: runs the pipeline on one shard and writes its part; returns (index, lines)."""
    records = _read_shard(spec, shard)
    pipe = _pipeline(spec.pipeline_args())
    out = []
    for b in range(0, len(records), spec.batch_size):
        batch = records[b:b + spec.batch_size]
        try:
            results = _run_batch(pipe, spec.task, [x for _, x, _ in batch])
        except ValueError as e:
            raise ValueError(f"{spec.input} lines {batch[0][0] + 1}-{batch[-1][0] + 1}: {e}") from None
        for (n, _, ident), result in zip(batch, results):
            record = {"line": n}
            if spec.id_field is not None:
                record[spec.id_field] = ident
            record["result"] = result
            out.append(json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=_plain) + "\n")
    _write_atomically(os.path.join(spec.outdir, part_name(shard.index)), out)
    return shard.index, len(out)


# --- client side ---------------------------------------------------------------------------------------

def index_shards(path, shard_lines, chunk_bytes=1 << 24):
    """Shards of `shard_lines` lines of `path` (the last one shorter), found by scanning for newlines."""
    boundaries = [0]
    lines = size = 0
    last = b"\n"
    with open(path, "rb") as f:
        while data := f.read(chunk_bytes):
            newlines = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == ord("\n"))
            # Newline number g (0-based, whole file) ends a shard when (g + 1) % shard_lines == 0.
            first = (-lines - 1) % shard_lines
            boundaries.extend(size + int(p) + 1 for p in newlines[first::shard_lines])
            lines += len(newlines)
            size += len(data)
            last = data[-1:]
    if last != b"\n":
        lines += 1  # a last line without its newline
    if boundaries[-1] != size:
        boundaries.append(size)
    return [Shard(i, boundaries[i], boundaries[i + 1], i * shard_lines, min(shard_lines, lines - i * shard_lines))
            for i in range(len(boundaries) - 1)]


def _job_record(spec, shard_lines):
    """What the parts in OUTDIR depend on; a re-run must agree on all of it to reuse them."""
    stat = os.stat(spec.input)
    record = dataclasses.asdict(spec)
    del record["outdir"], record["threads"]  # neither changes a part
    record.update(shard_lines=shard_lines, input_bytes=stat.st_size, input_mtime_ns=stat.st_mtime_ns)
    return record


def _check_job_file(outdir, record):
    """Refuses OUTDIR when its parts come from another job. A record without parts (a start that failed before
    any shard was written: a wrong --model) depends on nothing, and the new job's replaces it."""
    path = os.path.join(outdir, JOB_FILE)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            previous = json.load(f)
        differ = sorted(k for k in set(record) | set(previous) if record.get(k) != previous.get(k))
        has_parts = any(name.startswith("part-") and name.endswith(".jsonl") for name in os.listdir(outdir))
        if differ and has_parts:
            raise ValueError(f"{outdir} holds parts of another job (it differs in {', '.join(differ)}; "
                             f"see {JOB_FILE}): use another OUTDIR, or empty this one")
        return
    _write_atomically(path, [json.dumps(record, indent=1) + "\n"])


def _connect(client, scheduler, local_workers):
    """(client, things to close): the given Client, one connected to `scheduler`, or a LocalCluster's."""
    if client is not None:
        return client, []
    if scheduler is not None:
        client = distributed.Client(scheduler)
        return client, [client]
    # Worker warnings (a failed task's traceback) would bury the one-line error the CLI prints.
    cluster = distributed.LocalCluster(n_workers=local_workers, threads_per_worker=1, processes=True,
                                      dashboard_address=":0", silence_logs=logging.ERROR)
    client = distributed.Client(cluster)
    return client, [client, cluster]


def run_job(input, outdir, *, task, model, tokenizer=None, text_field="text", id_field=None,
            question_field="question", context_field="context", batch_size=32, shard_lines=1000, threads=1,
            device="cpu", dtype="float32", attention="flash", max_tokens=65536, client=None, scheduler=None,
            local_workers=None, progress=None):
    """Runs the job (module docstring) and returns the manifest written to OUTDIR/_SUCCESS, plus
    "computed" and "skipped" (shard counts of this run) and "seconds". progress: Dask's progress bar
    (distributed.progress, on stdout); None shows it when stdout is a terminal."""
    if sum(x is not None for x in (client, scheduler, local_workers)) != 1:
        raise ValueError("give exactly one of client, scheduler and local_workers")
    if local_workers is not None and local_workers < 1:
        raise ValueError(f"local_workers must be at least 1, not {local_workers}")
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r} (one of {', '.join(TASKS)})")
    if batch_size < 1 or shard_lines < 1:
        raise ValueError(f"batch_size and shard_lines must be at least 1 (got {batch_size}, {shard_lines})")
    if id_field in ("line", "result"):
        raise ValueError(f"id field {id_field!r} would collide with the output's own {id_field!r}")
    if not os.path.isfile(input):
        raise FileNotFoundError(f"{input}: no such file" if not os.path.exists(input) else f"{input}: not a file")
    input, outdir = os.path.abspath(input), os.path.abspath(outdir)
    spec = JobSpec(input=input, outdir=outdir, task=task, model=os.path.abspath(model),
                   tokenizer=os.path.abspath(tokenizer) if tokenizer else None, text_field=text_field,
                   id_field=id_field, question_field=question_field, context_field=context_field,
                   batch_size=batch_size, threads=threads, device=device, dtype=dtype, attention=attention,
                   max_tokens=max_tokens)
    started = time.perf_counter()
    os.makedirs(outdir, exist_ok=True)
    _check_job_file(outdir, _job_record(spec, shard_lines))
    shards = index_shards(input, shard_lines)
    todo = [s for s in shards if not os.path.exists(os.path.join(outdir, part_name(s.index)))]
    if os.path.exists(os.path.join(outdir, MANIFEST)) and todo:
        os.unlink(os.path.join(outdir, MANIFEST))  # parts were removed since: the job is not complete
    if todo:
        client, to_close = _connect(client, scheduler, local_workers)
        try:
            _run_shards(client, spec, todo, sys.stdout.isatty() if progress is None else progress)
        finally:
            for thing in to_close:
                thing.close()
    _remove_temporaries(outdir)
    manifest = {"shards": len(shards), "lines": sum(s.lines for s in shards), "input": input, "task": task,
                "model": spec.model, "parts": [part_name(s.index) for s in shards]}
    _write_atomically(os.path.join(outdir, MANIFEST), [json.dumps(manifest, indent=1) + "\n"])
    return {**manifest, "computed": len(todo), "skipped": len(shards) - len(todo),
            "seconds": time.perf_counter() - started}


def _run_shards(client, spec, shards, show_progress):
    token = uuid.uuid4().hex[:8]
    shards_by_index = {s.index: s for s in shards}
    futures = [client.submit(run_shard, spec, s, key=f"flashdeberta-shard-{s.index:05d}-{token}", pure=False)
               for s in shards]
    try:
        if show_progress:
            distributed.progress(futures)
        for future in distributed.as_completed(futures):
            index, lines = future.result()  # re-raises a task's error here, with its message
            if lines != shards_by_index[index].lines:  # run_shard checks this; a mismatch is a bug
                raise RuntimeError(f"shard {index} wrote {lines} lines for {shards_by_index[index].lines}")
    finally:
        client.cancel(futures)  # after an error, the shards still queued; a no-op otherwise


def _remove_temporaries(outdir):
    # Left by tasks whose worker died mid-write; every task has finished by now.
    for name in os.listdir(outdir):
        if name.startswith(".") and _TEMP in name:
            os.unlink(os.path.join(outdir, name))


# --- command line --------------------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit 2, as the flashdeberta program's usage errors
        sys.stderr.write(f"flashdeberta: error: {message} (see --help)\n")
        sys.exit(2)


def _parser():
    p = _Parser(prog="python3 -m flashdeberta.dask_job", description=__doc__.split("\n\n")[0])
    p.add_argument("--task", required=True, choices=TASKS)
    p.add_argument("--model", required=True, help="checkpoint directory (on every worker)")
    p.add_argument("--tokenizer", help="tokenizer directory (default: the model's)")
    p.add_argument("--text-field", default="text", help="the field holding the text (default: text)")
    p.add_argument("--id-field", help="a field copied into every output line")
    p.add_argument("--question-field", default="question", help="question-answering: (default: question)")
    p.add_argument("--context-field", default="context", help="question-answering: (default: context)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--shard-lines", type=int, default=1000)
    p.add_argument("--threads", type=int, default=1, help="threads per model (default 1: one worker per core)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--attention", default="flash")
    p.add_argument("--max-tokens", type=int, default=65536)
    bar = p.add_mutually_exclusive_group()
    bar.add_argument("--progress", dest="progress", action="store_true", default=None)
    bar.add_argument("--no-progress", dest="progress", action="store_false")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--scheduler", help="address of a running scheduler, e.g. tcp://host:8786")
    where.add_argument("--local-workers", type=int, help="start a LocalCluster of N worker processes")
    p.add_argument("input", help="JSON-lines corpus, one object per line")
    p.add_argument("outdir")
    return p


def main(argv=None):
    args = _parser().parse_args(argv)
    try:
        result = run_job(args.input, args.outdir, task=args.task, model=args.model, tokenizer=args.tokenizer,
                         text_field=args.text_field, id_field=args.id_field, question_field=args.question_field,
                         context_field=args.context_field, batch_size=args.batch_size,
                         shard_lines=args.shard_lines, threads=args.threads, device=args.device, dtype=args.dtype,
                         attention=args.attention, max_tokens=args.max_tokens, scheduler=args.scheduler,
                         local_workers=args.local_workers, progress=args.progress)
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # one line, as the flashdeberta program
        message = " ".join(str(e).split()) or type(e).__name__
        sys.stderr.write(f"flashdeberta: error: {message}\n")
        return 1
    sys.stderr.write(f"flashdeberta: {result['lines']} lines in {result['shards']} shards ({result['skipped']} "
                     f"already done) in {result['seconds']:.1f} s -> {args.outdir}\n")
    return 0


if __name__ == "__main__":
    # Through the package's module, not this __main__ copy: Dask must pickle run_shard by reference, so that
    # workers import flashdeberta.dask_job and keep one pipeline cache per process.
    from flashdeberta.dask_job import main as _main
    sys.exit(_main())

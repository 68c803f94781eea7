"""Python threads sharing one model, one tokenizer and one pipeline (docs/thread-safety.md: loaded models and
tokenizers are immutable; forward and encode allocate per call). Eight threads must give bit-identical
results to a single-threaded run; the wall time of two threads against one is printed, not asserted (it
shows whether the extension releases the GIL, and depends on what else runs on the machine)."""
import os
import random
import threading
import time

import numpy as np
import pytest

from conftest import MODELS, PIPELINES, SPM

THREADS = 8
ROUNDS = 3
WORDS = ("the a package library tool for with and network game data file system Python server client fast small "
         "Zürich naïve 東京 😀 [MASK] editor levels support bindings").split()


def make_texts(count, seed):
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 40))) for _ in range(count)]


def run_in_threads(work, count=THREADS):
    """Runs work(thread_index) in `count` threads released together; returns their results, re-raising the
    first exception a thread met."""
    barrier = threading.Barrier(count)
    results, errors = [None] * count, []

    def body(i):
        try:
            barrier.wait()
            results[i] = work(i)
        except BaseException as e:  # noqa: B902 - handed to the main thread
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


@pytest.fixture(scope="module")
def batches():
    texts = make_texts(96, seed=7)
    sizes = [1, 3, 8, 16, 5, 32, 2, 29]  # sums to 96: batches of every shape
    out, start = [], 0
    for size in sizes:
        out.append(texts[start:start + size])
        start += size
    return out


def test_shared_tokenizer_and_model_are_bit_identical(fd, batches):
    tok = fd.AutoTokenizer.from_pretrained(str(SPM))
    model = fd.AutoModelForSequenceClassification.from_pretrained(str(PIPELINES / "classify"))

    def compute(batch):
        enc = tok(batch, padding=True, return_offsets_mapping=True, return_tensors="np")
        out = model(enc["input_ids"], attention_mask=enc["attention_mask"])
        return enc, out["logits"]

    reference = [compute(b) for b in batches]

    def work(i):
        # Each thread walks the batches in its own order, several times.
        order = list(range(len(batches)))
        random.Random(i).shuffle(order)
        return [(k, compute(batches[k])) for _ in range(ROUNDS) for k in order]

    for results in run_in_threads(work):
        for k, (enc, logits) in results:
            want_enc, want_logits = reference[k]
            for key in want_enc:
                assert np.array_equal(enc[key], want_enc[key]), f"batch {k}: {key} differs"
            assert logits.dtype == want_logits.dtype and np.array_equal(logits, want_logits), \
                f"batch {k}: logits differ by {np.abs(logits - want_logits).max()}"


def test_shared_pipeline_is_bit_identical(fd, batches):
    pipe = fd.pipeline("token-classification", model=str(PIPELINES / "ner"), tokenizer=str(SPM), batch_size=4)
    reference = [pipe(b) for b in batches]

    def work(i):
        order = list(range(len(batches)))[i % len(batches):] + list(range(len(batches)))[:i % len(batches)]
        return [(k, pipe(batches[k])) for k in order]

    for results in run_in_threads(work):
        for k, got in results:
            assert got == reference[k], f"batch {k} differs"  # floats compared exactly


def test_two_threads_against_one_soft(fd, capsys):
    # One OpenMP thread per model call, so that any gain comes from the two Python threads running at once.
    model = fd.AutoModelForSequenceClassification.from_pretrained(str(MODELS / "tiny-en-sections"), threads=1)
    rng = np.random.default_rng(0)
    batch = rng.integers(5, model.config["vocab_size"], size=(8, 64), dtype=np.int64)
    reference = model(batch)["logits"]
    start = time.perf_counter()
    model(batch)
    one_call = time.perf_counter() - start
    calls = max(4, min(100, int(1.0 / max(one_call, 1e-4))))  # about 1 s in one thread
    calls -= calls % 2

    def work(count):
        return [model(batch)["logits"] for _ in range(count)]

    start = time.perf_counter()
    single = work(calls)
    t1 = time.perf_counter() - start
    start = time.perf_counter()
    pair = run_in_threads(lambda i: work(calls // 2), count=2)
    t2 = time.perf_counter() - start
    for out in single + [x for r in pair for x in r]:
        assert np.array_equal(out, reference)
    with capsys.disabled():
        print(f"\n[soft] {calls} calls of 8 x 64 tokens on models/tiny-en-sections (threads=1): one Python thread "
              f"{t1:.2f} s, two threads {t2:.2f} s ({t1 / t2:.2f}x){'' if t2 < t1 else ' - NOT faster'}; load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (a GIL held in the call, or cores busy elsewhere)")

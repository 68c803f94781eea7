"""Arguments that once crashed, hung or failed with a message that named nothing (pybind11's "incompatible
function arguments" dump): each is now a ValueError saying what is wrong, and the objects stay usable.
The crashes and hangs run in a child process, so that a regression fails the test instead of the suite."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import FIXTURES, HEADS, MODELS, SPM, copy_checkpoint

GLINER = FIXTURES / "gliner" / "span_markerV0"
SEQCLS = HEADS / "seqcls_v3"  # vocab 100, 3 labels
CLASSIFY = FIXTURES / "pipelines" / "classify"  # 3 labels, the spm tokenizer
OK_IDS = np.array([[1, 5, 6, 2]], dtype=np.int64)


def run_child(code, timeout=60):
    """Runs `code` in a fresh interpreter with this one's sys.path; its (exit status, output), or a failure
    when it hangs."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    try:
        r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                           timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the child hung (more than {timeout} s):\n{code}")
    return r.returncode, r.stdout + r.stderr


@pytest.fixture(scope="module")
def gliner(fd):
    return fd.GLiNER.from_pretrained(str(GLINER), threads=1)


# --- threads and max_tokens: a million threads was a segmentation fault -----------------------------------

def test_threads_out_of_range_is_refused_in_a_child(fd):
    status, out = run_child(f"""
        import flashdeberta as fd
        for load in (lambda: fd.GLiNER.from_pretrained({str(GLINER)!r}, threads=10**6),
                     lambda: fd.AutoModel.from_pretrained({str(SEQCLS)!r}, threads=10**6),
                     lambda: fd.pipeline("fill-mask", model={str(MODELS / "tiny-en")!r}, threads=10**6),
                     lambda: fd._native.Model({str(SEQCLS)!r}, "base", "eigen", "float32", "flash", 10**6, 100)):
            try:
                load()
                print("loaded")
            except ValueError as e:
                print("refused:", e)
        """)
    assert status == 0, out
    assert out.count("refused:") == 4 and "loaded" not in out, out
    assert "threads 1000000 is outside [0, 4096]" in out or "threads must be at most 4096" in out, out


@pytest.mark.parametrize("kwargs, needle", [
    ({"threads": -1}, "threads must be at least 0"), ({"threads": 5000}, "threads must be at most 4096"),
    ({"threads": "2"}, "threads must be an int"), ({"threads": 2.5}, "threads must be an int"),
    ({"threads": 2**40}, "threads must be at most 4096"), ({"max_tokens": 0}, "max_tokens must be at least 1"),
    ({"max_tokens": -1}, "max_tokens must be at least 1"), ({"max_tokens": 2**40}, "max_tokens must be at most"),
])
def test_threads_and_max_tokens_bounds(fd, kwargs, needle):
    for load in (lambda: fd.GLiNER.from_pretrained(str(GLINER), **kwargs),
                 lambda: fd.AutoModel.from_pretrained(str(SEQCLS), **kwargs),
                 lambda: fd.pipeline("text-classification", model=str(CLASSIFY), tokenizer=str(SPM), **kwargs)):
        with pytest.raises(ValueError, match=needle):
            load()


# --- text that is not valid Unicode: pybind11's dump of the signature before ---------------------------

def test_lone_surrogates_name_the_argument(fd, gliner):
    with pytest.raises(ValueError, match=r"text is not valid Unicode text.*index 4"):
        gliner.predict_entities("Ada \ud800 Lovelace", ["person"])
    with pytest.raises(ValueError, match=r"labels\[1\] is not valid Unicode"):
        gliner.predict_entities("Ada Lovelace", ["person", "\udfff"])
    with pytest.raises(ValueError, match=r"texts\[1\] is not valid Unicode"):
        gliner.batch_predict_entities(["Ada", "\ud800"], ["person"])
    tokenizer = fd.AutoTokenizer.from_pretrained(str(MODELS / "tiny-en"))
    with pytest.raises(ValueError, match=r"text\[1\] is not valid Unicode"):
        tokenizer(["a", "\ud800"])
    with pytest.raises(ValueError, match="text_pair is not valid Unicode"):
        tokenizer("a", "\ud800")
    with pytest.raises(ValueError, match="text is not valid Unicode"):
        tokenizer.encode("\ud800")
    with pytest.raises(ValueError, match="text must be a str"):
        tokenizer.encode(None)
    with pytest.raises(ValueError, match="tokens is not valid Unicode"):
        tokenizer.convert_tokens_to_ids(["\ud800"])
    fill = fd.pipeline("fill-mask", model=str(MODELS / "tiny-en"), threads=1)
    with pytest.raises(ValueError, match="inputs is not valid Unicode"):
        fill("\ud800 [MASK]")
    classify = fd.pipeline("text-classification", model=str(CLASSIFY), tokenizer=str(SPM), threads=1)
    with pytest.raises(ValueError, match="inputs is not valid Unicode"):
        classify("\ud800")
    with pytest.raises(ValueError, match=r"inputs\['text_pair'\] is not valid Unicode"):
        classify({"text": "a", "text_pair": "\ud800"})
    zero_shot = fd.pipeline("zero-shot-classification", model=str(FIXTURES / "pairs" / "zero_shot"),
                            tokenizer=str(SPM), threads=1)
    with pytest.raises(ValueError, match=r"candidate_labels\[0\] is not valid Unicode"):
        zero_shot("text", ["\ud800"])
    with pytest.raises(ValueError, match="hypothesis_template is not valid Unicode"):
        zero_shot("text", ["a"], hypothesis_template="\ud800 {}")
    rerank = fd.pipeline("rerank", model=str(FIXTURES / "pairs" / "rerank"), tokenizer=str(SPM), threads=1)
    with pytest.raises(ValueError, match="query is not valid Unicode"):
        rerank("\ud800", ["a"])
    with pytest.raises(ValueError, match=r"passages\[0\] is not valid Unicode"):
        rerank("q", ["\ud800"])
    # Valid non-ASCII text still goes through, and the objects still work.
    assert gliner.predict_entities("Ada Lovelace à Londres", ["person"]) is not None
    assert tokenizer.encode("naïve") == tokenizer("naïve")["input_ids"]


# --- counts: floats and strings were truncated or parsed, huge ints a pybind11 dump --------------------

def test_counts_are_integers(fd, gliner):
    with pytest.raises(ValueError, match="batch_size must be an int"):
        gliner.batch_predict_entities(["a"], ["person"], batch_size=2.5)
    with pytest.raises(ValueError, match="threshold must be a number"):
        gliner.predict_entities("Ada", ["person"], threshold="0.5")
    with pytest.raises(ValueError, match=r"window_overlap .* is outside \[0, 63\]"):
        gliner.predict_entities("Ada", ["person"], long_text="windows", window_overlap=10**30)
    assert gliner.batch_predict_entities(["Ada Lovelace"], ["person"], batch_size=10**30) == \
        [gliner.predict_entities("Ada Lovelace", ["person"])]
    fill = fd.pipeline("fill-mask", model=str(MODELS / "tiny-en"), threads=1)
    with pytest.raises(ValueError, match="top_k must be an int"):
        fill("Paris is the [MASK] of France.", top_k="2")
    classify = fd.pipeline("text-classification", model=str(CLASSIFY), tokenizer=str(SPM), threads=1)
    assert len(classify("hello", top_k=10**30)) == 3  # every label, as a top_k past them
    with pytest.raises(ValueError, match="top_k must be an int"):
        classify("hello", top_k=1.5)
    rerank = fd.pipeline("rerank", model=str(FIXTURES / "pairs" / "rerank"), tokenizer=str(SPM), threads=1)
    assert [r["index"] for r in rerank("q", ["a", "b"], top_n=10**30)] == \
        [r["index"] for r in rerank("q", ["a", "b"])]
    assert rerank("q", ["a"], max_length=10**30) == rerank("q", ["a"], max_length=64)
    with pytest.raises(ValueError, match="top_n must be an int"):
        rerank("q", ["a"], top_n=1.5)
    tokenizer = fd.AutoTokenizer.from_pretrained(str(MODELS / "tiny-en"))
    assert tokenizer("hello", max_length=10**30, truncation=True)["input_ids"] == tokenizer("hello")["input_ids"]
    with pytest.raises(ValueError, match="max_length must be at most"):
        tokenizer("hello", max_length=2**62, padding="max_length")  # was "vector::_M_fill_insert"
    with pytest.raises(ValueError, match="max_length must be an int"):
        tokenizer("hello", max_length=5.5, truncation=True)
    with pytest.raises(ValueError, match="max_length -1 is negative"):
        tokenizer("hello", max_length=-1)
    with pytest.raises(ValueError, match="token ids must be integers"):
        tokenizer.decode([1.5])  # was decoded as 1
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tokenizer.decode([2**64])
    assert tokenizer.decode(np.array([1, 2])) == tokenizer.decode([1, 2])
    assert tokenizer.convert_ids_to_tokens(np.int64(1)) == tokenizer.convert_ids_to_tokens(1)


# --- id2label: num_labels beside id2label ----------------------------------------------------------------

def test_id2label_follows_id2label_over_num_labels(fd, tmp_path):
    # HF (and the C++ loader) take the labels' number from id2label; a num_labels key beside it used to give
    # an empty mapping (0), or a loop of a billion entries (10**9) for a model with 3 logits.
    for num_labels in (0, 10**9):
        d = copy_checkpoint(SEQCLS, tmp_path / f"num_labels_{num_labels}",
                            lambda c: c.update(num_labels=num_labels))
        model = fd.AutoModelForSequenceClassification.from_pretrained(str(d), threads=1)
        assert model.id2label == {0: "negative", 1: "neutral", 2: "positive"}
        assert model(OK_IDS)["logits"].shape == (1, 3)


# --- os.fork after work on several threads: the child hung in GNU OpenMP ---------------------------------

def test_fork_after_parallel_work_is_refused_not_hung(fd):
    status, out = run_child(f"""
        import os
        import numpy as np
        import flashdeberta as fd
        ids = np.ones((4, 64), np.int64)
        model = fd.AutoModel.from_pretrained({str(SEQCLS)!r}, threads=2)
        model(ids)
        pid = os.fork()
        if pid == 0:
            try:
                model(ids)
                os._exit(3)
            except ValueError as e:
                ok = "forked" in str(e) and "spawn" in str(e)
            one = fd.AutoModel.from_pretrained({str(SEQCLS)!r}, threads=1)  # one thread still runs
            os._exit(0 if ok and one(ids)["last_hidden_state"].shape == (4, 64, 32) else 4)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
        print("parent", model(ids)["last_hidden_state"].shape)
        """, timeout=120)
    assert status == 0, out
    assert "child 0" in out and "parent (4, 64, 32)" in out, out


def test_fork_before_any_parallel_work_runs(fd):
    status, out = run_child(f"""
        import os
        import numpy as np
        import flashdeberta as fd
        pid = os.fork()
        if pid == 0:
            model = fd.AutoModel.from_pretrained({str(SEQCLS)!r}, threads=2)
            os._exit(0 if model(np.ones((4, 64), np.int64))["last_hidden_state"].shape == (4, 64, 32) else 4)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
        """, timeout=120)
    assert status == 0 and "child 0" in out, out


# --- inputs refused on their shape before any copy -------------------------------------------------------

def test_oversized_views_are_refused_on_their_shape(fd):
    model = fd.AutoModel.from_pretrained(str(SEQCLS), threads=1, max_tokens=64)
    huge = np.lib.stride_tricks.as_strided(np.ones(1, np.int64), (2**20, 2**20), (0, 0))  # 8 TiB as int64
    with pytest.raises(ValueError, match="input_ids holds more than max_tokens 64 positions"):
        model(huge)  # was "input_ids: cannot be read as int64 values" after numpy failed to allocate it
    with pytest.raises(ValueError, match="input_ids holds more than max_tokens 64 positions"):
        model(np.broadcast_to(np.ones(1, np.uint8), (1000, 1000)))
    with pytest.raises(ValueError, match="attention_mask holds more than max_tokens 64 positions"):
        model(OK_IDS, attention_mask=np.broadcast_to(np.ones(1, np.int32), (10**6, 10**6)))
    assert model(np.broadcast_to(OK_IDS, (16, 4)))["last_hidden_state"].shape == (16, 4, 32)


# --- values refused as what they are -----------------------------------------------------------------------

def test_bool_arrays_and_uint64_values_are_refused_as_they_are(fd):
    model = fd.AutoModel.from_pretrained(str(SEQCLS), threads=1)
    with pytest.raises(ValueError, match="input_ids has dtype bool; an integer dtype is expected"):
        model(OK_IDS.astype(bool))
    with pytest.raises(ValueError, match="attention_mask has dtype bool; an integer dtype is expected"):
        model(OK_IDS, attention_mask=np.ones(OK_IDS.shape, dtype=bool))
    with pytest.raises(ValueError, match="token_type_ids has dtype bool"):
        model(OK_IDS, token_type_ids=np.zeros(OK_IDS.shape, dtype=bool))
    big = OK_IDS.astype(np.uint64)
    big[0, 3] = 2**64 - 1  # was "input_ids[0][3] = -1 is negative"
    with pytest.raises(ValueError, match=r"input_ids\[0\]\[3\] = 18446744073709551615 is more than "
                                         r"9223372036854775807, the largest value an int64 holds"):
        model(big)
    assert model(OK_IDS.astype(np.uint64))["last_hidden_state"].shape == (1, 4, 32)


def test_labels_that_are_not_str_are_named(fd, gliner):
    with pytest.raises(ValueError, match=r"labels\[1\] must be a str, not bytes b'person'"):
        gliner.predict_entities("Ada Lovelace", ["place", b"person"])  # was "labels must be a list of str, not list"
    classifier = fd.pipeline("zero-shot-classification", model=str(FIXTURES / "pairs" / "zero_shot"),
                             tokenizer=str(SPM), threads=1)
    with pytest.raises(ValueError, match=r"candidate_labels\[0\] must be a str, not bytes b'x'"):
        classifier("a text", candidate_labels=[b"x"])
    # A long value is quoted by its first 64 characters and its size.
    with pytest.raises(ValueError, match=r"sequences\[1\] must be a str, not bytes b'x{62}\.\.\. \(1003 characters\)"):
        classifier(["a", b"x" * 1000], candidate_labels=["x"])

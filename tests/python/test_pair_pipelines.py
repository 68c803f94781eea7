"""flashdeberta.pipeline("zero-shot-classification"), ("text-classification") with text pairs and ("rerank")
against HF 5.17 (tests/fixtures/pairs/*/expected.json, written by make_pair_fixtures.py): every case, scores
within 1e-5 (the C++ CLI is within 1.2e-6 of these fixtures), labels and order exactly, and HF's structure
for each way of calling.
"""
import math

import pytest

from conftest import FIXTURES, SPM, copy_checkpoint, read_json

PAIRS = FIXTURES / "pairs"
SCORE_TOLERANCE = 1e-5


def fixture(name):
    return read_json(PAIRS / name / "expected.json")


def make_pipeline(fd, task, name, **kwargs):
    return fd.pipeline(task, model=str(PAIRS / name), tokenizer=str(SPM), **kwargs)


def assert_close(got, want, where):
    assert isinstance(got, float), f"{where}: {type(got).__name__} {got!r}"
    assert abs(got - want) <= SCORE_TOLERANCE, f"{where}: {got} vs HF {want} (diff {abs(got - want):.3g})"


def assert_zero_shot(got, want, where):
    assert isinstance(got, dict) and set(got) == {"sequence", "labels", "scores"}, f"{where}: {got!r}"
    assert got["sequence"] == want["sequence"], where
    assert got["labels"] == want["labels"], f"{where}: labels {got['labels']}, HF {want['labels']}"
    assert len(got["scores"]) == len(want["scores"]), where
    for k, (g, w) in enumerate(zip(got["scores"], want["scores"])):
        assert_close(g, w, f"{where}.scores[{k}]")


# --- zero-shot-classification ---------------------------------------------------------------------------

def test_zero_shot_every_case_as_hf_calls_it(fd):
    pipe = make_pipeline(fd, "zero-shot-classification", "zero_shot")
    for case in fixture("zero_shot")["inputs"]:
        kwargs = dict(case["input"])
        got = pipe(kwargs.pop("sequences"), **kwargs)  # candidate_labels as HF got them: a list or a str
        want = case["output"]
        if isinstance(want, list):
            assert isinstance(got, list) and len(got) == len(want), f"{case['input']}: {got!r}"
            for i, (g, w) in enumerate(zip(got, want)):
                assert_zero_shot(g, w, f"{case['input']}[{i}]")
        else:
            assert_zero_shot(got, want, str(case["input"]))


def test_zero_shot_positional_labels_and_batches(fd):
    case = fixture("zero_shot")["inputs"][5]  # two sequences, three labels
    sequences = case["input"]["sequences"]
    for batch_size in (1, 8):
        pipe = make_pipeline(fd, "zero-shot-classification", "zero_shot", batch_size=batch_size)
        got = pipe(sequences, case["input"]["candidate_labels"])  # HF takes the labels as the second argument
        for i, (g, w) in enumerate(zip(got, case["output"])):
            assert_zero_shot(g, w, f"batch_size {batch_size} [{i}]")


def test_zero_shot_refusals(fd, tmp_path):
    pipe = make_pipeline(fd, "zero-shot-classification", "zero_shot")
    with pytest.raises(ValueError, match="at least one label"):
        pipe("text", candidate_labels=" , ")
    with pytest.raises(ValueError, match="at least one label and at least one sequence"):
        pipe([], candidate_labels=["a"])
    with pytest.raises(ValueError, match="has no {} where the candidate label should go"):
        pipe("text", candidate_labels=["a"], hypothesis_template="No placeholder.")
    relabelled = copy_checkpoint(PAIRS / "zero_shot", tmp_path / "no_nli", lambda c: (
        c.update(id2label={"0": "yes", "1": "maybe", "2": "no"}), c.pop("label2id")))
    plain = fd.pipeline("zero-shot-classification", model=str(relabelled), tokenizer=str(SPM))
    with pytest.raises(ValueError, match=r"needs an NLI checkpoint .*config\.json holds yes, maybe, no"):
        plain("text", candidate_labels=["a"])


# --- text-classification with text pairs ----------------------------------------------------------------

def test_text_pair_classification_every_call(fd):
    pipe = make_pipeline(fd, "text-classification", "zero_shot")
    for case in fixture("pair_classify")["inputs"]:
        kwargs = dict(case["input"])
        got = pipe(kwargs.pop("inputs"), **kwargs)
        want = case["output"]
        where = str(case["input"])
        # HF's shapes: a dict input with top_k=None gives a list of labels, without top_k the best as a dict;
        # a list of dicts gives a list of such results.
        items_got, items_want = (got, want) if isinstance(case["input"]["inputs"], list) else ([got], [want])
        assert type(got) is type(want), f"{where}: {got!r}"
        for g, w in zip(items_got, items_want):
            g_list, w_list = (g, w) if isinstance(w, list) else ([g], [w])
            assert [r["label"] for r in g_list] == [r["label"] for r in w_list], where
            for r_g, r_w in zip(g_list, w_list):
                assert_close(r_g["score"], r_w["score"], where)


# --- rerank ---------------------------------------------------------------------------------------------

def rerank_kwargs(case):
    args = {}
    if case["input"]["max_length"] is not None:
        args = {"max_length": case["input"]["max_length"], "truncation": case["input"]["truncation"]}
    return args


def test_rerank_every_case(fd):
    pipe = make_pipeline(fd, "rerank", "rerank")
    for case in fixture("rerank")["inputs"]:
        query, passages = case["input"]["query"], case["input"]["passages"]
        got = pipe(query, passages, **rerank_kwargs(case))
        assert [r["index"] for r in got] == case["order"], f"{query}: {got}"
        for r in got:
            assert set(r) == {"index", "score"}
            assert_close(r["score"], case["sigmoid_scores"][r["index"]], f"{query}[{r['index']}]")


def test_rerank_top_n_raw_scores_text_and_batches(fd):
    pipe = make_pipeline(fd, "text-ranking", "rerank", batch_size=2)  # passages in several forward passes
    for case in fixture("rerank")["inputs"]:
        query, passages = case["input"]["query"], case["input"]["passages"]
        got = pipe(query, passages, top_n=2, raw_scores=True, return_text=True, **rerank_kwargs(case))
        assert [r["index"] for r in got] == case["order"][:2]
        for r in got:
            assert list(r) == ["index", "text", "score"]  # TEI's order
            assert r["text"] == passages[r["index"]]
            assert_close(r["score"], case["logits"][r["index"]], f"{query}[{r['index']}] raw")
    # truncation=True is longest_first
    case = fixture("rerank")["inputs"][3]
    assert case["input"]["truncation"] == "longest_first"
    got = pipe(case["input"]["query"], case["input"]["passages"], truncation=True, max_length=24)
    assert [r["index"] for r in got] == case["order"]
    assert all(0.0 < r["score"] < 1.0 and not math.isnan(r["score"]) for r in got)
    assert pipe("query", []) == []


def test_rerank_refusals(fd):
    pipe = make_pipeline(fd, "rerank", "rerank")
    with pytest.raises(ValueError, match="top_n must be at least 1"):
        pipe("q", ["p"], top_n=0)
    with pytest.raises(ValueError, match="unknown truncation strategy 'sideways'"):
        pipe("q", ["p"], truncation="sideways", max_length=8)
    with pytest.raises(ValueError, match="model_max_length, but .*tokenizer_config.json gives none"):
        pipe("q", ["p"], truncation="only_second")
    with pytest.raises(ValueError, match="query must be a str"):
        pipe(["q"], ["p"])
    three_labels = make_pipeline(fd, "rerank", "zero_shot")
    with pytest.raises(ValueError, match=r"rerank needs a cross-encoder.*\(3 labels\)"):
        three_labels("q", ["p"])

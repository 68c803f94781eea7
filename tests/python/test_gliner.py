"""flashdeberta.GLiNER against GLiNER 0.2.27's own outputs (tests/fixtures/gliner, make_gliner_fixtures.py):
every input of every case, entities equal with scores within 1e-4 (a batch: each text's batch-of-one result);
the same as the CLI's `gliner` command; and the errors (OSError for a missing or non-GLiNER directory,
ValueError for bad arguments); long_text windows and single_pass past max_len."""
import threading

import numpy as np
import pytest

from conftest import FIXTURES, json_lines, read_json, run_cli

GLINER = FIXTURES / "gliner"
SCORE_TOLERANCE = 1e-4
CASES = sorted(d for d in GLINER.iterdir() if (d / "expected.json").is_file())


def check_entities(ours, theirs):
    assert [(e["start"], e["end"], e["text"], e["label"]) for e in ours] == \
        [(e["start"], e["end"], e["text"], e["label"]) for e in theirs]
    for o, t in zip(ours, theirs):
        assert list(o) == ["start", "end", "text", "label", "score"]
        assert abs(o["score"] - t["score"]) <= SCORE_TOLERANCE


def options(rec):
    return dict(flat_ner=rec["flat_ner"], threshold=rec["threshold"], multi_label=rec["multi_label"])


@pytest.mark.parametrize("case", CASES, ids=lambda d: d.name)
def test_fixture_parity(fd, case):
    model = fd.GLiNER.from_pretrained(str(case), threads=2)
    assert case.name in repr(model)
    for rec in read_json(case / "expected.json")["inputs"]:
        texts = [d["text"] for d in rec["per_text"]]
        if rec["api"] == "predict_entities":
            check_entities(model.predict_entities(texts[0], rec["labels"], **options(rec)), rec["entities"])
            continue
        if rec["labels"] and isinstance(rec["labels"][0], list):  # per-text labels: one text at a time
            ours = [model.predict_entities(t, l, **options(rec)) for t, l in zip(texts, rec["labels"])]
        else:
            ours = model.batch_predict_entities(texts, rec["labels"], **options(rec), batch_size=2)
        for entities, d in zip(ours, rec["per_text"]):
            check_entities(entities, d["entities_single"] if d["valid"] else [])


def test_positional_arguments_follow_gliner(fd):
    """GLiNER's order: predict_entities(text, labels, flat_ner, threshold, multi_label)."""
    case = GLINER / "span_markerV0"
    rec = next(r for r in read_json(case / "expected.json")["inputs"] if r["name"] == "nested")
    model = fd.GLiNER.from_pretrained(case)  # os.PathLike too
    text = rec["per_text"][0]["text"]
    check_entities(model.predict_entities(text, rec["labels"], rec["flat_ner"], rec["threshold"], rec["multi_label"]),
                   rec["entities"])


def test_equals_cli(fd, cli):
    case = GLINER / "span_marker"
    rec = read_json(case / "expected.json")["inputs"][0]
    texts = [d["text"] for d in rec["per_text"]]
    status, out, err = run_cli(cli, ["gliner", "--model", case, "--labels", ",".join(rec["labels"]),
                                     "--threshold", repr(rec["threshold"]), "--", *texts])
    assert status == 0, err
    model = fd.GLiNER.from_pretrained(str(case))
    ours = model.batch_predict_entities(texts, rec["labels"], threshold=rec["threshold"])
    assert [line["entities"] for line in json_lines(out)] == ours


def test_threads_share_one_model(fd):
    case = GLINER / "token_level"
    rec = read_json(case / "expected.json")["inputs"][0]
    model = fd.GLiNER.from_pretrained(str(case), threads=1)
    text = rec["per_text"][0]["text"]
    results, errors = [], []

    def work():
        try:
            for _ in range(5):
                results.append(model.predict_entities(text, rec["labels"], **options(rec)))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for r in results:
        check_entities(r, rec["entities"])


def test_errors(fd, tmp_path):
    with pytest.raises(OSError, match="no such directory"):
        fd.GLiNER.from_pretrained(str(tmp_path / "missing"))
    with pytest.raises(OSError, match="gliner_config.json"):
        fd.GLiNER.from_pretrained(str(FIXTURES / "v3_base_like"))
    with pytest.raises(ValueError, match="gliner_config.json"):  # a GLiNER kind we do not run
        fd.GLiNER.from_pretrained(str(GLINER / "refuse" / "bi_encoder_span"))
    with pytest.raises(ValueError, match="device"):
        fd.GLiNER.from_pretrained(str(GLINER / "span_marker"), device="tpu")
    model = fd.GLiNER.from_pretrained(str(GLINER / "span_marker"))
    with pytest.raises(ValueError, match="at least one label"):
        model.predict_entities("Ada Lovelace", [])
    with pytest.raises(ValueError, match="labels must be a list of str"):
        model.predict_entities("Ada Lovelace", "person")
    with pytest.raises(ValueError, match=r"outside \[0, 1\]"):
        model.predict_entities("Ada Lovelace", ["person"], threshold=2.0)
    with pytest.raises(ValueError, match="text must be a str"):
        model.predict_entities(["Ada Lovelace"], ["person"])
    with pytest.raises(ValueError, match="texts must be a list"):
        model.batch_predict_entities("Ada Lovelace", ["person"])
    assert model.batch_predict_entities([], ["person"]) == []
    assert model.predict_entities("   ", ["person"]) == []


def test_long_text(fd):
    """span_markerV0 (max_len 64) on 8 copies of a 14-word text: truncate stops at word 64, windows finds the
    first copy's date entity in every copy (scores close to the first copy's), single_pass reads past word 64;
    on a text that fits, both equal truncate."""
    model = fd.GLiNER.from_pretrained(str(GLINER / "span_markerV0"), threads=2)
    labels = ["organization", "location", "date"]
    base = "The European Space Agency launched the Rosetta probe from Kourou in March 2004 ."
    alone = model.predict_entities(base, labels, threshold=0.5)
    assert model.predict_entities(base, labels, threshold=0.5, long_text="windows") == alone
    assert model.predict_entities(base, labels, threshold=0.5, long_text="single_pass") == alone
    top = max(alone, key=lambda e: e["score"])
    text = " ".join([base] * 8)
    cut = 4 * 81 + 53  # word 64 starts there
    truncated = model.predict_entities(text, labels, threshold=0.5)
    windows = model.predict_entities(text, labels, threshold=0.5, long_text="windows")
    single = model.predict_entities(text, labels, threshold=0.5, long_text="single_pass")
    for r in range(8):
        found = [e for e in windows if (e["start"], e["end"], e["label"]) ==
                 (top["start"] + 81 * r, top["end"] + 81 * r, top["label"])]
        assert len(found) == 1, r
        assert abs(found[0]["score"] - top["score"]) <= 0.01
    assert all(e["end"] <= cut for e in truncated)
    assert any(e["start"] >= cut for e in single)
    for e in windows + single:
        assert e["text"] == text[e["start"]:e["end"]]
    batch = model.batch_predict_entities([text, base], labels, threshold=0.5, long_text="windows", window_overlap=20)
    check_entities(batch[1], alone)
    # A numpy integer is an integer, as for every other count argument.
    assert model.batch_predict_entities([text, base], labels, threshold=0.5, long_text="windows",
                                        window_overlap=np.int64(20)) == batch


def test_long_text_errors(fd):
    model = fd.GLiNER.from_pretrained(str(GLINER / "span_markerV0"))
    with pytest.raises(ValueError, match="long_text must be one of 'truncate', 'windows', 'single_pass', not 'window'"):
        model.predict_entities("Ada", ["person"], long_text="window")
    with pytest.raises(ValueError, match="long_text must be one of"):
        model.predict_entities("Ada", ["person"], long_text=None)
    with pytest.raises(ValueError, match="window_overlap must be an int or None"):
        model.predict_entities("Ada", ["person"], long_text="windows", window_overlap="4")
    with pytest.raises(ValueError, match=r"window_overlap 64 is outside \[0, 63\]"):
        model.predict_entities("Ada", ["person"], long_text="windows", window_overlap=64)
    with pytest.raises(ValueError, match=r"window_overlap -2 is outside"):
        model.predict_entities("Ada", ["person"], long_text="windows", window_overlap=-2)
    with pytest.raises(ValueError, match="window_overlap applies to long_text windows only"):
        model.predict_entities("Ada", ["person"], window_overlap=4)

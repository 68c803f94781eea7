"""Python results equal the C++ program's bit for bit on the same inputs: model outputs against
`flashdeberta run` (safetensors written by the CLI), pipeline results against the CLI's pipeline commands
(JSON lines, whose floats round-trip exactly)."""
import json

import numpy as np
import pytest

from conftest import FIXTURES, HEADS, MODELS, PIPELINES, SPM, json_lines, read_safetensors, run_cli

THREADS = "1"  # one thread on both sides: the same summation order, so the same bits


def run_model_cli(cli, directory, inputs, tmp_path, head="auto"):
    (tmp_path / "in.json").write_text(json.dumps({k: v.tolist() for k, v in inputs.items()}), encoding="utf-8")
    out = tmp_path / "out.safetensors"
    status, _, err = run_cli(cli, ["run", "--model", directory, "--input", tmp_path / "in.json", "--output", out,
                                   "--head", head, "--threads", THREADS])
    assert status == 0, err
    return read_safetensors(out)


@pytest.mark.parametrize("case", [("AutoModel", FIXTURES / "v3_left_pad", "base"),
                                  ("AutoModel", FIXTURES / "v2_conv", "base"),
                                  ("AutoModel", FIXTURES / "v1_c2p", "base"),
                                  ("AutoModelForMaskedLM", HEADS / "mlm_v3_nonlegacy", "mlm"),
                                  ("AutoModelForSequenceClassification", HEADS / "seqcls_v3", "seqcls"),
                                  ("AutoModelForTokenClassification", HEADS / "tokcls_v1", "tokcls"),
                                  ("AutoModelForQuestionAnswering", HEADS / "qa_v3", "qa"),
                                  ("AutoModelForMultipleChoice", HEADS / "mc_v3", "mc")],
                         ids=lambda c: f"{c[0]}-{c[1].name}")
def test_model_outputs_equal_the_cli_bit_for_bit(fd, cli, tmp_path, case):
    cls, directory, head = case
    expected = read_safetensors(directory / "expected.safetensors")
    inputs = {k: expected[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in expected}
    ours = getattr(fd, cls).from_pretrained(directory, threads=int(THREADS))(**inputs)
    theirs = run_model_cli(cli, directory, inputs, tmp_path, head)
    assert set(ours) == set(theirs)
    for name, value in ours.items():
        assert value.dtype == theirs[name].dtype and value.shape == theirs[name].shape, name
        assert np.array_equal(value, theirs[name]), f"{name}: max diff {np.abs(value - theirs[name]).max()}"


TEXTS = ["The capital of France is [MASK].", "I really enjoyed this movie, it was great!",
         "My name is Wolfgang and I live in Berlin.", "Été à Paris, [MASK] naïve café", "x"]


def cli_lines(cli, command, model, texts, *extra):
    status, out, err = run_cli(cli, [command, "--model", model, "--tokenizer", SPM, "--threads", THREADS,
                                     "--batch-size", "3", *extra, "--", *texts])
    assert status == 0, err
    return json_lines(out)


def test_pipelines_equal_the_cli_exactly(fd, cli):
    texts = [t for t in TEXTS if "[MASK]" in t]
    fill = fd.pipeline("fill-mask", model=PIPELINES / "fill_mask", tokenizer=SPM, threads=1, batch_size=3)
    ours = fill(texts, top_k=4)
    theirs = [line["masks"] for line in cli_lines(cli, "fill-mask", PIPELINES / "fill_mask", texts, "--top-k", "4")]
    assert ours == [masks[0] if len(masks) == 1 else masks for masks in theirs]

    classify = fd.pipeline("text-classification", model=PIPELINES / "classify", tokenizer=SPM, threads=1,
                           batch_size=3)
    ours = classify(TEXTS, top_k=None)
    assert ours == [line["labels"] for line in cli_lines(cli, "classify", PIPELINES / "classify", TEXTS)]

    ner = fd.pipeline("ner", model=PIPELINES / "ner", tokenizer=SPM, threads=1, batch_size=3,
                     aggregation_strategy="simple")  # the CLI's grouping
    assert ner(TEXTS) == [line["entities"] for line in cli_lines(cli, "ner", PIPELINES / "ner", TEXTS)]

    qa = fd.pipeline("question-answering", model=PIPELINES / "qa", tokenizer=SPM, threads=1)
    question, context = "Where do I live?", "My name is Wolfgang and I live in Berlin."
    status, out, err = run_cli(cli, ["qa", "--model", PIPELINES / "qa", "--tokenizer", SPM, "--threads", THREADS,
                                     "--question", question, "--context", context])
    assert status == 0, err
    line = json_lines(out)[0]
    del line["question"]
    assert qa(question=question, context=context) == line


def test_shipped_classifier_equals_the_cli(fd, cli):
    texts = ["A library for reading and writing PNG images.", "A game where you drive tanks through a maze."]
    classify = fd.pipeline("text-classification", model=MODELS / "tiny-en-sections", threads=1)
    status, out, err = run_cli(cli, ["classify", "--model", MODELS / "tiny-en-sections", "--threads", THREADS,
                                     "--", *texts])
    assert status == 0, err
    assert classify(texts, top_k=None) == [line["labels"] for line in json_lines(out)]

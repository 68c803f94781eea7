"""ZeroModels' Keras checkpoints (tests/fixtures/zeromodels, written by ZeroModels' own code) through Python and the
CLI: from_pretrained and pipeline() on the directories as published, matching ZeroModels' float32 outputs at the
valid positions; `flashdeberta convert` to an HF directory and back, bit-exact, with the same outputs."""

import json
import os
import subprocess

import numpy as np
import pytest

from conftest import FIXTURES, SPM, max_abs_error, read_safetensors

ZEROMODELS = FIXTURES / "zeromodels"
CASES = sorted(p.name for p in ZEROMODELS.iterdir() if (p / "expected.safetensors").exists())
CLI = os.environ.get("FLASHDEBERTA_CLI", "flashdeberta")


def auto_class(fd, architecture):
    for suffix, cls in (("ForMaskedLM", fd.AutoModelForMaskedLM), ("ForSequenceClassification",
                        fd.AutoModelForSequenceClassification), ("ForTokenClassification",
                        fd.AutoModelForTokenClassification), ("ForQuestionAnswering", fd.AutoModelForQuestionAnswering),
                        ("ForMultipleChoice", fd.AutoModelForMultipleChoice)):
        if architecture.endswith(suffix):
            return cls
    return fd.AutoModel


def outputs_of(fd, directory):
    expected = read_safetensors(directory / "expected.safetensors")
    inputs = {k: expected[k] for k in ("input_ids", "attention_mask")}
    backbone = fd.AutoModel.from_pretrained(directory, threads=1)
    head = auto_class(fd, backbone.config.architectures[0]).from_pretrained(directory, threads=1)
    return expected, inputs, backbone(**inputs), head(**inputs)


@pytest.mark.parametrize("name", CASES)
def test_zeromodels_directory_matches_zeromodels(fd, name):
    expected, inputs, base, head = outputs_of(fd, ZEROMODELS / name)
    mask = inputs["attention_mask"]
    hidden = base["last_hidden_state"].reshape(expected["last_hidden_state"].shape)
    assert max_abs_error(hidden, expected["last_hidden_state"], mask.reshape(hidden.shape[:2])) <= 1e-5
    for field in ("logits", "start_logits", "end_logits"):
        if field in expected:
            per_token = expected[field].shape[:mask.ndim] == mask.shape
            err = max_abs_error(head[field], expected[field], mask if per_token else None)
            assert err <= 1e-4, f"{name} {field}: {err}"


def test_the_config_is_hfs_view(fd):
    model = fd.AutoModelForSequenceClassification.from_pretrained(ZEROMODELS / "v3_seq_cls", threads=1)
    assert model.config.architectures == ["DebertaV2ForSequenceClassification"]
    assert model.config.num_labels == 3 and model.config.hidden_size == 32
    assert model.config.position_biased_input is False and model.config.share_att_key is True


def test_a_pipeline_on_a_zeromodels_directory(fd):
    classifier = fd.pipeline("text-classification", model=ZEROMODELS / "v3_seq_cls", tokenizer=SPM, threads=1)
    out = classifier("A tiny random model reads this.", top_k=None)
    assert sorted(r["label"] for r in out) == ["LABEL_0", "LABEL_1", "LABEL_2"]
    assert abs(sum(r["score"] for r in out) - 1.0) < 1e-5


def convert(source, destination):
    done = subprocess.run([CLI, "convert", "--from", str(source), "--to", str(destination)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("name", ["v1_base", "v2_base", "v2_multiple_choice", "v3_seq_cls", "v3_qa", "v3_sharded",
                                  "v3_token_cls", "v3_masked_lm"])
def test_convert_to_hf_and_back(fd, name, tmp_path):
    source = ZEROMODELS / name
    hf, back = tmp_path / "hf", tmp_path / "back"
    summary = convert(source, hf)
    assert summary["from"] == "zeromodels" and summary["to"] == "huggingface"
    assert sorted(os.listdir(hf)) == ["config.json", "model.safetensors"]
    summary = convert(hf, back)
    assert summary["to"] == "zeromodels"
    assert sorted(os.listdir(back)) == ["model.weights.h5", "zm_config.json"]
    # Every variable comes back bit-exactly, under the path and with the layer name Keras gave it.
    h5py = pytest.importorskip("h5py")
    original = {}
    for path in sorted(source.glob("*.weights.h5")):
        with h5py.File(path, "r") as f:
            f.visititems(lambda k, v: original.__setitem__(k, (v[()], v.parent.attrs.get("name")))
                         if isinstance(v, h5py.Dataset) else None)
    with h5py.File(back / "model.weights.h5", "r") as f:
        again = {}
        f.visititems(lambda k, v: again.__setitem__(k, (v[()], v.parent.attrs.get("name")))
                     if isinstance(v, h5py.Dataset) else None)
    assert sorted(again) == sorted(original)
    for key, (values, layer) in original.items():
        np.testing.assert_array_equal(again[key][0], values, err_msg=key)
        if layer is not None:
            assert again[key][1] == layer, key
    # The three directories compute the same outputs.
    _, _, base, head = outputs_of(fd, source)
    for directory in (hf, back):
        (directory / "expected.safetensors").symlink_to(source / "expected.safetensors")
        _, _, base2, head2 = outputs_of(fd, directory)
        np.testing.assert_array_equal(base2["last_hidden_state"], base["last_hidden_state"])
        for key in head:
            np.testing.assert_array_equal(head2[key], head[key])


def test_an_hf_model_converts_to_zeromodels_with_the_same_outputs(fd, tmp_path):
    # An HF-made v3 backbone (tests/fixtures/v3_c2p: HF's outputs in float64) through ZeroModels' files.
    convert(FIXTURES / "v3_c2p", tmp_path / "zm")
    expected = read_safetensors(FIXTURES / "v3_c2p" / "expected.safetensors")
    inputs = {k: expected[k] for k in ("input_ids", "attention_mask")}
    hf = fd.AutoModel.from_pretrained(FIXTURES / "v3_c2p", threads=1)(**inputs)["last_hidden_state"]
    zm = fd.AutoModel.from_pretrained(tmp_path / "zm", threads=1)(**inputs)["last_hidden_state"]
    np.testing.assert_array_equal(zm, hf)


@pytest.mark.parametrize("name, why", [("v1_c2p", "position_biased_input is true"),
                                       ("v2_conv", "type_vocab_size is 2")])
def test_convert_refuses_what_zeromodels_cannot_hold(name, why, tmp_path):
    done = subprocess.run([CLI, "convert", "--from", str(FIXTURES / name), "--to", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.startswith("flashdeberta: error: ") and done.stderr.count("\n") == 1
    assert why in done.stderr and "ZeroModels' DeBERTa cannot hold this model" in done.stderr
    assert os.listdir(tmp_path) == []  # nothing left behind, not even the staging directory

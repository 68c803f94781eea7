"""Every model class against the fixtures the C++ golden tests use (HF 5.17 in float64, rounded to float32).

Backbones (tests/fixtures/v*/), every head kind (tests/fixtures/heads/*, v3_prefixed) and the two models we
ship (models/ against tests/fixtures/tiny_models/), through flash and eager attention: float32 outputs under
HF's names and layouts, within 1e-5 of HF at the valid positions and zeros at the masked ones.
"""
import numpy as np
import pytest

from conftest import FIXTURES, HEADS, MODELS, TOLERANCE, max_abs_error, per_token, read_json, read_safetensors

# v1, v2 and v3 backbones, chosen for what they exercise (tests/fixtures/README.md): v1 c2p+p2c with token
# types and v1 embedding_size; v2 with the conv layer (mask holes, token types) and shared keys; v3 c2p,
# base geometry at L = 640 > 512, left padding, mask holes, sharded and float16 storage.
BACKBONES = ["v1_c2p_p2c", "v1_embedding_size", "v2_conv", "v2_share_key", "v3_c2p", "v3_base_like", "v3_left_pad",
             "v3_mask_hole", "v3_sharded", "v3_fp16_storage"]
HEAD_CASES = sorted(p.name for p in HEADS.iterdir() if (p / "expected.safetensors").exists())
ATTENTIONS = ["flash", "eager"]
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")

# HF's class name suffix (config.json's architectures) -> the Auto class that loads it.
AUTO_CLASS = {
    "Model": "AutoModel",
    "ForMaskedLM": "AutoModelForMaskedLM",
    "ForSequenceClassification": "AutoModelForSequenceClassification",
    "ForTokenClassification": "AutoModelForTokenClassification",
    "ForQuestionAnswering": "AutoModelForQuestionAnswering",
    "ForMultipleChoice": "AutoModelForMultipleChoice",
}


def auto_class(fd, directory):
    arch = read_json(directory / "config.json")["architectures"][0]
    suffix = arch.removeprefix("DebertaV2").removeprefix("Deberta")
    return getattr(fd, AUTO_CLASS[suffix])


def model_inputs(expected):
    return {k: expected[k] for k in INPUT_NAMES if k in expected}


def check_field(out, name, theirs, mask):
    """One output field: type, dtype, shape, error at the valid positions, zeros at the masked ones."""
    assert name in out, f"output lacks {name!r} (has {sorted(out)})"
    ours = out[name]
    assert isinstance(ours, np.ndarray), f"{name} is a {type(ours).__name__}, not a numpy array"
    assert ours.dtype == np.float32, f"{name} has dtype {ours.dtype}"
    assert ours.shape == theirs.shape, f"{name}: shape {ours.shape}, HF has {theirs.shape}"
    if per_token(theirs, mask):
        err = max_abs_error(ours, theirs, mask)
        masked = ours[mask == 0]
        assert np.all(masked == 0), f"{name}: nonzero values at masked positions (max {np.abs(masked).max()})"
    else:
        err = max_abs_error(ours, theirs)
    assert err <= TOLERANCE, f"{name}: max abs error {err:.3g} against HF (tolerance {TOLERANCE})"
    return err


@pytest.mark.parametrize("attention", ATTENTIONS)
@pytest.mark.parametrize("case", BACKBONES)
def test_backbone_matches_hf(fd, case, attention):
    directory = FIXTURES / case
    expected = read_safetensors(directory / "expected.safetensors")
    model = fd.AutoModel.from_pretrained(directory, attention=attention)
    out = model(**model_inputs(expected))
    assert set(out) == {"last_hidden_state"}
    check_field(out, "last_hidden_state", expected["last_hidden_state"], expected["attention_mask"])


@pytest.mark.parametrize("attention", ATTENTIONS)
@pytest.mark.parametrize("case", HEAD_CASES + ["v3_prefixed"])
def test_head_matches_hf(fd, case, attention):
    directory = (HEADS if case in HEAD_CASES else FIXTURES) / case
    expected = read_safetensors(directory / "expected.safetensors")
    model = auto_class(fd, directory).from_pretrained(directory, attention=attention)
    out = model(**model_inputs(expected))
    fields = sorted(k for k in expected
                    if k not in INPUT_NAMES and not k.startswith(("last_hidden_state", "hidden_states")))
    assert sorted(out) == fields, f"output fields {sorted(out)}, HF's are {fields}"
    for name in fields:
        check_field(out, name, expected[name], expected["attention_mask"])


@pytest.mark.parametrize("case", HEAD_CASES)
def test_automodel_on_a_head_checkpoint_gives_the_backbone(fd, case):
    # The head checkpoints store the backbone under `deberta.`; AutoModel reads it as HF's model.deberta.
    directory = HEADS / case
    expected = read_safetensors(directory / "expected.safetensors")
    inputs = model_inputs(expected)
    hidden = expected["last_hidden_state"]
    if inputs["input_ids"].ndim == 3:  # multiple choice: (B, C, L) rows are B * C sequences
        inputs = {k: v.reshape(-1, v.shape[-1]) for k, v in inputs.items()}
        hidden = hidden.reshape(-1, *hidden.shape[2:])
    out = fd.AutoModel.from_pretrained(directory)(**inputs)
    check_field(out, "last_hidden_state", hidden, inputs["attention_mask"])


@pytest.mark.parametrize("name", ["tiny-en", "tiny-en-sections"])
def test_shipped_models_match_hf(fd, name):
    # Trained weights stored as float16, against HF's float64 run (make_tiny_model_fixtures.py).
    expected = read_safetensors(FIXTURES / "tiny_models" / name / "expected.safetensors")
    model = auto_class(fd, MODELS / name).from_pretrained(MODELS / name)
    out = model(**model_inputs(expected))
    check_field(out, "logits", expected["logits"], expected["attention_mask"])


def test_attention_mask_defaults_to_all_ones(fd):
    directory = FIXTURES / "v3_c2p"
    expected = read_safetensors(directory / "expected.safetensors")
    assert expected["attention_mask"][0].all()  # row 0 is valid everywhere
    model = fd.AutoModel.from_pretrained(directory)
    out = model(expected["input_ids"][:1])
    check_field(out, "last_hidden_state", expected["last_hidden_state"][:1], expected["attention_mask"][:1])


def test_keyword_and_positional_inputs_agree(fd):
    directory = HEADS / "seqcls_v1"
    expected = read_safetensors(directory / "expected.safetensors")
    model = fd.AutoModelForSequenceClassification.from_pretrained(directory)
    a = model(expected["input_ids"], expected["attention_mask"], expected["token_type_ids"])["logits"]
    b = model(input_ids=expected["input_ids"], attention_mask=expected["attention_mask"],
              token_type_ids=expected["token_type_ids"])["logits"]
    assert np.array_equal(a, b)


def test_model_attributes(fd):
    directory = HEADS / "seqcls_v3"
    model = fd.AutoModelForSequenceClassification.from_pretrained(directory)
    assert model.config == read_json(directory / "config.json")
    assert model.id2label == {0: "negative", 1: "neutral", 2: "positive"}
    assert str(model.device) == "cpu"
    assert str(model.dtype) == "float32"
    # Without id2label in config.json HF names the labels LABEL_<i> (num_labels 2 by default).
    v1 = fd.AutoModelForSequenceClassification.from_pretrained(HEADS / "seqcls_v1")
    assert "id2label" not in read_json(HEADS / "seqcls_v1" / "config.json")
    assert v1.id2label == {0: "LABEL_0", 1: "LABEL_1"}


def test_version(fd):
    assert isinstance(fd.__version__, str) and fd.__version__[:1].isdigit()

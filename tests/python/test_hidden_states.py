"""output_hidden_states=True as transformers' users pass it: HF's tuple of num_hidden_layers + 1 [B, L, H] states
(the embedding output first), equal to the states HF recorded in the backbone fixtures; a head model's states
end in the backbone's last_hidden_state HF recorded, and its outputs stay those of a plain call."""

import numpy as np
import pytest

from conftest import FIXTURES, HEADS, TOLERANCE, max_abs_error, read_safetensors


def inputs_of(expected):
    return {k: expected[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in expected}


@pytest.mark.parametrize("name", ["v3_c2p", "v2_conv", "v1_c2p", "v3_left_pad"])
def test_every_state_matches_hf(fd, name):
    expected = read_safetensors(FIXTURES / name / "expected.safetensors")
    recorded = sorted((k for k in expected if k.startswith("hidden_states.")), key=lambda k: int(k.split(".")[1]))
    if not recorded:
        pytest.skip(f"{name} records no hidden_states")
    model = fd.AutoModel.from_pretrained(FIXTURES / name, threads=1)
    inputs = inputs_of(expected)
    out = model(**inputs, output_hidden_states=True)
    assert list(out) == ["last_hidden_state", "hidden_states"]
    assert len(out.hidden_states) == len(recorded) == model.config.num_hidden_layers + 1
    for k, state in enumerate(out.hidden_states):
        assert state.shape == expected[recorded[k]].shape
        err = max_abs_error(state, expected[recorded[k]], inputs["attention_mask"])
        assert err <= TOLERANCE, f"{name} hidden_states[{k}]: {err}"
    np.testing.assert_array_equal(out.hidden_states[-1], out.last_hidden_state)
    np.testing.assert_array_equal(out.last_hidden_state, model(**inputs)["last_hidden_state"])
    assert out[1] is out.hidden_states  # by position, as HF's ModelOutput


@pytest.mark.parametrize("name", ["seqcls_v3", "tokcls_v1", "qa_v3", "mlm_v3_nonlegacy"])
def test_a_head_models_states_end_in_hfs_last_hidden_state(fd, name):
    expected = read_safetensors(HEADS / name / "expected.safetensors")
    inputs = inputs_of(expected)
    auto = {"seqcls": fd.AutoModelForSequenceClassification, "tokcls": fd.AutoModelForTokenClassification,
            "qa": fd.AutoModelForQuestionAnswering, "mlm": fd.AutoModelForMaskedLM}[name.split("_")[0]]
    model = auto.from_pretrained(HEADS / name, threads=1)
    plain = model(**inputs)
    out = model(**inputs, output_hidden_states=True)
    assert list(out)[-1] == "hidden_states" and list(out)[:-1] == list(plain)
    for key in plain:
        np.testing.assert_array_equal(out[key], plain[key])
    assert len(out.hidden_states) == model.config.num_hidden_layers + 1
    err = max_abs_error(out.hidden_states[-1], expected["last_hidden_state"], inputs["attention_mask"])
    assert err <= TOLERANCE, f"{name}: {err}"


def test_hidden_states_as_torch_and_attentions_refused(fd):
    torch = pytest.importorskip("torch")
    expected = read_safetensors(FIXTURES / "v3_c2p" / "expected.safetensors")
    model = fd.AutoModel.from_pretrained(FIXTURES / "v3_c2p", threads=1)
    out = model(**inputs_of(expected), output_hidden_states=True, return_tensors="pt")
    assert all(isinstance(s, torch.Tensor) for s in out.hidden_states)
    assert isinstance(out.last_hidden_state, torch.Tensor)
    assert model(**inputs_of(expected), output_hidden_states=False).keys() == {"last_hidden_state"}
    with pytest.raises(ValueError, match="output_attentions"):
        model(**inputs_of(expected), output_attentions=True)

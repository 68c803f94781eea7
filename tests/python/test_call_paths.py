"""The ways into a model's forward give the same outputs and the same errors.

model(...) takes its common call (numpy arrays in and out) in C through _native.ModelBase, and
_native.call_model(model._native, ...) bypasses pybind11's dispatcher (python/src/model_call.cpp);
model.forward(...) is the Python method every other call goes to, and model._native(...) pybind11's method.
"""
import gc
import sys

import numpy as np
import pytest

from conftest import HEADS, read_safetensors


@pytest.fixture(scope="module")
def qa(fd):
    return fd.AutoModelForQuestionAnswering.from_pretrained(HEADS / "qa_v3")


@pytest.fixture(scope="module")
def inputs():
    expected = read_safetensors(HEADS / "qa_v3" / "expected.safetensors")
    return expected["input_ids"], expected["attention_mask"]


def every_path(fd, model, ids, mask, types=None):
    """Each way in, by name: its output for (ids, mask, types)."""
    return {
        "model(...)": model(ids, attention_mask=mask, token_type_ids=types),
        "model(positional)": model(ids, mask, types),
        "model(keywords)": model(input_ids=ids, attention_mask=mask, token_type_ids=types, return_tensors="np"),
        "forward": model.forward(ids, attention_mask=mask, token_type_ids=types),
        "call_model": fd._native.call_model(model._native, ids, mask, types, False),
        "pybind11": model._native(ids, mask, types, False),
    }


def test_every_path_gives_the_same_fields_bit_for_bit(fd, qa, inputs):
    ids, mask = inputs
    outputs = every_path(fd, qa, ids, mask, np.zeros_like(ids))
    want = outputs["pybind11"]
    for name, out in outputs.items():
        assert type(out) is fd.ModelOutput, name
        assert list(out) == ["start_logits", "end_logits"], name
        for field, value in want.items():
            assert out[field].dtype == np.float32 and out[field].flags.c_contiguous, (name, field)
            assert np.array_equal(out[field], value), (name, field)
    assert np.array_equal(qa(ids).start_logits, qa.forward(ids).start_logits)  # attention_mask left out


def test_other_calls_go_through_forward(fd, qa, inputs):
    ids, mask = inputs
    want = qa(ids, attention_mask=mask)["start_logits"]
    # Lists, an ndarray subclass, extra HF arguments: forward's conversions, the same result.
    for args, kwargs in (((ids.tolist(),), {"attention_mask": mask.tolist()}),
                         ((ids.view(type("Ids", (np.ndarray,), {})),), {"attention_mask": mask}),
                         ((ids,), {"attention_mask": mask, "return_dict": True}),
                         ((ids,), {"attention_mask": mask, "return_tensors": "dlpack"})):
        assert np.array_equal(qa(*args, **kwargs)["start_logits"], want), (args, kwargs)


def test_errors_are_the_same_on_every_path(fd, qa, inputs):
    ids, mask = inputs
    for bad, match in ((ids.astype(np.float64), "input_ids has dtype float64"),
                       (np.full_like(ids, 1 << 20), "outside the vocabulary")):
        messages = set()
        for call in (lambda: qa(bad, attention_mask=mask), lambda: qa.forward(bad, attention_mask=mask),
                     lambda: fd._native.call_model(qa._native, bad, mask, None, False),
                     lambda: qa._native(bad, mask, None, False)):
            with pytest.raises(ValueError, match=match) as info:
                call()
            messages.add(str(info.value))
        assert len(messages) == 1, messages
    with pytest.raises(ValueError, match="attention_mask has another shape"):
        qa(ids, attention_mask=mask[:, 1:])
    with pytest.raises(ValueError, match="input_ids is required"):
        qa(attention_mask=mask)
    with pytest.raises(TypeError, match="unexpected argument"):
        qa(ids, labels=ids)
    with pytest.raises(TypeError):
        qa(ids, mask, None, "np")  # return_tensors is keyword-only, as in forward
    with pytest.raises(TypeError):
        qa(ids, input_ids=ids)
    with pytest.raises(ValueError, match="return_tensors"):
        qa(ids, return_tensors="tf")


def test_call_model_leaves_anything_else_to_pybind11(fd, qa, inputs):
    ids, mask = inputs
    # on_device on the CPU: the model's own error; a list: pybind11's conversion error.
    with pytest.raises(ValueError, match="outputs on the device need a model on CUDA"):
        fd._native.call_model(qa._native, ids, mask, None, True)
    with pytest.raises(TypeError, match="incompatible function arguments"):
        fd._native.call_model(qa._native, ids.tolist(), None, None, False)
    with pytest.raises(TypeError):
        fd._native.call_model()
    assert np.array_equal(fd._native.call_model(qa._native, ids, attention_mask=mask)["start_logits"],
                          qa(ids, attention_mask=mask)["start_logits"])


def test_no_reference_leaks(fd, qa, inputs):
    ids, mask = inputs
    gc.collect()
    counts = (sys.getrefcount(ids), sys.getrefcount(mask), sys.getrefcount(qa._native))
    for _ in range(50):
        out = qa(ids, attention_mask=mask)
        out = fd._native.call_model(qa._native, ids, mask, None, False)
        with pytest.raises(ValueError):
            qa(ids.astype(np.float64))
    del out
    gc.collect()
    assert (sys.getrefcount(ids), sys.getrefcount(mask), sys.getrefcount(qa._native)) == counts


def test_outputs_outlive_the_model(fd, inputs):
    ids, mask = inputs
    model = fd.AutoModelForQuestionAnswering.from_pretrained(HEADS / "qa_v3")
    out = model(ids, attention_mask=mask)
    want = out["start_logits"].copy()
    del model
    gc.collect()
    assert np.array_equal(out["start_logits"], want)

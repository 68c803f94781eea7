"""The package on the GPU: models and pipelines with device="cuda" against HF's fixtures and the CPU, and the
outputs left on the device through DLPack (torch.from_dlpack). Skipped where there is no CUDA device or no
torch; run on the GPU machine (tests/cuda/run_on_device.sh, step python)."""
import gc

import numpy as np
import pytest

from conftest import FIXTURES, HEADS, PIPELINES, SPM, TOLERANCE, max_abs_error, read_json, read_safetensors


@pytest.fixture(scope="module")
def cuda(fd):
    try:
        fd.AutoModel.from_pretrained(FIXTURES / "v3_c2p", device="cuda")
    except ValueError as e:  # no device, or a build without the CUDA backend
        pytest.skip(f"no CUDA model: {e}")
    return fd


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def fixture_input(directory):
    expected = read_safetensors(directory / "expected.safetensors")
    return expected, {k: expected[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in expected}


def test_backbone_fp32_matches_hf_on_cuda(cuda):
    for name in ("v3_c2p", "v2_conv", "v1_c2p", "v3_left_pad"):
        expected, inputs = fixture_input(FIXTURES / name)
        for attention in ("flash", "eager"):
            model = cuda.AutoModel.from_pretrained(FIXTURES / name, device="cuda", attention=attention)
            out = model(**inputs)
            err = max_abs_error(out["last_hidden_state"], expected["last_hidden_state"], inputs["attention_mask"])
            assert err <= TOLERANCE, f"{name} {attention}: {err}"


def test_dlpack_outputs_stay_on_the_gpu_and_equal_the_host_copy(cuda, torch):
    expected, inputs = fixture_input(FIXTURES / "v3_left_pad")
    model = cuda.AutoModel.from_pretrained(FIXTURES / "v3_left_pad", device="cuda")
    host = model(**inputs)["last_hidden_state"]
    device = model(**inputs, return_tensors="dlpack")["last_hidden_state"]
    assert device.__dlpack_device__() == (2, 0) and tuple(device.shape) == host.shape
    tensor = torch.from_dlpack(device)
    assert tensor.is_cuda and tensor.dtype == torch.float32 and tuple(tensor.shape) == host.shape
    np.testing.assert_array_equal(tensor.cpu().numpy(), host)  # padding rows are zeros on both sides
    pt = model(**inputs, return_tensors="pt")["last_hidden_state"]
    assert pt.is_cuda and torch.equal(pt, tensor)


def test_inputs_as_cuda_tensors_as_hf_users_pass_them(cuda, torch):
    # model(**tokenizer(..., return_tensors="pt").to("cuda")): the ids come in as CUDA tensors.
    expected, inputs = fixture_input(FIXTURES / "v3_left_pad")
    model = cuda.AutoModel.from_pretrained(FIXTURES / "v3_left_pad", device="cuda")
    host = model(**inputs)["last_hidden_state"]
    on_gpu = {k: torch.from_numpy(np.ascontiguousarray(v)).to("cuda") for k, v in inputs.items()}
    np.testing.assert_array_equal(model(**on_gpu)["last_hidden_state"], host)


def test_dlpack_tensor_outlives_its_model(cuda, torch):
    expected, inputs = fixture_input(FIXTURES / "v3_c2p")
    model = cuda.AutoModel.from_pretrained(FIXTURES / "v3_c2p", device="cuda")
    tensor = torch.from_dlpack(model(**inputs, return_tensors="dlpack")["last_hidden_state"])
    reference = tensor.clone()
    del model
    gc.collect()
    torch.cuda.synchronize()
    assert torch.equal(tensor, reference)
    err = max_abs_error(tensor.cpu().numpy(), expected["last_hidden_state"], inputs["attention_mask"])
    assert err <= TOLERANCE


def test_bf16_outputs_through_dlpack_keep_their_dtype(cuda, torch):
    expected, inputs = fixture_input(FIXTURES / "v3_base_like")
    model = cuda.AutoModel.from_pretrained(FIXTURES / "v3_base_like", device="cuda", dtype="bfloat16")
    tensor = model(**inputs, return_tensors="pt")["last_hidden_state"]
    assert tensor.dtype == torch.bfloat16
    ours = tensor.float().cpu().numpy()
    theirs = expected["last_hidden_state"]
    mask = inputs["attention_mask"] == 1
    relative = np.linalg.norm((ours - theirs)[mask]) / np.linalg.norm(theirs[mask])
    assert relative < 2e-2, relative  # bf16's own error on these fixtures is about 6e-3 (tests/cuda)


def test_every_head_on_cuda_matches_hf_and_dlpack(cuda, torch):
    classes = {"mlm": cuda.AutoModelForMaskedLM, "seqcls": cuda.AutoModelForSequenceClassification,
               "tokcls": cuda.AutoModelForTokenClassification, "qa": cuda.AutoModelForQuestionAnswering,
               "mc": cuda.AutoModelForMultipleChoice}
    checked = 0
    for directory in sorted(p for p in HEADS.iterdir() if p.is_dir()):
        kind = directory.name.split("_")[0]
        if kind not in classes:
            continue
        expected = read_safetensors(directory / "expected.safetensors")
        inputs = {k: expected[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in expected}
        model = classes[kind].from_pretrained(directory, device="cuda")
        host = model(**inputs)
        device = model(**inputs, return_tensors="dlpack")
        for field, value in host.items():
            if field in expected:
                mask = inputs["attention_mask"] if value.shape[:inputs["attention_mask"].ndim] == \
                    inputs["attention_mask"].shape else None
                assert max_abs_error(value, expected[field], mask) <= TOLERANCE, f"{directory.name} {field}"
            np.testing.assert_array_equal(torch.from_dlpack(device[field]).cpu().numpy(), value)
        checked += 1
    assert checked >= 5


def test_pipelines_on_cuda_equal_the_cpu(cuda):
    cases = {"fill-mask": ("fill_mask", "The capital of France is [MASK]."),
             "text-classification": ("classify", "I really enjoyed this movie, it was great!"),
             "token-classification": ("ner", "My name is Wolfgang and I live in Berlin.")}
    for task, (name, text) in cases.items():
        cpu = cuda.pipeline(task, model=PIPELINES / name, tokenizer=SPM)(text)
        gpu = cuda.pipeline(task, model=PIPELINES / name, tokenizer=SPM, device="cuda")(text)
        assert _close(cpu, gpu), f"{task}: {cpu} vs {gpu}"
    expected = read_json(PIPELINES / "qa" / "expected.json")["inputs"][0]
    answer = cuda.pipeline("question-answering", model=PIPELINES / "qa", tokenizer=SPM, device="cuda")(
        **expected["input"])
    assert answer["answer"] == expected["output"]["answer"]
    assert abs(answer["score"] - expected["output"]["score"]) <= 1e-5


def _close(a, b):
    """Equal structures whose floats agree to 1e-5."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return abs(a - b) <= 1e-5
    return a == b

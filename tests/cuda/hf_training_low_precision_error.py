"""HF transformers' own gradient error under bf16 / fp16 autocast on the training fixtures, the bound CudaPolicy's
mixed-precision gradients are held to (test_training_cuda, "mixed-precision gradients").

For each case in tests/fixtures/training (one with expected.safetensors): the HF class of its meta.json loaded in
float32 on the GPU, forward and backward under torch.autocast(bfloat16) and under torch.autocast(float16) with the
loss scaled as GradScaler scales it (2^16, halved while the gradients overflow, divided out after; the scale used is
recorded), dropout off as in the fixtures. The error of a
case is the largest over its gradient tensors of max |g - g64| / max(max |g64|, 1e-2 x the case's largest |g64|)
against the float64 gradients in expected.safetensors (the floor keeps a tensor whose entries cancel, a two-label
bias, from dominating, as the float32 tests do). Run on the device, writing the committed JSON:
    python3 tests/cuda/hf_training_low_precision_error.py tests/fixtures/training OUT.json
"""
import json
import pathlib
import sys

import torch
import transformers
from safetensors.torch import load_file

LOSS_SCALE = 2.0**16


def case_error(grads, expected):
    largest = max(expected[k].abs().max().item() for k in expected)
    worst, worst_name = 0.0, ""
    for name, reference in expected.items():
        ours = grads.get(name)
        if ours is None:
            ours = torch.zeros_like(reference)
        err = (ours.double().cpu() - reference).abs().max().item()
        rel = err / max(reference.abs().max().item(), 1e-2 * largest)
        if rel > worst:
            worst, worst_name = rel, name
    return worst, worst_name


def run(d, dtype):
    meta = json.loads((d / "meta.json").read_text())
    cls = getattr(transformers, meta["hf_class"])
    model = cls.from_pretrained(str(d), attn_implementation="eager", dtype=torch.float32).cuda().eval()
    inputs = {k: v.cuda() for k, v in load_file(str(d / "inputs.safetensors")).items()}
    for k, v in inputs.items():
        if v.is_floating_point():
            inputs[k] = v.float()
    scale = LOSS_SCALE if dtype == torch.float16 else 1.0
    while True:
        model.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=dtype):
            out = model(**inputs)
        (out.loss.float() * scale).backward()
        grads = {n: p.grad.detach() / scale for n, p in model.named_parameters() if p.grad is not None}
        if all(torch.isfinite(g).all() for g in grads.values()) or scale < 1.0:
            break
        scale /= 2.0  # GradScaler's backoff: the step is skipped and the scale halved
    expected = {k[len("grad."):]: v for k, v in load_file(str(d / "expected.safetensors")).items()
                if k.startswith("grad.")}
    return case_error(grads, expected) + (scale,)


def main(root, out_path):
    results = {}
    for d in sorted(p for p in pathlib.Path(root).iterdir() if (p / "expected.safetensors").exists()
                    and (p / "meta.json").exists()):
        if "hf_class" not in json.loads((d / "meta.json").read_text()):
            continue  # the optimizer and Trainer fixtures
        row = {}
        for label, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
            try:
                err, name, scale = run(d, dtype)
                row[label] = {"error": err, "tensor": name}
                if dtype == torch.float16:
                    row[label]["loss_scale"] = scale
            except Exception as e:  # noqa: BLE001  (HF's v1 code mixes dtypes in low precision)
                row[label] = {"fails": str(e).splitlines()[0][:120]}
        results[d.name] = row
        print(d.name, json.dumps(row), flush=True)
    doc = {"what": __doc__.split("\n\n")[0],
           "torch": torch.__version__, "transformers": transformers.__version__,
           "device": torch.cuda.get_device_name(), "cases": results}
    pathlib.Path(out_path).write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

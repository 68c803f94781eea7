"""HF transformers' own bf16/fp16 error on the golden fixtures, to set next to CudaPolicy's.

For each fixture directory: the HF model (eager attention) in bf16 and in fp16 on the GPU, run on the
fixture's inputs; prints ||out - expected|| / ||expected|| (Frobenius, mask = 1 positions) against the
float64 last_hidden_state in expected.safetensors. Run on the device:
    python3 tests/cuda/hf_low_precision_error.py tests/fixtures
"""
import json
import pathlib
import sys

import torch
from safetensors.torch import load_file
from transformers import DebertaModel, DebertaV2Model


def main(root):
    for d in sorted(p for p in pathlib.Path(root).iterdir() if (p / "expected.safetensors").exists()):
        config = json.loads((d / "config.json").read_text())
        if config.get("talking_head"):
            continue
        cls = DebertaModel if config["model_type"] == "deberta" else DebertaV2Model
        expected = load_file(str(d / "expected.safetensors"))
        inputs = {"input_ids": expected["input_ids"].cuda(), "attention_mask": expected["attention_mask"].cuda()}
        if "token_type_ids" in expected:
            inputs["token_type_ids"] = expected["token_type_ids"].cuda()
        mask = expected["attention_mask"].bool()
        reference = expected["last_hidden_state"].double()[mask]
        errors = []
        for dtype in (torch.bfloat16, torch.float16):
            try:
                model = cls.from_pretrained(str(d), attn_implementation="eager", dtype=dtype).cuda().eval()
                with torch.no_grad():
                    out = model(**inputs).last_hidden_state.double().cpu()[mask]
                errors.append("%.3e" % (torch.linalg.norm(out - reference) / torch.linalg.norm(reference)).item())
            except RuntimeError as e:  # HF's v1 code mixes dtypes in low precision
                errors.append("fails (%s)" % str(e).splitlines()[0][:60])
        print(f"{d.name}: HF bf16 {errors[0]}  HF fp16 {errors[1]}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures")

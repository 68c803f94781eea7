#!/usr/bin/env python3
"""Held-out figures of the shipped tiny models, measured through the flashdeberta CLI (models/README.md).

    python3 tools/train-tiny/evaluate_cli.py [--cli build/bin/flashdeberta] [--work DIR] [--models models]
        [--out models/heldout-figures.json] [--inputs WORK/eval/mlm_inputs.npz] [--hf FILE] [--threads N]

Masked LM (heldout_protocol.py): `flashdeberta tokenize` encodes every held-out text of the pretraining
corpus; the rows are masked by the shared protocol; `flashdeberta run --head mlm --mask-token-id` gives the
logits at the masked positions, from which top-1 and top-5 are counted. Sections: `flashdeberta classify`
reads every held-out description on stdin; the top label is the prediction; the majority-class baseline is
stated beside it. The figures go to --out; the masked inputs, our tokenizer's ids and our predictions go to
--inputs, which evaluate_hf.py reads to measure the same inputs through transformers. --hf FILE (what
evaluate_hf.py wrote) adds transformers' figures to --out, with how many of its predictions differ from ours.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from heldout_protocol import SEQ, mask_rows, mlm_rows, read_sections, top_k_hits

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
ROWS_PER_RUN = 64


def read_safetensors(path):
    """{name: array} of a safetensors file (F32 and I64 only: what `flashdeberta run` writes)."""
    data = path.read_bytes()
    (header_size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_size])
    body = memoryview(data)[8 + header_size:]
    types = {"F32": np.float32, "I64": np.int64}
    return {name: np.frombuffer(body[info["data_offsets"][0]:info["data_offsets"][1]],
                                dtype=types[info["dtype"]]).reshape(info["shape"])
            for name, info in header.items() if name != "__metadata__"}


def cli(args, *command, stdin=None):
    completed = subprocess.run([str(args.cli), *command], input=stdin,
                               capture_output=True, text=True)
    if completed.returncode != 0:
        sys.exit(f"{args.cli} {command[0]}: exit {completed.returncode}: {completed.stderr.strip()}")
    return completed.stdout


def masked_lm(args, model_dir, texts):
    lines = cli(args, "tokenize", "--model", str(model_dir), stdin="\n".join(texts) + "\n").splitlines()
    ids_per_text = [json.loads(line)["input_ids"][1:-1] for line in lines]  # without [CLS] ... [SEP]
    if len(ids_per_text) != len(texts):
        sys.exit(f"tokenize gave {len(ids_per_text)} lines for {len(texts)} texts")
    mask_id = cli(args, "tokenize", "--model", str(model_dir), "[MASK]")
    mask_id = json.loads(mask_id)["input_ids"][1]
    masked, labels = mask_rows(mlm_rows(ids_per_text), mask_id)
    top1 = top5 = 0
    predictions = []
    with tempfile.TemporaryDirectory() as tmp:
        for first in range(0, masked.shape[0], ROWS_PER_RUN):
            chunk = masked[first:first + ROWS_PER_RUN]
            (Path(tmp) / "in.json").write_text(json.dumps({"input_ids": chunk.tolist()}))
            cli(args, "run", "--model", str(model_dir), "--head", "mlm", "--mask-token-id", str(mask_id),
                "--input", f"{tmp}/in.json", "--output", f"{tmp}/out.safetensors", "--threads", str(args.threads))
            out = read_safetensors(Path(tmp) / "out.safetensors")
            rows, positions = out["positions"][:, 0], out["positions"][:, 1]
            targets = labels[first:first + ROWS_PER_RUN][rows, positions]
            hits1, hits5 = top_k_hits(out["logits"], targets)
            top1, top5 = top1 + hits1, top5 + hits5
            predictions.append(out["logits"].argmax(axis=1))
    count = int((labels != -100).sum())
    figures = {"rows": int(masked.shape[0]), "tokens_per_row": SEQ, "masked_tokens": count,
               "top1": top1 / count, "top5": top5 / count}
    return figures, {"text_ids": np.concatenate([np.asarray(i, dtype=np.int64) for i in ids_per_text]),
                     "text_lengths": np.asarray([len(i) for i in ids_per_text], dtype=np.int64),
                     "masked": masked, "labels": labels, "mlm_top1": np.concatenate(predictions)}


def sections(args, model_dir, labels, texts):
    lines = cli(args, "classify", "--model", str(model_dir), "--batch-size", "32", "--threads", str(args.threads),
                stdin="\n".join(texts) + "\n").splitlines()
    predicted = [json.loads(line)["labels"][0]["label"] for line in lines]
    if len(predicted) != len(texts):
        sys.exit(f"classify gave {len(predicted)} lines for {len(texts)} texts")
    counts = Counter(labels)
    majority, majority_count = counts.most_common(1)[0]
    right = sum(p == t for p, t in zip(predicted, labels))
    per_class = {name: {"texts": n, "accuracy": sum(p == t for p, t in zip(predicted, labels) if t == name) / n}
                 for name, n in sorted(counts.items())}
    figures = {"texts": len(texts), "accuracy": right / len(texts), "majority_class": majority,
               "majority_baseline": majority_count / len(texts), "per_class": per_class}
    return figures, predicted


def compare_with_hf(hf, mlm_top1, section_predictions):
    """transformers' figures (evaluate_hf.py) and the number of its predictions that differ from ours."""
    theirs = hf.pop("predictions")
    if len(theirs["mlm_top1"]) != len(mlm_top1) or len(theirs["sections"]) != len(section_predictions):
        sys.exit("--hf: its predictions do not cover the same inputs (run evaluate_hf.py on this --inputs)")
    hf["masked_lm"]["top1_differing_from_flashdeberta"] = int((np.asarray(theirs["mlm_top1"]) != mlm_top1).sum())
    hf["sections"]["differing_from_flashdeberta"] = sum(a != b for a, b in zip(theirs["sections"], section_predictions))
    return hf


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cli", type=Path, default=ROOT / "build" / "bin" / "flashdeberta")
    parser.add_argument("--work", type=Path, default=HERE / "work")
    parser.add_argument("--models", type=Path, default=ROOT / "models")
    parser.add_argument("--out", type=Path, default=ROOT / "models" / "heldout-figures.json")
    parser.add_argument("--inputs", type=Path)
    parser.add_argument("--hf", type=Path)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()
    inputs = args.inputs or args.work / "eval" / "mlm_inputs.npz"
    texts = (args.work / "corpus" / "heldout.txt").read_text(encoding="utf-8").splitlines()
    section_labels, section_texts = read_sections(args.work / "sections" / "heldout.tsv")

    start = time.monotonic()
    mlm_figures, arrays = masked_lm(args, args.models / "tiny-en", texts)
    mlm_seconds = time.monotonic() - start
    start = time.monotonic()
    section_figures, predicted = sections(args, args.models / "tiny-en-sections", section_labels, section_texts)
    section_seconds = time.monotonic() - start

    inputs.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(inputs, **arrays, section_predictions=np.asarray(predicted))
    figures = {"measured_with": "flashdeberta CLI (" + args.cli.name + "), float32, tools/train-tiny/evaluate_cli.py",
               "masked_lm": mlm_figures, "sections": section_figures,
               "seconds": {"masked_lm": round(mlm_seconds, 1), "sections": round(section_seconds, 1)}}
    if args.hf:
        figures["transformers"] = compare_with_hf(json.loads(args.hf.read_text()), arrays["mlm_top1"], predicted)
    args.out.write_text(json.dumps(figures, indent=1) + "\n")
    print(json.dumps({"masked_lm_top1": mlm_figures["top1"], "masked_lm_top5": mlm_figures["top5"],
                      "sections_accuracy": section_figures["accuracy"],
                      "majority_baseline": section_figures["majority_baseline"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

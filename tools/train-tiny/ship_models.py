#!/usr/bin/env python3
"""Turns the trained float32 checkpoints into the shipped models: models/tiny-en and models/tiny-en-sections.

    python3 tools/train-tiny/ship_models.py [--mlm DIR] [--sections DIR] [--tokenizer models/tiny-en] [--out models]

Each shipped model is what a user downloads from the Hub: config.json (the classifier's with id2label),
one model.safetensors in float16, and the tokenizer files (spm.model, tokenizer_config.json,
special_tokens_map.json, added_tokens.json). Float16 halves the size (models/ holds at most 16 MB per model);
every parity check and held-out figure is measured on these float16 weights, read back as float32.
"""
import argparse
import shutil
import sys
from pathlib import Path

import torch
from transformers import DebertaV2ForMaskedLM, DebertaV2ForSequenceClassification

HERE = Path(__file__).resolve().parent
TOKENIZER_FILES = ("spm.model", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json")
SIZE_LIMIT = 16 * 1000 * 1000


def ship(model_class, source, tokenizer, destination):
    model = model_class.from_pretrained(str(source), dtype=torch.float32).half()
    destination.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(destination), max_shard_size="1GB")
    if tokenizer.resolve() != destination.resolve():
        for name in TOKENIZER_FILES:
            shutil.copyfile(tokenizer / name, destination / name)
    size = sum(f.stat().st_size for f in destination.iterdir())
    if size > SIZE_LIMIT:
        sys.exit(f"{destination}: {size} bytes, over the {SIZE_LIMIT}-byte limit of a shipped model")
    print(f"{destination}: {size} bytes")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mlm", type=Path)
    parser.add_argument("--sections", type=Path)
    parser.add_argument("--tokenizer", type=Path, default=HERE.parent.parent / "models" / "tiny-en")
    parser.add_argument("--out", type=Path, default=HERE.parent.parent / "models")
    args = parser.parse_args()
    if args.mlm:
        ship(DebertaV2ForMaskedLM, args.mlm, args.tokenizer, args.out / "tiny-en")
    if args.sections:
        ship(DebertaV2ForSequenceClassification, args.sections, args.tokenizer, args.out / "tiny-en-sections")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""Encodes the pretraining corpus into token ids once, here, so the GPU machine's minutes go to training.

    python3 tools/train-tiny/encode_corpus.py [--work DIR] [--tokenizer models/tiny-en]

Reads WORK/corpus/{train,heldout}.txt, writes WORK/corpus/{train,heldout}.ids.npy: uint16, every text's
pieces followed by [SEP] (2), concatenated in corpus order; pretrain_mlm.py cuts them into rows. Debian's
spm_encode does the encoding: the same spm.model that DebertaV2Tokenizer wraps, so the ids are the ones the
tokenizer gives a text without special tokens (pretrain_mlm.py checks a sample against transformers).
"""
import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SEP_ID = 2


def encode(text_path, model_path):
    completed = subprocess.run(["spm_encode", f"--model={model_path}", "--output_format=id",
                                f"--input={text_path}"], check=True, capture_output=True, text=True)
    ids = []
    for line in completed.stdout.splitlines():
        ids.extend(int(piece) for piece in line.split())
        ids.append(SEP_ID)
    array = np.asarray(ids, dtype=np.int64)
    if array.max() >= 1 << 16:
        sys.exit(f"{text_path}: id {array.max()} does not fit uint16")
    return array.astype(np.uint16)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=HERE / "work")
    parser.add_argument("--tokenizer", type=Path, default=HERE.parent.parent / "models" / "tiny-en")
    args = parser.parse_args()
    model = args.tokenizer / "spm.model"
    if not model.exists():
        sys.exit(f"{model}: not found; run tools/train-tiny/train_tokenizer.py first")
    for split in ("train", "heldout"):
        text = args.work / "corpus" / f"{split}.txt"
        ids = encode(text, model)
        np.save(args.work / "corpus" / f"{split}.ids.npy", ids)
        print(f"{split}: {len(ids)} ids")
    return 0


if __name__ == "__main__":
    sys.exit(main())

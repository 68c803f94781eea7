#!/usr/bin/env python3
"""Our tokenizer's ids of every held-out text against transformers', on the GPU machine.

    here:  flashdeberta tokenize --model models/tiny-en < WORK/corpus/heldout.txt > ids.jsonl
           python3 tools/train-tiny/check_tokenizer_parity.py --save ids.jsonl WORK/heldout_ids.npz
    there: python3 tools/train-tiny/check_tokenizer_parity.py --models models WORK/heldout_ids.npz WORK/corpus/heldout.txt

Prints how many texts get identical ids (special tokens left out) and, for the others, the text's start and
whether NFKC changes it (transformers 5.x leaves the NFKC map of spm.model out; README "Tokenizers").
tools/train-tiny/explain_tokenizer_differences.py shows where two segmentations of a text part ways.
"""
import argparse
import json
import unicodedata
from pathlib import Path

import numpy as np


def save(jsonl, out):
    ids = [json.loads(line)["input_ids"][1:-1] for line in Path(jsonl).read_text(encoding="utf-8").splitlines()]
    np.savez_compressed(out, text_ids=np.concatenate([np.asarray(i, dtype=np.int64) for i in ids]),
                        text_lengths=np.asarray([len(i) for i in ids]))


def check(ids_file, texts_file, models):
    from transformers import AutoTokenizer

    d = np.load(ids_file)
    texts = Path(texts_file).read_text(encoding="utf-8").splitlines()
    ours = np.split(d["text_ids"], np.cumsum(d["text_lengths"])[:-1])
    theirs = AutoTokenizer.from_pretrained(str(Path(models) / "tiny-en"))(texts, add_special_tokens=False)["input_ids"]
    differing = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a.tolist() != b]
    print(f"texts {len(texts)}, identical ids {len(texts) - len(differing)}")
    for i in differing:
        print(f"  differs: text {i} (NFKC changes it: {unicodedata.normalize('NFKC', texts[i]) != texts[i]}): "
              f"{texts[i][:60]!r}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--save", metavar="JSONL", help="turn `flashdeberta tokenize` output into the .npz")
    parser.add_argument("--models", default="models")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    if args.save:
        save(args.save, args.files[0])
    else:
        check(args.files[0], args.files[1], args.models)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Trains the tiny models' SentencePiece tokenizer on the corpus of build_corpus.py, with Debian's spm_train.

    python3 tools/train-tiny/train_tokenizer.py [--work DIR] [--out models/tiny-en] [--vocab 12000]

A Unigram model with nmt_nfkc normalization (what DeBERTa-v3's spm.model uses) and DeBERTa-v3's special-token
layout: [PAD] 0, [CLS] 1, [SEP] 2, [UNK] 3, the pieces, then [MASK] as an added token right after them
(added_tokens.json), as in microsoft/deberta-v3-base. Writes spm.model, tokenizer_config.json,
special_tokens_map.json and added_tokens.json into OUT. One thread and no sampling of the input, so the same
corpus gives the same model.
"""
import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

# DeBERTa's special-token files, as the test tokenizers write them.
sys.path.insert(0, str(HERE.parent.parent / "tests" / "fixtures" / "tokenizers"))
from train_vocabs import special_tokens_map, write_json  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=HERE / "work")
    parser.add_argument("--out", type=Path, default=HERE.parent.parent / "models" / "tiny-en")
    parser.add_argument("--vocab", type=int, default=12000)
    args = parser.parse_args()
    corpus = args.work / "corpus" / "train.txt"
    if not corpus.exists():
        sys.exit(f"{corpus}: not found; run tools/train-tiny/build_corpus.py first")
    if shutil.which("spm_train") is None:
        sys.exit("spm_train not found: apt-get install sentencepiece")
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        # spm.model records its input and prefix paths: relative ones, from a copy, keep it byte-identical
        # across machines and runs.
        shutil.copyfile(corpus, Path(tmp) / "train.txt")
        prefix = Path(tmp) / "spm"
        subprocess.run([
            "spm_train", "--input=train.txt", "--model_prefix=spm", "--model_type=unigram",
            f"--vocab_size={args.vocab}", "--character_coverage=0.9999", "--num_threads=1",
            "--normalization_rule_name=nmt_nfkc", "--pad_id=0", "--pad_piece=[PAD]", "--bos_id=1",
            "--bos_piece=[CLS]", "--eos_id=2", "--eos_piece=[SEP]", "--unk_id=3", "--unk_piece=[UNK]",
            "--shuffle_input_sentence=false", "--input_sentence_size=0", "--max_sentence_length=16384",
        ], check=True, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        pieces = sum(1 for _ in open(f"{prefix}.vocab", encoding="utf-8"))
        shutil.copyfile(f"{prefix}.model", args.out / "spm.model")
    write_json(args.out / "tokenizer_config.json", {"do_lower_case": False, "vocab_type": "spm",
                                                    "model_max_length": 512})
    write_json(args.out / "special_tokens_map.json", special_tokens_map())
    write_json(args.out / "added_tokens.json", {"[MASK]": pieces})
    print(json.dumps({"pieces": pieces, "mask_id": pieces, "out": str(args.out)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

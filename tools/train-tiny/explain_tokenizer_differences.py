#!/usr/bin/env python3
"""Shows where three encoders of one spm.model part ways on given texts, with the pieces and their scores.

    python3 tools/train-tiny/explain_tokenizer_differences.py --model models/tiny-en TEXT_FILE OURS_IDS...

TEXT_FILE holds one text per line; OURS_IDS is, per text, a file of our ids (`flashdeberta tokenize`,
without [CLS] and [SEP]) separated by spaces. The encoders compared with ours: transformers' tokenizer
(AutoTokenizer, the `tokenizers` Unigram it converts spm.model into) and the sentencepiece library
itself. For every place where two of them disagree the script prints the span, each encoder's pieces
there and the sum of their log-probabilities in float64, so the better-scoring segmentation is visible.
Runs where transformers and sentencepiece are installed (the GPU machine).
"""
import argparse
from pathlib import Path

import sentencepiece
from transformers import AutoTokenizer


def spans(ids, pieces_of):
    """The character span of each piece, from the pieces' lengths ('▁' stands for one space)."""
    out, position = [], 0
    for piece_id in ids:
        length = len(pieces_of[piece_id])
        out.append((position, position + length))
        position += length
    return out


def regions(a, b, pieces_of):
    """Runs of pieces where two segmentations of one text differ, as (chars, a_slice, b_slice)."""
    sa, sb = spans(a, pieces_of), spans(b, pieces_of)
    i = j = 0
    while i < len(a) and j < len(b):
        if sa[i] == sb[j] and a[i] == b[j]:
            i, j = i + 1, j + 1
            continue
        i0, j0 = i, j
        # Advance both until they end on a common character boundary again.
        while True:
            if sa[i][1] == sb[j][1]:
                break
            if sa[i][1] < sb[j][1]:
                i += 1
            else:
                j += 1
        yield (sa[i0][0], sa[i][1]), slice(i0, i + 1), slice(j0, j + 1)
        i, j = i + 1, j + 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("texts", type=Path)
    parser.add_argument("ours", type=Path, nargs="+")
    args = parser.parse_args()
    processor = sentencepiece.SentencePieceProcessor(model_file=str(args.model / "spm.model"))
    pieces_of = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
    score_of = [processor.get_score(i) for i in range(processor.get_piece_size())]
    tokenizer = AutoTokenizer.from_pretrained(str(args.model))
    texts = args.texts.read_text(encoding="utf-8").splitlines()
    print(f"sentencepiece {sentencepiece.__version__}, tokenizer {type(tokenizer).__name__}")
    for number, (text, ours_path) in enumerate(zip(texts, args.ours)):
        encoders = {
            "ours": [int(t) for t in ours_path.read_text().split()],
            "transformers": tokenizer(text, add_special_tokens=False)["input_ids"],
            "sentencepiece": processor.encode(text),
        }
        print(f"\n== text {number}: {len(text)} characters, {text[:60]!r}...")
        for name, ids in encoders.items():
            print(f"   {name:13s} {len(ids)} pieces, total log-probability {sum(score_of[i] for i in ids):.6f}")
        names = list(encoders)
        for x in range(len(names)):
            for y in range(x + 1, len(names)):
                a, b = encoders[names[x]], encoders[names[y]]
                if a == b:
                    print(f"   {names[x]} == {names[y]}")
                    continue
                for chars, sa, sb in regions(a, b, pieces_of):
                    show = lambda ids: " ".join(f"{pieces_of[i]}({score_of[i]:.5f})" for i in ids)
                    print(f"   {names[x]} vs {names[y]} at pieces {sa.start}/{sb.start}, chars {chars}:")
                    print(f"      {names[x]:13s} {show(a[sa])}  sum {sum(score_of[i] for i in a[sa]):.6f}")
                    print(f"      {names[y]:13s} {show(b[sb])}  sum {sum(score_of[i] for i in b[sb]):.6f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

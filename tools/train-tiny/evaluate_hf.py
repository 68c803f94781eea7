#!/usr/bin/env python3
"""The held-out figures of evaluate_cli.py measured again through transformers, on the GPU machine.

    python3 tools/train-tiny/evaluate_hf.py --models DIR --work DIR --inputs mlm_inputs.npz [--out FILE]

--inputs is what evaluate_cli.py saved: our tokenizer's ids of every held-out text and the masked rows.
In float32 with the eager attention path and TF32 off, this script measures:
  - tokenizer: transformers' ids of each held-out text against ours (transformers 5.x drops the NFKC map of
    spm.model, README "Tokenizers": texts NFKC changes are counted apart);
  - masked LM: top-1 and top-5 over the same masked rows;
  - sections: every held-out description classified whole, and the accuracy.
The output JSON also holds every prediction (the top-1 id of each masked token in row-major order, the top
label of each description); evaluate_cli.py --hf FILE compares them with ours.
"""
import argparse
import json
import unicodedata
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers import AutoTokenizer, DebertaV2ForMaskedLM, DebertaV2ForSequenceClassification

from heldout_protocol import read_sections, top_k_hits


def tokenizer_check(tokenizer, texts, text_ids, text_lengths):
    ours = np.split(text_ids, np.cumsum(text_lengths)[:-1])
    theirs = tokenizer(texts, add_special_tokens=False)["input_ids"]
    differing = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a.tolist() != b]
    nfkc = [i for i in differing if unicodedata.normalize("NFKC", texts[i]) != texts[i]]
    return {"texts": len(texts), "identical": len(texts) - len(differing), "differing_nfkc": len(nfkc),
            "differing_other": [texts[i][:200] for i in differing if i not in nfkc][:5]}


@torch.no_grad()
def masked_lm(model, masked, labels):
    top1 = top5 = 0
    predictions = []
    for first in range(0, masked.shape[0], 128):
        ids = torch.from_numpy(masked[first:first + 128]).cuda()
        rows_labels = labels[first:first + 128]
        logits = model(input_ids=ids).logits.float().cpu().numpy()
        selected = rows_labels != -100  # row-major, as evaluate_cli.py's positions
        hits1, hits5 = top_k_hits(logits[selected], rows_labels[selected])
        top1, top5 = top1 + hits1, top5 + hits5
        predictions.append(logits[selected].argmax(axis=1))
    predictions = np.concatenate(predictions)
    count = int((labels != -100).sum())
    return {"masked_tokens": count, "top1": top1 / count, "top5": top5 / count}, predictions.tolist()


@torch.no_grad()
def sections(model, tokenizer, labels, texts):
    names = [model.config.id2label[i] for i in range(model.config.num_labels)]
    # Eager attention holds heads x L x L scores per text: batches of similar lengths, at most 16k padded
    # tokens, so that the longest descriptions (thousands of tokens) run alone.
    lengths = [len(ids) for ids in tokenizer(texts)["input_ids"]]
    order = sorted(range(len(texts)), key=lambda i: lengths[i])
    predicted = [None] * len(texts)
    first = 0
    while first < len(order):
        count = max(1, min(64, 16384 // lengths[order[min(first + 63, len(order) - 1)]]))
        chosen = order[first:first + count]
        batch = tokenizer([texts[i] for i in chosen], padding=True, return_tensors="pt").to("cuda")
        for i, label in zip(chosen, model(**batch).logits.argmax(-1).tolist()):
            predicted[i] = names[label]
        first += count
    right = sum(p == t for p, t in zip(predicted, labels))
    return {"texts": len(texts), "accuracy": right / len(texts)}, predicted


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--inputs", type=Path, required=True)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    inputs = np.load(args.inputs)
    texts = (args.work / "corpus" / "heldout.txt").read_text(encoding="utf-8").splitlines()
    section_labels, section_texts = read_sections(args.work / "sections" / "heldout.tsv")

    tokenizer = AutoTokenizer.from_pretrained(str(args.models / "tiny-en"))
    mlm = DebertaV2ForMaskedLM.from_pretrained(str(args.models / "tiny-en"), dtype=torch.float32,
                                               attn_implementation="eager").cuda().eval()
    classifier = DebertaV2ForSequenceClassification.from_pretrained(
        str(args.models / "tiny-en-sections"), dtype=torch.float32, attn_implementation="eager").cuda().eval()
    mlm_figures, mlm_top1 = masked_lm(mlm, inputs["masked"], inputs["labels"])
    section_figures, section_predictions = sections(classifier, tokenizer, section_labels, section_texts)
    figures = {
        "measured_with": f"transformers {transformers.__version__}, float32 eager, tools/train-tiny/evaluate_hf.py",
        "tokenizer": tokenizer_check(tokenizer, texts, inputs["text_ids"], inputs["text_lengths"]),
        "masked_lm": mlm_figures,
        "sections": section_figures,
    }
    print(json.dumps(figures, indent=1))
    figures["predictions"] = {"mlm_top1": mlm_top1, "sections": section_predictions}
    if args.out:
        args.out.write_text(json.dumps(figures) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

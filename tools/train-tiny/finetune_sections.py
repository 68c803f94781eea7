#!/usr/bin/env python3
"""Fine-tunes the tiny DeBERTa-v3 into models/tiny-en-sections: Debian package description -> archive section.

    python3 tools/train-tiny/finetune_sections.py --sections DIR --backbone DIR --out DIR
        [--epochs 2] [--minutes 5] [--seed 0]

--sections holds build_corpus.py's sections/{train,heldout}.tsv (label TAB description); --backbone is
the masked LM as shipped (models/tiny-en, float16 weights read as float32; its tokenizer files beside it
or given by --tokenizer); --out receives the
classifier in HF format (config.json with id2label, model.safetensors in float32, sharded under 16 MB) and finetune_state.json
with the held-out accuracy, the majority-class baseline and the per-class counts.

Recipe: DebertaV2ForSequenceClassification on the backbone (pooler and classifier new), texts truncated to
256 tokens, batches of 64 in a seeded order, AdamW at 2e-4 with 6% warmup and linear decay, bf16 autocast,
--epochs passes; --minutes is a guard for the device tool's time limit (the state file records the steps
actually run against the schedule's total).
"""
import argparse
import time
from collections import Counter
from pathlib import Path

import torch
from transformers import DebertaV2ForSequenceClassification, DebertaV2Tokenizer

from checkpoints import save_checkpoint
from heldout_protocol import read_sections

MAX_TOKENS = 256
BATCH = 64
PEAK_LR = 2e-4
WARMUP_FRACTION = 0.06


def encode(tokenizer, texts):
    """(N, MAX_TOKENS) ids and mask, padded with [PAD]: one tensor per split, resident on the GPU."""
    batch = tokenizer(texts, truncation=True, max_length=MAX_TOKENS, padding="max_length", return_tensors="pt")
    return batch["input_ids"].cuda(), batch["attention_mask"].cuda()


@torch.no_grad()
def accuracy(model, ids, mask, targets):
    model.eval()
    correct = 0
    for start in range(0, ids.shape[0], 256):
        logits = model(input_ids=ids[start:start + 256], attention_mask=mask[start:start + 256]).logits
        correct += (logits.argmax(-1) == targets[start:start + 256]).sum().item()
    model.train()
    return correct / ids.shape[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sections", type=Path, required=True)
    parser.add_argument("--backbone", type=Path, required=True)
    parser.add_argument("--tokenizer", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    deadline = time.monotonic() + args.minutes * 60
    torch.manual_seed(args.seed)
    tokenizer = DebertaV2Tokenizer.from_pretrained(str(args.tokenizer or args.backbone))
    train_labels, train_texts = read_sections(args.sections / "train.tsv")
    held_labels, held_texts = read_sections(args.sections / "heldout.tsv")
    names = sorted(set(train_labels))
    index = {name: i for i, name in enumerate(names)}
    train_ids, train_mask = encode(tokenizer, train_texts)
    held_ids, held_mask = encode(tokenizer, held_texts)
    train_targets = torch.tensor([index[n] for n in train_labels]).cuda()
    held_targets = torch.tensor([index[n] for n in held_labels]).cuda()

    model = DebertaV2ForSequenceClassification.from_pretrained(
        str(args.backbone), num_labels=len(names), id2label=dict(enumerate(names)), label2id=index,
        dtype=torch.float32).cuda().train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=PEAK_LR, weight_decay=0.01)
    steps_per_epoch = train_ids.shape[0] // BATCH
    total_steps = steps_per_epoch * args.epochs
    warmup = max(1, int(total_steps * WARMUP_FRACTION))
    generator = torch.Generator().manual_seed(args.seed)
    step = 0
    for epoch in range(args.epochs):
        order = torch.randperm(train_ids.shape[0], generator=generator).cuda()
        for first in range(0, steps_per_epoch * BATCH, BATCH):
            if time.monotonic() > deadline:
                break
            chosen = order[first:first + BATCH]
            lr = PEAK_LR * min((step + 1) / warmup, max(0.0, (total_steps - step) / (total_steps - warmup)))
            for group in optimizer.param_groups:
                group["lr"] = lr
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=train_ids[chosen], attention_mask=train_mask[chosen],
                             labels=train_targets[chosen]).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
        print(f"epoch {epoch + 1}: step {step}, loss {loss.item():.3f}, held-out accuracy "
              f"{accuracy(model, held_ids, held_mask, held_targets):.4f}", flush=True)

    counts = Counter(held_labels)
    majority = counts.most_common(1)[0]
    state = {"steps": step, "total_steps": total_steps, "epochs": args.epochs, "seed": args.seed,
             "heldout": {"texts": len(held_labels), "accuracy": accuracy(model, held_ids, held_mask, held_targets),
                         "majority_class": majority[0], "majority_baseline": majority[1] / len(held_labels),
                         "counts": dict(sorted(counts.items()))}}
    save_checkpoint(model, args.out, "finetune_state.json", state)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

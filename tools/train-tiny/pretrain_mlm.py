#!/usr/bin/env python3
"""Masked-LM pretraining of the tiny DeBERTa-v3 (models/tiny-en) with transformers, on the GPU machine.

6 layers, hidden 256, 4 heads, intermediate 768, 256 position buckets, 12k pieces: about 7.2 M parameters,
14.4 MB in float16 (the shipped form; models/ holds at most 16 MB per model).

    python3 tools/train-tiny/pretrain_mlm.py --corpus DIR --tokenizer DIR --out DIR
        [--resume DIR] [--minutes 8] [--seed 0]

DIR layouts: --corpus holds train.txt and heldout.txt (build_corpus.py's corpus/), --tokenizer the files of
train_tokenizer.py; --out receives the checkpoint in HF format (config.json, model.safetensors in float32,
sharded under 16 MB so that the device tool brings it back) and train_state.json (step, tokens seen, the
held-out figures). --resume continues from such a checkpoint: same data order (the step picks the batch),
same schedule, the optimizer restarted with its moments at zero (its state is too large to carry between
device calls). Each call stops by itself after --minutes, so a run of several calls under the device
tool's 10-minute limit trains one model.

Data: every text of train.txt tokenized once (DebertaV2Tokenizer over the same spm.model), concatenated with
[SEP] between texts, cut into rows of SEQ tokens with [CLS] in front; 15% of the non-special tokens chosen,
80% of those replaced by [MASK], 10% by a random token, 10% kept (BERT's recipe), per step from a generator
seeded by (seed, step).
"""
import argparse
import json
import math
import os
import time
from pathlib import Path

import numpy as np
import torch
from transformers import DebertaV2Config, DebertaV2ForMaskedLM, DebertaV2Tokenizer

SEQ = 128
BATCH = 256
PEAK_LR = 1e-3
WARMUP = 1000
TOTAL_STEPS = 30000


def model_config(vocab_size):
    return DebertaV2Config(
        vocab_size=vocab_size, hidden_size=256, num_hidden_layers=6, num_attention_heads=4,
        intermediate_size=768, hidden_act="gelu", max_position_embeddings=512, type_vocab_size=0,
        relative_attention=True, position_buckets=256, max_relative_positions=-1, norm_rel_ebd="layer_norm",
        share_att_key=True, pos_att_type=["p2c", "c2p"], position_biased_input=False, layer_norm_eps=1e-7,
        pad_token_id=0, initializer_range=0.02)


def token_rows(path, tokenizer):
    """(rows, SEQ) int32: the texts' ids with [SEP] after each, cut into rows that start with [CLS]."""
    cache = path.with_suffix(".ids.npy")
    if cache.exists():
        ids = np.load(cache)
    else:
        texts = path.read_text(encoding="utf-8").splitlines()
        pieces = tokenizer(texts, add_special_tokens=False)["input_ids"]
        ids = np.fromiter((t for p in pieces for t in p + [tokenizer.sep_token_id]), dtype=np.int32)
        np.save(cache, ids)
    body = SEQ - 1
    rows = ids[: len(ids) // body * body].reshape(-1, body)
    cls = np.full((rows.shape[0], 1), tokenizer.cls_token_id, dtype=np.int32)
    return np.concatenate([cls, rows], axis=1)


def mask_batch(rows, tokenizer, vocab_size, generator):
    input_ids = rows.clone()
    labels = rows.clone()
    special = (rows == tokenizer.cls_token_id) | (rows == tokenizer.sep_token_id) | (rows == tokenizer.pad_token_id)
    chosen = (torch.rand(rows.shape, generator=generator, device=rows.device) < 0.15) & ~special
    labels[~chosen] = -100
    roll = torch.rand(rows.shape, generator=generator, device=rows.device)
    input_ids[chosen & (roll < 0.8)] = tokenizer.mask_token_id
    randomized = chosen & (roll >= 0.8) & (roll < 0.9)
    random_ids = torch.randint(4, tokenizer.mask_token_id, rows.shape, generator=generator, device=rows.device)
    input_ids[randomized] = random_ids[randomized]
    return input_ids, labels


def learning_rate(step):
    if step < WARMUP:
        return PEAK_LR * (step + 1) / WARMUP
    return PEAK_LR * max(0.0, (TOTAL_STEPS - step) / (TOTAL_STEPS - WARMUP))


@torch.no_grad()
def evaluate(model, rows, tokenizer, vocab_size, seed):
    """Top-1 and top-5 accuracy on the masked tokens of every held-out row (masks drawn from seed)."""
    model.eval()
    generator = torch.Generator(device="cuda").manual_seed(seed + 10_000_019)
    top1 = top5 = count = 0
    for start in range(0, rows.shape[0], BATCH):
        batch = rows[start:start + BATCH]
        input_ids, labels = mask_batch(batch, tokenizer, vocab_size, generator)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=input_ids).logits.float()
        selected = labels != -100
        best = logits[selected].topk(5, dim=-1).indices
        target = labels[selected].unsqueeze(-1)
        top1 += (best[:, :1] == target).sum().item()
        top5 += (best == target).any(dim=-1).sum().item()
        count += selected.sum().item()
    model.train()
    return {"masked_tokens": count, "top1": top1 / count, "top5": top5 / count}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--tokenizer", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--resume", type=Path)
    parser.add_argument("--minutes", type=float, default=8.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    start_time = time.monotonic()
    torch.manual_seed(args.seed)
    tokenizer = DebertaV2Tokenizer.from_pretrained(str(args.tokenizer))
    vocab_size = math.ceil(len(tokenizer) / 8) * 8
    train = torch.from_numpy(token_rows(args.corpus / "train.txt", tokenizer)).long().cuda()
    held = torch.from_numpy(token_rows(args.corpus / "heldout.txt", tokenizer)).long().cuda()

    state = {"step": 0}
    if args.resume:
        model = DebertaV2ForMaskedLM.from_pretrained(str(args.resume), torch_dtype=torch.float32)
        state = json.loads((args.resume / "train_state.json").read_text())
    else:
        model = DebertaV2ForMaskedLM(model_config(vocab_size))
    model.cuda().train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=PEAK_LR, betas=(0.9, 0.98), eps=1e-6, weight_decay=0.01)
    order = torch.randperm(train.shape[0], generator=torch.Generator().manual_seed(args.seed)).cuda()

    step = state["step"]
    losses = []
    while step < TOTAL_STEPS and time.monotonic() - start_time < args.minutes * 60:
        first = (step * BATCH) % (order.shape[0] - BATCH)
        rows = train[order[first:first + BATCH]]
        generator = torch.Generator(device="cuda").manual_seed(args.seed * 1_000_003 + step)
        input_ids, labels = mask_batch(rows, tokenizer, vocab_size, generator)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=input_ids, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        step += 1
        if step % 500 == 0:
            print(f"step {step}: loss {np.mean(losses[-500:]):.3f}, lr {learning_rate(step):.2e}, "
                  f"{time.monotonic() - start_time:.0f} s", flush=True)

    figures = evaluate(model, held, tokenizer, vocab_size, args.seed)
    state = {"step": step, "tokens_seen": step * BATCH * SEQ, "heldout": figures, "seed": args.seed,
             "last_loss": float(np.mean(losses[-200:])) if losses else None}
    args.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(args.out), max_shard_size="15MB")
    (args.out / "train_state.json").write_text(json.dumps(state, indent=1) + "\n")
    print(json.dumps(state), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""Masked-LM pretraining of the tiny DeBERTa-v3 (models/tiny-en) with transformers, on the GPU machine.

6 layers, hidden 256, 4 heads, intermediate 768, 256 position buckets, 12k pieces: about 7.2 M parameters,
14.4 MB in float16 (the shipped form; models/ holds at most 16 MB per model).

    python3 tools/train-tiny/pretrain_mlm.py --corpus DIR --tokenizer DIR --out DIR
        [--resume DIR] [--minutes 8] [--total-steps N] [--seed 0]

DIR layouts: --corpus holds encode_corpus.py's {train,heldout}.ids.npy (and heldout.txt, to check those ids
against transformers' tokenizer); --tokenizer the files of train_tokenizer.py; --out receives the checkpoint
in HF format (config.json, model.safetensors in float32, sharded under 16 MB so that the device tool brings
it back) and train_state.json (steps, schedule length, tokens seen, the held-out figures).

Schedule: linear warmup over 1000 steps, then linear decay to zero at --total-steps. Left at 0, the length
is what fits in --minutes at the speed of the first 100 steps after warmup starts, rounded down to 500; the
state file records it, and --total-steps with the same seed repeats the run step for step. --resume
continues a run from its saved checkpoint (same data order, same schedule; the optimizer restarts with its
moments at zero, its state being too large to carry between device calls).

Data: the split's ids cut into rows of SEQ tokens with [CLS] in front (texts already end in [SEP]); 15% of
the non-special tokens chosen, 80% of those replaced by [MASK], 10% by a random token, 10% kept (BERT's
recipe), per step from a generator seeded by (seed, step). Held-out figures: top-1 and top-5 over the
masked tokens of every held-out row, masks drawn the same way from a fixed seed.
"""
import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import torch
from transformers import DebertaV2Config, DebertaV2ForMaskedLM, DebertaV2Tokenizer

from checkpoints import save_checkpoint

SEQ = 128
BATCH = 256
PEAK_LR = 1e-3
WARMUP = 1000
CALIBRATION_STEPS = 100


def model_config(vocab_size):
    return DebertaV2Config(
        vocab_size=vocab_size, hidden_size=256, num_hidden_layers=6, num_attention_heads=4,
        intermediate_size=768, hidden_act="gelu", max_position_embeddings=512, type_vocab_size=0,
        relative_attention=True, position_buckets=256, max_relative_positions=-1, norm_rel_ebd="layer_norm",
        share_att_key=True, pos_att_type=["p2c", "c2p"], position_biased_input=False, layer_norm_eps=1e-7,
        pad_token_id=0, initializer_range=0.02)


def token_rows(corpus, split, tokenizer):
    """(rows, SEQ) int64: encode_corpus.py's ids of one split cut into rows that start with [CLS].

    Where the split's text is present, its first texts are encoded again by transformers' tokenizer: the ids
    trained on must be the ones a user's tokenizer gives.
    """
    ids = np.load(corpus / f"{split}.ids.npy").astype(np.int64)
    text_path = corpus / f"{split}.txt"
    if text_path.exists():
        texts = text_path.read_text(encoding="utf-8").splitlines()[:200]
        pieces = tokenizer(texts, add_special_tokens=False)["input_ids"]
        expected = [t for p in pieces for t in p + [tokenizer.sep_token_id]]
        if ids[: len(expected)].tolist() != expected:
            raise SystemExit(f"{text_path}: encode_corpus.py's ids differ from transformers' tokenizer")
    body = SEQ - 1
    rows = ids[: len(ids) // body * body].reshape(-1, body)
    cls = np.full((rows.shape[0], 1), tokenizer.cls_token_id, dtype=np.int64)
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


def masked_lm_loss(model, input_ids, labels):
    """HF's masked-LM loss, with the vocabulary GEMM and softmax only at the masked 15% of positions: the
    same mean cross-entropy as model(input_ids, labels=labels).loss, at a fraction of its largest GEMM."""
    head = getattr(model, "cls", None)  # the legacy head (config.legacy true, what model_config builds)
    if head is None:
        return model(input_ids=input_ids, labels=labels).loss
    hidden = model.deberta(input_ids=input_ids).last_hidden_state
    selected = labels != -100
    logits = head(hidden[selected])
    return torch.nn.functional.cross_entropy(logits.float(), labels[selected])


def learning_rate(step, total_steps):
    if step < WARMUP:
        return PEAK_LR * (step + 1) / WARMUP
    return PEAK_LR * max(0.0, (total_steps - step) / (total_steps - WARMUP))


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
    parser.add_argument("--total-steps", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    start_time = time.monotonic()
    deadline = start_time + args.minutes * 60
    torch.manual_seed(args.seed)
    tokenizer = DebertaV2Tokenizer.from_pretrained(str(args.tokenizer))
    vocab_size = math.ceil(len(tokenizer) / 8) * 8
    train = torch.from_numpy(token_rows(args.corpus, "train", tokenizer)).cuda()
    held = torch.from_numpy(token_rows(args.corpus, "heldout", tokenizer)).cuda()

    state = {"step": 0, "total_steps": args.total_steps}
    if args.resume:
        model = DebertaV2ForMaskedLM.from_pretrained(str(args.resume), dtype=torch.float32)
        state = json.loads((args.resume / "train_state.json").read_text())
    else:
        model = DebertaV2ForMaskedLM(model_config(vocab_size))
    model.cuda().train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=PEAK_LR, betas=(0.9, 0.98), eps=1e-6, weight_decay=0.01)
    order = torch.randperm(train.shape[0], generator=torch.Generator().manual_seed(args.seed)).cuda()

    step, total_steps = state["step"], state["total_steps"]
    losses = []
    calibration_start = None
    while (total_steps == 0 or step < total_steps) and time.monotonic() < deadline:
        first = (step * BATCH) % (order.shape[0] - BATCH)
        rows = train[order[first:first + BATCH]]
        generator = torch.Generator(device="cuda").manual_seed(args.seed * 1_000_003 + step)
        input_ids, labels = mask_batch(rows, tokenizer, vocab_size, generator)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, max(total_steps, WARMUP + 1))
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = masked_lm_loss(model, input_ids, labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        step += 1
        if total_steps == 0 and step == 10:
            calibration_start = time.monotonic()
        if total_steps == 0 and step == 10 + CALIBRATION_STEPS:
            # The schedule's length is what fits before the deadline (less a minute for the evaluation and
            # the save), rounded down to 500 steps; train_state.json records it, --total-steps repeats it.
            rate = CALIBRATION_STEPS / (time.monotonic() - calibration_start)
            total_steps = max(WARMUP + 500, int((deadline - time.monotonic() - 60) * rate + step) // 500 * 500)
            print(f"{rate:.1f} steps/s: a schedule of {total_steps} steps", flush=True)
        if step % 500 == 0:
            print(f"step {step}: loss {np.mean(losses[-500:]):.3f}, lr {learning_rate(step, total_steps):.2e}, "
                  f"{time.monotonic() - start_time:.0f} s", flush=True)
        if step % 2000 == 0:
            # The held-out curve, to see whether passes over this small corpus have started to overfit.
            print(f"step {step}: held-out {evaluate(model, held, tokenizer, vocab_size, args.seed)}", flush=True)

    figures = evaluate(model, held, tokenizer, vocab_size, args.seed)
    state = {"step": step, "total_steps": total_steps, "tokens_seen": step * BATCH * SEQ, "heldout": figures,
             "seed": args.seed, "last_loss": float(np.mean(losses[-200:])) if losses else None,
             "seconds": round(time.monotonic() - start_time)}
    save_checkpoint(model, args.out, "train_state.json", state)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""transformers' side of the fine-tuning comparison (run where transformers is, the GPU machine's CPU):

    python3 hf_finetune.py --init DIR --data DIR --ours DIR --ours-classify FILE --out DIR
        [--epochs 3 --learning-rate 1e-4 --batch-size 16 --max-length 64 --seed 42 --warmup-ratio 0.06
         --gradient-accumulation-steps 1 --logging-steps 50]

1. Fine-tunes --init (make_init.py's checkpoint) on DATA/train.jsonl with HF's Trainer and the recipe flashdeberta
   train ran (the same flags; DataCollatorWithPadding; evaluation each epoch on DATA/eval.jsonl: accuracy and macro
   F1), on the CPU in float32.
2. Loads --ours (the directory flashdeberta train wrote) with DebertaV2ForSequenceClassification and classifies
   DATA/eval.jsonl's texts; compares each text's label scores with --ours-classify (flashdeberta classify --jsonl's
   output for the same texts): the top label and the largest score difference.
Writes OUT/hf_eval.jsonl, OUT/identity.json and prints both.
"""
import argparse
import inspect
import json
from pathlib import Path

import numpy as np
import torch
from transformers import (AutoTokenizer, DataCollatorWithPadding, DebertaV2ForSequenceClassification, Trainer,
                          TrainingArguments)


def read_jsonl(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


class Examples(torch.utils.data.Dataset):
    def __init__(self, rows, tok, label2id, max_length):
        self.items = [dict(tok(r["text"], truncation=True, max_length=max_length), labels=label2id[r["label"]])
                      for r in rows]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def metrics(prediction):
    predicted = np.argmax(prediction.predictions, axis=-1)
    truth = prediction.label_ids
    f1 = []
    for c in sorted(set(truth) | set(predicted)):
        tp = np.sum((predicted == c) & (truth == c))
        fp = np.sum((predicted == c) & (truth != c))
        fn = np.sum((predicted != c) & (truth == c))
        f1.append(0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn))
    return {"accuracy": float(np.mean(predicted == truth)), "f1": float(np.mean(f1))}


def main():
    p = argparse.ArgumentParser()
    for name in ("--init", "--data", "--out"):
        p.add_argument(name, type=Path, required=True)
    p.add_argument("--ours", type=Path)  # with --ours-classify: the identity check (step 2)
    p.add_argument("--ours-classify", type=Path)
    p.add_argument("--epochs", type=float, default=3)
    p.add_argument("--learning-rate", type=float, default=1e-4)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--max-length", type=int, default=64)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--warmup-ratio", type=float, default=0.06)
    p.add_argument("--gradient-accumulation-steps", type=int, default=1)
    p.add_argument("--logging-steps", type=int, default=50)
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)

    tok = AutoTokenizer.from_pretrained(a.init)
    model = DebertaV2ForSequenceClassification.from_pretrained(a.init, dtype=torch.float32)
    label2id = model.config.label2id
    train = Examples(read_jsonl(a.data / "train.jsonl"), tok, label2id, a.max_length)
    evaluation = Examples(read_jsonl(a.data / "eval.jsonl"), tok, label2id, a.max_length)
    # transformers 5 folds warmup_ratio into warmup_steps (a value below 1 is the ratio, ceil(ratio x steps)).
    warmup = {"warmup_steps": a.warmup_ratio} if "warmup_ratio" not in inspect.signature(TrainingArguments).parameters \
        else {"warmup_ratio": a.warmup_ratio}
    args = TrainingArguments(output_dir=str(a.out / "hf"), num_train_epochs=a.epochs, learning_rate=a.learning_rate,
                             per_device_train_batch_size=a.batch_size, per_device_eval_batch_size=a.batch_size,
                             seed=a.seed, **warmup, eval_strategy="epoch", save_strategy="no",
                             gradient_accumulation_steps=a.gradient_accumulation_steps,
                             logging_steps=a.logging_steps, report_to=[], use_cpu=True, dataloader_num_workers=0)
    trainer = Trainer(model=model, args=args, train_dataset=train, eval_dataset=evaluation,
                      data_collator=DataCollatorWithPadding(tok), compute_metrics=metrics)
    result = trainer.train()
    evals = [e for e in trainer.state.log_history if "eval_accuracy" in e]
    evals.append({"train_loss": result.training_loss, "global_step": result.global_step})
    (a.out / "hf_log.jsonl").write_text("".join(json.dumps(e) + "\n" for e in trainer.state.log_history))
    (a.out / "hf_eval.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evals))
    print("\n".join(json.dumps(e) for e in evals))
    if a.ours is None:
        return

    ours = DebertaV2ForSequenceClassification.from_pretrained(a.ours, dtype=torch.float32).eval()
    ours_tok = AutoTokenizer.from_pretrained(a.ours)
    flash = read_jsonl(a.ours_classify)
    texts = [r["text"] for r in read_jsonl(a.data / "eval.jsonl")]
    assert [r["text"] for r in flash] == texts, "--ours-classify does not hold eval.jsonl's texts in order"
    same_top, worst = 0, 0.0
    with torch.no_grad():
        for text, theirs in zip(texts, flash):
            enc = ours_tok(text, return_tensors="pt")
            probs = torch.softmax(ours(**enc).logits[0].double(), dim=-1).numpy()
            hf_scores = {ours.config.id2label[i]: float(probs[i]) for i in range(len(probs))}
            fd_scores = {x["label"]: x["score"] for x in theirs["labels"]}
            same_top += max(hf_scores, key=hf_scores.get) == theirs["labels"][0]["label"]
            worst = max(worst, max(abs(hf_scores[k] - fd_scores[k]) for k in hf_scores))
    identity = {"texts": len(texts), "same_top_label": same_top, "max_abs_score_difference": worst}
    (a.out / "identity.json").write_text(json.dumps(identity) + "\n")
    print(json.dumps(identity))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The starting checkpoint of the fine-tuning comparison: models/tiny-en's backbone in float32 plus a new pooler and
classifier drawn once (normal(0, initializer_range), zero biases: what HF's _init_weights draws), so that
flashdeberta train and transformers' Trainer start from the same weights instead of each drawing its own head.

    python3 tools/finetune-parity/make_init.py --backbone models/tiny-en --labels A,B,... --out DIR [--seed 42]

numpy only: the safetensors files are read and written here directly (8-byte header length, JSON header, data).
The head is drawn by splitmix64 and Box-Muller, not numpy's generator (whose streams numpy does not promise to keep
across versions), so that every machine writes the same bytes: it prints model.safetensors' SHA-256 to compare.
--no-dropout sets hidden_dropout_prob and attention_probs_dropout_prob to 0 (the deterministic comparison).
"""
import argparse
import hashlib
import math
import json
import shutil
import struct
from pathlib import Path

import numpy as np

DTYPES = {"F16": np.float16, "F32": np.float32, "BF16": None}


def read_safetensors(path):
    data = path.read_bytes()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        array = np.frombuffer(data[8 + size + begin:8 + size + end], dtype=DTYPES[info["dtype"]])
        out[name] = array.reshape(info["shape"]).astype(np.float32)
    return out


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        blob = np.ascontiguousarray(tensors[name], dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def normal(seed, count, std):
    """`count` draws of normal(0, std): splitmix64 uniforms in (0, 1), paired by Box-Muller."""
    state, mask, out = seed, (1 << 64) - 1, []

    def uniform():
        nonlocal state
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        return ((z ^ (z >> 31)) >> 11 | 1) * 2.0 ** -53

    while len(out) < count:
        r, theta = math.sqrt(-2.0 * math.log(uniform())), 2.0 * math.pi * uniform()
        out += [r * math.cos(theta) * std, r * math.sin(theta) * std]
    return np.array(out[:count], dtype=np.float32)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backbone", type=Path, required=True)
    parser.add_argument("--labels", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--no-dropout", action="store_true")
    args = parser.parse_args()
    labels = args.labels.split(",")
    config = json.loads((args.backbone / "config.json").read_text())
    weights = {k: v for k, v in read_safetensors(args.backbone / "model.safetensors").items() if k.startswith("deberta.")}
    h, std = config["hidden_size"], config.get("initializer_range", 0.02)
    pooled = config.get("pooler_hidden_size", h)
    weights["pooler.dense.weight"] = normal(args.seed, pooled * h, std).reshape(pooled, h)
    weights["pooler.dense.bias"] = np.zeros(pooled, np.float32)
    weights["classifier.weight"] = normal(args.seed + 1, len(labels) * pooled, std).reshape(len(labels), pooled)
    weights["classifier.bias"] = np.zeros(len(labels), np.float32)
    config.update(architectures=["DebertaV2ForSequenceClassification"], dtype="float32",
                  id2label={str(i): name for i, name in enumerate(labels)},
                  label2id={name: i for i, name in enumerate(labels)})
    if args.no_dropout:
        config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    args.out.mkdir(parents=True, exist_ok=True)
    write_safetensors(args.out / "model.safetensors", weights)
    (args.out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    for name in ("spm.model", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json"):
        if (args.backbone / name).exists():
            shutil.copy(args.backbone / name, args.out / name)
    digest = hashlib.sha256((args.out / "model.safetensors").read_bytes()).hexdigest()
    print("%s: %d tensors, labels %s, model.safetensors sha256 %s" % (args.out, len(weights), ",".join(labels), digest))


if __name__ == "__main__":
    main()

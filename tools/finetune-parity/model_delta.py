#!/usr/bin/env python3
"""A fine-tuned model.safetensors as its difference from the checkpoint it started from, small enough to carry to
the GPU machine (the device tool carries 64 MiB with the repository; a float32 tiny-en is 29 MB, its delta after a
fine-tune about 15 MB, since embedding rows no batch touched keep their bits):

    model_delta.py pack   --base INIT/model.safetensors --model OUT/model.safetensors --delta DELTA.xz
    model_delta.py unpack --base INIT/model.safetensors --delta DELTA.xz --model OUT/model.safetensors

The delta is the model's header bytes and, tensor by tensor, its data XOR the base's (4-byte words, split into byte
planes, then xz). unpack writes the same bytes pack read, and checks them against the SHA-256 pack recorded.
"""
import argparse
import hashlib
import json
import lzma
import struct
from pathlib import Path

import numpy as np


def layout(data):
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    return size, {k: v for k, v in header.items() if k != "__metadata__"}


def tensor_words(data, size, info):
    begin, end = info["data_offsets"]
    return np.frombuffer(data[8 + size + begin:8 + size + end], dtype=np.uint32)


def xor_planes(model, base):
    """The model's tensors XOR the base's, in the model's data order, as four byte planes."""
    msize, mheader = layout(model)
    bsize, bheader = layout(base)
    words = []
    for name, info in sorted(mheader.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        if info["dtype"] != "F32" or bheader.get(name, {}).get("shape") != info["shape"]:
            raise SystemExit("%s: not a float32 tensor of the base's shape" % name)
        words.append(tensor_words(model, msize, info) ^ tensor_words(base, bsize, bheader[name]))
    return msize, np.concatenate(words)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("action", choices=["pack", "unpack"])
    p.add_argument("--base", type=Path, required=True)
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--delta", type=Path, required=True)
    a = p.parse_args()
    base = a.base.read_bytes()
    if a.action == "pack":
        model = a.model.read_bytes()
        msize, words = xor_planes(model, base)
        planes = words.view(np.uint8).reshape(-1, 4).T.tobytes()
        head = json.dumps({"sha256": hashlib.sha256(model).hexdigest(), "header": model[:8 + msize].hex()}).encode()
        a.delta.write_bytes(lzma.compress(struct.pack("<Q", len(head)) + head + planes, preset=6))
        print("%s: %d bytes for %d" % (a.delta, a.delta.stat().st_size, len(model)))
        return
    raw = lzma.decompress(a.delta.read_bytes())
    (hsize,) = struct.unpack("<Q", raw[:8])
    meta = json.loads(raw[8:8 + hsize])
    header = bytes.fromhex(meta["header"])
    planes = np.frombuffer(raw[8 + hsize:], dtype=np.uint8).reshape(4, -1)
    words = planes.T.copy().view(np.uint32).reshape(-1)
    msize, mheader = layout(header + b"\0")
    bsize, bheader = layout(base)
    out, at = [header], 0
    for name, info in sorted(mheader.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        base_words = tensor_words(base, bsize, bheader[name])
        out.append((words[at:at + base_words.size] ^ base_words).tobytes())
        at += base_words.size
    model = b"".join(out)
    if hashlib.sha256(model).hexdigest() != meta["sha256"]:
        raise SystemExit("%s: the rebuilt model's SHA-256 differs from the packed one's" % a.model)
    a.model.parent.mkdir(parents=True, exist_ok=True)
    a.model.write_bytes(model)
    print("%s: %d bytes, SHA-256 %s as packed" % (a.model, len(model), meta["sha256"]))


if __name__ == "__main__":
    main()

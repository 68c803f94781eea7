#!/usr/bin/env python3
"""The classification set of the fine-tuning comparison: Debian bookworm package -> one of six archive-section
classes, from the package's short description (apt's lists on this machine; no download).

    python3 tools/finetune-parity/make_dataset.py OUT_DIR [--train-per-class 300] [--eval-per-class 100]

Writes OUT_DIR/train.jsonl and OUT_DIR/eval.jsonl ({"text", "label"} lines) and prints the counts. Packages are
grouped by source package and split by a hash of its name, so no source has packages on both sides; within a class
the rows are the first N of a hash order, so the set is the same wherever the lists are bookworm's.
"""
import argparse
import hashlib
import json
import subprocess
from pathlib import Path

CLASSES = {
    "libraries": ["libs", "oldlibs"],
    "development": ["devel", "libdevel", "vcs"],
    "network": ["net", "web", "httpd", "mail", "comm"],
    "science": ["science", "math", "electronics", "hamradio"],
    "multimedia": ["sound", "video", "graphics"],
    "games": ["games"],
}
SECTION_TO_CLASS = {s: c for c, sections in CLASSES.items() for s in sections}


def digest(text):
    return int.from_bytes(hashlib.sha256(("finetune-parity\0" + text).encode()).digest()[:8], "little")


def records(lists):
    path = next(Path(lists).glob("*_debian_dists_bookworm_main_binary-amd64_Packages*"))
    text = subprocess.run(["/usr/lib/apt/apt-helper", "cat-file", str(path)], check=True, capture_output=True,
                          text=True).stdout
    for block in text.split("\n\n"):
        record = {}
        for line in block.splitlines():
            if not line.startswith(" ") and ":" in line:
                key, value = line.split(":", 1)
                record[key] = value.strip()
        if "Package" in record:
            yield record


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--lists", default="/var/lib/apt/lists")
    parser.add_argument("--train-per-class", type=int, default=300)
    parser.add_argument("--eval-per-class", type=int, default=100)
    args = parser.parse_args()
    rows = {"train": {c: [] for c in CLASSES}, "eval": {c: [] for c in CLASSES}}
    seen = set()
    for record in records(args.lists):
        label = SECTION_TO_CLASS.get(record.get("Section", "").split("/")[-1])
        text = record.get("Description", "").strip()
        if label is None or len(text) < 12 or text.lower() in seen:
            continue
        seen.add(text.lower())
        source = record.get("Source", record["Package"]).split(" ")[0]
        split = "eval" if digest(source) % 5 == 0 else "train"
        rows[split][label].append((digest(record["Package"]), text))
    args.out.mkdir(parents=True, exist_ok=True)
    for split, per_class in (("train", args.train_per_class), ("eval", args.eval_per_class)):
        lines = []
        for label, items in rows[split].items():
            items.sort()
            if len(items) < per_class:
                raise SystemExit("%s: only %d %s rows for %d wanted" % (split, len(items), label, per_class))
            lines += [(d, {"text": t, "label": label}) for d, t in items[:per_class]]
        lines.sort(key=lambda x: x[0])  # classes interleaved, in a fixed order
        (args.out / ("%s.jsonl" % split)).write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for _, x in lines))
        print("%s: %d rows, %d per class" % (split, len(lines), per_class))


if __name__ == "__main__":
    main()

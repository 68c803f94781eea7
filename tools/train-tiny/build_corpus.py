#!/usr/bin/env python3
"""Rebuilds the English corpus of the tiny models (models/README.md) from Debian 12 packages.

    python3 tools/train-tiny/build_corpus.py [--work DIR]      (default: tools/train-tiny/work, git-ignored)

Sources, each fetched from Debian's archive by apt (nothing else is reachable) and each with a license that
lets us redistribute a model trained on it (recorded in SOURCES.md beside this script):
  - WordNet 3.0 (package wordnet-base): the glosses and quoted examples of every synset;
  - the King James Bible (bible-kjv-text, read with bible-kjv's own reader): every verse;
  - Debian's package descriptions (main, bookworm; Translation-en and Packages): the long description of
    every binary package, with its archive section.

Writes under WORK/:
  corpus/train.txt, corpus/heldout.txt   one text per line (gloss, example, verse or description), for
                                         masked-LM pretraining and the tokenizer
  sections/train.tsv, sections/heldout.tsv
                                         label <TAB> description, the archive sections merged into SECTION_CLASSES
  stats.json                             counts per source and split
Cleaning: whitespace folded, texts shorter than 3 words dropped, exact duplicates (case-insensitive) kept once.
Splits by a fixed seed: WordNet and KJV texts by a hash of the text; package descriptions by a hash of the
source package, so that every binary package of a held-out source (and its near-identical descriptions) is
held out from pretraining and classification alike.
"""
import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

SEED = "flashdeberta-tiny-en-1"
HELDOUT_PERCENT = 5

# Debian's 60-odd sections merged into classes a reader can tell apart from a description.
SECTION_CLASSES = {
    "libraries": ["libs", "oldlibs", "introspection"],
    "development": ["devel", "libdevel", "vcs", "debug"],
    "language-ecosystems": ["perl", "python", "ruby", "rust", "golang", "haskell", "java", "javascript", "ocaml",
                            "lisp", "php", "gnu-r", "cli-mono", "interpreters"],
    "desktop": ["gnome", "kde", "xfce", "x11", "gnustep", "fonts"],
    "network": ["net", "web", "httpd", "mail", "news", "comm"],
    "system": ["admin", "kernel", "shells", "utils", "otherosfs", "embedded"],
    "science": ["science", "math", "electronics", "hamradio", "education", "med"],
    "multimedia": ["sound", "video", "graphics"],
    "games": ["games"],
    "documents": ["text", "editors", "tex", "doc", "localization"],
    "databases": ["database"],
}
SECTION_TO_CLASS = {s: c for c, sections in SECTION_CLASSES.items() for s in sections}


def heldout(key):
    digest = hashlib.sha256((SEED + "\0" + key).encode()).digest()
    return int.from_bytes(digest[:4], "little") % 100 < HELDOUT_PERCENT


def clean(text):
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text.split()) >= 3 else ""


def run(command, **kwargs):
    return subprocess.run(command, check=True, **kwargs)


def fetch(work):
    """The packages, unpacked under WORK/root, and the archive's indexes under WORK/lists (a private apt state)."""
    debs = work / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    run(["apt-get", "download", "wordnet-base", "bible-kjv-text", "bible-kjv"], cwd=debs,
        stdout=subprocess.DEVNULL)
    root = work / "root"
    root.mkdir(exist_ok=True)
    for deb in sorted(debs.glob("*.deb")):
        run(["dpkg-deb", "-x", str(deb), str(root)])
    lists = work / "lists"
    (lists / "partial").mkdir(parents=True, exist_ok=True)
    run(["apt-get", "-o", f"Dir::State::Lists={lists}", "-o", "Acquire::Languages=en",
         "-o", "APT::Get::List-Cleanup=0", "update"], stdout=subprocess.DEVNULL)
    return root, lists


def wordnet_texts(root):
    for part in ("noun", "verb", "adj", "adv"):
        for line in (root / "usr/share/wordnet" / f"data.{part}").read_text(encoding="latin-1").splitlines():
            if line.startswith("  ") or " | " not in line:
                continue  # the license header
            gloss = line.split(" | ", 1)[1]
            # "definition; "example one"; "example two"": the definition and each example apart
            for piece in re.split(r';\s*(?=")', gloss):
                yield piece.strip().strip('"')


def kjv_texts(root):
    out = run([str(root / "usr/bin/bible"), "-p", str(root / "usr/lib"), "-l100000", "gen1:1-rev22:21"],
              capture_output=True, text=True).stdout
    for line in out.splitlines():
        match = re.match(r"\s*\d+ (.*)", line)
        if match:
            yield match.group(1)


def apt_records(path):
    text = run(["/usr/lib/apt/apt-helper", "cat-file", str(path)], capture_output=True, text=True).stdout
    for block in text.split("\n\n"):
        record, key = {}, None
        for line in block.splitlines():
            if line.startswith(" ") and key:
                record[key] += "\n" + line[1:]
            elif ":" in line:
                key, value = line.split(":", 1)
                record[key] = value.strip()
        if record:
            yield record


def package_descriptions(lists):
    """(source package, section, long description) of every binary package of bookworm main."""
    packages = next(lists.glob("*_debian_dists_bookworm_main_binary-amd64_Packages*"))
    translations = next(lists.glob("*_debian_dists_bookworm_main_i18n_Translation-en*"))
    long_text = {}
    for record in apt_records(translations):
        description = record.get("Description-en", "")
        body = description.split("\n", 1)[1] if "\n" in description else ""
        paragraphs = [p for p in body.split("\n.\n") if p.strip()]
        long_text[record.get("Description-md5")] = " ".join(p.replace("\n", " ") for p in paragraphs)
    for record in apt_records(packages):
        source = record.get("Source", record["Package"]).split(" ")[0]
        section = record.get("Section", "").split("/")[-1]
        yield source, section, long_text.get(record.get("Description-md5"), "")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path(__file__).resolve().parent / "work")
    args = parser.parse_args()
    work = args.work.resolve()
    root, lists = fetch(work)

    seen = set()
    splits = {"train": [], "heldout": []}
    sections = {"train": [], "heldout": []}
    stats = Counter()

    def add(source_name, text, split_key):
        text = clean(text)
        if not text or text.lower() in seen:
            return None
        seen.add(text.lower())
        split = "heldout" if heldout(split_key if split_key is not None else text) else "train"
        splits[split].append(text)
        stats[f"{source_name}/{split}"] += 1
        return split

    for text in wordnet_texts(root):
        add("wordnet", text, None)
    for text in kjv_texts(root):
        add("kjv", text, None)
    for source, section, text in package_descriptions(lists):
        split = add("debian-descriptions", text, "source:" + source)
        label = SECTION_TO_CLASS.get(section)
        if split and label:
            sections[split].append((label, clean(text)))
            stats[f"sections/{split}/{label}"] += 1

    for split, texts in splits.items():
        (work / "corpus").mkdir(parents=True, exist_ok=True)
        (work / "corpus" / f"{split}.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    for split, rows in sections.items():
        (work / "sections").mkdir(parents=True, exist_ok=True)
        lines = [f"{label}\t{text}" for label, text in rows]
        (work / "sections" / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    words = {split: sum(len(t.split()) for t in texts) for split, texts in splits.items()}
    summary = {"seed": SEED, "heldout_percent": HELDOUT_PERCENT, "words": words, "counts": dict(sorted(stats.items()))}
    (work / "stats.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({"words": words, "texts": {s: len(t) for s, t in splits.items()},
                      "sections": {s: len(r) for s, r in sections.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

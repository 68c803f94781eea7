"""The held-out evaluation of the tiny models, shared by evaluate_cli.py (flashdeberta) and evaluate_hf.py
(transformers) so that both measure the same thing on the same inputs.

Masked LM: every held-out text's ids followed by [SEP] (the texts as pretraining saw them), concatenated and
cut into rows of 128 that start with [CLS]; 15% of the non-special tokens of each row, drawn by a fixed
seed, replaced by [MASK]. A prediction is right when the original id is the top-1 (or among the top-5)
logits at its position.

Sections: each held-out description classified whole (no truncation), as a pipeline user would; right
when the top label is the description's section.
"""
import numpy as np

SEQ = 128
CLS_ID, SEP_ID, PAD_ID = 1, 2, 0
MASK_FRACTION = 0.15
MASK_SEED = 20261202


def mlm_rows(ids_per_text):
    """(rows, SEQ) int64: the texts' ids with [SEP] after each, cut into rows with [CLS] in front."""
    stream = np.fromiter((t for ids in ids_per_text for t in list(ids) + [SEP_ID]), dtype=np.int64)
    body = SEQ - 1
    rows = stream[: len(stream) // body * body].reshape(-1, body)
    return np.concatenate([np.full((rows.shape[0], 1), CLS_ID, dtype=np.int64), rows], axis=1)


def mask_rows(rows, mask_id):
    """(masked ids, labels): labels hold the original id where [MASK] was put, -100 elsewhere.

    Exactly round(15%) of each row's non-special tokens are masked, chosen by a seeded permutation, so the
    inputs are the same on any machine and numpy version.
    """
    generator = np.random.Generator(np.random.PCG64(MASK_SEED))
    masked = rows.copy()
    labels = np.full(rows.shape, -100, dtype=np.int64)
    for r in range(rows.shape[0]):
        candidates = np.flatnonzero((rows[r] != CLS_ID) & (rows[r] != SEP_ID) & (rows[r] != PAD_ID))
        count = int(round(MASK_FRACTION * len(candidates)))
        chosen = candidates[generator.permutation(len(candidates))[:count]]
        labels[r, chosen] = rows[r, chosen]
        masked[r, chosen] = mask_id
    return masked, labels


def top_k_hits(logits, targets, k=5):
    """(top-1 hits, top-k hits) of (M, V) logits against (M,) target ids."""
    best = np.argsort(-logits, axis=1, kind="stable")[:, :k]
    return int((best[:, 0] == targets).sum()), int((best == targets[:, None]).any(axis=1).sum())


def read_sections(path):
    """(labels, texts) of a sections TSV: label TAB description, one per line."""
    labels, texts = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        label, text = line.split("\t", 1)
        labels.append(label)
        texts.append(text)
    return labels, texts

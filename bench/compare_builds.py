"""Two builds of the flashdeberta program side by side on one machine: `flashdeberta bench --json` of each on
the same checkpoint and shapes, run in turns (before, after, before, ...) so that a machine's drift falls on
both, and the medians of the runs' medians in one Markdown table with the ratio after/before. What a change
that should not touch the forward (issue 25's reorganization: the CUDA backend as a module opened at run time)
is checked with: nothing slower.

    python3 bench/compare_builds.py --before OLD/flashdeberta --after NEW/flashdeberta \\
        --backend cuda --dtype bf16 --shapes 1x128,8x128,32x512,1x4096 --rounds 3 [--model DIR] [--out FILE]

Without --model it writes a deberta-v3-base-shaped checkpoint with random weights (transformers and torch,
as on the GPU machine) to a scratch folder first. Also times each program's start (`--version`) and its load
(bench's load_ms)."""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_common import commit, machine, table, today  # noqa: E402


def v3_base_checkpoint(directory):
    """deberta-v3-base's shape (12 layers of 768, 12 heads, 128,100 tokens) with random weights, float32."""
    import torch
    from transformers import DebertaV2Config, DebertaV2Model

    torch.manual_seed(0)
    config = DebertaV2Config(vocab_size=128100, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                             intermediate_size=3072, max_position_embeddings=512, relative_attention=True,
                             position_buckets=256, norm_rel_ebd="layer_norm", share_att_key=True,
                             pos_att_type=["p2c", "c2p"], type_vocab_size=0, position_biased_input=False)
    DebertaV2Model(config).save_pretrained(directory, safe_serialization=True)
    return directory


def bench(cli, model, backend, dtype, batch, length, repeat):
    command = [cli, "bench", "--model", str(model), "--backend", backend, "--dtype", dtype, "--batch", str(batch),
               "--seq-len", str(length), "--repeat", str(repeat), "--json"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {result.stderr.strip()}")
    return json.loads(result.stdout)


def start_ms(cli, runs=20):
    times = []
    for _ in range(runs):
        begin = time.perf_counter()
        subprocess.run([cli, "--version"], capture_output=True, check=True)
        times.append((time.perf_counter() - begin) * 1e3)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", required=True, help="the program of the build compared against")
    p.add_argument("--after", required=True, help="the program of the build checked")
    p.add_argument("--model", help="a checkpoint directory (default: a random deberta-v3-base-shaped one)")
    p.add_argument("--backend", default="cuda")
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--shapes", default="1x128,8x128,32x512,1x4096", help="BxL,... (batch x sequence length)")
    p.add_argument("--rounds", type=int, default=3, help="turns of each build per shape")
    p.add_argument("--repeat", type=int, default=20, help="bench's timed forwards per run")
    p.add_argument("--out", help="also write the report here")
    args = p.parse_args()
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    builds = {"before": args.before, "after": args.after}
    with tempfile.TemporaryDirectory() as scratch:
        model = Path(args.model) if args.model else v3_base_checkpoint(Path(scratch) / "v3-base")
        runs = {(name, shape): [] for name in builds for shape in shapes}
        for shape in shapes:
            for _ in range(args.rounds):
                for name, cli in builds.items():
                    runs[(name, shape)].append(bench(cli, model, args.backend, args.dtype, *shape, args.repeat))
    rows = []
    for shape in shapes:
        before = statistics.median(r["median_ms"] for r in runs[("before", shape)])
        after = statistics.median(r["median_ms"] for r in runs[("after", shape)])
        rows.append([f"{shape[0]} x {shape[1]}", f"{before:.3f}", f"{after:.3f}", f"{after / before:.3f}"])
    load = {name: statistics.median(r["load_ms"] for s in shapes for r in runs[(name, s)]) for name in builds}
    rows.append(["load (load_ms)", f"{load['before']:.1f}", f"{load['after']:.1f}",
                 f"{load['after'] / load['before']:.3f}"])
    start = {name: start_ms(cli) for name, cli in builds.items()}
    rows.append(["start (--version)", f"{start['before']:.1f}", f"{start['after']:.1f}",
                 f"{start['after'] / start['before']:.3f}"])
    report = "\n".join([
        f"# Two builds of flashdeberta, {today()}", "",
        f"- machine: {machine()}", f"- commit: {commit()} (before: {args.before}, after: {args.after})",
        f"- {args.backend}, {args.dtype}, {args.rounds} runs of each build per shape, taken in turns; each run "
        f"the median of {args.repeat} forwards; the table gives the median of the runs' medians (ms)", "",
        *table(["shape", "before ms", "after ms", "after / before"], rows), ""])
    print(report)
    if args.out:
        Path(args.out).write_text(report)


if __name__ == "__main__":
    main()

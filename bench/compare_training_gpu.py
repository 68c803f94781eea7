#!/usr/bin/env python3
"""One training step of deberta-v3-base on the GPU: ours (bench/gpu/bench_training_gpu, CudaPolicy) against HF
transformers on the same GPU, in one run.

    python3 bench/compare_training_gpu.py --ours build/bench/gpu/bench_training_gpu
        [--shapes 32x512,8x2048,1x8192] [--repeats 5] [--ours-dtypes fp32,bf16] [--profile]
        [--torch-rows eager-fp32,eager-bf16,sdpa-bf16,compile-bf16]
        [--device cuda] [--out bench/results/training-gpu-<date>.md] [--commit C]

The step, on both sides (as bench/compare_training.py's on the host): zero the gradients, forward with the loss
(sequence classification, 2 labels, cross-entropy), backward, clip the global gradient norm at 1.0, AdamW (lr 5e-5,
weight decay 0.01 except biases and LayerNorm weights: HF Trainer's two groups), dropout off on both sides, random
initial weights (deberta-v3-base's config), random token ids, all-ones masks, labels b % 2.

Ours: `bench_training_gpu --shapes=... --steps=R --dtype=D` for each D of --ours-dtypes (fp32; bf16 / fp16: mixed
precision, float32 master weights and 16-bit products, as `flashdeberta train --dtype` runs it; Google Benchmark
JSON), one untimed step per shape, then R timed steps; its step time, phases and peak device memory (the step's,
beyond the weights, gradients and moments). "ours faster by" compares a torch row with ours in the same dtype
(fp32 rows with ours fp32, bf16 rows with ours bf16 where it ran, else fp32).
Torch rows, each model built afresh per shape (transformers' DebertaV2ForSequenceClassification from the config):
  eager-fp32     attn_implementation "eager", float32
  eager-bf16     eager under torch.autocast(bfloat16) (HF Trainer's --bf16), float32 master weights
  sdpa-bf16      "sdpa" under autocast, where this transformers accepts it for DeBERTa-v2
  compile-bf16   eager under autocast, the model through torch.compile (its compile steps untimed)
  flashdeberta-bf16  FlashDeBERTa's FlashDebertaV2ForSequenceClassification (its Triton kernels, forward and
                 backward) under autocast; its public source (Knowledgator/FlashDeBERTa, src/) in a git-ignored folder
                 named by --flashdeberta-src, never committed; the row is left out without it
One warm-up step, then R timed steps (torch.cuda.synchronize around each); the step's peak device memory is
torch.cuda.max_memory_allocated during the timed steps less what was allocated before them. A row that runs out of
memory or fails says so and the others go on. Without transformers (this development machine's torch 1.13 has
none), the torch rows use compare_training.py's pure-PyTorch re-implementation of HF's eager path.
"""
import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_common import REPO, BenchError, commit, machine, short_error, table, today, write_report  # noqa: E402
from compare_training import model_config, torch_inputs  # noqa: E402

TORCH_ROWS = ["eager-fp32", "eager-bf16", "sdpa-bf16", "compile-bf16", "flashdeberta-bf16"]


def parse_shapes(text):
    shapes = []
    for item in text.split(","):
        b, _, l = item.partition("x")
        if not (b.isdigit() and l.isdigit() and int(b) > 0 and int(l) > 0):
            raise argparse.ArgumentTypeError(f"{item!r} is not BxL with B and L positive (e.g. 8x2048)")
        shapes.append((int(b), int(l)))
    return shapes


def ours(binary, shapes, repeats, dtype, profile=False):
    """{(B, L): {"step_ms", "fwd_bwd_ms", "adamw_ms", "peak_mib", "ops": {op: ms}}} from bench_training_gpu's JSON;
    with profile, the step through ProfilingPolicy and "ops" its milliseconds per step in each kind of operation."""
    spec = ",".join(f"{b}x{l}" for b, l in shapes)
    out = subprocess.run([binary, f"--shapes={spec}", f"--steps={repeats}", f"--dtype={dtype}",
                          "--benchmark_format=json"] + (["--profile"] if profile else []),
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise BenchError(f"{binary} failed: {short_error(out.stderr or out.stdout)}")
    rows = {}
    for bench in json.loads(out.stdout)["benchmarks"]:
        if bench.get("error_occurred"):
            raise BenchError(f"{bench['name']}: {bench.get('error_message')}")
        b = int(bench["name"].split("/B:")[1].split("/")[0])
        l = int(bench["name"].split("/L:")[1].split("/")[0])
        rows[(b, l)] = {"step_ms": bench["real_time"], "fwd_bwd_ms": bench["fwd_bwd_ms"],
                        "adamw_ms": bench["adamw_ms"], "peak_mib": bench["peak_MiB"],
                        "ops": {k[3:-3]: v for k, v in bench.items()
                                if k.startswith("op_") and k.endswith("_ms") and k != "op_total_ms"}}
    return rows


def profile_table(binary, shapes, repeats, dtypes):
    """Markdown lines: where our step's time goes, per dtype and shape (bench_training_gpu --profile)."""
    columns, cells = [], {}
    for d in dtypes:
        for (b, l), row in ours(binary, shapes, repeats, d, profile=True).items():
            cells[(d, b, l)] = row
            for op in row["ops"]:
                if op not in columns:
                    columns.append(op)
    columns.sort(key=lambda op: -max(r["ops"].get(op, 0.0) for r in cells.values()))
    lines = [[f"{d} {b} x {l}", f"{r['step_ms']:.1f}"] + [f"{r['ops'].get(op, 0.0):.1f}" for op in columns]
             for (d, b, l), r in cells.items()]
    return ["## Where our step's time goes", "",
            "`bench_training_gpu --profile`: the step through ProfilingPolicy<CudaPolicy>, every operation fenced "
            "(so the step is slower than the plain one above); milliseconds per step in each kind of operation.", "",
            *table(["dtype, B x L", "profiled step ms"] + columns, lines)]


def torch_row(torch, row, b, l, repeats, device):
    """(median step ms, min, max, peak MiB, description) of one torch row at (b, l)."""
    attn = "sdpa" if row.startswith("sdpa") else "eager"
    bf16 = row.endswith("bf16")
    cfg = model_config("v3-base")
    torch.manual_seed(0)
    try:
        import transformers
        config = transformers.DebertaV2Config(**{k: v for k, v in cfg.items() if k != "model_type"})
        if row.startswith("flashdeberta"):
            import flashdeberta
            import flashdeberta.model as flash_model
            # FlashDeBERTa takes its Triton attention where the config names "flash_attention_2"
            # (DEBERTA_SELF_ATTENTION_CLASSES); left "eager", its model runs HF's eager attention and times as HF
            # does. transformers 5 refuses "flash_attention_2" on its classes (they carry 4.x's
            # _supports_flash_attn_2 flag, and 5 looks for the flash_attn package), so the model is built under
            # "eager" with that entry pointed at the Triton attention, as "flash_attention_2" would select it.
            classes = flash_model.DEBERTA_SELF_ATTENTION_CLASSES
            eager_class = classes["eager"]
            classes["eager"] = flash_model.FlashDisentangledSelfAttention
            try:
                config._attn_implementation = "eager"
                model = flashdeberta.FlashDebertaV2ForSequenceClassification(config)
            finally:
                classes["eager"] = eager_class
            attention = {type(m).__name__ for m in model.modules() if m.__class__.__name__.endswith("SelfAttention")}
            if attention != {"FlashDisentangledSelfAttention"}:
                raise BenchError(f"FlashDeBERTa's model built {sorted(attention)}, not its flash attention")
            desc = (f"FlashDeBERTa {getattr(flashdeberta, '__version__', '(source)')} on transformers "
                    f"{transformers.__version__}, its Triton attention (FlashDisentangledSelfAttention)")
        else:
            model = transformers.DebertaV2ForSequenceClassification._from_config(config, attn_implementation=attn)
            desc = f"transformers {transformers.__version__}, {getattr(model.config, '_attn_implementation', attn)}"
    except ImportError:
        if attn != "eager" or row.startswith("flashdeberta"):
            raise BenchError(f"{row} needs transformers")
        from compare_training import build_reimpl
        model = build_reimpl(torch, cfg)
        desc = "pure-PyTorch re-implementation of HF's eager path"
    model = model.to(device).float().train()
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (no_decay if (n.endswith("bias") or "LayerNorm" in n) else decay).append(p)
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=5e-5, betas=(0.9, 0.999), eps=1e-8)
    forward = torch.compile(model) if row.startswith("compile") else model
    ids, mask, labels = (t.to(device) for t in torch_inputs(torch, cfg["vocab_size"], b, l))
    cuda = device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.split(":")[0], dtype=torch.bfloat16, enabled=bf16):
            out = forward(input_ids=ids, attention_mask=mask, labels=labels)
        loss = out[0] if isinstance(out, tuple) else out.loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(decay + no_decay, 1.0)
        optimizer.step()

    step()  # warm-up (and torch.compile's compilation)
    sync()
    if cuda:
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step()
        sync()
        times.append(1e3 * (time.perf_counter() - t0))
    peak = (torch.cuda.max_memory_allocated() - before) / 2**20 if cuda else float("nan")
    return statistics.median(times), min(times), max(times), peak, desc


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ours", default=str(REPO / "build/bench/gpu/bench_training_gpu"), help="our bench_training_gpu")
    p.add_argument("--no-ours", action="store_true", help="torch rows only (a machine without our GPU binary)")
    p.add_argument("--shapes", type=parse_shapes, default=parse_shapes("32x512,8x2048,1x8192"))
    p.add_argument("--repeats", type=int, default=5, help="timed steps per case after one warm-up (default 5)")
    p.add_argument("--ours-dtypes", default="fp32,bf16", help="our rows' dtypes: fp32, bf16, fp16 (default fp32,bf16)")
    p.add_argument("--profile", action="store_true", help="add where our step's time goes (bench_training_gpu --profile)")
    p.add_argument("--torch-rows", default=",".join(TORCH_ROWS))
    p.add_argument("--flashdeberta-src", help="FlashDeBERTa's src/ folder (git-ignored): adds its row")
    p.add_argument("--device", default="cuda", help="torch's device (cpu: a smoke run of this script)")
    p.add_argument("--out", help="report path (default bench/results/training-gpu-<date>.md)")
    p.add_argument("--commit", help="commit named in the report (default $FLASHDEBERTA_COMMIT or git's HEAD)")
    a = p.parse_args(argv)
    rows = [r for r in a.torch_rows.split(",") if r]
    for r in rows:
        if r not in TORCH_ROWS:
            p.error(f"--torch-rows: unknown row {r!r} ({', '.join(TORCH_ROWS)})")
    if a.flashdeberta_src:
        if not (Path(a.flashdeberta_src) / "flashdeberta" / "__init__.py").exists():
            p.error(f"--flashdeberta-src: {a.flashdeberta_src} holds no flashdeberta/__init__.py")
        sys.path.insert(0, str(Path(a.flashdeberta_src).resolve()))
    else:
        rows = [r for r in rows if r != "flashdeberta-bf16"]
    import torch

    dtypes = [d for d in a.ours_dtypes.split(",") if d]
    for d in dtypes:
        if d not in ("fp32", "bf16", "fp16"):
            p.error(f"--ours-dtypes: unknown dtype {d!r} (fp32, bf16, fp16)")
    ours_rows = {} if a.no_ours else {d: ours(a.ours, a.shapes, a.repeats, d) for d in dtypes}
    header = ["B x L", "system", "step ms (median, min-max)", "tokens/s", "peak MiB", "ours faster by"]
    lines, notes = [], []
    for b, l in a.shapes:
        for d, by_shape in ours_rows.items():
            mine = by_shape.get((b, l))
            if mine:
                lines.append([f"{b} x {l}", f"flashdeberta {d} (CudaPolicy, flash)", f"{mine['step_ms']:.1f}",
                              f"{b * l / mine['step_ms'] * 1e3:,.0f}", f"{mine['peak_mib']:.0f}", ""])
        for r in rows:
            same = "fp32" if r.endswith("fp32") else "bf16"
            mine = (ours_rows.get(same) or ours_rows.get("fp32") or {}).get((b, l))
            try:
                median, lo, hi, peak, desc = torch_row(torch, r, b, l, a.repeats, a.device)
            except Exception as e:  # noqa: BLE001  (out of memory, an unsupported row: reported, the rest go on)
                lines.append([f"{b} x {l}", f"torch {r}", f"failed: {short_error(str(e))}", "", "", ""])
                if a.device.startswith("cuda"):
                    torch.cuda.empty_cache()
                continue
            notes.append(f"{r}: {desc}")
            ratio = f"{median / mine['step_ms']:.2f}x" if mine else ""
            lines.append([f"{b} x {l}", f"torch {r}", f"{median:.1f} ({lo:.1f}-{hi:.1f})", f"{b * l / median * 1e3:,.0f}",
                          f"{peak:.0f}", ratio])
            if a.device.startswith("cuda"):
                torch.cuda.empty_cache()
    device_name = torch.cuda.get_device_name() if a.device.startswith("cuda") else a.device
    text = [f"# One deberta-v3-base training step on {device_name} ({today()})", "",
            f"Machine: {machine()}; torch {torch.__version__}. Commit {commit(a.commit)}. "
            f"`python3 bench/compare_training_gpu.py`, {a.repeats} timed steps per row after one warm-up.", "",
            *table(header, lines), "", "Torch models: " + "; ".join(sorted(set(notes)))]
    if a.profile and not a.no_ours:
        text += ["", *profile_table(a.ours, a.shapes, a.repeats, dtypes)]
    out = Path(a.out) if a.out else REPO / "bench" / "results" / f"training-gpu-{today()}.md"
    write_report("\n".join(text) + "\n", out)


if __name__ == "__main__":
    try:
        main()
    except BenchError as e:
        sys.exit(f"compare_training_gpu: {e}")

#!/usr/bin/env python3
"""Our GPU benchmarks next to torch SDPA attention and HF transformers eager, on the device, in one call.

Reads the JSON that `bench_gpu --benchmark_format=json` wrote in the same device call (--ours), times on
identical shapes (bf16, deberta-v3-base: 12 heads of 64, random weights and inputs):
  - torch.nn.functional.scaled_dot_product_attention on (B, 12, L, 64) q, k, v: attention without the
    relative terms, the ceiling to approach;
  - HF transformers DebertaV2Model (eager attention, random init) where it fits in memory,
with CUDA events (median after warm-up), and writes a Markdown table with ratios to --out
(bench/results/gpu-<date>.md by default) with the date, GPU and versions.

  python3 bench/compare_gpu.py --ours bench_gpu.json [--out PATH] [--commit SHA] [--hf-max-tokens N]
"""
import argparse
import datetime
import json
import os
import platform
import re

import torch

HEADS, HEAD_SIZE = 12, 64


def median_ms(fn, warmup=3, repeat=10):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    times.sort()
    return times[len(times) // 2]


def attention_flop(batch, length):
    return 4.0 * batch * length * length * HEAD_SIZE * HEADS


def sdpa_ms(batch, length):
    gen = torch.Generator(device="cuda").manual_seed(length)
    q, k, v = (torch.randn(batch, HEADS, length, HEAD_SIZE, device="cuda", dtype=torch.bfloat16, generator=gen)
               for _ in range(3))
    repeat = 10 if length <= 8192 else 5
    return median_ms(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v), repeat=repeat)


def hf_eager(batch, length):
    """(ms, peak extra MiB) of HF's eager forward, or None when it does not fit."""
    from transformers import DebertaV2Config, DebertaV2Model
    config = DebertaV2Config(vocab_size=32000, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                             intermediate_size=3072, hidden_act="gelu", max_position_embeddings=512,
                             type_vocab_size=0, relative_attention=True, position_buckets=256,
                             max_relative_positions=-1, norm_rel_ebd="layer_norm", share_att_key=True,
                             pos_att_type=["p2c", "c2p"], position_biased_input=False, layer_norm_eps=1e-7)
    torch.manual_seed(0)
    model = DebertaV2Model(config).to("cuda", torch.bfloat16).eval()  # DeBERTa v2/v3 attention is eager only
    ids = torch.randint(0, 32000, (batch, length), device="cuda")
    try:
        with torch.inference_mode():
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            ms = median_ms(lambda: model(input_ids=ids), warmup=2, repeat=5 if length <= 4096 else 3)
            peak = (torch.cuda.max_memory_allocated() - base) / 2**20
        return ms, peak
    except torch.OutOfMemoryError:
        return None
    finally:
        del model
        torch.cuda.empty_cache()


def ours_by_shape(path):
    """{(family, B, L): (ms, peak_MiB)} from Google Benchmark's JSON (manual time, ms): the median aggregate of each
    shape's repetitions (bench_gpu --benchmark_repetitions=N, as run_on_device.sh's bench step runs it). A file
    without repetitions has no aggregates: its single run (the mean over its iterations) is refused rather than
    reported as a median."""
    with open(path) as f:
        doc = json.load(f)
    out, single = {}, set()
    for run in doc["benchmarks"]:
        if run.get("error_occurred"):
            continue
        m = re.match(r"(attention|whole_model_graph|whole_model)/B:(\d+)/L:(\d+)", run.get("run_name", run["name"]))
        if not m:
            continue
        key = (m.group(1), int(m.group(2)), int(m.group(3)))
        if run.get("run_type") == "aggregate":
            if run.get("aggregate_name") == "median":
                out[key] = (run["real_time"], run.get("peak_MiB", 0.0))
        else:
            single.add(key)
    if single - set(out):
        raise SystemExit(f"{path}: no median aggregate for {sorted(single - set(out))}; run bench_gpu with "
                         "--benchmark_repetitions=5 (or more) so that each shape has one")
    return out


def profile_by_shape(path):
    """{(B, L): {op: ms per forward}} from bench_gpu's model_profile rows (their median aggregates)."""
    with open(path) as f:
        doc = json.load(f)
    out = {}
    for run in doc["benchmarks"]:
        m = re.match(r"model_profile/B:(\d+)/L:(\d+)", run.get("run_name", run["name"]))
        if not m or run.get("error_occurred") or run.get("aggregate_name") != "median":
            continue
        out[(int(m.group(1)), int(m.group(2)))] = {k[:-3]: v for k, v in run.items() if k.endswith("_ms")}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--out")
    ap.add_argument("--commit", default=os.environ.get("FLASHDEBERTA_COMMIT", "unknown"))
    ap.add_argument("--hf-max-tokens", type=int, default=16384, help="largest B x L that HF eager is run on")
    args = ap.parse_args()
    ours = ours_by_shape(args.ours)
    today = datetime.date.today().isoformat()
    out_path = args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", f"gpu-{today}.md")
    import transformers
    props = torch.cuda.get_device_properties(0)
    lines = [f"# GPU benchmarks, {today}", "",
             f"{props.name} ({props.multi_processor_count} SMs), torch {torch.__version__} (CUDA {torch.version.cuda}), "
             f"transformers {transformers.__version__}, Python {platform.python_version()}; flashdeberta {args.commit}. "
             "bf16, deberta-v3-base shape (12 heads of 64, 256 buckets, c2p + p2c), random weights and inputs; "
             "CUDA-event medians after warm-up, all columns from one device call (bench/compare_gpu.py).", "",
             "## Attention alone", "",
             "TFLOP/s counts 4 B L^2 D H for every column (the position terms are extra work for us, uncounted). "
             "SDPA computes no relative terms: it is the ceiling, not a peer.", "",
             "| B x L | ours ms | ours TFLOP/s | SDPA ms | SDPA TFLOP/s | ours / SDPA throughput |", "|---|---|---|---|---|---|"]
    shapes = sorted({(b, l) for (fam, b, l) in ours if fam == "attention"}, key=lambda s: (s[0] != 1, s[1]))
    for b, l in shapes:
        ms, _ = ours[("attention", b, l)]
        sdpa = sdpa_ms(b, l)
        flop = attention_flop(b, l)
        lines.append(f"| {b} x {l} | {ms:.3f} | {flop / ms / 1e9:.1f} | {sdpa:.3f} | {flop / sdpa / 1e9:.1f} | "
                     f"{sdpa / ms:.2f} |")
        print(lines[-1], flush=True)
    lines += ["", "## Whole 12-layer forward", "",
              "Peak: device memory beyond the weights (ours: the caching allocator's peak; HF: "
              "torch.cuda.max_memory_allocated).", "",
              "| B x L | ours ms | ours peak MiB | HF eager ms | HF peak MiB | HF / ours time |", "|---|---|---|---|---|---|"]
    shapes = sorted({(b, l) for (fam, b, l) in ours if fam == "whole_model"}, key=lambda s: (s[0] != 1, s[1]))
    for b, l in shapes:
        ms, peak = ours[("whole_model", b, l)]
        hf = hf_eager(b, l) if b * l <= args.hf_max_tokens else None
        hf_cols = f"{hf[0]:.2f} | {hf[1]:.0f} | {hf[0] / ms:.1f}x" if hf else "- | - | -"
        lines.append(f"| {b} x {l} | {ms:.2f} | {peak:.0f} | {hf_cols} |")
        print(lines[-1], flush=True)
    graph_shapes = sorted({(b, l) for (fam, b, l) in ours if fam == "whole_model_graph"})
    if graph_shapes:
        lines += ["", "## CUDA graphs at small shapes", "",
                  "The whole forward replayed as one captured graph (`CudaGraphForward`) against the same forward "
                  "launched kernel by kernel, both from bench_gpu in this call.", "",
                  "| B x L | plain ms | graph ms | plain / graph |", "|---|---|---|---|"]
        for b, l in graph_shapes:
            graph, _ = ours[("whole_model_graph", b, l)]
            plain = ours.get(("whole_model", b, l))
            plain_cols = f"{plain[0]:.3f} | {graph:.3f} | {plain[0] / graph:.2f}x" if plain else f"- | {graph:.3f} | -"
            lines.append(f"| {b} x {l} | {plain_cols} |")
            print(lines[-1], flush=True)
    profiles = profile_by_shape(args.ours)
    if profiles:
        ops = sorted({op for p in profiles.values() for op in p if op != "ops"})
        lines += ["", "## Where the forward's time goes", "",
                  "bench_gpu's model_profile: the same forward through ProfilingPolicy, each operation fenced and "
                  "timed, in ms per forward (medians); `ops` is their sum, above the plain forward's time by the "
                  "launch gaps the fences expose.", "",
                  "| B x L | " + " | ".join(ops) + " | ops |", "|" + "---|" * (len(ops) + 2)]
        for (b, l), p in sorted(profiles.items(), key=lambda kv: (kv[0][0] != 1, kv[0][1])):
            cells = " | ".join(f"{p[op]:.3f}" if op in p else "-" for op in ops)
            lines.append(f"| {b} x {l} | {cells} | {p.get('ops', 0.0):.3f} |")
            print(lines[-1], flush=True)
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", out_path)


if __name__ == "__main__":
    main()

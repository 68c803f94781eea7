"""The Markdown report of compare_cpu.py: settings, one table per thread count (ms per forward, speed ratios, peak
memory), load times, accuracy, errors; and which systems a run compares."""
import statistics
import sys

from compare_common import commit, fmt, machine, ratio, table, today


def systems(a):
    out = []
    if not a.skip_ort:
        out.append("ort")
    if not a.skip_torch:
        out.append("torch_fp32")
        if not a.skip_torch_bf16:
            out.append("torch_bf16")
    if not a.skip_ours:
        out += ["ours_" + d for d in a.ours_dtypes]
    return out


def cell(r):
    if r is None:
        return "-"
    if "median_ms" in r:
        return fmt(r["median_ms"], 2)
    return r.get("skipped") or ("error" if r.get("error") else "-")


def mib(r):
    return f"{r['vmhwm_kib'] / 1024:.0f}" if r and r.get("vmhwm_kib") else "-"


def report(run, cli, model_dir, onnx_path):
    a = run.a
    res = run.results
    vers = run.versions
    lines = [f"# CPU: flashdeberta vs ONNX Runtime vs torch, {today()}", "",
             f"- machine: {machine()}",
             f"- commit: {commit(a.commit)}; our CLI: `{cli}`" if not a.skip_ours else f"- commit: {commit(a.commit)}",
             "- versions: Python " + sys.version.split()[0] +
             "".join(f", {k} {v}" for k, v in sorted(vers.items()) if k != "mkldnn_bf16")]
    if a.model:
        lines.append(f"- model: `{a.model}` (given), {run.vocab_size} tokens of vocabulary")
    else:
        lines.append(f"- model: random DebertaV2Model of deberta-v3-base shape (12 layers, hidden 768, 12 heads, "
                     f"intermediate 3072, 256 buckets, c2p|p2c, vocabulary {run.vocab_size}; "
                     f"{(run.build.get('parameters') or 0) / 1e6:.1f} M parameters), torch.manual_seed(0), "
                     "saved with save_pretrained (safetensors): ours and torch read that directory")
    if onnx_path and run.build.get("exporter"):
        d = run.build.get("onnx_vs_torch_max_abs")
        lines.append(f"- ONNX: torch.onnx.export ({run.build['exporter']}), one static graph per shape "
                     "(transformers 5's DeBERTa-v2 freezes its relative positions at the traced shape: a graph with "
                     "dynamic axes gives wrong outputs at other shapes); each against torch fp32 on other ids: "
                     f"max abs diff {'-' if d is None else f'{d:.1e}'}; export time {run.build.get('export_s')} s")
    lines += [
        "- every system pinned to the first N CPUs (os.sched_setaffinity in the child, as taskset -c), "
        "OMP_NUM_THREADS=N; ours: `flashdeberta bench --backend eigen --dtype D --threads N --repeat R --json` "
        "(one process per shape; linear layers through oneDNN in a build with it: float32 by default, bf16 and int8 always); ORT: ORT_ENABLE_ALL, intra_op N, "
        "inter_op 1, sequential; torch: set_num_threads(N), inference_mode, eager attention, bf16 = "
        "model.to(torch.bfloat16) (oneDNN)",
        f"- times: ms per forward, one warm-up then the median of R runs, R in [{a.min_repeat}, {a.max_repeat}] "
        f"aiming at {a.budget_s:g} s of timed runs; random ids, all-ones masks",
        "- peak: VmHWM in MiB (/proc/PID/status; not ru_maxrss, which a child inherits from its parent). Ours: "
        "its own process per shape. ORT and torch: the worker's peak after that shape, cumulative over the "
        "shapes before it (shapes run in table order)",
        f"- whole run: {run.elapsed():.0f} s", ""]
    sysl = systems(a)
    for threads in a.threads:
        cores = run.affinity.get(threads)
        span = f"CPUs {cores[0]}-{cores[-1]}" if cores else "not run"
        lines += [f"## {threads} thread{'s' if threads > 1 else ''} ({span})", ""]
        header = ["B x L"]
        if "ours_fp32" in sysl:
            header.append("ours fp32")
        if "ort" in sysl:
            header += ["ORT fp32", "ours vs ORT"]
        if "torch_fp32" in sysl:
            header.append("torch fp32")
        if "ours_bf16" in sysl:
            header.append("ours bf16")
        if "torch_bf16" in sysl:
            header += ["torch bf16", "ours bf16 vs torch bf16"]
        if "ours_int8" in sysl:
            header += ["ours int8", "int8 vs our fp32"]
        header.append("peak MiB: " + " / ".join(s.replace("_", " ") for s in sysl))
        rows = []
        for b, l in a.shapes:
            g = {s: res.get((threads, b, l, s)) for s in sysl}
            ms = {s: (g[s] or {}).get("median_ms") for s in sysl}
            row = [f"{b} x {l}"]
            if "ours_fp32" in sysl:
                row.append(cell(g["ours_fp32"]))
            if "ort" in sysl:
                row += [cell(g["ort"]), ratio(ms["ort"], ms.get("ours_fp32"))]
            if "torch_fp32" in sysl:
                row.append(cell(g["torch_fp32"]))
            if "ours_bf16" in sysl:
                row.append(cell(g["ours_bf16"]))
            if "torch_bf16" in sysl:
                row += [cell(g["torch_bf16"]), ratio(ms["torch_bf16"], ms.get("ours_bf16"))]
            if "ours_int8" in sysl:
                row += [cell(g["ours_int8"]), ratio(ms.get("ours_fp32"), ms["ours_int8"])]
            row.append(" / ".join(mib(g[s]) for s in sysl))
            rows.append(row)
        lines += table(header, rows)
        runs = {s: sorted({(res.get((threads, b, l, s)) or {}).get("runs") for b, l in a.shapes} - {None})
                for s in sysl}
        lines += ["", "Ratios are speed ratios (the other's time / ours; above 1x: ours is faster). Timed runs: " +
                  "; ".join(f"{s.replace('_', ' ')} {r[0]}-{r[-1]}" for s, r in runs.items() if r) + ".", ""]
        for s in ("ours_fp32", "ours_bf16", "ours_int8"):
            loads = sorted(r["load_ms"] for (t, b, l, sys_), r in res.items()
                           if t == threads and sys_ == s and r.get("load_ms"))
            if loads:  # every bench process loads the model once, from a warm page cache after the first
                lines.append(f"- {s.replace('_', ' ')} load (`bench`'s load_ms, {len(loads)} processes): median "
                             f"{statistics.median(loads):.0f} ms, min {loads[0]:.0f}, max {loads[-1]:.0f}")
        if any(r.get("load_ms") for (t, b, l, s), r in res.items() if t == threads):
            lines.append("")
    if run.accuracy:
        acc = run.accuracy
        b, l = acc["shape"]
        ref = acc["ref_max_abs"]
        t = acc["threads"]
        lines += [f"## Accuracy: last_hidden_state on one {b} x {l} input ({t} thread{'s' if t > 1 else ''})", "",
                  "Max abs difference against torch fp32 (" +
                  (f"its largest |value|: {ref:.3g}" if ref is not None else "not run") +
                  ") and against the same system's fp32 (ours: `flashdeberta run --head base`).", ""]
        rows = []
        for name, vs_ref, rel, vs_own in acc["rows"]:
            if isinstance(vs_ref, str):
                rows.append([name.replace("_", " "), "error: " + vs_ref, "-", "-"])
            else:
                rows.append([name.replace("_", " "), "-" if vs_ref is None else f"{vs_ref:.2e}",
                             "-" if rel is None else f"{rel:.2e}", "-" if vs_own is None else f"{vs_own:.2e}"])
        lines += table(["system", "vs torch fp32", "relative (/ max abs)", "vs own fp32"], rows) + [""]
    errors = sorted({(s, r["error"]) for (t, b, l, s), r in res.items() if r.get("error")})
    if errors or run.notes or run.unsupported:
        lines += ["## Errors and notes", ""]
        lines += [f"- {s}: {e}" for s, e in errors]
        lines += [f"- our {d}: {m}" for d, m in sorted(run.unsupported.items())]
        lines += [f"- {n}" for n in run.notes]
        lines.append("")
    return "\n".join(lines) + "\n"

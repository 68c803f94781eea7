"""The Markdown report of compare_gliner.py: settings, one row per system and batch size (texts/s, ratios, peak
memory), agreement of the entities with GLiNER's own, errors."""
import os
import statistics
import subprocess
import sys

from compare_common import commit, machine, table, today
from gliner_texts import word_count


def gpu_name():
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def agreement(ref, run):
    """(identical texts, ref entities, run entities, missing, extra, max score diff over common entities)."""
    same = missing = extra = 0
    worst = 0.0
    n_ref = n_run = 0
    for r, g in zip(ref, run):
        rk = {(s, e, l): sc for s, e, l, sc in r}
        gk = {(s, e, l): sc for s, e, l, sc in g}
        n_ref += len(rk)
        n_run += len(gk)
        same += rk.keys() == gk.keys()
        missing += len(rk.keys() - gk.keys())
        extra += len(gk.keys() - rk.keys())
        for k in rk.keys() & gk.keys():
            worst = max(worst, abs(rk[k] - gk[k]))
    return same, n_ref, n_run, missing, extra, worst


def rows_of(st):
    """[(label, device, dtype, {batch: record}, peak_kib)] for every run, GLiNER's first."""
    a = st.a
    rows = []
    for part, device in (("torch", "GPU"), ("ort", f"CPU, {a.threads} threads")):
        res = st.gliner.get(part)
        if not res:
            continue
        name = "GLiNER PyTorch" if part == "torch" else "GLiNER ONNX Runtime"
        if part == "torch" and res.get("device"):
            device = res["device"]
        if not res.get("runs"):
            rows.append((name, device, "-", {"error": res.get("error", "no result")}, None))
        for rec in res.get("runs", []):
            batches = {b: rec.get(f"batch_{b}") for b in a.batch_sizes}
            if rec.get("error") or rec.get("skipped"):
                batches = {"error": rec.get("error") or rec.get("skipped")}
            rows.append((name, device, rec["dtype"], batches, rec.get("vmhwm_kib")))
    for backend, dtypes in (("cuda", a.cuda_dtypes), ("eigen", a.cpu_dtypes)):
        for dtype in dtypes:
            batches = {b: st.ours.get((backend, dtype, b)) for b in a.batch_sizes}
            if not any(batches.values()):
                continue
            peak = max((r.get("vmhwm_kib") or 0 for r in batches.values() if r), default=0) or None
            device = (st.device or "GPU").split(",")[0] if backend == "cuda" else f"CPU, {a.threads} threads"
            rows.append((f"ours ({backend})", device, dtype, batches, peak))
    return rows


def tps(rec):
    if not rec:
        return "-"
    if rec.get("texts_per_s"):
        return f"{rec['texts_per_s']:.1f}"
    return rec.get("skipped") or ("error" if rec.get("error") else "-")


def report(st, texts, parts):
    a = st.a
    big = max(a.batch_sizes)
    words = [word_count(t) for t in texts]
    vers = {}
    for res in st.gliner.values():
        vers.update(res.get("versions", {}))
    gl_commit = gliner_commit(a)
    tf32 = st.gliner.get("torch", {}).get("tf32")
    lines = [f"# GLiNER: flashdeberta vs GLiNER's own PyTorch and ONNX Runtime paths, {today()}", "",
             f"- machine: {machine()}" + (f"; GPU: {st.device}" if st.device else ""),
             f"- commit: {commit(a.commit)}" + (f"; our CLI: `{st.cli}`" if st.cli else ""),
             "- versions: Python " + sys.version.split()[0] + "".join(f", {k} {v}" for k, v in sorted(vers.items())) +
             (f"; GLiNER source {gl_commit}" if gl_commit else "")]
    if a.model:
        lines.append(f"- model: `{a.model}` (given)")
    else:
        b = st.build
        lines.append("- model: gliner_medium-v2.1-shaped, random, built by GLiNER's own code "
                     "(UniEncoderSpanGLiNER.load_from_config, backbone_from_pretrained=True): DeBERTa-v3-base backbone "
                     "(12 layers, hidden 768, 12 heads, 256 buckets, c2p|p2c; models/tiny-en's 12,000-piece "
                     "SentencePiece vocabulary), GLiNER hidden_size 512, one BiLSTM layer, span_mode markerV0, "
                     "max_width 12, max_len 384; " + (f"{b['parameters'] / 1e6:.1f} M parameters, " if b.get("parameters") else "") +
                     "fan-in randomization and label-projection calibration as tests/fixtures/make_gliner_fixtures.py"
                     f" (calibration text's logits: mean {a.calib_mean:g}, std 2); save_pretrained (safetensors); "
                     "both systems load that directory" + (f"; ONNX: GLiNER's export_to_onnx ({b.get('onnx_s')} s)"
                                                           if b.get("onnx") else "") +
                     (f"; ONNX export failed: {b['onnx_error']}" if b.get("onnx_error") else ""))
    lines += [
        f"- input: {len(texts)} texts of {min(words)}-{max(words)} words (mean {statistics.mean(words):.0f}; "
        f"GLiNER's whitespace splitter), labels {', '.join(a.labels)}, threshold {a.threshold:g}, flat NER",
        f"- batch {big}: GLiNER `inference(texts, labels, batch_size={big})` and ours `--batch-size {big}` on the same "
        f"{big} texts; GPU {a.warmup} warm-up + {a.repeat} timed batches, CPU {a.cpu_warmup} + {a.cpu_repeat}; "
        "texts/s at the median batch time (ours: each batch timed by the arrival of its last output line, one "
        "process). Batch 1: GLiNER `predict_entities` per text, ours `--batch-size 1`, "
        f"{a.warmup_single} warm-up texts then {a.single_texts} (GPU) or {max(1, a.single_texts // 2)} (CPU) timed; "
        "texts / total time. Tokenization and decoding included on both sides, model load excluded",
        "- GLiNER PyTorch: torch's defaults as a user gets them" +
        (f" (TF32: matmul {tf32.get('matmul')}, cuDNN {tf32.get('cudnn')})" if tf32 else "") +
        "; HF's DebertaV2Model backbone (eager attention), no FlashDeBERTa, no torch.compile",
        f"- CPU runs pinned to the first {a.threads} CPUs (sched_setaffinity); GLiNER ONNX Runtime: ORT_ENABLE_ALL, "
        f"intra_op {a.threads}, inter_op 1, GLiNER's torch pre/post-processing at {a.threads} threads; "
        "peak host memory: VmHWM of the process (/proc)",
        f"- whole run: {st.elapsed():.0f} s", "", "## Throughput (texts/s)", ""]
    header = ["system", "device", "dtype"] + [f"batch {b}" for b in a.batch_sizes] + ["peak host MiB"]
    rows = []
    all_rows = rows_of(st)
    for name, device, dtype, batches, peak in all_rows:
        if "error" in batches:
            rows.append([name, device, dtype] + [str(batches["error"])[:120].replace("|", "/")] +
                        ["-"] * (len(a.batch_sizes) - 1) + ["-"])
            continue
        rows.append([name, device, dtype] + [tps(batches.get(b)) for b in a.batch_sizes] +
                    [f"{peak / 1024:.0f}" if peak else "-"])
    lines += table(header, rows) + [""]

    def rate(name_prefix, dtype, b):
        for name, _, d, batches, _ in all_rows:
            if name.startswith(name_prefix) and d == dtype and isinstance(batches.get(b), dict):
                return batches[b].get("texts_per_s")
        return None

    # (label, ours (name, dtype), GLiNER's (name, dtype), target at the big batch)
    comps = [(f"ours CUDA bf16 vs GLiNER PyTorch {gd} (GPU)", ("ours (cuda)", "bf16"), ("GLiNER PyTorch", gd), 5.0)
             for gd in a.torch_dtypes]
    comps.append((f"ours eigen fp32 vs GLiNER ONNX Runtime ({a.threads} threads)", ("ours (eigen)", "fp32"),
                  ("GLiNER ONNX Runtime", "fp32"), 2.0))
    lines += [f"## Speed-ups (issue 16's targets at batch {big}: >= 5x GLiNER's PyTorch on the GPU with ours in "
              f"bf16, >= 2x GLiNER's ONNX Runtime on the CPU)", ""]
    srows = []
    for label, ours_key, gl_key, target in comps:
        cells = []
        big_ratio = None
        for b in a.batch_sizes:
            o, g = rate(ours_key[0], ours_key[1], b), rate(gl_key[0], gl_key[1], b)
            r = o / g if o and g else None
            cells.append(f"{r:.2f}x" if r else "-")
            if b == big:
                big_ratio = r
        met = "-" if big_ratio is None else ("yes" if big_ratio >= target else "no")
        srows.append([label] + cells + [f">= {target:g}x at batch {big}", met])
    lines += table(["comparison"] + [f"batch {b}" for b in a.batch_sizes] + ["target", "met"], srows) + [""]

    ref_name, ref = None, None
    for name, _, dtype, batches, _ in all_rows:
        rec = batches.get(big) if isinstance(batches, dict) else None
        if name.startswith("GLiNER") and dtype == "fp32" and rec and rec.get("entities"):
            ref_name, ref = f"{name} fp32", rec["entities"]
            break
    if ref is not None:
        lines += [f"## Agreement on the {big}-text batch, against {ref_name}", "",
                  f"Entities per text in the reference: {sum(len(x) for x in ref) / len(ref):.1f} on average.", ""]
        arows = []
        for name, device, dtype, batches, _ in all_rows:
            rec = batches.get(big) if isinstance(batches, dict) else None
            if not rec or not rec.get("entities") or (f"{name} {dtype}" == ref_name):
                continue
            same, n_ref, n_run, miss, extra, worst = agreement(ref, rec["entities"])
            arows.append([f"{name} {dtype}", f"{same}/{len(ref)}", f"{n_ref} / {n_run}", miss, extra, f"{worst:.2e}"])
        lines += table(["run", "texts with identical spans and labels", "entities ref / run", "missing", "extra",
                        "max score diff (common)"], arows) + [""]
    errs = [(n, d, b, r["error"]) for n, _, d, bs, _ in all_rows if "error" not in bs
            for b, r in bs.items() if isinstance(r, dict) and r.get("error")]
    if errs or st.notes:
        lines += ["## Errors and notes", ""]
        lines += [f"- {n} {d} batch {b}: {e}" for n, d, b, e in errs]
        lines += [f"- {n}" for n in st.notes]
        lines.append("")
    return "\n".join(lines) + "\n"


def gliner_commit(a):
    p = os.path.join(a.gliner_src, "GLINER_COMMIT")
    return open(p).read().strip() if os.path.exists(p) else None

"""The worker processes of compare_gliner.py (GPU machine only: torch, transformers, GLiNER's source on
PYTHONPATH): `build` makes the gliner_medium-shaped random model and its ONNX export with GLiNER's own code and the
fixtures' rules (tests/fixtures/gliner_model.py), `torch` and `ort` time GLiNER's own calls. compare_gliner.py
starts them as `compare_gliner.py --worker KIND`; each writes its result as JSON to --result."""
import json
import os
import statistics
import sys
import tempfile
import time

from compare_common import REPO, vmhwm_kib

MODEL_CFG = dict(span_mode="markerV0", hidden_size=512, num_rnn_layers=1, max_width=12, max_len=384,
                 words_splitter_type="whitespace", dropout=0.4)
BACKBONE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
                hidden_act="gelu", max_position_embeddings=512, relative_attention=True, position_buckets=256,
                max_relative_positions=-1, norm_rel_ebd="layer_norm", share_att_key=True, pos_att_type="p2c|c2p",
                position_biased_input=False, type_vocab_size=0, layer_norm_eps=1e-7, pad_token_id=0)


def log(msg):
    sys.stderr.write(f"[{time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


def save_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False)
    os.replace(tmp, path)


def import_gliner():
    import importlib.util
    if importlib.util.find_spec("flashdeberta") is not None:
        # GLiNER's encoder imports FlashDebertaV2Model from any module named flashdeberta (Knowledgator's
        # package); ours has that name too and would break GLiNER's import.
        raise RuntimeError("a module named 'flashdeberta' is importable here (PYTHONPATH?); GLiNER would import "
                           "FlashDebertaV2Model from it. Run the GLiNER parts with PYTHONPATH=.reference/gliner_src only")
    import gliner
    from gliner.model import UniEncoderSpanGLiNER
    return gliner, UniEncoderSpanGLiNER


def worker_build(a):
    import shutil
    import torch
    from transformers import DebertaV2Config, DebertaV2Model
    gliner, UniEncoderSpanGLiNER = import_gliner()
    sys.path.insert(0, str(REPO / "tests" / "fixtures"))
    import gliner_cases  # the fixtures' vocabularies
    import gliner_model  # randomize() and calibrate(): the fixtures' rules

    torch.set_num_threads(max(1, a.threads))
    spec = json.load(open(a.texts_file, encoding="utf-8"))
    info = {"gliner": getattr(gliner, "__version__", None), "torch": torch.__version__}
    t0 = time.time()
    vocab_dir, vocab_size = gliner_cases.VOCABS["tiny-en"]
    tmp = tempfile.mkdtemp(prefix="gliner_medium_bb_")
    try:
        torch.manual_seed(a.seed)
        DebertaV2Model(DebertaV2Config(vocab_size=vocab_size, **BACKBONE)).save_pretrained(tmp)
        for f in gliner_cases.TOKENIZER_FILES:
            if os.path.exists(os.path.join(vocab_dir, f)):
                shutil.copy(os.path.join(vocab_dir, f), os.path.join(tmp, f))
        cfg = dict(MODEL_CFG, model_name=tmp)
        model = UniEncoderSpanGLiNER.load_from_config(cfg, backbone_from_pretrained=True)
        model.eval()
        n = gliner_model.randomize(model.model, a.seed + 1)
        calib = gliner_model.calibrate(model, False, spec["texts"][0], spec["labels"], mean=a.calib_mean, std=2.0)
        model.config.model_name = "flashdeberta-bench/random-deberta-v3-base"  # never fetched: the dir is complete
        if os.path.exists(a.model_dir):
            shutil.rmtree(a.model_dir)
        model.save_pretrained(a.model_dir, safe_serialization=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    info.update(parameters=sum(p.numel() for p in model.model.parameters()), randomized=n, calibration=calib,
                build_s=round(time.time() - t0, 1), files=sorted(os.listdir(a.model_dir)))
    log(f"model saved in {a.model_dir} ({info['parameters'] / 1e6:.1f} M parameters, {info['build_s']} s): "
        f"{info['files']}; calibration {calib}")
    save_json(a.result, {"build": info})
    if a.onnx_dir:
        t0 = time.time()
        try:
            if os.path.exists(a.onnx_dir):
                shutil.rmtree(a.onnx_dir)
            paths = model.export_to_onnx(a.onnx_dir)  # GLiNER's own export (torch.onnx.export, dynamo=False)
            info.update(onnx=paths, onnx_s=round(time.time() - t0, 1))
            log(f"ONNX export: {paths} in {info['onnx_s']} s")
        except Exception as e:  # noqa: BLE001 (the PyTorch parts can still run)
            info["onnx_error"] = f"{type(e).__name__}: {str(e)[:400]}"
            log("ONNX export failed: " + info["onnx_error"])
        save_json(a.result, {"build": info})


def time_gliner(model, texts, labels, threshold, batch, warmup, repeat, single_texts, deadline):
    """Texts/s of GLiNER's own calls; batch 64: inference() on the 64 texts; batch 1: predict_entities per text."""
    if time.time() > deadline:
        return {"skipped": "deadline"}
    if batch == 1:
        pool = [texts[i % len(texts)] for i in range(warmup + single_texts)]
        for t in pool[:warmup]:
            model.predict_entities(t, labels, threshold=threshold)
        times = []
        for t in pool[warmup:]:
            start = time.perf_counter()
            model.predict_entities(t, labels, threshold=threshold)
            times.append(time.perf_counter() - start)
            if time.time() > deadline:
                break
        return {"texts_per_s": len(times) / sum(times), "median_ms": statistics.median(times) * 1e3,
                "texts": len(times)}
    chunk = texts[:batch]
    for _ in range(warmup):
        model.inference(chunk, labels, threshold=threshold, batch_size=batch)
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = model.inference(chunk, labels, threshold=threshold, batch_size=batch)
        times.append(time.perf_counter() - start)
        if time.time() > deadline:
            break
    med = statistics.median(times)
    ents = [[[e["start"], e["end"], e["label"], float(e["score"])] for e in text_ents] for text_ents in out]
    return {"texts_per_s": len(chunk) / med, "median_ms": med * 1e3, "runs": len(times), "entities": ents}


def worker_run(a):
    """GLiNER's PyTorch model on CUDA (a.worker == 'torch') or its ONNX Runtime path on the CPU ('ort')."""
    import torch
    gliner, UniEncoderSpanGLiNER = import_gliner()
    spec = json.load(open(a.texts_file, encoding="utf-8"))
    texts, labels, thr = spec["texts"], spec["labels"], spec["threshold"]
    deadline = a.deadline
    result = {"versions": {"gliner": getattr(gliner, "__version__", None), "torch": torch.__version__}, "runs": []}
    if a.worker == "torch":
        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        result["device"] = torch.cuda.get_device_name(0)
        result["tf32"] = {"matmul": torch.backends.cuda.matmul.allow_tf32, "cudnn": torch.backends.cudnn.allow_tf32}
        settings = [(d, None) for d in a.dtypes.split(",")]
    else:
        import onnxruntime as ort
        torch.set_num_threads(a.threads)  # GLiNER's pre- and post-processing run in torch on the CPU
        result["versions"]["onnxruntime"] = ort.__version__
        settings = [("fp32", None)]
    for dtype, _ in settings:
        rec = {"dtype": dtype}
        result["runs"].append(rec)
        if time.time() > deadline:
            rec["skipped"] = "deadline"
            continue
        try:
            t0 = time.time()
            if a.worker == "torch":
                model = UniEncoderSpanGLiNER.from_pretrained(a.model_dir, local_files_only=True, map_location="cuda",
                                                             dtype=None if dtype == "fp32" else dtype)
                rec["param_dtype"] = str(next(model.model.parameters()).dtype)
            else:
                so = ort.SessionOptions()
                so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                so.intra_op_num_threads = a.threads
                so.inter_op_num_threads = 1
                so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
                model = UniEncoderSpanGLiNER.from_pretrained(a.model_dir, local_files_only=True, map_location="cpu",
                                                             load_onnx_model=True, onnx_model_file="model.onnx",
                                                             session_options=so)
                rec["providers"] = model.model.session.get_providers()
            model.eval()
            rec["load_s"] = round(time.time() - t0, 2)
            log(f"{a.worker} {dtype}: loaded in {rec['load_s']} s")
            for b in sorted(set(a.batch_sizes), reverse=True):
                try:
                    warm = a.warmup_single if b == 1 else a.warmup
                    r = time_gliner(model, texts, labels, thr, b, warm, a.repeat, a.single_texts, deadline)
                except Exception as e:  # noqa: BLE001
                    r = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
                rec[f"batch_{b}"] = r
                log(f"{a.worker} {dtype} batch {b}: " + json.dumps({k: v for k, v in r.items() if k != "entities"}))
                rec["vmhwm_kib"] = vmhwm_kib()
                save_json(a.result, result)
            del model
            if a.worker == "torch":
                torch.cuda.empty_cache()
        except Exception as e:  # noqa: BLE001 (reported; the next setting still runs)
            rec["error"] = f"{type(e).__name__}: {str(e)[:400]}"
            log(f"{a.worker} {dtype}: " + rec["error"])
        save_json(a.result, result)
    result["vmhwm_kib"] = vmhwm_kib()
    save_json(a.result, result)

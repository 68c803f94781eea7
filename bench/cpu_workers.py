"""The worker processes of compare_cpu.py (GPU machine only: they import numpy, torch, transformers and
onnxruntime): `build` makes the random deberta-v3-base-shaped model and its ONNX graphs, `ort` and `torch` are
long-lived timing workers answering one JSON request per stdin line. compare_cpu.py starts them as
`compare_cpu.py --worker KIND` through Worker; every answer is a line that starts with TAG."""
import json
import math
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

from compare_common import BenchError, pinned, short_error, thread_env, vmhwm_kib

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compare_cpu.py")  # what a worker runs

V3_BASE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
               hidden_act="gelu", max_position_embeddings=512, type_vocab_size=0, relative_attention=True,
               position_buckets=256, max_relative_positions=-1, norm_rel_ebd="layer_norm", share_att_key=True,
               pos_att_type=["p2c", "c2p"], position_biased_input=False, layer_norm_eps=1e-7, pad_token_id=0)
TAG = "@@"  # worker protocol lines start with it; anything else a library prints is ignored


def say(obj):
    sys.stdout.write(TAG + json.dumps(obj) + "\n")
    sys.stdout.flush()


def random_ids(np, batch, length, vocab, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(5, vocab, size=(batch, length), dtype=np.int64)


def onnx_path_for(onnx_dir, batch, length):
    return os.path.join(onnx_dir, f"{batch}x{length}.onnx")


def onnx_export(np, torch, model, onnx_dir, shapes, vocab, log):
    """Exports model's last_hidden_state once per (batch, length) shape into onnx_dir and checks ONNX Runtime's
    output against torch's there on other ids: the TorchScript exporter first (dynamo=False, as GLiNER and most
    users export), the dynamo exporter where that fails. One static graph per shape, because transformers 5's
    DeBERTa-v2 computes its relative positions from Python ints, which an export freezes at the traced shape (a
    graph exported at 2 x 32 with dynamic axes gives outputs off by ~3 at 3 x 50). Returns how it was exported."""
    import onnxruntime as ort

    class LastHidden(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask):
            return self.m(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    wrapper = LastHidden(model).eval()
    os.makedirs(onnx_dir, exist_ok=True)
    exporters, worst, seconds, errors = set(), 0.0, 0.0, []
    for batch, length in sorted(set(shapes)):
        path = onnx_path_for(onnx_dir, batch, length)
        gen = torch.Generator().manual_seed(length)
        ids = torch.randint(5, vocab, (batch, length), generator=gen)
        mask = torch.ones_like(ids)
        for dynamo, opset in ((False, 17), (True, 18)):
            try:
                if os.path.exists(path):
                    os.remove(path)
                t0 = time.time()
                with torch.no_grad():
                    torch.onnx.export(wrapper, (ids, mask), path, input_names=["input_ids", "attention_mask"],
                                      output_names=["last_hidden_state"], opset_version=opset, dynamo=dynamo)
                seconds += time.time() - t0
                sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
                xi = random_ids(np, batch, length, vocab, length + 7)  # other ids than the export's
                xm = np.ones_like(xi)
                got = sess.run(["last_hidden_state"], {"input_ids": xi, "attention_mask": xm})[0]
                with torch.inference_mode():
                    want = model(input_ids=torch.from_numpy(xi), attention_mask=torch.from_numpy(xm))
                diff = float(np.abs(got - want.last_hidden_state.numpy()).max())
                if not diff < 1e-2:
                    raise RuntimeError(f"ONNX Runtime's output differs from torch's by {diff:g} (max abs) at "
                                       f"{batch} x {length}")
                log(f"exported {path} (dynamo={dynamo}, opset {opset}); against torch: {diff:.2e}")
                worst = max(worst, diff)
                exporters.add(("dynamo" if dynamo else "TorchScript (dynamo=False)", opset))
                break
            except Exception as e:  # noqa: BLE001 (any exporter failure: try the other one)
                errors.append(f"{batch}x{length} dynamo={dynamo}: {type(e).__name__}: {str(e)[:300]}")
                log("ONNX export failed: " + errors[-1])
        else:
            raise RuntimeError("torch.onnx.export failed both ways: " + " | ".join(errors[-2:]))
    return {"exporter": ", ".join(f"{name} opset {opset}" for name, opset in sorted(exporters)),
            "export_s": round(seconds, 1), "onnx_vs_torch_max_abs": worst, "onnx_shapes": len(set(shapes)),
            "failed_before": errors}


def worker_build(a):
    """Builds (or loads) the HF model, saves it for our CLI, exports ONNX; prints one result line."""
    import numpy as np
    import torch
    import transformers
    from transformers import DebertaV2Config, DebertaV2Model

    def log(msg):
        sys.stderr.write(f"[build] {msg}\n")
        sys.stderr.flush()

    torch.set_num_threads(max(1, a.threads))
    info = {"torch": torch.__version__, "transformers": transformers.__version__, "numpy": np.__version__}
    t0 = time.time()
    if a.source:
        model = DebertaV2Model.from_pretrained(a.source).eval()
        info["source"] = a.source
    else:
        config = DebertaV2Config(vocab_size=a.vocab_size, **V3_BASE)
        torch.manual_seed(0)
        model = DebertaV2Model(config).eval()
        model.save_pretrained(a.model_dir)  # transformers 5 writes model.safetensors
        if not os.path.exists(os.path.join(a.model_dir, "model.safetensors")):
            raise RuntimeError(f"save_pretrained wrote no model.safetensors in {a.model_dir}: "
                               f"{sorted(os.listdir(a.model_dir))}")
    vocab = model.config.vocab_size
    info.update(vocab_size=vocab, parameters=sum(p.numel() for p in model.parameters()),
                build_s=round(time.time() - t0, 1))
    log(f"model ready ({info['parameters'] / 1e6:.1f} M parameters) in {info['build_s']} s")
    if a.onnx:
        try:
            info.update(onnx_export(np, torch, model, a.onnx, a.onnx_shapes, vocab, log))
        except Exception as e:  # noqa: BLE001 (ours and torch still run; ORT is reported as failed)
            info["onnx_error"] = f"{type(e).__name__}: {str(e)[:500]}"
            log("ONNX: " + info["onnx_error"])
    say({"build": info})


def worker_loop(a):
    """A long-lived timing worker: answers one JSON request per stdin line."""
    import numpy as np
    t0 = time.time()
    versions = {"numpy": np.__version__}
    if a.worker == "ort":
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.intra_op_num_threads = a.threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        sessions = {}  # one graph per shape (onnx_export)
        versions["onnxruntime"] = ort.__version__
        vocab = a.vocab_size

        def prepare(shape):
            if shape not in sessions:
                sessions[shape] = ort.InferenceSession(onnx_path_for(a.onnx, *shape), so,
                                                       providers=["CPUExecutionProvider"])

        def forward(ids, mask):
            prepare(ids.shape)
            return sessions[ids.shape].run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask})[0]

        def to_numpy(out):
            return out
    else:
        import torch
        import transformers
        from transformers import DebertaV2Model
        torch.set_num_threads(a.threads)
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:
            pass
        model = DebertaV2Model.from_pretrained(a.model_dir).eval()
        if a.dtype == "bf16":
            model = model.to(torch.bfloat16)
        versions.update(torch=torch.__version__, transformers=transformers.__version__,
                        mkldnn_bf16=bool(getattr(torch.backends.mkldnn, "is_available", lambda: False)()))
        vocab = model.config.vocab_size

        def prepare(shape):
            pass

        def forward(ids, mask):
            with torch.inference_mode():
                return model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask)).last_hidden_state

        def to_numpy(out):
            return out.float().numpy()
    say({"ready": True, "versions": versions, "load_s": round(time.time() - t0, 2), "vmhwm_kib": vmhwm_kib(),
         "affinity": sorted(os.sched_getaffinity(0))})
    for line in sys.stdin:
        req = json.loads(line)
        op = req.get("op")
        if op == "quit":
            break
        try:
            if op == "time":
                b, l = req["batch"], req["seq_len"]
                ids = random_ids(np, b, l, vocab, b * 100003 + l)
                mask = np.ones_like(ids)
                prepare(ids.shape)  # loading a graph is not a warm-up's work
                start = time.perf_counter()
                forward(ids, mask)  # warm-up
                warm = time.perf_counter() - start
                if warm < 0.05:  # a second warm-up where it is cheap: caches, thread pools, oneDNN primitives
                    start = time.perf_counter()
                    forward(ids, mask)
                    warm = time.perf_counter() - start
                runs = min(req["max_repeat"], max(req["min_repeat"], math.ceil(req["budget_s"] / max(warm, 1e-6))))
                times = []
                for _ in range(runs):
                    start = time.perf_counter()
                    forward(ids, mask)
                    times.append((time.perf_counter() - start) * 1e3)
                times.sort()
                say({"median_ms": times[len(times) // 2] if len(times) % 2 else
                     (times[len(times) // 2 - 1] + times[len(times) // 2]) / 2,
                     "p10_ms": times[int(0.1 * (len(times) - 1))], "p90_ms": times[int(0.9 * (len(times) - 1) + 0.5)],
                     "runs": runs, "warmup_ms": warm * 1e3, "vmhwm_kib": vmhwm_kib()})
            elif op == "hidden":
                ids = np.array(req["ids"], dtype=np.int64)
                out = to_numpy(forward(ids, np.ones_like(ids)))
                out.astype("<f4").tofile(req["out"])
                say({"shape": list(out.shape)})
            else:
                say({"error": f"unknown op {op!r}"})
        except Exception as e:  # noqa: BLE001 (reported in the table, the worker goes on)
            say({"error": f"{type(e).__name__}: {e}"})


class Worker:
    """A timing worker process (ORT or torch) pinned to `cores`; requests and answers are JSON lines."""

    def __init__(self, name, argv, threads, cores, log_path, start_timeout):
        self.name = name
        self.log_path = log_path
        self.log = open(log_path, "w")
        cmd = [sys.executable, SCRIPT, *argv, "--threads", str(threads)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                     env=thread_env(threads), preexec_fn=pinned(cores))
        self.lines = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.hello = self._answer(start_timeout)

    def _pump(self):
        for line in self.proc.stdout:
            if line.startswith(TAG):
                self.lines.put(json.loads(line[len(TAG):]))
        self.lines.put(None)

    def _answer(self, timeout):
        try:
            msg = self.lines.get(timeout=timeout)
        except queue.Empty:
            self.close()
            raise BenchError(f"{self.name}: no answer within {timeout:.0f} s (log: {self.log_path})")
        if msg is None:
            self.proc.wait()
            self.log.flush()
            raise BenchError(f"{self.name} exited ({self.proc.returncode}): "
                             f"{short_error(Path(self.log_path).read_text(errors='replace'))} (log: {self.log_path})")
        return msg

    def call(self, request, timeout):
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return self._answer(timeout)

    def close(self):
        try:
            if self.proc.poll() is None:
                self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=20)
        except (OSError, subprocess.TimeoutExpired, ValueError):
            self.proc.kill()
            self.proc.wait()
        self.log.close()

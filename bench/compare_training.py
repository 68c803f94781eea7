#!/usr/bin/env python3
"""One training step on the host, ours against PyTorch float32 on the same CPUs and threads, in one run; and the
peak memory of one step as the sequence grows.

    python3 bench/compare_training.py [--threads 2] [--out bench/results/training-<date>-<host>.md]

(any python3: the torch side runs in child processes of --torch-python, by default the first of /usr/bin/python3
and this interpreter that imports torch).

The step, on both sides: zero the gradients, forward with the loss (sequence classification, 2 labels,
cross-entropy), backward, clip the global gradient norm at 1.0, AdamW (lr 5e-5, betas (0.9, 0.999), eps 1e-8,
weight decay 0.01 except on biases and LayerNorm weights: HF Trainer's two groups), float32, dropout off on both
sides (every rate 0, as HF's eval-mode arithmetic, so that both run the same work). Random token ids, all-ones
masks, labels b % 2.

Ours: build/bench/bench_training (Google Benchmark; bench/bench_training.cpp), EigenPolicy(--threads), flash
attention, `--steps=1 --benchmark_repetitions=R`: one untimed warm-up step per case, then R steps, each timed.
Torch: torch.set_num_threads(N), torch.optim.AdamW, torch.nn.utils.clip_grad_norm_, zero_grad(set_to_none=True);
one warm-up step, then R timed steps. Which model:
  - transformers importable (--torch-model auto): transformers' DebertaV2ForSequenceClassification built from the
    config, attn_implementation "eager", and "sdpa" as a second column where this transformers accepts it for
    DeBERTa-v2;
  - otherwise (Debian's torch 1.13 here has no transformers): REIMPL below, a pure-PyTorch re-implementation of
    HF's modeling_deberta_v2.py eager path, op for op (embeddings with HF's zero position tensor and mask multiply,
    log-bucket relative positions built every forward, DisentangledSelfAttention with bmm scores, c2p/p2c bmm +
    gather over the full L x L, share_att_key, the (B, 1, L, L) mask and masked_fill, softmax, the relative
    table's LayerNorm, GELU FFN, ContextPooler, HF's label-index gather and CrossEntropyLoss). Parameter names are
    HF's, so tiny-en's weights load into it.
The report names which ran.

Torch's BLAS: Debian's python3-torch (1.13, BLAS_INFO=generic) calls whatever libblas.so.3 the system's
alternatives give, by default the netlib reference implementation (libblas3): about 2 GFLOP/s per GEMM, 30-40x
below OpenBLAS on this machine, which would make any ratio meaningless. When torch maps that reference BLAS, its
children get Debian's OpenBLAS (libopenblas0-openmp, OpenMP threads as torch's) first on LD_LIBRARY_PATH
(--torch-blas-dir; see OPENBLAS_DIRS for where it is looked for), and the reference-BLAS torch is timed as an extra
column on --reference-blas-models only. The report lists the BLAS files each torch process mapped.

Both sides run pinned to the first N CPUs this process may use (sched_setaffinity,
as taskset -c) with OMP_NUM_THREADS, MKL_NUM_THREADS and OPENBLAS_NUM_THREADS = N; ours and torch alternate
model by model. Times: median of R steps (and the range).

Models: tiny-en (models/tiny-en, its weights on both sides, the classification head initialized) and the
deberta-v3-base shape (BASE_CONFIG: hidden 768, 12 layers, 12 heads, intermediate 3072, vocabulary 128100,
256 buckets, c2p|p2c, share_att_key, relative LayerNorm, no absolute positions; random init on both sides).

Profile (--parts profile): `bench_training --profile`, our step per operation kind (ProfilingPolicy<EigenPolicy>), to see where
our time goes.

Memory (--parts memory): for each of --memory-models and --memory-lengths, one fresh process per side and length
runs a warm-up step at 1 x 16 (AdamW's moments, thread pools), then one step at 1 x L; the step's peak resident
memory (VmHWM after resetting it through /proc/self/clear_refs) less the resident memory just before it. Ours:
`bench_training --memory` (flash). Torch: the same in a worker; its (L, L) scores grow quadratically, so a length
is skipped where the quadratic extrapolation of the previous length exceeds --torch-memory-limit-gib. Linear
growth shows as constant KiB per token and a constant slope between lengths.
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_common import (REPO, BenchError, commit, first_cores, fmt, machine, pinned, short_error,  # noqa: E402
                            table, thread_env, today, write_report)

TINY_EN = REPO / "models" / "tiny-en"
SHAPES = [(8, 128), (1, 512)]
MODELS = ["tiny-en", "v3-base"]

# deberta-v3-base's config.json (bench/random_checkpoint.hpp writes the same for our side), dropout off.
BASE_CONFIG = {
    "model_type": "deberta-v2", "vocab_size": 128100, "hidden_size": 768, "num_hidden_layers": 12,
    "num_attention_heads": 12, "intermediate_size": 3072, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 512, "type_vocab_size": 0,
    "initializer_range": 0.02, "layer_norm_eps": 1e-7, "relative_attention": True, "max_relative_positions": -1,
    "position_buckets": 256, "norm_rel_ebd": "layer_norm", "share_att_key": True, "pos_att_type": "p2c|c2p",
    "position_biased_input": False, "pad_token_id": 0,
}


def model_config(name):
    if name == "tiny-en":
        cfg = json.loads((TINY_EN / "config.json").read_text())
    elif name == "v3-base":
        cfg = dict(BASE_CONFIG)
    else:
        raise BenchError(f"unknown model {name!r} ({', '.join(MODELS)})")
    for key in ("hidden_dropout_prob", "attention_probs_dropout_prob", "pooler_dropout"):
        cfg[key] = 0.0
    cfg.pop("cls_dropout", None)
    cfg["num_labels"] = 2
    cfg.pop("id2label", None)
    cfg.pop("label2id", None)
    cfg.pop("dtype", None)
    cfg.pop("torch_dtype", None)
    cfg["architectures"] = ["DebertaV2ForSequenceClassification"]
    return cfg


# ------------------------------------------------------------------------------------------------------------
# The torch side (runs in a child process of --torch-python)
# ------------------------------------------------------------------------------------------------------------

def build_reimpl(torch, cfg):
    """HF modeling_deberta_v2.py's DebertaV2ForSequenceClassification, eager attention, written out in plain torch
    (same modules, parameter names, ops and order). Only what a v2/v3 config without conv layer, talking heads,
    embedding projection or absolute positions uses, which tiny-en and v3-base are; checked below."""
    nn = torch.nn
    F = nn.functional
    for key, ok in (("conv_kernel_size", lambda v: not v), ("position_biased_input", lambda v: v is False),
                    ("relative_attention", lambda v: v is True)):
        if not ok(cfg.get(key)):
            raise BenchError(f"the re-implementation does not cover {key}={cfg.get(key)!r}")
    if cfg.get("embedding_size", cfg["hidden_size"]) != cfg["hidden_size"]:
        raise BenchError("the re-implementation does not cover embedding_size != hidden_size")
    hidden, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    eps = cfg["layer_norm_eps"]
    pos_att_type = cfg.get("pos_att_type") or []
    if isinstance(pos_att_type, str):
        pos_att_type = [x.strip() for x in pos_att_type.lower().split("|")]
    max_relative_positions = cfg.get("max_relative_positions", -1)
    if max_relative_positions < 1:
        max_relative_positions = cfg["max_position_embeddings"]
    position_buckets = cfg.get("position_buckets", -1)
    pos_ebd_size = position_buckets if position_buckets > 0 else max_relative_positions
    norm_rel_ebd = [x.strip() for x in cfg.get("norm_rel_ebd", "none").lower().split("|")]
    share_att_key = cfg.get("share_att_key", False)
    act = {"gelu": F.gelu}[cfg.get("hidden_act", "gelu")]
    pooler_act = {"gelu": F.gelu}[cfg.get("pooler_hidden_act", "gelu")]
    num_labels = cfg["num_labels"]

    def make_log_bucket_position(relative_pos, bucket_size, max_position):
        sign = torch.sign(relative_pos)
        mid = bucket_size // 2
        abs_pos = torch.where((relative_pos < mid) & (relative_pos > -mid),
                              torch.tensor(mid - 1).type_as(relative_pos), torch.abs(relative_pos))
        log_pos = torch.ceil(torch.log(abs_pos / mid) / torch.log(torch.tensor((max_position - 1) / mid))
                             * (mid - 1)) + mid
        return torch.where(abs_pos <= mid, relative_pos.type_as(log_pos), log_pos * sign)

    def build_relative_position(query_layer, key_layer, bucket_size=-1, max_position=-1):
        query_size, key_size = query_layer.size(-2), key_layer.size(-2)
        q_ids = torch.arange(query_size, dtype=torch.long, device=query_layer.device)
        k_ids = torch.arange(key_size, dtype=torch.long, device=key_layer.device)
        rel_pos_ids = q_ids[:, None] - k_ids[None, :]
        if bucket_size > 0 and max_position > 0:
            rel_pos_ids = make_log_bucket_position(rel_pos_ids, bucket_size, max_position)
        rel_pos_ids = rel_pos_ids.to(torch.long)
        rel_pos_ids = rel_pos_ids[:query_size, :]
        return rel_pos_ids.unsqueeze(0)

    def scaled_size_sqrt(query_layer, scale_factor):
        return torch.sqrt(torch.tensor(query_layer.size(-1), dtype=torch.float) * scale_factor)

    class SelfOutput(nn.Module):  # DebertaV2SelfOutput and DebertaV2Output (dense in -> hidden)
        def __init__(self, width):
            super().__init__()
            self.dense = nn.Linear(width, hidden)
            self.LayerNorm = nn.LayerNorm(hidden, eps)
            self.dropout = nn.Dropout(cfg["hidden_dropout_prob"])

        def forward(self, hidden_states, input_tensor):
            hidden_states = self.dropout(self.dense(hidden_states))
            return self.LayerNorm(hidden_states + input_tensor)

    class DisentangledSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.num_attention_heads = heads
            self.attention_head_size = hidden // heads
            self.all_head_size = heads * self.attention_head_size
            self.query_proj = nn.Linear(hidden, self.all_head_size, bias=True)
            self.key_proj = nn.Linear(hidden, self.all_head_size, bias=True)
            self.value_proj = nn.Linear(hidden, self.all_head_size, bias=True)
            self.pos_dropout = nn.Dropout(cfg["hidden_dropout_prob"])
            if not share_att_key:
                if "c2p" in pos_att_type:
                    self.pos_key_proj = nn.Linear(hidden, self.all_head_size, bias=True)
                if "p2c" in pos_att_type:
                    self.pos_query_proj = nn.Linear(hidden, self.all_head_size)
            self.dropout = nn.Dropout(cfg["attention_probs_dropout_prob"])

        def transpose_for_scores(self, x, attention_heads):
            new_x_shape = x.size()[:-1] + (attention_heads, -1)
            x = x.view(new_x_shape)
            return x.permute(0, 2, 1, 3).contiguous().view(-1, x.size(1), x.size(-1))

        def forward(self, hidden_states, attention_mask, relative_pos, rel_embeddings):
            query_layer = self.transpose_for_scores(self.query_proj(hidden_states), heads)
            key_layer = self.transpose_for_scores(self.key_proj(hidden_states), heads)
            value_layer = self.transpose_for_scores(self.value_proj(hidden_states), heads)
            scale_factor = 1 + ("c2p" in pos_att_type) + ("p2c" in pos_att_type)
            scale = scaled_size_sqrt(query_layer, scale_factor)
            attention_scores = torch.bmm(query_layer, key_layer.transpose(-1, -2) / scale.to(dtype=query_layer.dtype))
            rel_embeddings = self.pos_dropout(rel_embeddings)
            rel_att = self.disentangled_attention_bias(query_layer, key_layer, relative_pos, rel_embeddings,
                                                       scale_factor)
            attention_scores = attention_scores + rel_att
            attention_scores = attention_scores.view(-1, heads, attention_scores.size(-2), attention_scores.size(-1))
            attention_mask = attention_mask.bool()
            attention_scores = attention_scores.masked_fill(~attention_mask, torch.finfo(query_layer.dtype).min)
            attention_probs = F.softmax(attention_scores, dim=-1)
            attention_probs = self.dropout(attention_probs)
            context_layer = torch.bmm(attention_probs.view(-1, attention_probs.size(-2), attention_probs.size(-1)),
                                      value_layer)
            context_layer = (context_layer.view(-1, heads, context_layer.size(-2), context_layer.size(-1))
                             .permute(0, 2, 1, 3).contiguous())
            return context_layer.view(context_layer.size()[:-2] + (-1,))

        def disentangled_attention_bias(self, query_layer, key_layer, relative_pos, rel_embeddings, scale_factor):
            relative_pos = relative_pos.unsqueeze(1)  # (1, L, L) -> (1, 1, L, L)
            att_span = pos_ebd_size
            relative_pos = relative_pos.to(device=query_layer.device, dtype=torch.long)
            rel_embeddings = rel_embeddings[0:att_span * 2, :].unsqueeze(0)
            repeat = query_layer.size(0) // heads
            if share_att_key:
                pos_query_layer = self.transpose_for_scores(self.query_proj(rel_embeddings), heads).repeat(repeat, 1, 1)
                pos_key_layer = self.transpose_for_scores(self.key_proj(rel_embeddings), heads).repeat(repeat, 1, 1)
            else:
                if "c2p" in pos_att_type:
                    pos_key_layer = self.transpose_for_scores(self.pos_key_proj(rel_embeddings), heads).repeat(
                        repeat, 1, 1)
                if "p2c" in pos_att_type:
                    pos_query_layer = self.transpose_for_scores(self.pos_query_proj(rel_embeddings), heads).repeat(
                        repeat, 1, 1)
            score = 0
            if "c2p" in pos_att_type:
                scale = scaled_size_sqrt(pos_key_layer, scale_factor)
                c2p_att = torch.bmm(query_layer, pos_key_layer.transpose(-1, -2))
                c2p_pos = torch.clamp(relative_pos + att_span, 0, att_span * 2 - 1)
                c2p_att = torch.gather(c2p_att, dim=-1, index=c2p_pos.squeeze(0).expand(
                    [query_layer.size(0), query_layer.size(1), relative_pos.size(-1)]))
                score += c2p_att / scale.to(dtype=c2p_att.dtype)
            if "p2c" in pos_att_type:
                scale = scaled_size_sqrt(pos_query_layer, scale_factor)
                r_pos = relative_pos  # build_rpos: query and key lengths are equal
                p2c_pos = torch.clamp(-r_pos + att_span, 0, att_span * 2 - 1)
                p2c_att = torch.bmm(key_layer, pos_query_layer.transpose(-1, -2))
                p2c_att = torch.gather(p2c_att, dim=-1, index=p2c_pos.squeeze(0).expand(
                    [query_layer.size(0), key_layer.size(-2), key_layer.size(-2)])).transpose(-1, -2)
                score += p2c_att / scale.to(dtype=p2c_att.dtype)
            return score

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.self = DisentangledSelfAttention()
            self.output = SelfOutput(hidden)

        def forward(self, hidden_states, attention_mask, relative_pos, rel_embeddings):
            return self.output(self.self(hidden_states, attention_mask, relative_pos, rel_embeddings), hidden_states)

    class Intermediate(nn.Module):
        def __init__(self):
            super().__init__()
            self.dense = nn.Linear(hidden, cfg["intermediate_size"])

        def forward(self, hidden_states):
            return act(self.dense(hidden_states))

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = Attention()
            self.intermediate = Intermediate()
            self.output = SelfOutput(cfg["intermediate_size"])

        def forward(self, hidden_states, attention_mask, relative_pos, rel_embeddings):
            attention_output = self.attention(hidden_states, attention_mask, relative_pos, rel_embeddings)
            return self.output(self.intermediate(attention_output), attention_output)

    class Embeddings(nn.Module):
        def __init__(self):
            super().__init__()
            self.word_embeddings = nn.Embedding(cfg["vocab_size"], hidden, padding_idx=cfg.get("pad_token_id", 0))
            self.token_type_embeddings = (nn.Embedding(cfg["type_vocab_size"], hidden)
                                          if cfg.get("type_vocab_size", 0) > 0 else None)
            self.LayerNorm = nn.LayerNorm(hidden, eps)
            self.dropout = nn.Dropout(cfg["hidden_dropout_prob"])

        def forward(self, input_ids, token_type_ids, mask):
            inputs_embeds = self.word_embeddings(input_ids)
            position_embeddings = torch.zeros_like(inputs_embeds)  # HF allocates it without absolute positions
            embeddings = inputs_embeds
            if cfg.get("position_biased_input"):
                embeddings = embeddings + position_embeddings
            if self.token_type_embeddings is not None:
                embeddings = embeddings + self.token_type_embeddings(token_type_ids)
            embeddings = self.LayerNorm(embeddings)
            mask = mask.unsqueeze(2).to(embeddings.dtype)
            embeddings = embeddings * mask
            return self.dropout(embeddings)

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.ModuleList([Layer() for _ in range(cfg["num_hidden_layers"])])
            self.rel_embeddings = nn.Embedding(pos_ebd_size * 2, hidden)
            if "layer_norm" in norm_rel_ebd:
                self.LayerNorm = nn.LayerNorm(hidden, eps, elementwise_affine=True)

        def forward(self, hidden_states, attention_mask):
            extended = attention_mask.unsqueeze(1).unsqueeze(2)
            attention_mask = extended * extended.squeeze(-2).unsqueeze(-1)
            relative_pos = build_relative_position(hidden_states, hidden_states, bucket_size=position_buckets,
                                                   max_position=max_relative_positions)
            rel_embeddings = self.rel_embeddings.weight
            if "layer_norm" in norm_rel_ebd:
                rel_embeddings = self.LayerNorm(rel_embeddings)
            next_kv = hidden_states
            for layer_module in self.layer:
                next_kv = layer_module(next_kv, attention_mask, relative_pos, rel_embeddings)
            return next_kv

    class Backbone(nn.Module):
        def __init__(self):
            super().__init__()
            self.embeddings = Embeddings()
            self.encoder = Encoder()

        def forward(self, input_ids, attention_mask):
            token_type_ids = torch.zeros(input_ids.size(), dtype=torch.long, device=input_ids.device)
            embedding_output = self.embeddings(input_ids, token_type_ids, attention_mask)
            return self.encoder(embedding_output, attention_mask)

    class ContextPooler(nn.Module):
        def __init__(self):
            super().__init__()
            self.dense = nn.Linear(cfg.get("pooler_hidden_size", hidden), cfg.get("pooler_hidden_size", hidden))
            self.dropout = nn.Dropout(cfg.get("pooler_dropout", 0.0))

        def forward(self, hidden_states):
            return pooler_act(self.dense(self.dropout(hidden_states[:, 0])))

    class ForSequenceClassification(nn.Module):
        def __init__(self):
            super().__init__()
            self.deberta = Backbone()
            self.pooler = ContextPooler()
            self.classifier = nn.Linear(hidden, num_labels)
            self.dropout = nn.Dropout(cfg["hidden_dropout_prob"])
            std = cfg.get("initializer_range", 0.02)
            for module in self.modules():  # HF's _init_weights
                if isinstance(module, (nn.Linear, nn.Embedding)):
                    module.weight.data.normal_(mean=0.0, std=std)
                    if isinstance(module, nn.Linear) and module.bias is not None:
                        module.bias.data.zero_()
                    if isinstance(module, nn.Embedding) and module.padding_idx is not None:
                        module.weight.data[module.padding_idx].zero_()
                elif isinstance(module, nn.LayerNorm):
                    module.weight.data.fill_(1.0)
                    module.bias.data.zero_()

        def forward(self, input_ids, attention_mask, labels):
            encoder_layer = self.deberta(input_ids, attention_mask)
            logits = self.classifier(self.dropout(self.pooler(encoder_layer)))
            label_index = (labels >= 0).nonzero()
            labels = labels.long()
            labeled_logits = torch.gather(logits, 0, label_index.expand(label_index.size(0), logits.size(1)))
            labels = torch.gather(labels, 0, label_index.view(-1))
            loss = nn.CrossEntropyLoss()(labeled_logits.view(-1, num_labels).float(), labels.view(-1))
            return loss, logits

    return ForSequenceClassification()


def read_safetensors_state(torch, path):
    """{name: float32 tensor} of a safetensors file (F16, BF16 or F32), without the safetensors package."""
    import struct
    dtypes = {"F16": torch.float16, "BF16": torch.bfloat16, "F32": torch.float32, "F64": torch.float64,
              "I64": torch.int64}
    data = Path(path).read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    state = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        raw = bytearray(data[8 + n + begin:8 + n + end])
        tensor = torch.frombuffer(raw, dtype=dtypes[info["dtype"]]).reshape(info["shape"])
        state[name] = tensor if info["dtype"] in ("F64", "I64") else tensor.float()
    return state


def torch_model(torch, name, kind, attn):
    """(model, description) for model `name` in float32, train mode."""
    cfg = model_config(name)
    torch.manual_seed(0)
    if kind == "transformers":
        import transformers
        config = transformers.DebertaV2Config(**{k: v for k, v in cfg.items() if k != "model_type"})
        model = transformers.DebertaV2ForSequenceClassification._from_config(config, attn_implementation=attn)
        used = getattr(model.config, "_attn_implementation", attn)
        desc = f"transformers {transformers.__version__} DebertaV2ForSequenceClassification, attn_implementation {used}"
    else:
        model = build_reimpl(torch, cfg)
        desc = "pure-PyTorch re-implementation of HF modeling_deberta_v2.py (eager)"
    if name == "tiny-en":
        state = read_safetensors_state(torch, TINY_EN / "model.safetensors")
        missing, unexpected = model.load_state_dict(state, strict=False)
        head = {"pooler.dense.weight", "pooler.dense.bias", "classifier.weight", "classifier.bias"}
        if set(missing) - head:
            raise BenchError(f"tiny-en: parameters missing from its checkpoint: {sorted(set(missing) - head)}")
        desc += "; tiny-en's weights, head initialized"
    model.float().train()
    return model, desc


def torch_step_fn(torch, model):
    """The step: zero_grad, forward + loss, backward, clip at 1.0, AdamW with Trainer's two groups."""
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (no_decay if (n.endswith("bias") or "LayerNorm" in n) else decay).append(p)
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=5e-5, betas=(0.9, 0.999), eps=1e-8)
    params = decay + no_decay

    def step(input_ids, attention_mask, labels, phases=None):
        t0 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        t1 = time.perf_counter()
        out = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
        loss = out[0] if isinstance(out, tuple) else out.loss
        t2 = time.perf_counter()
        loss.backward()
        t3 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        t4 = time.perf_counter()
        if phases is not None:
            for key, value in (("zero", t1 - t0), ("forward", t2 - t1), ("backward", t3 - t2), ("optimizer", t4 - t3)):
                phases.setdefault(key, []).append(value)
        return float(loss.detach())

    return step


def torch_inputs(torch, vocab, b, l, seed=7):
    g = torch.Generator().manual_seed(seed + b * 100003 + l)
    ids = torch.randint(5, vocab, (b, l), generator=g, dtype=torch.long)
    return ids, torch.ones(b, l, dtype=torch.long), torch.arange(b, dtype=torch.long) % 2


def mapped_blas():
    """The BLAS library files this process has mapped (torch's libblas.so.3 and what it resolved to), or []."""
    with open("/proc/self/maps") as fh:
        paths = {line.split()[-1] for line in fh if len(line.split()) >= 6}
    return sorted(p for p in paths if re.search(r"blas|mkl", os.path.basename(p), re.I))


def status_mib(key):
    with open("/proc/self/status") as fh:
        m = re.search(rf"^{key}:\s+(\d+)\s+kB", fh.read(), re.M)
    return int(m.group(1)) / 1024.0


def check_reimpl(torch):
    """The re-implementation against HF itself: tests/fixtures/training/v3_seqcls (make_training_fixtures.py: HF's
    DebertaV2ForSequenceClassification in float64, padded batch) loaded into it in float64; the largest loss and
    gradient differences, each gradient's relative to that tensor's largest |gradient|."""
    case = REPO / "tests" / "fixtures" / "training" / "v3_seqcls"
    cfg = json.loads((case / "config.json").read_text())
    cfg["num_labels"] = len(cfg.get("id2label") or {}) or 2
    model = build_reimpl(torch, cfg)
    missing, unexpected = model.load_state_dict(read_safetensors_state(torch, case / "model.safetensors"), strict=False)
    if missing:
        raise BenchError(f"check: parameters the fixture lacks: {missing}")
    model.double().train()
    inputs = read_safetensors_state(torch, case / "inputs.safetensors")
    expected = read_safetensors_state(torch, case / "expected.safetensors")
    loss, logits = model(inputs["input_ids"], inputs["attention_mask"], inputs["labels"])
    loss.backward()
    worst, worst_name = 0.0, None
    for name, p in model.named_parameters():
        ref = expected.get("grad." + name)
        if ref is None:  # HF lists tied weights once
            continue
        err = float((p.grad - ref).abs().max() / ref.abs().max().clamp_min(1e-30))
        if err > worst:
            worst, worst_name = err, name
    return {"check": "v3_seqcls", "loss": float(loss), "hf_loss": float(expected["loss"][0]),
            "loss_diff": abs(float(loss) - float(expected["loss"][0])),
            "logits_diff": float((logits - expected["logits"]).abs().max()),
            "worst_grad_rel": worst, "worst_grad": worst_name}


def torch_worker(a):
    import torch
    if a.worker == "check":
        print(json.dumps(check_reimpl(torch)), flush=True)
        return
    torch.set_num_threads(a.threads)
    kind = a.torch_kind
    model, desc = torch_model(torch, a.model, kind, a.attn)
    step = torch_step_fn(torch, model)
    vocab = model_config(a.model)["vocab_size"]
    base = {"side": "torch", "model": a.model, "desc": desc, "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(), "blas": mapped_blas()}
    if a.worker == "memory":
        loaded = status_mib("VmRSS")
        step(*torch_inputs(torch, vocab, 1, 16))
        inputs = torch_inputs(torch, vocab, 1, a.length)
        before = status_mib("VmRSS")
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        start = time.perf_counter()
        loss = step(*inputs)
        seconds = time.perf_counter() - start
        peak = status_mib("VmHWM")
        print(json.dumps({**base, "length": a.length, "loaded_mib": loaded, "before_mib": before, "peak_mib": peak,
                          "delta_mib": peak - before, "step_s": seconds, "loss": loss}), flush=True)
        return
    for b, l in a.shapes:
        inputs = torch_inputs(torch, vocab, b, l)
        loss = step(*inputs)  # warm-up
        times, phases = [], {}
        for _ in range(a.repeats):
            start = time.perf_counter()
            loss = step(*inputs, phases=phases)
            times.append(time.perf_counter() - start)
        print(json.dumps({**base, "batch": b, "length": l, "times_s": times, "phases_s": phases, "loss": loss}),
              flush=True)


# ------------------------------------------------------------------------------------------------------------
# The harness (standard library only)
# ------------------------------------------------------------------------------------------------------------

# Where Debian's libopenblas0-openmp puts its libblas.so.3: installed (apt-get install libopenblas0-openmp, which also
# makes it the system's libblas.so.3), or unpacked without installing (apt-get download libopenblas0-openmp;
# dpkg-deb -x libopenblas0-openmp_*.deb /tmp/openblas).
OPENBLAS_DIRS = ["/usr/lib/x86_64-linux-gnu/openblas-openmp", "/tmp/openblas/usr/lib/x86_64-linux-gnu/openblas-openmp"]


def parse_shapes(text):
    out = []
    for item in text.split(","):
        b, l = item.lower().split("x")
        out.append((int(b), int(l)))
    return out


def cpu_model():
    try:
        with open("/proc/cpuinfo") as fh:
            m = re.search(r"^model name\s*:\s*(.+)$", fh.read(), re.M)
        return m.group(1).strip() if m else platform.processor()
    except OSError:
        return platform.processor() or "unknown"


def loadavg():
    try:
        return "%.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        return "?"


def default_torch_python():
    for py in ("/usr/bin/python3", sys.executable):
        if os.path.exists(py) and subprocess.run([py, "-c", "import torch"], capture_output=True).returncode == 0:
            return py
    return sys.executable


def probe_torch(python, env):
    """torch's version and BLAS, whether transformers imports, and the attention implementations it accepts for
    DeBERTa-v2."""
    code = r"""
import json, os, re
out = {}
import torch
out["torch"] = torch.__version__
m = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
out["blas_info"] = m.group(1) if m else "?"
torch.mm(torch.ones(2, 2), torch.ones(2, 2))
with open("/proc/self/maps") as fh:
    paths = {l.split()[-1] for l in fh if len(l.split()) >= 6}
out["blas"] = sorted(p for p in paths if re.search(r"blas|mkl", os.path.basename(p), re.I))
try:
    import transformers
    out["transformers"] = transformers.__version__
    ok = []
    for impl in ("eager", "sdpa"):
        cfg = transformers.DebertaV2Config(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                           intermediate_size=64, vocab_size=100)
        try:
            m = transformers.DebertaV2ForSequenceClassification._from_config(cfg, attn_implementation=impl)
            if getattr(m.config, "_attn_implementation", impl) == impl:
                ok.append(impl)
        except Exception as e:
            out.setdefault("refused", {})[impl] = "%s: %s" % (type(e).__name__, str(e)[:200])
    out["attn"] = ok
except Exception as e:
    out["transformers_error"] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(out))
"""
    r = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    if r.returncode != 0:
        raise BenchError(f"{python}: cannot import torch: {short_error(r.stderr)}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def reference_blas(paths):
    """True when the mapped BLAS is Debian's netlib reference implementation (…/blas/libblas.so.3)."""
    return any("/blas/libblas" in p for p in paths) and not any("openblas" in p or "mkl" in p for p in paths)


def blas_name(paths):
    return ", ".join(paths) if paths else "none mapped (built in)"


class Run:
    def __init__(self, a):
        self.a = a
        self.cores = first_cores(a.threads)
        self.env = thread_env(a.threads)
        self.loads = []
        self.log = []

    def note(self, msg):
        self.log.append(msg)
        sys.stderr.write(msg + "\n")
        sys.stderr.flush()

    def torch_env(self, libdir):
        env = dict(self.env)
        if libdir:
            env["LD_LIBRARY_PATH"] = libdir + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
        return env

    def call(self, cmd, env=None):
        self.loads.append(loadavg())
        start = time.monotonic()
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=self.a.timeout, env=env or self.env,
                           preexec_fn=pinned(self.cores), cwd=str(REPO))
        self.note(f"  {time.monotonic() - start:.0f} s, exit {r.returncode}, load {self.loads[-1]}: "
                  f"{' '.join(str(c) for c in cmd[:6])} ...")
        if r.returncode != 0:
            raise BenchError(f"{cmd[0]} failed ({r.returncode}): {short_error(r.stderr or r.stdout)}")
        return r.stdout

    def ours_speed(self, model):
        a = self.a
        shapes = "|".join(f"B:{b}/L:{l}" for b, l in a.shapes)
        out = self.call([a.binary, f"--threads={a.threads}", f"--model-dir={TINY_EN}", "--steps=1",
                         f"--benchmark_repetitions={a.repeats}",
                         "--shapes=" + ",".join(f"{b}x{l}" for b, l in a.shapes),
                         f"--benchmark_filter=^training/eigen/{model}/flash/({shapes})/",
                         "--benchmark_format=json"])
        rows = {}
        for bm in json.loads(out)["benchmarks"]:
            if bm.get("run_type") != "iteration":
                continue
            m = re.search(r"/B:(\d+)/L:(\d+)/", bm["run_name"] + "/")
            key = (int(m.group(1)), int(m.group(2)))
            scale = {"ms": 1e-3, "us": 1e-6, "ns": 1e-9, "s": 1.0}[bm["time_unit"]]
            row = rows.setdefault(key, {"times_s": [], "loss": bm.get("loss"), "phases_s": {}})
            row["times_s"].append(bm["real_time"] * scale)
            for key_ms, name in (("zero_ms", "zero"), ("fwd_bwd_ms", "forward_backward"), ("adamw_ms", "optimizer"),
                                 ("fwd_only_ms", "forward")):
                if key_ms in bm:
                    row["phases_s"].setdefault(name, []).append(bm[key_ms] / 1e3)
        if not rows:
            raise BenchError(f"{a.binary} ran no case of {model} at {shapes}")
        return rows

    def torch_cmd(self, system, model, extra):
        a = self.a
        return [a.torch_python, str(Path(__file__).resolve()), "--worker", extra[0], "--model", model,
                "--torch-kind", system["kind"], "--attn", system["attn"], "--threads", str(a.threads), *extra[1:]]

    def torch_speed(self, system, model, repeats):
        a = self.a
        shapes = ",".join(f"{b}x{l}" for b, l in a.shapes)
        out = self.call(self.torch_cmd(system, model, ["speed", "--shapes", shapes, "--repeats", str(repeats)]),
                        self.torch_env(system["libdir"]))
        rows = {}
        for line in out.splitlines():
            if line.startswith("{"):
                d = json.loads(line)
                rows[(d["batch"], d["length"])] = d
                system["desc"], system["blas"] = d["desc"], d["blas"]
        return rows

    def ours_profile(self, model):
        a = self.a
        out = self.call([a.binary, "--profile", f"--model={model}", f"--threads={a.threads}", f"--model-dir={TINY_EN}",
                         f"--steps={a.profile_steps}", "--shapes=" + ",".join(f"{b}x{l}" for b, l in a.shapes)])
        rows = {}
        for line in out.splitlines():
            if line.startswith("{"):
                d = json.loads(line)
                rows[(d["batch"], d["length"])] = d
        return rows

    def ours_memory(self, model, length):
        out = self.call([self.a.binary, "--memory", f"--model={model}", f"--length={length}",
                         f"--threads={self.a.threads}", f"--model-dir={TINY_EN}"])
        return json.loads([l for l in out.splitlines() if l.startswith("{")][-1])

    def torch_memory(self, system, model, length):
        out = self.call(self.torch_cmd(system, model, ["memory", "--length", str(length)]),
                        self.torch_env(system["libdir"]))
        return json.loads([l for l in out.splitlines() if l.startswith("{")][-1])


def median_ms(times):
    return 1e3 * statistics.median(times) if times else None


def range_ms(times):
    return f"{1e3 * min(times):.0f}-{1e3 * max(times):.0f}" if times else "-"


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2, help="threads on both sides (default 2)")
    p.add_argument("--binary", default=str(REPO / "build/bench/bench_training"), help="our bench_training")
    p.add_argument("--models", default=",".join(MODELS), help="default tiny-en,v3-base")
    p.add_argument("--shapes", type=parse_shapes, default=SHAPES, help="BxL list (default 8x128,1x512)")
    p.add_argument("--repeats", type=int, default=5, help="timed steps per case after one warm-up (default 5)")
    p.add_argument("--parts", default="speed,profile,memory", help="speed,profile,memory (default all)")
    p.add_argument("--profile-steps", type=int, default=2, help="steps of the per-operation profile (default 2)")
    p.add_argument("--memory-models", default="tiny-en", help="default tiny-en (v3-base too: slower)")
    p.add_argument("--memory-lengths", default="1024,2048,4096,8192")
    p.add_argument("--torch-memory-limit-gib", type=float, default=8.0,
                   help="skip a torch memory run whose extrapolated step peak exceeds this (default 8)")
    p.add_argument("--torch-python", default=None, help="python with torch (default: /usr/bin/python3 if it has it)")
    p.add_argument("--torch-model", choices=["auto", "transformers", "reimpl"], default="auto")
    p.add_argument("--torch-blas-dir", default="auto",
                   help="a directory with an optimized libblas.so.3 put first on the torch children's "
                        "LD_LIBRARY_PATH when torch would otherwise run on Debian's reference BLAS; auto: the first "
                        f"of {', '.join(OPENBLAS_DIRS)} that exists; none: never")
    p.add_argument("--reference-blas-models", default="tiny-en",
                   help="when --torch-blas-dir is used, also time torch on the reference BLAS for these models "
                        "(default tiny-en; '' for none: a v3-base step takes minutes there)")
    p.add_argument("--reference-blas-repeats", type=int, default=2, help="its timed steps (default 2)")
    p.add_argument("--timeout", type=float, default=1800, help="per child process, seconds")
    p.add_argument("--host", default="host", help="the <host> of the default report name (default host)")
    p.add_argument("--out", help="report path (default bench/results/training-<date>-<host>.md)")
    p.add_argument("--commit", help="commit named in the report (default $FLASHDEBERTA_COMMIT or git's HEAD)")
    # worker mode (the torch side, in a child process)
    p.add_argument("--worker", choices=["speed", "memory", "check"], help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--torch-kind", default="reimpl", help=argparse.SUPPRESS)
    p.add_argument("--attn", default="eager", help=argparse.SUPPRESS)
    p.add_argument("--length", type=int, help=argparse.SUPPRESS)
    return p


def torch_systems(a, run):
    """The torch configurations timed, the first one the reference of every ratio and of the memory runs."""
    probe = probe_torch(a.torch_python, run.env)
    kind = a.torch_model
    if kind == "auto":
        kind = "transformers" if "transformers" in probe else "reimpl"
    if kind == "transformers" and "transformers" not in probe:
        raise BenchError(f"--torch-model transformers: {probe.get('transformers_error')}")
    attns = (probe.get("attn") or ["eager"]) if kind == "transformers" else ["eager"]
    libdir = None
    if reference_blas(probe["blas"]) and a.torch_blas_dir != "none":
        candidates = OPENBLAS_DIRS if a.torch_blas_dir == "auto" else [a.torch_blas_dir]
        libdir = next((d for d in candidates if os.path.exists(os.path.join(d, "libblas.so.3"))), None)
        if libdir is None:
            run.note(f"torch runs on Debian's reference BLAS ({blas_name(probe['blas'])}) and no optimized "
                     f"libblas.so.3 is in {candidates}: its GEMMs are a few GFLOP/s (apt-get download "
                     "libopenblas0-openmp; dpkg-deb -x it into /tmp/openblas, or install it)")
    models = [m for m in a.models.split(",") if m]
    blas = "OpenBLAS" if libdir else ("reference BLAS" if reference_blas(probe["blas"]) else "its BLAS")
    systems = [{"label": f"torch {attn}, {blas}", "kind": kind, "attn": attn, "libdir": libdir, "models": models,
                "repeats": a.repeats} for attn in attns]
    if libdir:
        ref_models = [m for m in a.reference_blas_models.split(",") if m and m in models]
        if ref_models:
            systems.append({"label": f"torch {attns[0]}, reference BLAS", "kind": kind, "attn": attns[0],
                            "libdir": None, "models": ref_models, "repeats": a.reference_blas_repeats})
    return probe, kind, systems


def main(argv=None):
    a = build_parser().parse_args(argv)
    if a.worker:
        torch_worker(a)
        return 0
    started = time.monotonic()
    a.torch_python = a.torch_python or default_torch_python()
    parts = set(a.parts.split(","))
    models = [m for m in a.models.split(",") if m]
    run = Run(a)
    if not os.access(a.binary, os.X_OK):
        raise BenchError(f"{a.binary} is not built: cmake --build build --target bench_training")
    probe, kind, systems = torch_systems(a, run)
    run.note(f"torch {probe['torch']} ({a.torch_python}; BLAS_INFO={probe['blas_info']}, "
             f"mapped {blas_name(probe['blas'])}), model: {kind}; systems: {[s['label'] for s in systems]}; "
             f"threads {a.threads} on CPUs {run.cores}; load {loadavg()}")
    check = None
    if kind == "reimpl":
        run.note("check: the re-implementation against HF's float64 fixture v3_seqcls")
        out = run.call(run.torch_cmd(systems[0], "tiny-en", ["check"]), run.torch_env(systems[0]["libdir"]))
        check = json.loads([l for l in out.splitlines() if l.startswith("{")][-1])

    speed = {}
    if "speed" in parts:
        for model in models:
            run.note(f"speed: {model}: ours")
            ours = run.ours_speed(model)
            theirs = {}
            for system in systems:
                if model in system["models"]:
                    run.note(f"speed: {model}: {system['label']}")
                    theirs[system["label"]] = run.torch_speed(system, model, system["repeats"])
            speed[model] = (ours, theirs)

    profile = {}
    if "profile" in parts:
        for model in models:
            run.note(f"profile: {model}: ours, per operation")
            profile[model] = run.ours_profile(model)

    memory = {}
    if "memory" in parts:
        limit_mib = a.torch_memory_limit_gib * 1024
        for model in [m for m in a.memory_models.split(",") if m]:
            previous = None
            for length in [int(x) for x in a.memory_lengths.split(",") if x]:
                run.note(f"memory: {model} 1 x {length}: ours")
                ours = run.ours_memory(model, length)
                predicted = previous[1] * (length / previous[0]) ** 2 if previous else None
                if predicted is not None and predicted > limit_mib:
                    theirs = f"skipped: about {predicted / 1024:.0f} GiB extrapolated"
                else:
                    run.note(f"memory: {model} 1 x {length}: {systems[0]['label']}")
                    try:
                        theirs = run.torch_memory(systems[0], model, length)
                        previous = (length, theirs["delta_mib"])
                    except (BenchError, subprocess.TimeoutExpired) as e:
                        theirs = f"failed: {short_error(str(e), 120)}"
                memory[(model, length)] = (ours, theirs)
    elapsed = time.monotonic() - started
    text = report(a, run, probe, kind, systems, speed, profile, memory, elapsed, check)
    out = a.out or str(REPO / "bench" / "results" / f"training-{today()}-{a.host}.md")
    write_report(text, out)
    return 0


def report(a, run, probe, kind, systems, speed, profile, memory, elapsed, check):
    main_system = systems[0]
    lines = [f"# Training step on the host: flashdeberta vs PyTorch fp32, {today()}", ""]
    lines += [
        f"- machine: {machine()}",
        f"- CPU (/proc/cpuinfo): {cpu_model()}; threads: {a.threads} on both sides, pinned to CPUs "
        f"{','.join(map(str, run.cores))}, OMP_NUM_THREADS={a.threads}",
        f"- commit: {commit(a.commit)}; ours: `{os.path.relpath(a.binary, REPO)}` "
        f"(bench/bench_training.cpp: EigenPolicy({a.threads}), flash attention)",
        f"- torch {probe['torch']} (`{a.torch_python}`, BLAS_INFO={probe['blas_info']}), "
        f"torch.set_num_threads({a.threads}); transformers: {probe.get('transformers', 'not importable')}",
        f"- torch model: {main_system.get('desc') or kind}",
    ]
    for impl, why in (probe.get("refused") or {}).items():
        lines.append(f"- attn_implementation {impl}: refused by this transformers for DeBERTa-v2 ({why})")
    for system in systems:
        lines.append(f"- {system['label']}: BLAS mapped {blas_name(system.get('blas', probe['blas']))}"
                     + (f" (LD_LIBRARY_PATH={system['libdir']})" if system["libdir"] else "")
                     + f"; models {', '.join(system['models'])}; {system['repeats']} timed steps")
    if check:
        version = json.loads((REPO / "tests/fixtures/training/v3_seqcls/config.json").read_text()).get(
            "transformers_version")
        lines.append(f"- the re-implementation checked against HF: tests/fixtures/training/v3_seqcls (transformers "
                     f"{version} DebertaV2ForSequenceClassification, float64, a padded 3 x 12 batch) loaded into it "
                     f"in float64: logits within {check['logits_diff']:.1e}, loss within {check['loss_diff']:.1e} "
                     f"(HF's loss casts the logits to float32), every parameter gradient within "
                     f"{check['worst_grad_rel']:.1e} of its tensor's largest |gradient|")
    lines += [
        "- step: zero grads, forward + cross-entropy (sequence classification, 2 labels), backward, clip_grad_norm "
        "1.0, AdamW (lr 5e-5, weight decay 0.01 off biases and LayerNorm weights), float32, dropout off on both sides",
        f"- times: ms per step, the median of the timed steps after one warm-up step (range in brackets); ours "
        f"{a.repeats} steps; ours and torch alternate model by model",
        f"- load average (1, 5, 15 min) at the start of each child process: {'; '.join(run.loads)}",
        f"- whole run: {elapsed:.0f} s; command: `python3 bench/compare_training.py {' '.join(sys.argv[1:])}`",
        "",
    ]
    if speed:
        lines += ["## Speed", ""]
        header = ["model", "B x L", "ours ms/step", "ours tokens/s"]
        for system in systems:
            header += [f"{system['label']} ms/step", "/ ours"]
        rows = []
        for model, (ours, theirs) in speed.items():
            for b, l in a.shapes:
                o = ours.get((b, l), {}).get("times_s", [])
                om = median_ms(o)
                row = [model, f"{b} x {l}", f"{fmt(om)} ({range_ms(o)})", fmt(b * l / (om / 1e3)) if om else "-"]
                for system in systems:
                    t = theirs.get(system["label"], {}).get((b, l), {}).get("times_s", [])
                    tm = median_ms(t)
                    row += [f"{fmt(tm)} ({range_ms(t)})" if t else "-", f"{tm / om:.2f}x" if om and tm else "-"]
                rows.append(row)
        lines += table(header, rows)
        lines += ["", "/ ours: torch's time over ours, above 1x where ours is faster (the bar: 1.5x against "
                  f"{main_system['label']}).", ""]
        lines += ["### Where the time goes (medians, ms per step)", "",
                  "Ours: zero_grads, forward_backward (forward, loss, backward), AdamW.step (gradient norm, clipping, "
                  "update); fwd: evaluate() (the same forward and loss, without the backward), timed once per "
                  "repetition outside the step, and bwd = fwd+bwd - fwd. "
                  f"{main_system['label']}: zero_grad, forward with the loss, loss.backward(), "
                  "clip_grad_norm_ + optimizer.step().", ""]
        rows = []
        for model, (ours, theirs) in speed.items():
            for b, l in a.shapes:
                op = ours.get((b, l), {}).get("phases_s", {})
                tp = theirs.get(main_system["label"], {}).get((b, l), {}).get("phases_s", {})
                med = lambda d, k: median_ms(d.get(k, []))  # noqa: E731
                tf, tb = med(tp, "forward"), med(tp, "backward")
                ofb, of = med(op, "forward_backward"), med(op, "forward")
                rows.append([model, f"{b} x {l}", fmt(med(op, "zero"), 2), fmt(of),
                             fmt(ofb - of) if ofb and of else "-", fmt(ofb), fmt(med(op, "optimizer")),
                             fmt(med(tp, "zero"), 2), fmt(tf), fmt(tb), fmt(tf + tb) if tf and tb else "-",
                             fmt(med(tp, "optimizer"))])
        lines += table(["model", "B x L", "ours zero", "ours fwd", "ours bwd", "ours fwd+bwd", "ours AdamW",
                        "torch zero", "torch fwd", "torch bwd", "torch fwd+bwd", "torch clip+AdamW"], rows)
        lines += [""]
        losses = []
        for model, (ours, theirs) in speed.items():
            for b, l in a.shapes:
                t = theirs.get(main_system["label"], {}).get((b, l), {})
                losses.append(f"{model} {b}x{l}: ours {fmt(ours.get((b, l), {}).get('loss'), 4)}, torch "
                              f"{fmt(t.get('loss'), 4)}")
        lines += ["Loss of the last timed step (the heads start from different random draws): " + "; ".join(losses),
                  ""]
    if profile:
        ops = []
        for rows in profile.values():
            for d in rows.values():
                ops += [k for k in d["ops_ms"] if k not in ops]
        lines += ["## Our step per operation (ms per step)", "",
                  f"`bench_training --profile`: the same step through ProfilingPolicy<EigenPolicy> (a clock around each policy "
                  f"operation), {a.profile_steps} steps after a warm-up, in its own process (after the timings "
                  "above). gemm: forward linear layers; linear_backward: dx and dW (+ db) of every linear layer; "
                  "attention / attention_backward: the disentangled flash attention itself (content, c2p and p2c "
                  "scores, softmax, values; the backward recomputes the scores), the relative tables' projections "
                  "being GEMMs (gemm / linear_backward); activation: GELU and its derivative, and copies; fill: zero_grads and zeroing buffers; sum_of_squares: the gradient "
                  "norm; the rest of the step (host code, allocation, uploads and downloads, first-touch page faults) is 'other'.", ""]
        header = ["model", "B x L", "step"] + [o for o in ops if any(
            d["ops_ms"].get(o, 0) >= 0.05 for rows in profile.values() for d in rows.values())] + ["other"]
        rows_out = []
        for model, rows in profile.items():
            for (b, l), d in sorted(rows.items(), key=lambda kv: (-kv[0][0], kv[0][1])):
                shown = [d["ops_ms"].get(o, 0.0) for o in header[3:-1]]
                other = d["step_ms"] - sum(d["ops_ms"].values())
                rows_out.append([model, f"{b} x {l}", fmt(d["step_ms"])] + [fmt(v) for v in shown] + [fmt(other)])
        lines += table(header, rows_out)
        lines += [""]
    if memory:
        lines += ["## Peak memory of one step at 1 x L", "",
                  "A fresh process per side and length: a warm-up step at 1 x 16, then VmHWM reset "
                  "(/proc/self/clear_refs) and one step at 1 x L. Δ: the step's peak resident memory less the "
                  "resident memory before it (MiB); per token: Δ / L; slope: the growth of Δ from the previous "
                  f"length per added token. Constant per-token figures mean linear growth. Torch: "
                  f"{main_system['label']}.", ""]
        header = ["model", "L", "ours Δ MiB", "ours KiB/token", "ours slope KiB/token", "ours step s",
                  "torch Δ MiB", "torch KiB/token", "torch slope KiB/token", "torch step s"]
        rows = []
        prev = {}
        for (model, length), (ours, theirs) in memory.items():
            row = [model, str(length)]
            for side, d in (("ours", ours), ("torch", theirs)):
                if isinstance(d, dict):
                    delta = d["delta_mib"]
                    p = prev.get((model, side))
                    slope = (delta - p[1]) * 1024 / (length - p[0]) if p else None
                    row += [fmt(delta), fmt(delta * 1024 / length), fmt(slope), fmt(d["step_s"], 2)]
                    prev[(model, side)] = (length, delta)
                else:
                    row += [d or "-", "-", "-", "-"]
            rows.append(row)
        lines += table(header, rows)
        lines += [""]
    lines += ["## Log", "", "```", *run.log, "```", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as e:
        sys.stderr.write(f"compare_training.py: {e}\n")
        sys.exit(1)

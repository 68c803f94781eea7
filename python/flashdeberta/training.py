"""Fine-tuning in the shape transformers' users know: TrainingArguments and a Trainer whose train() runs the C++
trainer (the one `flashdeberta train` runs: HF's AdamW, schedule, clipping and epoch order) with the GIL released.

    from flashdeberta import Trainer, TrainingArguments
    args = TrainingArguments(output_dir="out", num_train_epochs=2, learning_rate=1e-4, per_device_train_batch_size=16)
    trainer = Trainer(model="models/tiny-en", args=args, task="text-classification",
                      train_dataset=[{"text": "...", "label": "positive"}, ...], eval_dataset="eval.jsonl")
    result = trainer.train()          # TrainOutput(global_step, training_loss, metrics)

Datasets are lists (or any iterable) of dicts in the columns HF datasets use, or the path of a JSON-lines file. The
output directory is an HF checkpoint that flashdeberta and transformers load as they are.
"""

import json
import os
import tempfile
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, NamedTuple, Optional

from . import _native
from .models import backend_for

_TASKS = ("text-classification", "token-classification", "masked-lm", "multiple-choice", "question-answering")


@dataclass
class TrainingArguments:
    """The subset of transformers.TrainingArguments the trainer follows, with HF's names and defaults (save_steps
    0: no intermediate checkpoints unless asked)."""

    output_dir: str
    num_train_epochs: float = 3.0
    max_steps: int = -1
    per_device_train_batch_size: int = 8
    gradient_accumulation_steps: int = 1
    learning_rate: float = 5e-5
    weight_decay: float = 0.0
    warmup_steps: int = 0
    warmup_ratio: float = 0.0
    lr_scheduler_type: str = "linear"
    max_grad_norm: float = 1.0
    seed: int = 42
    save_steps: int = 0
    logging_steps: int = 500
    bf16: bool = False  # mixed precision on device="cuda": float32 master weights, bf16 products
    fp16: bool = False  # the same in fp16, with dynamic loss scaling


class TrainOutput(NamedTuple):
    global_step: int
    training_loss: float
    metrics: Dict[str, Any]


def _dataset_file(dataset, directory: str, name: str) -> str:
    """A JSON-lines path: the dataset's own when it is a path, else its dicts written one per line."""
    if isinstance(dataset, (str, os.PathLike)):
        return os.fspath(dataset)
    path = os.path.join(directory, name + ".jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for index, item in enumerate(dataset):
            if not isinstance(item, dict):
                raise ValueError("%s[%d] is a %s, not a dict of columns" % (name, index, type(item).__name__))
            f.write(json.dumps(item, ensure_ascii=False) + "\n")
    return path


class Trainer:
    """Fine-tunes `model` (a checkpoint directory) on `train_dataset` for `task`: text-classification (columns text,
    text_pair, label), token-classification (tokens, ner_tags), masked-lm (text), multiple-choice (question and
    choices, or SWAG's columns) or question-answering (question, context, answers as SQuAD's: {"text": [...],
    "answer_start": [...]}; long contexts cut into windows sharing `doc_stride` tokens). `labels` fixes the label
    set and its order; `on_log(dict)` receives each logging step's loss, learning rate, gradient norm and tokens per
    second. `device` is where it trains, as the models take it: "cpu" (HF's -1; `backend="kokkos"` for the Kokkos
    backend) or "cuda" (0, "cuda:0"), in float32 on either, or in mixed precision on "cuda" with `args.bf16` /
    `args.fp16` as in transformers; by default the device of a model object passed as `model`, else "cpu"."""

    def __init__(self, model, args: TrainingArguments, train_dataset, eval_dataset=None,
                 task: str = "text-classification", labels: Optional[List[str]] = None,
                 problem_type: Optional[str] = None, max_length: Optional[int] = None, label_all_tokens: bool = False,
                 mlm_probability: float = 0.15, doc_stride: int = 128, threads: int = 0, attention: str = "flash",
                 on_log: Optional[Callable[[Dict[str, Any]], None]] = None, device=None, backend: Optional[str] = None):
        if task not in _TASKS:
            raise ValueError("task %r is not one of %s" % (task, ", ".join(_TASKS)))
        if device is None:
            device = getattr(model, "device", "cpu")
        self.backend = backend_for(device, backend)
        self.model = os.fspath(getattr(model, "name_or_path", model))
        self.args = args
        self.train_dataset = train_dataset
        self.eval_dataset = eval_dataset
        self.task = task
        self.labels = list(labels) if labels is not None else None
        self.problem_type = problem_type or ""
        self.max_length = max_length
        self.label_all_tokens = label_all_tokens
        self.mlm_probability = mlm_probability
        self.doc_stride = doc_stride
        self.threads = threads
        self.attention = attention
        self.on_log = on_log
        self.state: Dict[str, Any] = {}

    def train(self, resume_from_checkpoint: Optional[bool] = None) -> TrainOutput:
        """Trains and writes args.output_dir; returns the run's steps, mean training loss and final metrics
        (the last evaluation's, when eval_dataset is given). resume_from_checkpoint=True continues from the newest
        output_dir/checkpoint-<step>/."""
        with tempfile.TemporaryDirectory(prefix="flashdeberta-train-") as scratch:
            train_file = _dataset_file(self.train_dataset, scratch, "train_dataset")
            eval_file = None if self.eval_dataset is None else _dataset_file(self.eval_dataset, scratch,
                                                                               "eval_dataset")
            try:
                result = self._run(train_file, eval_file, resume_from_checkpoint)
            except ValueError as e:  # name the dataset, not the scratch file its dicts were written to
                message = str(e)
                for path, name in ((train_file, "train_dataset"), (eval_file, "eval_dataset")):
                    if path is not None and path.startswith(scratch):
                        message = message.replace(path + " line ", "%s item (1-based) " % name).replace(path, name)
                raise ValueError(message) from None
        evaluations = [json.loads(line) for line in result["evaluations"]]
        self.state = dict(result, evaluations=evaluations)
        metrics = dict(evaluations[-1]) if evaluations else {}
        metrics["train_loss"] = result["train_loss"]
        metrics["epoch"] = result["epoch"]
        return TrainOutput(result["global_step"], result["train_loss"], metrics)

    def _run(self, train_file, eval_file, resume_from_checkpoint):
        a = self.args
        if a.bf16 and a.fp16:
            raise ValueError("TrainingArguments: bf16 and fp16 are both set; choose one")
        dtype = "bfloat16" if a.bf16 else "float16" if a.fp16 else "float32"
        if dtype != "float32" and self.backend != "cuda":
            raise ValueError("TrainingArguments: %s=True trains in mixed precision on device='cuda'; %s trains in "
                             "float32" % ("bf16" if a.bf16 else "fp16", self.backend))
        return _native.train(
            task=self.task, model=self.model, train_file=train_file, eval_file=eval_file,
            output_dir=os.fspath(a.output_dir), num_train_epochs=float(a.num_train_epochs),
            max_steps=int(a.max_steps), per_device_train_batch_size=int(a.per_device_train_batch_size),
            gradient_accumulation_steps=int(a.gradient_accumulation_steps), max_length=self.max_length,
            seed=int(a.seed), learning_rate=float(a.learning_rate), weight_decay=float(a.weight_decay),
            warmup_steps=int(a.warmup_steps), warmup_ratio=float(a.warmup_ratio),
            lr_scheduler_type=a.lr_scheduler_type, max_grad_norm=float(a.max_grad_norm),
            save_steps=int(a.save_steps), logging_steps=int(a.logging_steps), resume=bool(resume_from_checkpoint),
            labels=self.labels, problem_type=self.problem_type, label_all_tokens=self.label_all_tokens,
            mlm_probability=float(self.mlm_probability), doc_stride=int(self.doc_stride), threads=int(self.threads),
            attention=self.attention, backend=self.backend, dtype=dtype,
            on_log=self.on_log)

"""flashdeberta.Trainer / TrainingArguments (training.py over the C++ trainer `flashdeberta train` runs): lists of
dicts train as JSON lines do, the checkpoint written loads in flashdeberta's pipelines, the result is HF's
TrainOutput, and bad data is refused before training naming the dataset item."""

import json
import os

import pytest

import flashdeberta

from conftest import REPO

TINY_EN = os.path.join(REPO, "models", "tiny-en")


def sentiment(count, offset=0):
    good, bad = ["great", "wonderful", "excellent", "lovely"], ["terrible", "awful", "horrible", "dreadful"]
    return [{"text": "The package manager was %s on day %d." % ((good if i % 2 == 0 else bad)[i % 4], i),
             "label": "positive" if i % 2 == 0 else "negative"} for i in range(offset, offset + count)]


def test_trainer_writes_a_classifier_the_pipeline_loads(tmp_path):
    logs = []
    args = flashdeberta.TrainingArguments(output_dir=str(tmp_path / "out"), num_train_epochs=2, learning_rate=1e-4,
                                          per_device_train_batch_size=8, logging_steps=2)
    trainer = flashdeberta.Trainer(model=TINY_EN, args=args, train_dataset=sentiment(24),
                                   eval_dataset=sentiment(8, 100), max_length=32, threads=2, on_log=logs.append)
    result = trainer.train()
    assert isinstance(result, flashdeberta.TrainOutput)
    assert result.global_step == 6  # 3 batches of 8, 2 epochs
    assert result.training_loss > 0
    assert {"eval_loss", "eval_accuracy", "train_loss", "epoch"} <= set(result.metrics)
    assert len(trainer.state["evaluations"]) == 2
    assert [entry["step"] for entry in logs] == [2, 4, 6]
    assert all(entry["learning_rate"] >= 0 and entry["tokens_per_second"] > 0 for entry in logs)
    with open(tmp_path / "out" / "config.json") as f:
        config = json.load(f)
    assert config["architectures"] == ["DebertaV2ForSequenceClassification"]
    assert set(config["id2label"].values()) == {"negative", "positive"}
    classify = flashdeberta.pipeline("text-classification", model=str(tmp_path / "out"))
    scores = classify("The package manager was great on day 7.", top_k=None)
    assert {s["label"] for s in scores} == {"negative", "positive"}


def test_trainer_reads_a_jsonl_path_and_matches_the_list(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(item) + "\n" for item in sentiment(16)))
    losses = []
    for dataset, name in ((str(path), "from_path"), (sentiment(16), "from_list")):
        args = flashdeberta.TrainingArguments(output_dir=str(tmp_path / name), num_train_epochs=1,
                                              per_device_train_batch_size=8)
        losses.append(flashdeberta.Trainer(model=TINY_EN, args=args, train_dataset=dataset, max_length=32,
                                           threads=1).train().training_loss)
    assert losses[0] == losses[1]


def test_trainer_trains_where_device_or_backend_says(tmp_path):
    # The same data, seed and dropout masks on every backend: the losses agree up to float32 summation order.
    losses = {}
    for name, where in (("eigen", {"device": -1}), ("kokkos", {"backend": "kokkos"}), ("cuda", {"device": "cuda"})):
        args = flashdeberta.TrainingArguments(output_dir=str(tmp_path / name), num_train_epochs=1,
                                              per_device_train_batch_size=8)
        trainer = flashdeberta.Trainer(model=TINY_EN, args=args, train_dataset=sentiment(16), max_length=32,
                                       threads=2, **where)
        assert trainer.backend == name
        try:
            losses[name] = trainer.train().training_loss
        except ValueError as e:
            if name == "cuda" and ("no CUDA device" in str(e) or "has no CUDA backend" in str(e)):
                continue  # this machine has no GPU, or the package was built without CUDA
            raise
    assert losses["kokkos"] == pytest.approx(losses["eigen"], rel=1e-5)
    if "cuda" in losses:
        assert losses["cuda"] == pytest.approx(losses["eigen"], rel=1e-4)
    with pytest.raises(ValueError, match="device='tpu'"):
        flashdeberta.Trainer(model=TINY_EN, args=args, train_dataset=sentiment(4), device="tpu")


def test_trainer_trains_in_mixed_precision_on_cuda_as_transformers_asks_for_it(tmp_path):
    # bf16=True / fp16=True as in transformers: float32 master weights, 16-bit products; the host backends refuse it.
    losses = {}
    for name, flags in (("fp32", {}), ("bf16", {"bf16": True}), ("fp16", {"fp16": True})):
        args = flashdeberta.TrainingArguments(output_dir=str(tmp_path / name), num_train_epochs=1,
                                              per_device_train_batch_size=8, **flags)
        trainer = flashdeberta.Trainer(model=TINY_EN, args=args, train_dataset=sentiment(16), max_length=32,
                                       threads=2, device="cuda")
        try:
            losses[name] = trainer.train().training_loss
        except ValueError as e:
            if "no CUDA device" in str(e) or "has no CUDA backend" in str(e):
                break
            raise
    for name in ("bf16", "fp16"):
        if name in losses:
            assert losses[name] == pytest.approx(losses["fp32"], abs=2e-2)
    args = flashdeberta.TrainingArguments(output_dir=str(tmp_path / "cpu"), bf16=True)
    with pytest.raises(ValueError, match="bf16=True trains in mixed precision on device='cuda'"):
        flashdeberta.Trainer(model=TINY_EN, args=args, train_dataset=sentiment(4), device="cpu").train()
    args = flashdeberta.TrainingArguments(output_dir=str(tmp_path / "both"), bf16=True, fp16=True)
    with pytest.raises(ValueError, match="bf16 and fp16 are both set"):
        flashdeberta.Trainer(model=TINY_EN, args=args, train_dataset=sentiment(4), device="cuda").train()
    assert not (tmp_path / "cpu").exists()


def test_trainer_refuses_bad_items_naming_them(tmp_path):
    items = sentiment(4) + [{"text": "no label here"}]
    args = flashdeberta.TrainingArguments(output_dir=str(tmp_path / "out"), num_train_epochs=1)
    with pytest.raises(ValueError, match=r"train_dataset item \(1-based\) 5"):
        flashdeberta.Trainer(model=TINY_EN, args=args, train_dataset=items, max_length=32, threads=1).train()
    assert not (tmp_path / "out" / "model.safetensors").exists()
    with pytest.raises(ValueError, match="task 'summarization'"):
        flashdeberta.Trainer(model=TINY_EN, args=args, train_dataset=items, task="summarization")
    with pytest.raises(ValueError, match=r"train_dataset\[1\] is a str"):
        flashdeberta.Trainer(model=TINY_EN, args=args, train_dataset=[{"text": "a", "label": "x"}, "b"]).train()


def test_trainer_fine_tunes_question_answering_on_squad_columns(tmp_path):
    names = ["Alice Smith", "Bob Jones", "Carol White", "Dan Brown"]
    squad = []
    for i in range(16):
        context = "Tool %d manages archives. It is maintained by %s since 2019." % (i, names[i % 4])
        squad.append({"question": "Who maintains tool %d?" % i, "context": context,
                      "answers": {"text": [names[i % 4]], "answer_start": [context.index(names[i % 4])]}})
    args = flashdeberta.TrainingArguments(output_dir=str(tmp_path / "qa"), num_train_epochs=3, learning_rate=3e-4,
                                          per_device_train_batch_size=8)
    result = flashdeberta.Trainer(model=TINY_EN, args=args, task="question-answering", train_dataset=squad,
                                  eval_dataset=squad[:8], max_length=24, doc_stride=8, threads=2).train()
    assert 0 <= result.metrics["eval_exact_match"] <= 100 and 0 <= result.metrics["eval_f1"] <= 100
    assert result.metrics["eval_samples"] == 8
    qa = flashdeberta.pipeline("question-answering", model=str(tmp_path / "qa"))
    assert "answer" in qa(question="Who maintains tool 3?", context=squad[3]["context"])

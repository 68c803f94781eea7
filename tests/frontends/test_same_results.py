"""Every task through the three front ends: the CLI, the server and Python get the same inputs and must give
the same results, to the last bit. Each task is written once (runtime::Pipeline, runtime::GlinerModel) and its
results go through one JSON writer, so any difference is a front end deciding a task's rule on its own.

The inputs of a task run as one forward everywhere (the CLI's --batch-size, Python's batch_size, one server
request holding them all), on one thread, so not even the float32 rounding of the batch may differ.

Needs $FLASHDEBERTA_CLI (a CLI with the server) and the package on PYTHONPATH; CTest sets both."""

import json
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
import server_harness  # noqa: E402
from server_harness import CLI, CLASSIFY, FILL_MASK, FIXTURES, NER, QA, RERANK, SPM, ZERO_SHOT, Server, post  # noqa: E402

import flashdeberta  # noqa: E402

server_harness.THREADS = "1"  # every server of this suite: one forward thread, as the CLI and Python here

GLINER = FIXTURES / "gliner" / "span_markerV0"
BATCH = 16  # more than any task's inputs here: one forward each


def widened_masked_lm(directory, extra_rows=10):
    """The fill-mask fixture with `extra_rows` model rows past its tokenizer's 1075 tokens, made the likeliest
    predictions (a large decoder bias), as checkpoints whose embedding table is padded past the tokenizer
    (DeBERTa-v3: 128,100 rows for 128,001 tokens)."""
    shutil.copytree(FILL_MASK, directory, dirs_exist_ok=True)
    path = Path(directory) / "model.safetensors"
    data = path.read_bytes()
    size = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + size])
    header.pop("__metadata__", None)
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        assert entry["dtype"] == "F32", entry
        tensors[name] = np.frombuffer(data[8 + size + begin:8 + size + end], np.float32).reshape(entry["shape"])
    embeddings = "deberta.embeddings.word_embeddings.weight"
    rows = np.random.default_rng(0).normal(0.0, 0.02, (extra_rows, tensors[embeddings].shape[1]))
    tensors[embeddings] = np.concatenate([tensors[embeddings], rows.astype(np.float32)])
    tensors["cls.predictions.bias"] = np.concatenate([tensors["cls.predictions.bias"],
                                                      np.full(extra_rows, 20.0, np.float32)])
    offset, entries, blobs = 0, {}, []
    for name, value in tensors.items():
        blob = np.ascontiguousarray(value, np.float32).tobytes()
        entries[name] = {"dtype": "F32", "shape": list(value.shape), "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(entries).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    config_path = Path(directory) / "config.json"
    config = json.loads(config_path.read_text())
    config["vocab_size"] += extra_rows
    config_path.write_text(json.dumps(config))
    return Path(directory)


def cli_lines(*args, stdin=None):
    """The CLI's JSON lines for `args`, on one thread, every text in one batch."""
    command = [CLI, *map(str, args), "--threads", "1", "--batch-size", str(BATCH)]
    result = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(command)} failed: {result.stderr}")
    return [json.loads(line) for line in result.stdout.splitlines()]


def served(model, route, body, tokenizer=SPM):
    """The server's answer to one request of `body` (the server on one thread)."""
    with Server(model, tokenizer=tokenizer) as server:
        status, answer = post(server, route, body)
        assert status == 200, answer
        assert server.stop() == 0
    return answer


def python_pipeline(task, model, tokenizer=SPM):
    return flashdeberta.pipeline(task, model=str(model), tokenizer=str(tokenizer), threads=1, batch_size=BATCH)


class SameResults(unittest.TestCase):
    def test_fill_mask_with_top_k_past_the_tokenizers_vocabulary(self):
        # Rows without a token come first; their token_str is empty (HF's decode drops unknown ids).
        texts = ["Paris is the [MASK] of France.", "The [MASK] sat on the [MASK]."]
        with tempfile.TemporaryDirectory() as scratch:
            model = widened_masked_lm(scratch)
            cli = [line["masks"] for line in cli_lines("fill-mask", "--model", model, "--tokenizer", SPM,
                                                       "--top-k", 20, *texts)]
            self.assertEqual(sum(p["token_str"] == "" for masks in cli for row in masks for p in row), 30)
            hf_shape = [masks[0] if len(masks) == 1 else masks for masks in cli]
            self.assertEqual(served(model, "/fill-mask", {"inputs": texts, "top_k": 20}), hf_shape)
            self.assertEqual(python_pipeline("fill-mask", model)(texts, top_k=20), hf_shape)

    def test_text_classification_of_texts_and_pairs(self):
        texts = ["I loved this film.", "A dull and tiring book.", "The weather is fine."]
        cli = [line["labels"] for line in cli_lines("classify", "--model", CLASSIFY, "--tokenizer", SPM, *texts)]
        self.assertEqual(served(CLASSIFY, "/predict", {"inputs": [[t] for t in texts]}), cli)
        self.assertEqual(python_pipeline("text-classification", CLASSIFY)(texts, top_k=None), cli)
        pairs = [{"text": "A man plays guitar.", "text_pair": "Someone makes music."},
                 {"text": "It is raining.", "text_pair": "The ground is dry."}]
        jsonl = "".join(json.dumps(p) + "\n" for p in pairs)
        cli = [line["labels"] for line in cli_lines("classify", "--model", ZERO_SHOT, "--tokenizer", SPM, "--jsonl",
                                                    stdin=jsonl)]
        body = {"inputs": [[p["text"], p["text_pair"]] for p in pairs]}
        self.assertEqual(served(ZERO_SHOT, "/predict", body), cli)
        self.assertEqual(python_pipeline("text-classification", ZERO_SHOT)(pairs, top_k=None), cli)

    def test_token_classification(self):
        texts = ["I live in Berlin.", "Ada Lovelace met Charles Babbage in London."]
        cli = [line["entities"] for line in cli_lines("ner", "--model", NER, "--tokenizer", SPM, *texts)]
        self.assertEqual(served(NER, "/ner", {"inputs": texts}), cli)
        self.assertEqual(python_pipeline("token-classification", NER)(texts, aggregation_strategy="simple"), cli)

    def test_zero_shot_classification(self):
        texts = ["The team won the final.", "The new phone has a great camera."]
        labels = ["sports", "technology", "cooking"]
        cli = cli_lines("zero-shot", "--model", ZERO_SHOT, "--tokenizer", SPM, "--labels", ",".join(labels), *texts)
        body = {"inputs": texts, "candidate_labels": labels}
        self.assertEqual(served(ZERO_SHOT, "/zero-shot", body), cli)
        self.assertEqual(python_pipeline("zero-shot-classification", ZERO_SHOT)(texts, labels), cli)

    def test_rerank(self):
        query = "What is the capital of France?"
        passages = ["Paris is the capital of France.", "Berlin is in Germany.", "Wine and cheese."]
        cli = cli_lines("rerank", "--model", RERANK, "--tokenizer", SPM, "--query", query, "--return-text",
                        "--top-n", 2, *passages)[0]
        body = {"query": query, "texts": passages, "return_text": True, "top_n": 2}
        self.assertEqual(served(RERANK, "/rerank", body), cli)
        self.assertEqual(python_pipeline("rerank", RERANK)(query, passages, top_n=2, return_text=True), cli)

    def test_question_answering(self):  # the server has no question-answering route
        question, context = "Where does Ada live?", "Ada lives in London and works in Paris."
        cli = cli_lines("qa", "--model", QA, "--tokenizer", SPM, "--question", question, "--context", context)[0]
        self.assertEqual(cli.pop("question"), question)
        self.assertEqual(python_pipeline("question-answering", QA)(question=question, context=context), cli)

    def test_gliner(self):
        texts = ["Ada Lovelace worked with Charles Babbage in London.", "The Rosetta probe left Kourou in 2004."]
        labels = ["person", "location", "date"]
        cli = [line["entities"] for line in cli_lines("gliner", "--model", GLINER, "--labels", ",".join(labels),
                                                      "--threshold", 0.3, *texts)]
        body = {"texts": texts, "labels": labels, "threshold": 0.3}
        self.assertEqual(served(GLINER, "/gliner", body, tokenizer=None), cli)
        model = flashdeberta.GLiNER.from_pretrained(str(GLINER), threads=1)
        self.assertEqual(model.batch_predict_entities(texts, labels, threshold=0.3, batch_size=BATCH), cli)


if __name__ == "__main__":
    unittest.main(verbosity=2)

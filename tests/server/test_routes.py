"""Every route of `flashdeberta serve`, called with urllib and curl: the answers equal the CLI's for the same
texts (and HF's, on the fixtures made with transformers 5.17), in TEI's and HF's shapes."""

import json
import math
import signal
import struct
import subprocess
import tempfile
import unittest
from pathlib import Path

from server_harness import (CLASSIFY, CLI, FILL_MASK, NER, RERANK, SAME_RUN, SPM, THREADS, ZERO_SHOT, Server, cli_lines,
                            close, curl, make_backbone, metric, post, request)

# Server and CLI run the same forward on the same texts, batched differently (SAME_RUN); HF's scores agree
# with ours to 1e-4 (tests/cli).
HF = 1e-4

CLASSIFY_TEXTS = [case["input"]["text"] for case in json.loads((CLASSIFY / "expected.json").read_text())["inputs"]]
CLASSIFY_TEXTS += ["", "A long and winding sentence, with commas; and a semicolon!", "数字 123 and émojis 🙂"]


def fixture_cases(directory):
    return json.loads((directory / "expected.json").read_text())["inputs"]


def tokenize_with_cli(*texts):
    """`flashdeberta tokenize` (which takes no --threads) of the texts."""
    result = subprocess.run([CLI, "tokenize", "--model", str(SPM), *texts], capture_output=True, text=True, check=True)
    return [json.loads(line) for line in result.stdout.splitlines()]


def as_labels(cli_line):
    return cli_line["labels"]


class ClassifierRoutes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server(CLASSIFY)

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0, cls.server.stderr()

    def test_predict_single_texts_equal_the_cli(self):
        expected = [as_labels(line) for line in cli_lines("classify", "--model", CLASSIFY, "--tokenizer", SPM,
                                                          *CLASSIFY_TEXTS)]
        for text, want in zip(CLASSIFY_TEXTS, expected):
            status, got = post(self.server, "/predict", {"inputs": text})
            self.assertEqual(status, 200, got)
            self.assertTrue(close(got, want, SAME_RUN), f"{text!r}: {got} != {want}")

    def test_predict_batch_with_curl_equals_the_cli_and_hf(self):
        expected = [as_labels(line) for line in cli_lines("classify", "--model", CLASSIFY, "--tokenizer", SPM,
                                                          *CLASSIFY_TEXTS)]
        status, got = curl(self.server, "/predict", {"inputs": [[text] for text in CLASSIFY_TEXTS]})
        self.assertEqual(status, 200, got)
        self.assertEqual(len(got), len(CLASSIFY_TEXTS))
        for answer, want in zip(got, expected):
            self.assertTrue(close(answer, want, SAME_RUN), f"{answer} != {want}")
        for answer, case in zip(got, fixture_cases(CLASSIFY)):
            self.assertTrue(close(answer, case["output"], HF), f"{answer} != HF's {case['output']}")

    def test_raw_scores_are_the_logits_of_the_scores(self):
        text = CLASSIFY_TEXTS[0]
        _, scores = post(self.server, "/predict", {"inputs": text})
        status, raw = post(self.server, "/predict", {"inputs": [text], "raw_scores": True})
        self.assertEqual(status, 200, raw)
        self.assertEqual([r["score"] for r in raw], sorted((r["score"] for r in raw), reverse=True))
        total = sum(math.exp(r["score"]) for r in raw)
        softmax = {r["label"]: math.exp(r["score"]) / total for r in raw}
        for s in scores:
            self.assertAlmostEqual(s["score"], softmax[s["label"]], places=6)

    def test_truncate_cuts_an_input_longer_than_max_input_length(self):
        long_text = "word " * 700
        status, error = post(self.server, "/predict", {"inputs": long_text})
        self.assertEqual(status, 422, error)
        self.assertEqual(error["error_type"], "Validation")
        self.assertIn("inputs: the text holds more than 512 tokens, more than --max-input-length 512", error["error"])
        self.assertIn("truncate", error["error"])
        status, got = post(self.server, "/predict", {"inputs": long_text, "truncate": True})
        self.assertEqual(status, 200, got)
        self.assertEqual(sorted(g["label"] for g in got), ["negative", "neutral", "positive"])

    def test_tokenize_equals_the_cli_with_byte_offsets(self):
        texts = ["Héllo wörld, [MASK] 🙂!", "plain text"]
        expected = tokenize_with_cli(*texts)
        status, got = post(self.server, "/tokenize", {"inputs": texts})
        self.assertEqual(status, 200, got)
        for text, tokens, want in zip(texts, got, expected):
            self.assertEqual([t["id"] for t in tokens], want["input_ids"])
            encoded = text.encode()
            for token, offsets in zip(tokens, want["offsets"]):
                if token["special"]:
                    self.assertIsNone(token["start"])
                    continue
                # TEI's offsets count bytes; the CLI's count code points, as HF's offset_mapping.
                self.assertEqual(token["start"], len(text[:offsets[0]].encode()))
                self.assertEqual(token["stop"], len(text[:offsets[1]].encode()))
                self.assertEqual(token["text"], encoded[token["start"]:token["stop"]].decode())
        status, got = curl(self.server, "/tokenize", {"inputs": "plain text", "add_special_tokens": False})
        self.assertEqual(status, 200, got)
        self.assertEqual([t["id"] for t in got[0]], expected[1]["input_ids"][1:-1])

    def test_info_health_and_metrics(self):
        status, info = request(self.server, "/info")
        self.assertEqual(status, 200, info)
        self.assertEqual(info["model_type"], {"classifier": {"id2label": {"0": "negative", "1": "neutral",
                                                                          "2": "positive"},
                                                             "label2id": {"negative": 0, "neutral": 1, "positive": 2}}})
        self.assertEqual(info["labels"], ["negative", "neutral", "positive"])
        self.assertEqual(info["routes"], ["/predict", "/text-classification", "/tokenize", "/decode", "/", "/invocations",
                                          "/info", "/health", "/ping", "/metrics"])
        self.assertEqual((info["max_input_length"], info["max_batch_tokens"], info["backend"]), (512, 16384, "eigen"))
        self.assertEqual(info["variant"], "DeBERTa v3")
        status, body = request(self.server, "/health")
        self.assertEqual((status, body), (200, ""))
        post(self.server, "/predict", {"inputs": "count me"})
        status, text = curl(self.server, "/metrics")
        self.assertEqual(status, 200)
        self.assertGreaterEqual(metric(text, "flashdeberta_requests_total", 'route="/predict",status="200"'), 1)
        self.assertGreaterEqual(metric(text, "flashdeberta_batch_size_count"), 1)
        self.assertGreaterEqual(metric(text, "flashdeberta_tokens_total"), 1)
        self.assertIsNotNone(metric(text, "flashdeberta_queue_duration_seconds_bucket", 'le="+Inf"'))
        self.assertIsNotNone(metric(text, "flashdeberta_tokens_per_second"))

    def test_routes_of_other_heads_name_what_the_model_is(self):
        for path, body in [("/rerank", {"query": "q", "texts": ["a"]}), ("/embed", {"inputs": "a"}),
                           ("/zero-shot", {"inputs": "a", "candidate_labels": ["x"]}),
                           ("/fill-mask", {"inputs": "a [MASK]"}), ("/ner", {"inputs": "a"})]:
            status, error = post(self.server, path, body)
            self.assertEqual(status, 424, (path, error))
            self.assertEqual(error["error_type"], "Backend")
            self.assertIn(path + " needs", error["error"])
            self.assertIn("sequence-classification checkpoint", error["error"])
            self.assertIn("labels negative, neutral, positive", error["error"])


class FillMaskAndNerRoutes(unittest.TestCase):
    def test_fill_mask_equals_the_cli_and_hf(self):
        cases = fixture_cases(FILL_MASK)
        with Server(FILL_MASK) as server:
            for case in cases:
                text, top_k = case["input"]["text"], case["input"]["top_k"]
                want = cli_lines("fill-mask", "--model", FILL_MASK, "--tokenizer", SPM, "--top-k", top_k, text)[0]
                want = want["masks"][0] if len(want["masks"]) == 1 else want["masks"]
                status, got = post(server, "/fill-mask", {"inputs": text, "top_k": top_k})
                self.assertEqual(status, 200, got)
                self.assertTrue(close(got, want, SAME_RUN), f"{got} != {want}")
                self.assertTrue(close(got, case["output"], HF), f"{got} != HF's {case['output']}")
            status, got = curl(server, "/fill-mask", {"inputs": [c["input"]["text"] for c in cases],
                                                      "parameters": {"top_k": 2}})
            self.assertEqual(status, 200, got)
            self.assertEqual(len(got), len(cases))
            status, error = post(server, "/fill-mask", {"inputs": ["a [MASK]", "no mask here"]})
            self.assertEqual(status, 422, error)
            self.assertIn("inputs[1]: no mask token ([MASK]) in the text", error["error"])
            self.assertEqual(server.stop(signal.SIGINT), 0)  # Ctrl-C stops it as SIGTERM does
            self.assertIn("SIGINT: answering the requests in flight", server.stderr())

    def test_ner_equals_the_cli_and_hf(self):
        cases = fixture_cases(NER)
        texts = [c["input"]["text"] for c in cases]
        expected = [line["entities"] for line in cli_lines("ner", "--model", NER, "--tokenizer", SPM, *texts)]
        with Server(NER) as server:
            for text, want, case in zip(texts, expected, cases):
                status, got = post(server, "/ner", {"inputs": text})
                self.assertEqual(status, 200, got)
                self.assertTrue(close(got, want, SAME_RUN), f"{got} != {want}")
                self.assertTrue(close(got, case["output"], HF), f"{got} != HF's {case['output']}")
            status, got = curl(server, "/ner", {"inputs": texts})
            self.assertEqual(status, 200, got)
            self.assertTrue(close(got, expected, SAME_RUN))
            self.assertEqual(server.stop(), 0)


class PairRoutes(unittest.TestCase):
    """/predict with pairs and /zero-shot on the NLI fixture, /rerank on the cross-encoder: HF's answers."""

    def test_predict_pairs_equal_hf(self):
        # The calls of HF's pipeline with top_k=None: every label, as /predict answers.
        cases = [c for c in fixture_cases(ZERO_SHOT.parent / "pair_classify") if "top_k" in c["input"]]
        pair = lambda inputs: [inputs["text"], inputs["text_pair"]]  # noqa: E731
        with Server(ZERO_SHOT) as server:
            for case in cases:
                inputs = case["input"]["inputs"]
                if isinstance(inputs, list):  # a batch of pairs, with curl
                    status, got = curl(server, "/predict", {"inputs": [pair(i) for i in inputs]})
                    cli = [line["labels"] for line in cli_lines(
                        "classify", "--model", ZERO_SHOT, "--tokenizer", SPM, "--jsonl",
                        stdin="".join(json.dumps(i) + "\n" for i in inputs))]
                else:
                    status, got = post(server, "/predict", {"inputs": pair(inputs)})
                    cli = cli_lines("classify", "--model", ZERO_SHOT, "--tokenizer", SPM, "--pair",
                                    inputs["text_pair"], inputs["text"])[0]["labels"]
                self.assertEqual(status, 200, got)
                self.assertTrue(close(got, cli, SAME_RUN), f"{got} != the CLI's {cli}")
                self.assertTrue(close(got, case["output"], HF), f"{got} != HF's {case['output']}")
            self.assertEqual(server.stop(), 0)

    def test_zero_shot_equals_hf(self):
        cases = fixture_cases(ZERO_SHOT)
        with Server(ZERO_SHOT) as server:
            for n, case in enumerate(cases):
                body = {"inputs": case["input"]["sequences"], "candidate_labels": case["input"]["candidate_labels"]}
                for option in ("hypothesis_template", "multi_label"):
                    if option in case["input"]:
                        body[option] = case["input"][option]
                if n % 2:  # HF's Inference API puts the options in "parameters"
                    body = {"inputs": body.pop("inputs"), "parameters": body}
                send = curl if n % 3 == 0 else post
                status, got = send(server, "/zero-shot", body)
                self.assertEqual(status, 200, got)
                self.assertTrue(close(got, case["output"], HF), f"case {n}: {got} != HF's {case['output']}")
                labels = case["input"]["candidate_labels"]
                texts = case["input"]["sequences"]
                cli = cli_lines("zero-shot", "--model", ZERO_SHOT, "--tokenizer", SPM, "--labels",
                                labels if isinstance(labels, str) else ",".join(labels),
                                *(["--multi-label"] if case["input"].get("multi_label") else []),
                                *(["--hypothesis-template", case["input"]["hypothesis_template"]]
                                  if "hypothesis_template" in case["input"] else []),
                                *(texts if isinstance(texts, list) else [texts]))
                self.assertTrue(close(got, cli if isinstance(texts, list) else cli[0], SAME_RUN),
                                f"case {n}: {got} != the CLI's {cli}")
            self.assertEqual(server.stop(), 0)

    def test_rerank_equals_hf(self):
        cases = [c for c in fixture_cases(RERANK) if c["input"]["max_length"] is None]
        with Server(RERANK) as server:
            for case in cases:
                query, passages = case["input"]["query"], case["input"]["passages"]
                status, got = post(server, "/rerank", {"query": query, "texts": passages, "return_text": True})
                self.assertEqual(status, 200, got)
                cli = cli_lines("rerank", "--model", RERANK, "--tokenizer", SPM, "--query", query, "--return-text",
                                "--", *passages)[0]
                self.assertTrue(close(got, cli, SAME_RUN), f"{got} != the CLI's {cli}")
                self.assertEqual([r["index"] for r in got], case["order"])
                for r in got:
                    self.assertEqual(r["text"], passages[r["index"]])
                    self.assertAlmostEqual(r["score"], case["sigmoid_scores"][r["index"]], delta=HF)
                status, raw = curl(server, "/rerank", {"query": query, "texts": passages, "raw_scores": True,
                                                       "top_n": 2})
                self.assertEqual(status, 200, raw)
                self.assertEqual([r["index"] for r in raw], case["order"][:2])
                for r in raw:
                    self.assertNotIn("text", r)
                    self.assertAlmostEqual(r["score"], case["logits"][r["index"]], delta=HF)
            self.assertEqual(server.stop(), 0)

    def test_rerank_truncates_as_hf_longest_first(self):
        cases = [c for c in fixture_cases(RERANK) if c["input"]["truncation"] == "longest_first"]
        with Server(RERANK, "--max-input-length", cases[0]["input"]["max_length"]) as server:
            for case in cases:
                body = {"query": case["input"]["query"], "texts": case["input"]["passages"], "raw_scores": True}
                status, error = post(server, "/rerank", body)
                self.assertEqual(status, 422, error)
                # A query over the limit by itself is named as the query, else the first pair over it.
                self.assertRegex(error["error"], r"^(query|texts\[0\]): the text holds more than")
                status, got = post(server, "/rerank", dict(body, truncate=True))
                self.assertEqual(status, 200, got)
                cli = cli_lines("rerank", "--model", RERANK, "--tokenizer", SPM, "--query", body["query"],
                                "--raw-scores", "--max-length", case["input"]["max_length"], "--", *body["texts"])[0]
                self.assertTrue(close(got, cli, SAME_RUN), f"{got} != the CLI's {cli}")
                self.assertEqual([r["index"] for r in got], case["order"])
                for r in got:
                    self.assertAlmostEqual(r["score"], case["logits"][r["index"]], delta=HF)
            self.assertEqual(server.stop(), 0)


def read_safetensors(path):
    """{name: (shape, float32 values)} of a safetensors file."""
    data = Path(path).read_bytes()
    size = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + size])
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        raw = data[8 + size + begin:8 + size + end]
        out[name] = (entry["shape"], struct.unpack(f"<{len(raw) // 4}f", raw))
    return out


class EmbedRoute(unittest.TestCase):
    """/embed on a backbone: the classify fixture's weights under a config naming DebertaV2Model."""

    def test_embed_pools_the_clis_hidden_states(self):
        texts = ["Hello world", "A second, longer text to embed."]
        with tempfile.TemporaryDirectory() as scratch:
            backbone, _ = make_backbone(scratch)
            expected = {}
            for pooling in ("mean", "cls"):
                expected[pooling] = []
                for text in texts:
                    ids = tokenize_with_cli(text)[0]["input_ids"]
                    (Path(scratch) / "in.json").write_text(json.dumps({"input_ids": [ids]}))
                    subprocess.run([CLI, "run", "--model", str(backbone), "--input", str(Path(scratch) / "in.json"),
                                    "--output", str(Path(scratch) / "out.safetensors"), "--threads", THREADS],
                                   capture_output=True, check=True)
                    shape, values = read_safetensors(Path(scratch) / "out.safetensors")["last_hidden_state"]
                    length, width = shape[1], shape[2]
                    rows = [values[t * width:(t + 1) * width] for t in range(length)]
                    pooled = list(rows[0]) if pooling == "cls" else [sum(col) / length for col in zip(*rows)]
                    expected[pooling].append(pooled)
            for pooling in ("mean", "cls"):
                with Server(backbone, "--pooling", pooling) as server:
                    status, info = request(server, "/info")
                    self.assertEqual(info["model_type"], {"embedding": {"pooling": pooling}})
                    status, raw = post(server, "/embed", {"inputs": texts, "normalize": False})
                    self.assertEqual(status, 200, raw)
                    self.assertTrue(close(raw, expected[pooling], 1e-5), f"{raw} != {expected[pooling]}")
                    status, unit = curl(server, "/embed", {"inputs": texts[0]})
                    self.assertEqual(status, 200, unit)
                    norm = math.sqrt(sum(x * x for x in expected[pooling][0]))
                    self.assertTrue(close(unit, [[x / norm for x in expected[pooling][0]]], 1e-5))
                    status, error = post(server, "/predict", {"inputs": "x"})
                    self.assertEqual(status, 424, error)
                    self.assertIn("backbone checkpoint", error["error"])
                    self.assertEqual(server.stop(), 0)


class ZeroModelsDirectory(unittest.TestCase):
    def test_a_zeromodels_directory_serves_as_its_hf_conversion(self):
        # ZeroModels' Keras files (tests/fixtures/zeromodels) behind the server: the same answers as the CLI on the
        # HF directory `flashdeberta convert` makes of them.
        zm = Path(__file__).resolve().parent.parent / "fixtures" / "zeromodels"
        with tempfile.TemporaryDirectory() as work:
            for name, route, body in (("v3_masked_lm", "/fill-mask", {"inputs": "a b [MASK] c", "top_k": 3}),
                                      ("v3_seq_cls", "/predict", {"inputs": "a b c"})):
                hf = Path(work) / name
                done = subprocess.run([CLI, "convert", "--from", zm / name, "--to", hf], capture_output=True, text=True)
                self.assertEqual(done.returncode, 0, done.stderr)
                with Server(zm / name) as served, Server(hf) as reference:
                    status, got = post(served, route, body)
                    self.assertEqual(status, 200, got)
                    self.assertEqual(got, post(reference, route, body)[1])
                    status, info = request(served, "/info")
                    self.assertEqual(status, 200, info)


if __name__ == "__main__":
    unittest.main(verbosity=2)

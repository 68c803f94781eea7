"""text-embeddings-inference's routes beyond the task routes, and its request rules on every route: POST / and
/invocations per model kind, GET / and /ping, /embed_all, /similarity, /v1/embeddings, /decode, token-id inputs,
truncation_direction, unknown fields ignored, and HF's Inference API /text-classification. Expected values come
from other routes and plain Python (a cosine in double, base64 of the floats), not from the route under test."""

import base64
import math
import struct
import tempfile
import unittest

from server_harness import CLASSIFY, FILL_MASK, NER, RERANK, SAME_RUN, Server, close, make_backbone, post, request

# Twelve words of one token each in the fixtures' small vocabulary (checked), so that a cut at a token is a cut
# at a word.
WORDS = "the a b c f g h i j the a b".split()
# --max-input-length of the truncating servers: [CLS], six words, [SEP].
CUT = 8


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def ids_of(server, text):
    status, tokens = post(server, "/tokenize", {"inputs": text})
    assert status == 200, tokens
    return [token["id"] for token in tokens[0]]


class EmbeddingRoutes(unittest.TestCase):
    """An embedding model with CLS pooling, whose /embed vector is exactly the first row of /embed_all."""

    @classmethod
    def setUpClass(cls):
        cls.scratch = tempfile.TemporaryDirectory()
        backbone, cls.config = make_backbone(cls.scratch.name)
        cls.server = Server(backbone, "--pooling", "cls", "--model-id", "tiny-embedder")
        cls.cut = Server(backbone, "--pooling", "cls", "--max-input-length", CUT)

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0, cls.server.stderr()
        assert cls.cut.stop() == 0, cls.cut.stderr()
        cls.scratch.cleanup()

    def embed(self, server, inputs, **options):
        status, vectors = post(server, "/embed", {"inputs": inputs, **options})
        self.assertEqual(status, 200, vectors)
        return vectors

    def test_embed_all_holds_every_token_and_its_first_row_is_the_cls_embedding(self):
        texts = ["Hello world", "A second, longer text to embed."]
        status, states = post(self.server, "/embed_all", {"inputs": texts})
        self.assertEqual(status, 200, states)
        pooled = self.embed(self.server, texts, normalize=False)
        for text, rows, vector in zip(texts, states, pooled):
            self.assertEqual(len(rows), len(ids_of(self.server, text)))
            self.assertTrue(all(len(row) == self.config["hidden_size"] for row in rows))
            self.assertEqual(rows[0], vector)
        status, single = post(self.server, "/embed_all", {"inputs": texts[0]})
        self.assertEqual((status, single), (200, [states[0]]))

    def test_similarity_is_the_cosine_of_the_embeddings(self):
        source, sentences = "A cat sits on the mat.", ["A cat is sitting.", "Stocks fell sharply today.", "mat"]
        status, got = post(self.server, "/similarity",
                           {"inputs": {"source_sentence": source, "sentences": sentences}})
        self.assertEqual(status, 200, got)
        vectors = self.embed(self.server, [source] + sentences, normalize=False)
        want = [cosine(vectors[0], v) for v in vectors[1:]]
        self.assertTrue(close(got, want, 1e-6), f"{got} != {want}")
        status, error = post(self.server, "/similarity", {"inputs": {"source_sentence": source, "sentences": []}})
        self.assertEqual((status, error["error_type"]), (400, "Empty"), error)

    def test_openai_embeddings_are_the_normalized_embeddings(self):
        texts = ["Hello world", "Another text"]
        want = self.embed(self.server, texts)
        tokens = sum(len(ids_of(self.server, t)) for t in texts)
        for path in ("/v1/embeddings", "/embeddings"):
            status, answer = post(self.server, path, {"input": texts, "model": "anything", "user": "u"})
            self.assertEqual(status, 200, answer)
            self.assertEqual(answer["object"], "list")
            self.assertEqual(answer["model"], "tiny-embedder")
            self.assertEqual(answer["usage"], {"prompt_tokens": tokens, "total_tokens": tokens})
            self.assertEqual([(d["object"], d["index"]) for d in answer["data"]], [("embedding", 0), ("embedding", 1)])
            self.assertEqual([d["embedding"] for d in answer["data"]], want)
        status, answer = post(self.server, "/v1/embeddings", {"input": texts[0], "encoding_format": "base64"})
        self.assertEqual(status, 200, answer)
        raw = base64.b64decode(answer["data"][0]["embedding"])
        floats = list(struct.unpack(f"<{len(raw) // 4}f", raw))
        self.assertEqual(floats, want[0])
        # Errors in TEI's OpenAI-compatible body: {"message", "code", "type"}, from the route and the transport.
        for path in ("/v1/embeddings", "/embeddings"):
            status, error = post(self.server, path, {"input": "x", "encoding_format": "int8"})
            self.assertEqual((status, set(error)), (422, {"message", "code", "type"}), error)
            self.assertEqual((error["code"], error["type"]), (422, "Validation"), error)
            self.assertIn("encoding_format", error["message"])
        status, error = request(self.server, "/v1/embeddings", method="GET")
        self.assertEqual((status, error["code"], error["type"]), (405, 405, "Validation"), error)
        status, error = post(self.server, "/embed", {"inputs": "x", "truncation_direction": "Up"})
        self.assertEqual(set(error), {"error", "error_type"}, error)  # TEI's own routes keep TEI's body

    def test_token_ids_run_as_the_text_they_encode(self):
        text = "Token ids stand for a text."
        ids = ids_of(self.server, text)
        self.assertEqual(self.embed(self.server, ids), self.embed(self.server, text))
        self.assertEqual(self.embed(self.server, [text, ids]), self.embed(self.server, [text, text]))
        status, states = post(self.server, "/embed_all", {"inputs": [ids]})
        self.assertEqual(status, 200, states)
        self.assertEqual(len(states[0]), len(ids))
        status, answer = post(self.server, "/v1/embeddings", {"input": [ids]})
        self.assertEqual(status, 200, answer)
        self.assertEqual(answer["usage"]["prompt_tokens"], len(ids))

    def test_token_ids_are_checked(self):
        vocab = self.config["vocab_size"]
        status, error = post(self.server, "/embed", {"inputs": ["a", [1, 5, vocab]]})
        self.assertEqual((status, error["error_type"]), (422, "Validation"), error)
        self.assertIn(f"inputs[1][2] is token id {vocab}, outside the model's vocabulary", error["error"])
        status, error = post(self.server, "/embed", {"inputs": [[1, -5]]})
        self.assertEqual(status, 422, error)
        self.assertIn("inputs[0][1] must be a token id", error["error"])
        status, error = post(self.server, "/embed", {"inputs": []})
        self.assertEqual((status, error["error_type"]), (400, "Empty"), error)
        status, error = post(self.cut, "/embed", {"inputs": list(range(5, 5 + CUT + 1))})
        self.assertEqual(status, 422, error)
        self.assertIn("--max-input-length", error["error"])

    def test_truncation_direction_keeps_the_start_or_the_end(self):
        text = " ".join(WORDS)
        self.assertEqual(len(ids_of(self.cut, text)), len(WORDS) + 2, "each word should be one token")
        keep = CUT - 2
        head, tail = " ".join(WORDS[:keep]), " ".join(WORDS[-keep:])
        for direction, part in (("Right", head), ("right", head), ("Left", tail), ("left", tail)):
            got = self.embed(self.cut, text, truncate=True, truncation_direction=direction)
            self.assertEqual(got, self.embed(self.cut, part), direction)
        self.assertEqual(self.embed(self.cut, text, truncate=True), self.embed(self.cut, head))
        ids = ids_of(self.cut, text)
        self.assertEqual(self.embed(self.cut, ids, truncate=True, truncation_direction="Left"),
                         self.embed(self.cut, ids[-CUT:]))
        status, states = post(self.cut, "/embed_all", {"inputs": text, "truncate": True, "truncation_direction": "Left"})
        self.assertEqual((status, len(states[0])), (200, CUT), states)
        body = {"inputs": {"source_sentence": text, "sentences": [tail]},
                "parameters": {"truncate": True, "truncation_direction": "Left"}}
        status, similarity = post(self.cut, "/similarity", body)
        self.assertEqual(status, 200, similarity)
        self.assertAlmostEqual(similarity[0], 1.0, places=5)
        status, error = post(self.cut, "/embed", {"inputs": text, "truncate": True, "truncation_direction": "Up"})
        self.assertEqual(status, 422, error)
        self.assertIn('truncation_direction must be "Left" or "Right"', error["error"])

    def test_decode_gives_back_the_text(self):
        texts = ["Hello world", "Decoding, too."]
        ids = [ids_of(self.server, t) for t in texts]
        status, got = post(self.server, "/decode", {"ids": ids[0]})
        self.assertEqual((status, got), (200, [texts[0]]))
        status, got = post(self.server, "/decode", {"ids": ids})
        self.assertEqual((status, got), (200, texts))
        status, got = post(self.server, "/decode", {"ids": ids[0], "skip_special_tokens": False})
        self.assertEqual(status, 200, got)
        self.assertTrue(got[0].startswith("[CLS]") and got[0].endswith("[SEP]"), got)
        status, error = post(self.server, "/decode", {"ids": [ids[0], [1, 10 ** 9]]})
        self.assertEqual(status, 422, error)
        self.assertIn("ids[1][1] is token id 1000000000, outside the tokenizer's vocabulary", error["error"])
        status, error = post(self.server, "/decode", {"ids": []})
        self.assertEqual((status, error["error_type"]), (400, "Empty"), error)

    def test_root_and_invocations_embed_and_health_answers_on_get(self):
        want = self.embed(self.server, "Hello")
        for path in ("/", "/invocations"):
            status, got = post(self.server, path, {"inputs": "Hello"})
            self.assertEqual((status, got), (200, want), path)
        for path in ("/", "/ping", "/health"):
            self.assertEqual(request(self.server, path), (200, ""), path)
        status, info = request(self.server, "/info")
        for path in ("/embed_all", "/similarity", "/v1/embeddings", "/decode", "/", "/invocations", "/ping"):
            self.assertIn(path, info["routes"])

    def test_unknown_fields_are_ignored(self):
        want = self.embed(self.server, "Hello")
        self.assertEqual(self.embed(self.server, "Hello", normalise=False, extra={"a": 1}), want)


class ClassifierRoutes(unittest.TestCase):
    """A classifier: POST / predicts, /text-classification answers HF's Inference API shape."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server(CLASSIFY)
        cls.cut = Server(CLASSIFY, "--max-input-length", CUT)

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0, cls.server.stderr()
        assert cls.cut.stop() == 0, cls.cut.stderr()

    def predict(self, server, inputs, **options):
        status, labels = post(server, "/predict", {"inputs": inputs, **options})
        self.assertEqual(status, 200, labels)
        return labels

    def test_root_and_invocations_predict(self):
        want = self.predict(self.server, "I love it")
        for path in ("/", "/invocations"):
            status, got = post(self.server, path, {"inputs": "I love it"})
            self.assertEqual(status, 200, got)
            self.assertTrue(close(got, want, SAME_RUN), f"{path}: {got} != {want}")

    def test_text_classification_answers_a_list_per_input(self):
        texts = ["I love it", "I hate it"]
        status, got = post(self.server, "/text-classification", {"inputs": texts[0]})
        self.assertEqual(status, 200, got)
        self.assertTrue(close(got, [self.predict(self.server, texts[0])], SAME_RUN), got)
        status, got = post(self.server, "/text-classification", {"inputs": texts})
        self.assertEqual(status, 200, got)
        self.assertTrue(close(got, self.predict(self.server, [[t] for t in texts]), SAME_RUN), got)
        status, got = post(self.server, "/text-classification",
                           {"inputs": texts[0], "parameters": {"top_k": 1, "function_to_apply": "none"}})
        self.assertEqual(status, 200, got)
        self.assertTrue(close(got, [self.predict(self.server, texts[0], raw_scores=True)[:1]], SAME_RUN), got)
        status, error = post(self.server, "/text-classification",
                             {"inputs": "x", "parameters": {"function_to_apply": "relu"}})
        self.assertEqual(status, 422, error)
        self.assertIn("parameters.function_to_apply", error["error"])

    def test_truncation_direction_on_predict(self):
        text = " ".join(WORDS)
        self.assertEqual(len(ids_of(self.cut, text)), len(WORDS) + 2, "each word should be one token")
        keep = CUT - 2
        for direction, part in (("Right", WORDS[:keep]), ("Left", WORDS[-keep:])):
            got = self.predict(self.cut, text, truncate=True, truncation_direction=direction)
            self.assertEqual(got, self.predict(self.cut, " ".join(part)), direction)
        # A pair of twelve tokens each, longest_first into 8 - 3 special tokens: 2 of the first, 3 of the second
        # (the odd token goes to the second on a tie), the last ones on the left.
        got = self.predict(self.cut, [text, text], truncate=True, truncation_direction="Left")
        self.assertEqual(got, self.predict(self.cut, [" ".join(WORDS[-2:]), " ".join(WORDS[-3:])]))

    def test_unknown_fields_are_ignored(self):
        want = self.predict(self.server, "I love it")
        self.assertEqual(self.predict(self.server, "I love it", raw_score=True, parameters={"x": 1}), want)


class OtherKindsAtRoot(unittest.TestCase):
    """POST / runs each model's own task: rerank for a cross-encoder (TEI), fill-mask and ner for ours."""

    def test_root_runs_the_models_task(self):
        bodies = {RERANK: ("/rerank", {"query": "What is Paris?", "texts": ["Paris is a city.", "Bread."]}),
                  FILL_MASK: ("/fill-mask", {"inputs": "Paris is the [MASK] of France."}),
                  NER: ("/ner", {"inputs": "My name is Wolfgang and I live in Berlin."})}
        for model, (route, body) in bodies.items():
            with Server(model) as server:
                status, want = post(server, route, body)
                self.assertEqual(status, 200, want)
                for path in ("/", "/invocations"):
                    status, got = post(server, path, body)
                    self.assertEqual(status, 200, got)
                    self.assertTrue(close(got, want, SAME_RUN), f"{model.name} {path}: {got} != {want}")
                self.assertEqual(server.stop(), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)

"""POST /gliner of `flashdeberta serve` started on GLiNER model directories (tests/fixtures/gliner), with urllib
and curl: the entities equal GLiNER 0.2.27's (scores within 1e-4) and the CLI's `gliner` command's; bad
requests are 4xx with TEI's JSON error body; long_text windows and single_pass past max_len, and their bad values
(422); a server of another model refuses /gliner (424), naming why."""

import json
import unittest

from server_harness import CLASSIFY, FIXTURES, SAME_RUN, Server, cli_lines, close, curl, post, request

GLINER = FIXTURES / "gliner"
SCORE_TOLERANCE = 1e-4


def fixture_inputs(case):
    return json.loads((GLINER / case / "expected.json").read_text())["inputs"]


def body_of(rec, texts):
    return {"texts": texts, "labels": rec["labels"], "threshold": rec["threshold"], "flat_ner": rec["flat_ner"],
            "multi_label": rec["multi_label"]}


def expected_of(rec):
    """Per text, GLiNER's entities (a batch: each text's batch-of-one result, which we reproduce)."""
    if rec["api"] == "predict_entities":
        return [rec["entities"]]
    return [d["entities_single"] if d["valid"] else [] for d in rec["per_text"]]


class GlinerRoute(unittest.TestCase):
    def check(self, got, want):
        self.assertEqual([(e["start"], e["end"], e["text"], e["label"]) for e in got],
                         [(e["start"], e["end"], e["text"], e["label"]) for e in want])
        for g, w in zip(got, want):
            self.assertEqual(list(g), ["start", "end", "text", "label", "score"])
            self.assertLessEqual(abs(g["score"] - w["score"]), SCORE_TOLERANCE)

    def test_fixtures_equal_gliner(self):
        for case in ("span_markerV0", "token_level", "span_conv_share"):
            with Server(GLINER / case, tokenizer=None) as server:
                status, info = request(server, "/info")
                self.assertEqual(status, 200, info)
                self.assertIn("/gliner", info["routes"])
                self.assertEqual(info["head"], "gliner")
                for rec in fixture_inputs(case):
                    if rec["labels"] and isinstance(rec["labels"][0], list):
                        continue  # per-text labels: the route takes one label list
                    texts = [d["text"] for d in rec["per_text"]]
                    with self.subTest(case=case, input=rec["name"]):
                        status, got = post(server, "/gliner", body_of(rec, texts))
                        self.assertEqual(status, 200, got)
                        self.assertEqual(len(got), len(texts))
                        for entities, want in zip(got, expected_of(rec)):
                            self.check(entities, want)
                        # One text as "text": its list alone, with curl.
                        single = body_of(rec, None)
                        del single["texts"]
                        single["text"] = texts[0]
                        status, alone = curl(server, "/gliner", single)
                        self.assertEqual(status, 200, alone)
                        self.check(alone, expected_of(rec)[0])
                self.assertEqual(server.stop(), 0, server.stderr())

    def test_equals_the_cli(self):
        rec = fixture_inputs("span_marker")[1]  # nested
        texts = [d["text"] for d in rec["per_text"]] + ["", "Ada Lovelace met Charles Babbage in London in 1833."]
        want = [line["entities"] for line in cli_lines(
            "gliner", "--model", GLINER / "span_marker", "--labels", ",".join(rec["labels"]), "--threshold",
            repr(rec["threshold"]), "--nested", "--", *texts)]
        with Server(GLINER / "span_marker", tokenizer=None) as server:
            status, got = post(server, "/gliner", body_of(rec, texts))
            self.assertEqual(status, 200, got)
            self.assertTrue(close(got, want, SAME_RUN), f"{got} != {want}")
            self.assertEqual(server.stop(), 0)

    def test_bad_requests(self):
        with Server(GLINER / "span_marker", tokenizer=None) as server:
            cases = [
                ({"text": "Ada"}, 422, "missing field 'labels'"),
                ({"labels": ["person"]}, 422, "'text'"),
                ({"text": "Ada", "texts": ["Ada"], "labels": ["person"]}, 422, "not both"),
                ({"text": "Ada", "labels": []}, 400, "labels is an empty list"),
                ({"text": "Ada", "labels": "person"}, 422, "labels must be a list"),
                ({"text": "Ada", "labels": ["person", ""]}, 422, "labels[1] is an empty text"),
                ({"text": "Ada", "labels": ["person"], "threshold": 2}, 422, "threshold must be a number in [0, 1]"),
                ({"text": "Ada", "labels": ["person"], "flat_ner": "yes"}, 422, "flat_ner must be true or false"),
                ({"texts": ["Ada"] * 33, "labels": ["person"]}, 413, "--max-client-batch-size"),
                ({"text": 5, "labels": ["person"]}, 422, "text must be a string"),
            ]
            for body, status, needle in cases:
                with self.subTest(body=body):
                    got_status, got = post(server, "/gliner", body)
                    self.assertEqual(got_status, status, got)
                    self.assertIn(needle, got["error"])
                    self.assertIn(got["error_type"], ("Validation", "Empty"))
            status, got = post(server, "/gliner", None, raw=b"{not json")
            self.assertEqual(status, 400, got)
            # The other model routes are not this model's.
            for path, body in (("/predict", {"inputs": "x"}), ("/tokenize", {"inputs": "x"})):
                status, got = post(server, path, body)
                self.assertEqual(status, 424, got)
                self.assertIn("GLiNER", got["error"])
            self.assertEqual(server.stop(), 0)

    def test_long_text(self):
        """span_markerV0 (max_len 64) on 8 copies of a 14-word text: truncate stops at word 64, windows finds the
        first copy's date entity in every copy, single_pass reads past word 64; bad values are refused."""
        base = "The European Space Agency launched the Rosetta probe from Kourou in March 2004 ."
        text = " ".join([base] * 8)
        cut = 4 * 81 + 53  # word 64 starts there
        body = {"text": text, "labels": ["organization", "location", "date"], "threshold": 0.5}

        def spans(got):
            return {(e["start"], e["end"], e["label"]) for e in got}

        with Server(GLINER / "span_markerV0", tokenizer=None) as server:
            status, truncated = post(server, "/gliner", body)
            self.assertEqual(status, 200, truncated)
            status, windows = post(server, "/gliner", {**body, "long_text": "windows", "window_overlap": 16})
            self.assertEqual(status, 200, windows)
            status, single = post(server, "/gliner", {**body, "long_text": "single_pass"})
            self.assertEqual(status, 200, single)
            for r in range(8):
                self.assertIn((13 + 81 * r, 64 + 81 * r, "date"), spans(windows))
            self.assertNotIn((13 + 81 * 7, 64 + 81 * 7, "date"), spans(truncated))
            self.assertTrue(all(e["end"] <= cut for e in truncated))
            self.assertTrue(any(e["start"] >= cut for e in single))
            for e in windows + single:
                self.assertEqual(e["text"], text[e["start"]:e["end"]])
            cases = [
                ({"long_text": "window"}, "long_text must be \"truncate\", \"windows\" or \"single_pass\""),
                ({"long_text": 1}, "long_text must be"),
                ({"long_text": "windows", "window_overlap": -1}, "window_overlap must be an integer of at least 0"),
                ({"long_text": "windows", "window_overlap": 1.5}, "window_overlap must be an integer"),
                ({"long_text": "windows", "window_overlap": 64}, "window_overlap 64 is outside [0, 63]"),
                ({"window_overlap": 4}, "window_overlap applies to long_text windows only"),
            ]
            for extra, needle in cases:
                with self.subTest(extra=extra):
                    status, got = post(server, "/gliner", {**body, **extra})
                    self.assertEqual(status, 422, got)
                    self.assertEqual(got["error_type"], "Validation")
                    self.assertIn(needle, got["error"])
            self.assertEqual(server.stop(), 0)

    def test_texts_over_max_batch_tokens_together_run_one_by_one(self):
        """Two texts that fit --max-batch-tokens alone but not together: answered (a forward each), as a server
        with room for both answers them; a text over the limit alone is still refused."""
        text = "The European Space Agency launched the Rosetta probe from Kourou in March 2004 ."
        body = {"texts": [text, text.lower()], "labels": ["organization", "location", "date"], "threshold": 0.3}
        with Server(GLINER / "span_markerV0", tokenizer=None) as server:
            status, want = post(server, "/gliner", body)
            self.assertEqual(status, 200, want)
            self.assertEqual(server.stop(), 0)
        with Server(GLINER / "span_markerV0", "--max-batch-tokens", 40, tokenizer=None) as server:
            status, got = post(server, "/gliner", body)
            self.assertEqual(status, 200, got)
            self.assertTrue(close(got, want, SAME_RUN), f"{got} != {want}")
            status, got = post(server, "/gliner", {**body, "texts": [text, " ".join([text] * 3)]})
            self.assertEqual(status, 422, got)
            self.assertIn("texts[1]: the text holds", got["error"])
            self.assertIn("more than --max-batch-tokens 40 (raise --max-batch-tokens)", got["error"])
            self.assertEqual(server.stop(), 0)

    def test_a_gliner_request_to_another_model(self):
        with Server(CLASSIFY) as server:
            status, got = post(server, "/gliner", {"text": "Ada", "labels": ["person"]})
            self.assertEqual(status, 424, got)
            self.assertIn("needs a GLiNER model", got["error"])
            self.assertEqual(got["error_type"], "Backend")
            status, info = request(server, "/info")
            self.assertNotIn("/gliner", info["routes"])
            self.assertEqual(server.stop(), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)

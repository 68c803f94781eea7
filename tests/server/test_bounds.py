"""Every request bounded before work: /tokenize behind the token limit and the concurrency gate, the answer a
request may ask for (fill-mask masks x top_k, zero-shot labels) refused before the forward with TEI's 422,
counts past 2^63 read as they are, a long rerank query named as the query, client strings cut in errors, and
the server's memory given back after large requests (VmRSS and VmHWM from /proc over a soak)."""

import json
import threading
import time
import unittest

from server_harness import CLASSIFY, FILL_MASK, RERANK, SANITIZED, ZERO_SHOT, Server, post, request


def refused(test, server, path, body, status, error_type, needle):
    got_status, got = post(server, path, body)
    test.assertEqual(got_status, status, str(got)[:300])
    test.assertEqual(got["error_type"], error_type, got)
    test.assertIn(needle, got["error"])
    return got["error"]


def memory_kb(server):
    """(VmRSS, VmHWM) of the server process in kB."""
    fields = {}
    with open(f"/proc/{server.process.pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            fields[key] = value
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


class AnswerBounds(unittest.TestCase):
    def test_fill_mask_answer_and_huge_top_k(self):
        with Server(FILL_MASK) as server:
            start = time.monotonic()
            refused(self, server, "/fill-mask", {"inputs": ["[MASK]" * 510] * 4, "top_k": 100}, 422, "Validation",
                    "inputs[0]: 510 masks x top_k 100 = 51000 predictions, each writing the text's 512 tokens, "
                    "are more than the 262144 tokens one text's answer may hold")
            self.assertLess(time.monotonic() - start, 5.0)  # was 85 s and a 641 MB answer
            refused(self, server, "/fill-mask", {"inputs": "a [MASK]", "top_k": 2**64 - 1}, 422, "Validation",
                    "top_k 18446744073709551615 is more than the 100 predictions a mask may ask for")
            refused(self, server, "/fill-mask", {"inputs": "a [MASK]", "top_k": 2**63}, 422, "Validation",
                    "top_k 9223372036854775808 is more than the 100")
            self.assertEqual(server.stop(), 0)

    def test_zero_shot_labels_and_echo(self):
        with Server(ZERO_SHOT, "--max-client-batch-size", 8, "--max-input-length", 64) as server:
            start = time.monotonic()
            labels = ",".join(f"l{i}" for i in range(100000))
            refused(self, server, "/zero-shot", {"inputs": "a", "candidate_labels": labels}, 422, "Validation",
                    "candidate_labels holds 100000 labels, more than the 8 of --max-client-batch-size")
            self.assertLess(time.monotonic() - start, 5.0)  # was 9 s and +520 MB
            message = refused(self, server, "/zero-shot", {"inputs": "a", "candidate_labels": ["x" * 100000]}, 422,
                              "Validation", "inputs with the hypothesis of '" + "x" * 64 + "...' (100000 bytes): ")
            self.assertLess(len(message), 400)
            message = refused(self, server, "/zero-shot",
                              {"inputs": "a", "candidate_labels": ["x"], "hypothesis_template": "y" * 100000}, 422,
                              "Validation", "hypothesis template \"" + "y" * 64 + "...\" (100000 bytes) has no {}")
            self.assertLess(len(message), 400)
            self.assertEqual(server.stop(), 0)

    def test_rerank_query_and_huge_top_n(self):
        with Server(RERANK, "--max-input-length", 64) as server:
            refused(self, server, "/rerank", {"query": "word " * 200, "texts": ["a", "b"]}, 422, "Validation",
                    "query: the text holds more than 64 tokens, more than --max-input-length 64")
            status, got = post(server, "/rerank", {"query": "q", "texts": ["a", "b"], "top_n": 2**64 - 1})
            self.assertEqual(status, 200, got)
            self.assertEqual(len(got), 2)
            self.assertEqual(server.stop(), 0)


class TokenizeBounds(unittest.TestCase):
    def test_tokenize_is_bounded_and_gated(self):
        with Server(CLASSIFY, "--max-batch-tokens", 1024, "--max-input-length", 512,
                    "--max-concurrent-requests", 1) as server:
            refused(self, server, "/tokenize", {"inputs": "hello " * 2000}, 422, "Validation",
                    "inputs: the text holds more than 1024 tokens, more than --max-batch-tokens 1024")
            refused(self, server, "/tokenize", {"inputs": ["a", "x" * 70000]}, 422, "Validation",
                    "inputs[1]: the text holds 70000 bytes, more than the 65536")
            refused(self, server, "/tokenize", {"inputs": ["hello " * 200] * 3}, 422, "Validation",
                    "inputs[1]: the texts up to this one hold more than 1024 tokens together, more than "
                    "--max-batch-tokens 1024")
            status, got = post(server, "/tokenize", {"inputs": "hello " * 200})
            self.assertEqual(status, 200, got)
            # While /predict requests hold the only place, /tokenize is refused as every model route is (429).
            stop = threading.Event()

            def predict_until_stopped():
                while not stop.is_set():
                    post(server, "/predict", {"inputs": [["hello " * 150]] * 8})

            busy = [threading.Thread(target=predict_until_stopped) for _ in range(3)]
            for thread in busy:
                thread.start()
            results = []
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not results:
                status, got = post(server, "/tokenize", {"inputs": "hello"})
                if status == 429:
                    results.append(got)
            stop.set()
            for thread in busy:
                thread.join()
            self.assertTrue(results, "no /tokenize request was refused while /predict held the only place")
            self.assertIn("--max-concurrent-requests", results[0]["error"])
            self.assertEqual(server.stop(), 0)


class MemoryReturned(unittest.TestCase):
    def test_rss_returns_after_large_requests(self):
        options = ("--payload-limit", 4000000, "--max-concurrent-requests", 4, "--http-threads", 8)
        with Server(CLASSIFY, *options) as server:
            self.assertEqual(post(server, "/predict", {"inputs": "hello"})[0], 200)
            model_hwm = memory_kb(server)[1]  # the model's own
            text = "hello " * 170  # 512 tokens with [CLS] and [SEP]: 32 of them fill --max-batch-tokens
            word = "Helloworld" * 190000  # 1.9 MB without a space
            large = [("/tokenize", {"inputs": [text] * 32}, 200),
                     ("/predict", {"inputs": word}, 422),  # its bytes
                     ("/tokenize", {"inputs": [word[:1000000]]}, 422),  # its tokens, before libsentencepiece
                     ("/predict", {"inputs": [[text]] * 32, "truncate": True}, 200),
                     ("/tokenize", {"inputs": [text * 10] * 32}, 422),  # the request's tokens together
                     ("/predict", {"inputs": [[word[:60000]]] * 32}, 422)]

            def soak(rounds):
                start = time.monotonic()
                for _ in range(rounds):
                    statuses = [post(server, path, body)[0] for path, body, _ in large]
                    self.assertEqual(statuses, [status for _, _, status in large])
                time.sleep(0.5)  # the trim comes 0.1 s after the last request
                return time.monotonic() - start - 0.5

            # The warm-up: every kind of request twice (the backend keeps its buffers, the worker threads their
            # stacks and malloc arenas; a second round reaches the threads the first did not start).
            soak(2)
            warm_rss = memory_kb(server)[0]
            seconds = soak(3)
            rss, hwm = memory_kb(server)
            print(f"\n18 large requests in {seconds:.1f} s; VmRSS {warm_rss // 1024} MB after the warm-up, "
                  f"{rss // 1024} MB after them; VmHWM {model_hwm // 1024} MB with the model, {hwm // 1024} MB at "
                  "the end", flush=True)
            if not SANITIZED:
                self.assertLessEqual(rss, 1.2 * warm_rss, "the memory of the large requests was kept")
                self.assertLessEqual(hwm - model_hwm, 200 * 1024, "a request raised the peak by more than 200 MB")
            self.assertEqual(server.stop(), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)

"""What a client may send wrong: every refusal is a 4xx with TEI's error body naming what was wrong, and none
of them crashes the server, stalls it, or keeps it from answering the next request."""

import json
import socket
import subprocess
import threading
import time
import unittest

from server_harness import (CLASSIFY, CLI, FILL_MASK, SAME_RUN, SPM, ZERO_SHOT, Server, close, curl, post,
                            request)

# The limits the classifier server runs with, small so that the tests can cross them cheaply.
MAX_CLIENT_BATCH = 4
PAYLOAD_LIMIT = 4096
MAX_INPUT_LENGTH = 64


class BadRequests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server(CLASSIFY, "--max-client-batch-size", MAX_CLIENT_BATCH, "--payload-limit", PAYLOAD_LIMIT,
                            "--max-input-length", MAX_INPUT_LENGTH)

    @classmethod
    def tearDownClass(cls):
        status, _ = request(cls.server, "/health")  # still healthy after everything below
        assert status == 200
        assert cls.server.stop() == 0, cls.server.stderr()

    def refused(self, status, error_type, needle, path="/predict", body=None, raw=None, method=None, use_curl=False):
        if use_curl:
            got_status, got = curl(self.server, path, body=body, raw=raw, method=method)
        else:
            got_status, got = request(self.server, path, body=body, raw=raw, method=method)
        self.assertEqual(got_status, status, got)
        self.assertIsInstance(got, dict, got)
        self.assertEqual(set(got), {"error", "error_type"})
        self.assertEqual(got["error_type"], error_type, got)
        self.assertIn(needle, got["error"])

    def test_malformed_bodies(self):
        self.refused(400, "Validation", "the request body is empty", raw=b"")
        self.refused(400, "Validation", "request body is not valid JSON", raw=b'{"inputs": ')
        self.refused(400, "Validation", "request body is not valid JSON", raw=b"inputs=hello", use_curl=True)
        self.refused(400, "Validation", "must be a JSON object, found array", raw=b'["a", "b"]')
        self.refused(400, "Validation", "is not valid UTF-8: byte 0xff", raw=b'{"inputs": "\xff"}')
        self.refused(400, "Validation", "NUL byte at offset 12", raw=b'{"inputs": "\x00"}')
        self.refused(400, "Validation", "nests deeper than 64 levels", raw=b'{"inputs": ' + b"[" * 100 + b"]" * 100 + b"}")
        self.refused(400, "Validation", "duplicate key 'inputs'", raw=b'{"inputs": "a", "inputs": "b"}')
        self.refused(400, "Validation", "not valid JSON", raw=b'{"inputs": "\\ud800"}')  # a lone surrogate
        self.refused(400, "Validation", "not valid JSON", raw=b'{"inputs": "a"} trailing')

    def test_wrong_types_and_missing_fields(self):
        self.refused(422, "Validation", "missing field 'inputs'", body={})
        self.refused(422, "Validation", "inputs must be a text, a pair", body={"inputs": 5})
        self.refused(422, "Validation", "inputs must be a text or a pair", body={"inputs": ["a", "b", "c"]})
        self.refused(422, "Validation", "inputs[1] must be a text or a pair", body={"inputs": [["a"], 5]})
        self.refused(422, "Validation", "inputs[0][0] must be a string, found integer 1", body={"inputs": [[1]]})
        self.refused(422, "Validation", "inputs[0][1] must be a string, found null", body={"inputs": [["a", None]]})
        self.refused(422, "Validation", "raw_scores must be true or false, found string", body={"inputs": "a",
                                                                                                "raw_scores": "yes"})
        self.refused(422, "Validation", 'truncation_direction must be "Left" or "Right", found string "Up"',
                     body={"inputs": "a", "truncation_direction": "Up"})
        self.refused(422, "Validation", "inputs[1] must be a string", "/tokenize", body={"inputs": ["a", 3]})
        self.refused(422, "Validation", "add_special_tokens must be true or false", "/tokenize",
                     body={"inputs": "a", "add_special_tokens": 1})
        # TEI's optional fields may be null: the default applies.
        status, got = post(self.server, "/predict", {"inputs": "a", "truncate": None, "raw_scores": None})
        self.assertEqual(status, 200, got)

    def test_empty_inputs(self):
        self.refused(400, "Empty", "inputs is an empty list", body={"inputs": []})
        self.refused(400, "Empty", "inputs is an empty list", "/tokenize", body={"inputs": []}, use_curl=True)
        status, got = post(self.server, "/predict", {"inputs": ""})  # an empty text is a text ([CLS] [SEP])
        self.assertEqual(status, 200, got)

    def test_sizes_beyond_the_limits(self):
        self.refused(413, "Validation", f"more than the {MAX_CLIENT_BATCH} a request may hold",
                     body={"inputs": [["a"]] * (MAX_CLIENT_BATCH + 1)})
        self.refused(413, "Validation", f"more than {PAYLOAD_LIMIT} bytes", raw=b'{"inputs": "' + b"a" * PAYLOAD_LIMIT
                     + b'"}')
        self.refused(413, "Validation", "--payload-limit", raw=b"x" * (PAYLOAD_LIMIT * 4), use_curl=True)
        self.refused(422, "Validation", f"inputs[1]: the text holds more than {MAX_INPUT_LENGTH} tokens",
                     body={"inputs": [["short"], ["word " * 100]]})
        status, got = post(self.server, "/predict", {"inputs": "word " * 100, "truncate": True})
        self.assertEqual(status, 200, got)

    def test_paths_and_methods(self):
        self.refused(404, "Validation", "no route POST /nope", "/nope", body={"inputs": "a"})
        self.refused(405, "Validation", "/predict takes POST, not GET", "/predict")
        self.refused(405, "Validation", "/info takes GET, not POST", "/info", body={})

    def test_broken_http_and_slow_clients_do_not_stall_the_others(self):
        def raw_exchange(payload, wait_for_answer=True):
            with socket.create_connection(("127.0.0.1", self.server.port), timeout=10) as sock:
                sock.sendall(payload)
                return sock.recv(65536).decode(errors="replace") if wait_for_answer else ""

        self.assertIn(" 400 ", raw_exchange(b"HELLO\r\n\r\n").splitlines()[0])
        # A Content-Length far beyond the limit is refused before any of the body is read.
        answer = raw_exchange(b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000000\r\n\r\n")
        self.assertIn(" 413 ", answer.splitlines()[0])
        # Clients that stop half way (headers, or a body shorter than announced) hold one connection until the
        # read timeout, and nothing else.
        stalled = []
        for payload in (b"POST /predict HTTP/1.1\r\nHost: x\r\n", b"POST /predict HTTP/1.1\r\nHost: x\r\n"
                        b"Content-Length: 100\r\n\r\n{\"inputs\""):
            sock = socket.create_connection(("127.0.0.1", self.server.port), timeout=10)
            sock.sendall(payload)
            stalled.append(sock)
        # A client that hangs up before its answer is written (the server's write then fails: no SIGPIPE death).
        body = json.dumps({"inputs": [["word " * 60]] * MAX_CLIENT_BATCH, "truncate": True}).encode()
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", self.server.port), timeout=10) as sock:
                sock.sendall(b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                             b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        start = time.monotonic()
        status, got = post(self.server, "/predict", {"inputs": "still answered"})
        self.assertEqual(status, 200, got)
        self.assertLess(time.monotonic() - start, 2.0)
        for sock in stalled:
            sock.close()

    def test_concurrent_bad_requests_leave_the_good_ones_right(self):
        status, want = post(self.server, "/predict", {"inputs": "good text"})
        self.assertEqual(status, 200)
        failures = []

        def client(n):
            for i in range(20):
                if (n + i) % 2:
                    got_status, got = post(self.server, "/predict", {"inputs": "good text"})
                    ok = got_status == 200 and close(got, want, SAME_RUN)
                else:
                    got_status, got = request(self.server, "/predict", raw=b'{"inputs": [[1, 2]]')
                    ok = got_status == 400
                if not ok:
                    failures.append((got_status, got))

        threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(failures, [])


class TaskSpecificRefusals(unittest.TestCase):
    def test_zero_shot_arguments(self):
        with Server(ZERO_SHOT) as server:
            def refused(status, error_type, needle, body):
                got_status, got = post(server, "/zero-shot", body)
                self.assertEqual((got_status, got["error_type"]), (status, error_type), got)
                self.assertIn(needle, got["error"])

            refused(422, "Validation", "missing field 'candidate_labels'", {"inputs": "a"})
            refused(400, "Empty", "candidate_labels is an empty list", {"inputs": "a", "candidate_labels": []})
            refused(400, "Empty", "candidate_labels names no label", {"inputs": "a", "candidate_labels": " , "})
            refused(422, "Validation", "has no {} where the candidate label should go",
                    {"inputs": "a", "candidate_labels": ["x"], "hypothesis_template": "No label here."})
            refused(422, "Validation", "only {} (or {0}) may stand for the label",
                    {"inputs": "a", "candidate_labels": ["x"], "hypothesis_template": "It is {name}."})
            refused(422, "Validation", "multi_label is given both at the top level and in parameters",
                    {"inputs": "a", "candidate_labels": ["x"], "multi_label": True, "parameters": {"multi_label": True}})
            status, got = post(server, "/rerank", {"query": "q", "texts": ["a"]})
            self.assertEqual(status, 424, got)
            self.assertIn("labels entailment, neutral, contradiction", got["error"])
            self.assertEqual(server.stop(), 0)

    def test_fill_mask_arguments(self):
        with Server(FILL_MASK) as server:
            for top_k, needle in ((0, "top_k must be an integer of at least 1"), (1000, "top_k 1000 is more than")):
                status, got = post(server, "/fill-mask", {"inputs": "a [MASK]", "top_k": top_k})
                self.assertEqual((status, got["error_type"]), (422, "Validation"), got)
                self.assertIn(needle, got["error"])
            self.assertEqual(server.stop(), 0)


class StartupErrors(unittest.TestCase):
    """What `flashdeberta serve` refuses to start with: one line on stderr, the CLI's exit statuses."""

    def refused(self, status, needle, *args):
        args = list(map(str, args))
        port = [] if "--port" in args else ["--port", "0"]
        result = subprocess.run([CLI, "serve", *port, *args], capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, status, result.stderr)
        self.assertEqual(len(result.stderr.splitlines()), 1, result.stderr)
        self.assertIn(needle, result.stderr)

    def test_bad_options(self):
        model = ["--model", CLASSIFY, "--tokenizer", SPM]
        self.refused(2, "missing --model")
        self.refused(2, "unknown option '--max-tokens' for 'serve'", *model, "--max-tokens", 10)
        self.refused(2, "--port '70000' is not an integer in [0, 65535]", *model, "--port", 70000)
        self.refused(2, "the eigen backend computes in fp32", *model, "--dtype", "fp16")
        self.refused(2, "--max-input-length 512 (max_position_embeddings of config.json) is more than "
                        "--max-batch-tokens 100", *model, "--max-batch-tokens", 100)
        self.refused(2, "--http-threads 4 must exceed --max-concurrent-requests 4", *model, "--http-threads", 4,
                     "--max-concurrent-requests", 4)
        self.refused(1, "config.json", "--model", "/nonexistent/model")

    def test_a_port_in_use(self):
        with Server(CLASSIFY) as server:
            self.refused(1, f"cannot listen on 127.0.0.1:{server.port}", "--model", CLASSIFY, "--tokenizer", SPM,
                         "--port", server.port)
            self.assertEqual(server.stop(), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)

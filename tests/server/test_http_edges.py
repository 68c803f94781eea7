"""HTTP/1.1 at its edges, on raw sockets: framing (Content-Length, chunked, 411), keep-alive, pipelining and
half-close, the limits on headers, bodies and what a Content-Encoding inflates to, deadlines that slow clients
cannot stretch, thousands of idle connections on a few threads, and a SIGTERM that no client can hold up."""

import gzip
import json
import resource
import signal
import socket
import threading
import time
import unittest
import zlib

import subprocess

from server_harness import CLASSIFY, CLI, Server, metric, post, request

PAYLOAD_LIMIT = 1000000
HEADER_TIMEOUT = 2
BODY_TIMEOUT = 2
PREDICT = b'{"inputs": "a short text"}'


def proc_status(pid, key):
    """A field of /proc/PID/status as an integer (kB for sizes)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)


def raise_open_files_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def connect(server, timeout=10):
    return socket.create_connection(("127.0.0.1", server.port), timeout=timeout)


def post_bytes(path, body, extra=b""):
    return (b"POST " + path + b" HTTP/1.1\r\nHost: x\r\n" + extra + b"Content-Length: " + str(len(body)).encode()
            + b"\r\n\r\n" + body)


class Reader:
    """HTTP/1.1 answers read one after the other from a socket."""

    def __init__(self, sock):
        self.file = sock.makefile("rb")

    def answer(self):
        """(status, headers with lower-case names, body), or None at the end of the stream."""
        line = self.file.readline()
        if not line:
            return None
        status = int(line.split()[1])
        headers = {}
        while True:
            line = self.file.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.decode().partition(":")
            headers[name.strip().lower()] = value.strip()
        body = self.file.read(int(headers.get("content-length", "0")))
        return status, headers, body


def exchange(server, payload, shut_write=False):
    """Sends `payload` (bytes, or an iterable of bytes sent in turn until the server stops reading), then reads
    one answer: (status, headers, body as JSON or text)."""
    with connect(server) as sock:
        try:
            for piece in [payload] if isinstance(payload, bytes) else payload:
                sock.sendall(piece)
            if shut_write:
                sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server refused before the end and closed; its answer is already here
        got = Reader(sock).answer()
    assert got is not None, "no answer"
    status, headers, body = got
    if headers.get("content-type", "").startswith("application/json"):
        body = json.loads(body)
    return status, headers, body


class HttpEdges(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server(CLASSIFY, "--payload-limit", PAYLOAD_LIMIT, "--header-timeout", HEADER_TIMEOUT,
                            "--body-timeout", BODY_TIMEOUT)

    @classmethod
    def tearDownClass(cls):
        status, _ = request(cls.server, "/health")
        assert status == 200
        assert cls.server.stop() == 0, cls.server.stderr()

    def refused(self, status, needle, payload, error_type="Validation"):
        got_status, headers, got = exchange(self.server, payload)
        self.assertEqual(got_status, status, got)
        self.assertEqual(set(got), {"error", "error_type"}, got)
        self.assertEqual(got["error_type"], error_type, got)
        self.assertIn(needle, got["error"])
        return headers

    def test_pipelined_requests_get_their_answers_in_order(self):
        with connect(self.server) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" + post_bytes(b"/predict", PREDICT)
                         + b"GET /info HTTP/1.1\r\nHost: x\r\n\r\n")
            reader = Reader(sock)
            first, second, third = reader.answer(), reader.answer(), reader.answer()
        self.assertEqual((first[0], first[2]), (200, b""))
        self.assertEqual(second[0], 200)
        self.assertIsInstance(json.loads(second[2]), list)
        self.assertEqual(third[0], 200)
        self.assertIn("model_id", json.loads(third[2]))

    def test_half_closed_client_gets_its_answer(self):
        status, _, got = exchange(self.server, post_bytes(b"/predict", PREDICT), shut_write=True)
        self.assertEqual(status, 200, got)

    def test_keep_alive_serves_many_requests_on_one_connection(self):
        with connect(self.server) as sock:
            reader = Reader(sock)
            for _ in range(20):
                sock.sendall(post_bytes(b"/predict", PREDICT))
                self.assertEqual(reader.answer()[0], 200)

    def test_content_length_must_be_one_decimal_number(self):
        body = b'{"inputs": "a"}'
        for value in (b"14abc", b"+15", b"15, 15", b"abc", b"-1", b""):
            self.refused(400, "Content-Length", b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: " + value
                         + b"\r\n\r\n" + body)
        for lengths in (b"Content-Length: 15\r\nContent-Length: 15\r\n", b"Content-Length: 15\r\nContent-Length: 3\r\n"):
            self.refused(400, "Content-Length", b"POST /predict HTTP/1.1\r\nHost: x\r\n" + lengths + b"\r\n" + body)

    def test_chunked_alone_is_read_and_with_content_length_refused(self):
        chunked = b"POST /predict HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
        body = b"5\r\n" + PREDICT[:5] + b"\r\n" + hex(len(PREDICT) - 5)[2:].encode() + b"\r\n" + PREDICT[5:] + b"\r\n0\r\n\r\n"
        status, _, got = exchange(self.server, chunked + b"\r\n" + body)
        self.assertEqual(status, 200, got)
        self.refused(400, "Transfer-Encoding", chunked + b"Content-Length: 10\r\n\r\n" + body)
        self.refused(400, "Transfer-Encoding", b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n" + body)
        self.refused(501, "Transfer-Encoding 'gzip, chunked'", b"POST /predict HTTP/1.1\r\nHost: x\r\n"
                     b"Transfer-Encoding: gzip, chunked\r\n\r\n" + body)

    def test_post_without_a_length_is_411_and_counted(self):
        _, text = request(self.server, "/metrics")
        before = metric(text, "flashdeberta_requests_total", 'route="/predict",status="411"') or 0
        self.refused(411, "needs Content-Length", b"POST /predict HTTP/1.1\r\nHost: x\r\n\r\n" + PREDICT)
        _, text = request(self.server, "/metrics")
        self.assertEqual(metric(text, "flashdeberta_requests_total", 'route="/predict",status="411"'), before + 1)

    def test_expect_100_continue_is_answered_before_the_body(self):
        with connect(self.server) as sock:
            sock.sendall(b"POST /predict HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: "
                         + str(len(PREDICT)).encode() + b"\r\n\r\n")
            reader = Reader(sock)
            self.assertEqual(reader.answer()[0], 100)
            sock.sendall(PREDICT)
            self.assertEqual(reader.answer()[0], 200)

    def test_header_count_and_size_are_bounded(self):
        many = b"".join(b"X-Field-%d: v\r\n" % i for i in range(200))
        self.refused(431, "201 header fields", b"GET /health HTTP/1.1\r\nHost: x\r\n" + many + b"\r\n")
        line = b"X-Big: " + b"a" * 65536
        # a header line of 64 MB, sent until the server stops reading
        self.refused(431, "bytes", (piece for piece in [b"GET /health HTTP/1.1\r\nHost: x\r\n"] + [line] * 1024))

    def test_chunked_body_over_the_limit_is_refused_at_once_with_bounded_memory(self):
        pid = self.server.process.pid
        before = proc_status(pid, "VmHWM")
        chunk = b"x" * 65536
        pieces = [b"POST /predict HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"]
        pieces += [b"10000\r\n" + chunk + b"\r\n"] * 1600  # 100 MB
        start = time.monotonic()
        self.refused(413, "--payload-limit", iter(pieces))
        # small chunks too: the limit applies to the bytes received, not to one chunk's size
        self.refused(413, "--payload-limit", iter([pieces[0]] + [b"400\r\n" + b"x" * 1024 + b"\r\n"] * 2000))
        self.assertLess(time.monotonic() - start, 5)
        self.assertLess(proc_status(pid, "VmHWM") - before, 200 * 1024)

    def test_encoded_bodies_are_inflated_within_the_limit(self):
        for encoding, body in (("gzip", gzip.compress(PREDICT)), ("deflate", zlib.compress(PREDICT))):
            status, got = post(self.server, "/predict", None, raw=body, headers={"Content-Encoding": encoding})
            self.assertEqual(status, 200, got)
        self.refused(415, "Content-Encoding 'br'", post_bytes(b"/predict", PREDICT, b"Content-Encoding: br\r\n"))
        self.refused(400, "not whole gzip", post_bytes(b"/predict", gzip.compress(PREDICT)[:-6],
                                                          b"Content-Encoding: gzip\r\n"))
        # A gzip bomb: about 500 KB that inflates to 500 MB, refused as the inflated size crosses the limit.
        compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        zeros = bytes(1 << 20)
        bomb = b"".join(compressor.compress(zeros) for _ in range(500)) + compressor.flush()
        self.assertLess(len(bomb), PAYLOAD_LIMIT)
        pid = self.server.process.pid
        before = proc_status(pid, "VmHWM")
        start = time.monotonic()
        self.refused(413, "inflates (Content-Encoding gzip) to more than",
                     post_bytes(b"/predict", bomb, b"Content-Encoding: gzip\r\n"))
        self.assertLess(time.monotonic() - start, 2)
        self.assertLess(proc_status(pid, "VmHWM") - before, 200 * 1024)

    def test_range_is_ignored_and_any_content_type_is_read_as_json(self):
        status, headers, got = exchange(self.server, post_bytes(b"/predict", PREDICT,
                                                                 b"Range: bytes=0-,0-,0-,0-,0-\r\n"))
        self.assertEqual(status, 200, got)
        self.assertTrue(headers["content-type"].startswith("application/json"), headers)
        # More than 8 KB sent as curl -d and urllib send it (application/x-www-form-urlencoded).
        body = json.dumps({"inputs": "word " * 3000, "truncate": True}).encode()
        status, _, got = exchange(self.server, post_bytes(
            b"/predict", body, b"Content-Type: application/x-www-form-urlencoded\r\n"))
        self.assertEqual(status, 200, got)

    def test_wrong_method_names_the_allowed_ones(self):
        headers = self.refused(405, "/predict takes POST, not GET", b"GET /predict HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertEqual(headers["allow"], "POST")

    def test_head_is_get_without_the_body(self):
        with connect(self.server) as sock:
            sock.sendall(b"HEAD /info HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            file = sock.makefile("rb")
            self.assertIn(b" 200 ", file.readline())
            length = None
            while (line := file.readline()) != b"\r\n":
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            self.assertGreater(length, 0)
            self.assertIn(b" 200 ", file.readline())  # the next answer follows the header at once

    def test_slow_headers_and_bodies_are_cut_at_their_deadline(self):
        tricklers = [connect(self.server) for _ in range(50)]
        slow_body = connect(self.server)
        slow_body.sendall(b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        start = time.monotonic()
        payload = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 1000
        worst = 0.0
        for i in range(int((HEADER_TIMEOUT + 1) / 0.25)):
            for sock in tricklers:
                try:
                    sock.sendall(payload[i:i + 1])
                except OSError:
                    pass
            try:
                slow_body.sendall(b" ")
            except OSError:
                pass
            t = time.monotonic()
            status, _ = request(self.server, "/health")
            worst = max(worst, time.monotonic() - t)
            self.assertEqual(status, 200)
            time.sleep(0.25)
        self.assertLess(worst, 0.5)
        for sock in tricklers + [slow_body]:
            got = Reader(sock).answer()
            self.assertIsNotNone(got)
            self.assertEqual(got[0], 408, got)
            sock.close()
        self.assertLess(time.monotonic() - start, HEADER_TIMEOUT + 3)

    def test_idle_connections_cost_no_thread(self):
        count = 2000
        if raise_open_files_limit() < count + 100:
            self.skipTest("too few file descriptors for the test")
        idle = [connect(self.server) for _ in range(count)]
        try:
            for sock in idle[:5]:  # some of them keep-alive connections that answered once
                sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                self.assertEqual(Reader(sock).answer()[0], 200)
            time.sleep(0.5)
            start = time.monotonic()
            status, _ = request(self.server, "/health")
            self.assertEqual(status, 200)
            self.assertLess(time.monotonic() - start, 0.5)
            self.assertLess(proc_status(self.server.process.pid, "Threads"), 50)
            sock = idle[-1]
            sock.sendall(post_bytes(b"/predict", PREDICT))
            self.assertEqual(Reader(sock).answer()[0], 200)
        finally:
            for sock in idle:
                sock.close()

    def test_slow_clients_do_not_slow_a_normal_request(self):
        stop = threading.Event()
        slow = [connect(self.server) for _ in range(200)]

        def trickle():
            payload = b"POST /predict HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100
            i = 0
            while not stop.wait(1.0 / 5):
                for sock in slow:
                    try:
                        sock.sendall(payload[i:i + 1])
                    except OSError:
                        pass
                i += 1

        thread = threading.Thread(target=trickle)
        thread.start()
        try:
            times = []
            with connect(self.server) as sock:
                reader = Reader(sock)
                for _ in range(100):
                    t = time.monotonic()
                    sock.sendall(post_bytes(b"/predict", PREDICT))
                    self.assertEqual(reader.answer()[0], 200)
                    times.append(time.monotonic() - t)
                    time.sleep(0.01)
            times.sort()
            self.assertLess(times[98], 0.1, times[-5:])
        finally:
            stop.set()
            thread.join()
            for sock in slow:
                sock.close()


class BufferedBodies(unittest.TestCase):
    """--max-buffered-bytes: the bodies held at once over all connections, counted from their headers on."""

    def test_a_body_that_would_pass_the_bound_is_refused_before_it_is_read(self):
        limit = 100000
        with Server(CLASSIFY, "--payload-limit", limit, "--max-buffered-bytes", 2 * limit + 1000) as server:
            body = b'{"inputs": "a short text"' + b" " * (limit - 26) + b"}"
            self.assertEqual(len(body), limit)
            head = b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: " + str(limit).encode() + b"\r\n\r\n"
            holding = [connect(server) for _ in range(2)]
            for sock in holding:
                sock.sendall(head + body[:1000])  # announced whole, sent in part: counted whole
            time.sleep(0.2)
            start = time.monotonic()
            status, _, got = exchange(server, head + body)
            self.assertLess(time.monotonic() - start, 2)
            self.assertEqual(status, 429, got)
            self.assertEqual(got["error_type"], "Overloaded", got)
            self.assertIn("--max-buffered-bytes", got["error"])
            self.assertIn(str(2 * limit), got["error"])
            # a small body fits beside them, and /health needs none
            self.assertEqual(exchange(server, post_bytes(b"/predict", PREDICT))[0], 200)
            self.assertEqual(request(server, "/health")[0], 200)
            # once the held bodies are answered their bytes are free again
            for sock in holding:
                sock.sendall(body[1000:])
                self.assertEqual(Reader(sock).answer()[0], 200)
                sock.close()
            self.assertEqual(exchange(server, head + body)[0], 200)
            self.assertEqual(server.stop(), 0, server.stderr())

    def test_a_bound_below_the_payload_limit_is_a_usage_error(self):
        result = subprocess.run([CLI, "serve", "--model", str(CLASSIFY), "--payload-limit", "100000",
                                 "--max-buffered-bytes", "99999"], capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn("--max-buffered-bytes 99999 is below --payload-limit 100000", result.stderr)


class Stop(unittest.TestCase):
    def test_sigterm_exits_at_once_whatever_the_clients_do(self):
        with Server(CLASSIFY, "--header-timeout", 60, "--body-timeout", 60) as server:
            idle = [connect(server) for _ in range(50)]
            trickling = [connect(server) for _ in range(50)]
            for sock in trickling:
                sock.sendall(b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
            unread = connect(server)  # asks and never reads: its answers fill the socket's buffers
            unread.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            big = post_bytes(b"/tokenize", json.dumps({"inputs": ["word " * 400] * 30}).encode())
            for _ in range(2):
                unread.sendall(big)
            in_flight = connect(server)
            in_flight.sendall(post_bytes(b"/predict", json.dumps({"inputs": [["word " * 60]] * 32,
                                                                      "truncate": True}).encode()))
            time.sleep(0.2)
            start = time.monotonic()
            server.process.send_signal(signal.SIGTERM)
            got = Reader(in_flight).answer()
            status = server.process.wait(timeout=10)  # not server.stop(): a second signal ends it at once
            self.assertLess(time.monotonic() - start, 5)
            self.assertEqual(server.stop(), 0, server.stderr())
            self.assertEqual(status, 0)
            self.assertIsNotNone(got)
            self.assertEqual(got[0], 200, got)
            for sock in idle + trickling + [unread, in_flight]:
                sock.close()


if __name__ == "__main__":
    unittest.main()

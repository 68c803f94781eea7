"""Helpers for the tests of `flashdeberta serve`: start the server on a free loopback port, talk to it with
real clients (Python's urllib and curl), and run the CLI for the answers the server must give.

The CLI comes from $FLASHDEBERTA_CLI (CTest sets it), the fixtures from this source tree."""

import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

CLI = os.environ.get("FLASHDEBERTA_CLI", "flashdeberta")


def _sanitized(program):
    """Whether `program` carries AddressSanitizer's runtime (the clang test build links it in statically)."""
    try:
        return b"AddressSanitizer" in Path(program).read_bytes()
    except OSError:
        return False


# Under AddressSanitizer the allocator is ASan's, whose quarantine keeps freed memory by design: the tests that
# measure the server's memory check only what they can there.
SANITIZED = _sanitized(CLI)
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SPM = FIXTURES / "tokenizers" / "spm"
CLASSIFY = FIXTURES / "pipelines" / "classify"
FILL_MASK = FIXTURES / "pipelines" / "fill_mask"
NER = FIXTURES / "pipelines" / "ner"
QA = FIXTURES / "pipelines" / "qa"
RERANK = FIXTURES / "pairs" / "rerank"
ZERO_SHOT = FIXTURES / "pairs" / "zero_shot"

# A text's scores when it shares a forward pass with other texts, against its scores alone: the GEMMs of a
# packed batch take other blockings (and float32 roundings) than those of one text, so scores move by a few
# ulps (on the fixtures: up to 3e-7 of a probability, 1.1e-6 of a logit relative to its size). A relative
# bound (see close()); labels and their order must be equal.
SAME_RUN = 1e-5

# Every server of the tests runs the forward on the threads of this many cores (the CI machine has 2).
THREADS = "2"
START_TIMEOUT_S = 60


class Server:
    """`flashdeberta serve` on 127.0.0.1 and a port the system picks, read from its start line."""

    def __init__(self, model, *extra, tokenizer=SPM):
        args = [CLI, "serve", "--model", str(model), "--port", "0", "--threads", THREADS]
        if tokenizer is not None:
            args += ["--tokenizer", str(tokenizer)]
        args += [str(a) for a in extra]
        self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True)
        self.stderr_lines = []
        deadline = time.monotonic() + START_TIMEOUT_S
        self.port = None
        while self.port is None:
            line = self.process.stderr.readline()
            if not line:
                raise RuntimeError("the server ended before it listened:\n" + "".join(self.stderr_lines)
                                   + f"(exit status {self.process.wait()})")
            self.stderr_lines.append(line)
            match = re.search(r" on http://127\.0\.0\.1:(\d+) ", line)
            if match:
                self.port = int(match.group(1))
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not start in time")
        # Keep reading stderr so the server never blocks on a full pipe.
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self):
        for line in self.process.stderr:
            self.stderr_lines.append(line)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def stop(self, sig=signal.SIGTERM, timeout=60):
        """Sends `sig` (None: none, the caller has signalled) and returns the exit status."""
        if sig is not None and self.process.poll() is None:
            self.process.send_signal(sig)
        status = self.process.wait(timeout=timeout)
        self._reader.join(timeout=5)
        self.process.stderr.close()
        return status

    def stderr(self):
        return "".join(self.stderr_lines)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._reader.join(timeout=5)
        self.process.stderr.close()


def request(server, path, body=None, method=None, raw=None, headers=None, timeout=60):
    """One request with urllib: (status, parsed JSON body or text). `body` is sent as JSON, `raw` as is."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(server.url + path, data=data, method=method or ("POST" if data is not None else "GET"))
    req.add_header("Content-Type", "application/json")
    for key, value in (headers or {}).items():
        req.add_header(key, value)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:
            return response.status, decode(response.read(), response.headers.get("Content-Type", ""))
    except urllib.error.HTTPError as error:
        return error.code, decode(error.read(), error.headers.get("Content-Type", ""))


def decode(payload, content_type):
    if content_type.startswith("application/json"):
        return json.loads(payload)
    return payload.decode()


def post(server, path, body, **kwargs):
    return request(server, path, body=body, **kwargs)


def curl(server, path, body=None, raw=None, method=None):
    """The same request with curl: (status, parsed JSON body or text)."""
    args = ["curl", "-sS", "-o", "-", "-w", "\n%{http_code}", "-H", "Content-Type: application/json"]
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    if data is not None:
        args += ["--data-binary", "@-"]
    if method:
        args += ["-X", method]
    result = subprocess.run(args + [server.url + path], input=data, capture_output=True, check=True)
    text, _, status = result.stdout.decode().rpartition("\n")
    try:
        return int(status), json.loads(text)
    except json.JSONDecodeError:
        return int(status), text


def cli_lines(*args, stdin=None):
    """The CLI's JSON lines for `args`."""
    command, *rest = [str(a) for a in args]
    result = subprocess.run([CLI, command, "--threads", THREADS, *rest], input=stdin, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"flashdeberta {' '.join(map(str, args))} failed: {result.stderr}")
    return [json.loads(line) for line in result.stdout.splitlines()]


def metric(text, name, labels=""):
    """The value of one sample of Prometheus text, or None."""
    pattern = re.escape(name) + (r"\{" + re.escape(labels) + r"\}" if labels else "") + r" (\S+)$"
    for line in text.splitlines():
        match = re.match(pattern, line)
        if match:
            return float(match.group(1))
    return None


def close(a, b, tolerance):
    """Whether two JSON answers are equal: numbers within `tolerance` times the larger of 1 and their magnitude,
    everything else exactly."""
    if isinstance(a, float) or isinstance(b, float):
        return (isinstance(a, (int, float)) and isinstance(b, (int, float))
                and abs(a - b) <= tolerance * max(1.0, abs(a), abs(b)))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y, tolerance) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k], tolerance) for k in a)
    return a == b


def make_backbone(scratch):
    """The classify fixture's weights under a config naming the backbone alone: an embedding model."""
    backbone = Path(scratch) / "backbone"
    backbone.mkdir()
    config = json.loads((CLASSIFY / "config.json").read_text())
    config["architectures"] = ["DebertaV2Model"]
    (backbone / "config.json").write_text(json.dumps(config))
    (backbone / "model.safetensors").symlink_to(CLASSIFY / "model.safetensors")
    return backbone, config

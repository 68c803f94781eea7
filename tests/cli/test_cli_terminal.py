"""The pipeline commands at a terminal (a pseudo-terminal from Python's pty): the progress bar stays on screen
while batches run, and a command reading texts typed at the terminal says so instead of waiting silently."""

import os
import pty
import select
import subprocess
import time
import unittest
from pathlib import Path

CLI = os.environ.get("FLASHDEBERTA_CLI", "flashdeberta")
CLASSIFY = Path(__file__).resolve().parent.parent / "fixtures" / "pipelines" / "classify"
SPM = Path(__file__).resolve().parent.parent / "fixtures" / "tokenizers" / "spm"
BASE = [CLI, "classify", "--model", str(CLASSIFY), "--tokenizer", str(SPM), "--threads", "1"]


def read_until(fd, needle, timeout=30):
    """What the terminal shows until `needle` appears (or the program closes it)."""
    shown = b""
    deadline = time.monotonic() + timeout
    while needle not in shown and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the program closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    return shown


class Terminal(unittest.TestCase):
    def test_the_progress_bar_is_drawn_again_after_every_batch(self):
        # TEXT arguments with stdin and stderr at a terminal: the bar is on by default. It is taken off its line
        # before each batch's output and must come back at once, not after 100 ms.
        primary, secondary = pty.openpty()
        texts = [f"text number {i}" for i in range(12)]
        proc = subprocess.Popen(BASE + ["--batch-size", "1", *texts], stdin=secondary, stdout=subprocess.PIPE,
                                stderr=secondary)
        os.close(secondary)
        shown = read_until(primary, b"12/12 texts")
        out, _ = proc.communicate(timeout=60)
        os.close(primary)
        self.assertEqual(proc.returncode, 0, shown)
        self.assertEqual(len(out.splitlines()), 12)
        # one drawing per batch: 1/12 ... 12/12
        for done in range(1, 13):
            self.assertIn(f"] {done}/12 texts".encode(), shown)

    def test_reading_from_the_terminal_says_so(self):
        primary, secondary = pty.openpty()
        proc = subprocess.Popen(BASE, stdin=secondary, stdout=subprocess.PIPE, stderr=secondary)
        os.close(secondary)
        shown = read_until(primary, b"Ctrl-D")
        self.assertIn(b"flashdeberta: reading texts from the terminal, one per line; Ctrl-D ends", shown)
        os.write(primary, b"a typed text\n\x04")
        out, _ = proc.communicate(timeout=60)
        os.close(primary)
        self.assertEqual(proc.returncode, 0)
        self.assertIn(b'"text":"a typed text"', out)

    def test_no_hint_when_stdin_is_not_a_terminal(self):
        r = subprocess.run(BASE, input=b"piped\n", capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, b"")


if __name__ == "__main__":
    unittest.main()

"""ZeroModels' Keras directories (tests/fixtures/zeromodels) through the CLI's commands: `run` with every head the
files hold, matching ZeroModels' outputs at the valid positions; `bench`, `classify` and `fill-mask`; `convert`'s
refusals (an output directory in the way, a malformed file), each one line `flashdeberta: error:` and exit 1."""

import json
import os
import shutil
import struct
import subprocess
import tempfile
import unittest
from pathlib import Path

CLI = os.environ.get("FLASHDEBERTA_CLI", "flashdeberta")
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
ZEROMODELS = FIXTURES / "zeromodels"
SPM = FIXTURES / "tokenizers" / "spm"
FORMATS = {"F32": "f", "I64": "q"}


def read_safetensors(path):
    """{name: (shape, flat list of values)} (the Python the CLI tests run has no numpy)."""
    data = Path(path).read_bytes()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name != "__metadata__":
            begin, end = info["data_offsets"]
            count = (end - begin) // struct.calcsize(FORMATS[info["dtype"]])
            out[name] = (info["shape"], struct.unpack_from(f"<{count}{FORMATS[info['dtype']]}", data, 8 + n + begin))
    return out


def nested(shape, flat):
    if len(shape) == 1:
        return list(flat)
    step = len(flat) // shape[0]
    return [nested(shape[1:], flat[i * step:(i + 1) * step]) for i in range(shape[0])]


def worst_error(got, want, mask, per_token):
    """Largest |got - want| over valid rows: per-token fields row by mask position, others whole."""
    (shape, values), (want_shape, wanted) = got, want
    positions = len(mask) if per_token else 1
    width = len(wanted) // positions
    worst = 0.0
    for p in range(positions):
        if per_token and mask[p] == 0:
            continue
        for k in range(width):
            worst = max(worst, abs(values[p * width + k] - wanted[p * width + k]))
    return worst


def cli(*args):
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=300)


class ZeroModelsThroughTheCli(unittest.TestCase):
    def test_run_matches_zeromodels_for_every_head(self):
        for case in sorted(p for p in ZEROMODELS.iterdir() if (p / "expected.safetensors").exists()):
            with self.subTest(case=case.name), tempfile.TemporaryDirectory() as work:
                expected = read_safetensors(case / "expected.safetensors")
                mask_shape, mask = expected["attention_mask"]
                (Path(work) / "in.json").write_text(json.dumps(
                    {"input_ids": nested(*expected["input_ids"]), "attention_mask": nested(mask_shape, mask)}))
                for head in ("auto", "base"):
                    out = Path(work) / f"{head}.safetensors"
                    done = cli("run", "--model", case, "--input", Path(work) / "in.json", "--output", out,
                               "--head", head, "--threads", "2")
                    self.assertEqual(done.returncode, 0, done.stderr)
                    got = read_safetensors(out)
                    for field in got:
                        if field not in expected or field in ("input_ids", "attention_mask"):
                            continue
                        want_shape = expected[field][0]
                        per_token = field == "last_hidden_state" or want_shape[:len(mask_shape)] == mask_shape
                        err = worst_error(got[field], expected[field], mask, per_token)
                        self.assertLessEqual(err, 1e-4 if field == "logits" and len(want_shape) == 3 else 1e-5,
                                             f"{case.name} --head {head} {field}")

    def test_bench_classify_and_fill_mask(self):
        done = cli("bench", "--model", ZEROMODELS / "v2_base", "--batch", 2, "--seq-len", 16, "--repeat", 1,
                   "--threads", "2", "--json")
        self.assertEqual(done.returncode, 0, done.stderr)
        done = cli("classify", "--model", ZEROMODELS / "v3_seq_cls", "--tokenizer", SPM, "--threads", "2", "a b c")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(sorted(r["label"] for r in json.loads(done.stdout)["labels"]), ["LABEL_0", "LABEL_1", "LABEL_2"])
        done = cli("fill-mask", "--model", ZEROMODELS / "v3_masked_lm", "--tokenizer", SPM, "--top-k", 2, "--threads",
                   "2", "a b [MASK] c")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(len(json.loads(done.stdout)["masks"][0]), 2)

    def test_convert_refusals_leave_nothing_behind(self):
        with tempfile.TemporaryDirectory() as work:
            taken = Path(work) / "taken"
            taken.mkdir()
            (taken / "keep.txt").write_text("mine")
            done = cli("convert", "--from", ZEROMODELS / "v3_base", "--to", taken)
            self.assertEqual(done.returncode, 1)
            self.assertEqual(done.stderr.count("\n"), 1, done.stderr)
            self.assertIn("exists and is not an empty directory", done.stderr)
            self.assertEqual(os.listdir(taken), ["keep.txt"])
            broken = Path(work) / "broken"
            shutil.copytree(ZEROMODELS / "v3_base", broken)
            weights = broken / "model.weights.h5"
            weights.write_bytes(weights.read_bytes()[:4096])
            done = cli("convert", "--from", broken, "--to", Path(work) / "out")
            self.assertEqual(done.returncode, 1)
            self.assertTrue(done.stderr.startswith("flashdeberta: error: "), done.stderr)
            # Cut inside its global heap: refused before libhdf5 decodes it.
            self.assertIn("broken/model.weights.h5: the global heap collection at byte 2048 declares 4096 bytes, "
                          "beyond the file's end", done.stderr)
            self.assertEqual(done.stderr.count("\n"), 1, done.stderr)
            self.assertEqual(sorted(os.listdir(work)), ["broken", "taken"])


if __name__ == "__main__":
    unittest.main(verbosity=2)

"""Shared helpers of the Python suite: fixture paths, a safetensors reader, the C++ CLI, comparisons.

Run from the repository root, with the built package on PYTHONPATH and, for the comparisons with the
C++ program, FLASHDEBERTA_CLI naming the built `flashdeberta` binary:

    PYTHONPATH=build-py/python FLASHDEBERTA_CLI=build/bin/flashdeberta python3 -m pytest tests/python

The expected values come from Hugging Face transformers 5.17 on another machine
(tests/fixtures/make_*.py); nothing here needs torch or transformers.
"""
import json
import os
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
HEADS = FIXTURES / "heads"
PIPELINES = FIXTURES / "pipelines"
TOKENIZERS = FIXTURES / "tokenizers"
SPM = TOKENIZERS / "spm"  # the tokenizer of every pipeline fixture (they ship without one)
MODELS = REPO / "models"

# float32 against HF's float64 (rounded to float32): the bound the C++ golden tests hold too.
TOLERANCE = 1e-5

# safetensors dtype names -> numpy (little-endian, as the format mandates).
_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
           "U8": "u1", "BOOL": "?"}


def read_safetensors(path):
    """{name: numpy array} of a .safetensors file: 8-byte little-endian header length, JSON header, data."""
    data = Path(path).read_bytes()
    (length,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + length])
    base = 8 + length
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = np.dtype(_DTYPES[info["dtype"]])
        begin, end = info["data_offsets"]
        count = int(np.prod(info["shape"], dtype=np.int64))
        assert end - begin == count * dtype.itemsize, f"{path}: tensor {name} has {end - begin} bytes for {info}"
        out[name] = np.frombuffer(data, dtype=dtype, count=count, offset=base + begin).reshape(info["shape"]).copy()
    return out


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def max_abs_error(ours, theirs, mask=None):
    """Largest |ours - theirs|; with `mask` (the input's shape) only where it is 1 (HF leaves values at
    padded positions that no valid token depends on; we write zeros there). NaN counts as infinite."""
    ours = np.asarray(ours, dtype=np.float64)
    theirs = np.asarray(theirs, dtype=np.float64)
    assert ours.shape == theirs.shape, f"shape {ours.shape}, HF has {theirs.shape}"
    diff = np.abs(ours - theirs)
    if mask is not None:
        diff = diff[np.asarray(mask) == 1]
    diff = np.where(np.isnan(diff), np.inf, diff)
    return float(diff.max()) if diff.size else 0.0


def per_token(value, mask):
    """Whether an output is laid out per input position (its leading dims are the input's shape)."""
    return value.ndim >= mask.ndim and value.shape[:mask.ndim] == mask.shape


@pytest.fixture(scope="session")
def fd():
    """The package under test. A missing package is an error of the setup, not a reason to skip."""
    try:
        import flashdeberta
    except ImportError as e:
        pytest.fail(f"cannot import flashdeberta ({e}); build it (build-py/python) and set PYTHONPATH", pytrace=False)
    return flashdeberta


@pytest.fixture(scope="session")
def cli():
    """Path of the C++ `flashdeberta` program, from FLASHDEBERTA_CLI; the comparisons skip without it."""
    path = os.environ.get("FLASHDEBERTA_CLI")
    if not path:
        pytest.skip("FLASHDEBERTA_CLI is not set (path of the built flashdeberta program)")
    if not os.access(path, os.X_OK):
        pytest.fail(f"FLASHDEBERTA_CLI={path} is not an executable file", pytrace=False)
    return path


def run_cli(cli_path, args, stdin=None, timeout=120):
    """Runs the C++ CLI; returns (exit status, stdout, stderr)."""
    r = subprocess.run([cli_path, *map(str, args)], input=stdin, capture_output=True, text=True,
                       encoding="utf-8", timeout=timeout)
    return r.returncode, r.stdout, r.stderr


def json_lines(text):
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture(scope="session")
def spm_lower_punct_dir(tmp_path_factory):
    """tokenizers/spm_lower_punct holds the configs only; its model is spm/spm.model (as the C++ tests do)."""
    d = tmp_path_factory.mktemp("spm_lower_punct")
    for f in (TOKENIZERS / "spm_lower_punct").iterdir():
        if f.name != "expected.json":
            shutil.copy(f, d / f.name)
    shutil.copy(SPM / "spm.model", d / "spm.model")
    return d


def copy_checkpoint(source, dest, config_edit=None):
    """A scratch copy of a checkpoint directory, config.json passed through `config_edit(dict)`."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for f in Path(source).iterdir():
        if f.is_file() and f.name != "expected.json":
            shutil.copy(f, dest / f.name)
    if config_edit is not None:
        config = read_json(dest / "config.json")
        config_edit(config)
        (dest / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return dest

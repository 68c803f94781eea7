"""import flashdeberta bounds how long its OpenMP workers spin (flashdeberta/_openmp_wait.py) unless the user
chose a wait policy, and sets nothing where libgomp was loaded before it (the setting could not take effect)."""

import os
import re
import subprocess
import sys

import pytest


def spin_count_read(code, **variables):
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(variables, OMP_DISPLAY_ENV="verbose")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return re.findall(r"GOMP_SPINCOUNT = '(\d+)'", done.stderr), done.stdout.strip()


def test_import_bounds_the_spin():
    counts, set_to = spin_count_read("import os, flashdeberta; print(os.environ.get('GOMP_SPINCOUNT'))")
    assert counts == ["10000"] and set_to == "10000"


def test_the_users_choice_wins():
    counts, _ = spin_count_read("import flashdeberta", GOMP_SPINCOUNT="123")
    assert counts == ["123"]
    counts, set_to = spin_count_read("import os, flashdeberta; print(os.environ.get('GOMP_SPINCOUNT'))",
                                     OMP_WAIT_POLICY="passive")
    assert set_to == "None"


def test_nothing_is_set_once_libgomp_is_loaded():
    pytest.importorskip("torch")
    code = "import torch, os, flashdeberta; print(os.environ.get('GOMP_SPINCOUNT'))"
    maps = "import torch; print(any('libgomp' in line for line in open('/proc/self/maps')))"
    probe = subprocess.run([sys.executable, "-c", maps], capture_output=True, text=True, timeout=120)
    if probe.stdout.strip() != "True":
        pytest.skip("this torch does not load libgomp")
    _, set_to = spin_count_read(code)
    assert set_to == "None"

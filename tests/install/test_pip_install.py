"""`pip install .` as a user types it, offline: a fresh `python3 -m venv --system-site-packages` (numpy from the
system), pip with no package index, the project's own build backend (python/pep517_backend) driving CMake. The
backend reuses the tests' build tree (FLASHDEBERTA_PYTHON_BUILD_DIR), so the install builds nothing new; it still
goes through every step a fresh install takes (metadata, the wheel, its RECORD, pip's install of it). The
installed package must then import from outside the source tree, name its location in the venv, and classify a
text to the same scores as the build tree's package."""

import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ["FLASHDEBERTA_BUILD_DIR"])
MODEL = ROOT / "models" / "tiny-en-sections"
PROBE = f"""
import json, flashdeberta
classify = flashdeberta.pipeline("text-classification", model={str(MODEL)!r}, threads=1)
print(json.dumps({{"file": flashdeberta.__file__, "version": flashdeberta.__version__,
                  "result": classify("A library for reading and writing PNG images.", top_k=3)}}))
"""


class PipInstall(unittest.TestCase):
    def test_pip_install_into_a_fresh_venv_offline(self):
        with tempfile.TemporaryDirectory() as scratch:
            venv = Path(scratch) / "venv"
            subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            env.update(FLASHDEBERTA_PYTHON_BUILD_DIR=str(BUILD), PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
            done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", str(ROOT)],
                                  capture_output=True, text=True, env=env, cwd=scratch, timeout=1200)
            self.assertEqual(done.returncode, 0, done.stdout[-3000:] + done.stderr[-3000:])
            self.assertIn("Successfully installed flashdeberta", done.stdout)

            installed = subprocess.run([str(venv / "bin" / "python"), "-c", PROBE], capture_output=True, text=True,
                                       env=env, cwd=scratch, timeout=300)
            self.assertEqual(installed.returncode, 0, installed.stderr)
            got = json.loads(installed.stdout)
            self.assertTrue(got["file"].startswith(str(venv)), got["file"])

            build_tree = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=scratch,
                                        env={**env, "PYTHONPATH": str(BUILD / "python")}, timeout=300)
            self.assertEqual(build_tree.returncode, 0, build_tree.stderr)
            want = json.loads(build_tree.stdout)
            self.assertEqual(got["version"], want["version"])
            self.assertEqual(got["result"], want["result"])

            listed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "show", "-f", "flashdeberta"],
                                    capture_output=True, text=True, env=env, timeout=120)
            self.assertIn("flashdeberta/_native", listed.stdout)
            uninstalled = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "uninstall", "-y", "flashdeberta"],
                                         capture_output=True, text=True, env=env, timeout=120)
            self.assertEqual(uninstalled.returncode, 0, uninstalled.stderr)
            self.assertFalse(any((venv / "lib").glob("python3*/site-packages/flashdeberta/_native*")))


if __name__ == "__main__":
    unittest.main()

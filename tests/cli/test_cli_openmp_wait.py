"""The wait policy the CLI's OpenMP workers run with (apps/cli/openmp_wait.cpp): a bounded spin unless the user
chose one. libgomp shows what it read with OMP_DISPLAY_ENV=verbose, once per start of the program; what the
last start showed is what the commands ran with."""

import os
import re
import shutil
import subprocess
import unittest

CLI = os.environ.get("FLASHDEBERTA_CLI", "flashdeberta")


def runs_libgomp():
    """Whether the CLI is linked with GCC's libgomp. A clang build links LLVM's libomp, which reads KMP_BLOCKTIME
    instead and shows its environment only once a parallel region starts (never for --version)."""
    path = shutil.which(CLI) or CLI
    done = subprocess.run(["ldd", path], capture_output=True, text=True, timeout=60)
    return "libgomp" in done.stdout


def spin_counts(**variables):
    """GOMP_SPINCOUNT as each start of `flashdeberta --version` read it, in order."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(variables, OMP_DISPLAY_ENV="verbose")
    done = subprocess.run([CLI, "--version"], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("flashdeberta "), done.stdout
    return re.findall(r"GOMP_SPINCOUNT = '(\d+)'", done.stderr)


@unittest.skipUnless(runs_libgomp(), "the CLI is not linked with libgomp (a clang build uses LLVM's libomp)")
class OpenMPWait(unittest.TestCase):
    def test_the_default_is_a_bounded_spin(self):
        counts = spin_counts()
        self.assertEqual(counts[-1], "10000", counts)
        self.assertLessEqual(len(counts), 2)  # one restart at most

    def test_the_users_spin_count_wins(self):
        self.assertEqual(spin_counts(GOMP_SPINCOUNT="77"), ["77"])

    def test_the_users_wait_policy_wins(self):
        # OMP_WAIT_POLICY=active is libgomp's "spin long" (its spin count then is 30 billion): kept, no restart.
        counts = spin_counts(OMP_WAIT_POLICY="active")
        self.assertEqual(len(counts), 1, counts)
        self.assertNotEqual(counts[0], "10000")


if __name__ == "__main__":
    unittest.main()

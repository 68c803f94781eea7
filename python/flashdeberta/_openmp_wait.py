"""How the OpenMP workers of the extension wait (apps/cli/openmp_wait.cpp says why): unless the user chose a
wait policy, a bounded spin (GOMP_SPINCOUNT), so that default threads degrade like threads=1 when other
processes compete for the cores instead of spinning against them.

libgomp reads its environment once, when it is loaded: this module runs before flashdeberta._native is
imported. If the process already holds libgomp (torch or another OpenMP library imported first), the setting
would not take effect and nothing is set; `OMP_WAIT_POLICY=passive` before Python starts then does it."""

import os

SPIN_COUNT = "10000"  # the CLI's bound (apps/cli/openmp_wait.cpp)


def _libgomp_loaded():
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            return any("libgomp" in line for line in maps)
    except OSError:
        return False  # no /proc: the environment is all there is to go on


def bound_spinning():
    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ or _libgomp_loaded():
        return
    os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT


bound_spinning()

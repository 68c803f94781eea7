#!/usr/bin/env bash
# Installs the Python package `flashdeberta` with pip, offline: `pip install .` through the project's own build
# backend (python/pep517_backend: CMake builds the extension for that Python, for this CPU; the CUDA backend too
# when nvcc is there), after the Debian packages the build needs.
#   bash scripts/install_python.sh [PYTHON]     then: PYTHON -c "import flashdeberta"
# PYTHON (default: Debian's /usr/bin/python3) may be any Python 3.9+ with numpy: a venv's, pyenv's, conda's.
# Debian's own python3 is "externally managed" (PEP 668): pip installs into /usr/local/lib/python3.X/dist-packages
# there, which Debian's python3 searches and apt never touches, so the script passes --break-system-packages
# for it alone. The build tree (build-python-cp3XY/) is kept: installing again rebuilds only what changed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${1:-/usr/bin/python3}
bash "$root/scripts/install_deps.sh"
args=(-m pip install --no-index --disable-pip-version-check "$root")
sudo_cmd=""
managed=$("$python" -c 'import sys, sysconfig, os; print(int(sys.prefix == sys.base_prefix and os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))))')
if [ "$managed" = 1 ]; then
  args+=(--break-system-packages)
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
fi
$sudo_cmd env FLASHDEBERTA_CMAKE_ARGS="-DFLASHDEBERTA_NATIVE=ON ${FLASHDEBERTA_CMAKE_ARGS:-}" "$python" "${args[@]}"
cd / && "$python" -c "import flashdeberta; print('flashdeberta', flashdeberta.__version__, 'installed for', __import__('sys').executable, 'in', flashdeberta.__file__)"

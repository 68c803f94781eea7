#!/usr/bin/env bash
# Installs the Python package `flashdeberta` for Debian's python3: the Debian packages it needs, a build of the
# extension module in build-python/ for this CPU (-march=native; the CUDA backend too when nvcc is there), and
# `cmake --install` of the package into /usr/local/lib/python3.X/dist-packages, which Debian's python3 searches.
#   bash scripts/install_python.sh            then: python3 -c "import flashdeberta"
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/install_deps.sh"
build=${FLASHDEBERTA_PYTHON_BUILD_DIR:-$root/build-python}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DFLASHDEBERTA_BUILD_PYTHON=ON -DFLASHDEBERTA_NATIVE=ON \
  -DFLASHDEBERTA_BUILD_TESTS=OFF -DFLASHDEBERTA_BUILD_BENCH=OFF -DFLASHDEBERTA_BUILD_APPS=OFF -DFLASHDEBERTA_BUILD_EXAMPLES=OFF \
  -DCMAKE_INSTALL_PREFIX=/usr/local >/dev/null
cmake --build "$build" -j"$(nproc)" --target flashdeberta_python
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
$sudo_cmd cmake --install "$build" --component python
cd / && /usr/bin/python3 -c "import flashdeberta; print('flashdeberta', flashdeberta.__version__, 'installed for', __import__('sys').executable)"

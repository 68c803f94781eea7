#!/usr/bin/env bash
# Installs the Debian 12 packages flashdeberta builds and tests with, only those that are missing.
set -euo pipefail
packages=(build-essential cmake libeigen3-dev libsentencepiece-dev sentencepiece doctest-dev libbenchmark-dev
          nlohmann-json3-dev libtrilinos-kokkos-dev libomp-dev clang time
          pybind11-dev python3-dev python3-numpy python3-pytest python3-pip python3-venv python3-distributed libboost1.81-dev zlib1g-dev curl
          libdnnl-dev libcli11-dev libhdf5-dev python3-h5py)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

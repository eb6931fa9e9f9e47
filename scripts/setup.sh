#!/usr/bin/env bash
# Installs the Debian packages parallax needs (only those missing), then configures and builds.
# Safe to run again. Usage: scripts/setup.sh [cmake preset [target...]]   (default: default, every
# target). Named targets that this configuration does not have (parallax-gui without Qt) are left out.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake pkg-config nlohmann-json3-dev libcli11-dev libopenblas-dev libdeflate-dev
          libopenmpi-dev openmpi-bin qt6-base-dev googletest libgtest-dev libbenchmark-dev
          zlib1g-dev xvfb clang libclang-rt-14-dev clang-tidy libhwy-dev chromium)
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  echo "setup: installing missing Debian packages: ${missing[*]}"
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
  "${sudo_cmd[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "setup: all Debian packages present"
fi

preset="${1:-default}"
shift || true
cmake --preset "$preset"
if (($#)); then
  have=$(cmake --build --preset "$preset" --target help)
  targets=()
  for t in "$@"; do
    if grep -qE "^\.\.\. $t( |\$)" <<< "$have"; then targets+=("$t"); else echo "setup: no target $t in this configuration"; fi
  done
  cmake --build --preset "$preset" -j "$(nproc)" --target "${targets[@]}"
else
  cmake --build --preset "$preset" -j "$(nproc)"
fi

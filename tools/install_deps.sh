#!/usr/bin/env bash
# Installs what the lab needs to build and test, where it is missing: the Debian/Ubuntu packages
# below (with apt-get, through sudo when not root). The CUDA toolkit itself comes from NVIDIA's
# installer; this script only says where it looked. Safe to run again: it installs nothing that is
# already there. The README's set-up commands and .ci/run start with it.
#
#   tools/install_deps.sh            install what is missing
#   tools/install_deps.sh --check    only list what is missing (exit 1 if anything is)
set -euo pipefail

packages=(cmake g++ make python3 libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev)

case "${1:-}" in
  -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  --check|"") ;;
  *) echo "install_deps: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac

if ! command -v dpkg >/dev/null 2>&1; then
  echo "install_deps: not a Debian or Ubuntu system: install by hand ${packages[*]} (see README, Requirements)" >&2
  exit 0
fi
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "${1:-}" = "--check" ]; then
    echo "install_deps: missing ${missing[*]}"
    exit 1
  fi
  echo "install_deps: installing ${missing[*]}" >&2
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "install_deps: no CUDA toolkit found (nvcc on PATH or /usr/local/cuda/bin/nvcc): install it from NVIDIA (12.5 or newer)" >&2
  exit 1
fi
exit 0

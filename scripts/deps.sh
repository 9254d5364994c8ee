#!/usr/bin/env bash
# Installs tensorjit's Debian 12 build, test and benchmark dependencies.
# Idempotent and silent when everything is already installed.
set -eu
pkgs="llvm-19-dev libomp-19-dev clang-19 libclang-rt-19-dev check cmake
ninja-build pkg-config zlib1g-dev libopenblas-dev libgraphblas-dev
libedit-dev valgrind python3 python3-matplotlib python3-numpy python3-scipy python3-pytest"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "tensorjit: installing$missing"
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
$sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null

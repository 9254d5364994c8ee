#!/usr/bin/env bash
# Configures and builds one build tree: scripts/build.sh <dir> [cmake args].
set -eu
dir=$1; shift
src=$(cd "$(dirname "$0")/.." && pwd)
if [ ! -f "$dir/build.ninja" ]; then
  CC=clang-19 CXX=clang++-19 cmake -S "$src" -B "$dir" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
fi
cmake --build "$dir" -- --quiet

#!/usr/bin/env bash
# The demo of README command 1: compile and run CSR SpMV on a real matrix
# (or a generated one), checked against the reference interpreter, then the
# same from the command line with timing.
set -eu
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
m="$root/../shared/data/matrices/cage11.mtx"
[ -f "$m" ] || m=""
echo "== examples/spmv.c ${m:+on $(basename "$m")}"
"$build/example_spmv" $m | head -40
if [ -n "$m" ] && "$build/tensorjit" --help >/dev/null 2>&1; then
  echo
  echo "== tensorjit -f=A:ds -i=A:$(basename "$m") -g=x:d -time=10 -check 'y(i) = A(i,j) * x(j)'"
  "$build/tensorjit" -f=A:ds -i=A:"$m" -g=x:d -time=10 -check 'y(i) = A(i,j) * x(j)' || true
fi

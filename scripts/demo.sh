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
if [ -n "$m" ]; then
  echo
  echo "== tensorjit -f=A:ds -i=A:$(basename "$m") -g=x:d -time=20 'y(i) = A(i,j) * x(j)'"
  "$build/tensorjit" -f=A:ds -i=A:"$m" -g=x:d -time=20 'y(i) = A(i,j) * x(j)' | tail -3
fi
echo
echo "== tensorjit (SpGEMM through a workspace, checked against the reference interpreter)"
"$build/tensorjit" -f=A:ds -f=B:ds -f=C:ds -d=B:400,300 -d=C:300,500 -g=B:s:0.02 -g=C:s:0.02 \
  -check -print-cin 'A(i,j) = B(i,k) * C(k,j)' | tail -2

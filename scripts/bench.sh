#!/usr/bin/env bash
# Runs the benchmark suite: scripts/bench.sh [--quick] [tjbench args].
# Full mode takes under 15 minutes on a 2-core machine; --quick (CI smoke)
# under 2 minutes and exits nonzero if any peer disagrees with tensorjit.
# Results: results/bench.json, results/*.png (bench/plot.py, and
# bench/plot_gett.py's gett-<dtype>-<threads>t.png) and
# results/graphs.txt (tjgraphs: semirings and masks against GraphBLAS) and
# results/gett.txt (tjgett: dense contractions against OpenBLAS).
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${TJ_BENCH_BUILD:-$src/build-bench}
out=${TJ_BENCH_OUT:-$src/results}
if [ ! -f "$build/build.ninja" ]; then
  CC=clang-19 CXX=clang++-19 cmake -S "$src" -B "$build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DTJ_BUILD_TESTS=OFF >/dev/null
fi
cmake --build "$build" --target tjbench -- --quiet
graphs=0   # tjgraphs (semirings and masks against GraphBLAS) is built when GraphBLAS is
cmake --build "$build" --target tjgraphs -- --quiet 2>/dev/null && graphs=1
# Two OpenMP runtimes (libomp for tensorjit and the hand loops, libgomp in
# GraphBLAS/OpenBLAS) on two cores: idle threads must not spin.
export KMP_BLOCKTIME=${KMP_BLOCKTIME:-0}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
status=0
"$build/bench/tjbench" --out "$out" "$@" || status=$?
quick=""
prev=""
for a in "$@"; do   # --quick passes on; --only <kernel> other than graphs skips tjgraphs
  [ "$a" = --quick ] && quick=--quick
  [ "$prev" = --only ] && [ "$a" != graphs ] && graphs=0
  prev=$a
done
# tjgett: dense contractions through GETT / TTGT / LoG against OpenBLAS
# (interleaved; a smoke run in quick mode).
if cmake --build "$build" --target tjgett -- --quiet 2>/dev/null; then
  mkdir -p "$out"
  echo "== tjgett: dgemm and the TCCG contractions, tensorjit GETT vs OpenBLAS (GFLOP/s, medians)"
  if [ -n "$quick" ]; then
    { "$build/bench/tjgett" gemm 256 -reps=3 && "$build/bench/tjgett" tccg 0.02 -reps=3 -only=abc-ad &&
      "$build/bench/tjgett" tccg 0.02 -reps=3 -only=abc-ad -f32; } |
      tee "$out/gett.txt" || status=1
  else
    { "$build/bench/tjgett" gemm && "$build/bench/tjgett" gemm -f32 && "$build/bench/tjgett" tccg &&
      "$build/bench/tjgett" tccg -f32; } | tee "$out/gett.txt" || status=1
  fi
fi
if [ "$graphs" = 1 ]; then
  mkdir -p "$out"
  echo "== tjgraphs: graph kernels under semirings and masks, tensorjit vs GraphBLAS (ms, medians)"
  "$build/bench/tjgraphs" $quick | tee "$out/graphs.txt" || status=1
fi
py=""
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c "import matplotlib" 2>/dev/null; then py=$p; break; fi
done
if [ -n "$py" ]; then
  "$py" "$src/bench/plot.py" "$out/bench.json" "$out" || echo "bench.sh: plotting failed" >&2
  if [ -f "$out/gett.txt" ]; then
    "$py" "$src/bench/plot_gett.py" "$out/gett.txt" "$out" >/dev/null ||
      echo "bench.sh: plotting tjgett failed" >&2
  fi
else
  echo "bench.sh: python3-matplotlib missing; no plots (scripts/deps.sh installs it)" >&2
fi
exit $status

#!/usr/bin/env bash
# README command 2: build and run the whole test suite, in a Release build,
# an AddressSanitizer + UndefinedBehaviorSanitizer build and a
# ThreadSanitizer build.
set -eu
cd "$(dirname "$0")/.."
bash scripts/deps.sh
jobs=$(nproc)
bash scripts/build.sh build
(cd build && ctest --output-on-failure -j"$jobs")
# The benchmark suite's quick mode: completes and every peer agrees with
# tensorjit (timings are not checked).
TJ_BENCH_BUILD="$PWD/build" TJ_BENCH_OUT="$PWD/build/bench-quick" \
  bash scripts/bench.sh --quick > build/bench-quick.log 2>&1 ||
  { tail -40 build/bench-quick.log; echo "bench --quick failed"; exit 1; }
# Debian's default compiler must keep building everything (library, CLI,
# tests, bench): `cmake -B build && cmake --build build` with gcc 12.
if [ ! -f build-gcc/build.ninja ]; then
  CC=gcc CXX=g++ cmake -S . -B build-gcc -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build build-gcc -- --quiet > build-gcc/build.log 2>&1 || { tail -30 build-gcc/build.log; echo "gcc build failed"; exit 1; }
bash scripts/build.sh build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTJ_SANITIZE=ON -DTJ_BUILD_BENCH=OFF
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j"$jobs")
# ThreadSanitizer over the suite (check_stress: 8 threads on one context).
bash scripts/tsan.sh

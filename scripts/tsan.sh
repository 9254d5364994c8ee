#!/usr/bin/env bash
# The test suite under ThreadSanitizer (scripts/test.sh runs it after the
# ASan build): bash scripts/tsan.sh [ctest args], e.g. -R check_stress.
# Our code is instrumented; libomp is not, and LLVM's Archer tool
# (libarcher.so, loaded by libomp through OMP_TOOL_LIBRARIES) tells TSan
# about its barriers, forks and joins. tests/tsan.supp lists the few
# suppressions, all inside libomp's own runtime. Reports stop the test
# (halt_on_error) with exit code 66.
set -eu
cd "$(dirname "$0")/.."
archer=/usr/lib/llvm-19/lib/libarcher.so
[ -f "$archer" ] || { echo "tsan.sh: $archer is missing (apt-get install libomp-19-dev)"; exit 1; }
bash scripts/build.sh build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTJ_TSAN=ON -DTJ_BUILD_BENCH=OFF
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 ignore_noninstrumented_modules=1 suppressions=$PWD/tests/tsan.supp"
export OMP_TOOL_LIBRARIES=$archer ARCHER_OPTIONS="verbose=0"
# Left to the Release and ASan builds: failure injection (single-threaded;
# under TSan its full-disk case's file-size limit kills TSan's own runtime
# with SIGBUS) and the serial corpora check_kernels and semantics_numpy
# (over 15 minutes each under TSan here); check_kernels' case that runs its
# kernels on several threads (threads_vectors) runs below.
(cd build-tsan && ctest --output-on-failure -j"$(nproc)" \
  -E '^(check_failinj|failinj_cli|check_kernels|semantics_numpy)$' "$@")
if [ $# -eq 0 ]; then
  (cd build-tsan && CK_RUN_CASE=threads_vectors ./tests/check_kernels)
fi

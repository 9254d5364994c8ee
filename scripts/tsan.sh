#!/usr/bin/env bash
# The test suite under ThreadSanitizer (scripts/test.sh runs it after the
# ASan build): bash scripts/tsan.sh [ctest args], e.g. -R check_stress.
#
# Our code is instrumented; LLVM, libomp and the JIT's kernels are not.
# LLVM's Archer tool (libarcher.so, loaded by libomp through
# OMP_TOOL_LIBRARIES) tells TSan about libomp's barriers, forks and joins.
# tests/tsan.supp suppresses libomp's own runtime internals and nothing
# else (it says which, and why by library); the tsan_canary_* tests race
# on purpose in our code on libomp's threads and pass only when TSan
# reports it. A report stops the test (halt_on_error) with exit status 66.
#
# Every suite runs. The large corpora run a fixed subset here, one case in
# TJ_TEST_SAMPLE of each table of check_kernels and check_gett and about
# one in TJ_SEMANTICS_SAMPLE of semantics_numpy's cases (set either to 1
# for all of them), so that the whole script stays within minutes on two
# cores (measured at load 2-6: the whole script 3.9 min, check_kernels
# 115 s, semantics_numpy 62 s, check_gett 49 s, 250 s of CPU in all); the
# Release and ASan builds run them all. check_kernels' case that
# runs kernels on several threads (threads_vectors) runs in full below.
# Failure injection runs in full except failinj_cli's full-disk case: a
# TSan binary cannot start under a file-size limit (failinj_cli.sh).
set -eu
cd "$(dirname "$0")/.."
archer=/usr/lib/llvm-19/lib/libarcher.so
[ -f "$archer" ] || { echo "tsan.sh: $archer is missing (apt-get install libomp-19-dev)"; exit 1; }
bash scripts/build.sh build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTJ_TSAN=ON -DTJ_BUILD_BENCH=OFF

# ignore_noninstrumented_modules stays 0: set to 1 it makes TSan ignore
# what every uninstrumented library (LLVM, libstdc++, libomp) does through
# TSan's interceptors, and it also hid a memset race in our own code on a
# libomp thread (tsan_canary_memset fails with it). But Archer prints a
# warning on every process's stderr unless TSAN_OPTIONS literally holds
# ignore_noninstrumented_modules=1, and the CLI tests check stderr line by
# line; so TSAN_OPTIONS holds it for Archer and then includes
# build-tsan/tsan.options, which sets it back to 0 for TSan (TSan reads its
# options in order and the last setting wins; tsan_canary_memset checks
# that it did).
printf 'ignore_noninstrumented_modules=0\n' > build-tsan/tsan.options
symbolizer=/usr/bin/llvm-symbolizer-19   # names in reports (else TSan looks in PATH)
[ -x "$symbolizer" ] || symbolizer=
export TSAN_OPTIONS="ignore_noninstrumented_modules=1 include=$PWD/build-tsan/tsan.options \
halt_on_error=1 exitcode=66 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp\
${symbolizer:+ external_symbolizer_path=$symbolizer}"
export OMP_TOOL_LIBRARIES=$archer ARCHER_OPTIONS="verbose=0"
export TJ_TEST_SAMPLE=${TJ_TEST_SAMPLE:-4} TJ_SEMANTICS_SAMPLE=${TJ_SEMANTICS_SAMPLE:-2}
# A CLI command under TSan takes seconds, not the Release build's
# milliseconds: semantics_numpy's per-command timeout and its wide-union
# families' budget (both failures when exceeded) scale with it.
export TJ_SEMANTICS_TIMEOUT=${TJ_SEMANTICS_TIMEOUT:-120}
export TJ_SEMANTICS_UNION_BUDGET=${TJ_SEMANTICS_UNION_BUDGET:-600}
(cd build-tsan && ctest --output-on-failure -j"$(nproc)" "$@")
if [ $# -eq 0 ]; then
  (cd build-tsan && TJ_TEST_SAMPLE=1 TJ_PAR_MIN_WORK=0 CK_RUN_CASE=threads_vectors \
     ./tests/check_kernels)
fi

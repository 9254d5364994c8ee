#!/usr/bin/env bash
# The CLI under failure injection: tensorjit_failinj (the tool linked with
# tests/failinj) runs one command with its n-th allocation failing, for
# n = 1, 2, ... until a run completes. Each failed run must exit 1 with one
# line on stderr, "tensorjit: ... out of memory", and leave no output file;
# a run whose failing allocation was optional must give the right output.
# Then the same for a REPL session, whose first error must be the failed
# line's "error: ... out of memory" (or "tensorjit: ..." at startup).
# In an ASan build LeakSanitizer checks every run at exit (exit status 23
# on a leak fails the test).
# Usage: bash tests/failinj_cli.sh <tensorjit_failinj>
set -u
T=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
printf '%%%%MatrixMarket matrix coordinate real general\n5 4 6\n1 1 1\n2 3 2\n3 2 -1\n4 4 3\n5 1 2\n1 4 1\n' > a.mtx
printf '1 1\n2 2\n3 -1\n4 0.5\n' > x.tns
run() { "$T" 'y(i) = A(i,j) * x(j)' -i=A:a.mtx -i=x:x.tns -o=y:y.tns -O1 -nthreads=2 "$@"; }
if ! run > /dev/null 2> err.txt; then echo "FAIL: the command fails without injection:"; cat err.txt; exit 1; fi
mv y.tns want.tns
# step MODE: runs `run` (cli) or the REPL script (repl) for n = 1, 2, ...
step() {
  local mode=$1 failures=0 n=1 rc fired seen lines
  while :; do
    rm -f y.tns
    if [ "$mode" = cli ]; then
      TJ_FAILINJ_AT=$n TJ_FAILINJ_REPORT=report.txt run > out.txt 2> err.txt
    else
      TJ_FAILINJ_AT=$n TJ_FAILINJ_REPORT=report.txt "$T" -repl -O1 < session.txt > out.txt 2> err.txt
    fi
    rc=$?
    read -r fired seen < report.txt || { echo "FAIL $mode n=$n: no report (exit $rc)"; cat err.txt; return 1; }
    if [ "$fired" = 0 ]; then
      [ "$rc" = 0 ] || { echo "FAIL $mode n=$n: exit $rc with no allocation failing"; cat err.txt; return 1; }
      break
    fi
    if [ "$rc" = 0 ]; then
      cmp -s y.tns want.tns || { echo "FAIL $mode n=$n: recovered but y.tns differs"; return 1; }
    elif [ "$rc" = 1 ]; then
      # the CLI: one line; the REPL: its first error is the failed line's
      # (later lines may fail for want of what it would have made)
      local pat='^tensorjit: .*out of memory'
      lines=$(wc -l < err.txt)
      if [ "$mode" = repl ]; then
        pat='^(error|tensorjit): .*out of memory'
        lines=1
      fi
      if [ "$lines" != 1 ] || ! head -1 err.txt | grep -qE "$pat"; then
        echo "FAIL $mode n=$n of $seen: expected one line /$pat/, got:"; cat err.txt
        failures=$((failures + 1))
      fi
      if [ "$mode" = cli ] && [ -e y.tns ]; then
        echo "FAIL $mode n=$n: y.tns written by a failed run"; failures=$((failures + 1))
      fi
    else
      echo "FAIL $mode n=$n of $seen: exit status $rc"; cat err.txt; failures=$((failures + 1))
    fi
    [ "$failures" -lt 5 ] || break
    n=$((n + 1))
  done
  echo "$mode: failure injection over $((n - 1)) allocations: $failures failures"
  [ "$failures" = 0 ] && [ "$n" -gt 10 ]
}
printf 'A = load("a.mtx")\nx = load("x.tns", "d")\ny(i) = A(i,j) * x(j)\n:check\nformat A "ss"\nsave y "y.tns"\n' > session.txt
step cli && step repl || exit 1

# A ThreadSanitizer binary dies of SIGBUS inside TSan's runtime when it
# starts under a small file-size limit, whatever it does (even one that
# writes no file), so the TSan build (TJ_TSAN_BUILD, set by CMake) leaves
# this case to the Release and ASan builds; check_failinj's full-disk cases,
# which lower the limit after startup, do run under TSan.
if [ -n "${TJ_TSAN_BUILD:-}" ]; then
  echo "SKIP full disk: a TSan binary cannot start under ulimit -f (the other builds run it)"
  exit 0
fi

# A full disk under the CLI (a 64 kB file-size limit, SIGXFSZ ignored): a
# 500 kB output fails with one message naming the file, and neither it nor
# a temporary is left; an older file of that name keeps its contents.
full_disk() {
  ( ulimit -f 64; trap '' XFSZ
    exec "$T" 'y(i) = x(i) * 2' -g=x:d -d=x:20000 -o=y:"$1" ) > ../out.txt 2> ../err.txt
}
mkdir full && cd full || exit 1
full_disk y.tns; rc=$?
if [ "$rc" != 1 ] || [ "$(wc -l < ../err.txt)" != 1 ] ||
   ! grep -qE '^tensorjit: .*y\.tns: write failed: File too large' ../err.txt; then
  echo "FAIL full disk: exit $rc, stderr:"; cat ../err.txt; exit 1
fi
[ -z "$(ls -A)" ] || { echo "FAIL full disk: left behind: $(ls -A)"; exit 1; }
echo old > y.tns
full_disk y.tns
[ "$(cat y.tns)" = old ] && [ "$(ls -A)" = y.tns ] || { echo "FAIL full disk: y.tns changed"; exit 1; }
echo "full disk: no partial output"

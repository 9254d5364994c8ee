#!/usr/bin/env bash
# Runs the parser's libFuzzer target for a bounded time on a scratch corpus
# seeded from tests/data/notation: fuzz_parse.sh <fuzz binary> <seed dir>
# <artifact dir>. A crashing input is kept in the artifact dir and printed
# (hex and text), so a failure in CI can be reproduced with
#   <fuzz binary> <artifact file>
set -u
bin=$1 seeds=$2 keep=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$keep"
(cd "$work" && "$bin" -max_total_time=20 -print_final_stats=0 \
  -artifact_prefix="$keep/" corpus "$seeds" > log.txt 2>&1)
rc=$?
tail -40 "$work/log.txt"
for f in "$keep"/crash-* "$keep"/leak-* "$keep"/timeout-* "$keep"/oom-*; do
  [ -e "$f" ] || continue
  echo "--- input that failed ($f):"
  od -c "$f" | head -20
done
exit $rc

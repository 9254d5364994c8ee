#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time on a scratch corpus seeded
# from its folder of seeds, which also holds the regression inputs
# (regress-*: inputs that once failed), so every run replays them first:
#   fuzz.sh <fuzz binary> <seed dir> <artifact dir> <seconds> [libFuzzer flags]
# A failing input is kept in the artifact dir and printed (hex and text),
# so a failure in CI can be reproduced with `<fuzz binary> <artifact file>`;
# to keep it as a regression input, copy it to <seed dir>/regress-<what>.
# The run happens in a scratch folder (targets may write files there).
set -u
mkdir -p "$3"
bin=$(realpath "$1") seeds=$(realpath "$2") keep=$(realpath "$3") secs=$4
shift 4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$keep"
# allocator_may_return_null: a huge malloc fails as it would outside ASan
# (the library must then report out of memory), instead of aborting.
export ASAN_OPTIONS=${ASAN_OPTIONS:-}:allocator_may_return_null=1:detect_leaks=1
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-}:print_stacktrace=1:halt_on_error=1
(cd "$work" && "$bin" -max_total_time="$secs" -print_final_stats=0 -timeout=20 \
  -rss_limit_mb=3072 -artifact_prefix="$keep/" "$@" "$work/corpus" "$seeds" > log.txt 2>&1)
rc=$?
tail -40 "$work/log.txt"
for f in "$keep"/crash-* "$keep"/leak-* "$keep"/timeout-* "$keep"/oom-* "$keep"/slow-unit-*; do
  [ -e "$f" ] || continue
  echo "--- input that failed ($f):"
  od -c "$f" | head -20
done
exit $rc

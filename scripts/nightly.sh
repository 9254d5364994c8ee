#!/usr/bin/env bash
# The long runs of issue 20, for a nightly job (CI runs short versions of
# each through scripts/test.sh): bash scripts/nightly.sh. About an hour on
# two cores, and check_large needs about 10 GB of memory.
#   1. 8 threads compiling, running and freeing kernels on one context for
#      10 minutes under ThreadSanitizer (check_stress; CI: 6 s)
#   2. 10,000 distinct kernels through one bounded kernel cache, resident
#      memory bounded, results checked (check_soak, Release; CI: 400)
#   3. a 10^7 x 10^7 CSR with 10^8 entries packed, converted and run
#      (check_large; CI: a visible skip)
#   4. each libFuzzer target for 5 minutes (CI: 20 s)
set -eu
cd "$(dirname "$0")/.."
TJ_STRESS_SECONDS=${TJ_STRESS_SECONDS:-600} bash scripts/tsan.sh -R '^check_stress$'
bash scripts/build.sh build
(cd build && TJ_SOAK_KERNELS=${TJ_SOAK_KERNELS:-10000} ctest -R '^check_soak$' --output-on-failure)
(cd build && TJ_LARGE=1 ctest -R '^check_large$' --output-on-failure)
for bin in build/tests/fuzz_*; do
  [ -x "$bin" ] || continue
  name=$(basename "$bin")
  seeds=tests/data/fuzz/${name#fuzz_}
  [ "$name" = fuzz_parse ] && seeds=tests/data/notation
  echo "== $name"
  bash tests/fuzz.sh "$bin" "$seeds" "build/fuzz-artifacts/$name" "${TJ_FUZZ_SECONDS:-300}"
done
echo "nightly: all long runs passed"

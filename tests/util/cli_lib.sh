# Helpers shared by the tests/cli_*.sh scripts, sourced with the tensorjit
# binary as $1 (it lives in util/ so CTest's cli_*.sh glob skips it).
#
# expect NAME PATTERN ARGS...   tensorjit ARGS exits 0 and its output
#                               matches the extended regex PATTERN
# expect_fail NAME TEXT ARGS... tensorjit ARGS exits 1, prints nothing on
#                               stdout and one message on stderr that starts
#                               "tensorjit: " and contains TEXT
# finish                        prints the tally; exit status 1 on failures
T=${1:?usage: $0 <path to tensorjit>}
D=${TJ_DATA_DIR:-}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
PASSED=0
FAILED=0
FAILED_NAMES=""

pass() { PASSED=$((PASSED + 1)); echo "ok   $1"; }
fail() {
  FAILED=$((FAILED + 1)); FAILED_NAMES="$FAILED_NAMES $1"
  echo "FAIL $1: $2"
  [ -n "${3:-}" ] && printf '%s\n' "$3" | head -15 | sed 's/^/     | /'
  return 0
}

expect() {
  local name=$1 pat=$2; shift 2
  local out rc
  out=$("$T" "$@" 2>&1); rc=$?
  if [ $rc -ne 0 ]; then fail "$name" "exit status $rc" "$out"
  elif ! grep -qE -- "$pat" <<<"$out"; then fail "$name" "no line matches /$pat/" "$out"
  else pass "$name"; fi
}

expect_fail() {
  local name=$1 text=$2; shift 2
  local rc
  "$T" "$@" >"$TMP/out" 2>"$TMP/err"; rc=$?
  local err; err=$(cat "$TMP/err")
  if [ $rc -ne 1 ]; then fail "$name" "exit status $rc, expected 1" "$err"
  elif [ -s "$TMP/out" ]; then fail "$name" "wrote to stdout" "$(cat "$TMP/out")"
  elif [[ "$err" != "tensorjit: "* ]]; then fail "$name" "message does not start 'tensorjit: '" "$err"
  elif [ "$(grep -c '^tensorjit: ' "$TMP/err")" -ne 1 ]; then fail "$name" "more than one message" "$err"
  elif ! grep -qF -- "$text" "$TMP/err"; then fail "$name" "message lacks '$text'" "$err"
  else pass "$name"; fi
}

have_data() {
  if [ -n "$D" ] && [ -f "$D/$1" ]; then return 0; fi
  echo "SKIP $2: \$TJ_DATA_DIR/$1 not found (TJ_DATA_DIR='${D}')"
  return 1
}

finish() {
  echo "$(basename "$0"): $PASSED passed, $FAILED failed${FAILED_NAMES:+ (}${FAILED_NAMES# }${FAILED_NAMES:+)}"
  [ $FAILED -eq 0 ]
}

#!/usr/bin/env bash
# Compile and run time of wide unions (bench/README.md, "Wide unions"):
#   bash bench/wide_unions.sh [build/tensorjit] [density] [runs]
# For k = 2..16 on 2000 x 2000 CSR operands at the given density (default
# 0.005): A = B1 + ... + Bk, A = (B1 + ... + Bk) * C (CSR outputs),
# y = (B1 + ... + Bk) x (a root sum, its terms summed one loop nest each),
# A = and A += B1 + ... + Bk into a dense A, and the three-way intersection
# A = B1 * B2 * B3 (default lowering); then, at k = 2, 3, 4, 8, 16, the
# union, the product of sums, the sum and the += under each lowering
# forced, interleaved (lattice: TJ_WIDE_UNION_THRESHOLD=64, k <= 4 only;
# merged: =1; scatter: TJ_SCATTER_UNION_MIN=2, the others with =1000).
# Prints one row per kernel: compile ms (median of `runs` fresh processes)
# and the assemble and compute medians of 20 timed runs each.
set -eu
tool=${1:-build/tensorjit}
density=${2:-0.005}
runs=${3:-3}
unset TJ_CACHE_DIR

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# measure <label> <expr> <tensor flags...>: one row.
measure() {
  local label=$1 expr=$2; shift 2
  local c=() as=() cp=() out
  for r in $(seq 1 "$runs"); do
    out=$("$tool" "$@" -time=20 "$expr" 2>&1) || { echo "$label: $out"; return; }
    c+=("$(echo "$out" | awk '/^compile:/ {print $2}')")
    as+=("$(echo "$out" | awk '/^assemble:/ {print $2}')")
    cp+=("$(echo "$out" | awk '/^compute:/ {print $2}')")
  done
  printf '%-34s compile %8.1f ms  assemble %8.3f ms  compute %8.3f ms\n' "$label" \
    "$(printf '%s\n' "${c[@]}" | median)" "$(printf '%s\n' "${as[@]}" | median)" \
    "$(printf '%s\n' "${cp[@]}" | median)"
}

# operands <k> [C|x|dense|acc]: flags for B1..Bk (2000 x 2000 CSR, density)
# and the output: A CSR, with C (CSR) or x (a dense vector, output y), or A
# dense (acc: holding random values, for +=).
operands() {
  local k=$1
  case ${2:-} in
  x) echo "-g=x:d" ;;
  dense) echo "-f=A:dd -d=A:2000,2000" ;;
  acc) echo "-f=A:dd -g=A:d -d=A:2000,2000" ;;
  C) echo "-f=A:ds -d=A:2000,2000 -f=C:ds -g=C:s:$density -d=C:2000,2000" ;;
  *) echo "-f=A:ds -d=A:2000,2000" ;;
  esac
  for q in $(seq 1 "$k"); do echo "-f=B$q:ds -g=B$q:s:$density -d=B$q:2000,2000"; done
}

sum() {
  local k=$1 e=""
  for q in $(seq 1 "$k"); do e="$e${e:+ + }B$q(i,j)"; done
  echo "$e"
}

for k in $(seq 2 16); do
  # shellcheck disable=SC2046
  measure "union k=$k" "A(i,j) = $(sum "$k")" $(operands "$k")
  # shellcheck disable=SC2046
  measure "(union k=$k) * C" "A(i,j) = ($(sum "$k")) * C(i,j)" $(operands "$k" C)
  # shellcheck disable=SC2046
  measure "y = (union k=$k) * x" "y(i) = ($(sum "$k")) * x(j)" $(operands "$k" x)
  # shellcheck disable=SC2046
  measure "dense A = union k=$k" "A(i,j) = $(sum "$k")" $(operands "$k" dense)
  # shellcheck disable=SC2046
  measure "dense A += union k=$k" "A(i,j) += $(sum "$k")" $(operands "$k" acc)
done
# shellcheck disable=SC2046
measure "B1 * B2 * B3" "A(i,j) = B1(i,j) * B2(i,j) * B3(i,j)" $(operands 3)
# The three lowerings of the same kernel, forced, interleaved process by
# process: the merge lattice (k <= 4 only: it grows ~3^k), the merged loop,
# the workspace scattered term by term.
PATHS="lattice:64:1000 merged:1:1000 scatter:1:2"
compare() {
  local label=$1 expr=$2; shift 2
  declare -A c as cp
  local paths=$PATHS
  [ "$K" -gt 4 ] && paths=${PATHS#* }
  for r in $(seq 1 "$runs"); do
    for p in $paths; do
      IFS=: read -r name lat sc <<<"$p"
      out=$(TJ_WIDE_UNION_THRESHOLD=$lat TJ_SCATTER_UNION_MIN=$sc "$tool" "$@" -time=20 "$expr" 2>&1) ||
        { echo "$label $name: $out"; return; }
      c[$name]+="$(echo "$out" | awk '/^compile:/ {print $2}') "
      as[$name]+="$(echo "$out" | awk '/^assemble:/ {print $2}') "
      cp[$name]+="$(echo "$out" | awk '/^compute:/ {print $2}') "
    done
  done
  for p in $paths; do
    name=${p%%:*}
    printf '%-34s compile %8.1f ms  assemble %8.3f ms  compute %8.3f ms\n' "$label $name" \
      "$(echo ${c[$name]} | tr ' ' '\n' | median)" "$(echo ${as[$name]} | tr ' ' '\n' | median)" \
      "$(echo ${cp[$name]} | tr ' ' '\n' | median)"
  done
}
for K in 2 3 4 8 16; do
  # shellcheck disable=SC2046
  compare "union k=$K" "A(i,j) = $(sum "$K")" $(operands "$K")
  # shellcheck disable=SC2046
  compare "(union k=$K) * C" "A(i,j) = ($(sum "$K")) * C(i,j)" $(operands "$K" C)
  # shellcheck disable=SC2046
  compare "y = (union k=$K) * x" "y(i) = ($(sum "$K")) * x(j)" $(operands "$K" x)
  # shellcheck disable=SC2046
  compare "dense A += union k=$K" "A(i,j) += $(sum "$K")" $(operands "$K" acc)
done

#!/usr/bin/env bash
# Compile latency (issue 21's targets; bench/README.md, "Compile latency"):
#   bash bench/latency.sh [build/bench/tjlatency] [processes] [reps]
# The first compile of a process (SpMV, LLJIT start included): medians of
# wall and calling-thread CPU time over `processes` fresh processes; then
# warm SpMV and MTTKRP in one process (medians of `reps`), with stages.
set -eu
tool=${1:-build/bench/tjlatency}
procs=${2:-9}
reps=${3:-21}
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
uptime
wall=() cpu=()
for p in $(seq 1 "$procs"); do
  out=$("$tool" --first)
  wall+=("$(echo "$out" | sed -n 's/.*: \([0-9.]*\) ms (cpu \([0-9.]*\),.*/\1/p')")
  cpu+=("$(echo "$out" | sed -n 's/.*: \([0-9.]*\) ms (cpu \([0-9.]*\),.*/\2/p')")
done
printf 'first compile in a process (SpMV), median of %d processes: %.2f ms wall, %.2f ms cpu\n' \
  "$procs" "$(printf '%s\n' "${wall[@]}" | median)" "$(printf '%s\n' "${cpu[@]}" | median)"
"$tool" --reps "$reps" | tail -n +2
uptime

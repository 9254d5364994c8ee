#!/usr/bin/env bash
# The bad-input corpus of the tensorjit command line: unknown flags,
# malformed values, bad formats, dims, files and expressions, and requests
# that cannot be met. Each case expects exit status 1, nothing on stdout
# and one "tensorjit: " message holding the given text — never a crash.
# Usage: bash tests/cli_errors.sh <tensorjit>  (env TJ_TEST_DIR: tests/).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/util/cli_lib.sh"

E='y(i) = A(i,j) * x(j)'
BAD=${TJ_TEST_DIR:-$(dirname "${BASH_SOURCE[0]}")}/data/bad
DATA=(-f=A:ds -g=A:s:0.2 -g=x:d -d=A:20,30)

# ---- flags and values ----
expect_fail unknown_flag "unknown flag '-bogus'" -bogus "$E"
expect_fail unknown_double_dash "unknown flag '-frobnicate'" --frobnicate "$E"
expect_fail flag_without_value "expected -i=<name>:<value>" "$E" -i=A
expect_fail flag_bad_name "expected -f=<name>:<value>" "$E" -f=1A:ds
expect_fail two_expressions "more than one expression" "$E" "$E"
expect_fail empty_expression "the expression is empty" ''
expect_fail repl_with_expression "-repl takes no expression" -repl "$E"
expect_fail time_zero "-time=0: repetitions" "$E" -time=0
expect_fail time_garbage "-time=x: repetitions" "$E" -time=x
expect_fail opt_level "-O7: optimization level" "$E" -O7
expect_fail nthreads "-nthreads=abc: thread count" "$E" -nthreads=abc
expect_fail seed "-seed=-1: seed" "$E" -seed=-1

# ---- formats ----
expect_fail format_letter "bad level letter 'x'" "$E" -f=A:dx
expect_fail format_levels "the format has 3 levels, but A has order 2" "$E" -f=A:dsd
expect_fail format_mode_order "not a permutation" "$E" -f=A:ds:1,1
expect_fail format_mlir "-f=A:(i,j) -> (j : dense, i : sparse)" "$E" \
  -f='A:(i,j) -> (j : dense, i : sparse)'
expect_fail format_unknown_tensor "'Q' (named in a flag) is not a tensor" "$E" -f=Q:ds

# ---- dtypes, dims, random data ----
expect_fail dtype "unknown dtype 'f16'" "$E" -t=A:f16
expect_fail dtype_mix "dtype mix" "$E" -t=A:f32 -d=A:4,5
expect_fail dims_letter "'x' is not a dimension" "$E" -d=A:10,x
expect_fail dims_empty "expected -d=<name>:<value>" "$E" -d=A:
expect_fail dims_double_comma "expected a comma-separated list" "$E" -d=A:10,,2
expect_fail dims_negative "'-3' is not a dimension" "$E" -d=A:10,-3
expect_fail dims_count "1 dims given, but A has order 2" "$E" -d=A:10
expect_fail dims_index_list "index j takes one extent" "$E" -d=j:3,4
expect_fail dims_unknown_name "'q' (named in a flag) is not a tensor or index" "$E" -d=q:3
expect_fail dims_missing "the extent of index i (mode 0 of y) is unknown" "$E" -g=x:d -d=j:4
expect_fail dims_mismatch "index j has extent 20 in A (mode 1) but 30 in x (mode 0)" \
  "$E" -d=A:10,20 -d=x:30
expect_fail gen_kind "kind must be d (dense), s (sparse) or p (power-law)" "$E" -g=A:z
expect_fail gen_density "density '2' is not a number in (0, 1]" "$E" -g=A:s:2
expect_fail gen_and_file "A has both -i and -g" "$E" -i=A:m.mtx -g=A:s

# ---- files ----
expect_fail missing_file "nonexistent.mtx" "$E" -i=A:/nonexistent/nonexistent.mtx -g=x:d
for f in bad_value.mtx past_col.mtx no_banner.mtx too_many.mtx ragged.tns zero_coord.tns; do
  if [ -f "$BAD/$f" ]; then
    expect_fail "bad_file_${f%%.*}" "$f:" "$E" -i=A:"$BAD/$f" -g=x:d
  else
    echo "SKIP bad_file_${f%%.*}: $BAD/$f not found"
  fi
done
expect_fail file_order "the file holds a tensor of order 1, but A has order 2" \
  "$E" -i=A:<(printf '1 2.5\n3 1.0\n') -g=x:d
expect_fail write_dir "cannot open for writing" "$E" "${DATA[@]}" -o=y:/nonexistent/y.tns
expect_fail write_mtx_vector "a .mtx file holds a matrix" "$E" "${DATA[@]}" -o=y:"$TMP/y.mtx"
expect_fail write_source_dir "-write-source=/nonexistent/k.c: cannot open" "$E" -d=A:3,4 \
  -write-source=/nonexistent/k.c

# ---- expressions and schedules ----
expect_fail expr_trailing_op "expected an expression" 'y(i) = A(i,j) *' -d=i:3 -d=j:3
expect_fail expr_unclosed "expected ',' or ')'" 'y(i) = A(i,j) * x(j' -d=i:3 -d=j:3
expect_fail expr_no_assign "expected '=' or '+='" 'y(i) A(i,j)' -d=i:3 -d=j:3
expect_fail expr_no_output "expected the output tensor's name" '= A(i,j)'
expect_fail expr_order_clash "tensor A is used with 2 and with 1 indices" \
  'y(i) = A(i,j) * A(j)' -d=i:3 -d=j:3
expect_fail expr_bad_char "1:" 'y(i) = A(i,j) $ x(j)' -d=i:3 -d=j:3
expect_fail schedule_unknown "unknown schedule directive 'frobnicate'" "$E" -d=A:3,4 \
  -s='frobnicate(i)'
expect_fail parallel_balanced_dense "parallelize(i, balanced): no sparse level below i weighs its rows" \
  'y(i) = A(i,j) * x(j)' -g=A:d -g=x:d -d=A:8,8 -s='parallelize(i, balanced)'
expect_fail unroll_duplicates "unroll(j, 2): the loop over j co-iterates sparse operands (or walks duplicates) in while loops" \
  'y(i) = max(A(i,j), 0) * x(j)' -f=A:du -g=A:s:0.3 -g=x:d -d=A:6,5 -s='unroll(j, 2)'
expect_fail output_nonunique_run_short "output E: level 0 is 'u'; outputs support dense ('d') and compressed ('s', 'o') levels, a compressed-nonunique level with singletons down to the last level (COO: 'uq', 'uqq'), and one with no singleton below it ('du', 'us', 'ud': each coordinate written once)" \
  'E(i,j,k) = A(i,j,k) * 2' -f=A:sss -f=E:ucs -g=A:s:0.3 -d=A:4,5,6
expect_fail unroll_while "unroll(j, 2): the loop over j co-iterates sparse operands (or walks duplicates) in while loops" \
  'C(i,j) = A(i,j) + B(i,j)' -f=A:ds -f=B:ds -g=A:s:0.3 -g=B:s:0.3 -d=A:6,6 -s='unroll(j, 2)'

# ---- the C backend ----
expect_fail backend_unknown "-backend=gcc: the backend must be llvm or c" "$E" -backend=gcc
CC=/nonexistent/cc expect_fail backend_c_cc_missing \
  "C backend: the C compiler '/nonexistent/cc' was not found (set CC to a C compiler)" \
  "$E" -backend=c "${DATA[@]}"
printf '#!/bin/sh\nunset CC\nPATH=/nonexistent exec "%s" "$@"\n' "$T" >"$TMP/no_cc_on_path"
chmod +x "$TMP/no_cc_on_path"
T="$TMP/no_cc_on_path" expect_fail backend_c_no_cc_on_path \
  "C backend: the C compiler 'cc' was not found" "$E" -backend=c "${DATA[@]}"
if command -v "${CC:-cc}" >/dev/null 2>&1; then
  expect_fail backend_c_no_llvm "the C backend has no LLVM IR stage" "$E" -backend=c \
    "${DATA[@]}" -print-llvm
else
  echo "SKIP backend_c_no_llvm: no C compiler ('${CC:-cc}')"
fi

# ---- requests that need data ----
expect_fail output_needs_data "-o needs evaluation, but input x has no data" \
  "$E" -f=A:ds -g=A:s -d=A:4,5 -o=y:"$TMP/y.tns"
expect_fail check_needs_data "-check needs evaluation, but input A has no data" \
  "$E" -d=A:4,5 -check
expect_fail time_needs_data "-time needs evaluation, but input A has no data" \
  "$E" -d=A:4,5 -time

# a 2:4 output whose union does not fit: a run error naming the block
expect_fail structured_output_overflow "n_out_of_m 2:4 stores at most 2 per block" \
  'A(i,j) = B(i,j) + C(i,j)' -f=A:ddn2:0,1/4,1%4 -f=B:ddn2:0,1/4,1%4 -f=C:ddn2:0,1/4,1%4 \
  -d=A:6,10 -g=B:s:0.5 -g=C:s:0.5 -o=A:"$TMP/a24.mtx"
expect_fail bsr_output_spgemm "cannot be computed into blocked output A" \
  'A(i,j) = B(i,k) * C(k,j)' -f=A:dsdd:0/4,1/4,0%4,1%4 -f=B:dsdd:0/4,1/4,0%4,1%4 \
  -f=C:dsdd:0/4,1/4,0%4,1%4 -d=A:12,12 -d=k:12 -g=B:s:0.1 -g=C:s:0.1

# views under schedules that would walk the base's arrays, not the slice's
expect_fail view_out_like "in its format, not a view" \
  'A(i,j) = B(i,j) * C(i,k) * D(k,j)' -f=A:ds -f='B:ds[5:20:1,:]' -g=B:s:0.2 -g=C:d -g=D:d \
  -d=B:30,70 -d=k:16 -s='split(i,i0,i1,4) pos(j,jpos,B(i,j)) split(jpos,jpos0,jpos1,8) reorder(i0,i1,jpos0,k,jpos1)'
expect_fail fuse_across_sum "fuse(j, k, f): a sum's temp (a where()) lies between the loop over j and the loop over k" \
  'y(i) = z(i) - sum(j, reduce(max, k, A(i,j,k) * x(k)))' -f=A:ddd -d=A:5,6,7 -g=A:d -g=x:d -g=z:d -s='fuse(j, k, f)'
expect_fail view_fused_rows "B is a view (a slice); a fused loop walks its base's positions" \
  'y(i) = B(i,j) * x(j)' -f='B:ds[5:10:2,:]' -g=B:s:0.3 -g=x:d -d=B:30,20 -s='fuse(i,j,f) pos(f,fp,B(i,j))'

expect_fail partials_under_sum_temp "partials): the right-hand side sums inside a subexpression" \
  'y(i) += A(i,j) * x(j) + z(i)' -f=A:dd -d=A:9,70 -s='parallelize(j, partials)'

# partials into a sparse output (merged by rt_storage_merge): what still cannot be
expect_fail partials_sparse_outer "parallelize(j, partials): the loop walks a sparse level; partial sparse outputs bound a dense outer loop" \
  'y(i) = A(j,i) * x(j)' -f=A:ss -f=y:s -g=A:s:0.2 -g=x:d -d=A:20,30 -s='parallelize(j, partials)'
expect_fail partials_sparse_level "merged level by level for dense and compressed levels; y's level 0 is compressed(nonordered)" \
  'y(i) = A(j,i) * x(j)' -f=A:ds -f=y:o -g=A:s:0.2 -g=x:d -d=A:20,30 -s='parallelize(j, partials)'
expect_fail partials_sparse_rows "whose row chunks are concatenated already; use parallelize(i)" \
  'C(i,j) = A(i,j) * 2' -f=A:ds -f=C:ds -g=A:s:0.2 -d=A:20,30 -s='parallelize(i, partials)'

# sequence(): refused with the reason
expect_fail sequence_sparse_output "sequence(): the output is sparse" \
  'A(i,j) = B(i,k) * C(k,j) + D(i,j)' -f=A:ds -g=B:d -g=C:d -g=D:d -d=B:4,3 -d=C:3,5 -s='sequence()'
expect_fail sequence_semiring "sequence(): under a semiring" 'A(i,j) = B(i,k) * C(k,j) + D(i,j)' \
  -g=B:d -g=C:d -g=D:d -d=B:4,3 -d=C:3,5 -semiring=min.plus -s='sequence()'
expect_fail sequence_min "sequence(): the term reducing over k reduces by min" \
  'A(i,j) = reduce(min, k, B(i,k) * C(k,j)) + D(i,j)' -g=B:d -g=C:d -g=D:d -d=B:4,3 -d=C:3,5 \
  -s='sequence()'
expect_fail sequence_both "sequence() and nosequence() in one schedule" \
  'A(i,j) = B(i,k) * C(k,j) + D(i,j)' -g=B:d -g=C:d -g=D:d -d=B:4,3 -d=C:3,5 \
  -s='sequence() nosequence()'
finish

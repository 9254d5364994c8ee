#!/usr/bin/env bash
# End-to-end tests of the tensorjit command line: kernels on real matrices
# and on random inputs checked against the reference interpreter (-check),
# result files that read back, the -time lines, every -print-* stage, and
# the default summary. Usage: bash tests/cli_basic.sh <tensorjit>
# (env TJ_DATA_DIR: the shared data folder; its cases skip visibly without it).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/util/cli_lib.sh"

SPMV='y(i) = A(i,j) * x(j)'
OK='^check: ok \(max abs error [0-9.e+-]+\)$'

# ---- real matrices ----
if have_data matrices/west0067.mtx "SpMV on west0067"; then
  M=$D/matrices/west0067.mtx
  expect spmv_west0067_csr "$OK" "$SPMV" -i=A:"$M" -g=x:d -check
  expect spmv_west0067_csc "$OK" "$SPMV" -f=A:ds:1,0 -i=A:"$M" -g=x:d -check
  expect spmv_west0067_mlir "$OK" "$SPMV" -f='A:(i,j) -> (i : dense, j : compressed)' \
    -i=A:"$M" -g=x:d -check
  expect spmv_west0067_dense "$OK" "$SPMV" -f=A:dd -i=A:"$M" -g=x:d -check
  expect spmv_west0067_nthreads "$OK" "$SPMV" -i=A:"$M" -g=x:d -nthreads=2 -check
  expect spmv_west0067_f32 "$OK" "$SPMV" -i=A:"$M" -t=A:f32 -t=x:f32 -t=y:f32 -g=x:d -check
  expect spmv_west0067_O0 "$OK" "$SPMV" -i=A:"$M" -g=x:d -O0 -no-vectorize \
    -no-llvm-vectorize -check
  expect spmm_west0067 "$OK" 'C(i,j) = A(i,k) * B(k,j)' -i=A:"$M" -g=B:d -d=j:8 -check
fi
if have_data matrices/cage8.mtx "SpMV on cage8"; then
  expect spmv_cage8 "$OK" "$SPMV" -i=A:"$D/matrices/cage8.mtx" -g=x:d -check
  expect spmv_cage8_time '^compute: ' "$SPMV" -i=A:"$D/matrices/cage8.mtx" -g=x:d -time=3
fi

# ---- random inputs ----
expect gemv_dense "$OK" "$SPMV" -g=A:d -g=x:d -d=A:37,23 -check
expect gemm_dense "$OK" 'C(i,j) = A(i,k) * B(k,j)' -g=A:d -g=B:d -d=i:17 -d=k:9 -d=j:13 -check
expect spmm "$OK" 'C(i,j) = A(i,k) * B(k,j)' -f=A:ds -g=A:s:0.1 -g=B:d -d=A:50,40 -d=j:30 -check
expect spmm_powerlaw "$OK" 'C(i,j) = A(i,k) * B(k,j)' -f=A:ds -g=A:p:0.05 -g=B:d \
  -d=A:64,64 -d=j:16 -check
expect sparse_add_sparse_out "$OK" 'C(i,j) = A(i,j) + B(i,j)' -f=A:ds -f=B:ds -f=C:ds \
  -g=A:s:0.1 -g=B:s:0.1 -d=A:50,40 -check
# += into sparse outputs: the old pattern joined with the rhs's (tests/check_outputs.c
# pins the values by hand)
for f in ds ss uq ds:1,0; do
  expect "accumulate_sparse_out_$f" "$OK" 'A(i,j) += B(i,j) * c(j)' -f=A:$f -f=B:ds -g=A:s:0.1 \
    -g=B:s:0.1 -g=c:d -d=A:50,40 -check
done
# += SpGEMM into every sparse output format: the product runs into a temporary
# whose kernel stores exactly its pattern (a CSR one for CSC and COO outputs),
# so A stores the union and no other cell. By hand (tests/check_outputs.c too):
#   A = [1 0 0; 0 0 5; 0 0 0], B = [1 2 0; 0 0 0; 0 0 4], C = [0 1 0; 3 0 0; 0 0 0]
#   A + B*C = [7 1 0; 0 0 5; 0 0 0]: (1,1) 7, (1,2) 1, (2,3) 5 (1-based); row 3 empty
#   though B(3,3) is stored; `sd` stores rows 1 and 2 whole. The summary
#   lists every stored entry (0-based), stored zeros too.
mtx() { printf '%%%%MatrixMarket matrix coordinate real general\n3 3 %s\n' "$1"; shift; printf '%s\n' "$@"; }
mtx 2 '1 1 1' '2 3 5' >"$TMP/sa.mtx"
mtx 3 '1 1 1' '1 2 2' '3 3 4' >"$TMP/sb.mtx"
mtx 2 '1 2 1' '2 1 3' >"$TMP/sc.mtx"
for f in ds ss uq ds:1,0 do sd ss:1,0 uq:1,0; do
  expect "spgemm_accumulate_$f" "$OK" 'A(i,j) += B(i,k) * C(k,j)' -f=A:$f -f=B:ds -f=C:ds \
    -g=A:s:0.02 -g=B:s:0.02 -g=C:s:0.02 -d=A:120,90 -d=k:100 -check
  name="spgemm_accumulate_pattern_$f"
  want=$'(0,0) 7\n(0,1) 1\n(1,2) 5' nnz=3
  [ $f = sd ] && want=$'(0,0) 7\n(0,1) 1\n(0,2) 0\n(1,0) 0\n(1,1) 0\n(1,2) 5' nnz=6
  if ! out=$("$T" 'A(i,j) += B(i,k) * C(k,j)' -f=A:$f -i=A:"$TMP/sa.mtx" -i=B:"$TMP/sb.mtx" \
      -i=C:"$TMP/sc.mtx" 2>&1); then fail "$name" "exit status" "$out"
  elif ! grep -qE "^A: f64 3x3 $f nnz=$nnz\$" <<<"$out"; then fail "$name" "not nnz=$nnz" "$out"
  elif got=$(grep -E '^  \(' <<<"$out" | sed 's/^  //' | sort); [ "$got" != "$want" ]; then
    fail "$name" "stored entries differ" "$got"
  else pass "$name"; fi
done
expect accumulate_sparse_notation '^A\(i,j\) = A_old\(i,j\) \+ B\(i,j\) \* c\(j\)$' \
  'A(i,j) += B(i,j) * c(j)' -f=A:ds -f=B:ds -print-notation
BSR4=dsdd:0/4,1/4,0%4,1%4
expect bsr_output_union "$OK" 'A(i,j) = B(i,j) + C(i,j)' -f=A:$BSR4 -f=B:$BSR4 -f=C:$BSR4 \
  -d=A:10,13 -g=B:s:0.05 -g=C:s:0.05 -check
expect structured_output "$OK" 'O(i,j) = B(i,j) * U(i,k) * V(k,j)' -f=O:ddn2:0,1/4,1%4 \
  -f=B:ddn2:0,1/4,1%4 -d=O:6,10 -d=k:3 -g=B:s:0.5 -g=U:d -g=V:d -check
# -g=B:s keeps at most n per block also where the 2:4 level runs down the
# rows (it kept them only along the last dim: "the block holds 3 nonzeros").
expect structured_down_rows "$OK" 'y(i) = A(i,j) * x(j)' \
  '-f=A:(i,j) -> (i floordiv 4 : dense, j : dense, i mod 4 : structured[2, 4])' \
  -d=A:9,13 -g=A:s:0.5 -g=x:d -check
expect sparse_mul_sparse_out "$OK" 'C(i,j) = A(i,j) * B(i,j)' -f=A:ds -f=B:ds -f=C:ds \
  -g=A:s:0.3 -g=B:s:0.3 -d=A:20,30 -check
expect vector_add_sparse "$OK" 'z(i) = x(i) + y(i)' -f=x:s -f=y:s -f=z:s -g=x:s:0.2 \
  -g=y:s:0.2 -d=i:200 -check
expect dot_scalar "$OK" 'a = x(i) * y(i)' -f=x:s -g=x:s:0.1 -g=y:d -d=i:1000 -check
 expect semiring_minplus "$OK" 'y(i) = A(i,j) * x(j)' -f=A:ds -g=A:s:0.2 -g=x:d -d=A:40,30 \
  -semiring=min.plus -check
expect def_relu "$OK" 'y(i) = relu(A(i,j)) * x(j)' -f=A:ds -g=A:s:0.2 -g=x:d -d=A:40,30 \
  -def='relu(v) = max(v - 0.5, 0)' -check
expect reduce_max "$OK" 'y(i) = reduce(max, j, A(i,j) * x(j))' -f=A:ds -f=y:s -g=A:s:0.1 \
  -g=x:d -d=A:40,30 -check
# rows of ~30: the gather loop's masked tail folds by f, whose masked-off
# lanes must keep their accumulator (f(acc, 0) would add 1)
expect fold_masked_tail "$OK" 'y(i) = reduce(f, j, A(i,j) * x(j))' -f=A:ds -f=y:d \
  -def='f(x, y) = x + y + 1 identity -1 commutative associative' -g=A:s:0.5 -g=x:d \
  -d=A:50,61 -check
expect spgemm_nonordered "$OK" 'C(i,j) = A(i,k) * B(k,j)' -f=A:ds -f=B:ds -f=C:do -g=A:s:0.1 \
  -g=B:s:0.1 -d=A:30,20 -d=B:20,25 -check
expect spgemm "$OK" 'C(i,j) = A(i,k) * B(k,j)' -f=A:ds -f=B:ds -f=C:ds -g=A:s:0.1 \
  -g=B:s:0.1 -d=i:30 -d=k:40 -d=j:20 -check
expect mttkrp_random "$OK" 'A(i,j) = B(i,k,l) * C(k,j) * D(l,j)' -f=B:sss \
  -g=B:s:0.05 -d=B:30,20,10 -g=C:d -g=D:d -d=j:8 -check
expect ttv_random "$OK" 'A(i,j) = B(i,j,k) * c(k)' -f=B:sss -g=B:s:0.1 -d=B:10,12,14 \
  -g=c:d -check
expect int64 "$OK" "$SPMV" -t=A:i64 -t=x:i64 -t=y:i64 -f=A:ds -g=A:s:0.2 -g=x:d -d=A:20,30 -check
expect int32 "$OK" "$SPMV" -t=A:i32 -t=x:i32 -t=y:i32 -f=A:ds -g=A:s:0.2 -g=x:d -d=A:20,30 -check
expect accumulate "$OK" 'y(i) += A(i,j) * x(j)' -f=A:ds -g=A:s:0.2 -g=x:d -g=y:d -d=A:20,30 -check
expect seeded_same "$OK" "$SPMV" -f=A:ds -g=A:s:0.2 -g=x:d -d=A:20,30 -seed=42 -check

# MTTKRP on a real tensor: too large for the dense reference, so run and time it.
if have_data tensors/openflight.tns "MTTKRP on openflight"; then
  expect mttkrp_openflight '^compute: ' 'A(i,j) = B(i,k,l) * C(k,j) * D(l,j)' -f=B:sss \
    -i=B:"$D/tensors/openflight.tns" -g=C:d -g=D:d -d=j:16 -time=2
fi

# ---- -o writes a file that reads back ----
expect write_tns "$OK" "$SPMV" -f=A:ds -g=A:s:0.2 -g=x:d -d=A:20,30 -o=y:"$TMP/y.tns" -check
expect read_back_tns "$OK" 'z(i) = y(i)' -i=y:"$TMP/y.tns" -d=y:20 -o=z:"$TMP/z.tns" -check
if cmp -s "$TMP/y.tns" "$TMP/z.tns" && [ "$(wc -l <"$TMP/y.tns")" -ge 1 ]; then
  pass tns_round_trip
else
  fail tns_round_trip "y.tns and z.tns differ (or are empty)"
fi
expect write_mtx "$OK" 'C(i,j) = A(i,j) + B(i,j)' -f=A:ds -f=B:ds -f=C:ds -g=A:s:0.1 \
  -g=B:s:0.1 -d=A:15,25 -o=C:"$TMP/c.mtx" -check
expect read_back_mtx "$OK" 'E(i,j) = C(i,j)' -i=C:"$TMP/c.mtx" -d=C:15,25 -o=E:"$TMP/e.mtx" -check
if head -1 "$TMP/c.mtx" 2>/dev/null | grep -q '^%%MatrixMarket' && cmp -s "$TMP/c.mtx" "$TMP/e.mtx"; then
  pass mtx_round_trip
else
  fail mtx_round_trip "c.mtx is no Matrix Market file or differs from e.mtx"
fi
expect write_scalar '' 'a = x(i) * y(i)' -g=x:d -g=y:d -d=i:10 -o=a:"$TMP/a.tns"
if [ "$(wc -l <"$TMP/a.tns" 2>/dev/null)" = 1 ] && grep -qE '^-?[0-9.e+-]+$' "$TMP/a.tns"; then
  pass scalar_one_line
else
  fail scalar_one_line "a.tns is not one line holding a number" "$(cat "$TMP/a.tns" 2>&1)"
fi

# ---- summation scope, by hand: TACO's residual y = b - A x with A = I ----
printf '%%%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n2 2 1\n' > "$TMP/I.mtx"
printf '1 1\n2 2\n' > "$TMP/x12.tns"
printf '1 10\n2 20\n' > "$TMP/b1020.tns"
for expr in 'y(i) = b(i) - A(i,j) * x(j)' 'y(i) = b(i) - sum(j, A(i,j) * x(j))'; do
  rm -f "$TMP/res.tns"
  out=$("$T" -f=A:ds -f=x:d -f=b:d -i=A:"$TMP/I.mtx" -i=x:"$TMP/x12.tns" -i=b:"$TMP/b1020.tns" \
    -o=y:"$TMP/res.tns" "$expr" 2>&1)
  if [ "$(cat "$TMP/res.tns" 2>/dev/null)" = "$(printf '1 9\n2 18')" ]; then pass "residual: $expr"
  else fail "residual: $expr" "y is not (9, 18)" "$out$(cat "$TMP/res.tns" 2>/dev/null)"; fi
done
# sequence(): the residual as y = b, then y += -(A x), by hand and as printed
for sched in 'sequence()' 'sequence() parallelize(i)'; do
  rm -f "$TMP/res.tns"
  out=$("$T" -f=A:ds -f=x:d -f=b:d -i=A:"$TMP/I.mtx" -i=x:"$TMP/x12.tns" -i=b:"$TMP/b1020.tns" \
    -o=y:"$TMP/res.tns" -s="$sched" 'y(i) = b(i) - A(i,j) * x(j)' 2>&1)
  if [ "$(cat "$TMP/res.tns" 2>/dev/null)" = "$(printf '1 9\n2 18')" ]; then pass "residual_sequence: $sched"
  else fail "residual_sequence: $sched" "y is not (9, 18)" "$out$(cat "$TMP/res.tns" 2>/dev/null)"; fi
done
expect residual_sequence_cin '^sequence\(forall\(i, y\(i\) = b\(i\)\), forall\(i, forall\(j, y\(i\) \+= -\(A\(i,j\) \* x\(j\)\)\)\)\)$' \
  'y(i) = b(i) - A(i,j) * x(j)' -f=A:ds -g=A:s:0.2 -g=b:d -g=x:d -d=A:9,7 -s='sequence()' -print-cin
expect residual_cin '^forall\(i, where\(y\(i\) = b\(i\) - t_j, forall\(j, t_j \+= A\(i,j\) \* x\(j\)\)\)\)$' \
  'y(i) = b(i) - A(i,j) * x(j)' -f=A:ds -g=A:s:0.2 -g=b:d -g=x:d -d=A:9,7 -print-cin
# `+=` keeps y's contents: keep() tells it from `=`, whose y starts at 0
expect residual_keep_cin '^keep\(y, forall\(i, where\(y\(i\) \+= b\(i\) - t_j, forall\(j, t_j \+= A\(i,j\) \* x\(j\)\)\)\)\)$' \
  'y(i) += b(i) - A(i,j) * x(j)' -f=A:ds -g=A:s:0.2 -g=b:d -g=x:d -g=y:d -d=A:9,7 -print-cin
expect spmv_keep_cin '^keep\(y, forall\(i, forall\(j, y\(i\) \+= A\(i,j\) \* x\(j\)\)\)\)$' \
  'y(i) += A(i,j) * x(j)' -f=A:ds -g=A:s:0.2 -g=x:d -g=y:d -d=A:9,7 -print-cin
expect spmv_assign_cin '^forall\(i, forall\(j, y\(i\) \+= A\(i,j\) \* x\(j\)\)\)$' \
  'y(i) = A(i,j) * x(j)' -f=A:ds -g=A:s:0.2 -g=x:d -d=A:9,7 -print-cin
expect residual_notation '^y\(i\) = b\(i\) - sum\(j, A\(i,j\) \* x\(j\)\)$' \
  'y(i) = b(i) - A(i,j) * x(j)' -f=A:ds -g=A:s:0.2 -g=b:d -g=x:d -d=A:9,7 -print-notation
# a product distributes over its sums: MTTKRP stays one nest, B walked as stored
expect mttkrp_one_nest '^forall\(i, forall\(j, forall\(k, forall\(l, A\(i,j\) \+= B\(i,k,l\) \* C\(k,j\) \* D\(l,j\)\)\)\)\)$' \
  'A(i,j) = B(i,k,l) * C(k,j) * D(l,j)' -f=B:sss -g=B:s:0.05 -g=C:d -g=D:d -d=B:9,8,7 -d=j:16 -print-cin
expect gemm_plus_matrix "$OK" 'A(i,j) = B(i,k) * C(k,j) + D(i,j)' -g=B:d -g=C:d -g=D:d \
  -d=B:33,29 -d=C:29,31 -check
# GEMM plus a matrix: by default (from 1e8 flops: n = 368) A = D, then A += B C by GETT (one kernel); the
# same by loops, in parallel, on the C backend, as three statements, and denied
expect gemm_plus_sequence_cin '^sequence\(forall\(i, forall\(j, A\(i,j\) = D\(i,j\)\)\), forall\(i, forall\(j, forall\(k, A\(i,j\) \+= B\(i,k\) \* C\(k,j\)\)\)\)\)$' \
  'A(i,j) = B(i,k) * C(k,j) + D(i,j)' -g=B:d -g=C:d -g=D:d -d=B:400,400 -d=C:400,400 -print-cin
expect gemm_plus_sequence_gett '^  method: gett' 'A(i,j) = B(i,k) * C(k,j) + D(i,j)' -g=B:d -g=C:d \
  -g=D:d -d=B:9,7 -d=C:7,5 -s='sequence()' -print-gett
expect gemm_plus_small_one_nest '^forall\(i, forall\(j, where\(' 'A(i,j) = B(i,k) * C(k,j) + D(i,j)' \
  -g=B:d -g=C:d -g=D:d -d=B:9,7 -d=C:7,5 -print-cin
for sched in '' 'sequence() method(loops)' 'sequence() method(loops) parallelize(i)' \
             'sequence() reorder(i,k,j) vectorize(j,4)' 'nosequence()'; do
  for be in llvm c; do
    expect "gemm_plus_sequence[$sched][$be]" "$OK" 'A(i,j) = B(i,k) * C(k,j) + D(i,j)' -g=B:d \
      -g=C:d -g=D:d -d=B:33,29 -d=C:29,31 -nthreads=2 -backend=$be -s="$sched" -check
  done
done
expect gemm_plus_sequence_three "$OK" 'A(i,j) = B(i,k) * C(k,j) - E(i,l) * F(l,j) + D(i,j)' \
  -g=B:d -g=C:d -g=D:d -f=E:ds -g=E:s:0.3 -g=F:d -d=B:33,29 -d=C:29,31 -d=l:11 -check
expect gemm_plus_nosequence_cin '^forall\(i, forall\(j, where\(A\(i,j\) = t_k \+ D\(i,j\), forall\(k, t_k \+= B\(i,k\) \* C\(k,j\)\)\)\)\)$' \
  'A(i,j) = B(i,k) * C(k,j) + D(i,j)' -g=B:d -g=C:d -g=D:d -d=B:9,7 -d=C:7,5 -s='nosequence()' -print-cin
expect gemm_plus_sequence_i32 "$OK" 'A(i,j) = B(i,k) * C(k,j) + D(i,j)' -t=A:i32 -t=B:i32 -t=C:i32 \
  -t=D:i32 -g=B:d -g=C:d -g=D:d -d=B:17,13 -d=C:13,11 -s='sequence()' -check
# the residual's values under schedule directives, from -s= (precompute of
# the product into a named scalar; the sum's loop split by positions), and
# atomics, fuse and loops between a split's halves
for sched in 'precompute(A(i,j) * x(j), {}, acc)' 'pos(j, jp, A(i,j)) split(jp, j0, j1, 1)'; do
  rm -f "$TMP/res.tns"
  out=$("$T" -f=A:ds -f=x:d -f=b:d -i=A:"$TMP/I.mtx" -i=x:"$TMP/x12.tns" -i=b:"$TMP/b1020.tns" \
    -o=y:"$TMP/res.tns" -s="$sched" -nthreads=2 'y(i) = b(i) - A(i,j) * x(j)' 2>&1)
  if [ "$(cat "$TMP/res.tns" 2>/dev/null)" = "$(printf '1 9\n2 18')" ]; then pass "residual: $sched"
  else fail "residual: $sched" "y is not (9, 18)" "$out$(cat "$TMP/res.tns" 2>/dev/null)"; fi
done
expect precompute_cin '^forall\(i, where\(y\(i\) = acc \+ z\(i\), forall\(j, acc \+= A\(i,j\) \* x\(j\)\)\)\)$' \
  'y(i) = A(i,j) * x(j) + z(i)' -f=A:ds -g=A:s:0.2 -g=z:d -g=x:d -d=A:9,7 \
  -s='precompute(A(i,j) * x(j), {}, acc)' -print-cin
expect atomics_csc "$OK" "$SPMV" -f=A:ds:1,0 -g=A:s:0.3 -g=x:d -d=A:90,70 -nthreads=2 \
  -s='parallelize(j, atomics)' -check
expect atomics_llvm 'atomicrmw fadd' "$SPMV" -f=A:ds:1,0 -d=A:90,70 -s='parallelize(j, atomics)' -print-llvm
expect sddmm_taco_csr "$OK" 'A(i,j) = B(i,j) * C(i,k) * D(k,j)' -f=A:ds -f=B:ds -g=B:s:0.1 \
  -g=C:d -g=D:d -d=B:90,70 -d=k:16 -nthreads=2 \
  -s='split(i,i0,i1,16) pos(j,jpos,B(i,j)) split(jpos,jpos0,jpos1,8) reorder(i0,i1,jpos0,k,jpos1) parallelize(i0)' -check
expect sddmm_taco_csr_shaped 'the output is shaped like B' 'A(i,j) = B(i,j) * C(i,k) * D(k,j)' \
  -f=A:ds -f=B:ds -d=B:9,7 -d=k:4 \
  -s='split(i,i0,i1,4) pos(j,jpos,B(i,j)) split(jpos,jpos0,jpos1,2) reorder(i0,i1,jpos0,k,jpos1)' -print-c
expect residual_workspace "$OK" 'y(i) = b(i) - (B(i,j) + C(i,j)) * x(j)' -f=B:ds -f=C:ds \
  -g=B:s:0.2 -g=C:s:0.2 -g=x:d -g=b:d -d=B:90,70 -nthreads=2 \
  -s='precompute(B(i,j) + C(i,j), {j}, w) parallelize(i, dynamic)' -check
# a matrix workspace (GEMM plus a matrix: the producer takes the sum over k),
# the workspace's loops split, and partials of an inner reduction loop
expect gemm_plus_matrix_workspace "$OK" 'A(i,j) = B(i,k) * C(k,j) + D(i,j)' -f=B:ds -g=B:s:0.3 \
  -g=C:d -g=D:d -d=B:33,29 -d=C:29,31 -nthreads=2 \
  -s='precompute(B(i,k) * C(k,j), {i, j}, w) split(j, j0, j1, 8) vectorize(j1, 4)' -check
expect matrix_workspace_cin '^where\(forall\(i, forall\(j, A\(i,j\) = w\(i,j\) \+ D\(i,j\)\)\), forall\(i, forall\(j, forall\(k, w\(i,j\) \+= B\(i,k\) \* C\(k,j\)\)\)\)\)$' \
  'A(i,j) = B(i,k) * C(k,j) + D(i,j)' -d=B:9,7 -d=C:7,5 -s='precompute(B(i,k) * C(k,j), {i, j}, w)' -print-cin
expect inner_partials "$OK" "$SPMV" -f=A:ds -g=A:s:0.3 -g=x:d -d=A:9,700 -nthreads=2 \
  -s='parallelize(j, partials)' -check
expect fuse_spmv "$OK" "$SPMV" -f=A:ds -g=A:p:0.1 -g=x:d -d=A:90,70 -nthreads=2 \
  -s='fuse(i, j, f) pos(f, fp, A(i,j)) split(fp, f0, f1, 16) parallelize(f0, static, atomics)' -check
expect_fail fuse_in_sum_refused 'is summed over a subexpression, so its loop nests inside' \
  'y(i) = b(i) - A(i,j) * x(j)' -f=A:ds -d=A:9,7 -s='fuse(i, j, f)'
expect fuse_cin '^suchthat\(forall\(f0:parallel\(static\), forall\(f1, A\(i,j\) = B\(i,j\) \* 2\)\), fuse\(i, j, f\), split\(f, f0, f1, 8\)\)$' \
  'A(i,j) = B(i,j) * 2' -g=B:d -d=B:9,7 -s='fuse(i, j, f) split(f, f0, f1, 8) parallelize(f0, static)' -print-cin
expect split_halves_apart "$OK" 'C(i,k) = A(i,j) * B(j,k)' -f=A:ds -g=A:s:0.3 -g=B:d -d=A:21,17 -d=k:9 \
  -s='split(i, i0, i1, 4) pos(j, jp, A(i,j)) split(jp, j0, j1, 2) reorder(i0, i1, j0, k, j1) parallelize(i0, static)' -check

# ---- -time prints exactly three lines in the contract's format ----
out=$("$T" "$SPMV" -f=A:ds -g=A:s:0.1 -g=x:d -d=A:200,300 -time=5 2>&1)
if [ $? -eq 0 ] && [ "$(wc -l <<<"$out")" = 3 ] &&
   grep -qE '^compile: [0-9]+\.[0-9]+ ms \(parse [0-9.]+, setup [0-9.]+, lower [0-9.]+, llvm-ir [0-9.]+, optimize [0-9.]+, codegen [0-9.]+; thread cpu [0-9.]+: lower [0-9.]+, llvm-ir [0-9.]+, optimize [0-9.]+, codegen [0-9.]+\)$' <<<"$out" &&
   grep -qE '^assemble: [0-9]+\.[0-9]+ ms$' <<<"$out" &&
   grep -qE '^compute: [0-9]+\.[0-9]+ ms \(median of 5; min [0-9]+\.[0-9]+ ms, max [0-9]+\.[0-9]+ ms\)$' <<<"$out"; then
  pass time_format
else
  fail time_format "unexpected -time output" "$out"
fi
expect time_default_reps 'median of 10;' "$SPMV" -g=A:d -g=x:d -d=A:10,10 -time

# ---- compile latency (bench/README.md): a kernel function without loops is
# optnone (its loops are outlined); one with loops, and the outlined body, are not
attr_of() {  # attr_of <IR> <define-regex>: the attribute line of that function
  local n
  n=$(grep -E "$2" <<<"$1" | head -1 | grep -oE '#[0-9]+ (prefix|\{)' | grep -oE '#[0-9]+')
  [ -n "$n" ] && grep -E "^attributes $n = " <<<"$1"
}
out=$("$T" "$SPMV" -f=A:ds -g=A:s:0.1 -g=x:d -d=A:200,300 -print-llvm 2>&1)
main=$(attr_of "$out" '^define i32 @evaluate') par=$(attr_of "$out" '^define internal void @.*\.par0')
if grep -q optnone <<<"$main" && [ -n "$par" ] && ! grep -q optnone <<<"$par"; then
  pass optnone_loop_free_wrapper
else
  fail optnone_loop_free_wrapper "main: $main; par0: $par" "$out"
fi
out=$("$T" 'C(i,j) = A(i,j) + B(i,j)' -f=A:ds -f=B:ds -f=C:ds -g=A:s:0.1 -g=B:s:0.1 \
  -d=A:20,20 -print-llvm 2>&1)
main=$(attr_of "$out" '^define i32 @evaluate')
if [ -n "$main" ] && ! grep -q optnone <<<"$main"; then pass optnone_not_on_loops
else fail optnone_not_on_loops "main: $main" "$out"; fi
# ---- vector tiers wider than the extent of their index are not emitted ----
# (each tier counted once: the prefetch pass's copy of the loops for a big D
# repeats them)
# The tiers the host's registers allow (the JIT takes the host's features):
# 8 vectors of 8 doubles under AVX-512 (32 registers), 4 of 4 under AVX2.
MTTKRP='A(i,j) = B(i,k,l) * C(k,j) * D(l,j)'
if grep -qw avx512f /proc/cpuinfo; then HOST_TIERS='64 32 16 8'; else HOST_TIERS='16 8 4'; fi
for j in 8 16 100; do
  out=$("$T" "$MTTKRP" -f=B:sss -g=B:s:0.05 -g=C:d -g=D:d -d=B:9,8,7 -d=j:$j -print-compute 2>&1)
  tiers=$(grep -oE 'vector\([0-9]+\)' <<<"$out" | awk '!seen[$0]++' | tr '\n' ' ')
  want=$(for w in $HOST_TIERS; do if [ "$w" -le "$j" ]; then printf "vector(%s) " "$w"; fi; done)
  if [ "$tiers" = "$want" ]; then pass "mttkrp_tiers_j$j"; else fail "mttkrp_tiers_j$j" "tiers: $tiers" "$out"; fi
  expect "mttkrp_tiers_j${j}_check" "$OK" "$MTTKRP" -f=B:sss -g=B:s:0.05 -g=C:d -g=D:d -d=B:9,8,7 \
    -d=j:$j -check
done

# ---- TTV over a tensor of 16-bit positions, its compute split by B's rows ----
# (the driver reads B's level-0 positions at their width: it read them as
# 64-bit, past the end of a 2-entry 16-bit array)
TJ_PAR_MIN_WORK=0 expect ttv_narrow_positions_2threads "$OK" 'A(i,j) = B(i,j,k) * c(k)' \
  -f='B:(i,j,k) -> (i : compressed, j : compressed, k : compressed), posWidth = 16, crdWidth = 16' \
  -f=A:ss -g=B:s:0.3 -g=c:d -d=B:12,5,7 -nthreads=2 -time=2 -check

# ---- a GETT choice timed at the first run is kept in the disk cache ----
# Each run is a new process: the second takes the method the first timed,
# from its .gett file; a damaged file is refused and timed again; another
# thread count is another choice; so is a GETT statement of a sequence.
GEMM=(-g=A:d -g=B:d -d=a:400 -d=c:300 -d=b:150 -check 'C(a,b) = A(a,c) * B(c,b)')
export TJ_GETT_VERBOSE=1
TJ_CACHE_DIR=$TMP/gett expect gett_disk_first 'GETT timed methods 0x[0-9a-f]+ \(.*\), chose [a-z]+$' "${GEMM[@]}"
chosen=$(TJ_CACHE_DIR=$TMP/gett "$T" "${GEMM[@]}" 2>&1 | sed -n 's/.*GETT method \([a-z]*\) from the disk cache.*/\1/p')
first=$(TJ_CACHE_DIR=$TMP/gett2 "$T" "${GEMM[@]}" 2>&1 | sed -n 's/.*chose \([a-z]*\)$/\1/p')
second=$(TJ_CACHE_DIR=$TMP/gett2 "$T" "${GEMM[@]}" 2>&1 | sed -n 's/.*GETT method \([a-z]*\) from the disk cache.*/\1/p')
if [ -n "$first" ] && [ "$first" = "$second" ] && [ -n "$chosen" ]; then pass gett_disk_second_run
else fail gett_disk_second_run "timed '$first', then '$second' from disk (and '$chosen')"; fi
for f in "$TMP"/gett/*.gett; do truncate -s 20 "$f"; done
TJ_CACHE_DIR=$TMP/gett expect gett_disk_damaged 'ignoring kernel cache file .*\.gett: truncated header' "${GEMM[@]}"
TJ_CACHE_DIR=$TMP/gett expect gett_disk_rewritten 'GETT method [a-z]+ from the disk cache' "${GEMM[@]}"
out=$(TJ_CACHE_DIR=$TMP/gett "$T" "${GEMM[@]}" -nthreads=1 2>&1)
if grep -q 'GETT timed methods' <<<"$out" && [ "$(ls "$TMP"/gett/*.gett | wc -l)" -eq 2 ]; then
  pass gett_disk_per_threads
else fail gett_disk_per_threads "1 thread did not time its own choice" "$out"; fi
# a GETT statement of a sequence keeps its choice the same way
SEQ=(-g=B:d -g=C:d -g=D:d -d=A:400,300 -d=k:150 -s='sequence()' -check
     'A(i,j) = B(i,k) * C(k,j) + D(i,j)')
TJ_CACHE_DIR=$TMP/gseq expect gett_disk_sequence_first 'GETT timed methods 0x[0-9a-f]+ \(.*\), chose [a-z]+$' "${SEQ[@]}"
TJ_CACHE_DIR=$TMP/gseq expect gett_disk_sequence_second 'GETT method [a-z]+ from the disk cache' "${SEQ[@]}"
unset TJ_GETT_VERBOSE

# ---- every stage prints something recognizable ----
P=(-f=A:ds -d=A:100,200)
expect print_notation '^y\(i\) = A\(i,j\) \* x\(j\)$' "$SPMV" "${P[@]}" -print-notation
expect print_cin 'forall\(i' "$SPMV" "${P[@]}" -print-cin
expect print_lattice '^j: ' "$SPMV" "${P[@]}" -print-lattice
expect print_assembly 'int32_t assemble\(' "$SPMV" "${P[@]}" -print-assembly
expect print_compute 'int32_t compute\(' "$SPMV" "${P[@]}" -print-compute
expect print_c 'int32_t evaluate\(' "$SPMV" "${P[@]}" -print-c
expect print_llvm '^define ' "$SPMV" "${P[@]}" -print-llvm
expect print_llvm_opt '^define ' "$SPMV" "${P[@]}" -print-llvm-opt
expect print_asm '^evaluate[A-Za-z0-9_]*:' "$SPMV" "${P[@]}" -print-asm
expect print_two '^--- cin ---$' "$SPMV" "${P[@]}" -print-cin -print-c
expect print_no_dims 'int32_t evaluate\(' "$SPMV" -f=A:ds -print-c
# the loop IR after each pass: GEMM's nest gains block loops, then vector
# loops (tiers of <8 x double>), then jammed rows
G=('A(i,j) = B(i,k) * C(k,j)' -d=B:40,300 -d=C:300,300 -s='method(loops)')
expect after_lower '^int32_t evaluate\(' "${G[@]}" -print-after=lower
expect after_tile '_blk[0-9]+ \+= 256' "${G[@]}" -print-after=tile
# (4 registers of the host's width: 32 doubles under AVX-512, 8 under AVX2)
if grep -qw avx512f /proc/cpuinfo; then GEMM_TIER=32; else GEMM_TIER=8; fi
expect after_vectorize "vector\\($GEMM_TIER\\)" "${G[@]}" -print-after=vectorize
expect after_unroll_jam 'int32_t evaluate\(' "${G[@]}" -print-after=unroll-jam
# A pure dense contraction goes to GETT (the plan, then the runtime call);
# method() forces another method, and the result checks either way
expect print_gett 'I_m = \{j\}  I_n = \{i\}  I_k = \{k\}' 'A(i,j) = B(i,k) * C(k,j)' -d=B:40,300 -d=C:300,300 -print-gett
expect gett_compute 'tj_rt_gett\(operands' 'A(i,j) = B(i,k) * C(k,j)' -d=B:40,300 -d=C:300,300 -print-compute
expect gett_ttgt_check 'check: ok' 'A(i,j,l) = B(l,k,i) * C(k,j)' -d=B:7,13,11 -d=C:13,9 -g=B:d -g=C:d -s='method(ttgt)' -check
expect_fail gett_method_unknown 'method(blas): unknown method' 'A(i,j) = B(i,k) * C(k,j)' -d=B:4,4 -d=C:4,4 -s='method(blas)' 
expect_fail after_unknown "no pass 'inline' (lower, tile, promote, vectorize, unroll-jam, peel, prefetch)" "${G[@]}" -print-after=inline
expect write_source '' "$SPMV" "${P[@]}" -write-source="$TMP/k.c"
if grep -q 'int32_t evaluate(' "$TMP/k.c" 2>/dev/null; then pass write_source_file
else fail write_source_file "k.c lacks 'int32_t evaluate('"; fi

# The C rendering is valid C against runtime/abi.h for every kernel shape:
# register-blocked dense GEMM (tiled, tiered vector loops, jammed rows),
# SpMM's vector loop, SpGEMM's workspace, sparse add's merge loops.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CC_C=$(command -v clang-19 || command -v cc || true)
n=0
for k in "A(i,j) = B(i,k) * C(k,j)|-d=B:40,30 -d=C:30,70" \
         "C(i,j) = A(i,k) * B(k,j)|-f=A:ds -d=A:40,30 -d=B:30,64" \
         "A(i,j) = B(i,k) * C(k,j)|-f=A:ds -f=B:ds -f=C:ds -d=B:40,30 -d=C:30,20" \
         "A(i,j) = B(i,j) + C(i,j)|-f=A:ds -f=B:ds -f=C:ds -d=B:40,30"; do
  n=$((n + 1))
  # shellcheck disable=SC2086
  "$T" ${k#*|} -write-source="$TMP/c$n.c" "${k%%|*}" >/dev/null 2>&1
  if [ -z "$CC_C" ]; then pass "c_rendering_$n (no C compiler: skipped)"
  elif out=$("$CC_C" -std=c11 -fsyntax-only -I "$ROOT" "$TMP/c$n.c" 2>&1); then pass "c_rendering_$n"
  else fail "c_rendering_$n" "${k%%|*} does not compile as C" "$out"; fi
done

# ---- the C backend: the C rendering built by $CC (else cc) and dlopen'ed ----
if command -v "${CC:-cc}" >/dev/null 2>&1; then
  expect backend_c_spmv "$OK" "$SPMV" -backend=c -f=A:ds -g=A:s:0.1 -g=x:d -d=A:50,40 -check
  expect backend_c_spgemm "$OK" 'A(i,j) = B(i,k) * C(k,j)' -backend=c -f=A:ds -f=B:ds -f=C:ds \
    -g=B:s:0.1 -g=C:s:0.1 -d=B:40,30 -d=C:30,20 -nthreads=2 -check
  expect backend_c_gemm "$OK" 'C(i,j) = A(i,k) * B(k,j)' -backend=c -g=A:d -g=B:d -d=i:17 \
    -d=k:9 -d=j:13 -check
  expect backend_c_print_c '^void tj_c_bind_helpers\(' "$SPMV" -backend=c "${P[@]}" -print-c
  expect backend_c_print_asm '^evaluate:' "$SPMV" -backend=c "${P[@]}" -print-asm
  expect backend_llvm_flag "$OK" "$SPMV" -backend=llvm -f=A:ds -g=A:s:0.1 -g=x:d -d=A:50,40 -check
else
  echo "SKIP backend_c: no C compiler ('${CC:-cc}')"
fi

# ---- summary, help, version ----
expect summary_compile '^compile: [0-9.]+ ms$' "$SPMV" "${P[@]}"
expect summary_tensors '^  A +100x200 +ds +f64' "$SPMV" "${P[@]}"
expect summary_result '^y: f64 20 d nnz=20$' "$SPMV" -f=A:ds -g=A:s:0.2 -g=x:d -d=A:20,30
expect summary_elided '^  \.\.\. \(80 more\)$' "$SPMV" -g=A:d -g=x:d -d=A:100,5
expect help '^usage: tensorjit' --help
expect help_single_dash '^usage: tensorjit' -help
expect version '^tensorjit [0-9]+\.[0-9]+\.[0-9]+$' --version

# Loop rewrites of the schedule (-s=): TACO's SpMV schedule and a pos-split
# row loop of DCSR on 2 threads, against the reference.
expect schedule_split_spmv "$OK" "$SPMV" -g=A:s:0.1 -d=A:200,150 -g=x:d -nthreads=2 \
  -s='split(i, i0, i1, 16) reorder(i0, i1, j) parallelize(i0, static)' -check
expect schedule_pos_split_rows "$OK" "$SPMV" -f=A:ss -g=A:s:0.05 -d=A:200,150 -g=x:d \
  -nthreads=2 -s='pos(i, ip, A(i,j)) split(ip, i0, i1, 8) parallelize(i0, dynamic)' -check

# A parallel loop whose weighed units are its innermost trips (SpMV's rows
# and entries) is marked light, so the runtime shares it only from twice the
# work; SpMM's entries hold a loop, so it is not.
expect par_light_spmv 'TJ_PAR_DEFAULT \| TJ_PAR_LIGHT, evaluate_par[0-9]' "$SPMV" -f=A:ds -g=A:s:0.1 \
  -d=A:200,150 -g=x:d -nthreads=2 -s='parallelize(i)' -print-c
expect par_heavy_spmm 'A1_pos, \(int32_t\)sizeof \*A1_pos, 0, 0, TJ_PAR_DEFAULT, evaluate_par0' \
  'C(i,j) = A(i,k) * B(k,j)' -f=A:ds -g=A:s:0.1 -g=B:d -d=A:50,40 -d=j:30 -nthreads=2 \
  -s='parallelize(i)' -print-c

# TJ_PERF_MAP=1: each kernel's functions go to /tmp/perf-<pid>.map as
# "start size name" lines (hex), the evaluate kernel among them.
TJ_PERF_MAP=1 "$T" "$SPMV" -g=A:s -g=x:d -d=A:50,40 >/dev/null 2>&1 & perf_pid=$!
wait $perf_pid
perf_map=/tmp/perf-$perf_pid.map
if grep -qE '^[0-9a-f]+ [0-9a-f]+ evaluate_tj[0-9a-f]+$' "$perf_map" 2>/dev/null; then
  pass perf_map_names_kernels
else
  fail perf_map_names_kernels "no evaluate line in $perf_map" "$(cat "$perf_map" 2>&1)"
fi
rm -f "$perf_map"

finish

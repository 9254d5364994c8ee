#!/usr/bin/env bash
# The tensorjit REPL driven by scripts piped into it: loading, random and
# empty tensors, expressions evaluated and checked, stage views, timing,
# saving, and errors that leave the session and its tensors intact.
# Usage: bash tests/cli_repl.sh <tensorjit>  (env TJ_DATA_DIR optional).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/util/cli_lib.sh"

# repl_expect NAME SCRIPT STATUS PATTERN...: pipes SCRIPT into `tensorjit
# -repl`, expects exit STATUS and each extended regex PATTERN to match a line.
repl_expect() {
  local name=$1 script=$2 want=$3; shift 3
  local out rc pat
  out=$(printf '%s\n' "$script" | "$T" -repl 2>&1); rc=$?
  if [ "$rc" != "$want" ]; then fail "$name" "exit status $rc, expected $want" "$out"; return; fi
  for pat in "$@"; do
    if ! grep -qE -- "$pat" <<<"$out"; then fail "$name" "no line matches /$pat/" "$out"; return; fi
  done
  pass "$name"
}

if have_data matrices/west0067.mtx "REPL on west0067 (using a random matrix instead)"; then
  LOAD_A="A = load(\"$D/matrices/west0067.mtx\", \"ds\")"
else
  LOAD_A='A = random(67, 67, "ds", 0.07)'
fi

SESSION="# SpMV, checked, viewed, timed and saved
$LOAD_A
x = random(67, \"d\")
y(i) = A(i,j) * x(j)
:check
info y
print y 3
:cin
:ir
:llvm
:asm
:time 4
save y \"$TMP/y.tns\"
list
:quit"
repl_expect spmv_session "$SESSION" 0 \
  '^y: order 1, dims 67, format d, f64, nnz 67, [0-9]+ bytes$' \
  '^check: ok \(max abs error' \
  '^y: f64 67 d nnz=67$' '^  \.\.\. \(64 more\)$' \
  '^forall\(i' 'int32_t evaluate\(' '^define ' \
  '^compute: [0-9.]+ ms \(median of 4; min [0-9.]+ ms, max [0-9.]+ ms\)$' \
  '^A: order 2, dims 67x67, format ds, f64'
if [ "$(wc -l <"$TMP/y.tns" 2>/dev/null)" = 67 ]; then pass repl_saved_file
else fail repl_saved_file "y.tns does not hold 67 lines"; fi

SPARSE='B = random(30, 40, "ds", 0.1)
C = random(30, 40, "ds", 0.1)
format Z "ds"
Z(i,j) = B(i,j) + C(i,j)
:check
info Z
W(i,j) = B(i,k) * D(k,j)
D = random(40, 5, "dd")
W(i,j) = B(i,k) * D(k,j)
:check
a = D(i,j) * D(i,j)
:check
e = zeros(3, 4, "ds")
info e
dtype f f32
f = random(10, "d")
info f
format D "ds"
info D'
repl_expect sparse_session "$SPARSE" 1 \
  '^Z: order 2, dims 30x40, format ds, f64' \
  "^error: no tensor named 'D'" \
  '^W: order 2, dims 30x5, format dd, f64' \
  '^a = [0-9]' \
  '^e: order 2, dims 3x4, format ds, f64, nnz 0' \
  '^f: order 1, dims 10, format d, f32' \
  '^D: order 2, dims 40x5, format ds, f64'
n=$(printf '%s\n' "$SPARSE" | "$T" -repl 2>&1 | grep -c '^check: ok')
if [ "$n" = 3 ]; then pass sparse_session_checks; else fail sparse_session_checks "$n of 3 checks ok"; fi

ERRORS='x = random(10, "d")
bogus
:bogus
y(i) = nope(i)
x = random(10, "zz")
x = load("/nonexistent/m.mtx")
print nope
save x "/nonexistent/x.tns"
:time
y(i) = x(i) *
z = random(3, "d", 7)
info x
y(i) = x(i) * 2
print y 2'
repl_expect errors_keep_session "$ERRORS" 1 \
  "^error: unknown command 'bogus'" "^error: unknown command ':bogus'" \
  "^error: no tensor named 'nope'" "^error: bad level letter 'z'|^error: .*zz" \
  '^error: load: .*nonexistent/m\.mtx' '^error: save: .*cannot open' \
  '^error: no kernel yet' '^error: compile: .*expected an expression' \
  "^error: .*density 7 is not in \(0, 1\]" \
  '^x: order 1, dims 10, format d, f64, nnz 10' \
  '^y: f64 10 d nnz=10$'

repl_expect quit_stops 'x = random(3, "d")
:quit
print x' 0 '^x: order 1'
if printf 'x = random(3, "d")\n:quit\nprint x\n' | "$T" -repl 2>&1 | grep -q '^x: f64'; then
  fail quit_stops_reading "commands after :quit ran"
else
  pass quit_stops_reading
fi
# The residual y = b - A x, by hand (A = I, x = (1, 2), b = (10, 20)).
printf '%%%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n2 2 1\n' > "$TMP/I.mtx"
printf '1 1\n2 2\n' > "$TMP/x.tns"
printf '1 10\n2 20\n' > "$TMP/b.tns"
RESIDUAL="A = load(\"$TMP/I.mtx\", \"ds\")
x = load(\"$TMP/x.tns\", \"d\")
b = load(\"$TMP/b.tns\", \"d\")
y(i) = b(i) - A(i,j) * x(j)
print y
:cin"
repl_expect residual "$RESIDUAL" 0 '^  \(0\) 9$' '^  \(1\) 18$' 'where\(y\(i\) = b\(i\) - t_j'
# the same as a sequence (:schedule applies to the next kernel): y = b, then y += -(A x)
RESIDUAL_SEQ="A = load(\"$TMP/I.mtx\", \"ds\")
x = load(\"$TMP/x.tns\", \"d\")
b = load(\"$TMP/b.tns\", \"d\")
:schedule sequence()
y(i) = b(i) - A(i,j) * x(j)
print y
:cin"
repl_expect residual_sequence "$RESIDUAL_SEQ" 0 '^  \(0\) 9$' '^  \(1\) 18$' \
  '^sequence\(forall\(i, y\(i\) = b\(i\)\), forall\(i, forall\(j, y\(i\) \+= -\(A\(i,j\) \* x\(j\)\)\)\)\)$'

repl_expect help ':help' 0 '^  :time \[reps\]' 'load\('

# The C backend for the kernels after :backend c; the LLVM one after :backend llvm.
if command -v "${CC:-cc}" >/dev/null 2>&1; then
  repl_expect backend_c ':backend c
A = random(30, 20, "ds", 0.2)
x = random(20, "d")
y(i) = A(i,j) * x(j)
:check
:ir
:llvm
:backend llvm
y(i) = A(i,j) * x(j)
:llvm' 1 '^backend: c$' '^check: ok' '^void tj_c_bind_helpers\(' \
    'error: .*the C backend has no LLVM IR stage' '^backend: llvm$' '^define .*@evaluate'
else
  echo "SKIP backend_c: no C compiler ('${CC:-cc}')"
fi
# drop frees the tensor and keeps the others (fuzz_repl found it reading
# the freed tensor's name; the ASan build catches a regression).
repl_expect drop_keeps_others 'a = random(2, "d")
b = random(3, "d")
c = random(4, "d")
drop a
list
drop c
list
info a' 1 '^c: order 1, dims 4' '^b: order 1, dims 3' "error: no tensor named 'a'"
# blocked tensors made by random, a BSR output (union, +=) and a 2:4 one
repl_expect blocked_outputs 'A = random(9, 7, "dsdd:0/2,1/2,0%2,1%2", 0.2)
B = random(9, 7, "dsdd:0/2,1/2,0%2,1%2", 0.2)
format C "dsdd:0/2,1/2,0%2,1%2"
C(i,j) = A(i,j) + B(i,j)
:check
C(i,j) += A(i,j) * 2
:check
W = random(4, 10, "ddn2:0,1/4,1%4", 0.5)
format O "ddn2:0,1/4,1%4"
O(i,j) = W(i,j) * 3
:check' 0 '^A: order 2, dims 9x7, format dsdd:0/2,1/2,0%2,1%2' \
  '^C: order 2, dims 9x7, format dsdd:0/2,1/2,0%2,1%2' '^O: order 2, dims 4x10, format ddn2' \
  '^check: ok'
repl_expect backend_bad ':backend gcc' 1 ':backend gcc: the backend must be llvm or c'
# :semiring and :def set what the following compiles use and say so (their
# values are pinned in check_semantics and semantics_numpy.py).
repl_expect semiring_and_def 'A = zeros(2, 2, "ds")
:semiring min.plus
:def relu(v) = max(v - 11.5, 0)
:def
y = zeros(2)
' 0 '^semiring: min\.plus$' '^definitions: relu\(v\) = max\(v - 11\.5, 0\)$'
# += into a CSR that holds entries: its pattern joined with B's, its values
# added to (A(0,0) 1 + 2*3, A(1,1) 4 alone, A(0,1) 5 new), :check from the
# output as it was before the run.
printf '%%%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n2 2 4\n' >"$TMP/acc_a.mtx"
printf '%%%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 3\n1 2 2.5\n' >"$TMP/acc_b.mtx"
repl_expect accumulate_sparse "A = load(\"$TMP/acc_a.mtx\")
B = load(\"$TMP/acc_b.mtx\")
A(i,j) += 2 * B(i,j)
print A
:check
:notation" 0 '^A: order 2, dims 2x2, format ds, f64, nnz 3' '^  \(0,0\) 7$' '^  \(0,1\) 5$' \
  '^  \(1,1\) 4$' '^check: ok' '^A\(i,j\) = A_old\(i,j\) \+ 2 \* B\(i,j\)$'
# A session holds as many tensors as memory allows (it once stopped at 64).
MANY=$(for i in $(seq 0 199); do printf 't%d = random(3, "d")\n' "$i"; done)
repl_expect many_tensors "$MANY
s(i) = t0(i) + t199(i)
:check
list" 0 '^check: ok' '^t199: order 1, dims 3' '^t0: order 1, dims 3'
if out=$(printf 'x = random(2, "d")\n' | "$T" 2>&1) && grep -q '^x: order 1' <<<"$out"; then
  pass no_expression_is_repl
else
  fail no_expression_is_repl "tensorjit with no arguments did not read commands" "$out"
fi

# Loop rewrites through :schedule: the notation under the new names, the
# values against the reference, and a refusal that names the fix.
LOOPS='A = random(40, 30, "ds", 0.2)
x = random(30, "d")
:schedule pos(j, jp, A(i,j)) split(jp, j0, j1, 4) split(i, i0, i1, 8) parallelize(i0, static)
y(i) = A(i,j) * x(j)
:cin
:check
:schedule split(j, j0, j1, 4)
y(i) = A(i,j) * x(j)'
repl_expect schedule_loop_rewrites "$LOOPS" 1 \
  '^suchthat\(forall\(i0:parallel\(static\), forall\(i1, forall\(j0, forall\(j1, y\(i\) \+= A\(i,j\) \* x\(j\)\)\)\)\), split\(i, i0, i1, 8\), pos\(j, jp, A\(i,j\)\), split\(jp, j0, j1, 4\)\)$' \
  '^check: ok' \
  'split its positions: pos\(j, jp, \.\.\.\) first'

# precompute, fuse and atomics through :schedule, values against the reference
SCHED='A = random(40, 30, "ds", 0.2)
x = random(30, "d")
b = random(40, "d")
:schedule precompute(A(i,j) * x(j), {}, t)
y(i) = b(i) - A(i,j) * x(j)
:cin
:check
:schedule fuse(i, j, f) pos(f, fp, A(i,j)) split(fp, f0, f1, 16) parallelize(f0, static, atomics)
y(i) = A(i,j) * x(j)
:cin
:check'
repl_expect schedule_precompute_fuse "$SCHED" 0 \
  '^forall\(i, where\(y\(i\) = b\(i\) - t, forall\(j, t \+= A\(i,j\) \* x\(j\)\)\)\)$' \
  '^suchthat\(forall\(f0:parallel\(static, atomics\), forall\(f1, y\(i\) \+= A\(i,j\) \* x\(j\)\)\), fuse\(i, j, f\), pos\(f, fp, A\(i,j\)\), split\(fp, f0, f1, 16\)\)$' \
  '^check: ok'

# :check against an infinite reference value: y(i) = A(i,j) * x(j) under
# min.plus over a 3x3 A with all but 2 of 9 entries, then A emptied: the
# reference gives +inf in every row (nothing reached), the stale y holds
# finite sums. It said "check: ok (max abs error inf)" (the tolerance
# 1e-9 * (1 + |want|) is infinite there), hiding wrong min.plus answers
# (random_schedules seed 511).
repl_expect check_infinite_reference ':semiring min.plus
A = random(3, 3, "ds", 0.9)
x = random(3)
y(i) = A(i,j) * x(j)
A = zeros(3, 3, "ds")
:check' 1 'error: check failed: y\([0-9]\) is [0-9.e+-]+ but the reference gives inf'

# A :def the library refuses (a taken name, a body naming a non-parameter)
# is refused at once and the session keeps its definitions: it was added
# and every later compile failed, even of expressions not calling it.
# After a failed expression, :check says which kernel it checks.
repl_expect def_refused_and_stale_kernel 'x = random(4)
:def relu(x) = max(x, 0)
:def relu(x) = max(x, 1)
:def bad(x) = q + 1
:def
y(i) = relu(x(i)) * 2
z(i) = x(j)
:check' 1 \
  "^error: :def: 1:1: 'relu' is already a function" \
  "^error: :def: 1:10: bad: 'q' is not a parameter" \
  '^definitions: relu\(x\) = max\(x, 0\)$' '^y: order 1' \
  '^note: the last expression failed; this is the kernel of y\(i\) = relu\(x\(i\)\) \* 2$' \
  '^check: ok'

finish

#!/usr/bin/python3
"""End-to-end semantics of the tensorjit CLI, checked against numpy/scipy.

Every expected value here is computed by numpy from the same inputs, never
by tensorjit's reference interpreter, so a misconception shared by the
kernels and the interpreter (which -check cannot see) still fails here.

Usage: /usr/bin/python3 tests/semantics_numpy.py <tensorjit> [name-filter]

Each case writes its inputs to a temporary directory (matrices as Matrix
Market .mtx, vectors, scalars and order-3 tensors as FROSTT .tns: the CLI
reads an n x 1 .mtx as an order-2 tensor, so vectors must be .tns), runs
one tensorjit command with -i=T:file -o=T:file, reads the output file back
and compares it with numpy. A failing case prints the exact command line,
the expected and the got values; the temporary directory is then kept so
the command can be rerun. The last line is a one-line summary; the exit
status is nonzero when any case failed. Prints SKIP and exits 0 only when
numpy or scipy cannot be imported.

Environment: TJ_SEMANTICS_TIMEOUT (seconds per tensorjit command, default
6; a timeout is a failure, and a wide-union family skips its larger k after
one, with a NOTE) and TJ_SEMANTICS_JOBS (test functions run in parallel,
default min(4, cores)), TJ_SEMANTICS_UNION_BUDGET (seconds one wide-union
family may take, default 20; exceeding it is a failure and skips the rest),
TJ_SEMANTICS_SAMPLE (n: run the cases whose name hashes (CRC-32) to 0 mod n,
a fixed subset of about 1 in n, for slow builds such as ThreadSanitizer's;
default 1, every case; the summary counts the cases left out).
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

try:
    import numpy as np
    import scipy.sparse as sp
except ImportError as e:  # pragma: no cover
    print(f"SKIP semantics_numpy: numpy/scipy not importable ({e})")
    sys.exit(0)

TJ = None          # path of the tensorjit binary (argv[1])
TMP = None         # scratch directory for inputs and outputs
FILTER = None      # optional substring filter on case names (argv[2])
TIMEOUT = float(os.environ.get("TJ_SEMANTICS_TIMEOUT", "6"))  # s per command
UNION_BUDGET = float(os.environ.get("TJ_SEMANTICS_UNION_BUDGET", "20"))  # s per family
JOBS = int(os.environ.get("TJ_SEMANTICS_JOBS", str(min(4, os.cpu_count() or 1))))
SAMPLE = max(1, int(os.environ.get("TJ_SEMANTICS_SAMPLE", "1")))
STATS = {"run": 0, "failed": 0, "skipped": 0, "sampled_out": 0}
NOTES = []
_lock = threading.Lock()     # STATS, NOTES and the directory counter
_counter = [0]
_out = threading.local()     # per-test output buffer (tests run in a pool)


def say(msg):
    _out.buf.append(msg)


def count(key):
    with _lock:
        STATS[key] += 1

# Formats exercised for a matrix / vector operand.
MAT_FMTS = ["dd", "ds", "ds:1,0", "ss", "uq"]
VEC_FMTS = ["d", "s"]


# ---------------------------------------------------------------- data ----

def rng_for(seed):
    return np.random.default_rng(seed)


def rand_dense(rng, *shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape)


def rand_sparse(rng, m, n, density, empty_rows=(), ints=False):
    """Dense ndarray holding a random sparse m x n pattern; the rows listed
    in empty_rows (negative = from the end) hold no entries."""
    mask = rng.random((m, n)) < density
    for r in empty_rows:
        mask[r, :] = False
    if ints:
        vals = rng.integers(1, 6, size=(m, n)) * rng.choice([-1, 1], size=(m, n))
        return np.where(mask, vals, 0).astype(np.int64)
    return np.where(mask, rng.uniform(-2.0, 2.0, size=(m, n)), 0.0)


def rand_sparse_vec(rng, n, density, ints=False):
    v = rand_sparse(rng, 1, n, density, ints=ints)[0]
    if not v.any():          # an all-zero .tns file has no order; keep one entry
        v[rng.integers(n)] = 1
    return v


def rand_sparse3(rng, shape, density):
    mask = rng.random(shape) < density
    return np.where(mask, rng.uniform(-2.0, 2.0, size=shape), 0.0)


# ------------------------------------------------------------- file io ----

def _fmt_val(v, ints):
    return str(int(v)) if ints else repr(float(v))


def write_mtx(path, M):
    """M: a 2-D ndarray or scipy sparse matrix; its nonzeros, 1-based,
    `coordinate real|integer general`."""
    C = sp.coo_matrix(M)
    ints = np.issubdtype(C.dtype, np.integer)
    with open(path, "w") as f:
        f.write("%%%%MatrixMarket matrix coordinate %s general\n"
                % ("integer" if ints else "real"))
        f.write(f"{C.shape[0]} {C.shape[1]} {C.nnz}\n")
        for i, j, v in zip(C.row, C.col, C.data):
            f.write(f"{i + 1} {j + 1} {_fmt_val(v, ints)}\n")


def write_tns(path, T):
    """T: an ndarray of order 0, 1 or 3 (FROSTT: 1-based coordinates then the
    value; an order-0 tensor is one line holding its value). The CLI infers
    dims from the largest coordinate, so run_tj passes -d as well."""
    T = np.asarray(T)
    ints = np.issubdtype(T.dtype, np.integer)
    with open(path, "w") as f:
        if T.ndim == 0:
            f.write(_fmt_val(T, ints) + "\n")
            return
        for idx in zip(*np.nonzero(T)):
            f.write(" ".join(str(c + 1) for c in idx) + " "
                    + _fmt_val(T[idx], ints) + "\n")


def read_output(path, shape):
    """Reads a .mtx or .tns written by -o. Returns (dense float64 array,
    list of coordinate tuples, list of problems such as duplicate entries
    or a wrong .mtx header)."""
    problems = []
    with open(path) as f:
        lines = [ln for ln in f.read().splitlines()
                 if ln.strip() and not ln.startswith("#")]
    if path.endswith(".mtx"):
        if not lines or not lines[0].startswith("%%MatrixMarket"):
            return None, [], ["no Matrix Market banner"]
        body = [ln for ln in lines[1:] if not ln.startswith("%")]
        head = [int(x) for x in body[0].split()]
        if tuple(head[:2]) != tuple(shape):
            problems.append(f".mtx header dims {head[:2]} != expected {list(shape)}")
        if head[2] != len(body) - 1:
            problems.append(f".mtx header nnz {head[2]} != {len(body) - 1} entries")
        lines = body[1:]
    if len(shape) == 0:
        if len(lines) != 1:
            return None, [], [f"scalar output has {len(lines)} lines"]
        return np.array(float(lines[0])), [], problems
    out = np.zeros(shape)
    coords, seen = [], set()
    for ln in lines:
        parts = ln.split()
        if len(parts) != len(shape) + 1:
            problems.append(f"line {ln!r}: {len(parts)} fields, expected {len(shape) + 1}")
            continue
        c = tuple(int(p) - 1 for p in parts[:-1])
        if any(x < 0 or x >= n for x, n in zip(c, shape)):
            problems.append(f"coordinate {c} outside dims {shape}")
            continue
        if c in seen:
            problems.append(f"duplicate entry at {c}")
        seen.add(c)
        coords.append(c)
        out[c] += float(parts[-1])
    return out, coords, problems


# -------------------------------------------------------------- runner ----

def out_name(expr):
    return re.match(r"\s*([A-Za-z_]\w*)", expr).group(1)


def run_tj(expr, inputs, fmts=None, types=None, out_shape=(), extra=(), env=None):
    """Writes inputs, runs tensorjit, returns (argv, proc, output path)."""
    with _lock:
        _counter[0] += 1
        d = os.path.join(TMP, f"c{_counter[0]:04d}")
    os.makedirs(d)
    argv = [TJ, expr]
    for name, val in inputs.items():
        a = val if sp.issparse(val) else np.asarray(val)
        if a.ndim == 2:
            p = os.path.join(d, f"{name}.mtx")
            write_mtx(p, a)
        else:
            p = os.path.join(d, f"{name}.tns")
            write_tns(p, a)
        argv.append(f"-i={name}:{p}")
        if a.ndim in (1, 3):
            argv.append(f"-d={name}:" + ",".join(str(n) for n in a.shape))
    used = set(re.findall(r"[A-Za-z_]\w*", expr))
    for name, f in (fmts or {}).items():
        if name in used:
            argv.append(f"-f={name}:{f}")
    for name, t in (types or {}).items():
        if name in used:
            argv.append(f"-t={name}:{t}")
    o = out_name(expr)
    opath = os.path.join(d, f"{o}.mtx" if len(out_shape) == 2 else f"{o}.tns")
    argv.append(f"-o={o}:{opath}")
    argv.extend(extra)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT,
                              env={**os.environ, **env} if env else None)
    except subprocess.TimeoutExpired:
        proc = None
    return argv, proc, opath


def _show(a):
    return np.array2string(np.asarray(a), precision=10, threshold=200,
                           max_line_width=110, separator=", ")


def fail(name, argv, msg, expected=None, got=None, detail=None):
    count("failed")
    say(f"FAIL {name}: {msg}")
    say(f"  command:  {shlex.join(argv)}")
    if expected is not None:
        say(f"  expected: {_show(expected)}")
    if got is not None:
        say(f"  got:      {_show(got)}")
    for line in detail or []:
        say(f"  {line}")


def assert_close(name, argv, expected, got, rtol, exact=False):
    """Returns True when got matches expected (exactly for integers)."""
    expected = np.asarray(expected, dtype=np.float64)
    if exact:
        bad = got != expected
    else:
        finite = np.abs(expected[np.isfinite(expected)])   # +-inf: min over nothing
        atol = rtol * max(1.0, float(finite.max(initial=0.0)))
        bad = ~np.isclose(got, expected, rtol=rtol, atol=atol)
    if not np.any(bad):
        return True
    detail = []
    if np.ndim(expected) > 0:
        idx = list(zip(*np.nonzero(bad)))
        detail.append(f"{len(idx)} of {expected.size} values differ; first: "
                      + "; ".join(f"{tuple(int(x) for x in c)} expected {expected[c]:.17g} got {got[c]:.17g}"
                                  for c in idx[:6]))
    detail.append(f"max abs diff {np.abs(got - expected).max():.3g}")
    fail(name, argv, "wrong values", expected, got, detail)
    return False


def case(name, expr, inputs, expected, fmts=None, types=None, rtol=1e-9,
         exact=False, allowed=None, check=False, optional_syntax=False, extra=(), env=None):
    """One tensorjit run compared with numpy.

    expected: ndarray (or float for a scalar output) computed by numpy.
    allowed:  boolean mask; the output file may hold entries only there
              (the union of where the result can be nonzero).
    check:    also pass -check and require the reference interpreter's ok.
    optional_syntax: a parse error is a note (syntax not accepted), not a
              failure; any result it does produce must be right.
    env:      environment variables added for the run (a lowering path forced).
    Returns "ok", "fail", "timeout" or "skip"."""
    if FILTER and FILTER not in name:
        return "skip"
    if SAMPLE > 1 and zlib.crc32(name.encode()) % SAMPLE:
        count("sampled_out")
        return "skip"
    expected = np.asarray(expected)
    extra = list(extra) + (["-check"] if check else [])
    argv, proc, opath = run_tj(expr, inputs, fmts, types, expected.shape, extra, env)
    if proc and proc.returncode != 0 and optional_syntax and "expected" in proc.stderr:
        count("skipped")
        with _lock:
            NOTES.append(f"{name}: syntax not accepted: {proc.stderr.splitlines()[0]}")
        return "skip"
    count("run")
    if proc is None:
        fail(name, argv, f"timed out after {TIMEOUT:g} s (TJ_SEMANTICS_TIMEOUT)")
        return "timeout"
    if proc.returncode != 0:
        err = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        fail(name, argv, f"exit status {proc.returncode}", expected, None,
             ["stderr: " + e for e in err[:6]])
        return "fail"
    if check and not re.search(r"^check: ok", proc.stdout, re.M):
        fail(name, argv, "-check did not report ok", detail=proc.stdout.splitlines()[-3:])
        return "fail"
    if not os.path.exists(opath):
        fail(name, argv, "no output file written", expected)
        return "fail"
    got, coords, problems = read_output(opath, expected.shape)
    if got is None or problems:
        fail(name, argv, "malformed output file", expected, got, problems[:6])
        return "fail"
    if not assert_close(name, argv, expected, got, rtol, exact):
        return "fail"
    if allowed is not None:
        outside = [c for c in coords if not allowed[c]]
        if outside:
            fail(name, argv, f"values right, but {len(outside)} stored entries outside "
                 f"the possible nonzero pattern, first {outside[:6]}")
            return "fail"
    return "ok"


def nz(*arrays):
    """Pattern masks of arrays (list of bool ndarrays)."""
    return [np.asarray(a) != 0 for a in arrays]


def stored(a, fmt):
    """Where operand a (in format fmt) has stored positions: everywhere when
    every level is dense (a dense operand stores its zeros, and a sparse
    output without a dense level keeps them), else its nonzeros."""
    a = np.asarray(a)
    levels = fmt.split(":")[0]
    return np.ones(a.shape, bool) if set(levels) == {"d"} else a != 0


# ============================================================== cases ====

def test_residual_tiny():
    """y = b - A x on a hand-checked 2x2 case: I*(1,2) from (10,20) = (9,18)."""
    A = np.eye(2)
    x = np.array([1.0, 2.0])
    b = np.array([10.0, 20.0])
    for bf in VEC_FMTS:
        case(f"residual_tiny_b{bf}", "y(i) = b(i) - A(i,j) * x(j)",
             {"A": A, "x": x, "b": b}, np.array([9.0, 18.0]),
             fmts={"A": "ds", "x": "d", "b": bf, "y": "d"})


def test_implicit_summation():
    """TACO's einsum rule: an index only on the right-hand side is summed over
    the smallest subexpression containing all its uses."""
    for (m, n), seed in (((7, 5), 1), ((13, 11), 2)):
        r = rng_for(seed)
        A = rand_sparse(r, m, n, 0.35, empty_rows=(1, -1))
        B = rand_sparse(r, m, n, 0.35, empty_rows=(0,))
        Bt = rand_sparse(r, n, n, 0.4, empty_rows=(2,))
        x, z = rand_dense(r, n), rand_dense(r, n)
        xs = rand_sparse_vec(r, n, 0.5)
        b, c = rand_dense(r, m), rand_dense(r, n)
        bs = rand_sparse_vec(r, m, 0.5)
        sz = f"{m}x{n}"
        for af in MAT_FMTS:
            for vf in VEC_FMTS:
                xv, bv = (x, b) if vf == "d" else (xs, bs)
                f = {"A": af, "x": vf, "b": vf, "y": "d"}
                ins = {"A": A, "x": xv, "b": bv}
                case(f"residual_{sz}_{af}_{vf}", "y(i) = b(i) - A(i,j) * x(j)",
                     ins, bv - A @ xv, fmts=f)
                case(f"scaled_minus_{sz}_{af}_{vf}", "y(i) = 2 * A(i,j) * x(j) - b(i)",
                     ins, 2 * (A @ xv) - bv, fmts=f)
                case(f"rowscale_{sz}_{af}_{vf}", "y(i) = b(i) * A(i,j) * x(j)",
                     ins, bv * (A @ xv), fmts=f)
            case(f"gemv_plus_{sz}_{af}", "a(i) = B(i,j) * c(j) + d(i)",
                 {"B": A, "c": c, "d": bs}, A @ c + bs,
                 fmts={"B": af, "c": "d", "d": "s", "a": "d"})
            case(f"gemv_plus_const_{sz}_{af}", "y(i) = A(i,j) * x(j) + 1",
                 {"A": A, "x": x}, A @ x + 1, fmts={"A": af, "x": "d", "y": "d"})
            case(f"two_gemv_{sz}_{af}", "y(i) = A(i,j) * x(j) + B(i,j) * z(j)",
                 {"A": A, "B": B, "x": x, "z": z}, A @ x + B @ z,
                 fmts={"A": af, "B": "ds", "x": "d", "z": "d", "y": "d"})
            case(f"sum_then_gemv_{sz}_{af}", "y(i) = (B(i,j) + C(i,j)) * d(j)",
                 {"B": A, "C": B, "d": x}, (A + B) @ x,
                 fmts={"B": af, "C": "ds", "d": "d", "y": "d"})
            case(f"nested_{sz}_{af}", "y(i) = A(i,j) * (B(j,k) * x(k) + c(j))",
                 {"A": A, "B": Bt, "x": x, "c": c}, A @ (Bt @ x + c),
                 fmts={"A": af, "B": "ds", "x": "d", "c": "d", "y": "d"})
        # Matrix outputs, dense and sparse.
        C = rand_sparse(r, n, 6, 0.4)
        D = rand_sparse(r, m, 6, 0.3, empty_rows=(3,))
        for of in ("dd", "ds"):
            for bf in ("ds", "dd", "ss"):
                case(f"gemm_plus_{sz}_{bf}_{of}", "A(i,j) = B(i,k) * C(k,j) + D(i,j)",
                     {"B": A, "C": C, "D": D}, A @ C + D,
                     fmts={"B": bf, "C": "ds", "D": "ds", "A": of})
        Cm = rand_sparse(r, m, 4, 0.5)
        Dk = rand_sparse(r, 4, n, 0.5)
        for of in ("dd", "ds"):
            for bf in ("ds", "ss", "dd"):
                case(f"masked_gemm_{sz}_{bf}_{of}", "A(i,j) = B(i,j) * (C(i,k) * D(k,j))",
                     {"B": A, "C": Cm, "D": Dk}, A * (Cm @ Dk),
                     fmts={"B": bf, "C": "dd", "D": "dd", "A": of},
                     allowed=stored(A, bf) if of == "ds" else None)


def test_scalars():
    """Order-0 tensors: a name with no index list, read from / written to a
    one-line .tns."""
    r = rng_for(3)
    b, c = rand_dense(r, 9), rand_sparse_vec(r, 9, 0.5)
    A = rand_sparse(r, 7, 9, 0.4, empty_rows=(3,))
    for bf in VEC_FMTS:
        case(f"dot_{bf}", "a = b(i) * c(i)", {"b": b, "c": c}, float(b @ c),
             fmts={"b": bf, "c": "s"})
        case(f"dot_plus_one_{bf}", "a = b(i) * c(i) + 1", {"b": b, "c": c},
             float(b @ c) + 1, fmts={"b": bf, "c": "s"})
    for af in ("ds", "dd"):
        case(f"scalar_in_scale_{af}", "y(i) = s * A(i,j) * b(j)",
             {"s": np.array(2.5), "A": A, "b": b}, 2.5 * (A @ b),
             fmts={"A": af, "b": "d", "y": "d"})
        case(f"scalar_in_plus_{af}", "y(i) = A(i,j) * b(j) + s",
             {"s": np.array(2.5), "A": A, "b": b}, A @ b + 2.5,
             fmts={"A": af, "b": "d", "y": "d"})
        case(f"scalar_total_{af}", "a = A(i,j)", {"A": A}, float(A.sum()),
             fmts={"A": af})


def test_explicit_sum():
    """sum(<index>, <expression>): an explicit, nestable reduction."""
    r = rng_for(4)
    m, n = 7, 5
    A = rand_sparse(r, m, n, 0.4, empty_rows=(2,))
    B = rand_sparse(r, n, 6, 0.4)
    x, x6, b = rand_dense(r, n), rand_dense(r, 6), rand_dense(r, m)
    cs = rand_sparse_vec(r, m, 0.5)
    for af in ("ds", "dd", "ss"):
        f = {"A": af, "x": "d", "b": "d", "y": "d"}
        case(f"sum_residual_{af}", "y(i) = b(i) - sum(j, A(i,j) * x(j))",
             {"A": A, "x": x, "b": b}, b - A @ x, fmts=f)
        case(f"sum_times_two_{af}", "y(i) = sum(j, A(i,j) * x(j)) * 2",
             {"A": A, "x": x}, 2 * (A @ x), fmts=f)
        case(f"sum_nested_{af}", "y(i) = sum(j, A(i,j) * sum(k, B(j,k) * x(k)))",
             {"A": A, "B": B, "x": x6}, A @ (B @ x6),
             fmts={"A": af, "B": "ds", "x": "d", "y": "d"})
        case(f"sum_rows_{af}", "y(i) = sum(j, A(i,j))", {"A": A}, A.sum(axis=1),
             fmts={"A": af, "y": "d"})
        case(f"sum_dot_plus_one_{af}", "a = sum(i, b(i) * c(i)) + 1",
             {"b": b, "c": cs}, float(b @ cs) + 1, fmts={"b": "d", "c": "s"})
        case(f"sum_two_indices_{af}", "a = sum(i, j, A(i,j))", {"A": A},
             float(A.sum()), fmts={"A": af}, optional_syntax=True)


def _union_data():
    r = rng_for(5)
    m, n = 40, 30
    Bs = [rand_sparse(r, m, n, 0.05 + 0.15 * (t % 4) / 3, empty_rows=(t, -1))
          for t in range(16)]
    vs = [rand_sparse_vec(r, 50, 0.05 + 0.15 * (t % 4) / 3) for t in range(16)]
    C = rand_sparse(r, m, n, 0.3)
    return Bs, vs, C


# Operand names of the wide unions: letters only (Ba..Bp, ba..bp), so that
# the union width is what is tested; digit names (B1, B11) collide in
# today's build, see test_operand_names.
LETTERS = "abcdefghijklmnop"


def _union_family(family, ks, one):
    """Runs one(k) for k in ks. After a timeout, or once the family has used
    UNION_BUDGET seconds (a failure of its own: compile time that grows this
    fast is a bug), the larger k are skipped with a NOTE, so that a slow
    build still finishes in bounded time."""
    start = time.monotonic()
    for i, k in enumerate(ks):
        status = one(k)
        rest = ks[i + 1:]
        if not rest:
            return
        used = time.monotonic() - start
        if status != "timeout" and used > UNION_BUDGET:
            count("failed")
            say(f"FAIL {family}: the family took {used:.1f} s up to k = {k}, over "
                f"its budget of {UNION_BUDGET:g} s (TJ_SEMANTICS_UNION_BUDGET)")
        if status == "timeout" or used > UNION_BUDGET:
            with _lock:
                STATS["skipped"] += len(rest)
                NOTES.append(f"{family}: k = {rest} skipped after "
                             + (f"the timeout at k = {k}" if status == "timeout"
                                else "the time budget ran out"))
            return


def _matrix_union(of):
    Bs, _, _ = _union_data()

    def one(k):
        names = [f"B{LETTERS[t]}" for t in range(k)]
        f = {nm: "ds" for nm in names}
        f["A"] = of
        union = np.logical_or.reduce(nz(*Bs[:k]))
        return case(f"union{k}_{of}", "A(i,j) = " + " + ".join(f"{nm}(i,j)" for nm in names),
                    dict(zip(names, Bs[:k])), sum(Bs[:k]), fmts=f,
                    allowed=union if of == "ds" else None)
    _union_family(f"union_{of}", list(range(2, 17)), one)


def test_wide_unions_csr():
    """A = B1 + ... + Bk for k = 2..16, CSR inputs (40x30) into CSR."""
    _matrix_union("ds")


def test_wide_unions_dense():
    """A = B1 + ... + Bk for k = 2..16, CSR inputs (40x30) into dense."""
    _matrix_union("dd")


def test_wide_unions_vector():
    """a = b1 + ... + bk for k = 2..16, sparse vectors into a sparse vector."""
    _, vs, _ = _union_data()

    def one(k):
        vn = [f"b{LETTERS[t]}" for t in range(k)]
        return case(f"vec_union{k}", "a(i) = " + " + ".join(f"{nm}(i)" for nm in vn),
                    dict(zip(vn, vs[:k])), sum(vs[:k]),
                    fmts={**{nm: "s" for nm in vn}, "a": "s"},
                    allowed=np.logical_or.reduce(nz(*vs[:k])))
    _union_family("vec_union", list(range(2, 17)), one)


def test_wide_unions_times():
    """(B1 + ... + Bk) * C elementwise, C sparse: the union under an
    intersection, into CSR."""
    Bs, _, C = _union_data()

    def one(k):
        names = [f"B{LETTERS[t]}" for t in range(k)]
        f = {nm: "ds" for nm in names}
        f.update(C="ds", A="ds")
        union = np.logical_or.reduce(nz(*Bs[:k]))
        rhs = " + ".join(f"{nm}(i,j)" for nm in names)
        return case(f"union{k}_times_C", f"A(i,j) = ({rhs}) * C(i,j)",
                    {**dict(zip(names, Bs[:k])), "C": C}, sum(Bs[:k]) * C,
                    fmts=f, allowed=union & (C != 0))
    _union_family("union_times_C", [2, 3, 5, 6, 7, 8, 12, 16], one)


# The three lowerings of a union, each forced: the merge lattice, the
# merged co-iteration, the workspace scattered term by term.
UNION_PATHS = {
    "lattice": {"TJ_WIDE_UNION_THRESHOLD": "64", "TJ_SCATTER_UNION_MIN": "1000"},
    "merged": {"TJ_WIDE_UNION_THRESHOLD": "1", "TJ_SCATTER_UNION_MIN": "1000"},
    "scatter": {"TJ_SCATTER_UNION_MIN": "2"},
}


def test_union_paths():
    """Unions, differences and products of sums (k = 2, 3, and 4 and 8
    without the lattice, whose compile grows ~3^k) under each lowering, into
    CSR, DCSR (k = 3) and dense."""
    Bs, vs, C = _union_data()
    for path, env in UNION_PATHS.items():
        for k in [2, 3] + ([] if path == "lattice" else [4, 8]):
            names = [f"B{LETTERS[t]}" for t in range(k)]
            ins = dict(zip(names, Bs[:k]))
            union = np.logical_or.reduce(nz(*Bs[:k]))
            rhs = " + ".join(f"{nm}(i,j)" for nm in names)
            for of in ("ds", "dd") + (("ss",) if k == 3 else ()):
                case(f"paths_{path}_union{k}_{of}", f"A(i,j) = {rhs}", ins, sum(Bs[:k]),
                     fmts={**{nm: "ds" for nm in names}, "A": of}, env=env,
                     allowed=union if of != "dd" else None)
            case(f"paths_{path}_union{k}_times_C", f"A(i,j) = ({rhs}) * C(i,j)",
                 {**ins, "C": C}, sum(Bs[:k]) * C,
                 fmts={**{nm: "ds" for nm in names}, "C": "ds", "A": "ds"}, env=env,
                 allowed=union & (C != 0))
            diff = " - ".join(f"{nm}(i,j)" for nm in names)
            case(f"paths_{path}_diff{k}", f"A(i,j) = 2 * ({diff})", ins,
                 2 * (Bs[0] - sum(Bs[1:k])), fmts={**{nm: "ds" for nm in names}, "A": "ds"},
                 env=env, allowed=union)
            vn = [f"b{LETTERS[t]}" for t in range(k)]
            case(f"paths_{path}_vec_union{k}", "a(i) = " + " + ".join(f"{nm}(i)" for nm in vn),
                 dict(zip(vn, vs[:k])), sum(vs[:k]),
                 fmts={**{nm: "s" for nm in vn}, "a": "s"}, env=env,
                 allowed=np.logical_or.reduce(nz(*vs[:k])))


def test_operand_names():
    """Operand names that are another operand's name plus digits (B1 and
    B11, b1 and b10) name different tensors."""
    r = rng_for(14)
    B1, B11 = rand_sparse(r, 7, 5, 0.4), rand_sparse(r, 7, 5, 0.4)
    b1, b10 = rand_sparse_vec(r, 9, 0.5), rand_sparse_vec(r, 9, 0.5)
    for f in ("ds", "ss", "dd"):
        case(f"names_B1_B11_{f}", "A(i,j) = B1(i,j) + B11(i,j)", {"B1": B1, "B11": B11},
             B1 + B11, fmts={"B1": f, "B11": f, "A": "ds"})
    case("names_b1_b10", "a(i) = b1(i) + b10(i)", {"b1": b1, "b10": b10}, b1 + b10,
         fmts={"b1": "s", "b10": "s", "a": "s"})


def test_intersections():
    """Three-way intersections and intersection-union mixes."""
    r = rng_for(6)
    m, n = 13, 11
    B1, B2, B3 = (rand_sparse(r, m, n, 0.6, empty_rows=(e,)) for e in (0, 5, -1))
    _, m2, m3 = nz(B1, B2, B3)
    for bf in ("ds", "ss", "ds:1,0", "dd"):
        m1 = stored(B1, bf)
        for of in ("ds", "dd"):
            f = {"B1": bf, "B2": "ds", "B3": "ss", "A": of}
            ins = {"B1": B1, "B2": B2, "B3": B3}
            case(f"mul3_{bf}_{of}", "A(i,j) = B1(i,j) * B2(i,j) * B3(i,j)", ins,
                 B1 * B2 * B3, fmts=f, allowed=(m1 & m2 & m3) if of == "ds" else None)
            case(f"mul_add_{bf}_{of}", "A(i,j) = B1(i,j) * B2(i,j) + B3(i,j)", ins,
                 B1 * B2 + B3, fmts=f, allowed=((m1 & m2) | m3) if of == "ds" else None)
            case(f"add_mul_{bf}_{of}", "A(i,j) = B1(i,j) + B2(i,j) * B3(i,j)", ins,
                 B1 + B2 * B3, fmts=f, allowed=(m1 | (m2 & m3)) if of == "ds" else None)


def test_spmv_spmm():
    r = rng_for(7)
    A = rand_sparse(r, 13, 11, 0.3, empty_rows=(0, 6, -1))
    x, xs = rand_dense(r, 11), rand_sparse_vec(r, 11, 0.4)
    Bd = rand_dense(r, 11, 5)
    for af in MAT_FMTS:
        for vf in VEC_FMTS:
            xv = x if vf == "d" else xs
            case(f"spmv_{af}_{vf}", "y(i) = A(i,j) * x(j)", {"A": A, "x": xv}, A @ xv,
                 fmts={"A": af, "x": vf, "y": "d"}, check=(vf == "d"))
        case(f"spmm_{af}", "C(i,j) = A(i,k) * B(k,j)", {"A": A, "B": Bd}, A @ Bd,
             fmts={"A": af, "B": "dd", "C": "dd"}, check=(af == "ds"))
    # A sparse y: rows are a dense level of A, so the empty rows may be
    # stored (as zeros); values only.
    case("spmv_sparse_out", "y(i) = A(i,j) * x(j)", {"A": A, "x": x}, A @ x,
         fmts={"A": "ds", "x": "d", "y": "s"})


def test_sddmm_spgemm():
    r = rng_for(8)
    B = rand_sparse(r, 13, 11, 0.3, empty_rows=(4,))
    C, D = rand_dense(r, 13, 6), rand_dense(r, 6, 11)
    for bf in ("ds", "ss", "dd"):
        for of in ("ds", "dd"):
            case(f"sddmm_{bf}_{of}", "A(i,j) = B(i,j) * C(i,k) * D(k,j)",
                 {"B": B, "C": C, "D": D}, B * (C @ D),
                 fmts={"B": bf, "C": "dd", "D": "dd", "A": of},
                 allowed=stored(B, bf) if of == "ds" else None)
    P = rand_sparse(r, 13, 9, 0.25, empty_rows=(2,))
    Q = rand_sparse(r, 9, 11, 0.25, empty_rows=(1,))
    pat = ((P != 0).astype(int) @ (Q != 0).astype(int)) > 0
    for pf, qf, of in (("ds", "ds", "ds"), ("ds", "ds", "ss"), ("ss", "ss", "ds"),
                       ("ds", "ds", "dd"), ("uq", "ds", "ds"), ("ds", "ds", "do")):
        case(f"spgemm_{pf}_{qf}_{of}", "C(i,j) = A(i,k) * B(k,j)", {"A": P, "B": Q},
             P @ Q, fmts={"A": pf, "B": qf, "C": of},
             allowed=pat if of != "dd" else None, check=(of == "ds"))


def test_add_mul_transpose():
    r = rng_for(9)
    A = rand_sparse(r, 13, 11, 0.25, empty_rows=(3, -1))
    B = rand_sparse(r, 13, 11, 0.25, empty_rows=(3,))
    mb = B != 0
    for af in MAT_FMTS:
        ma = stored(A, af)
        for of in ("ds", "ss", "dd", "ds:1,0"):
            if af == "uq" and of == "ds:1,0":
                continue
            f = {"A": af, "B": "ds", "C": of}
            pat = of not in ("dd",)
            case(f"add_{af}_{of}", "C(i,j) = A(i,j) + B(i,j)", {"A": A, "B": B},
                 A + B, fmts=f, allowed=(ma | mb) if pat else None)
            case(f"mul_{af}_{of}", "C(i,j) = A(i,j) * B(i,j)", {"A": A, "B": B},
                 A * B, fmts=f, allowed=(ma & mb) if pat else None)
            case(f"sub_{af}_{of}", "C(i,j) = A(i,j) - B(i,j)", {"A": A, "B": B},
                 A - B, fmts=f, allowed=(ma | mb) if pat else None)
            case(f"axpy_{af}_{of}", "C(i,j) = 3 * A(i,j) + B(i,j)", {"A": A, "B": B},
                 3 * A + B, fmts=f, allowed=(ma | mb) if pat else None)
    T = rand_sparse(r, 11, 13, 0.3, empty_rows=(5,))
    for bf in ("ds", "ss", "ds:1,0", "dd"):
        for of in ("ds", "dd"):
            case(f"transpose_{bf}_{of}", "A(i,j) = B(j,i)", {"B": T}, T.T,
                 fmts={"B": bf, "A": of}, allowed=stored(T, bf).T if of == "ds" else None)


def test_order3():
    """TTV and MTTKRP on a small random order-3 tensor read from .tns."""
    r = rng_for(10)
    B = rand_sparse3(r, (7, 6, 5), 0.15)
    B[2] = 0                                 # an empty slice
    c = rand_dense(r, 5)
    C, D = rand_dense(r, 6, 4), rand_dense(r, 5, 4)
    for bf in ("sss", "dss"):
        for of in ("dd", "ds"):
            case(f"ttv_{bf}_{of}", "A(i,j) = B(i,j,k) * c(k)", {"B": B, "c": c},
                 np.einsum("ijk,k->ij", B, c), fmts={"B": bf, "c": "d", "A": of},
                 allowed=(B != 0).any(axis=2) if of == "ds" else None,
                 check=(of == "dd"))
        case(f"mttkrp_{bf}", "A(i,j) = B(i,k,l) * C(k,j) * D(l,j)",
             {"B": B, "C": C, "D": D}, np.einsum("ikl,kj,lj->ij", B, C, D),
             fmts={"B": bf, "C": "dd", "D": "dd", "A": "dd"}, check=True)
        case(f"scale3_{bf}", "A(i,j,k) = B(i,j,k) * 2", {"B": B}, 2 * B,
             fmts={"B": bf, "A": bf}, allowed=(B != 0))
        # a dense level between compressed ones: TTM into sds (each stored
        # row i a block of j, each (i, j) a compressed fiber of k)
        M = rand_sparse(r, 3, 5, 0.4)
        case(f"ttm_sds_{bf}", "A(i,j,k) = B(i,j,l) * M(k,l)", {"B": B, "M": M},
             np.einsum("ijl,kl->ijk", B, M), fmts={"B": bf, "M": "ds", "A": "sds"},
             allowed=np.einsum("ijl,kl->ijk", B != 0, M != 0) > 0)
        case(f"add_sds_{bf}", "A(i,j,k) = B(i,j,k) + 2 * B(i,j,k)", {"B": B}, 3 * B,
             fmts={"B": bf, "A": "sds"}, allowed=(B != 0))


def test_accumulate():
    """`+=` into a dense output read from a file, and into sparse outputs:
    their stored entries may only be the union of the old output's and the
    right-hand side's."""
    r = rng_for(11)
    A = rand_sparse(r, 13, 11, 0.3, empty_rows=(1,))
    x, y0 = rand_dense(r, 11), rand_dense(r, 13)
    for af in ("ds", "dd", "ss"):
        case(f"accumulate_spmv_{af}", "y(i) += A(i,j) * x(j)", {"A": A, "x": x, "y": y0},
             y0 + A @ x, fmts={"A": af, "x": "d", "y": "d"})
    B, C0 = rand_dense(r, 11, 4), rand_sparse(r, 13, 4, 0.5)
    case("accumulate_spmm", "C(i,j) += A(i,k) * B(k,j)", {"A": A, "B": B, "C": C0},
         C0 + A @ B, fmts={"A": "ds", "B": "dd", "C": "dd"})
    D, E0 = rand_sparse(r, 13, 11, 0.3), rand_sparse(r, 13, 11, 0.2, empty_rows=(4,))
    for ef in ("ds", "ss", "uq", "ds:1,0", "do"):
        case(f"accumulate_sparse_out_{ef}", "E(i,j) += A(i,j) * D(i,j) + 2 * D(i,j)",
             {"A": A, "D": D, "E": E0}, E0 + A * D + 2 * D,
             fmts={"A": "ds", "D": "ss", "E": ef}, allowed=(E0 != 0) | (D != 0))
    T0 = rand_sparse(r, 13, 11, 0.1)
    case("accumulate_sparse_scaled_vector", "T(i,j) += A(i,j) * x(j)",
         {"A": A, "x": x, "T": T0}, T0 + A * x[None, :], fmts={"A": "ds", "x": "d", "T": "ss"},
         allowed=(T0 != 0) | (A != 0))


def test_dtypes():
    """i64 (exact) and f32 (rtol 1e-5)."""
    r = rng_for(12)
    A = rand_sparse(r, 13, 11, 0.3, empty_rows=(2,), ints=True)
    B = rand_sparse(r, 13, 11, 0.3, ints=True)
    x = r.integers(-9, 10, size=11).astype(np.int64)
    M = r.integers(-9, 10, size=(11, 4)).astype(np.int64)
    bi = r.integers(1, 10, size=13).astype(np.int64)
    for af in ("ds", "ss", "dd"):
        case(f"i64_spmv_{af}", "y(i) = A(i,j) * x(j)", {"A": A, "x": x}, A @ x,
             fmts={"A": af, "x": "d", "y": "d"}, exact=True,
             types={"A": "i64", "x": "i64", "y": "i64"})
        case(f"i64_spmm_{af}", "C(i,j) = A(i,k) * B(k,j)", {"A": A, "B": M}, A @ M,
             fmts={"A": af, "B": "dd", "C": "dd"}, exact=True,
             types={"A": "i64", "B": "i64", "C": "i64"})
        case(f"i64_add_{af}", "C(i,j) = A(i,j) + B(i,j)", {"A": A, "B": B}, A + B,
             fmts={"A": af, "B": "ds", "C": "ds"}, exact=True,
             types={"A": "i64", "B": "i64", "C": "i64"},
             allowed=stored(A, af) | (B != 0))
        case(f"i64_residual_{af}", "y(i) = b(i) - A(i,j) * x(j)",
             {"A": A, "x": x, "b": bi}, bi - A @ x,
             fmts={"A": af, "x": "d", "b": "d", "y": "d"}, exact=True,
             types={"A": "i64", "x": "i64", "b": "i64", "y": "i64"})
    Af = rand_sparse(r, 13, 11, 0.3).astype(np.float32).astype(np.float64)
    Bf = rand_sparse(r, 13, 11, 0.3).astype(np.float32).astype(np.float64)
    xf = rand_dense(r, 11).astype(np.float32).astype(np.float64)
    t3 = {"A": "f32", "B": "f32", "C": "f32"}
    for af in ("ds", "ss", "dd"):
        case(f"f32_spmv_{af}", "y(i) = A(i,j) * x(j)", {"A": Af, "x": xf}, Af @ xf,
             fmts={"A": af, "x": "d", "y": "d"}, rtol=1e-5,
             types={"A": "f32", "x": "f32", "y": "f32"})
        case(f"f32_add_{af}", "C(i,j) = A(i,j) + B(i,j)", {"A": Af, "B": Bf}, Af + Bf,
             fmts={"A": af, "B": "ds", "C": "ds"}, rtol=1e-5, types=t3,
             allowed=stored(Af, af) | (Bf != 0))
        case(f"f32_mul_{af}", "C(i,j) = A(i,j) * B(i,j)", {"A": Af, "B": Bf}, Af * Bf,
             fmts={"A": af, "B": "ds", "C": "ds"}, rtol=1e-5, types=t3,
             allowed=stored(Af, af) & (Bf != 0))


def test_functions():
    """sqrt abs exp log min max on dense inputs."""
    r = rng_for(13)
    A = rand_dense(r, 7, 5)                  # signed
    P = rand_dense(r, 7, 5, lo=0.1, hi=3.0)  # positive
    B = rand_dense(r, 7, 5)
    f = {"A": "dd", "B": "dd", "C": "dd"}
    table = [
        ("sqrt", "C(i,j) = sqrt(A(i,j))", {"A": P}, np.sqrt(P)),
        ("abs", "C(i,j) = abs(A(i,j))", {"A": A}, np.abs(A)),
        ("exp", "C(i,j) = exp(A(i,j))", {"A": A}, np.exp(A)),
        ("log", "C(i,j) = log(A(i,j))", {"A": P}, np.log(P)),
        ("min", "C(i,j) = min(A(i,j), B(i,j))", {"A": A, "B": B}, np.minimum(A, B)),
        ("max", "C(i,j) = max(A(i,j), B(i,j))", {"A": A, "B": B}, np.maximum(A, B)),
        ("max_const", "C(i,j) = max(A(i,j), 0.5)", {"A": A}, np.maximum(A, 0.5)),
        ("sqrt_abs_plus", "C(i,j) = sqrt(abs(A(i,j))) + exp(B(i,j)) * 2",
         {"A": A, "B": B}, np.sqrt(np.abs(A)) + np.exp(B) * 2),
    ]
    for name, expr, ins, exp in table:
        case(f"fn_{name}", expr, ins, exp, fmts={k: v for k, v in f.items()
                                                  if k in ins or k == "C"})
    x = rand_dense(r, 5, lo=0.1, hi=2.0)
    case("fn_vec_log", "y(i) = log(x(i)) * 3", {"x": x}, np.log(x) * 3,
         fmts={"x": "d", "y": "d"})
    case("fn_gemv_abs", "y(i) = abs(A(i,j)) * x(j)", {"A": A, "x": x}, np.abs(A) @ x,
         fmts={"A": "dd", "x": "d", "y": "d"})
    # pow: dense (pow(0, 0) = 1: an absent entry of a sparse base still
    # gives 1) unless the exponent is a literal, then absent where the base is
    S = rand_sparse(r, 7, 5, 0.3)
    case("fn_pow", "C(i,j) = pow(A(i,j), B(i,j))", {"A": P, "B": B}, np.power(P, B),
         fmts={"A": "dd", "B": "dd", "C": "dd"})
    with np.errstate(divide="ignore"):  # 0 to a negative power is inf
        want = np.power(np.abs(S), B)
    case("fn_pow_sparse_base", "C(i,j) = pow(A(i,j), B(i,j))", {"A": np.abs(S), "B": B},
         want, fmts={"A": "ds", "B": "dd", "C": "ds"})
    case("fn_pow_literal", "C(i,j) = pow(A(i,j), 3.0)", {"A": S}, np.power(S, 3.0),
         fmts={"A": "ds", "C": "ds"}, allowed=S != 0)


def _reduce_rows(vals, present, op, identity):
    """op over axis -1 of vals where present; identity where nothing is."""
    v = np.where(present, vals, identity)
    return op.reduce(v, axis=-1) if v.shape[-1] else np.full(v.shape[:-1], identity)


def test_reductions():
    """reduce(op, j, e): op over the entries where e exists (a sparse
    operand's stored ones, GraphBLAS's rule), its identity where none does
    in a dense output, absent in a sparse one."""
    ops = {"min": (np.minimum, np.inf), "max": (np.maximum, -np.inf),
           "*": (np.multiply, 1.0), "+": (np.add, 0.0)}
    for (m, n), seed in (((7, 5), 21), ((12, 9), 22)):
        r = rng_for(seed)
        A = rand_sparse(r, m, n, 0.35, empty_rows=(1, -1))
        x = rand_dense(r, n)
        b = rand_dense(r, m)
        for af in MAT_FMTS:
            st = stored(A, af)
            reached = st.any(axis=1)
            for name, (op, ident) in ops.items():
                # a sum may keep an explicit 0 for a row with no entry
                pattern = reached if name != "+" else None
                for of in VEC_FMTS:
                    full = _reduce_rows(A * x, st, op, ident)
                    exp = full if of == "d" else np.where(reached, full, 0)
                    sz = f"{m}x{n}_{af}_{of}"
                    case(f"reduce_{name}_Ax_{sz}", f"y(i) = reduce({name}, j, A(i,j) * x(j))",
                         {"A": A, "x": x}, exp, fmts={"A": af, "x": "d", "y": of},
                         allowed=pattern if of == "s" else None, check=True)
                    full = _reduce_rows(A, st, op, ident)
                    exp = full if of == "d" else np.where(reached, full, 0)
                    case(f"reduce_{name}_A_{sz}", f"y(i) = reduce({name}, j, A(i,j))",
                         {"A": A}, exp, fmts={"A": af, "y": of},
                         allowed=pattern if of == "s" else None)
            # nested: a reduction inside an expression is its identity over nothing
            rowmax = _reduce_rows(A * x, st, np.maximum, -np.inf)
            case(f"reduce_nested_{m}x{n}_{af}", "y(i) = b(i) + reduce(max, j, A(i,j) * x(j))",
                 {"A": A, "x": x, "b": b}, b + rowmax, fmts={"A": af, "x": "d", "b": "d", "y": "d"})
        # a matrix out of a min over k, and an implicit sum inside a max
        B = rand_dense(r, n, 4)
        st = A != 0
        C = np.where(st[:, :, None], A[:, :, None] * B[None, :, :], np.inf).min(axis=1)
        case(f"reduce_min_matmul_{m}x{n}", "C(i,j) = reduce(min, k, A(i,k) * B(k,j))",
             {"A": A, "B": B}, C, fmts={"A": "ds", "B": "dd", "C": "dd"}, check=True)
        D = rand_dense(r, n, 3)
        E = rand_dense(r, 3)
        inner = D @ E                                  # sum over l, inside the max
        exp = _reduce_rows(A * inner, st, np.maximum, -np.inf)
        case(f"reduce_max_of_sum_{m}x{n}", "y(i) = reduce(max, j, A(i,j) * D(j,l) * e(l))",
             {"A": A, "D": D, "e": E}, exp, fmts={"A": "ds", "D": "dd", "e": "d", "y": "d"})


def test_semirings():
    """-semiring=add.mul: + (and sums) and * are the semiring's; absent
    entries are its zero, products exist where both operands do."""
    for (m, n), seed in (((8, 6), 31), ((13, 10), 32)):
        r = rng_for(seed)
        A = rand_sparse(r, m, n, 0.3, empty_rows=(2,))
        B = rand_sparse(r, n, 5, 0.4)
        x = rand_dense(r, n)
        xs = rand_sparse_vec(r, n, 0.5)
        for af in ("ds", "ds:1,0", "ss", "uq"):
            st = A != 0
            for vf, xv in (("d", x), ("s", xs)):
                both = st & (np.ones(n, bool) if vf == "d" else xv != 0)[None, :]
                reached = both.any(axis=1)
                sz = f"{m}x{n}_{af}_{vf}"
                table = [
                    ("min.plus", np.where(both, A + xv, np.inf).min(axis=1), np.inf),
                    ("max.plus", np.where(both, A + xv, -np.inf).max(axis=1), -np.inf),
                    ("max.times", np.where(both, A * xv, -np.inf).max(axis=1), -np.inf),
                    ("min.times", np.where(both, A * xv, np.inf).min(axis=1), np.inf),
                    ("plus.pair", both.sum(axis=1).astype(float), 0.0),
                    ("or.and", both.any(axis=1).astype(float), 0.0),
                    ("plus.min", np.where(both, np.minimum(A, xv), 0).sum(axis=1), 0.0),
                ]
                for sr, exp, zero in table:
                    for of in ("d", "s"):
                        want = exp if of == "d" else np.where(reached, exp, 0)
                        case(f"semiring_{sr}_spmv_{sz}_{of}", "y(i) = A(i,j) * x(j)",
                             {"A": A, "x": xv}, want, fmts={"A": af, "x": vf, "y": of},
                             allowed=reached if of == "s" else None, check=True,
                             extra=[f"-semiring={sr}"])
        # matrix products: min.plus (one relaxation of all pairs), plus.pair
        sA, sB = A != 0, B != 0
        both = sA[:, :, None] & sB[None, :, :]
        minplus = np.where(both, A[:, :, None] + B[None, :, :], np.inf).min(axis=1)
        count_k = both.sum(axis=1).astype(float)
        reached = both.any(axis=1)
        for sr, exp in (("min.plus", minplus), ("plus.pair", count_k)):
            case(f"semiring_{sr}_spgemm_{m}x{n}", "C(i,j) = A(i,k) * B(k,j)",
                 {"A": A, "B": B}, np.where(reached, exp, 0),
                 fmts={"A": "ds", "B": "ds", "C": "ds"}, allowed=reached, check=True,
                 extra=[f"-semiring={sr}"])
            # B all-dense: every entry exists, its zeros too
            onlyA = np.broadcast_to(sA[:, :, None], both.shape)
            dense_exp = (np.where(onlyA, A[:, :, None] + B[None, :, :], np.inf).min(axis=1)
                         if sr == "min.plus" else onlyA.sum(axis=1).astype(float))
            case(f"semiring_{sr}_spmm_{m}x{n}", "C(i,j) = A(i,k) * B(k,j)",
                 {"A": A, "B": B}, dense_exp,
                 fmts={"A": "ds", "B": "dd", "C": "dd"}, check=True, extra=[f"-semiring={sr}"])
        # a wide union (5 terms: the merged loop, hit flags deciding which
        # operands exist) under every semiring, on signed values
        W = [rand_sparse(r, m, n, 0.3) for _ in range(4)]
        ops = {"min.plus": (np.minimum, np.add), "max.plus": (np.maximum, np.add),
               "min.times": (np.minimum, np.multiply), "max.times": (np.maximum, np.multiply),
               "min.max": (np.minimum, np.maximum), "max.min": (np.maximum, np.minimum),
               "plus.pair": (np.add, lambda a, b: np.ones_like(a)),
               "plus.min": (np.add, np.minimum),
               "or.and": (lambda a, b: ((a != 0) | (b != 0)).astype(float),
                          lambda a, b: ((a != 0) & (b != 0)).astype(float))}
        pairs = ((0, 1), (2, 3), (0, 3), (1, 2))
        for sr, (add, mul) in ops.items():
            acc, have = np.zeros((m, n)), np.zeros((m, n), bool)
            terms = [(mul(W[a], W[b]), (W[a] != 0) & (W[b] != 0)) for a, b in pairs]
            terms.append((W[0], W[0] != 0))
            for val, pat in terms:
                both = have & pat
                acc = np.where(both, add(acc, val), np.where(pat, val, acc))
                have |= pat
            case(f"semiring_{sr}_wide_{m}x{n}",
                 "E(i,j) = A(i,j) * B(i,j) + C(i,j) * D(i,j) + A(i,j) * D(i,j) + B(i,j) * C(i,j) + A(i,j)",
                 {"A": W[0], "B": W[1], "C": W[2], "D": W[3]}, np.where(have, acc, 0),
                 fmts={"A": "ds", "B": "ds", "C": "ds", "D": "ds", "E": "ds"}, allowed=have,
                 check=True, extra=[f"-semiring={sr}"])
        # a semiring's + unites: min(A, B) elementwise where either exists
        A2 = rand_sparse(r, m, n, 0.3)
        s1, s2 = A != 0, A2 != 0
        exp = np.where(s1 & s2, np.minimum(A, A2), np.where(s1, A, np.where(s2, A2, 0)))
        case(f"semiring_min.plus_add_{m}x{n}", "C(i,j) = A(i,j) + B(i,j)",
             {"A": A, "B": A2}, exp, fmts={"A": "ds", "B": "ds", "C": "ds"},
             allowed=s1 | s2, check=True, extra=["-semiring=min.plus"])


def test_defs():
    """-def= element operators, inlined: values by numpy, and the stored
    pattern of a sparse output is the body's (relu keeps zeros, softplus
    of a sparse matrix is dense)."""
    r = rng_for(41)
    A = rand_sparse(r, 9, 7, 0.35, empty_rows=(3,))
    B = rand_sparse(r, 9, 7, 0.35)
    x = rand_dense(r, 7)
    defs = ["-def=relu(x) = max(x, 0)", "-def=sq(x) = x * x",
            "-def=softplus(x) = log(1 + exp(x))", "-def=hyp(a, b) = sqrt(sq(a) + sq(b))"]
    relu = np.maximum(A, 0)
    for af in MAT_FMTS:
        case(f"def_relu_spmv_{af}", "y(i) = relu(A(i,j)) * x(j)", {"A": A, "x": x},
             relu @ x, fmts={"A": af, "x": "d", "y": "d"}, extra=defs, check=True)
        case(f"def_relu_copy_{af}", "C(i,j) = relu(A(i,j))", {"A": A}, relu,
             fmts={"A": af, "C": "ds"}, allowed=stored(A, af), extra=defs)
        case(f"def_softplus_{af}", "C(i,j) = softplus(A(i,j))", {"A": A},
             np.log1p(np.exp(A)), fmts={"A": af, "C": "dd"}, extra=defs)
        case(f"def_hyp_{af}", "C(i,j) = hyp(A(i,j), B(i,j))", {"A": A, "B": B},
             np.hypot(A, B), fmts={"A": af, "B": "ds", "C": "ds"},
             allowed=stored(A, af) | (B != 0), extra=defs, check=True)
        case(f"def_sq_sum_{af}", "y(i) = sq(A(i,j) + B(i,j))", {"A": A, "B": B},
             ((A + B) ** 2).sum(axis=1), fmts={"A": af, "B": "ds", "y": "d"}, extra=defs)
    # definitions with cases (MLIR's binary regions): body where both
    # operands exist, `left` where only x, `right` where only y, else absent
    cdefs = ["-def=f(x, y) = x * y left x right 10 * y", "-def=lo(x, y) = x * y left -x",
             "-def=ro(x, y) = max(x, y) right abs(y)"]
    Ds = [rand_sparse(r, 9, 7, 0.3) for _ in range(3)]
    for af in MAT_FMTS:
        sa, sb = stored(A, af), B != 0
        f = np.where(sa & sb, A * B, np.where(sa, A, np.where(sb, 10 * B, 0)))
        lo = np.where(sa & sb, A * B, np.where(sa, -A, 0))
        ro = np.where(sa & sb, np.maximum(A, B), np.where(sb, np.abs(B), 0))
        for name, want, pat in (("f", f, sa | sb), ("lo", lo, sa), ("ro", ro, sb)):
            case(f"def_cases_{name}_{af}", f"C(i,j) = {name}(A(i,j), B(i,j))", {"A": A, "B": B},
                 want, fmts={"A": af, "B": "ds", "C": "ds"}, allowed=pat, extra=cdefs,
                 check=True)
        case(f"def_cases_spmv_{af}", "y(i) = f(A(i,j), B(i,j)) * x(j)", {"A": A, "B": B, "x": x},
             f @ x, fmts={"A": af, "B": "ds", "x": "d", "y": "d"}, extra=cdefs, check=True)
        # in a merged loop (five sparse terms), the hit flags pick the case
        case(f"def_cases_wide_{af}", "C(i,j) = f(A(i,j), B(i,j)) + D(i,j) + E(i,j) + F(i,j)",
             {"A": A, "B": B, "D": Ds[0], "E": Ds[1], "F": Ds[2]}, f + sum(Ds),
             fmts={"A": af, "B": "ds", "D": "ds", "E": "ds", "F": "ds", "C": "ds"},
             allowed=sa | sb | np.any([D != 0 for D in Ds], axis=0), extra=cdefs, check=True)
    # definitions as reduction operators, over the stored entries, from
    # their declared identity (an empty row: -inf for lse, 0 for amax)
    rdefs = defs + ["-def=lse(x, y) = log(exp(x) + exp(y)) identity -inf",
                    "-def=amax(x, y) = max(abs(x), abs(y)) identity 0"]
    for af in MAT_FMTS:
        S = stored(A, af)
        lse = np.array([np.log(np.exp(A[i][S[i]]).sum()) if S[i].any() else -np.inf
                        for i in range(A.shape[0])])
        amax = np.array([np.abs((A * x)[i][S[i]]).max() if S[i].any() else 0.0
                         for i in range(A.shape[0])])
        case(f"def_reduce_lse_{af}", "y(i) = reduce(lse, j, A(i,j))", {"A": A}, lse,
             fmts={"A": af, "y": "d"}, extra=rdefs, check=True)
        case(f"def_reduce_amax_{af}", "y(i) = reduce(amax, j, A(i,j) * x(j))",
             {"A": A, "x": x}, amax, fmts={"A": af, "x": "d", "y": "s"}, extra=rdefs,
             check=True)  # a scoped reduction stores its row (0 where empty), as TACO
        # the empty row's lse is -inf, and present: amax over the rows is inf
        case(f"def_reduce_nested_{af}", "a = reduce(amax, i, reduce(lse, j, A(i,j)))",
             {"A": A}, float(np.abs(lse).max()), fmts={"A": af}, extra=rdefs, check=True)
        case(f"def_reduce_nested_full_{af}", "a = reduce(amax, i, reduce(lse, j, A(i,j)))",
             {"A": B + 3}, float(np.abs(np.log(np.exp(B + 3).sum(axis=1))).max()),
             fmts={"A": af}, extra=rdefs, check=True)


def test_masks():
    """mask(m, e): e where m exists; except(m, e): e where m does not
    (GraphBLAS's structural mask and its complement), without computing
    the entries kept out; in lattice loops and in merged ones."""
    for (m, n), seed in (((9, 7), 51), ((14, 11), 52)):
        r = rng_for(seed)
        A = rand_sparse(r, m, n, 0.35, empty_rows=(2,))
        x = rand_dense(r, n)
        mv = rand_sparse_vec(r, m, 0.4)
        M = rand_sparse(r, m, n, 0.4)
        Bs = [rand_sparse(r, m, n, 0.3) for _ in range(4)]
        yv = A @ x
        keep, drop = mv != 0, mv == 0
        for af in ("ds", "ds:1,0", "ss", "uq"):
            for of in VEC_FMTS:
                sz = f"{m}x{n}_{af}_{of}"
                case(f"mask_spmv_{sz}", "y(i) = mask(m(i), A(i,j) * x(j))", {"A": A, "x": x, "m": mv},
                     np.where(keep, yv, 0), fmts={"A": af, "x": "d", "m": "s", "y": of},
                     allowed=keep if of == "s" else None, check=True)
                case(f"except_spmv_{sz}", "y(i) = except(m(i), A(i,j) * x(j))",
                     {"A": A, "x": x, "m": mv}, np.where(drop, yv, 0),
                     fmts={"A": af, "x": "d", "m": "s", "y": of},
                     allowed=drop if of == "s" else None, check=True)
        sM = M != 0
        union = sum(B for B in Bs)
        pat = np.any([B != 0 for B in Bs], axis=0)
        expr4 = "C(i,j) = {}(M(i,j), A(i,j) + B(i,j) + D(i,j) + E(i,j))"
        ins = {"M": M, "A": Bs[0], "B": Bs[1], "D": Bs[2], "E": Bs[3]}
        f4 = {"M": "ds", "A": "ds", "B": "ds", "D": "ds", "E": "ds", "C": "ds"}
        case(f"mask_wide_{m}x{n}", expr4.format("mask"), ins, np.where(sM, union, 0), fmts=f4,
             allowed=sM & pat, check=True)
        case(f"except_wide_{m}x{n}", expr4.format("except"), ins, np.where(sM, 0, union),
             fmts=f4, allowed=~sM & pat, check=True)
        # masked SpGEMM, and one BFS step under or.and: the next frontier
        # is the neighbours of q not yet visited
        Bk = rand_sparse(r, n, m, 0.3)
        Mm = rand_sparse(r, m, m, 0.3)
        prod = A @ Bk
        case(f"mask_spgemm_{m}x{n}", "C(i,j) = mask(M(i,j), A(i,k) * B(k,j))",
             {"M": Mm, "A": A, "B": Bk}, np.where(Mm != 0, prod, 0),
             fmts={"M": "ds", "A": "ds", "B": "ds", "C": "ds"},
             allowed=(Mm != 0) & ((A != 0).astype(int) @ (Bk != 0).astype(int) > 0), check=True)
        G = (rand_sparse(r, m, m, 0.3) != 0).astype(float)
        q = (rand_sparse_vec(r, m, 0.3) != 0).astype(float)
        visited = np.maximum(q, (rand_sparse_vec(r, m, 0.3) != 0).astype(float))
        reach = ((q @ G) > 0) & (visited == 0)
        for gf in ("ds", "ds:1,0"):
            for vf in ("s", "d"):  # a dense mask is valued: its zeros are not there
                case(f"bfs_step_{m}_{gf}_{vf}", "n(j) = except(v(j), q(i) * A(i,j))",
                     {"A": G, "q": q, "v": visited}, reach.astype(float),
                     fmts={"A": gf, "q": "s", "v": vf, "n": "s"}, allowed=reach, check=True,
                     extra=["-semiring=or.and"])
            xs = rand_sparse_vec(r, m, 0.5)
            for fn, want, keepers in (("mask", np.where(keep, xs, 0), keep),
                                      ("except", np.where(drop, xs, 0), drop)):
                case(f"{fn}_valued_elementwise_{m}_{gf}", f"y(i) = {fn}(m(i), x(i))",
                     {"x": xs, "m": mv}, want, fmts={"x": "s", "m": "d", "y": "s"},
                     allowed=keepers & (xs != 0), check=True)
            case(f"mask_dense_valued_{m}_{gf}", "y(i) = mask(m(i), A(i,j) * x(j))",
                 {"A": A, "x": x, "m": mv}, np.where(keep, yv, 0),
                 fmts={"A": gf, "x": "d", "m": "d", "y": "d"}, check=True)
    # triangles: sum over the edges (i, j) of L of the paths i -> k -> j
    r = rng_for(53)
    L = np.tril((rand_sparse(r, 16, 16, 0.35) != 0).astype(float), -1)
    case("triangles_plus_pair", "t = mask(L(i,j), L(i,k) * L(k,j))", {"L": L},
         float(((L @ L) * L).sum()), fmts={"L": "ds"}, check=True, extra=["-semiring=plus.pair"])


def test_narrow_dtypes():
    """bool (+ is or, * is and, as numpy's bool arithmetic), i16 and i8
    (wrapping around as numpy's fixed-width integers do), dense and sparse,
    with empty rows; expected values from numpy in the dtype itself."""
    r = rng_for(61)
    m, n = 14, 11
    Ab = rand_sparse(r, m, n, 0.3, empty_rows=(2,)) != 0
    Bb = rand_sparse(r, m, n, 0.3) != 0
    xb = r.random(n) < 0.5
    Mb = rand_sparse(r, n, 6, 0.4) != 0
    tb = {k: "bool" for k in "ABCxyMvqn"}
    for af in ("ds", "ss", "dd", "ds:1,0"):
        case(f"bool_spmv_{af}", "y(i) = A(i,j) * x(j)", {"A": Ab, "x": xb}, Ab @ xb,
             fmts={"A": af, "x": "d", "y": "d"}, exact=True, types=tb, check=True)
        case(f"bool_spmm_{af}", "C(i,j) = A(i,k) * B(k,j)", {"A": Ab, "B": Mb}, Ab @ Mb,
             fmts={"A": af, "B": "ds", "C": "ds"}, exact=True, types=tb, check=True,
             allowed=(Ab.astype(int) @ Mb.astype(int)) > 0)
        case(f"bool_add_{af}", "C(i,j) = A(i,j) + B(i,j)", {"A": Ab, "B": Bb}, Ab | Bb,
             fmts={"A": af, "B": "ds", "C": "ds"}, exact=True, types=tb, check=True,
             allowed=stored(Ab, af) | Bb)
        case(f"bool_mul_{af}", "C(i,j) = A(i,j) * B(i,j)", {"A": Ab, "B": Bb}, Ab & Bb,
             fmts={"A": af, "B": "ds", "C": "ds"}, exact=True, types=tb, check=True,
             allowed=Ab & Bb)
        case(f"bool_any_{af}", "y(i) = reduce(max, j, A(i,j))", {"A": Ab}, Ab.any(axis=1),
             fmts={"A": af, "y": "d"}, exact=True, types=tb, check=True)
        case(f"bool_or_{af}", "y(i) = reduce(or, j, A(i,j) * x(j))", {"A": Ab, "x": xb},
             (Ab & xb).any(axis=1), fmts={"A": af, "x": "d", "y": "s"}, exact=True,
             types=tb, check=True)
    # all over a dense row (its false entries are there); min over nothing
    # (an empty sparse row) is true, as np.all of nothing
    Ad = r.random((m, n)) < 0.8
    Ad[3, :] = True
    case("bool_all_dd", "y(i) = reduce(min, j, A(i,j))", {"A": Ad}, Ad.all(axis=1),
         fmts={"A": "dd", "y": "d"}, exact=True, types=tb, check=True)
    case("bool_all_empty_row", "y(i) = reduce(and, j, A(i,j))", {"A": Ab},
         np.ones(m, bool), fmts={"A": "ds", "y": "d"}, exact=True, types=tb, check=True)
    # one BFS level in bool: neighbours of the frontier q not yet visited
    G = rand_sparse(r, m, m, 0.3) != 0
    q = r.random(m) < 0.3
    q[0] = True
    v = q | (r.random(m) < 0.3)
    reach = (q @ G) & ~v
    for gf in ("ds", "ds:1,0"):  # by columns, every unvisited j is stored (false ones
        # explicitly, as a sum over a dense loop stores its zeros)
        case(f"bool_bfs_{gf}", "n(j) = except(v(j), q(i) * A(i,j))", {"A": G, "q": q, "v": v},
             reach, fmts={"A": gf, "q": "s", "v": "s", "n": "s"}, exact=True, types=tb,
             check=True, allowed=reach if gf == "ds" else ~v)
    # wrapping integers: row sums past 127 (i8) and products past 32767 (i16)
    Ai = rand_sparse(r, m, n, 0.5, empty_rows=(4,), ints=True) * 7
    Bi = rand_sparse(r, n, 9, 0.5, ints=True) * 60
    xi = r.integers(-9, 10, size=n)
    for dt, npdt in (("i8", np.int8), ("i16", np.int16)):
        t = {k: dt for k in "ABCxy"}
        A8 = Ai.astype(npdt)
        x8 = xi.astype(npdt)
        for af in ("ds", "ss", "dd"):
            # numpy's fixed-width products and sums wrap, as the kernels' do
            case(f"{dt}_spmv_{af}", "y(i) = A(i,j) * x(j)", {"A": A8, "x": x8},
                 (Ai @ xi).astype(npdt), fmts={"A": af, "x": "d", "y": "d"}, exact=True,
                 types=t, check=True)
            case(f"{dt}_min_{af}", "y(i) = reduce(min, j, A(i,j))", {"A": A8},
                 np.where(A8.any(axis=1), np.where(A8 != 0, A8, 127).min(axis=1), 0),
                 fmts={"A": af, "y": "s"}, exact=True, types=t, check=True) if af != "dd" else None
            case(f"{dt}_add_{af}", "C(i,j) = A(i,j) + B(i,j)", {"A": A8, "B": (Ai * 3).astype(npdt)},
                 (Ai * 4).astype(npdt), fmts={"A": af, "B": "ds", "C": "ds"}, exact=True,
                 types=t, check=True)
        Bw = Bi.astype(npdt)
        case(f"{dt}_spgemm", "C(i,j) = A(i,k) * B(k,j)", {"A": A8, "B": Bw},
             (A8.astype(np.int64) @ Bw.astype(np.int64)).astype(npdt),
             fmts={"A": "ds", "B": "ds", "C": "ds"}, exact=True, types=t, check=True)
        case(f"{dt}_dense_min_empty_row", "y(i) = reduce(min, j, A(i,j))", {"A": A8},
             np.where(A8.any(axis=1), np.where(A8 != 0, A8, 127).min(axis=1),
                      np.iinfo(npdt).max), fmts={"A": "ds", "y": "d"}, exact=True, types=t)


# Slowest first: the pool starts them before the quick ones.
def _sl(o, n, st):
    """The numpy index of MLIR's slice (offset o, size n, stride st)."""
    return slice(o, o + (n - 1) * st + 1, st)


def test_slices():
    """Views (dimSlices) read in place: the file's matrix sliced by the
    format, -f=A:ds[o:n:s,o:n:s], against numpy's A[o:o+(n-1)*s+1:s, ...]."""
    r = rng_for(15)
    A = rand_sparse(r, 13, 11, 0.35, empty_rows=(4,))
    B = rand_sparse(r, 13, 11, 0.3)
    Q = rand_sparse(r, 11, 9, 0.3)
    views = [((1, 6, 2), (0, 11, 1)), ((2, 4, 3), (1, 5, 2)), ((12, 1, 1), (10, 1, 1)),
             ((0, 13, 1), (3, 4, 1)), ((3, 5, 1), (0, 4, 3))]
    for af in MAT_FMTS + ["do", "ls"]:
        levels, _, order = af.partition(":")
        for k, (rs, cs) in enumerate(views):
            spec = f"{af}[{rs[0]}:{rs[1]}:{rs[2]},{cs[0]}:{cs[1]}:{cs[2]}]"
            V = A[_sl(*rs), _sl(*cs)]
            V2 = B[_sl(*rs), _sl(*cs)]
            x = rand_dense(r, cs[1])
            case(f"slice_spmv_{af}_{k}", "y(i) = A(i,j) * x(j)", {"A": A, "x": x}, V @ x,
                 fmts={"A": spec, "x": "d", "y": "d"}, check=True)
            case(f"slice_add_{af}_{k}", "C(i,j) = A(i,j) + B(i,j)", {"A": A, "B": B}, V + V2,
                 fmts={"A": spec, "B": f"ds[{rs[0]}:{rs[1]}:{rs[2]},{cs[0]}:{cs[1]}:{cs[2]}]",
                       "C": "ds"}, allowed=(V != 0) | (V2 != 0) | stored(V, af))
            W = Q[_sl(*cs), 1:9:2]        # a view of Q whose rows are V's columns
            case(f"slice_spgemm_{af}_{k}", "C(i,j) = A(i,k) * B(k,j)", {"A": A, "B": Q}, V @ W,
                 fmts={"A": spec, "B": f"ds[{cs[0]}:{cs[1]}:{cs[2]},1:4:2]", "C": "ds"})
            Bd = rand_dense(r, cs[1], 3)
            case(f"slice_spmm_{af}_{k}", "C(i,j) = A(i,k) * B(k,j)", {"A": A, "B": Bd}, V @ Bd,
                 fmts={"A": spec, "B": "dd", "C": "dd"})
    T = rand_sparse3(r, (7, 6, 5), 0.3)
    c = rand_dense(r, 3)
    for bf in ("sss", "dss", "ddd"):
        case(f"slice_ttv_{bf}", "A(i,j) = B(i,j,k) * c(k)", {"B": T, "c": c},
             np.einsum("ijk,k->ij", T[1:6:2, 0:6, 0:5:2], c),
             fmts={"B": f"{bf}[1:3:2,:,0:3:2]", "c": "d", "A": "dd"}, check=True)


TESTS = [test_wide_unions_csr, test_wide_unions_dense, test_wide_unions_vector,
         test_wide_unions_times, test_union_paths, test_implicit_summation, test_residual_tiny,
         test_scalars, test_operand_names, test_explicit_sum, test_intersections, test_spmv_spmm, test_sddmm_spgemm,
         test_add_mul_transpose, test_order3, test_accumulate, test_dtypes,
         test_functions, test_reductions, test_semirings, test_defs, test_masks,
         test_narrow_dtypes, test_slices]


def run_test(t):
    _out.buf = []
    try:
        t()
    except Exception as e:  # a harness bug: report it, do not hide the rest
        count("failed")
        say(f"FAIL {t.__name__}: harness error {type(e).__name__}: {e}")
    return _out.buf


def main():
    global TJ, TMP, FILTER
    if len(sys.argv) < 2:
        print("usage: semantics_numpy.py <tensorjit> [case-name substring]")
        return 2
    TJ = os.path.abspath(sys.argv[1])
    FILTER = sys.argv[2] if len(sys.argv) > 2 else None
    if not os.access(TJ, os.X_OK):
        print(f"FAIL semantics_numpy: {TJ} is not executable")
        return 1
    TMP = tempfile.mkdtemp(prefix="tj-semantics-")
    with ThreadPoolExecutor(max_workers=max(1, JOBS)) as pool:
        for lines in pool.map(run_test, TESTS):
            for ln in lines:
                print(ln)
            sys.stdout.flush()
    for n in NOTES:
        print(f"NOTE {n}")
    print(f"semantics_numpy: {STATS['run']} cases run, {STATS['failed']} failed, "
          f"{STATS['skipped']} skipped"
          + (f", {STATS['sampled_out']} left out (TJ_SEMANTICS_SAMPLE={SAMPLE})"
             if SAMPLE > 1 else ""))
    if STATS["failed"]:
        print(f"semantics_numpy: inputs kept in {TMP}")
        return 1
    shutil.rmtree(TMP, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

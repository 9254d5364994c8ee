#!/usr/bin/python3
"""Random schedules against numpy: wrong answers in the scheduling paths.

Each seed picks a kernel from a corpus (SpMV, SpMM, SDDMM, sparse add,
SpGEMM, TTV, TTM, MTTKRP, the residual b - Ax, GEMM plus a matrix, sums of
products, dot products), random small extents per index (1, primes, powers
of two), random storage formats per operand (dense, CSR, CSC, DCSR, COO,
CSF, mixed 3-D, now and then BSR) and for the output, f64 / f32 / i64
values (small integers, so every sum is exact in any order), 1 or 2
threads, and a random legal-looking schedule of 0-5 directives: reorder,
split, divide, pos over a sparse operand's level, fuse, bound, unroll,
vectorize, precompute (of the rhs or a subexpression, over 0-2 indices),
parallelize (static, dynamic, balanced, partials, atomics), method(...),
sequence() / nosequence(). Loops are named as the directives before
rename them.

For each case: a refusal (compile or run) must be a TensorJitError with a
message that is not an internal error; an accepted kernel must print a
non-empty concrete index notation, give numpy's values (computed here
from dense copies of the inputs, never by tensorjit's reference
interpreter) and give the same values when run again. Cases run in worker
processes, so a crash or a hang is reported against its seed.

Usage: /usr/bin/python3 tests/random_schedules.py [first-seed count]
(default: seeds 0..TJ_SFUZZ_COUNT-1, TJ_SFUZZ_COUNT defaulting to 1200;
TJ_SFUZZ_FIRST moves the first seed). `--one SEED` runs one case in this
process and prints it (expression, formats, schedule, values). Exits 1
when any case is wrong, crashed or hung, 77 when numpy is missing.
"""
import json
import os
import random
import re
import select
import subprocess
import sys
import time

try:
    import numpy as np
except ImportError as e:  # pragma: no cover
    print(f"SKIP random_schedules: {e}")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
os.environ.setdefault("TJ_PAR_MIN_WORK", "0")  # keep the parallel paths on small inputs

EXTENTS = [1, 2, 3, 4, 5, 7, 8, 11, 13, 16]
FORMATS = {1: ["d", "d", "s"],
           2: ["dd", "dd", "ds", "ds", "ds:1,0", "ss", "uq", "sd", "ss:1,0"],
           3: ["ddd", "ddd", "sss", "dss", "uqq", "dsd", "ssd", "sds"]}
BSR = "dsdd:0/2,1/2,0%2,1%2"
OUT_FORMATS = {1: ["s"], 2: ["ds", "ds", "ss", "ds:1,0", "uq", "sd"], 3: ["sss", "dss", "ssd", "uqq"]}

# name, expression, numpy einsum or function of the dense arrays,
# subexpressions a precompute may name (with index sets that fit them)
CORPUS = [
    ("spmv", "y(i) = A(i,j) * x(j)", "ij,j->i", [("A(i,j) * x(j)", [[], ["j"]])]),
    ("spmv_t", "y(j) = A(i,j) * x(i)", "ij,i->j", [("A(i,j) * x(i)", [[], ["i"]])]),
    ("spmv_acc", "y(i) += A(i,j) * x(j)", "ij,j->i", [("A(i,j) * x(j)", [[]])]),
    ("spmm", "C(i,k) = A(i,j) * B(j,k)", "ij,jk->ik", [("A(i,j) * B(j,k)", [["k"], ["j"]])]),
    ("sddmm", "A(i,j) = B(i,j) * C(i,k) * D(k,j)", "ij,ik,kj->ij",
     [("C(i,k) * D(k,j)", [[], ["j"]]), ("B(i,j) * C(i,k)", [["j"]])]),
    ("add", "A(i,j) = B(i,j) + C(i,j)", lambda a: a["B"] + a["C"], [("B(i,j) + C(i,j)", [["j"]])]),
    ("add3", "A(i,j) = B(i,j) + C(i,j) + D(i,j)", lambda a: a["B"] + a["C"] + a["D"],
     [("B(i,j) + C(i,j)", [["j"]])]),
    ("spgemm", "A(i,j) = B(i,k) * C(k,j)", "ik,kj->ij",
     [("B(i,k) * C(k,j)", [["j"], ["i", "j"]])]),
    ("ttv", "A(i,j) = B(i,j,k) * c(k)", "ijk,k->ij", [("B(i,j,k) * c(k)", [[], ["j"]])]),
    ("ttm", "A(i,j,k) = B(i,j,l) * C(k,l)", "ijl,kl->ijk", [("B(i,j,l) * C(k,l)", [["k"], []])]),
    ("mttkrp", "A(i,j) = B(i,k,l) * C(k,j) * D(l,j)", "ikl,kj,lj->ij",
     [("B(i,k,l) * D(l,j)", [["j"]]), ("B(i,k,l) * C(k,j)", [["j"]])]),
    ("residual", "y(i) = b(i) - A(i,j) * x(j)", lambda a: a["b"] - a["A"] @ a["x"],
     [("A(i,j) * x(j)", [[]])]),
    ("gemm_plus", "A(i,j) = B(i,k) * C(k,j) + D(i,j)", lambda a: a["B"] @ a["C"] + a["D"],
     [("B(i,k) * C(k,j)", [["i", "j"], ["j"]])]),
    ("sum_of_products", "y(i) = A(i,j) * x(j) + B(i,j) * z(j)",
     lambda a: a["A"] @ a["x"] + a["B"] @ a["z"], [("A(i,j) * x(j)", [[]]), ("B(i,j) * z(j)", [[]])]),
    ("sum_times", "y(i) = (B(i,j) + C(i,j)) * x(j)", lambda a: (a["B"] + a["C"]) @ a["x"],
     [("B(i,j) + C(i,j)", [["j"]])]),
    ("hadamard_plus", "A(i,j) = B(i,j) * C(i,j) + D(i,j)", lambda a: a["B"] * a["C"] + a["D"],
     [("B(i,j) * C(i,j)", [["j"]])]),
    ("dot", "a = x(i) * y(i)", "i,i->", [("x(i) * y(i)", [[]])]),
    ("inner3", "a = B(i,j,k) * C(i,j,k)", "ijk,ijk->", []),
    ("gemm", "A(i,j) = B(i,k) * C(k,j)", "ik,kj->ij", []),
]
STRATEGIES = ["", "static", "dynamic", "balanced", "partials", "atomics", "static, atomics",
              "dynamic, partials", "balanced, atomics"]
METHODS = ["loops", "gett", "ttgt", "log", "model", "sell"]


def parse(expr):
    """(output, its indices, [(tensor, indices)] in order of first use, accumulate)."""
    lhs, _, rhs = expr.partition("=")
    acc = lhs.endswith("+")
    m = re.match(r"\s*(\w+)\s*(?:\(([^()]*)\))?", lhs)
    outs = [c.strip() for c in (m.group(2) or "").split(",") if c.strip()]
    ops = {}
    for name, idx in re.findall(r"(\w+)\(([^()]*)\)", rhs):
        ops.setdefault(name, [c.strip() for c in idx.split(",")])
    return m.group(1), outs, list(ops.items()), acc


class Sched:
    """A random schedule, built directive by directive over current loop names."""

    def __init__(self, rng, indices, ops, formats, subexprs, ext):
        self.rng, self.loops, self.ext = rng, list(indices), dict(ext)
        self.orig = set(indices)
        self.ops, self.formats, self.subexprs = ops, formats, subexprs
        self.parts, self.n = [], 0
        self.splittable = set(indices)   # loops no split, divide or fuse has rewritten
        self.plain = set(indices)        # loops nothing has rewritten

    def fresh(self, base):
        self.n += 1
        return f"{base}{self.n}"

    def add(self, text):
        self.parts.append(text)

    def pick(self):
        return self.rng.choice(self.loops)

    def step(self):
        r, rng = self.rng, self.rng
        kind = r.choice(["reorder", "split", "split", "divide", "pos", "pos", "fuse", "bound",
                         "unroll", "vectorize", "precompute", "precompute", "parallelize",
                         "parallelize", "parallelize", "method", "sequence"])
        if kind == "reorder" and len(self.loops) > 1:
            order = self.loops[:]
            if rng.random() < 0.5:
                rng.shuffle(order)
            else:
                k = rng.randrange(len(order) - 1)
                order[k], order[k + 1] = order[k + 1], order[k]
            self.loops = order
            self.add(f"reorder({', '.join(order)})")
        elif kind in ("split", "divide") and self.splittable & set(self.loops):
            x = rng.choice(sorted(self.splittable & set(self.loops)))
            a, b = self.fresh(x[0]), self.fresh(x[0])
            f = rng.choice([1, 2, 3, 4, 5, 7, 8, 16])
            k = self.loops.index(x)
            self.loops[k:k + 1] = [a, b]
            self.add(f"{kind}({x}, {a}, {b}, {f})")
            self.plain.discard(x)
        elif kind == "pos":
            cands = [(x, n, idx) for n, idx in self.ops for x in idx
                     if x in self.loops and set(self.formats.get(n, "d").split(":")[0]) - {"d"}]
            if not cands:
                return
            x, n, idx = rng.choice(cands)
            p = self.fresh(x + "p")
            self.loops[self.loops.index(x)] = p
            self.plain.discard(x)
            self.splittable.discard(x)
            self.add(f"pos({x}, {p}, {n}({','.join(idx)}))")
            if rng.random() < 0.7:
                a, b = self.fresh(x[0]), self.fresh(x[0])
                k = self.loops.index(p)
                self.loops[k:k + 1] = [a, b]
                self.add(f"split({p}, {a}, {b}, {rng.choice([1, 2, 3, 4, 8])})")
        elif kind == "fuse" and any(a in self.plain and b in self.plain
                                    for a, b in zip(self.loops, self.loops[1:])):
            k = rng.choice([k for k in range(len(self.loops) - 1)
                            if self.loops[k] in self.plain and self.loops[k + 1] in self.plain])
            x, y = self.loops[k], self.loops[k + 1]
            self.plain -= {x, y}
            self.splittable -= {x, y}
            f = self.fresh("f")
            self.loops[k:k + 2] = [f]
            self.add(f"fuse({x}, {y}, {f})")
            cands = [(n, idx) for n, idx in self.ops if idx[:2] == [x, y]
                     and set(self.formats.get(n, "d").split(":")[0]) - {"d"}]
            if cands and rng.random() < 0.7:
                n, idx = rng.choice(cands)
                p = self.fresh("fp")
                self.loops[k] = p
                self.add(f"pos({f}, {p}, {n}({','.join(idx)}))")
                if rng.random() < 0.6:
                    a, b = self.fresh("f"), self.fresh("f")
                    self.loops[k:k + 1] = [a, b]
                    self.add(f"split({p}, {a}, {b}, {rng.choice([2, 3, 4, 16])})")
        elif kind == "bound" and self.plain & set(self.loops):
            x = rng.choice(sorted(self.plain & set(self.loops)))
            self.plain.discard(x)
            self.splittable.discard(x)
            e = self.ext.get(x, 4)
            n = rng.choice([e, e, e + rng.randint(1, 5), max(1, e - 1)])
            b = self.fresh(x + "b")
            self.loops[self.loops.index(x)] = b
            self.add(f"bound({x}, {b}, {n}, {rng.choice(['max_exact', 'max_constraint'])})")
        elif kind == "unroll":
            x = self.loops[-1] if rng.random() < 0.5 else self.pick()
            self.add(f"unroll({x}, {rng.choice([2, 3, 4, 8])})")
        elif kind == "vectorize":
            x = self.loops[-1] if rng.random() < 0.6 else self.pick()
            self.add(f"vectorize({x}, {rng.choice([2, 4, 8, 16])})")
        elif kind == "precompute" and self.subexprs:
            e, sets = rng.choice(self.subexprs)
            ws = rng.choice(sets)
            self.add(f"precompute({e}, {{{', '.join(ws)}}}, w)")
        elif kind == "parallelize":
            s = rng.choice(STRATEGIES)
            x = self.loops[0] if rng.random() < 0.5 else self.pick()
            self.add(f"parallelize({x}{', ' + s if s else ''})")
        elif kind == "method":
            self.add(f"method({rng.choice(METHODS)})")
        elif kind == "sequence":
            self.add(rng.choice(["sequence()", "nosequence()"]))


def make_case(seed):
    """Everything a case needs, from its seed alone."""
    rng, rs = random.Random(seed), np.random.RandomState(seed)
    name, expr, oracle, subexprs = CORPUS[rng.randrange(len(CORPUS))]
    out, outs, ops, acc = parse(expr)
    indices = list(dict.fromkeys(outs + [x for _, idx in ops for x in idx]))
    ext = {x: rng.choice(EXTENTS) for x in indices}
    dtype = rng.choice(["f64", "f64", "f64", "f32", "i64"])
    formats = {}
    for n, idx in ops:
        f = rng.choice(FORMATS[len(idx)])
        if len(idx) == 2 and rng.random() < 0.01:
            f = BSR
        formats[n] = f
    if outs and rng.random() < 0.3:
        formats[out] = rng.choice(OUT_FORMATS[len(outs)])
    density = rng.choice([0.0, 0.2, 0.5, 0.8, 1.0])
    arrays = {}
    npdt = {"f64": np.float64, "f32": np.float32, "i64": np.int64}[dtype]
    for n, idx in ops:
        shape = [ext[x] for x in idx]
        v = rs.randint(-4, 6, size=shape) * (rs.rand(*shape) < density)
        arrays[n] = v.astype(npdt)
    init = rs.randint(-3, 4, size=[ext[x] for x in outs]).astype(npdt) if acc else None
    sched = Sched(rng, indices, ops, formats, subexprs, ext)
    for _ in range(rng.choice([0, 1, 1, 2, 2, 3, 3, 4, 5])):
        sched.step()
    threads = rng.choice([1, 2])
    return dict(seed=seed, name=name, expr=expr, oracle=oracle, out=out, outs=outs, ops=ops,
                ext=ext, dtype=dtype, formats=formats, arrays=arrays, init=init,
                schedule=" ".join(sched.parts), threads=threads, density=density)


def expected(c):
    a = {n: v.astype(np.float64) for n, v in c["arrays"].items()}
    o = c["oracle"]
    want = np.einsum(o, *[a[n] for n, _ in c["ops"]]) if isinstance(o, str) else o(a)
    if c["init"] is not None:
        want = want + c["init"]
    return np.asarray(want, dtype=np.float64)


def describe(c):
    fm = " ".join(f"-f={n}:{f}" for n, f in c["formats"].items())
    ex = " ".join(f"-d={x}:{e}" for x, e in c["ext"].items())
    return (f"seed {c['seed']} [{c['name']}] '{c['expr']}' {fm} {ex} -t={c['dtype']} "
            f"density {c['density']} -nthreads={c['threads']} -s='{c['schedule']}'")


def densify(got, shape):
    if hasattr(got, "to_numpy"):
        got = got.to_numpy()
    elif hasattr(got, "toarray"):
        got = got.toarray()
    return np.asarray(got, dtype=np.float64).reshape(shape)


def run_case(seed, verbose=False):
    """(status, detail): ok, refused, or wrong."""
    import tensorjit as tj
    c = make_case(seed)
    where = describe(c)
    operands = {}
    for n, idx in c["ops"]:
        f = c["formats"][n]
        dense = set(f.split(":")[0]) == {"d"} and ":" not in f
        operands[n] = c["arrays"][n] if dense else tj.tensor(c["arrays"][n], n, format=f)
    want = expected(c)
    shape = [c["ext"][x] for x in c["outs"]]
    try:
        k = tj.compile(c["expr"], formats=c["formats"], schedule=c["schedule"] or None,
                       nthreads=c["threads"])
        results = []
        for _ in range(2):
            kw = dict(operands)
            if c["init"] is not None:
                kw["out"] = c["init"].copy()
            results.append(densify(k(**kw), shape))
        cin = k.cin()
    except tj.TensorJitError as ex:
        msg = str(ex).strip()
        if not msg or "internal error" in msg:
            return "wrong", f"{where}: bad refusal message {msg!r}"
        return "refused", f"{where}: {msg}"
    if verbose:
        print(where, "\n", cin, "\n got", results[0].ravel(), "\nwant", want.ravel())
    if not cin.strip():
        return "wrong", f"{where}: empty -print-cin"
    tol = 1e-4 if c["dtype"] == "f32" else 1e-9
    got = results[0]
    if got.shape != want.shape or not np.allclose(got, want, rtol=tol, atol=tol):
        diff = np.max(np.abs(got - want)) if got.shape == want.shape else "shape"
        return "wrong", f"{where}: max |got - want| = {diff}"
    if not np.array_equal(results[0], results[1]):
        return "wrong", f"{where}: second run differs by {np.max(np.abs(results[0] - results[1]))}"
    return "ok", ""


def worker(seeds):
    """Runs cases, one BEGIN and one result line each, for the parent to watch."""
    for s in seeds:
        print(f"BEGIN {s}", flush=True)
        status, detail = run_case(s)
        print("END " + json.dumps([s, status, detail]), flush=True)


def run_all(seeds, timeout=120):
    """Runs the seeds in worker processes; restarts past a crash or a hang."""
    results, todo = {}, list(seeds)
    while todo:
        p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker",
                              ",".join(map(str, todo))],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        current, last = None, time.time()
        while True:
            ready, _, _ = select.select([p.stdout], [], [], 5)
            if ready:
                line = p.stdout.readline()
                if not line:
                    break
                last = time.time()
                if line.startswith("BEGIN "):
                    current = int(line.split()[1])
                elif line.startswith("END "):
                    s, status, detail = json.loads(line[4:])
                    results[s] = (status, detail)
                    current = None
            elif time.time() - last > timeout:
                p.kill()
                break
        p.wait()
        err = p.stderr.read()
        done = [s for s in todo if s in results]
        if current is not None and current not in results:
            what = "hung" if p.returncode == -9 else f"crashed (status {p.returncode})"
            results[current] = ("wrong", f"{describe(make_case(current))}: {what}: {err[-2000:]}")
            done.append(current)
        elif p.returncode != 0 and len(done) < len(todo):
            print(f"worker failed outside a case (status {p.returncode}): {err[-2000:]}")
            for s in todo:
                results.setdefault(s, ("wrong", f"seed {s}: worker failed"))
            break
        todo = [s for s in todo if s not in results]
    return results


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        worker([int(s) for s in sys.argv[2].split(",")])
        return 0
    if len(sys.argv) > 2 and sys.argv[1] == "--one":
        print(run_case(int(sys.argv[2]), verbose=True))
        return 0
    first = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("TJ_SFUZZ_FIRST", 0))
    count = int(sys.argv[2]) if len(sys.argv) > 2 else int(os.environ.get("TJ_SFUZZ_COUNT", 1200))
    results = run_all(range(first, first + count))
    tally = {"ok": 0, "refused": 0, "wrong": 0}
    for s in sorted(results):
        status, detail = results[s]
        tally[status] += 1
        if status == "wrong":
            print("FAIL " + detail, flush=True)
        elif os.environ.get("TJ_SFUZZ_VERBOSE"):
            print(status + " " + detail)
    print(f"random_schedules: {len(results)} cases (seeds {first}..{first + count - 1}), "
          f"{tally['ok']} ok, {tally['refused']} refused, {tally['wrong']} wrong")
    return 1 if tally["wrong"] else 0


if __name__ == "__main__":
    sys.exit(main())

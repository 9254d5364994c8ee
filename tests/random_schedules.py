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
sys.path.insert(0, HERE)
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
     [("B(i,k,l) * C(k,j)", [["j"], ["k", "j"]])]),
    ("mttkrp_taco", "A(i,j) = B(i,k,l) * D(l,j) * C(k,j)", "ikl,lj,kj->ij",
     [("B(i,k,l) * D(l,j)", [["j"], ["k", "j"]])]),
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
    ("hadamard_acc", "A(i,j) += B(i,j) * C(i,j)", lambda a: a["B"] * a["C"],
     [("B(i,j) * C(i,j)", [["j"]])]),
    ("spgemm_acc", "A(i,j) += B(i,k) * C(k,j)", "ik,kj->ij", [("B(i,k) * C(k,j)", [["j"]])]),
    ("ttv_acc", "A(i,j) += B(i,j,k) * c(k)", "ijk,k->ij", [("B(i,j,k) * c(k)", [[]])]),
]
# Schedules TACO's papers and tensorjit's README write, by kernel: (directives
# with {f} {g} factors, {w} a vector width, {s} a strategy; the loops they
# leave, outer to inner; formats that make them apply). A case may start
# from one and add random directives.
RECIPES = {
    "spmv": [("split(i, i0, i1, {f}) parallelize(i0, {s})", "i0 i1 j", {"A": "ds"}),
             ("fuse(i, j, f) pos(f, fp, A(i,j)) split(fp, f0, f1, {f}) "
              "parallelize(f0, static, atomics)", "f0 f1", {"A": "ds"}),
             ("fuse(i, j, f) pos(f, fp, A(i,j)) split(fp, f0, f1, {f})", "f0 f1", {"A": "ss"}),
             ("pos(j, jp, A(i,j)) split(jp, j0, j1, {f}) vectorize(j1, {w})", "i j0 j1", {"A": "ds"}),
             ("reorder(j, i) parallelize(j, atomics)", "j i", {"A": "ds:1,0"}),
             ("reorder(j, i) parallelize(j, partials)", "j i", {"A": "ds:1,0"}),
             ("parallelize(j, partials)", "i j", {"A": "dd"}),
             ("parallelize(j, atomics)", "i j", {"A": "ds"}),
             ("bound(j, jb, {e}, max_exact) unroll(jb, 4)", "i jb", {"A": "dd"}),
             ("method(sell) parallelize(i, {s})", "i j", {"A": "ds"})],
    "spmv_t": [("parallelize(i, atomics)", "i j", {"A": "ds"}),
               ("reorder(j, i) parallelize(j, {s})", "j i", {"A": "ds:1,0"})],
    "spmv_acc": [("split(i, i0, i1, {f}) parallelize(i0, {s})", "i0 i1 j", {"A": "ds"}),
                 ("reorder(j, i) parallelize(j, atomics)", "j i", {"A": "ds:1,0"})],
    "spmm": [("split(i, i0, i1, {f}) pos(j, jp, A(i,j)) split(jp, j0, j1, {g}) "
              "reorder(i0, i1, j0, k, j1)", "i0 i1 j0 k j1", {"A": "ds"}),
             ("split(i, i0, i1, {f}) pos(j, jp, A(i,j)) split(jp, j0, j1, {g}) "
              "reorder(i0, i1, j0, k, j1) parallelize(i0, {s})", "i0 i1 j0 k j1", {"A": "ds"}),
             ("reorder(i, j, k) vectorize(k, {w})", "i j k", {"A": "ds"}),
             ("split(k, k0, k1, {f}) reorder(i, k0, j, k1) vectorize(k1, {w})", "i k0 j k1",
              {"A": "ds"}),
             ("reorder(i, k, j) parallelize(j, partials)", "i k j", {"A": "ds"})],
    "sddmm": [("split(i, i0, i1, {f}) pos(j, jpos, B(i,j)) split(jpos, jpos0, jpos1, {g}) "
               "reorder(i0, i1, jpos0, k, jpos1) parallelize(i0, {s})", "i0 i1 jpos0 k jpos1",
               {"B": "ds", "A": "ds"}),
              ("split(i, i0, i1, {f}) pos(j, jpos, B(i,j)) split(jpos, jpos0, jpos1, {g}) "
               "reorder(i0, i1, jpos0, k, jpos1)", "i0 i1 jpos0 k jpos1", {"B": "ds"}),
              ("fuse(i, j, f) pos(f, fp, B(i,j)) split(fp, f0, f1, {f})", "f0 f1 k",
               {"B": "ds", "A": "ds"})],
    "gemm": [("split(i, i0, i1, {f}) split(j, j0, j1, {g}) reorder(i0, j0, k, i1, j1) "
              "vectorize(j1, {w}) parallelize(i0, {s})", "i0 j0 k i1 j1", {}),
             ("method({m})", "i j k", {}), ("method(loops) unroll(k, 4) parallelize(i, {s})", "i j k", {}),
             ("fuse(i, j, f) split(f, f0, f1, {f}) parallelize(f0, {s})", "f0 f1 k", {})],
    "gemm_plus": [("sequence() parallelize(i, {s})", "i j k", {}),
                  ("sequence() method({m})", "i j k", {}),
                  ("precompute(B(i,k) * C(k,j), {{i, j}}, w) split(i, i0, i1, {f})", "i0 i1 j k", {}),
                  ("precompute(B(i,k) * C(k,j), {{j}}, w) parallelize(i, {s})", "i j k", {}),
                  ("nosequence() split(j, j0, j1, {f}) vectorize(j1, {w})", "i j0 j1 k", {})],
    "residual": [("sequence()", "i j", {}), ("sequence() parallelize(i, {s})", "i j", {}),
                 ("precompute(A(i,j) * x(j), {{}}, t) parallelize(i, {s})", "i j", {"A": "ds"}),
                 ("split(i, i0, i1, {f}) parallelize(i0, {s})", "i0 i1 j", {"A": "ds"}),
                 ("pos(j, jp, A(i,j)) split(jp, j0, j1, {f})", "i j0 j1", {"A": "ds"})],
    "mttkrp_taco": [("precompute(B(i,k,l) * D(l,j), {{j}}, w) parallelize(i, {s})", "i k l j",
                     {"B": "sss"}),
                    ("precompute(B(i,k,l) * D(l,j), {{j}}, w) pos(l, lp, B(i,k,l)) "
                     "split(lp, l0, l1, {f}) split(j, j0, j1, {g})", "i k l0 l1 j0 j1", {"B": "sss"})],
    "mttkrp": [("precompute(B(i,k,l) * C(k,j), {{j}}, w) parallelize(i, {s})", "i k l j",
                {"B": "sss"}),
               ("reorder(i, k, l, j) vectorize(j, {w})", "i k l j", {"B": "sss"}),
               ("pos(l, lp, B(i,k,l)) split(lp, l0, l1, {f})", "i j k l0 l1", {"B": "sss"}),
               ("fuse(i, k, f) pos(f, fp, B(i,k,l)) split(fp, f0, f1, {f})", "f0 f1 l j",
                {"B": "sss"})],
    "ttv": [("fuse(i, j, f) pos(f, fp, B(i,j,k)) split(fp, f0, f1, {f})", "f0 f1 k", {"B": "sss"}),
            ("parallelize(i, {s})", "i j k", {"B": "sss"}),
            ("pos(k, kp, B(i,j,k)) split(kp, k0, k1, {f}) vectorize(k1, {w})", "i j k0 k1",
             {"B": "dss"})],
    "ttm": [("reorder(i, j, k, l) vectorize(k, {w})", "i j k l", {"B": "sss"}),
            ("split(k, k0, k1, {f}) parallelize(i, {s})", "i j k0 k1 l", {"B": "sss"})],
    "dot": [("split(i, i0, i1, {f}) parallelize(i0, partials)", "i0 i1", {}),
            ("parallelize(i, atomics)", "i", {}),
            ("pos(i, ip, x(i)) split(ip, i0, i1, {f}) parallelize(i0, static, partials)", "i0 i1",
             {"x": "s"}),
            ("bound(i, ib, {e}, max_constraint) vectorize(ib, {w})", "ib", {})],
    "inner3": [("fuse(i, j, f) pos(f, fp, B(i,j,k)) split(fp, f0, f1, {f})", "f0 f1 k",
                {"B": "sss"})],
    "add": [("split(i, i0, i1, {f}) parallelize(i0, {s})", "i0 i1 j", {}),
            ("fuse(i, j, f) split(f, f0, f1, {f}) parallelize(f0, {s})", "f0 f1", {"B": "dd", "C": "dd"})],
    "hadamard_plus": [("fuse(i, j, f) split(f, f0, f1, {f}) vectorize(f1, {w})", "f0 f1", {})],
    "spgemm": [("precompute(B(i,k) * C(k,j), {{j}}, w) parallelize(i, {s})", "i k j",
                {"B": "ds", "C": "ds", "A": "ds"}),
               ("reorder(i, k, j) split(i, i0, i1, {f}) parallelize(i0, {s})", "i0 i1 k j",
                {"B": "ds", "C": "ds"})],
    "sum_times": [("precompute(B(i,j) + C(i,j), {{j}}, w) split(j, j0, j1, {f}) vectorize(j1, {w})",
                   "i j0 j1", {}),
                  ("precompute(B(i,j) + C(i,j), {{j}}, w) parallelize(i, {s})", "i j", {})],
}
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
    steps = rng.choice([0, 1, 1, 2, 2, 3, 3, 4, 5])
    if name in RECIPES and rng.random() < 0.45:
        text, loops, force = rng.choice(RECIPES[name])
        for n, f in force.items():
            if rng.random() < 0.8:
                formats[n] = f
        text = text.format(f=rng.choice([1, 2, 3, 4, 5, 8, 16]), g=rng.choice([1, 2, 3, 4, 8]),
                           w=rng.choice([2, 4, 8]), s=rng.choice(STRATEGIES[:4]) or "static",
                           m=rng.choice(METHODS[:5]),
                           e=rng.choice([ext.get("j", 1), ext.get("i", 1)]))
        sched.parts.append(text)
        sched.loops = loops.split()
        sched.plain &= set(sched.loops)
        sched.splittable &= set(sched.loops)
        steps = rng.choice([0, 0, 1, 1, 2])
    for _ in range(steps):
        sched.step()
    threads = rng.choice([1, 2])
    # a semiring now and then (its own stream: the other draws stay as they were)
    semiring = None
    r2 = random.Random(seed * 7919 + 1)
    if (isinstance(oracle, str) and dtype != "i64" and not acc and BSR not in formats.values()
            and r2.random() < 0.2):
        # the oracle takes one sum over the whole product: with more than two
        # factors that is the scope only where mul distributes over add
        semiring = r2.choice(sorted(SEMIRINGS) if len(ops) <= 2 else
                             ["min.plus", "max.plus", "min.max", "max.min"])
        formats.pop(out, None)
    backend = "c" if r2.random() < 0.04 else "llvm"
    return dict(seed=seed, name=name, expr=expr, oracle=oracle, out=out, outs=outs, ops=ops,
                ext=ext, dtype=dtype, formats=formats, arrays=arrays, init=init,
                schedule=" ".join(sched.parts), threads=threads, density=density,
                semiring=semiring, backend=backend)


SEMIRINGS = {"min.plus": ("min", "plus"), "max.plus": ("max", "plus"),
             "min.times": ("min", "times"), "max.times": ("max", "times"),
             "plus.min": ("plus", "min"), "min.max": ("min", "max"), "max.min": ("max", "min")}
ADD = {"min": (np.minimum, np.inf), "max": (np.maximum, -np.inf), "plus": (np.add, 0.0)}
MUL = {"plus": np.add, "times": np.multiply, "min": np.minimum, "max": np.maximum}


def semiring_expected(c):
    """A product einsum under c's semiring: mul where every factor is stored,
    add over what exists, the add's identity where nothing does."""
    from random_numpy import stored
    add, mul = SEMIRINGS[c["semiring"]]
    ins, out = c["oracle"].split("->")
    every = list(dict.fromkeys(ins.replace(",", "")))
    shape = [c["ext"][x] for x in every]
    val, ex = None, np.ones(shape, dtype=bool)
    for (n, _), sub in zip(c["ops"], ins.split(",")):
        v = c["arrays"][n].astype(np.float64)
        e = stored(v != 0, c["formats"][n])
        kept = "".join(x for x in every if x in sub)
        look = [c["ext"][x] if x in sub else 1 for x in every]
        v = np.broadcast_to(np.einsum(f"{sub}->{kept}", v).reshape(look), shape)
        e = np.broadcast_to(np.einsum(f"{sub}->{kept}", e).reshape(look), shape)
        val = v if val is None else np.where(ex & e, MUL[mul](val, v), 0.0)
        ex = ex & e
    f, ident = ADD[add]
    v = np.where(ex, val, ident)
    axes = tuple(k for k, x in enumerate(every) if x not in out)
    if axes:
        v, ex = f.reduce(v, axis=axes), np.any(ex, axis=axes)
    left = [x for x in every if x in out]
    perm = [left.index(x) for x in out]
    v, ex = np.transpose(v, perm), np.transpose(ex, perm)
    return np.where(ex, v, ident).astype(np.float64)


def expected(c):
    if c["semiring"]:
        return semiring_expected(c)
    a = {n: v.astype(np.float64) for n, v in c["arrays"].items()}
    o = c["oracle"]
    want = np.einsum(o, *[a[n] for n, _ in c["ops"]]) if isinstance(o, str) else o(a)
    if c["init"] is not None:
        want = want + c["init"]
    return np.asarray(want, dtype=np.float64)


def describe(c):
    fm = " ".join(f"-f={n}:{f}" for n, f in c["formats"].items())
    ex = " ".join(f"-d={x}:{e}" for x, e in c["ext"].items())
    sr = f" -semiring={c['semiring']}" if c["semiring"] else ""
    sr += " -backend=c" if c["backend"] == "c" else ""
    return (f"seed {c['seed']} [{c['name']}] '{c['expr']}' {fm} {ex} -t={c['dtype']}{sr} "
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
                       nthreads=c["threads"], backend=c["backend"], **({"semiring": c["semiring"]} if c["semiring"] else {}))
        results = []
        for _ in range(2):
            kw = dict(operands)
            if c["init"] is not None:   # += starts from init, dense or in the output's format
                f = c["formats"].get(c["out"])
                kw["out"] = tj.tensor(c["init"].copy(), c["out"], format=f) if f else c["init"].copy()
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
    return "ok", where


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
        p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        p.stdin.write(",".join(map(str, todo)))
        p.stdin.close()
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
                    if status == "wrong":
                        print("FAIL " + detail, flush=True)
            elif time.time() - last > timeout:
                p.kill()
                break
        p.wait()
        err = p.stderr.read()
        done = [s for s in todo if s in results]
        if current is not None and current not in results:
            what = "hung" if p.returncode == -9 else f"crashed (status {p.returncode})"
            results[current] = ("wrong", f"{describe(make_case(current))}: {what}: {err[-2000:]}")
            print("FAIL " + results[current][1], flush=True)
            done.append(current)
        elif p.returncode != 0 and len(done) < len(todo):
            print(f"worker failed outside a case (status {p.returncode}): {err[-2000:]}")
            for s in todo:
                results.setdefault(s, ("wrong", f"seed {s}: worker failed"))
            break
        todo = [s for s in todo if s not in results]
    return results


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":   # seeds on stdin
        worker([int(s) for s in sys.stdin.read().split(",")])
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
        if status != "wrong" and os.environ.get("TJ_SFUZZ_VERBOSE"):
            print(status + " " + detail)
    print(f"random_schedules: {len(results)} cases (seeds {first}..{first + count - 1}), "
          f"{tally['ok']} ok, {tally['refused']} refused, {tally['wrong']} wrong")
    return 1 if tally["wrong"] else 0


if __name__ == "__main__":
    sys.exit(main())

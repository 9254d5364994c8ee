#!/usr/bin/python3
"""Random expressions against numpy: semantics checked independently.

Each seed builds a random index-notation expression (tensors of order 1-3
over indices i, j, k, l of different extents; + - * / max min and unary
minus; a tensor used twice; constants), a random left-hand side (some of
the indices, in any order, or a scalar), random storage formats for every
operand and for the output (dense, CSR, CSC, DCSR, DCSC, COO, CSF and mixed
3-D formats), a random density (empty, sparse, half, full), f64 or i64
values, and 1-3 threads. The expected value is computed here with numpy,
from the summation rule alone (an index that is not on the left is summed
over the smallest subexpression holding every use of it: TACO's rule), never
by tensorjit's reference interpreter, so a misconception shared by the
kernels and the interpreter still fails.

Usage: /usr/bin/python3 tests/random_numpy.py [first-seed count]
(default: seeds 0..599, f64 for even seeds, i64 for odd ones). Prints each
failing seed's expression, formats and difference; exits 1 when any failed,
77 when numpy cannot be imported (CTest's skip). A compile refused with a
message is counted and listed, not failed.
"""
import os
import random
import sys

try:
    import numpy as np
except ImportError as e:  # pragma: no cover
    print(f"SKIP random_numpy: {e}")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import tensorjit as tj  # noqa: E402

EXT = {"i": 5, "j": 4, "k": 6, "l": 3}
FORMATS = {1: ["d", "s"],
           2: ["dd", "ds", "sd", "ss", "uq", "ds:1,0", "ss:1,0"],
           3: ["ddd", "sss", "dss", "sds", "uqq", "dsd", "ssd"]}


class Access:
    def __init__(self, name, idx):
        self.name, self.idx = name, idx


class Const:
    def __init__(self, v):
        self.v = v


class Neg:
    def __init__(self, a):
        self.a = a


class Op:
    def __init__(self, op, a, b):
        self.op, self.a, self.b = op, a, b


def kids(e):
    return [e.a] if isinstance(e, Neg) else [e.a, e.b] if isinstance(e, Op) else []


def uses(e):
    return list(e.idx) if isinstance(e, Access) else [x for k in kids(e) for x in uses(k)]


def show(e):
    if isinstance(e, Access):
        return f"{e.name}({','.join(e.idx)})"
    if isinstance(e, Const):
        return repr(e.v)
    if isinstance(e, Neg):
        return f"-({show(e.a)})"
    if e.op in ("max", "min"):
        return f"{e.op}({show(e.a)}, {show(e.b)})"
    return f"({show(e.a)} {e.op} {show(e.b)})"


def scope(e, x):
    """The smallest subexpression of e holding every use of index x."""
    n = uses(e).count(x)
    while True:
        inner = [k for k in kids(e) if uses(k).count(x) == n]
        if not inner:
            return e
        e = inner[0]


def value(e, arrays, sums):
    """(array, its index list) of e; sums maps an index to its scope node."""
    if isinstance(e, Access):
        arr, idx = arrays[e.name], list(e.idx)
    elif isinstance(e, Const):
        arr, idx = np.array(e.v), []
    elif isinstance(e, Neg):
        a, idx = value(e.a, arrays, sums)
        arr = -a
    else:
        a, ia = value(e.a, arrays, sums)
        b, ib = value(e.b, arrays, sums)
        idx = list(dict.fromkeys(ia + ib))

        def spread(x, ix):   # x over ix, transposed and broadcast to idx
            if not ix:
                return x
            kept = "".join(c for c in idx if c in ix)
            y = np.einsum(f"{''.join(ix)}->{kept}", x)
            return np.reshape(y, [EXT[c] if c in ix else 1 for c in idx])

        a, b = spread(a, ia), spread(b, ib)
        f = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide,
             "max": np.maximum, "min": np.minimum}[e.op]
        arr = np.broadcast_to(f(a, b), [EXT[c] for c in idx]) if idx else f(a, b)
    for x in [x for x, node in sums.items() if node is e]:
        ax = idx.index(x)
        arr, idx = arr.sum(axis=ax), idx[:ax] + idx[ax + 1:]
    return np.asarray(arr), idx


def generate(rng, depth, names, ints):
    if depth == 0 or rng.random() < 0.3:
        if rng.random() < 0.1:
            return Const(rng.choice([2, 3]) if ints else rng.choice([2.0, 3.0, 0.5]))
        idx = rng.sample("ijkl", rng.choice([1, 2, 2, 3]))
        names.append((f"T{len(names)}", idx))
        return Access(*names[-1])
    if rng.random() < 0.08:
        return Neg(generate(rng, depth - 1, names, ints))
    if rng.random() < 0.08 and not ints:
        return Op("/", generate(rng, depth - 1, names, ints), Const(rng.choice([2.0, 4.0, -0.5])))
    if rng.random() < 0.1 and names and depth == 1:
        return Access(*rng.choice(names))
    op = rng.choice(["+", "+", "-", "*", "*", "max", "min"])
    return Op(op, generate(rng, depth - 1, names, ints), generate(rng, depth - 1, names, ints))


def case(seed):
    """None when tensorjit agrees with numpy, else a description."""
    rng, rs = random.Random(seed), np.random.RandomState(seed)
    ints = seed % 2 == 1
    names = []
    e = generate(rng, 3, names, ints)
    if not names:
        return None
    every = list(dict.fromkeys(uses(e)))
    lhs = rng.sample(every, rng.randint(0, min(2, len(every))))
    sums = {x: scope(e, x) for x in every if x not in lhs}
    density = [0.0, 0.1, 0.5, 1.0][(seed // 2) % 4]
    arrays, formats, operands = {}, {}, {}
    for name, idx in names:
        if name in arrays:
            continue
        shape = [EXT[c] for c in idx]
        a = rs.rand(*shape) * (rs.rand(*shape) < density)
        arrays[name] = np.floor(a * 10).astype(np.int64) if ints else a
        formats[name] = rng.choice(FORMATS[len(idx)])
        dense = formats[name] == "d" * len(idx)
        operands[name] = arrays[name] if dense else tj.tensor(arrays[name], name, format=formats[name])
    want, widx = value(e, arrays, sums)
    if widx != lhs:
        want = np.einsum(f"{''.join(widx)}->{''.join(lhs)}", want)
    expr = f"y({','.join(lhs)}) = {show(e)}" if lhs else f"y = {show(e)}"
    if lhs and rng.random() < 0.4:
        formats["y"] = rng.choice(FORMATS[len(lhs)])
    threads = rng.choice([1, 2, 3])
    where = f"seed {seed}: {expr}  formats {formats}  threads {threads}"
    try:
        got = tj.compile(expr, formats=formats, nthreads=threads)(**operands)
    except tj.TensorJitError as ex:
        return ("refused", f"{where}: {ex}")
    if hasattr(got, "to_numpy"):
        got = got.to_numpy()
    elif hasattr(got, "toarray"):
        got = got.toarray()
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    if got.shape != want.shape:
        return ("wrong", f"{where}: shape {got.shape}, want {want.shape}")
    if not np.allclose(got, want, rtol=1e-9, atol=1e-9):
        return ("wrong", f"{where}: max |got - want| = {np.max(np.abs(got - want)):.3g}")
    return None


def main():
    first = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 600
    wrong, refused = [], []
    for seed in range(first, first + count):
        r = case(seed)
        if r:
            (wrong if r[0] == "wrong" else refused).append(r[1])
            print(("FAIL " if r[0] == "wrong" else "refused ") + r[1], flush=True)
    print(f"random_numpy: {count} expressions, {len(wrong)} wrong, {len(refused)} refused")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())

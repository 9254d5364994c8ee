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

Then half as many seeds again under a random semiring (min.plus, max.plus,
min.times, max.times, plus.times, plus.min, min.max, max.min) over + and *,
where absence matters: the oracle carries each value with whether it
exists (a sparse operand's stored entries, from its format's levels: a
dense level below a compressed one stores its zeros; a dense operand and a
constant everywhere), add unites, mul intersects, a sum reduces what
exists, and an output entry nothing reached holds add's identity. Under a
semiring whose mul does not distribute over its add the scope of a sum is
not widened past a factor, so the rule above is all the oracle needs.
Usage: ... [first-seed count [semiring-count]].
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


SEMIRINGS = {"min.plus": ("min", "plus"), "max.plus": ("max", "plus"),
             "min.times": ("min", "times"), "max.times": ("max", "times"),
             "plus.times": ("plus", "times"), "plus.min": ("plus", "min"),
             "min.max": ("min", "max"), "max.min": ("max", "min")}
ADD = {"min": (np.minimum, np.inf), "max": (np.maximum, -np.inf), "plus": (np.add, 0.0)}
MUL = {"plus": np.add, "times": np.multiply, "min": np.minimum, "max": np.maximum}


def stored(mask, fmt):
    """Which entries a tensor of format fmt stores, given its nonzeros."""
    levels, _, order = fmt.partition(":")
    order = [int(c) for c in order.split(",")] if order else list(range(len(levels)))
    t = np.transpose(mask, order)
    p = np.array(True)
    for k, c in enumerate(levels):
        p = np.broadcast_to(p[..., None] if p.ndim else p, p.shape + (t.shape[k],))
        if c != "d":
            p = p & (np.any(t, axis=tuple(range(k + 1, t.ndim))) if k + 1 < t.ndim else t)
    return np.transpose(np.array(p), np.argsort(order))


def exists_value(e, arrays, exists, sums, add, mul):
    """(values, exists, index list) of e under the semiring add.mul."""
    if isinstance(e, Access):
        v, x, idx = arrays[e.name], exists[e.name], list(e.idx)
    elif isinstance(e, Const):
        v, x, idx = np.array(e.v), np.array(True), []
    else:
        a, xa, ia = exists_value(e.a, arrays, exists, sums, add, mul)
        b, xb, ib = exists_value(e.b, arrays, exists, sums, add, mul)
        idx = list(dict.fromkeys(ia + ib))
        shape = [EXT[c] for c in idx]

        def spread(y, iy):
            if not iy:
                return np.reshape(y, [1] * len(idx))
            kept = "".join(c for c in idx if c in iy)
            y = np.einsum(f"{''.join(iy)}->{kept}", y)
            return np.broadcast_to(np.reshape(y, [EXT[c] if c in iy else 1 for c in idx]), shape)

        a, xa, b, xb = spread(a, ia), spread(xa, ia), spread(b, ib), spread(xb, ib)
        f, ident = ADD[add]
        with np.errstate(invalid="ignore"):
            if e.op == "+":
                x = xa | xb
                v = np.where(xa & xb, f(a, b), np.where(xa, a, np.where(xb, b, ident)))
            else:
                x = xa & xb
                v = np.where(x, MUL[mul](a, b), ident)
        v, x = np.array(v, dtype=float), np.array(x)
    for s in [s for s, node in sums.items() if node is e]:
        f, ident = ADD[add]
        ax = idx.index(s)
        v, x, idx = f.reduce(np.where(x, v, ident), axis=ax), np.any(x, axis=ax), idx[:ax] + idx[ax + 1:]
    return np.array(v, dtype=float), np.array(x), idx


def generate_semiring(rng, depth, names):
    if depth == 0 or rng.random() < 0.3:
        if rng.random() < 0.08:
            return Const(rng.choice([2.0, 3.0]))
        idx = rng.sample("ijkl", rng.choice([1, 2, 2, 3]))
        names.append((f"T{len(names)}", idx))
        return Access(*names[-1])
    return Op(rng.choice("+*"), generate_semiring(rng, depth - 1, names),
              generate_semiring(rng, depth - 1, names))


def case_semiring(seed):
    """None when tensorjit agrees with the existence-aware oracle."""
    rng, rs = random.Random(seed), np.random.RandomState(seed)
    semiring = rng.choice(sorted(SEMIRINGS))
    add, mul = SEMIRINGS[semiring]
    names = []
    e = generate_semiring(rng, 3, names)
    if not names:
        return None
    every = list(dict.fromkeys(uses(e)))
    lhs = rng.sample(every, rng.randint(0, min(2, len(every))))
    sums = {x: scope(e, x) for x in every if x not in lhs}
    density = [0.0, 0.2, 0.6, 1.0][seed % 4]
    arrays, exists, formats, operands = {}, {}, {}, {}
    for name, idx in names:
        shape = [EXT[c] for c in idx]
        formats[name] = rng.choice(FORMATS[len(idx)])
        nonzero = rs.rand(*shape) < density
        arrays[name] = np.where(nonzero, np.floor(rs.rand(*shape) * 9) + 1, 0.0)
        exists[name] = stored(nonzero, formats[name])
        dense = formats[name] == "d" * len(idx)
        operands[name] = arrays[name] if dense else tj.tensor(arrays[name], name, format=formats[name])
    want, there, widx = exists_value(e, arrays, exists, sums, add, mul)
    if widx != lhs:
        perm = [widx.index(c) for c in lhs]
        want, there = np.transpose(want, perm), np.transpose(there, perm)
    want = np.where(there, want, ADD[add][1])
    expr = f"y({','.join(lhs)}) = {show(e)}" if lhs else f"y = {show(e)}"
    threads = rng.choice([1, 2])
    where = f"seed {seed} [{semiring}]: {expr}  formats {formats}  threads {threads}"
    try:
        got = tj.compile(expr, formats=formats, nthreads=threads, semiring=semiring)(**operands)
    except tj.TensorJitError as ex:
        return ("refused", f"{where}: {ex}")
    got = np.asarray(got, dtype=float)
    if got.shape != want.shape or not np.allclose(got, want):
        return ("wrong", f"{where}: got {got.ravel()[:8]}, want {want.ravel()[:8]}")
    return None


def main():
    first = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 600
    semiring_count = int(sys.argv[3]) if len(sys.argv) > 3 else count // 2
    wrong, refused = [], []
    runs = [(case, s) for s in range(first, first + count)]
    runs += [(case_semiring, s) for s in range(first, first + semiring_count)]
    for fn, seed in runs:
        r = fn(seed)
        if r:
            (wrong if r[0] == "wrong" else refused).append(r[1])
            print(("FAIL " if r[0] == "wrong" else "refused ") + r[1], flush=True)
    print(f"random_numpy: {len(runs)} expressions ({semiring_count} under semirings), "
          f"{len(wrong)} wrong, {len(refused)} refused")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())

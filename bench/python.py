"""What a call from Python costs over the kernel itself, and tensorjit
from Python against scipy.sparse, on SpMV and SpMM: issue 19's targets
(<= 10 us over the kernel on cage11; >= 2x scipy's A @ x and A @ B on
u200k).

    PYTHONPATH=python /usr/bin/python3 bench/python.py [--quick] [--scale=F] [--only=NAME]
                                                       [matrix.mtx ...]

Without matrices: west0067 and cage11 from ../shared/data (TJ_DATA_DIR)
when present, and u200k (200,000 x 200,000, 16 random columns per row,
as in ../shared/PEERS.md); --only=cage11 keeps one of them, --scale=F
multiplies the rounds (--quick: 0.1). Every variant runs once per round, in a
rotating order (interleaved), so the machine's load falls on all of them
alike; figures are medians over rounds, and ratios are medians of the
per-round ratios (differences: of per-round differences). The load
average is printed before and after.

SpMV variants: "kernel" is tj_kernel_run on the wrapped tensors and a
preallocated output through one ctypes call (the kernel's own time);
"call" is y = k(A=a, x=x) (a new result array each time, as a user
writes it); "call out=" is k(A=a, x=x, out=y); "scipy" is a @ x. At one
thread the kernel runs on the calling thread, so the difference of thread
CPU times (call - kernel) is Python's own cost, untouched by other
processes; the wall-clock difference is printed too.
"""
import ctypes
import os
import sys
import time

import numpy as np
import scipy.io
import scipy.sparse as sp

import tensorjit
from tensorjit import _lib

CPU = time.thread_time_ns
WALL = time.perf_counter_ns


def interleaved(variants, rounds):
    """{name: (wall ns list, thread-CPU ns list)}, each variant run once
    per round in a rotating order, after one warm-up run each."""
    names = list(variants)
    for f in variants.values():
        f()
    out = {n: ([], []) for n in names}
    for r in range(rounds):
        for i in range(len(names)):
            n = names[(r + i) % len(names)]
            f = variants[n]
            c0, w0 = CPU(), WALL()
            f()
            w1, c1 = WALL(), CPU()
            out[n][0].append(w1 - w0)
            out[n][1].append(c1 - c0)
    return out


def med(xs):
    return float(np.median(xs))


def u200k(n=200_000, per_row=16, seed=0):
    rng = np.random.default_rng(seed)
    cols = rng.integers(0, n, size=n * per_row).astype(np.int32)
    rows = np.repeat(np.arange(n, dtype=np.int32), per_row)
    a = sp.csr_matrix((rng.random(n * per_row), (rows, cols)), shape=(n, n))
    a.sum_duplicates()
    return a


def load():
    return "load %.1f" % os.getloadavg()[0]


def spmv(name, a, rounds, nthreads):
    x = np.random.default_rng(1).random(a.shape[1])
    k = tensorjit.compile("y(i) = A(i,j) * x(j)", formats={"A": "ds"}, nthreads=nthreads)
    y = k(A=a, x=x)
    assert np.allclose(y, a @ x)
    k(A=a, x=x)   # the plan of a repeated call is in place
    plan = k._plan
    kern = plan.fresh[0]
    res = np.empty_like(y)
    out = tensorjit.Tensor.wrap("y", res, res.shape, keep=(res,))
    ops = (ctypes.c_void_p * 3)(out._h, *[t._h for t in plan.inputs])
    run = _lib.lib.tj_kernel_run
    held = [None]

    def call():
        held[0] = k(A=a, x=x)   # the caller keeps its result, as y = k(...) does

    t = interleaved({"kernel": lambda: run(kern, _lib.EVALUATE, ops, 3),
                     "call": call,
                     "call out=": lambda: k(A=a, x=x, out=y),
                     "scipy": lambda: a @ x}, rounds)
    assert np.allclose(held[0], a @ x) and np.allclose(res, a @ x)
    wall = {n: med(v[0]) / 1e3 for n, v in t.items()}
    over = med(np.subtract(t["call"][0], t["kernel"][0])) / 1e3
    over_out = med(np.subtract(t["call out="][0], t["kernel"][0])) / 1e3
    cpu_over = med(np.subtract(t["call"][1], t["kernel"][1])) / 1e3
    ratio = med(np.divide(t["scipy"][0], t["call"][0]))
    cpu = " (thread CPU %.2fx)" % med(np.divide(t["scipy"][1], t["call"][1])) \
        if nthreads == 1 else ""
    print("%-9s SpMV %d thr: kernel %9.1f us | call %9.1f (+%.1f wall, +%.1f thread CPU) | "
          "call out= %9.1f (+%.1f) | scipy %9.1f: %.2fx%s  [%d rounds, %s]"
          % (name, nthreads, wall["kernel"], wall["call"], over, cpu_over, wall["call out="],
             over_out, wall["scipy"], ratio, cpu, rounds, load()))
    return over, cpu_over, ratio


def spmm(name, a, cols, rounds, nthreads):
    b = np.random.default_rng(2).random((a.shape[1], cols))
    k = tensorjit.compile("C(i,j) = A(i,k) * B(k,j)", formats={"A": "ds"}, nthreads=nthreads)
    assert np.allclose(k(A=a, B=b), a @ b)
    held = [None]

    def call():
        held[0] = k(A=a, B=b)

    t = interleaved({"call": call, "scipy": lambda: a @ b}, rounds)
    ratio = med(np.divide(t["scipy"][0], t["call"][0]))
    cpu = " (thread CPU %.2fx)" % med(np.divide(t["scipy"][1], t["call"][1])) \
        if nthreads == 1 else ""
    print("%-9s SpMM %2d cols %d thr: tensorjit %10.1f us | scipy %10.1f us: %.2fx%s  "
          "[%d rounds, %s]" % (name, cols, nthreads, med(t["call"][0]) / 1e3,
                               med(t["scipy"][0]) / 1e3, ratio, cpu, rounds, load()))
    return ratio


def main(argv):
    quick = "--quick" in argv
    only = [a.split("=", 1)[1] for a in argv if a.startswith("--only=")]
    scale = float(([a.split("=", 1)[1] for a in argv if a.startswith("--scale=")] or
                   [0.1 if quick else 1.0])[0])
    paths = [p for p in argv if not p.startswith("--")]
    data = os.environ.get("TJ_DATA_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                      "..", "..", "shared", "data"))
    if not paths:
        names = [os.path.join(data, "matrices", m) for m in ("west0067.mtx", "cage11.mtx")]
        paths = [p for p in names if os.path.exists(p)]
    mats = [(os.path.basename(p).split(".")[0], p) for p in paths] + [("u200k", None)]
    mats = [m for m in mats if not only or m[0] in only]
    print("tensorjit %s, numpy %s, scipy %s; %s" % (tensorjit.__version__, np.__version__,
                                                    scipy.__version__, load()))
    summary = []
    for name, path in mats:
        a = u200k() if path is None else scipy.io.mmread(path).tocsr()
        a = sp.csr_matrix(a, dtype=np.float64)
        a.sum_duplicates()
        a.sort_indices()
        rounds = max(20, int(scale * min(4000, 2e8 / (a.nnz + 1e4))))
        for nt in (1, 2):
            over, cpu_over, ratio = spmv(name, a, rounds, nt)
            summary.append((name, "SpMV", nt, over, cpu_over, ratio))
        if path is None or a.nnz > 100_000:
            for cols in (8, 16, 64):
                r = max(3, int(scale * 2e8 / (a.nnz * cols)))
                for nt in (1, 2):
                    summary.append((name, "SpMM %d" % cols, nt, None, None,
                                    spmm(name, a, cols, r, nt)))
    print("\nsummary (medians; %s):" % load())
    for name, what, nt, over, cpu_over, ratio in summary:
        extra = "" if over is None else ", call - kernel %.1f us wall, %.1f us thread CPU" % (
            over, cpu_over)
        print("  %-9s %-8s %d thr: %.2fx scipy%s" % (name, what, nt, ratio, extra))


if __name__ == "__main__":
    main(sys.argv[1:])

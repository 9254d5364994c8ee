"""Measures what a call from Python costs over the kernel itself, and
tensorjit against scipy.sparse, on SpMV and SpMM.

    PYTHONPATH=python /usr/bin/python3 python/examples/overhead.py [matrix.mtx ...]

With no arguments it uses cage11 from ../shared/data (when present) and a
synthetic 200,000 x 200,000 matrix with 16 entries per row ("u200k")."""
import ctypes
import os
import sys
import time

import numpy as np
import scipy.io
import scipy.sparse as sp

import tensorjit
from tensorjit import _lib


def median_us(fn, reps):
    fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1e6 * float(np.median(times))


def u200k(n=200_000, per_row=16, seed=0):
    rng = np.random.default_rng(seed)
    cols = rng.integers(0, n, size=n * per_row).astype(np.int32)
    rows = np.repeat(np.arange(n, dtype=np.int32), per_row)
    a = sp.csr_matrix((rng.random(n * per_row), (rows, cols)), shape=(n, n))
    a.sum_duplicates()
    return a


def report(name, a, reps):
    a = sp.csr_matrix(a, dtype=np.float64)
    a.sort_indices()
    x = np.random.default_rng(1).random(a.shape[1])
    k = tensorjit.compile("y(i) = A(i,j) * x(j)", formats={"A": "ds"})
    y = k(A=a, x=x)
    assert np.allclose(y, a @ x)
    call = median_us(lambda: k(A=a, x=x), reps)
    # the kernel alone: tj_kernel_run on the already wrapped tensors and a
    # preallocated output, one ctypes call
    out = tensorjit.Tensor.wrap("y", y, y.shape, keep=(y,))
    ta, tx = k._inputs["A"][2], k._inputs["x"][2]
    ops = (ctypes.c_void_p * 3)(out._h, ta._h, tx._h)
    run = _lib.lib.tj_kernel_run
    kern = k._last
    bare = median_us(lambda: run(kern, _lib.EVALUATE, ops, 3), reps)
    into = median_us(lambda: k(A=a, x=x, out=y), reps)
    scipy_us = median_us(lambda: a @ x, reps)
    print("%-10s SpMV: kernel alone (one ctypes call) %8.1f us; k(A=, x=, out=y) %8.1f us "
          "(+%.1f us); k(A=, x=) with a fresh y %8.1f us; scipy A @ x %8.1f us (%.2fx)"
          % (name, bare, into, into - bare, call, scipy_us, scipy_us / call))
    b = np.random.default_rng(2).random((a.shape[1], 64))
    km = tensorjit.compile("C(i,j) = A(i,k) * B(k,j)", formats={"A": "ds"})
    assert np.allclose(km(A=a, B=b), a @ b)
    mm = median_us(lambda: km(A=a, B=b), max(3, reps // 20))
    mm_scipy = median_us(lambda: a @ b, max(3, reps // 20))
    print("%-10s SpMM (64 columns): tensorjit %9.1f us, scipy %9.1f us (%.2fx)"
          % (name, mm, mm_scipy, mm_scipy / mm))


def main(paths):
    data = os.environ.get("TJ_DATA_DIR", os.path.join(os.path.dirname(__file__), "..", "..",
                                                      "..", "shared", "data"))
    if not paths:
        names = [os.path.join(data, "matrices", m) for m in ("west0067.mtx", "cage11.mtx")]
        paths = [p for p in names if os.path.exists(p)]
    for p in paths:
        report(os.path.basename(p).split(".")[0], scipy.io.mmread(p).tocsr(), 2000)
    report("u200k", u200k(), 100)


if __name__ == "__main__":
    main(sys.argv[1:])

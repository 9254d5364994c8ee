"""A tour of tensorjit from Python, in notebook-sized steps (each checked
against scipy/numpy). Run: PYTHONPATH=python /usr/bin/python3 python/examples/tour.py"""
import numpy as np
import scipy.sparse as sp

import tensorjit

# %% 1. SpMV on a scipy CSR matrix: compiled on the first call
spmv = tensorjit.compile("y(i) = A(i,j) * x(j)", formats={"A": "ds"})
A = sp.random(1000, 800, density=0.01, format="csr", random_state=0)
x = np.ones(800)
y = spmv(A=A, x=x)
assert np.allclose(y, A @ x)
print(spmv)

# %% 2. No copies: change the values in place and call again
A.data *= 2
x[:10] = 0
assert np.allclose(spmv(A=A, x=x), A @ x)

# %% 3. What was generated (for the last call, or for given operands)
print(spmv.cin())
print(spmv.source("compute"))
assert "A1_pos" in spmv.source("c", A=A.tocsc(), x=x)   # CSC: another variant

# %% 4. Sparse results are scipy matrices over the kernel's arrays
add = tensorjit.compile("C(i,j) = A(i,j) + B(i,j)", formats={"C": "ds"})
C = add(A=A, B=2 * A)
assert abs(C - 3 * A).max() == 0
print(repr(C))

# %% 5. Tensors: from files, in any format, printed
W = tensorjit.tensor(A[:50, :80], "W", format="uq")   # COO (a copy)
print(W)                                              # header and entries
assert W.nnz > 0 and (W.to_scipy() != A[:50, :80]).nnz == 0

# %% 6. Dense tensors of any order, in any axis order
B = np.asfortranarray(np.random.default_rng(1).random((30, 20)))
gemv = tensorjit.compile("y(i) = B(i,j) * x(j)")
assert np.allclose(gemv(B=B, x=np.arange(20.0)), B @ np.arange(20.0))

# %% 7. Errors say what and where
try:
    spmv(A=A, x=np.ones(5))
except tensorjit.TensorJitError as e:
    print("TensorJitError(%s):\n%s" % (e.status, e))

"""tensorjit: tensor index notation compiled to machine code, from Python.

    import numpy as np, scipy.sparse as sp, tensorjit
    k = tensorjit.compile("y(i) = A(i,j) * x(j)", formats={"A": "ds"})
    y = k(A=sp.random(1000, 800, 0.01, format="csr"), x=np.ones(800))

Inputs are numpy arrays, scipy.sparse matrices (CSR, CSC, COO) or Tensors,
wrapped without copies where their layout is one tensorjit stores; outputs
come back as numpy arrays or scipy.sparse matrices over the kernel's own
arrays. Errors raise TensorJitError with tensorjit's message. The library is
found through TENSORJIT_LIBRARY or a build tree beside this package.
"""
from ._lib import TensorJitError, lib
from .kernel import Kernel, compile
from .tensor import Tensor, as_tensor


def tensor(x, name="T", format=None, trusted=False):
    """A Tensor over a numpy array or scipy.sparse matrix (no copy where
    the layout allows), or read from a file path (.mtx / .tns); with
    format, converted to it (a copy) unless already stored that way.
    Sparse arrays are validated when wrapped (O(nnz): positions, ranges,
    order); trusted=True skips that for arrays known to be well formed
    (TJ_WRAP_TRUSTED: malformed ones may then crash a kernel)."""
    if isinstance(x, str) or hasattr(x, "__fspath__"):
        t = Tensor.read(x, format, name)
    elif trusted and not isinstance(x, Tensor) and hasattr(x, "format") and \
            hasattr(x, "tocsr"):
        t = Tensor.from_scipy(x, name, trusted=True)
    else:
        t = as_tensor(x, name)
    if format is not None and t.format != Tensor.empty(name, t.shape, t.dtype, format).format:
        t = t.convert(format)
    return t


def read(path, format=None, name="T", dtype=None):
    """Reads a .mtx / .tns file (optionally .gz) into a Tensor (format:
    default CSR for a matrix; dtype: default float64, integers exact)."""
    return Tensor.read(path, format, name, dtype)


__version__ = lib.tj_version().decode()
__all__ = ["compile", "Kernel", "Tensor", "TensorJitError", "tensor", "read"]

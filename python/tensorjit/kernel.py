"""Kernels: an expression compiled for the formats of the operands it is called with.

compile() only parses what Python needs (the output's name and indices, and
which operand dims give its extents); the C library compiles on the first
call, when the operands' formats, index widths and dtypes are known, and
again for each new combination (its kernel cache makes a repeat nearly
free). A call wraps each operand without copying (tensor.py) and keeps the
wrapped tensor while the same object is passed again, so values changed in
place are read by the next call without re-wrapping or re-validating.
"""
import atexit
import ctypes
import re

import numpy as np

from . import _lib
from ._lib import TensorJitError, check, lib
from .tensor import _DTYPES as _DTYPE_CODES
from .tensor import Tensor, as_tensor

STAGES = {"notation": 0, "cin": 1, "lattice": 2, "assembly": 3, "compute": 4, "c": 5,
          "llvm": 6, "llvm-opt": 7, "asm": 8}
_FUNCTIONS = {"sqrt", "abs", "exp", "log", "min", "max", "sum"}
_LHS = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?:\(([^()]*)\))?\s*(\+?=)")
_ACCESS = re.compile(r"([A-Za-z_]\w*)\s*\(([^()]*)\)")

_context = None


def _get_context():
    global _context
    if _context is None:
        cx = ctypes.c_void_p()
        check(lib.tj_context_new(ctypes.byref(cx)))
        _context = cx.value
    return _context


@atexit.register
def _free_context():
    global _context
    if _context is not None:
        lib.tj_context_free(_context)
        _context = None


def _indices(text):
    return [s.strip() for s in text.split(",") if s.strip()] if text else []


def _options(opts):
    o = lib.tj_options_default()
    for key, value in opts.items():
        if key == "backend":
            o.backend = {"llvm": 0, "c": 1}[value]
        elif key in ("cpu", "features", "semiring"):
            setattr(o, key, value.encode())
        elif key == "defs":  # "relu(x) = max(x, 0)", or a list of them
            text = value if isinstance(value, str) else ";".join(value)
            o.defs = text.encode()
        elif key in dict(_lib.Options._fields_):
            setattr(o, key, int(value))
        else:
            raise TypeError("tensorjit.compile: unknown option %r" % key)
    return o


class Kernel:
    """A compiled expression; call it with the operands by name."""

    def __init__(self, expr, formats=None, schedule=None, **options):
        m = _LHS.match(expr)
        if not m:
            raise TensorJitError(2, "tensorjit: %r has no 'output(indices) =' on its left" % expr)
        self.expr = expr
        self.output = m.group(1)
        self.out_indices = _indices(m.group(2))
        self.accumulate = m.group(3) == "+="
        rhs = expr[m.end():]
        self.accesses = [(name, _indices(idx)) for name, idx in _ACCESS.findall(rhs)
                         if name not in _FUNCTIONS]
        self.formats = dict(formats or {})
        self.schedule = schedule
        self._opts = _options(options)
        self._kernels = {}    # operand signature -> tj_kernel *
        self._last = None
        self._inputs = {}     # name -> (object, its buffers, Tensor)
        self._out_prep = None   # (shape, dtype), tj_arrays, dims, name of a dense output
        self._last_call = None  # inputs, shape, dtype, handle array type, kernel, input
                                # handles of the last call with a fresh dense result

    def __del__(self):
        # The compiled code stays in the context's cache (evictable once no
        # handle uses it); after exit the context and its handles are gone.
        kernels, self._kernels = getattr(self, "_kernels", {}), {}
        if _context is not None and lib is not None:
            for k in kernels.values():
                lib.tj_kernel_free(k)

    def _extent(self, index, tensors):
        for name, idx in self.accesses:
            if index in idx and name in tensors:
                return tensors[name].shape[idx.index(index)]
        raise TensorJitError(3, "tensorjit: no operand gives the extent of index %s of %s"
                             % (index, self.output))

    def _input(self, name, x):
        """The tensor for operand x, reused while x is the same object with
        the same buffers (then its values are read in place)."""
        parts = _buffers(x)
        hit = self._inputs.get(name)
        if hit and hit[0] is x and len(hit[1]) == len(parts) and \
                all(a is b for a, b in zip(hit[1], parts)):
            return hit[2]
        t = as_tensor(x, name)
        fmt = self.formats.get(name)
        if fmt and not _same_format(t, fmt):
            t = t.convert(fmt)
        if t.name != name:
            t.rename(name)
        if parts and _data_pointer(x) == t._arrays().vals:   # zero copy: keep it
            self._inputs[name] = (x, parts, t)
        return t

    def _output(self, out, tensors, dtype):
        shape = tuple(self._extent(i, tensors) for i in self.out_indices)
        fmt = self.formats.get(self.output)
        if out is not None:
            t = self._input(self.output, out)
            if t.shape != shape:
                raise TensorJitError(3, "tensorjit: out has shape %s, the result %s"
                                     % (t.shape, shape))
            return t, out
        if fmt and set(fmt.split(":")[0]) - {"d"}:
            return Tensor.empty(self.output, shape, dtype, fmt), None
        arr = np.zeros(shape, dtype) if self.accumulate else np.empty(shape, dtype)
        return self._wrap_dense(arr), arr

    def _wrap_dense(self, arr):
        """Tensor.wrap for a fresh C-ordered output array, with the
        tj_arrays struct prepared by the previous call of the same shape
        (copied, so concurrent calls each wrap their own array)."""
        prep = self._out_prep
        if prep is None or prep[0] != (arr.shape, arr.dtype):
            a = _lib.Arrays()
            a.dtype = _DTYPE_CODES[arr.dtype]
            a.order = arr.ndim
            dims = (ctypes.c_int64 * max(1, arr.ndim))(*arr.shape)
            a.dims = dims
            a.vals_len = arr.size
            prep = self._out_prep = ((arr.shape, arr.dtype), a, dims, self.output.encode())
        # a copy per call: threads sharing this kernel must not see each
        # other's vals (the struct is the prepared one, dims included)
        a = _lib.Arrays.from_buffer_copy(prep[1])
        a.vals = arr.__array_interface__["data"][0]
        h = ctypes.c_void_p()
        check(lib.tj_tensor_wrap(prep[3], ctypes.byref(a), 0, ctypes.byref(h)))
        return Tensor(h.value, keep=(arr,))

    def __call__(self, out=None, **operands):
        """Runs the kernel on operands (numpy arrays, scipy.sparse matrices,
        Tensors) named as in the expression; returns the output as a numpy
        array (dense), a scipy.sparse matrix (CSR/CSC output) or a Tensor.
        out: a numpy array (or Tensor) to write into instead (needed by +=
        to accumulate into existing values)."""
        tensors = {name: self._input(name, x) for name, x in operands.items()}
        if not tensors:
            raise TensorJitError(1, "tensorjit: no operands given")
        inputs = [tensors[n] for n in sorted(tensors)]
        last = self._last_call
        if last and out is None and len(last[0]) == len(inputs) and \
                all(a is b for a, b in zip(last[0], inputs)):
            # the same tensors as last time: same shape, same kernel
            arr = np.empty(last[1], last[2])
            result = self._wrap_dense(arr)
            handles = last[3](result._h, *last[5])   # per call: threads may share k
            check(lib.tj_kernel_run(last[4], _lib.EVALUATE, handles, len(handles)))
            return arr
        # operands share the expression's dtype, except masks (a bool mask
        # over an f64 expression): the output takes the operands' other one
        kinds = [t.dtype for t in inputs]
        dtype = next((d for d in kinds if d != np.bool_), kinds[0]) \
            if len(set(kinds)) > 1 else kinds[0]
        result, arr = self._output(out, tensors, dtype)
        self._order = sorted(tensors)
        ops = [result] + inputs
        handles = (ctypes.c_void_p * len(ops))(*[t._h for t in ops])
        k = self._compiled(ops, handles)
        check(lib.tj_kernel_run(k, _lib.EVALUATE, handles, len(ops)))
        fresh_dense = arr is not None and out is None and not self.accumulate
        self._last_call = (inputs, arr.shape, arr.dtype, type(handles), k,
                           tuple(t._h for t in inputs)) if fresh_dense else None
        if arr is not None:
            return arr
        if out is not None:
            return out
        fmt = result.format
        return result.to_scipy() if fmt in ("ds", "ds:1,0") else result

    def compute(self, out, **operands):
        """Recomputes the values of out, a sparse result of this kernel (the
        scipy matrix or Tensor a call returned), keeping its structure: the
        compute kernel alone, no assembly, values written in place (so out
        itself shows them). For operands whose values changed but whose
        sparsity did not."""
        t = out if isinstance(out, Tensor) else _owner(out)
        if t is None or t.name != self.output:
            raise TensorJitError(1, "tensorjit: compute needs a sparse result of this "
                                 "kernel (or a Tensor named %s) as out" % self.output)
        tensors = {name: self._input(name, x) for name, x in operands.items()}
        self._order = sorted(tensors)
        ops = [t] + [tensors[n] for n in self._order]
        handles = (ctypes.c_void_p * len(ops))(*[x._h for x in ops])
        k = self._compiled(ops, handles)
        check(lib.tj_kernel_run(k, _lib.COMPUTE, handles, len(ops)))
        return out

    def _compiled(self, ops, handles):
        sig = tuple((name, t._meta()) for name, t in zip(self._names(ops), ops))
        k = self._kernels.get(sig)
        if k is None:
            h = ctypes.c_void_p()
            check(lib.tj_compile(_get_context(), self.expr.encode(), handles, len(ops),
                                 self.schedule.encode() if self.schedule else None,
                                 ctypes.byref(self._opts), ctypes.byref(h)))
            k = self._kernels[sig] = h.value
        self._last = k
        return k

    def _names(self, ops):
        return [self.output] + self._order

    def source(self, stage="c"):
        """One stage of the last compiled variant as text: "notation", "cin",
        "lattice", "assembly", "compute", "c", "llvm", "llvm-opt", "asm"."""
        if self._last is None:
            raise TensorJitError(1, "tensorjit: call the kernel once first: what it "
                                 "compiles to depends on its operands' formats")
        return _lib.print_to_string(lib.tj_kernel_print, self._last, STAGES[stage])

    def cin(self):
        return self.source("cin")

    def llvm(self):
        return self.source("llvm")

    def __repr__(self):
        fmts = ", ".join("%s: %s" % kv for kv in sorted(self.formats.items()))
        return "<tensorjit.Kernel %r%s%s>" % (self.expr, " {%s}" % fmts if fmts else "",
                                              " (%d compiled)" % len(self._kernels))

    def _repr_html_(self):
        import html
        body = self.source("c") if self._last is not None else "(not compiled yet)"
        return "<p><code>%s</code></p><pre>%s</pre>" % (html.escape(repr(self)),
                                                        html.escape(body))


def _buffers(x):
    """The arrays whose identity means 'same data' for x."""
    if isinstance(x, np.ndarray):
        return (x,)
    kind = getattr(x, "format", None)
    if kind in ("csr", "csc"):
        return (x.data, x.indices, x.indptr, x.shape)
    if kind == "coo":
        return (x.data, x.row, x.col, x.shape)
    return ()


def _owner(m):
    """The Tensor whose values a scipy matrix returned by a kernel views."""
    base = getattr(m, "data", None)
    while isinstance(base, np.ndarray):   # numpy views of views, down to the _View
        base = base.base
    owner = getattr(base, "owner", None)
    return owner if isinstance(owner, Tensor) else None


def _data_pointer(x):
    """The address of x's values (numpy array or scipy.sparse matrix)."""
    data = x if isinstance(x, np.ndarray) else x.data
    return data.__array_interface__["data"][0] or None


def _same_format(t, spec):
    """True when tensor t is already stored as spec says (widths aside)."""
    from .tensor import format_string, parse_format
    return t.format == format_string(parse_format(spec))


def compile(expr, formats=None, schedule=None, **options):
    """A Kernel for expr, e.g. compile("y(i) = A(i,j) * x(j)", formats={"A": "ds"}).
    formats maps tensor names to format spellings ("ds", "ds:1,0", "uq",
    MLIR's); inputs default to their own layout, outputs to dense. schedule:
    directives as in C ("reorder(i,k,j) parallelize(i)"). options: opt_level,
    nthreads, no_vectorize, no_llvm_vectorize, no_unroll_jam, cpu, features,
    backend ("llvm" or "c"), semiring ("min.plus", ...: + and * reinterpreted,
    absent entries the semiring's zero) and defs (element operators the
    expression may call: "relu(x) = max(x, 0)", or a list)."""
    return Kernel(expr, formats, schedule, **options)

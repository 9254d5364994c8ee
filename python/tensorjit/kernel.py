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
import sys
import threading

import numpy as np

from . import _lib
from ._lib import TensorJitError, check, lib
from .tensor import _DTYPES as _DTYPE_CODES
from .tensor import SCIPY_FORMATS, Tensor, as_tensor

STAGES = {"notation": 0, "cin": 1, "lattice": 2, "assembly": 3, "compute": 4, "c": 5,
          "llvm": 6, "llvm-opt": 7, "asm": 8, "gett": 9}
_FUNCTIONS = {"sqrt", "abs", "exp", "log", "min", "max", "sum"}
_LHS = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?:\(([^()]*)\))?\s*(\+?=)")
_ACCESS = re.compile(r"([A-Za-z_]\w*)\s*\(([^()]*)\)")

_context = None
_run = lib.tj_kernel_run


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



def _overlaps(out, operands):
    """Whether the numpy array out may share memory with an operand: a numpy
    array, or one of a scipy.sparse matrix's arrays."""
    for x in operands:
        arrays = [x] if isinstance(x, np.ndarray) else \
            [getattr(x, a) for a in ("data", "indices", "indptr", "row", "col")
             if isinstance(getattr(x, a, None), np.ndarray)]
        if any(np.may_share_memory(out, a) for a in arrays):
            return True
    return False


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
        # every identifier of the right side but index variables and
        # operators: the tensors (scalars have no parentheses)
        idx = {i for _, ix in self.accesses for i in ix}
        self.names = {w for w in re.findall(r"[A-Za-z_]\w*", rhs)
                      if w not in idx and w not in _FUNCTIONS}
        self.formats = dict(formats or {})
        self.schedule = schedule
        # method(sell) keeps a copy of A on its tensor: an operand wrapped
        # here (a numpy or scipy object) may have changed in place since
        # the last call, so its copy is dropped before each run; a Tensor
        # passed as is keeps it until the caller says T.changed()
        self._sell = bool(schedule and re.search(r"method\s*\(\s*sell", schedule))
        self._opts = _options(options)
        self._kernels = {}    # operand signature -> tj_kernel *
        self._last = None
        self._inputs = {}     # name -> (object, its _key, Tensor, objects the key names)
        self._plan = None     # _Plan of the last call, for repeats on the same operands

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
        key = _key(x)
        hit = self._inputs.get(name)
        if hit is not None and key is not None and hit[0] is x and hit[1] == key:
            if self._sell and hit[2] is not x:
                hit[2].changed()
            return hit[2]
        t = as_tensor(x, name)
        fmt = self.formats.get(name)
        if fmt and not _same_format(t, fmt):
            t = t.convert(fmt)
        if t.name != name:
            t.rename(name)
        if key is not None and (t is x or _data_pointer(x) == t._arrays().vals):
            self._inputs[name] = (x, key, t, _key_objects(x))   # zero copy: keep it
        else:
            self._inputs.pop(name, None)
        return t

    def _output(self, out, tensors, dtype):
        shape = tuple(self._extent(i, tensors) for i in self.out_indices)
        fmt = self.formats.get(self.output)
        if out is not None:
            kind = _sparse_kind(out)
            if kind is not None:   # assembled anew, then handed to out (_write_back)
                if tuple(out.shape) != shape:
                    raise TensorJitError(3, "tensorjit: out has shape %s, the result %s"
                                         % (tuple(out.shape), shape))
                if self.accumulate:   # += starts from out's entries (a copy it may overwrite)
                    t = as_tensor(out.copy(), self.output)
                    if fmt and not _same_format(t, fmt):
                        t = t.convert(fmt)
                    return t, None
                return Tensor.empty(self.output, shape, out.dtype, fmt or _KIND_FORMAT[kind]), \
                    None
            t = self._input(self.output, out)
            if t.shape != shape:
                raise TensorJitError(3, "tensorjit: out has shape %s, the result %s"
                                     % (t.shape, shape))
            return t, None
        if fmt and set(fmt.split(":")[0]) - {"d"}:
            return Tensor.empty(self.output, shape, dtype, fmt), None
        arr = np.zeros(shape, dtype) if self.accumulate else np.empty(shape, dtype)
        return _wrap_dense(self.output, arr), arr

    def __call__(self, out=None, **operands):
        """Runs the kernel on operands (numpy arrays, scipy.sparse matrices,
        Tensors) named as in the expression; returns the output as a numpy
        array (dense), a scipy.sparse matrix (CSR/CSC output) or a Tensor.
        out: a numpy array (or Tensor) to write into instead (needed by +=
        to accumulate into existing values). An out that shares memory with
        an operand is computed into a copy first, as numpy does, so the
        kernel never reads what it is overwriting."""
        if isinstance(out, np.ndarray) and _overlaps(out, operands.values()):
            tmp = out.copy()
            self(out=tmp, **operands)
            out[...] = tmp
            return out
        plan = self._plan
        if plan is not None and {name: _key(x) for name, x in operands.items()} == plan.keys:
            got = plan.run(out)
            if got is not None:
                return got
        tensors = self._tensors(operands)
        inputs = [tensors[n] for n in sorted(tensors)]
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
        self._plan = _Plan.make(self, operands, tensors, k, result, arr, out)
        if out is not None:
            _write_back(out, result)
            return out
        if arr is not None:
            return arr
        return result.to_scipy() if result.format in SCIPY_FORMATS else result

    def _tensors(self, operands):
        """The operands as tensors (wrapped, or reused), by name; an error
        for a name the expression does not use."""
        if not operands:
            raise TensorJitError(1, "tensorjit: no operands given")
        for name in operands:
            if name not in self.names:
                raise TensorJitError(1, "tensorjit: %r is not a tensor of %r (its tensors: %s)"
                                     % (name, self.expr, ", ".join(sorted(self.names))))
        tensors, bound = {}, set()
        for name, x in operands.items():
            if isinstance(x, Tensor) and id(x) in bound:
                # one Tensor for two operands: the library binds by name, so
                # the second gets a tensor of its own over the same arrays
                tensors[name] = self._input(name, x._alias(name))
                self._inputs.pop(name, None)   # never reused: x may change
            else:
                tensors[name] = self._input(name, x)
                if isinstance(x, Tensor):
                    bound.add(id(x))
        return tensors

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
        tensors = self._tensors(operands)
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

    def source(self, stage="c", **operands):
        """One stage as text: "notation", "cin", "lattice", "assembly",
        "compute", "c", "llvm", "llvm-opt", "asm", "gett". What is compiled
        depends on the operands' formats and dtypes: with operands (as for
        a call), the variant for them (compiled, not run); without, the
        variant of the last call."""
        if stage not in STAGES:
            raise ValueError("tensorjit: no stage %r (stages: %s)" % (stage, ", ".join(STAGES)))
        if operands:
            tensors = self._tensors(operands)
            self._order = sorted(tensors)
            shape = tuple(self._extent(i, tensors) for i in self.out_indices)
            fmt = self.formats.get(self.output)
            ops = [Tensor.empty(self.output, shape, tensors[self._order[0]].dtype, fmt)] + \
                [tensors[n] for n in self._order]
            self._compiled(ops, (ctypes.c_void_p * len(ops))(*[t._h for t in ops]))
        elif self._last is None:
            raise TensorJitError(1, "tensorjit: call the kernel once first, or pass operands: "
                                 "what it compiles to depends on their formats")
        return _lib.print_to_string(lib.tj_kernel_print, self._last, STAGES[stage])

    def cin(self, **operands):
        return self.source("cin", **operands)

    def llvm(self, **operands):
        return self.source("llvm", **operands)

    def __repr__(self):
        fmts = ", ".join("%s: %s" % kv for kv in sorted(self.formats.items()))
        return "<tensorjit.Kernel %r%s%s>" % (self.expr, " {%s}" % fmts if fmts else "",
                                              " (%d compiled)" % len(self._kernels))

    def _repr_html_(self):
        import html
        body = self.source("c") if self._last is not None else "(not compiled yet)"
        return "<p><code>%s</code></p><pre>%s</pre>" % (html.escape(repr(self)),
                                                        html.escape(body))


def _key(x):
    """What must not change for x's wrapped tensor to still describe x: its
    identity, the identities of the arrays it holds (as ids: whoever keeps
    a key also keeps those objects, so an id is not reused meanwhile),
    shape, strides and dtype. None for objects that are never reused."""
    if type(x) is np.ndarray:
        return (id(x), x.shape, x.strides, x.dtype)
    if type(x) is Tensor:
        return (id(x),)
    kind = getattr(x, "format", None)
    if kind == "csr" or kind == "csc":
        d = x.data
        return (id(x), id(d), id(x.indices), id(x.indptr), x.shape, d.dtype)
    if kind == "coo":
        d = x.data
        return (id(x), id(d), id(x.row), id(x.col), x.shape, d.dtype)
    return None


_KIND_FORMAT = {"csr": "ds", "csc": "ds:1,0", "coo": "uq"}


def _sparse_kind(x):
    """"csr", "csc" or "coo" for such a scipy.sparse matrix or array, else None."""
    kind = getattr(x, "format", None)
    return kind if kind in _KIND_FORMAT and hasattr(x, "tocsr") else None


def _write_back(out, result):
    """Makes out (what the caller passed as out=) hold result: a scipy
    matrix takes views of the result's arrays (no copy); a numpy array
    the kernel could not write in place (strided) gets the values copied."""
    kind = _sparse_kind(out)
    if kind is not None:
        r = result.to_scipy()
        if r.format != kind:
            r = r.asformat(kind)
        if kind == "coo":
            out.data, out.row, out.col = r.data, r.row, r.col
        else:
            out.data, out.indices, out.indptr = r.data, r.indices, r.indptr
            out.has_sorted_indices = True
        out.has_canonical_format = True
    elif isinstance(out, np.ndarray) and out.size and \
            _data_pointer(out) != result._arrays().vals:
        np.copyto(out, result.to_numpy())


def _key_objects(x):
    """The objects whose ids _key(x) holds."""
    if getattr(x, "format", None) in ("csr", "csc"):
        return (x, x.data, x.indices, x.indptr)
    if getattr(x, "format", None) == "coo":
        return (x, x.data, x.row, x.col)
    return (x,)


def _wrap_dense(name, arr):
    """A tensor named name over arr, a fresh C-ordered array (no checks
    needed: dense, no indices)."""
    a = _lib.Arrays()
    a.dtype = _DTYPE_CODES[arr.dtype]
    a.order = arr.ndim
    dims = (ctypes.c_int64 * max(1, arr.ndim))(*arr.shape)
    a.dims = dims
    a.vals = arr.ctypes.data
    a.vals_len = arr.size
    h = ctypes.c_void_p()
    check(lib.tj_tensor_wrap(name.encode(), ctypes.byref(a), _lib.WRAP_TRUSTED,
                             ctypes.byref(h)))
    return Tensor(h.value, keep=(arr,))


POOL_ENTRIES = 2          # result arrays a plan keeps for reuse
POOL_BYTES = 64 << 20     # ... when they take at most this much together


class _Plan:
    """A repeated call, prepared: the operands it is for (their _keys), the
    wrapped input tensors, and per output the compiled kernel with its
    ctypes operand array ready. A call whose operands have the same keys
    (same objects, same arrays, same layout) skips wrapping, validation,
    the signature lookup and output wrapping; values changed in place are
    still read, as the tensors are over the same memory.

    Dense results of a call without out= come from a small pool: arrays
    the plan allocated and wrapped once, reused when nothing but the pool
    refers to them any more (their reference count says so, checked under
    a lock, so two threads never get the same one). The caller gets a view,
    so what it does to the array object (shape, flags) stays with it."""

    def __init__(self, name, keys, objects, inputs):
        self.name = name          # the output's name
        self.keys = keys          # operand name -> _key
        self.objects = objects    # keeps what the keys name alive
        self.inputs = inputs      # input Tensors, in operand order (sorted names)
        self.fresh = None         # (kernel, shape, dtype, zero first) for out=None
        self.pool = []            # (array, Tensor, ctypes operands)
        self.free_refs = 0
        self.lock = threading.Lock()
        self.outs = {}            # _key(out) -> (out, Tensor, ctypes operands, kernel)
        self.refresh = []         # wrapped inputs whose method(sell) copy each run drops

    @staticmethod
    def make(kernel, operands, tensors, k, result, arr, out):
        """The plan for this call's operands (the kernel's current one when
        it is for the same), now also covering this output; None when an
        input was copied (then every call must convert it again)."""
        keys, objects = {}, []
        for name, x in operands.items():
            hit = kernel._inputs.get(name)
            if hit is None or hit[0] is not x or hit[2] is not tensors[name]:
                return None
            keys[name] = hit[1]
            objects.append(hit[3])
        if set(result.format.split(":")[0]) - {"d"}:
            return None   # a sparse result: assembled anew by every call
        old = kernel._plan
        plan = old if old is not None and old.keys == keys else \
            _Plan(kernel.output, keys, objects, [tensors[n] for n in sorted(tensors)])
        plan.refresh = [tensors[n] for n, x in operands.items()
                        if kernel._sell and tensors[n] is not x]
        if out is None:
            plan.fresh = (k, arr.shape, arr.dtype, kernel.accumulate)
        else:
            hit = kernel._inputs.get(kernel.output)
            if hit is not None and hit[0] is out and hit[2] is result:
                if len(plan.outs) >= 4:
                    plan.outs.pop(next(iter(plan.outs)))
                plan.outs[hit[1]] = (out, result, plan.operands(result), k)
        return plan

    def operands(self, result):
        ops = [result] + self.inputs
        return (ctypes.c_void_p * len(ops))(*[t._h for t in ops])

    def run(self, out):
        """Runs the kernel for operands matching self.keys; None when this
        output is not prepared (then the caller takes the long way)."""
        for t in self.refresh:   # values changed in place are read (method(sell))
            t.changed()
        if out is not None:
            e = self.outs.get(_key(out))
            if e is None:
                return None
            st = _run(e[3], _lib.EVALUATE, e[2], len(e[2]))
            if st:
                check(st)
            return out
        fresh = self.fresh
        if fresh is None:
            return None
        arr = None
        with self.lock:
            for e in self.pool:
                if sys.getrefcount(e[0]) == self.free_refs:
                    arr, ops = e[0], e[2]   # ours now: the local reference claims it
                    break
            else:
                size = np.dtype(fresh[2]).itemsize * int(np.prod(fresh[1]))
                if len(self.pool) < POOL_ENTRIES and \
                        (len(self.pool) + 1) * size <= POOL_BYTES:
                    e = self._entry(fresh)
                    self.pool.append(e)
                    self.free_refs = sys.getrefcount(e[0])
                    arr, ops = e[0], e[2]
        if arr is None:   # every pooled array in use (or too large): a fresh one
            arr = np.empty(fresh[1], fresh[2])
            result = _wrap_dense(self.name, arr)   # alive until the run is over
            ops = self.operands(result)
            view = arr
        else:
            view = arr.view()
        if fresh[3]:
            arr.fill(0)
        st = _run(fresh[0], _lib.EVALUATE, ops, len(ops))
        if st:
            check(st)
        return view

    def _entry(self, fresh):
        arr = np.empty(fresh[1], fresh[2])
        t = _wrap_dense(self.name, arr)
        return (arr, t, self.operands(t))


def _owner(m):
    """The Tensor whose values a scipy matrix returned by a kernel views."""
    base = getattr(m, "data", None)
    while isinstance(base, np.ndarray):   # numpy views of views, down to the _View
        base = base.base
    owner = getattr(base, "owner", None)
    return owner if isinstance(owner, Tensor) else None


def _data_pointer(x):
    """The address of x's values (numpy array or scipy.sparse matrix)."""
    data = x if isinstance(x, np.ndarray) else getattr(x, "data", None)
    if not isinstance(data, np.ndarray):
        return None
    return data.__array_interface__["data"][0] or None


def _same_format(t, spec):
    """True when tensor t is already stored as spec says (and in its
    widths, when spec names them: MLIR's posWidth / crdWidth)."""
    from .tensor import format_string, parse_format
    f = parse_format(spec)
    pw, cw = t._meta()[3]
    return (t.format == format_string(f) and f.pos_width in (0, pw)
            and f.crd_width in (0, cw))


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

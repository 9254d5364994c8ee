"""Tensors: a tensorjit handle plus the Python objects whose memory it uses.

A tensor made from a numpy array or a scipy.sparse matrix wraps that
object's buffers (tj_tensor_wrap): no copy when the layout is one tensorjit
stores (a contiguous array in any axis order; CSR, CSC; COO sorted by row,
then column, without duplicates; int32 or int64 indices; float64, float32,
int64 or int32 values). Anything else is copied once into such a layout.
Reading a tensor back (arrays(), to_numpy(), to_scipy()) gives views of its
storage where it can, which keep the tensor alive.
"""
import ctypes
import os

import numpy as np

from . import _lib
from ._lib import Arrays, Format, TensorJitError, check, lib

_DTYPES = {np.dtype(np.float64): _lib.F64, np.dtype(np.float32): _lib.F32,
           np.dtype(np.int64): _lib.I64, np.dtype(np.int32): _lib.I32,
           np.dtype(np.int16): _lib.I16, np.dtype(np.int8): _lib.I8,
           np.dtype(np.bool_): _lib.BOOL, np.dtype(np.uint64): _lib.U64,
           np.dtype(np.uint32): _lib.U32, np.dtype(np.uint16): _lib.U16,
           np.dtype(np.uint8): _lib.U8}
_NP = {v: k for k, v in _DTYPES.items()}
_INDEX = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.int32), 8: np.dtype(np.int64)}
SCIPY_FORMATS = ("ds", "ds:1,0", "uq")   # what scipy.sparse views: CSR, CSC, COO


def parse_format(spec, pos_width=0, crd_width=0):
    """A tj_format from a spelling ("ds", "ds:1,0", MLIR's) and widths."""
    f = Format()
    check(lib.tj_format_parse(spec.encode(), ctypes.byref(f)))
    if pos_width:   # else the spelling's own (MLIR's posWidth / crdWidth) or the default
        f.pos_width = pos_width
    if crd_width:
        f.crd_width = crd_width
    return f


def format_string(f):
    buf = ctypes.create_string_buffer(640)   # room for slices
    lib.tj_format_print(ctypes.byref(f), buf, 640)
    return buf.value.decode()


def value_dtype(dtype):
    """The tensorjit dtype code of a numpy dtype (TypeError if none)."""
    try:
        return _DTYPES[np.dtype(dtype)]
    except KeyError:
        raise TypeError("tensorjit: values of dtype %s are not supported (float64, float32, "
                        "int64, int32, int16, int8, bool, uint64, uint32, uint16, uint8)" % np.dtype(dtype)) from None


class _View:
    """Exposes n entries at ptr as a numpy array that keeps owner alive."""

    def __init__(self, owner, ptr, n, dtype):
        self.owner = owner
        self.__array_interface__ = {"shape": (n,), "typestr": np.dtype(dtype).str,
                                    "data": (ptr or 0, False), "version": 3}


def _view(owner, ptr, n, dtype):
    if not ptr or n == 0:
        return np.zeros(0, dtype)
    return np.asarray(_View(owner, ptr, n, dtype))


def _index_array(a):
    """a as a contiguous int32/int64 array (a itself when it already is)."""
    a = np.asarray(a)
    if a.dtype not in (np.int32, np.int64):
        a = a.astype(np.int64)
    return np.ascontiguousarray(a)


class Tensor:
    """A tensorjit tensor (tj_tensor), freed with the object."""

    def __init__(self, handle, keep=()):
        self._h = handle
        self._keep = keep   # the Python objects whose buffers the tensor uses

    def __del__(self):
        h, self._h = getattr(self, "_h", None), None
        if h and lib is not None:
            lib.tj_tensor_free(h)

    # ---- construction -------------------------------------------------

    @classmethod
    def wrap(cls, name, vals, dims, fmt=None, pos=None, crd=None, strides=None, trusted=False,
             keep=()):
        """tj_tensor_wrap over numpy arrays: pos/crd map a level to an index
        array (one dtype, int32 or int64, per kind); fmt a format spelling."""
        vals = np.asarray(vals)
        pos, crd = pos or {}, crd or {}
        a = Arrays()
        a.dtype = value_dtype(vals.dtype)
        a.order = len(dims)
        dims_c = (ctypes.c_int64 * max(1, len(dims)))(*dims)
        a.dims = dims_c
        widths = [8 * next(iter(d.values())).dtype.itemsize if d else 0 for d in (pos, crd)]
        f = parse_format(fmt, *widths) if fmt else None
        if f is not None:
            a.fmt = ctypes.pointer(f)
        if strides is not None:
            strides_c = (ctypes.c_int64 * len(strides))(*strides)
            a.strides = strides_c
        for l, arr in pos.items():
            a.pos[l], a.pos_len[l] = arr.ctypes.data, arr.size
        for l, arr in crd.items():
            a.crd[l], a.crd_len[l] = arr.ctypes.data, arr.size
        a.vals, a.vals_len = vals.ctypes.data, vals.size
        h = ctypes.c_void_p()
        check(lib.tj_tensor_wrap(name.encode(), ctypes.byref(a),
                                 _lib.WRAP_TRUSTED if trusted else 0, ctypes.byref(h)))
        return cls(h.value, keep=(vals, tuple(pos.values()), tuple(crd.values())) + tuple(keep))

    @classmethod
    def from_numpy(cls, array, name="T"):
        """Wraps a numpy array as a dense tensor: no copy when its elements
        are contiguous in some axis order (C, Fortran, any transposition)."""
        a = np.asarray(array)
        value_dtype(a.dtype)
        item = a.itemsize
        if a.size and all(s % item == 0 and s >= 0 for s in a.strides):
            try:
                return cls.wrap(name, a, a.shape, strides=[s // item for s in a.strides],
                                keep=(array,))
            except TensorJitError as e:
                if e.status != "UNSUPPORTED":
                    raise
        return cls.wrap(name, np.ascontiguousarray(a), a.shape, strides=None)

    @classmethod
    def from_scipy(cls, m, name="T", trusted=False):
        """Wraps a scipy.sparse matrix: CSR as "ds", CSC as "ds:1,0", COO as
        "uq" (rows sorted, then columns), without copies when the arrays are
        canonical (sorted, no duplicates); other kinds are converted to CSR."""
        kind = m.format
        if kind not in ("csr", "csc", "coo"):
            m, kind = m.tocsr(), "csr"
        try:
            return cls._from_sparse(m, kind, name, trusted)
        except TensorJitError as e:
            if e.status != "FORMAT" or m.has_canonical_format:
                raise   # malformed, not merely unsorted: tensorjit's message says where
        m = m.tocsr() if kind == "coo" else m.copy()   # sorted, duplicates summed
        m.sum_duplicates()
        if kind == "coo":
            return cls._from_sparse(m.tocoo(), "coo", name)
        m.sort_indices()
        return cls._from_sparse(m, kind, name)

    @classmethod
    def _from_sparse(cls, m, kind, name, trusted=False):
        value_dtype(m.data.dtype)   # TypeError for complex, float16, unsigned, objects
        vals = np.ascontiguousarray(m.data)
        if kind in ("csr", "csc"):
            ptr, idx = _index_array(m.indptr), _index_array(m.indices)
            return cls.wrap(name, vals, m.shape, "ds" if kind == "csr" else "ds:1,0",
                            pos={1: ptr}, crd={1: idx}, trusted=trusted, keep=(m,))
        row, col = _index_array(m.row), _index_array(m.col)
        if row.dtype != col.dtype:
            row, col = row.astype(np.int64), col.astype(np.int64)
        top = np.array([0, row.size], dtype=row.dtype)
        return cls.wrap(name, vals, m.shape, "uq", pos={0: top}, crd={0: row, 1: col},
                        trusted=trusted, keep=(m,))

    @classmethod
    def read(cls, path, format=None, name="T", dtype=None):
        """Reads .mtx / .tns (optionally .gz) into format (default: CSR for
        a matrix, all compressed otherwise), with values of dtype (default
        float64; integers read exactly, a pattern file's entries are 1)."""
        h = ctypes.c_void_p()
        f = parse_format(format) if format else None
        fp = ctypes.byref(f) if f else None
        if dtype is None:
            check(lib.tj_tensor_read(os.fsencode(path), name.encode(), fp, ctypes.byref(h)))
        else:
            check(lib.tj_tensor_read_as(os.fsencode(path), name.encode(), fp,
                                        value_dtype(dtype), ctypes.byref(h)))
        return cls(h.value)

    @classmethod
    def empty(cls, name, shape, dtype=np.float64, format=None):
        """An empty tensor (no entries) in format (default all dense)."""
        f = parse_format(format) if format else None
        dims = (ctypes.c_int64 * max(1, len(shape)))(*shape)
        h = ctypes.c_void_p()
        check(lib.tj_tensor_new(name.encode(), value_dtype(dtype), len(shape), dims,
                                ctypes.byref(f) if f else None, ctypes.byref(h)))
        return cls(h.value)

    # ---- reading --------------------------------------------------------

    def _arrays(self):
        a = Arrays()
        check(lib.tj_tensor_arrays(self._h, ctypes.byref(a)))
        return a

    def _meta(self):
        """(shape, dtype, format, widths): fixed for a tensor's life."""
        m = getattr(self, "_meta_cache", None)
        if m is None and self.is_view:   # a view has no arrays of its own
            f = lib.tj_tensor_format(self._h).contents
            m = self._meta_cache = (
                tuple(lib.tj_tensor_dim(self._h, d) for d in range(lib.tj_tensor_order(self._h))),
                _NP[lib.tj_tensor_dtype(self._h)], format_string(f), (f.pos_width, f.crd_width))
        if m is None:
            a = self._arrays()
            f = a.fmt.contents
            m = self._meta_cache = (tuple(a.dims[d] for d in range(a.order)), _NP[a.dtype],
                                    format_string(f), (f.pos_width, f.crd_width))
        return m

    @property
    def name(self):
        return lib.tj_tensor_name(self._h).decode()

    def rename(self, name):
        check(lib.tj_tensor_rename(self._h, name.encode()))

    def _alias(self, name):
        """A second tensor named name over this one's arrays (no copy), for
        one Tensor bound to two operands of a call; valid while this one is
        not changed (repacked, assembled anew), so never kept past the call."""
        if self.is_view:
            raise TensorJitError(1, "tensorjit: the view %s is bound to two operands; "
                                 "pass a view of its own for %s" % (self.name, name))
        a = self._arrays()
        h = ctypes.c_void_p()
        check(lib.tj_tensor_wrap(name.encode(), ctypes.byref(a), _lib.WRAP_TRUSTED,
                                 ctypes.byref(h)))
        return Tensor(h.value, keep=(self,))

    @property
    def shape(self):
        return self._meta()[0]

    @property
    def dtype(self):
        return self._meta()[1]

    @property
    def format(self):
        """The format's taco spelling, e.g. "ds:1,0"."""
        return self._meta()[2]

    @property
    def widths(self):
        return self._meta()[3]

    @property
    def nnz(self):
        return lib.tj_tensor_nnz(self._h)

    def arrays(self):
        """The storage as numpy views (no copies): {"pos": {level: array},
        "crd": {level: array}, "vals": array}. Valid while the tensor is not
        changed; they keep it alive."""
        a = self._arrays()
        f = a.fmt.contents
        pw, cw = _INDEX[f.pos_width // 8], _INDEX[f.crd_width // 8]
        out = {"pos": {}, "crd": {}, "vals": _view(self, a.vals, a.vals_len, _NP[a.dtype])}
        for l in range(f.order):   # levels: more than dims when blocked (BSR, 2:4)
            if a.pos[l]:
                out["pos"][l] = _view(self, a.pos[l], a.pos_len[l], pw)
            if a.crd[l]:
                out["crd"][l] = _view(self, a.crd[l], a.crd_len[l], cw)
        return out

    def changed(self):
        """Says that values were written through arrays() views kept from
        earlier: the copy a method(sell) kernel keeps of this tensor is
        dropped (plain kernels read the arrays in place and need nothing)."""
        check(lib.tj_tensor_changed(self._h))

    @property
    def is_view(self):
        return bool(lib.tj_tensor_is_view(self._h))

    def slice(self, key, name=None):
        """A view of this tensor without copying (MLIR's dimSlices): key
        holds one Python slice per dim, start:stop:step with step >= 1
        (A.slice((slice(1, 7, 2), slice(None))) is A[1:7:2, :]). Kernels
        read it in place; it keeps this tensor alive. Read-only: it cannot
        be an output."""
        if not isinstance(key, tuple):
            key = (key,)
        shape = self.shape
        if len(key) != len(shape) or not all(isinstance(k, slice) for k in key):
            raise TypeError("tensorjit: slice a tensor with one start:stop:step per dim "
                            "(%d dims)" % len(shape))
        off, size, step = [], [], []
        for k, n in zip(key, shape):
            if k.step is not None and k.step < 1:
                raise ValueError("tensorjit: a slice's step must be >= 1 (got %d)" % k.step)
            start, stop, st = k.indices(n)
            off.append(start)
            step.append(st)
            size.append(max(0, (stop - start + st - 1) // st))
        arr = lambda v: (ctypes.c_int64 * max(1, len(v)))(*v)
        h = ctypes.c_void_p()
        nm = (name or self.name).encode()
        check(lib.tj_tensor_slice(self._h, nm, arr(off), arr(size), arr(step), ctypes.byref(h)))
        return Tensor(h.value, keep=(self,))

    def __getitem__(self, key):
        """A[1:7:2, :]: a view (see slice)."""
        return self.slice(key)

    def convert(self, format):
        """A new tensor with this one's entries in another format."""
        f = parse_format(format)
        h = ctypes.c_void_p()
        check(lib.tj_tensor_convert(self._h, ctypes.byref(f), ctypes.byref(h)))
        return Tensor(h.value)

    def to_numpy(self):
        """A dense numpy array: a view of the values when the tensor is all
        dense, else a copy through a dense conversion."""
        fmt = self.format
        levels = fmt.split(":")[0]
        order = len(self.shape)
        plain = set(levels) <= {"d"} and len(levels) == order   # blocked: more levels
        t = self if plain else self.convert("d" * order)
        a = t._arrays()
        order = [a.fmt.contents.mode_order[l] for l in range(a.order)]
        shape = [a.dims[d] for d in order]
        vals = t.arrays()["vals"].reshape(shape)
        return vals.transpose(np.argsort(order)) if order else vals.reshape(())

    def to_scipy(self):
        """A scipy.sparse matrix of an order-2 tensor: views of CSR ("ds"),
        CSC ("ds:1,0"), COO ("uq") and BSR ("dsdd:0/r,1/c,0%r,1%c" over
        extents that are block multiples: scipy's bsr_matrix) storage, else a
        copy converted to CSR."""
        import re
        import scipy.sparse as sp
        fmt = self.format
        if len(self.shape) != 2:
            raise ValueError("tensorjit: to_scipy needs an order-2 tensor, not %s" % fmt)
        bsr = re.fullmatch(r"dsdd:0/(\d+),1/(\d+),0%\1,1%\2", fmt)
        if bsr and all(n % int(b) == 0 for n, b in zip(self.shape, bsr.groups())):
            arr = self.arrays()
            r, c = (int(b) for b in bsr.groups())
            data = arr["vals"].reshape(-1, r, c)
            return sp.bsr_matrix((data, arr["crd"][1], arr["pos"][1]), shape=self.shape,
                                 copy=False)
        if fmt not in SCIPY_FORMATS:
            return self.convert("ds").to_scipy()
        arr = self.arrays()
        if fmt == "uq":
            return sp.coo_matrix((arr["vals"], (arr["crd"][0], arr["crd"][1])), shape=self.shape,
                                 copy=False)
        cls = sp.csr_matrix if fmt == "ds" else sp.csc_matrix
        return cls((arr["vals"], arr["crd"][1], arr["pos"][1]), shape=self.shape, copy=False)

    def write(self, path):
        """Writes .mtx (a matrix) or .tns (any order)."""
        check(lib.tj_tensor_write(self._h, os.fsencode(path)))

    def listing(self, max_entries=20):
        """The entries as text, one "(coordinates) value" a line after a
        header (tj_tensor_print), elided past max_entries (0: all)."""
        return _lib.print_to_string(_print_tensor, self._h, max_entries)

    def __str__(self):
        return self.listing().rstrip("\n")

    def __repr__(self):
        return "<tensorjit.Tensor %s: %s %s %s, nnz %d>" % (
            self.name, "x".join(map(str, self.shape)) or "scalar", self.format,
            self.dtype.name, self.nnz)

    def _repr_html_(self):
        import html
        return "<p><code>%s</code></p><pre>%s</pre>" % (html.escape(repr(self)),
                                                        html.escape(self.listing(10)))


def _print_tensor(h, max_entries, file):
    lib.tj_tensor_print(h, file, max_entries)
    return _lib.OK


def as_tensor(x, name):
    """x (Tensor, numpy array, scipy.sparse matrix or a number) as a Tensor."""
    if isinstance(x, Tensor):
        return x
    try:
        import scipy.sparse as sp
        if sp.issparse(x):
            return Tensor.from_scipy(x, name)
    except ImportError:
        pass
    return Tensor.from_numpy(np.asarray(x), name)

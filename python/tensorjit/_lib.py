"""The shared library and its C declarations (include/tensorjit.h), via ctypes.

The library is the one named by the environment variable TENSORJIT_LIBRARY,
else the libtensorjit.so of a build tree beside this package (build*/ in the
repository holding python/tensorjit), else the system's (find_library).
ctypes.CDLL releases the GIL around every call, so a running kernel does not
hold up other Python threads.
"""
import ctypes
import ctypes.util
import glob
import os

MAX_ORDER = 8

OK = 0
STATUS_NAMES = ["OK", "INVALID", "PARSE", "SHAPE", "DTYPE", "FORMAT", "IO",
                "NOMEM", "UNSUPPORTED", "JIT", "INTERNAL"]

F64, F32, I64, I32, I16, I8, BOOL, U64, U32, U16, U8 = 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
ASSEMBLE, COMPUTE, EVALUATE = 0, 1, 2
WRAP_TRUSTED = 1


class Window(ctypes.Structure):
    """tj_window: internal to the level view of a cut blocked view."""
    _fields_ = [("block", ctypes.c_int32),
                ("k", ctypes.c_int32),
                ("lead", ctypes.c_int64),
                ("size", ctypes.c_int64),
                ("stride", ctypes.c_int64)]


class Format(ctypes.Structure):
    _fields_ = [("order", ctypes.c_int32),
                ("levels", ctypes.c_char * (MAX_ORDER + 1)),
                ("mode_order", ctypes.c_int32 * MAX_ORDER),
                ("pos_width", ctypes.c_int32),
                ("crd_width", ctypes.c_int32),
                ("ndims", ctypes.c_int32),
                ("lvl_op", ctypes.c_int32 * MAX_ORDER),
                ("lvl_k", ctypes.c_int32 * MAX_ORDER),
                ("lvl_n", ctypes.c_int32 * MAX_ORDER),
                ("slice", (ctypes.c_int64 * 3) * MAX_ORDER),
                ("win", Window * MAX_ORDER)]


class Arrays(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int),
                ("order", ctypes.c_int),
                ("dims", ctypes.POINTER(ctypes.c_int64)),
                ("fmt", ctypes.POINTER(Format)),
                ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("pos", ctypes.c_void_p * MAX_ORDER),
                ("pos_len", ctypes.c_int64 * MAX_ORDER),
                ("crd", ctypes.c_void_p * MAX_ORDER),
                ("crd_len", ctypes.c_int64 * MAX_ORDER),
                ("vals", ctypes.c_void_p),
                ("vals_len", ctypes.c_int64)]


class Options(ctypes.Structure):
    _fields_ = [("opt_level", ctypes.c_int),
                ("no_vectorize", ctypes.c_int),
                ("no_llvm_vectorize", ctypes.c_int),
                ("nthreads", ctypes.c_int),
                ("cpu", ctypes.c_char_p),
                ("features", ctypes.c_char_p),
                ("no_unroll_jam", ctypes.c_int),
                ("backend", ctypes.c_int),
                ("semiring", ctypes.c_char_p),
                ("defs", ctypes.c_char_p)]


def _candidates():
    env = os.environ.get("TENSORJIT_LIBRARY")
    if env:
        yield env
        return
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for path in sorted(glob.glob(os.path.join(repo, "build*", "libtensorjit.so"))):
        yield path
    found = ctypes.util.find_library("tensorjit")
    if found:
        yield found


def _load():
    tried = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError("tensorjit: no shared library found; build one (bash scripts/build.sh "
                      "build) or set TENSORJIT_LIBRARY. Tried: " + ("; ".join(tried) or "nothing"))


lib = _load()

_P = ctypes.c_void_p
_S = ctypes.c_int
_I64P = ctypes.POINTER(ctypes.c_int64)


def _decl(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)


_decl("tj_last_error", ctypes.c_char_p)
_decl("tj_version", ctypes.c_char_p)
_decl("tj_format_parse", _S, ctypes.c_char_p, ctypes.POINTER(Format))
_decl("tj_format_print", None, ctypes.POINTER(Format), ctypes.c_char_p, ctypes.c_size_t)
_decl("tj_tensor_new", _S, ctypes.c_char_p, _S, _S, _I64P, ctypes.POINTER(Format),
      ctypes.POINTER(_P))
_decl("tj_tensor_free", None, _P)
_decl("tj_tensor_wrap", _S, ctypes.c_char_p, ctypes.POINTER(Arrays), ctypes.c_uint,
      ctypes.POINTER(_P))
_decl("tj_tensor_arrays", _S, _P, ctypes.POINTER(Arrays))
_decl("tj_tensor_changed", _S, _P)
_decl("tj_tensor_convert", _S, _P, ctypes.POINTER(Format), ctypes.POINTER(_P))
_decl("tj_tensor_slice", _S, _P, ctypes.c_char_p, _I64P, _I64P, _I64P, ctypes.POINTER(_P))
_decl("tj_tensor_is_view", ctypes.c_bool, _P)
_decl("tj_tensor_order", ctypes.c_int, _P)
_decl("tj_tensor_dim", ctypes.c_int64, _P, ctypes.c_int)
_decl("tj_tensor_dtype", ctypes.c_int, _P)
_decl("tj_tensor_format", ctypes.POINTER(Format), _P)
_decl("tj_tensor_read", _S, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(Format),
      ctypes.POINTER(_P))
_decl("tj_tensor_read_as", _S, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(Format),
      _S, ctypes.POINTER(_P))
_decl("tj_tensor_write", _S, _P, ctypes.c_char_p)
_decl("tj_tensor_rename", _S, _P, ctypes.c_char_p)
_decl("tj_tensor_name", ctypes.c_char_p, _P)
_decl("tj_tensor_nnz", ctypes.c_int64, _P)
_decl("tj_tensor_print", None, _P, _P, ctypes.c_int64)
_decl("tj_context_new", _S, ctypes.POINTER(_P))
_decl("tj_context_free", None, _P)
_decl("tj_options_default", Options)
_decl("tj_compile", _S, _P, ctypes.c_char_p, ctypes.POINTER(_P), _S, ctypes.c_char_p,
      ctypes.POINTER(Options), ctypes.POINTER(_P))
_decl("tj_kernel_run", _S, _P, _S, ctypes.POINTER(_P), _S)
_decl("tj_kernel_free", None, _P)
_decl("tj_kernel_print", _S, _P, _S, _P)


class TensorJitError(Exception):
    """A tensorjit call failed; the message is tensorjit's (tj_last_error)."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = STATUS_NAMES[status] if 0 <= status < len(STATUS_NAMES) else str(status)


def check(status):
    """Raises TensorJitError with the library's message unless status is OK."""
    if status != OK:
        raise TensorJitError(status, lib.tj_last_error().decode("utf-8", "replace"))


_libc = ctypes.CDLL(ctypes.util.find_library("c"))
_libc.fopen.restype = _P
_libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
_libc.fclose.argtypes = [_P]


def print_to_string(fn, *args):
    """Runs fn(*args, FILE *) on a temporary file and returns what it wrote."""
    import tempfile
    with tempfile.NamedTemporaryFile("rb", suffix=".txt") as tmp:
        f = _libc.fopen(tmp.name.encode(), b"w")
        if not f:
            raise OSError("tensorjit: cannot open a temporary file")
        try:
            check(fn(*args, f))
        finally:
            _libc.fclose(f)
        return tmp.read().decode("utf-8", "replace")

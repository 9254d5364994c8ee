"""The tensorjit Python package against numpy and scipy.sparse.

Every expected value is computed by numpy/scipy (or by hand), never by
tensorjit's own reference interpreter.
"""
import threading

import numpy as np
import pytest
import scipy.sparse as sp

import tensorjit
from tensorjit import TensorJitError

RNG = np.random.default_rng(19)


def sparse(n, m, density=0.1, kind="csr", dtype=np.float64, seed=0):
    a = sp.random(n, m, density, format=kind, dtype=np.float64, random_state=seed)
    if np.dtype(dtype).kind == "i":
        a.data = np.round(a.data * 9 + 1)
    return a.astype(dtype)


@pytest.fixture(scope="module")
def spmv():
    return tensorjit.compile("y(i) = A(i,j) * x(j)")


@pytest.mark.parametrize("kind", ["csr", "csc", "coo"])
def test_spmv_on_scipy_kinds(spmv, kind):
    a = sparse(60, 45, kind=kind, seed=1)
    x = RNG.random(45)
    np.testing.assert_allclose(spmv(A=a, x=x), a @ x, rtol=1e-12, atol=1e-12)


def test_formats_argument_converts_when_layouts_differ():
    k = tensorjit.compile("y(i) = A(i,j) * x(j)", formats={"A": "ds"})
    a = sparse(30, 20, kind="csc", seed=2)
    x = RNG.random(20)
    np.testing.assert_allclose(k(A=a, x=x), a @ x, rtol=1e-12)
    a.data *= -2   # a converted input is converted again on every call
    np.testing.assert_allclose(k(A=a, x=x), a @ x, rtol=1e-12)


def test_inputs_are_zero_copy_and_read_in_place():
    """Mutating the numpy buffers changes the next result, with the same
    wrapped tensors (no re-wrap) over the same memory."""
    k = tensorjit.compile("y(i) = A(i,j) * x(j)", formats={"A": "ds"})
    a = sparse(80, 70, seed=3)
    x = RNG.random(70)
    y1 = k(A=a, x=x)
    ta, tx = k._inputs["A"][2], k._inputs["x"][2]
    assert np.shares_memory(ta.arrays()["vals"], a.data)
    assert np.shares_memory(tx.arrays()["vals"], x)
    a.data[:] = RNG.random(a.nnz)
    x[::2] = -1.0
    y2 = k(A=a, x=x)
    assert k._inputs["A"][2] is ta and k._inputs["x"][2] is tx
    np.testing.assert_allclose(y2, a @ x, rtol=1e-12)
    assert not np.allclose(y1, y2)


def test_sell_spmv_against_scipy_and_changed():
    """method(sell): A copied once into SELL-8 slices; rows of uneven length
    (some empty, one long), a row count not a multiple of 8, 2 threads. Values
    written in place reach the copy after Tensor.changed()."""
    rows = [RNG.choice(50, size=n, replace=False) for n in
            [0, 3, 50, 1, 0, 7, 2, 2, 5] * 7 + [4, 0, 9]]
    indptr = np.cumsum([0] + [len(r) for r in rows])
    a = sp.csr_matrix((RNG.random(indptr[-1]), np.concatenate(rows).astype(np.int32),
                       indptr), shape=(len(rows), 50))
    a.sort_indices()
    x = RNG.random(50)
    for nthreads in (1, 2):
        k = tensorjit.compile("y(i) = A(i,j) * x(j)", formats={"A": "ds"},
                              schedule="method(sell)", nthreads=nthreads)
        np.testing.assert_allclose(k(A=a, x=x), a @ x, rtol=1e-12)
        a.data *= -1.5   # in place: the next call sees it, as with any kernel
        np.testing.assert_allclose(k(A=a, x=x), a @ x, rtol=1e-12)
        a.data *= 2
        np.testing.assert_allclose(k(A=a, x=x), a @ x, rtol=1e-12)
        # a Tensor passed as is keeps its copy until the caller says changed()
        t = tensorjit.tensor(a, "A")
        np.testing.assert_allclose(k(A=t, x=x), a @ x, rtol=1e-12)
        a.data *= 3
        t.changed()
        np.testing.assert_allclose(k(A=t, x=x), a @ x, rtol=1e-12)


def test_new_objects_are_wrapped_again():
    k = tensorjit.compile("y(i) = A(i,j) * x(j)")
    a, b = sparse(20, 20, seed=4), sparse(20, 20, seed=5)
    x = RNG.random(20)
    np.testing.assert_allclose(k(A=a, x=x), a @ x, rtol=1e-12)
    np.testing.assert_allclose(k(A=b, x=x), b @ x, rtol=1e-12)


@pytest.mark.parametrize("layout", ["C", "F", "T", "slice"])
def test_dense_layouts(layout):
    m = RNG.random((7, 9))
    if layout == "F":
        m = np.asfortranarray(m)
    elif layout == "T":
        m = RNG.random((9, 7)).T   # a transposed view: column-major, no copy
    elif layout == "slice":
        m = RNG.random((7, 18))[:, ::2]   # gaps: copied into a contiguous array
    x = RNG.random(9)
    k = tensorjit.compile("y(i) = M(i,j) * x(j)")
    np.testing.assert_allclose(k(M=m, x=x), m @ x, rtol=1e-12)
    t = tensorjit.tensor(m)
    if layout != "slice":
        assert np.shares_memory(t.arrays()["vals"], m)
    np.testing.assert_array_equal(t.to_numpy(), m)


def test_spmm_and_gemm():
    a = sparse(50, 40, 0.2, seed=6)
    b = RNG.random((40, 16))
    k = tensorjit.compile("C(i,j) = A(i,k) * B(k,j)")
    np.testing.assert_allclose(k(A=a, B=b), a @ b, rtol=1e-12)
    d = RNG.random((50, 40))
    np.testing.assert_allclose(k(A=d, B=b), d @ b, rtol=1e-12)


def test_sparse_outputs_are_scipy_matrices():
    a, b = sparse(40, 30, seed=7), sparse(40, 30, seed=8)
    add = tensorjit.compile("C(i,j) = A(i,j) + B(i,j)", formats={"C": "ds"})
    c = add(A=a, B=b)
    assert sp.isspmatrix_csr(c)
    np.testing.assert_allclose(c.toarray(), (a + b).toarray(), rtol=1e-12)
    mul = tensorjit.compile("C(i,j) = A(i,j) * B(i,j)", formats={"C": "ds"})
    c = mul(A=a, B=a)
    np.testing.assert_allclose(c.toarray(), a.multiply(a).toarray(), rtol=1e-12)
    assert c.nnz == a.nnz


def test_residual_follows_the_einsum_rule():
    a = sparse(25, 25, 0.3, seed=9)
    b, x = RNG.random(25), RNG.random(25)
    k = tensorjit.compile("r(i) = b(i) - A(i,j) * x(j)")
    np.testing.assert_allclose(k(A=a, b=b, x=x), b - a @ x, rtol=1e-12, atol=1e-12)


def test_float32_and_int32():
    a = sparse(30, 30, seed=10, dtype=np.float32)
    x = RNG.random(30).astype(np.float32)
    y = tensorjit.compile("y(i) = A(i,j) * x(j)")(A=a, x=x)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, a @ x, rtol=1e-5)
    ai = sparse(30, 30, seed=11, dtype=np.int32)
    xi = np.arange(30, dtype=np.int32)
    np.testing.assert_array_equal(tensorjit.compile("y(i) = A(i,j) * x(j)")(A=ai, x=xi), ai @ xi)


def test_bool_int16_int8():
    """bool: + is or, * is and (numpy's bool matmul); i16 and i8 wrap as
    numpy's fixed-width integers do."""
    spmv = tensorjit.compile("y(i) = A(i,j) * x(j)")
    a = sparse(40, 30, density=0.2, seed=12) != 0
    x = RNG.random(30) < 0.3
    y = spmv(A=a.tocsr(), x=x)
    assert y.dtype == np.bool_
    np.testing.assert_array_equal(y, (a @ x.astype(np.int64)) > 0)
    for dt in (np.int16, np.int8):
        ai = sparse(40, 30, density=0.5, seed=13, dtype=np.int64) * 40
        xi = np.arange(30, dtype=np.int64) - 15
        y = spmv(A=ai.astype(dt), x=xi.astype(dt))
        assert y.dtype == dt
        np.testing.assert_array_equal(y, (ai @ xi).astype(dt))


def test_unsigned_wrap_as_numpy():
    """u8..u64 wrap modulo 2^bits and compare as unsigned, as numpy's
    unsigned integers; u64 above 2^63 is exact."""
    spmv = tensorjit.compile("y(i) = A(i,j) * x(j)")
    for dt in (np.uint8, np.uint16, np.uint32, np.uint64):
        ai = sparse(40, 30, density=0.5, seed=14, dtype=np.int64) * 97
        xi = np.arange(30, dtype=np.int64) * 1000003
        a, x = ai.astype(dt), xi.astype(dt)
        y = spmv(A=a, x=x)
        assert y.dtype == dt
        np.testing.assert_array_equal(y, (a.astype(np.uint64) @ x.astype(np.uint64)).astype(dt))
        big = np.array([np.iinfo(dt).max, 3, np.iinfo(dt).max // 2 + 2], dt)
        np.testing.assert_array_equal(
            tensorjit.compile("y(i) = max(b(i), c(i))")(b=big, c=big[::-1].copy()),
            np.maximum(big, big[::-1]))
    top = np.array([2 ** 63 + 7, 5], np.uint64)
    y = tensorjit.compile("y(i) = b(i) / c(i)")(b=top, c=np.array([2, 5], np.uint64))
    assert int(y[0]) == (2 ** 63 + 7) // 2 and int(y[1]) == 1


def test_bool_mask_over_floats():
    """a bool mask keeps an f64 SpMV where it is true (a dense mask: by value)"""
    a, x = sparse(20, 15, seed=15), RNG.random(15)
    m = RNG.random(20) < 0.5
    y = tensorjit.compile("y(i) = mask(m(i), A(i,j) * x(j))")(A=a, x=x, m=m)
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, np.where(m, a @ x, 0))


def test_int64_is_exact_above_2_53():
    big = 2 ** 53 + 1
    a = sp.csr_matrix((np.array([big, 3], np.int64), np.array([0, 1]), np.array([0, 2, 2])),
                      shape=(2, 2))
    x = np.array([1, 2 ** 40], np.int64)
    y = tensorjit.compile("y(i) = A(i,j) * x(j)")(A=a, x=x)
    assert y.dtype == np.int64 and int(y[0]) == big + 3 * 2 ** 40 and int(y[1]) == 0


def test_errors_carry_tensorjits_message():
    a, x = sparse(10, 8, seed=12), RNG.random(8)
    with pytest.raises(TensorJitError) as e:
        tensorjit.compile("y(i) = A(i,j) * * x(j)")(A=a, x=x)
    assert e.value.status == "PARSE"
    assert "1:17: expected an expression" in str(e.value) and "^" in str(e.value)
    with pytest.raises(TensorJitError, match="index j has extent 8 in A .* but 9 in x"):
        tensorjit.compile("y(i) = A(i,j) * x(j)")(A=a, x=RNG.random(9))
    bad = sp.csr_matrix((np.ones(2), np.array([0, 9]), np.array([0, 1, 2])), shape=(2, 3))
    with pytest.raises(TensorJitError, match=r"tensor A: level 1 \(compressed\): crd\[1\] = 9 "
                                             r"is out of range 0..2"):
        tensorjit.compile("y(i) = A(i,j) * x(j)")(A=bad, x=np.ones(3))
    with pytest.raises(TypeError, match="float16"):
        tensorjit.tensor(np.ones(3, np.float16))


def test_unsorted_scipy_input_is_sorted_into_a_copy():
    a = sp.csr_matrix((np.array([1.0, 2.0]), np.array([2, 0]), np.array([0, 2])), shape=(1, 3))
    assert not a.has_sorted_indices
    y = tensorjit.compile("y(i) = A(i,j) * x(j)")(A=a, x=np.array([10.0, 20.0, 30.0]))
    assert y[0] == 1 * 30 + 2 * 10


def test_tensors_convert_and_print(tmp_path):
    a = sparse(12, 9, 0.3, seed=13)
    t = tensorjit.tensor(a, "A")
    assert t.format == "ds" and t.shape == (12, 9) and t.nnz == a.nnz
    assert np.shares_memory(t.to_scipy().data, a.data)
    np.testing.assert_array_equal(t.convert("ss").to_numpy(), a.toarray())
    np.testing.assert_array_equal(t.convert("ds:1,0").to_scipy().toarray(), a.toarray())
    path = tmp_path / "a.mtx"
    t.write(path)
    back = tensorjit.read(str(path))
    np.testing.assert_allclose(back.to_numpy(), a.toarray(), rtol=1e-15)
    assert "A: 12x9 ds float64" in repr(t)


def test_stages_print():
    k = tensorjit.compile("y(i) = A(i,j) * x(j)")
    with pytest.raises(TensorJitError, match="call the kernel once"):
        k.source("c")
    k(A=sparse(5, 5, seed=14), x=np.ones(5))
    assert "forall(i" in k.cin()
    assert "int32_t" in k.source("c")
    assert "define" in k.llvm()
    assert "compiled" in repr(k)


def test_out_and_accumulate():
    a, x = sparse(20, 20, seed=15), RNG.random(20)
    out = np.full(20, 1.0)
    k = tensorjit.compile("y(i) += A(i,j) * x(j)")
    assert k(A=a, x=x, out=out) is out
    np.testing.assert_allclose(out, 1.0 + a @ x, rtol=1e-12)


def test_threads_run_kernels_at_once():
    k = tensorjit.compile("y(i) = A(i,j) * x(j)")
    mats = [sparse(300, 300, 0.05, seed=20 + i) for i in range(4)]
    x = RNG.random(300)
    results = [None] * 4

    def work(i):   # one Kernel shared by every thread, each on its own matrix
        for _ in range(20):
            results[i] = k(A=mats[i], x=x)
            results[i] = k(A=mats[i], x=x)   # the fast path of a repeated call

    k(A=mats[0], x=x)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(4):
        np.testing.assert_allclose(results[i], mats[i] @ x, rtol=1e-12)


def test_scalars_and_order_3():
    x = RNG.random(5)
    np.testing.assert_allclose(tensorjit.compile("y(i) = a * x(i)")(a=2.5, x=x), 2.5 * x)
    s = tensorjit.compile("s = x(i) * x(i)")(x=x)
    assert s.shape == () and abs(float(s) - x @ x) < 1e-12
    b, c = RNG.random((3, 4, 5)), RNG.random(5)
    ttv = tensorjit.compile("A(i,j) = B(i,j,k) * c(k)", formats={"B": "sss"})
    np.testing.assert_allclose(ttv(B=b, c=c), np.einsum("ijk,k->ij", b, c), rtol=1e-12)


def test_mttkrp_on_a_real_tensor():
    import os
    path = os.path.join(os.environ.get("TJ_DATA_DIR", ""), "tensors", "openflight.tns")
    if not os.path.exists(path):
        pytest.skip("no ../shared/data")
    t = tensorjit.read(path)
    c, d = RNG.random((t.shape[1], 8)), RNG.random((t.shape[2], 8))
    got = tensorjit.compile("A(i,j) = B(i,k,l) * C(k,j) * D(l,j)")(B=t, C=c, D=d)
    coo = t.convert("uqq").arrays()   # coordinates and values, independently summed
    i, k, l = (coo["crd"][m] for m in range(3))
    want = np.zeros((t.shape[0], 8))
    np.add.at(want, i, coo["vals"][:, None] * c[k] * d[l])
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-11)


# A small corpus: expression, numpy einsum of the same sum, formats to
# store the operands in (numpy inputs converted by tensorjit), operand
# shapes. Inputs are random with about a third of the entries zero.
CORPUS = [
    ("y(i) = A(i,j) * x(j)", lambda A, x: A @ x, {"A": "ds"}, {"A": (9, 7), "x": (7,)}),
    ("y(i) = A(i,j) * x(j)", lambda A, x: A @ x, {"A": "ds:1,0"}, {"A": (9, 7), "x": (7,)}),
    ("y(i) = A(i,j) * x(j)", lambda A, x: A @ x, {"A": "ss"}, {"A": (9, 7), "x": (7,)}),
    ("y(i) = A(i,j) * x(j)", lambda A, x: A @ x, {"A": "uq"}, {"A": (9, 7), "x": (7,)}),
    ("y(i) = A(i,j) * x(j)", lambda A, x: A @ x, {"A": "ds", "x": "s"}, {"A": (9, 7), "x": (7,)}),
    ("C(i,j) = A(i,k) * B(k,j)", lambda A, B: A @ B, {"A": "ds"}, {"A": (8, 6), "B": (6, 5)}),
    ("C(i,j) = A(i,k) * B(k,j)", lambda A, B: A @ B, {"A": "ds", "B": "ds", "C": "ds"},
     {"A": (8, 6), "B": (6, 5)}),
    ("C(i,j) = A(i,j) + B(i,j)", lambda A, B: A + B, {"A": "ds", "B": "ds", "C": "ds"},
     {"A": (6, 7), "B": (6, 7)}),
    ("C(i,j) = A(i,j) * B(i,j)", lambda A, B: A * B, {"A": "ds", "B": "ss", "C": "ds"},
     {"A": (6, 7), "B": (6, 7)}),
    ("C(i,j) = A(i,j) - B(i,j)", lambda A, B: A - B, {"A": "ds"}, {"A": (6, 7), "B": (6, 7)}),
    ("a = x(i) * y(i)", lambda x, y: x @ y, {"x": "s"}, {"x": (11,), "y": (11,)}),
    ("A(i,j) = B(i,j,k) * c(k)", lambda B, c: np.einsum("ijk,k->ij", B, c), {"B": "sss"},
     {"B": (4, 3, 5), "c": (5,)}),
    ("A(i,j) = B(i,j,k) * c(k)", lambda B, c: np.einsum("ijk,k->ij", B, c), {"B": "uqq"},
     {"B": (4, 3, 5), "c": (5,)}),
    ("A(i,j) = B(i,k,l) * C(k,j) * D(l,j)",
     lambda B, C, D: np.einsum("ikl,kj,lj->ij", B, C, D), {"B": "sss"},
     {"B": (4, 3, 5), "C": (3, 6), "D": (5, 6)}),
    ("D(i,j) = A(i,j) * B(i,k) * C(k,j)", lambda A, B, C: A * (B @ C), {"A": "ds"},
     {"A": (5, 6), "B": (5, 4), "C": (4, 6)}),
    ("r(i) = b(i) - A(i,j) * x(j)", lambda A, b, x: b - A @ x, {"A": "ds"},
     {"A": (6, 6), "b": (6,), "x": (6,)}),
    ("y(i) = sqrt(x(i)) + max(x(i), z(i))", lambda x, z: np.sqrt(x) + np.maximum(x, z), {},
     {"x": (9,), "z": (9,)}),
    # sparse outputs, transposed accesses, fused sums, SDDMM, TTM, empty extents
    ("y(i) = A(i,j) * x(j)", lambda A, x: A @ x, {"A": "ds", "x": "s", "y": "s"},
     {"A": (9, 7), "x": (7,)}),
    ("y(i) = A(i,j) * x(j)", lambda A, x: A @ x, {"A": "ss", "y": "s"}, {"A": (9, 7), "x": (7,)}),
    ("C(i,j) = A(i,k) * B(k,j)", lambda A, B: A @ B, {"A": "ss", "B": "ds", "C": "ss"},
     {"A": (7, 6), "B": (6, 8)}),
    ("C(i,j) = A(i,k) * B(k,j)", lambda A, B: A @ B, {"A": "uq"}, {"A": (7, 6), "B": (6, 3)}),
    ("C(i,j) = A(k,i) * B(k,j)", lambda A, B: A.T @ B, {"A": "ds"}, {"A": (6, 7), "B": (6, 5)}),
    ("C(i,j) = A(i,k) * B(j,k)", lambda A, B: A @ B.T, {"A": "ds:1,0"},
     {"A": (7, 6), "B": (5, 6)}),
    ("C(i,j) = A(i,k) * B(k,j) + D(i,j)", lambda A, B, D: A @ B + D, {"A": "ds", "D": "ds"},
     {"A": (6, 5), "B": (5, 4), "D": (6, 4)}),
    ("A(i,j) = B(i,j) * C(i,k) * D(j,k)", lambda B, C, D: B * (C @ D.T),
     {"B": "ds", "A": "ds"}, {"B": (6, 7), "C": (6, 3), "D": (7, 3)}),
    ("A(i,j,l) = B(i,j,k) * C(k,l)", lambda B, C: np.einsum("ijk,kl->ijl", B, C), {"B": "sss"},
     {"B": (4, 3, 5), "C": (5, 2)}),
    ("C(i,j) = A(i,j) + B(i,j)", lambda A, B: A + B, {"A": "ds:1,0", "B": "uq", "C": "ds:1,0"},
     {"A": (6, 7), "B": (6, 7)}),
    ("y(i) = A(i,j) * x(j)", lambda A, x: A @ x, {"A": "ds"}, {"A": (0, 4), "x": (4,)}),
    ("y(i) = A(i,j) * x(j)", lambda A, x: A @ x, {"A": "ds"}, {"A": (5, 0), "x": (0,)}),
]


@pytest.mark.parametrize("case", range(len(CORPUS)))
def test_corpus_against_numpy(case):
    expr, ref, formats, shapes = CORPUS[case]
    rng = np.random.default_rng(100 + case)
    ops = {}
    for name, shape in shapes.items():
        v = rng.random(shape)
        v[rng.random(shape) < 0.35] = 0
        ops[name] = v
    got = tensorjit.compile(expr, formats=formats)(**ops)
    if sp.issparse(got):
        got = got.toarray()
    elif isinstance(got, tensorjit.Tensor):
        got = got.to_numpy()
    want = ref(*[ops[n] for n in shapes])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=expr + " " + str(formats))


def test_tensor_in_any_format():
    d = RNG.random((5, 6, 4))
    d[d < 0.5] = 0
    for fmt in ("sss", "uqq", "dsd", "ssd:2,0,1", "ddd:1,2,0"):
        t = tensorjit.tensor(d, "T", format=fmt)
        assert t.format == fmt
        np.testing.assert_array_equal(t.to_numpy(), d)


def test_explicit_zero_survives_a_format_conversion_under_min_plus():
    """A stored 0 is an entry: under min.plus it is 0 + x, where an absent
    entry is +inf. Converting CSR to CSC for the kernel dropped it (9, not
    1). A = [0* 5; 7 .] with 0* stored; y(j) = min_i A(i,j) + x(i)."""
    a = tensorjit.Tensor.wrap("A", np.array([0.0, 5.0, 7.0]), (2, 2), "ds",
                              pos={1: np.array([0, 2, 3], np.int32)},
                              crd={1: np.array([0, 1, 0], np.int32)})
    x = np.array([1.0, 2.0])
    want = [min(0 + 1, 7 + 2), 5 + 1]
    for fmt in ("ds", "ds:1,0", "uq"):
        k = tensorjit.compile("y(j) = A(i,j) * x(i)", semiring="min.plus",
                              formats={"A": fmt})
        np.testing.assert_array_equal(k(A=a, x=x), want)


def test_one_tensor_bound_to_several_operands():
    """The library binds operands by name: one Tensor passed for B, C and D
    was renamed to each in turn and the call failed ("unknown tensor 'B'").
    Values against scipy, sparse and dense outputs, and the call repeated."""
    b = sp.random(6, 7, density=0.4, format="csr", random_state=3)
    c = sp.random(6, 7, density=0.4, format="csr", random_state=4)
    B, C = tensorjit.tensor(b, "B"), tensorjit.tensor(c, "C")
    k = tensorjit.compile("A(i,j) = B(i,j) + C(i,j) + D(i,j)", formats={"A": "ds"})
    for _ in range(2):
        np.testing.assert_allclose(k(B=B, C=B, D=B).toarray(), 3 * b.toarray())
        np.testing.assert_allclose(k(B=C, C=B, D=C).toarray(), (2 * c + b).toarray())
    sq = tensorjit.compile("A(i,j) = B(i,j) * C(i,j)")
    np.testing.assert_allclose(sq(B=B, C=B), b.multiply(b).toarray())
    v = B.slice((slice(0, 3), slice(None)))
    with pytest.raises(TensorJitError, match="bound to two operands"):
        sq(B=v, C=v)


def test_out_sharing_memory_with_an_operand():
    """out= the very array an operand reads (or a view of it) gives numpy's
    answer, as numpy's own out= does: the kernel writes a copy first."""
    a = sp.random(20, 20, density=0.3, format="csr", random_state=3)
    x = RNG.random(20)
    want = a @ x
    k = tensorjit.compile("y(i) = A(i,j) * x(j)")
    for _ in range(2):                      # the second call takes the fast path
        xx = x.copy()
        got = k(A=a, x=xx, out=xx)
        assert got is xx
        np.testing.assert_allclose(xx, want, rtol=1e-12)
    m = RNG.random((6, 6))
    want = m[:, ::-1] + 1.0
    s = tensorjit.compile("B(i,j) = A(i,j) + 1")
    mm = m.copy()
    s(A=mm[:, ::-1], out=mm)
    np.testing.assert_allclose(mm, want, rtol=1e-12)
    acc = tensorjit.compile("y(i) += A(i,j) * x(j)")
    xx = x.copy()
    acc(A=a, x=xx, out=xx)
    np.testing.assert_allclose(xx, x + a @ x, rtol=1e-12)


def test_format_errors_name_the_tensor():
    with pytest.raises(TensorJitError, match="tensor A: level 1 has extent 257"):
        tensorjit.tensor(np.zeros((1, 257)), "A",
                         format="(i,j) -> (i : dense, j : compressed), posWidth = 8, crdWidth = 8")


def test_coo_over_dense_levels_stores_one_fiber_per_tuple(tmp_path):
    """`uqd` and blocked COO `uqdd`: entries that share (i, j) (or a block)
    share one dense fiber (block), so kernels see every value. Packing used
    to give each entry its own fiber and kernels read the first only."""
    m = np.zeros((4, 4))
    m[1, 0], m[1, 1] = 0.5, 2.0
    x = np.array([1.0, 10.0, 100.0, 1000.0])
    t = tensorjit.tensor(m, "A", format="uqdd:0/2,1/2,0%2,1%2")
    a = t.arrays()
    np.testing.assert_array_equal(a["crd"][0], [0])     # one block, (0, 0)
    np.testing.assert_array_equal(a["vals"], [0, 0, 0.5, 2.0])
    y = tensorjit.compile("y(i) = A(i,j) * x(j)")(A=t, x=x)
    np.testing.assert_array_equal(y, [0, 20.5, 0, 0])
    assert tensorjit.compile("s = A(i,j)")(A=t) == 2.5
    d = RNG.random((5, 6, 7))
    d[d < 0.7] = 0
    d[0, 1, 0], d[0, 1, 2] = 1.0, 2.0                    # two k in one (i, j)
    c = RNG.random(7)
    for fmt in ("uqd", "uqs", "ucs", "wzd", "uqo", "uqs:1,2,0"):
        b = tensorjit.tensor(d, "B", format=fmt)
        if fmt == "uqd":
            assert len(b.arrays()["crd"][1]) == np.count_nonzero(d.any(axis=2))
        got = tensorjit.compile("A(i,j) = B(i,j,k) * c(k)")(B=b, c=c)
        np.testing.assert_allclose(got, d @ c, rtol=1e-12, err_msg=fmt)
        s = tensorjit.compile("s = B(i,j,k)")(B=b)
        np.testing.assert_allclose(s, d.sum(), rtol=1e-12, err_msg=fmt)
    # `uc` keeps duplicates (nothing below the run): the last value does
    # not overwrite the first.
    mtx = tmp_path / "dup.mtx"
    mtx.write_text("%%MatrixMarket matrix coordinate real general\n"
                   "3 3 4\n1 1 1\n1 1 2\n2 3 4\n2 3 8\n")
    u = tensorjit.read(str(mtx), format="uc")
    assert u.nnz == 4
    np.testing.assert_array_equal(u.arrays()["vals"], [1, 2, 4, 8])
    u.rename("U")
    assert tensorjit.compile("s = U(i,j)")(U=u) == 15.0


def test_bsr_tensors_and_kernels():
    """BSR in both spellings: storage is scipy's bsr_matrix (same arrays),
    SpMV and SpMM over it match numpy, and unaligned extents pad."""
    d = np.zeros((8, 12))
    d[0:2, 3:6] = RNG.random((2, 3))
    d[6:8, 0:3] = RNG.random((2, 3))
    d[5, 11] = 7.0
    mlir = ("(i,j) -> (i floordiv 2 : dense, j floordiv 3 : compressed, "
            "i mod 2 : dense, j mod 3 : dense)")
    t = tensorjit.tensor(d, "A", format=mlir)
    assert t.format == "dsdd:0/2,1/3,0%2,1%3"
    assert t.shape == (8, 12)
    np.testing.assert_array_equal(t.to_numpy(), d)
    m = t.to_scipy()
    want = sp.bsr_matrix(d, blocksize=(2, 3))
    want.sort_indices()
    assert isinstance(m, sp.bsr_matrix)
    np.testing.assert_array_equal(m.indptr, want.indptr)
    np.testing.assert_array_equal(m.indices, want.indices)
    np.testing.assert_array_equal(m.data, want.data)
    x, b = RNG.random(12), RNG.random((12, 5))
    y = tensorjit.compile("y(i) = A(i,j) * x(j)", formats={"A": mlir})(A=t, x=x)
    np.testing.assert_allclose(y, d @ x, rtol=1e-12)
    c = tensorjit.compile("C(i,k) = A(i,j) * B(j,k)", formats={"A": mlir})(A=t, B=b)
    np.testing.assert_allclose(c, d @ b, rtol=1e-12)
    u = tensorjit.tensor(d[:7, :11], "A", format=mlir)   # padded: no bsr_matrix view
    assert isinstance(u.to_scipy(), sp.csr_matrix)
    np.testing.assert_allclose(tensorjit.compile("y(i) = A(i,j) * x(j)")(A=u, x=x[:11]),
                               d[:7, :11] @ x[:11], rtol=1e-12)


def test_arrays_give_every_level_of_a_blocked_tensor():
    """arrays() lists the levels, not the dims: a 2:4 tensor's coordinates
    are on level 2 of a matrix, and were left out (so they could not be
    wrapped back). By hand: rows [1 0 2 0 | 0 0 0 3], [0 0 0 0 | 5 6 0 0];
    a block with fewer than 2 nonzeros fills the smallest free slots."""
    d = np.array([[1.0, 0, 2, 0, 0, 0, 0, 3], [0, 0, 0, 0, 5, 6, 0, 0]])
    t = tensorjit.tensor(d, "A", format="ddn2:0,1/4,1%4")
    a = t.arrays()
    np.testing.assert_array_equal(a["crd"][2], [0, 2, 0, 3, 0, 1, 0, 1])
    np.testing.assert_array_equal(a["vals"], [1, 2, 0, 3, 0, 0, 5, 6])
    w = tensorjit.Tensor.wrap("A", a["vals"], t.shape, t.format, crd=a["crd"])
    x = np.array([1.0, 10, 100, 1000, 1e4, 1e5, 1e6, 1e7])
    np.testing.assert_array_equal(tensorjit.compile("y(i) = A(i,j) * x(j)")(A=w, x=x),
                                  [201 + 3e7, 5e4 + 6e5])
    b = tensorjit.tensor(d, "B", format="dssd:0/2,1/2,0%2,1%2")   # a compressed mod level
    assert sorted(b.arrays()["crd"]) == [1, 2]
    np.testing.assert_array_equal(b.arrays()["crd"][2], [0, 0, 1, 0])


def test_gil_is_released_while_a_kernel_runs():
    """Another Python thread keeps running during a long kernel: the
    longest pause it sees is much shorter than the kernel."""
    import time
    n = 1500
    a, b = RNG.random((n, n)), RNG.random((n, n))
    k = tensorjit.compile("C(i,j) = A(i,k) * B(k,j)", nthreads=1)
    k(A=a, B=b)   # compile first
    span = []

    def run():
        t0 = time.perf_counter()
        k(A=a, B=b)
        span.append(time.perf_counter() - t0)

    worker = threading.Thread(target=run)
    last, gap = time.perf_counter(), 0.0
    worker.start()
    while worker.is_alive():
        now = time.perf_counter()
        gap, last = max(gap, now - last), now
    worker.join()
    assert span[0] > 0.02, "the kernel was too short to tell (%.3f s)" % span[0]
    assert gap < span[0] / 2, "a pause of %.3f s during a %.3f s kernel" % (gap, span[0])


def test_compute_rewrites_a_sparse_result_in_place():
    a, b = sparse(30, 20, 0.2, seed=30), sparse(30, 20, 0.2, seed=31)
    mul = tensorjit.compile("C(i,j) = A(i,j) * B(i,j)", formats={"C": "ds"})
    c = mul(A=a, B=b)
    data, indices = c.data, c.indices
    a.data *= 3                                 # same sparsity, new values
    assert mul.compute(c, A=a, B=b) is c
    assert c.data is data and c.indices is indices
    np.testing.assert_allclose(c.toarray(), a.multiply(b).toarray(), rtol=1e-12)
    with pytest.raises(TensorJitError, match="compute needs a sparse result"):
        mul.compute(a, A=a, B=b)


def test_coo_and_csc_inputs_are_zero_copy():
    d = RNG.random((6, 5))
    d[d < 0.5] = 0
    coo = sp.coo_matrix(sp.csr_matrix(d))       # rows sorted, then columns
    csc = sp.csc_matrix(d)
    k = tensorjit.compile("y(i) = A(i,j) * x(j)")
    x = RNG.random(5)
    for m in (coo, csc):
        np.testing.assert_allclose(k(A=m, x=x), d @ x, rtol=1e-12)
        assert np.shares_memory(k._inputs["A"][2].arrays()["vals"], m.data)


def test_semiring_min_plus_and_defs():
    """min.plus SpMV: min over A's stored entries of A(i,j) + x(j) (+inf for
    an empty row), by numpy; a -def operator inlined."""
    a = sparse(40, 30, density=0.15, seed=11).tocsr()
    a[3, :] = 0
    a.eliminate_zeros()
    x = RNG.random(30)
    k = tensorjit.compile("y(i) = A(i,j) * x(j)", semiring="min.plus")
    want = np.full(40, np.inf)
    coo = a.tocoo()
    for i, j, v in zip(coo.row, coo.col, coo.data):
        want[i] = min(want[i], v + x[j])
    np.testing.assert_array_equal(k(A=a, x=x), want)
    relu = tensorjit.compile("y(i) = relu(A(i,j) - 0.5) * x(j)", defs="relu(v) = max(v, 0)")
    d = a.toarray()
    np.testing.assert_allclose(relu(A=a, x=x), np.where(d != 0, np.maximum(d - 0.5, 0), 0) @ x,
                               rtol=1e-12)
    with pytest.raises(TensorJitError, match="unknown semiring"):
        tensorjit.compile("y(i) = A(i,j) * x(j)", semiring="min.foo")(A=a, x=x)


# ---- repeated calls: the call plan (kernel.py, _Plan) ---------------------

def test_repeated_calls_keep_earlier_results():
    """Results the caller still holds are never reused for a later call;
    each is right for the values of its own call."""
    k = tensorjit.compile("y(i) = A(i,j) * x(j)")
    a, x = sparse(50, 40, seed=40), RNG.random(40)
    held, want = [], []
    for r in range(6):
        a.data[:] = RNG.random(a.nnz)      # in place: the plan stays
        x[r] = -3.0
        held.append(k(A=a, x=x))
        want.append(a @ x)
    for got, w in zip(held, want):
        np.testing.assert_allclose(got, w, rtol=1e-12)
    for i in range(len(held)):
        for j in range(i):
            assert not np.shares_memory(held[i], held[j])


def test_a_dropped_result_is_reused_and_reshaping_it_does_not_leak():
    k = tensorjit.compile("y(i) = A(i,j) * x(j)")
    a, x = sparse(30, 30, seed=41), RNG.random(30)
    k(A=a, x=x)
    y = k(A=a, x=x)
    ptr = y.__array_interface__["data"][0]
    y.shape = (5, 6)                        # the caller's own view
    y.flags.writeable = False
    del y
    y2 = k(A=a, x=x)
    assert y2.__array_interface__["data"][0] == ptr   # the pool's array, written again
    assert y2.shape == (30,) and y2.flags.writeable
    np.testing.assert_allclose(y2, a @ x, rtol=1e-12)


def test_changed_buffers_shapes_and_objects_are_wrapped_again():
    """Whatever changes what the wrapped tensor would describe (a new
    array object in the matrix, an input reshaped in place, a new array of
    the same shape) makes the call wrap (and validate) again."""
    k = tensorjit.compile("y(i) = A(i,j) * x(j)")
    a, x = sparse(20, 20, 0.3, seed=42), RNG.random(20)
    k(A=a, x=x)
    k(A=a, x=x)
    a.data = RNG.random(a.nnz)              # a new array in the same matrix
    np.testing.assert_allclose(k(A=a, x=x), a @ x, rtol=1e-12)
    x2 = RNG.random(20)
    np.testing.assert_allclose(k(A=a, x=x2), a @ x2, rtol=1e-12)
    m = RNG.random((4, 5))
    v = RNG.random(5)
    kd = tensorjit.compile("y(i) = M(i,j) * v(j)")
    np.testing.assert_allclose(kd(M=m, v=v), m @ v, rtol=1e-12)
    m.shape = (5, 4)                        # in place: same buffer, new extents
    np.testing.assert_allclose(kd(M=m, v=v[:4].copy()), m @ v[:4], rtol=1e-12)
    a.indices = a.indices.copy()
    a.indices[0] = 99                       # a new, malformed array: validated again
    with pytest.raises(TensorJitError, match="out of range"):
        k(A=a, x=x)


def test_out_and_large_results_on_the_repeated_path(monkeypatch):
    k = tensorjit.compile("y(i) += A(i,j) * x(j)")
    a, x = sparse(40, 40, seed=43), RNG.random(40)
    y1, y2 = np.zeros(40), np.ones(40)
    for _ in range(3):                      # two out arrays in turn
        k(A=a, x=x, out=y1)
        k(A=a, x=x, out=y2)
    np.testing.assert_allclose(y1, 3 * (a @ x), rtol=1e-12)
    np.testing.assert_allclose(y2, 1 + 3 * (a @ x), rtol=1e-12)
    for _ in range(3):                      # += without out= starts from zeros
        np.testing.assert_allclose(k(A=a, x=x), a @ x, rtol=1e-12)
    monkeypatch.setattr(tensorjit.kernel, "POOL_BYTES", 0)   # nothing pooled
    k2 = tensorjit.compile("y(i) = A(i,j) * x(j)")
    got = [k2(A=a, x=x) for _ in range(3)]
    for g in got:
        np.testing.assert_allclose(g, a @ x, rtol=1e-12)
    assert not k2._plan.pool


def test_threads_share_one_plan():
    """Threads calling one kernel on the same operands at once: every
    result right, no two results in the same memory."""
    k = tensorjit.compile("y(i) = A(i,j) * x(j)")
    a, x = sparse(400, 400, 0.05, seed=44), RNG.random(400)
    want = a @ x
    k(A=a, x=x)
    held = [[] for _ in range(4)]

    def work(i):
        for _ in range(30):
            held[i].append(k(A=a, x=x))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    flat = [y for h in held for y in h]
    for y in flat:
        np.testing.assert_allclose(y, want, rtol=1e-12)
    ptrs = [y.__array_interface__["data"][0] for y in flat]
    assert len(set(ptrs)) == len(ptrs)


# ---- the rest of the surface: stages, printing, files, COO out, errors ----

def test_stages_for_given_operands_without_running():
    k = tensorjit.compile("y(i) = A(i,j) * x(j)", formats={"A": "ds"})
    a = sparse(6, 5, seed=50)
    c = k.source("c", A=a, x=np.ones(5))
    assert "A1_pos" in c and "A1_crd" in c          # CSR loops over pos/crd
    assert k.cin() == "forall(i, forall(j, y(i) += A(i,j) * x(j)))\n"
    with pytest.raises(ValueError, match="no stage 'cee'.*llvm-opt"):
        k.source("cee")
    html = k._repr_html_()
    assert "<pre>" in html and "A1_crd" in html


def test_tensor_printing_and_jupyter():
    a = sp.csr_matrix(np.array([[0, 2.5, 0], [1.0, 0, 0]]))
    t = tensorjit.tensor(a, "A")
    assert str(t) == "A: f64 2x3 ds nnz=2\n  (0,1) 2.5\n  (1,0) 1"
    assert t.listing(1) == "A: f64 2x3 ds nnz=2\n  (0,1) 2.5\n  ... (1 more)\n"
    assert "(0,1) 2.5" in t._repr_html_() and "&lt;tensorjit.Tensor A: 2x3" in t._repr_html_()


def test_read_with_a_dtype_and_a_path_object(tmp_path):
    path = tmp_path / "i.mtx"
    path.write_text("%%MatrixMarket matrix coordinate integer general\n2 3 2\n"
                    "1 1 4503599627370497\n2 3 -4\n")
    t = tensorjit.read(path, dtype=np.int64)
    assert t.dtype == np.int64 and t.shape == (2, 3)
    np.testing.assert_array_equal(t.to_numpy(), np.array([[2 ** 52 + 1, 0, 0], [0, 0, -4]]))
    assert tensorjit.read(str(path)).dtype == np.float64
    assert tensorjit.read(path, dtype=np.int8).dtype == np.int8
    with pytest.raises(TensorJitError, match="cannot open"):
        tensorjit.read(tmp_path / "none.mtx")


def test_read_int64_above_2_53_exactly(tmp_path):
    """Integer values are read as integers (no double in between): exact
    above 2^53, also mirrored by a skew-symmetric file and in a .tns."""
    big = 2 ** 53 + 1
    path = tmp_path / "big.mtx"
    path.write_text("%%MatrixMarket matrix coordinate integer skew-symmetric\n2 2 1\n"
                    + "2 1 %d\n" % big)
    d = tensorjit.read(path, dtype=np.int64).to_numpy()
    assert int(d[1, 0]) == big and int(d[0, 1]) == -big
    tns = tmp_path / "big.tns"
    tns.write_text("1 2 %d\n2 1 -9223372036854775807\n3 3 2.6\n" % big)
    t = tensorjit.read(tns, dtype=np.int64).to_numpy()
    assert int(t[0, 1]) == big and int(t[1, 0]) == -2 ** 63 + 1 and int(t[2, 2]) == 3
    b = tensorjit.read(tns, dtype=np.bool_).to_numpy()
    assert b[0, 1] and b[1, 0] and b[2, 2] and not b[0, 0]


def test_coo_results_are_scipy_views():
    a = sparse(20, 15, 0.3, kind="coo", seed=51)
    b = sparse(20, 15, 0.3, kind="coo", seed=52)
    mul = tensorjit.compile("C(i,j) = A(i,j) * B(i,j)", formats={"C": "uq"})
    c = mul(A=a, B=b)
    assert sp.isspmatrix_coo(c)
    np.testing.assert_allclose(c.toarray(), a.multiply(b).toarray(), rtol=1e-12)
    owner = tensorjit.kernel._owner(c)
    assert owner is not None and np.shares_memory(owner.arrays()["vals"], c.data)


def test_bad_operands_raise_clear_errors():
    k = tensorjit.compile("y(i) = A(i,j) * x(j)")
    a, x = sparse(10, 8, seed=53), np.ones(8)
    with pytest.raises(TensorJitError, match="'z' is not a tensor of .* \\(its tensors: A, x\\)"):
        k(A=a, x=x, z=x)
    with pytest.raises(TensorJitError, match="unknown tensor 'x'"):
        k(A=a)
    with pytest.raises(TypeError, match="complex128 are not supported"):
        k(A=a.astype(np.complex128), x=x)
    with pytest.raises(TypeError, match="<U5 are not supported"):
        k(A="hello", x=x)
    with pytest.raises(TensorJitError, match="out has shape \\(3,\\), the result \\(10,\\)"):
        k(A=a, x=x, out=np.zeros(3))
    with pytest.raises(TensorJitError, match="output y is f32 but the expression is f64"):
        k(A=a, x=x, out=np.zeros(10, np.float32))
    with pytest.raises(TensorJitError, match="dtype mix f64 \\(A\\) and i32 \\(x\\)"):
        k(A=a, x=x.astype(np.int32))
    with pytest.raises(TensorJitError, match="x has order 2 but is accessed with 1 index"):
        k(A=a, x=np.ones((8, 1)))
    with pytest.raises(TypeError, match="unknown option 'bogus'"):
        tensorjit.compile("y(i) = A(i,j) * x(j)", bogus=1)
    with pytest.raises(TensorJitError, match="bad level letter 'x'"):
        tensorjit.compile("y(i) = A(i,j) * x(j)", formats={"A": "xx"})(A=a, x=x)
    with pytest.raises(TensorJitError, match="reorder: unknown index 'q'"):
        tensorjit.compile("y(i) = A(i,j) * x(j)", schedule="reorder(q)")(A=a, x=x)


def test_trusted_wrapping_skips_the_content_check():
    """Well-formed arrays wrapped trusted give the same results; the check
    that trusted skips is the one that finds an unsorted row."""
    a, x = sparse(30, 20, seed=54), RNG.random(20)
    k = tensorjit.compile("y(i) = A(i,j) * x(j)")
    np.testing.assert_allclose(k(A=tensorjit.tensor(a, "A", trusted=True), x=x), a @ x,
                               rtol=1e-12)
    bad = sp.csr_matrix((np.ones(2), np.array([2, 0]), np.array([0, 2])), shape=(1, 3))
    with pytest.raises(TensorJitError, match="crd"):
        tensorjit.Tensor.wrap("A", bad.data, bad.shape, "ds", pos={1: bad.indptr},
                              crd={1: bad.indices})
    t = tensorjit.Tensor.wrap("A", bad.data, bad.shape, "ds", pos={1: bad.indptr},
                              crd={1: bad.indices}, trusted=True)
    assert t.nnz == 2


def test_out_strided_and_sparse():
    """out= a strided numpy view (written through a copy, then copied
    back) and out= a scipy matrix (it takes the result's arrays)."""
    a, x = sparse(10, 8, 0.3, seed=60), RNG.random(8)
    big = np.full(20, 7.0)
    out = big[::2]
    assert tensorjit.compile("y(i) = A(i,j) * x(j)")(A=a, x=x, out=out) is out
    np.testing.assert_allclose(out, a @ x, rtol=1e-12)
    assert (big[1::2] == 7.0).all()
    big[::2] = 1.0
    tensorjit.compile("y(i) += A(i,j) * x(j)")(A=a, x=x, out=out)
    np.testing.assert_allclose(big[::2], 1.0 + a @ x, rtol=1e-12)
    mul = tensorjit.compile("C(i,j) = A(i,j) * B(i,j)")
    for kind in ("csr", "csc", "coo"):
        c = sp.csr_matrix((10, 8)).asformat(kind)   # empty: no room, new arrays
        assert mul(A=a, B=a, out=c) is c
        assert c.format == kind
        np.testing.assert_allclose(c.toarray(), a.multiply(a).toarray(), rtol=1e-12)
        np.testing.assert_allclose((c - a.multiply(a)).toarray(), 0, atol=1e-12)
    with pytest.raises(TensorJitError, match="out has shape \\(3, 8\\)"):
        mul(A=a, B=a, out=sp.csr_matrix((3, 8)))
    acc = tensorjit.compile("C(i,j) += A(i,j) * B(i,j)")
    c0 = sp.random(10, 8, density=0.2, format="csr", random_state=5)
    c = c0.copy()
    assert acc(A=a, B=a, out=c) is c   # += into a CSR: the union of the patterns
    np.testing.assert_allclose(c.toarray(), (c0 + a.multiply(a)).toarray(), rtol=1e-12)
    assert c.nnz == (abs(c0) + abs(a)).nnz


def test_a_0d_array_is_a_scalar_changed_in_place():
    """A scalar that changes between calls: a 0-d array assigned in place is
    read by the next call without re-wrapping (a Python float is wrapped
    anew on every call)."""
    k = tensorjit.compile("y(i) = a * x(i) + z(i)")
    a, x, z = np.array(2.0), RNG.random(6), RNG.random(6)
    np.testing.assert_allclose(k(a=a, x=x, z=z), 2.0 * x + z, rtol=1e-12)
    ta = k._inputs["a"][2]
    a[()] = -3.5
    np.testing.assert_allclose(k(a=a, x=x, z=z), -3.5 * x + z, rtol=1e-12)
    assert k._inputs["a"][2] is ta
    np.testing.assert_allclose(k(a=0.25, x=x, z=z), 0.25 * x + z, rtol=1e-12)


def pruned_2_4(n, m, seed):
    """An n x m matrix keeping the 2 largest of every 4 along each row."""
    w = np.random.default_rng(seed).random((n, m)) - 0.5
    for b in range(0, m, 4):
        blk = w[:, b:b + 4]
        drop = np.argsort(np.abs(blk), axis=1)[:, :max(blk.shape[1] - 2, 0)]
        np.put_along_axis(blk, drop, 0.0, axis=1)
    return w


def test_2_4_spmm_and_spmv():
    w = pruned_2_4(24, 30, 3)   # 30: the last block is 2 wide
    b = RNG.random((30, 8))
    x = RNG.random(30)
    mlir = "(i, j) -> (i : dense, j floordiv 4 : dense, j mod 4 : structured[2, 4])"
    for spec in ("ddn2:0,1/4,1%4", mlir):
        k = tensorjit.compile("C(i,k) = A(i,j) * B(j,k)", formats={"A": spec})
        np.testing.assert_allclose(k(A=w, B=b), w @ b, rtol=1e-12, atol=1e-12)
    k = tensorjit.compile("y(i) = A(i,j) * x(j)", formats={"A": "ddn2:0,1/4,1%4"})
    np.testing.assert_allclose(k(A=w, x=x), w @ x, rtol=1e-12, atol=1e-12)
    w[5, 8:11] = 1.0   # three nonzeros in the block at row 5, columns 8..11
    with pytest.raises(TensorJitError, match=r"block at \(5, 8\.\.11\) holds 3 nonzeros"):
        k(A=w, x=x)


def test_narrow_index_widths():
    a = sparse(40, 300, 0.05, seed=12)   # columns past 255: 16-bit coordinates
    x = RNG.random(300)
    spec = "(i, j) -> (i : dense, j : compressed), posWidth = 16, crdWidth = 16"
    k = tensorjit.compile("y(i) = A(i,j) * x(j)", formats={"A": spec})
    np.testing.assert_allclose(k(A=a, x=x), a @ x, rtol=1e-12)
    t = tensorjit.tensor(a, name="A").convert(spec)
    assert t.arrays()["crd"][1].dtype == np.uint16 and t.arrays()["crd"][1].max() >= 256
    assert t.arrays()["pos"][1].dtype == np.uint16
    k8 = tensorjit.compile("y(i) = A(i,j) * x(j)",
                           formats={"A": "(i, j) -> (i : dense, j : compressed), crdWidth = 8"})
    with pytest.raises(TensorJitError, match="coordinates up to 299 do not fit crdWidth 8"):
        k8(A=a, x=x)


@pytest.mark.parametrize("fmt", ["ds", "ds:1,0", "ss", "uq", "dd"])
@pytest.mark.parametrize("rows,cols", [((1, 17, 2), (0, 23, 3)), ((5, 6, 1), (2, 20, 1)),
                                       ((29, 30, 1), (0, 40, 1))])
def test_views_are_read_in_place(fmt, rows, cols):
    """Slices (dimSlices) of a stored tensor as kernel inputs, against
    numpy's own slicing of the same matrix."""
    a = sparse(30, 40, density=0.3, seed=21).toarray()
    base = tensorjit.Tensor.from_numpy(a, "A").convert(fmt)
    key = (slice(*rows), slice(*cols))
    v = base[key]
    assert v.is_view and v.shape == a[key].shape
    assert v.format.startswith(fmt) and "[" in v.format
    np.testing.assert_array_equal(v.to_numpy(), a[key])
    x = RNG.random(v.shape[1])
    k = tensorjit.compile("y(i) = A(i,j) * x(j)")
    np.testing.assert_allclose(k(A=v, x=x), a[key] @ x, rtol=1e-12, atol=1e-12)
    b = RNG.random((v.shape[1], 3))
    k2 = tensorjit.compile("C(i,k) = A(i,j) * B(j,k)")
    np.testing.assert_allclose(k2(A=v, B=b), a[key] @ b, rtol=1e-12, atol=1e-12)


def test_view_keeps_base_alive_and_refuses_writes():
    a = np.arange(12.0).reshape(3, 4)
    v = tensorjit.Tensor.from_numpy(a, "A").convert("ds")[1:3, ::2]
    np.testing.assert_array_equal(v.to_numpy(), [[4.0, 6.0], [8.0, 10.0]])   # by hand
    with pytest.raises(TensorJitError, match="is a view"):
        v.arrays()
    with pytest.raises(ValueError, match="step must be >= 1"):
        v[::-1, :]


def test_format_struct_matches_the_library():
    """tj_format_parse writes a whole tj_format: a Format shorter than the C
    struct would be overrun (the guard bytes after it must stay as set)."""
    import ctypes
    from tensorjit import _lib
    size = ctypes.sizeof(_lib.Format)
    buf = (ctypes.c_ubyte * (size + 512))(*([0xAA] * (size + 512)))
    fmt = ctypes.cast(buf, ctypes.POINTER(_lib.Format))
    assert _lib.lib.tj_format_parse(b"dsdd:0/4,1/4,0%4,1%4[1:5:1,2:6:1]", fmt) == 0
    assert all(b == 0xAA for b in buf[size:])
    assert fmt.contents.levels == b"dsdd"


def _two_of_four(rng, m, n):
    """A dense m x n matrix with at most 2 nonzeros in each 4-column block."""
    d = np.zeros((m, n))
    for i in range(m):
        for b0 in range(0, n, 4):
            w = min(4, n - b0)
            k = rng.integers(1, min(2, w) + 1)
            d[i, b0 + rng.choice(w, k, replace=False)] = rng.standard_normal(k)
    return d


@pytest.mark.parametrize("cut", [(0, 0, 24), (4, 0, 16), (1, 1, 13), (2, 2, 9)])
def test_two_structured_views_in_functions_and_over_rows(cut):
    """Two 2:4 views in two terms: j used by both is summed over the whole
    right-hand side (the einsum rule), also where one term holds it inside
    a function; and the rows' index summed in both terms (review of the
    per-term index copies: both gave wrong values or failed)."""
    rng = np.random.default_rng(25)
    m, n, fmt = 12, 24, "ddn2:0,1/4,1%4"
    d1, d2 = _two_of_four(rng, m, n), _two_of_four(rng, m, n)
    a1 = tensorjit.tensor(sp.csr_matrix(d1), name="A", format=fmt)
    a2 = tensorjit.tensor(sp.csr_matrix(d2), name="A2", format=fmt)
    o1, o2, w = cut
    v, v2 = a1[0:m, o1:o1 + w], a2[0:m, o2:o2 + w]
    vd, v2d = d1[:, o1:o1 + w], d2[:, o2:o2 + w]
    x, z, u = np.arange(1.0, w + 1), np.linspace(-1, 2, w), rng.standard_normal(m)
    cases = [
        ("y(i) = V(i,j) * x(j) + max(V2(i,j) * z(j), 0)",
         vd @ x + np.maximum(v2d * z, 0).sum(1)),
        ("y(i) = max(V(i,j) * x(j), 0) + V2(i,j) * z(j)",
         np.maximum(vd * x, 0).sum(1) + v2d @ z),
        ("y(i) = V(i,j) * x(j) - abs(V2(i,j) * z(j))", vd @ x - np.abs(v2d * z).sum(1)),
        ("y(i) = V(i,j) * x(j) + V2(i,j) * z(j)", vd @ x + v2d @ z),
    ]
    for expr, want in cases:
        got = tensorjit.compile(expr)(V=v, V2=v2, x=x, z=z)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=expr)
    got = tensorjit.compile("z(j) = V(i,j) * u(i) + V2(i,j) * u(i)")(V=v, V2=v2, u=u)
    np.testing.assert_allclose(got, vd.T @ u + v2d.T @ u, rtol=1e-12, atol=1e-12)


def test_accumulate_into_wrapped_csr_leaves_callers_arrays_whole():
    """+= into a CSR output over scipy's arrays that must grow: the result
    is in the tensor, and the scipy matrix keeps its old contents whole (its
    indptr was rewritten over its old, shorter indices: toarray() read past
    them)."""
    a0 = sp.csr_matrix(np.array([[1.0, 0, 0], [0, 0, 2], [0, 0, 0]]))
    b = sp.csr_matrix(np.array([[0.0, 1, 0], [0, 0, 0], [1, 0, 0]]))
    c = sp.csr_matrix(np.eye(3))
    old = a0.toarray()
    at = tensorjit.tensor(a0, name="A", format="ds")
    k = tensorjit.compile("A(i,j) += B(i,k) * C(k,j)", formats={"A": "ds", "B": "ds", "C": "ds"})
    k(out=at, B=b, C=c)
    np.testing.assert_array_equal(at.to_numpy(), old + (b @ c).toarray())
    assert a0.indptr.tolist() == [0, 1, 2, 2]
    np.testing.assert_array_equal(a0.toarray(), old)


def _csr_with_duplicates(shuffle=False):
    """A 5 x 6 scipy CSR whose rows hold columns twice or three times, built
    by hand (scipy keeps them: not canonical), and its arrays; duplicates
    3 and -2 at (0, 2) sum to 1. shuffle: columns unsorted within rows."""
    rows = [[(2, 3.0), (2, -2.0), (4, 1.5)], [(0, 2.0), (0, 2.0), (0, 1.0)], [],
            [(1, -1.0), (5, 6.0), (5, -6.0), (5, 2.0)], [(3, 0.5), (3, 0.25)]]
    if shuffle:
        rows = [r[::-1] for r in rows]
    indptr = np.cumsum([0] + [len(r) for r in rows]).astype(np.int32)
    indices = np.array([c for r in rows for c, _ in r], dtype=np.int32)
    data = np.array([v for r in rows for _, v in r])
    m = sp.csr_matrix((data, indices, indptr), shape=(5, 6))
    assert not m.has_canonical_format
    return m, indptr, indices, data


@pytest.mark.parametrize("fmt", ["du", "dw"])
@pytest.mark.parametrize("nthreads", [1, 2])
def test_trailing_nonunique_levels_sum_duplicates(fmt, nthreads):
    """du / dw (a CSR whose rows repeat columns) in every kernel shape:
    duplicates stand for their sum, as in scipy (toarray sums them), also
    under nonlinear operators (squared or clamped after summing)."""
    m, indptr, indices, data = _csr_with_duplicates(shuffle=fmt == "dw")
    a = tensorjit.Tensor.wrap("A", data, m.shape, fmt, pos={1: indptr}, crd={1: indices})
    d = m.toarray()   # scipy's sum of the duplicates
    assert d[0, 2] == 1.0 and d[3, 5] == 2.0
    x, b = RNG.random(6), RNG.random((6, 3))
    c = sparse(5, 6, density=0.3, seed=23)
    opts = {"nthreads": nthreads}
    k = tensorjit.compile("y(i) = A(i,j) * x(j)", **opts)
    np.testing.assert_allclose(k(A=a, x=x), m @ x, rtol=1e-12)
    k = tensorjit.compile("C(i,k) = A(i,j) * B(j,k)", **opts)
    np.testing.assert_allclose(k(A=a, B=b), m @ b, rtol=1e-12)
    for out in (None, "ds", "du"):
        formats = {"E": out} if out else {}
        cases = [("E(i,j) = A(i,j) + B(i,j)", {"B": c}, d + c.toarray()),
                 ("E(i,j) = A(i,j) + B(i,j)", {"B": m}, 2 * d),
                 ("E(i,j) = A(i,j) * A(i,j)", {}, d * d),
                 ("E(i,j) = max(A(i,j), 0)", {}, np.maximum(d, 0)),
                 ("E(i,j) = A(i,j)", {}, d)]
        for expr, more, want in cases:
            got = tensorjit.compile(expr, formats=formats, **opts)(A=a, **more)
            if out == "du":
                got = got.convert("ds").to_scipy()
                assert got.has_canonical_format, expr
            got = got.toarray() if out else got
            np.testing.assert_allclose(got, want, rtol=1e-12, err_msg="%s into %s" % (expr, out))
    assert np.maximum(d, 0)[0, 2] == 1.0   # max(3 + -2, 0), not max(3, -2, 0)


def _rows_with_fibers(fmt):
    """A 5 x 6 matrix stored us / ws / ud: row 0 at three positions and row
    3 at two, each position owning a fiber of its own; column 2 of row 0
    in two fibers (3 and -2: sum 1) and column 5 of row 3 in both of its
    (6 and -4: sum 2). Returns the tensor and numpy's sum of all entries."""
    fibers = [(0, [(2, 3.0), (4, 1.5)]), (0, [(1, 0.5)]), (0, [(2, -2.0)]),
              (1, [(0, 2.0)]), (3, [(1, -1.0), (5, 6.0)]), (3, [(5, -4.0)])]
    if fmt == "ws":
        fibers = fibers[::-1]
    d = np.zeros((5, 6))
    for i, fib in fibers:
        for j, v in fib:
            d[i, j] += v
    pos0 = np.array([0, len(fibers)], dtype=np.int32)
    crd0 = np.array([i for i, _ in fibers], dtype=np.int32)
    if fmt == "ud":
        vals = np.zeros((len(fibers), 6))
        for p, (_, fib) in enumerate(fibers):
            for j, v in fib:
                vals[p, j] = v
        t = tensorjit.Tensor.wrap("A", vals.ravel(), (5, 6), fmt, pos={0: pos0}, crd={0: crd0})
        return t, d
    pos1 = np.cumsum([0] + [len(f) for _, f in fibers]).astype(np.int32)
    crd1 = np.array([j for _, f in fibers for j, _ in f], dtype=np.int32)
    vals = np.array([v for _, f in fibers for _, v in f])
    t = tensorjit.Tensor.wrap("A", vals, (5, 6), fmt, pos={0: pos0, 1: pos1},
                              crd={0: crd0, 1: crd1})
    return t, d


def _spmv_spmm_match(a, dense, cols, opts):
    """SpMV and SpMM over tensor a against dense (numpy or scipy) products."""
    x, b = RNG.random(dense.shape[1]), RNG.random((dense.shape[1], cols))
    np.testing.assert_allclose(tensorjit.compile("y(i) = A(i,j) * x(j)", **opts)(A=a, x=x),
                               dense @ x, rtol=1e-12)
    np.testing.assert_allclose(tensorjit.compile("C(i,k) = A(i,j) * B(j,k)", **opts)(A=a, B=b),
                               dense @ b, rtol=1e-12)


@pytest.mark.parametrize("fmt", ["us", "ws", "ud"])
@pytest.mark.parametrize("nthreads", [1, 2])
def test_nonunique_levels_over_fibers_sum_them(fmt, nthreads):
    """us / ws / ud (a row repeated at level 0, each position its own
    fiber) mean the sum of the fibers, against numpy: SpMV, SpMM, adds,
    nonlinear operators after summing, copies into dense, CSR and us, and
    conversions."""
    a, d = _rows_with_fibers(fmt)
    assert d[0, 2] == 1.0 and d[3, 5] == 2.0
    np.testing.assert_array_equal(a.to_numpy(), d)
    csr = a.convert("ds").to_scipy()
    assert csr.has_canonical_format
    np.testing.assert_array_equal(csr.toarray(), d)
    c = sparse(5, 6, density=0.3, seed=29)
    opts = {"nthreads": nthreads}
    _spmv_spmm_match(a, d, 3, opts)
    for out in (None, "ds", "us"):
        formats = {"E": out} if out else {}
        cases = [("E(i,j) = A(i,j) + B(i,j)", {"B": c}, d + c.toarray()),
                 ("E(i,j) = A(i,j) * A(i,j)", {}, d * d),
                 ("E(i,j) = max(A(i,j), 0)", {}, np.maximum(d, 0)),
                 ("E(i,j) = A(i,j)", {}, d)]
        for expr, more, want in cases:
            got = tensorjit.compile(expr, formats=formats, **opts)(A=a, **more)
            if out == "us":
                assert got.format == "us"
                crd = got.arrays()["crd"]
                assert np.all(np.diff(crd[0]) > 0), expr   # each row once
                got = got.to_numpy()
            elif out:
                got = got.toarray()   # a CSR output comes back as scipy's
            np.testing.assert_allclose(got, want, rtol=1e-12, err_msg="%s into %s" % (expr, out))
    assert np.maximum(d, 0)[0, 2] == 1.0   # max(3 + -2, 0), not max(3, 0)


def test_nonunique_output_stores_each_coordinate_once():
    """A du output holds unique, ascending columns per row (always valid du
    storage), its values the sums."""
    m, indptr, indices, data = _csr_with_duplicates()
    a = tensorjit.Tensor.wrap("A", data, m.shape, "du", pos={1: indptr}, crd={1: indices})
    e = tensorjit.compile("E(i,j) = A(i,j)", formats={"E": "du"})(A=a)
    assert e.format == "du"
    arr = e.arrays()
    ref = m.copy()
    ref.sum_duplicates()
    np.testing.assert_array_equal(arr["pos"][1], ref.indptr)
    np.testing.assert_array_equal(arr["crd"][1], ref.indices)
    np.testing.assert_allclose(arr["vals"], ref.data)


def _loose_with_gaps(m, seed):
    """scipy CSR m as MLIR may hand out a loose_compressed level ("dl"):
    rows' segments in shuffled order, a gap after each holding NaN values
    and out-of-range columns. Returns (pos, crd, vals), pos 2 per row."""
    rng = np.random.default_rng(seed)
    rows, pos, crd, vals = m.shape[0], [], [], []
    lohi = np.zeros(2 * rows, dtype=np.int32)
    for i in rng.permutation(rows):
        a, b = m.indptr[i], m.indptr[i + 1]
        lohi[2 * i], lohi[2 * i + 1] = len(crd), len(crd) + b - a
        crd += list(m.indices[a:b])
        vals += list(m.data[a:b])
        gap = int(rng.integers(0, 3))
        crd += [m.shape[1] + 7] * gap
        vals += [np.nan] * gap
    return lohi, np.array(crd, dtype=np.int32), np.array(vals)


@pytest.mark.parametrize("nthreads", [1, 2])
def test_wrapped_loose_arrays_with_gaps(nthreads, monkeypatch):
    """A wrapped "dl" tensor over arrays with gaps (NaN, bad columns) and
    segments out of order, read in place: values against scipy; a segment
    overlapping another is refused."""
    monkeypatch.setenv("TJ_PAR_MIN_WORK", "0")
    m = sparse(40, 30, density=0.15, seed=31)
    pos, crd, vals = _loose_with_gaps(m, 5)
    a = tensorjit.Tensor.wrap("A", vals, m.shape, "dl", pos={1: pos}, crd={1: crd})
    assert a.nnz == m.nnz and len(vals) > m.nnz
    np.testing.assert_array_equal(a.to_numpy(), m.toarray())
    assert a.arrays()["vals"].ctypes.data == vals.ctypes.data   # no copy
    c = sparse(40, 30, density=0.2, seed=32)
    opts = {"nthreads": nthreads}
    _spmv_spmm_match(a, m, 4, opts)
    got = tensorjit.compile("E(i,j) = A(i,j) + B(i,j)", formats={"E": "ds"}, **opts)(A=a, B=c)
    np.testing.assert_allclose(got.toarray(), (m + c).toarray(), rtol=1e-12)
    bt = sparse(30, 20, density=0.2, seed=33)
    got = tensorjit.compile("F(i,k) = A(i,j) * B(j,k)", formats={"F": "ds"}, **opts)(A=a, B=bt)
    np.testing.assert_allclose(got.toarray(), (m @ bt).toarray(), rtol=1e-12)
    rows = [i for i in range(40) if m.indptr[i + 1] > m.indptr[i]]
    bad = pos.copy()
    bad[2 * rows[1]], bad[2 * rows[1] + 1] = pos[2 * rows[0]], pos[2 * rows[0] + 1]
    with pytest.raises(TensorJitError, match="segments must not overlap"):
        tensorjit.Tensor.wrap("A", vals, m.shape, "dl", pos={1: bad}, crd={1: crd})

/* The LLVM backend: loop IR kernels built by hand with the constructors,
 * JIT-compiled and run on hand-filled tj_storage, each result compared with
 * the same computation in plain C. Covers dense loops, CSR SpMV in both
 * index widths and float types, appends that grow outputs, while-loop
 * co-iteration, workspaces and the failure path, scalar semantics, IR/asm
 * printing, a forced CPU, object code, and concurrent compiles. */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ir/loop_ir.h"
#include "jit/engine.h"
#include "runtime/abi.h"
#include "util/lir_build.h"
#include "util/storage_fixture.h"

/* ---- loop IR shorthands (the common ones are in util/lir_build.h) ---- */

static LirExpr *TO64(LirExpr *x) { return lir_cast(A, LT_I64, x); }

/* CALL RESERVE: operand op's array arr at level lvl holds need entries. */
static LirStmt *reserve(int op, int arr, int lvl, LirExpr *need) {
  LirStmt *c = lir_call(A, LH_RESERVE);
  c->u.call.operand = op;
  c->u.call.arr = arr;
  c->u.call.level = lvl;
  c->u.call.a = need;
  return c;
}

/* A kernel over operands shaped like ops[0..n), the first nout outputs. */
static LirKernel *kernel(const char *name, const tj_storage *const *ops, int n,
                         int nout) {
  LirKernel *k = lir_kernel(A, name);
  k->noperands = n;
  for (int i = 0; i < n; i++)
    k->operands[i] = (LirOperand){"t", ops[i]->order, ops[i]->dtype,
                                  ops[i]->pos_width, ops[i]->crd_width, i < nout};
  return k;
}

/* DECL v = init appended to *body; returns v. */
static LirVar *decl(LirKernel *k, LirStmt **body, const char *name, LirType t,
                    LirExpr *init) {
  LirVar *v = lir_var(A, k, name, t);
  lir_append(body, lir_decl(A, v, init));
  return v;
}

static LirVar *decl_field(LirKernel *k, LirStmt **body, const char *name,
                          int op, LirField f, int lvl) {
  LirExpr *x = lir_field(A, k, op, f, lvl);
  return decl(k, body, name, x->type, x);
}

static JitKernel compile(JitEngine *e, const LirKernel *k, const JitOptions *o) {
  Diag d;
  diag_init(&d);
  JitKernel jk;
  JitOptions def = {.opt_level = 3};
  ck_assert_msg(jit_compile(e, k, o ? o : &def, &jk, &d), "compile: %s", d.msg);
  ck_assert_ptr_nonnull(jk.fn);
  return jk;
}

/* ---- (1) dense vector sum ---- */

/* out[0] = sum_i x[i] */
static LirKernel *k_sum(const tj_storage *out, const tj_storage *x) {
  LirKernel *k = kernel("vsum", (const tj_storage *[]){out, x}, 2, 1);
  LirStmt *b = NULL;
  LirVar *ov = decl_field(k, &b, "out_vals", 0, LF_VALS, 0);
  LirVar *xv = decl_field(k, &b, "x_vals", 1, LF_VALS, 0);
  LirVar *n = decl_field(k, &b, "n", 1, LF_DIM, 0);
  LirVar *acc = decl(k, &b, "acc", LT_F64, NULL);
  LirVar *i = lir_var(A, k, "i", LT_I64);
  lir_append(&b, lir_for(A, i, I64(0), R(n), lir_update(A, acc, LOP_ADD, LD(xv, R(i)))));
  lir_append(&b, lir_store(A, R(ov), I64(0), R(acc)));
  k->body = b;
  return k;
}

START_TEST(test_dense_sum) {
  JitEngine *e = engine();
  tj_storage *out = fx_st_vec(TJ_F64, 1), *x = fx_st_vec(TJ_F64, 1001);
  double ref = 0;
  for (int i = 0; i < 1001; i++) {
    fx_val_set(x, i, i * 0.5 - 3);
    ref += i * 0.5 - 3;
  }
  JitKernel jk = compile(e, k_sum(out, x), NULL);
  tj_storage *ops[] = {out, x};
  ck_assert_int_eq(jk.fn(ops), 0);  /* a direct call works too */
  ck_assert_double_eq_tol(fx_val_get(out, 0), ref, 1e-9);
  x->dims[0] = 0;  /* empty loop */
  ck_assert_int_eq(jit_kernel_run(&jk, ops), 0);
  ck_assert_double_eq(fx_val_get(out, 0), 0.0);
  jit_kernel_release(e, &jk);
  /* Loop attributes become !llvm.loop hints (parallel is ignored here). */
  x->dims[0] = 1001;
  LirKernel *k = k_sum(out, x);
  LirStmt *loop = k->body;
  while (loop->kind != LS_FOR) loop = loop->next;
  loop->u.loop.at = (LoopAttrs){.parallel = true, .vec_width = 4, .unroll = 2};
  JitOptions o = {.opt_level = 3, .want_ir = true};
  jk = compile(e, k, &o);
  ck_assert_ptr_nonnull(strstr(jk.ir_before, "!\"llvm.loop.vectorize.width\", i32 4}"));
  ck_assert_ptr_nonnull(strstr(jk.ir_before, "!\"llvm.loop.unroll.count\", i32 2}"));
  ck_assert_int_eq(jit_kernel_run(&jk, ops), 0);
  ck_assert_double_eq_tol(fx_val_get(out, 0), ref, 1e-9);
  jit_kernel_release(e, &jk);
  fx_st_free(out);
  fx_st_free(x);
  jit_engine_free(e);
}
END_TEST

/* ---- (2) CSR SpMV ---- */

/* y(i) = sum_j A(i,j) * x(j), A in (dense, compressed):
 *   for i < m: acc = 0; for p in pos[i]..pos[i+1]: acc += vals[p]*x[crd[p]];
 *              y[i] = acc */
static LirKernel *k_spmv(const tj_storage *y, const tj_storage *a,
                         const tj_storage *x) {
  LirKernel *k = kernel("spmv", (const tj_storage *[]){y, a, x}, 3, 1);
  LirType vt = a->dtype == TJ_F32 ? LT_F32 : LT_F64;
  LirStmt *b = NULL;
  LirVar *yv = decl_field(k, &b, "y_vals", 0, LF_VALS, 0);
  LirVar *ap = decl_field(k, &b, "A2_pos", 1, LF_POS, 1);
  LirVar *ac = decl_field(k, &b, "A2_crd", 1, LF_CRD, 1);
  LirVar *av = decl_field(k, &b, "A_vals", 1, LF_VALS, 0);
  LirVar *xv = decl_field(k, &b, "x_vals", 2, LF_VALS, 0);
  LirVar *m = decl_field(k, &b, "m", 1, LF_DIM, 0);
  LirVar *i = lir_var(A, k, "i", LT_I64), *p = lir_var(A, k, "p", LT_I64);
  LirStmt *row = NULL;
  LirVar *acc = decl(k, &row, "acc", vt, NULL);
  LirStmt *inner = NULL;
  LirVar *j = decl(k, &inner, "j", LT_I64, TO64(LD(ac, R(p))));
  lir_append(&inner, lir_update(A, acc, LOP_ADD,
                                BIN(LOP_MUL, LD(av, R(p)), LD(xv, R(j)))));
  lir_append(&row, lir_for(A, p, TO64(LD(ap, R(i))),
                           TO64(LD(ap, BIN(LOP_ADD, R(i), I64(1)))), inner));
  lir_append(&row, lir_store(A, R(yv), R(i), R(acc)));
  lir_append(&b, lir_for(A, i, I64(0), R(m), row));
  k->body = b;
  return k;
}

static void spmv_ref(const tj_storage *a, const tj_storage *x, double *y) {
  int w = a->pos_width;
  for (int64_t i = 0; i < a->dims[0]; i++) {
    double acc = 0;
    for (int64_t p = fx_idx_get(a->levels[1].pos, w, i);
         p < fx_idx_get(a->levels[1].pos, w, i + 1); p++)
      acc += fx_val_get(a, p) * fx_val_get(x, fx_idx_get(a->levels[1].crd, w, p));
    y[i] = acc;
  }
}

static void check_spmv(JitKernel *jk, tj_storage *y, tj_storage *a,
                       tj_storage *x, double tol) {
  double *ref = calloc((size_t)a->dims[0], sizeof *ref);
  spmv_ref(a, x, ref);
  tj_storage *ops[] = {y, a, x};
  ck_assert_int_eq(jit_kernel_run(jk, ops), 0);
  for (int64_t i = 0; i < a->dims[0]; i++)
    ck_assert_msg(fabs(fx_val_get(y, i) - ref[i]) <= tol * (1 + fabs(ref[i])),
                  "y[%ld] = %g, expected %g", (long)i, fx_val_get(y, i), ref[i]);
  free(ref);
}

static const struct { int w, dtype; } spmv_cases[] = {
    {4, TJ_F64}, {8, TJ_F64}, {4, TJ_F32}, {8, TJ_F32}};

START_TEST(test_spmv) {
  int w = spmv_cases[_i].w, dt = spmv_cases[_i].dtype;
  JitEngine *e = engine();
  tj_storage *a = fx_st_csr(dt, w, 57, 43, 0.2);
  tj_storage *x = fx_st_vec(dt, 43), *y = fx_st_vec(dt, 57);
  for (int j = 0; j < 43; j++) fx_val_set(x, j, fx_rnd());
  JitKernel jk = compile(e, k_spmv(y, a, x), NULL);
  check_spmv(&jk, y, a, x, dt == TJ_F32 ? 1e-5 : 1e-12);
  jit_kernel_release(e, &jk);
  /* The same kernel without LLVM's vectorizers, at O0 and O1. */
  for (int lvl = 0; lvl <= 1; lvl++) {
    JitOptions o = {.opt_level = lvl, .no_llvm_vectorize = true};
    jk = compile(e, k_spmv(y, a, x), &o);
    check_spmv(&jk, y, a, x, dt == TJ_F32 ? 1e-5 : 1e-12);
    jit_kernel_release(e, &jk);
  }
  fx_st_free(a);
  fx_st_free(x);
  fx_st_free(y);
  jit_engine_free(e);
}
END_TEST

/* ---- (3) append into a sparse output ---- */

/* Compresses dense x into sparse z (one compressed level), growing crd and
 * vals by doubling through RESERVE and re-reading their bases:
 *   reserve pos 2; pos[0] = 0; nz = 0; cap = 0
 *   for i < n: if (x[i] != 0) { if (nz >= cap) { cap = 2*nz+1; reserve crd,
 *     vals cap; reload } crd[nz] = i; vals[nz] = x[i]; nz += 1 }
 *   pos[1] = nz; lengths = 2, nz, nz */
static LirKernel *k_compress(const tj_storage *z, const tj_storage *x) {
  LirKernel *k = kernel("compress", (const tj_storage *[]){z, x}, 2, 1);
  LirType it = z->crd_width == 4 ? LT_I32 : LT_I64;
  LirStmt *b = reserve(0, TJ_ARR_POS, 0, I64(2));
  LirVar *pos = decl_field(k, &b, "z_pos", 0, LF_POS, 0);
  lir_append(&b, lir_store(A, R(pos), I64(0), lir_const_int(A, it, 0)));
  LirVar *crd = decl_field(k, &b, "z_crd", 0, LF_CRD, 0);
  LirVar *zv = decl_field(k, &b, "z_vals", 0, LF_VALS, 0);
  LirVar *xv = decl_field(k, &b, "x_vals", 1, LF_VALS, 0);
  LirVar *n = decl_field(k, &b, "n", 1, LF_DIM, 0);
  LirVar *nz = decl(k, &b, "nz", LT_I64, NULL);
  LirVar *cap = decl(k, &b, "cap", LT_I64, NULL);
  LirVar *i = lir_var(A, k, "i", LT_I64);
  LirStmt *grow = lir_assign(A, cap, BIN(LOP_ADD, BIN(LOP_MUL, R(nz), I64(2)), I64(1)));
  for (int arr = TJ_ARR_CRD; arr <= TJ_ARR_VALS; arr++) {
    LirStmt *c = reserve(0, arr, 0, R(cap));
    lir_append(&grow, c);
  }
  lir_append(&grow, lir_assign(A, crd, lir_field(A, k, 0, LF_CRD, 0)));
  lir_append(&grow, lir_assign(A, zv, lir_field(A, k, 0, LF_VALS, 0)));
  LirStmt *then = lir_if(A, BIN(LOP_GE, R(nz), R(cap)), grow, NULL);
  lir_append(&then, lir_store(A, R(crd), R(nz), lir_cast(A, it, R(i))));
  lir_append(&then, lir_store(A, R(zv), R(nz), LD(xv, R(i))));
  lir_append(&then, lir_update(A, nz, LOP_ADD, I64(1)));
  LirStmt *body = lir_if(A, BIN(LOP_NE, LD(xv, R(i)), lir_const_fp(A, LT_F64, 0)),
                         then, NULL);
  lir_append(&b, lir_for(A, i, I64(0), R(n), body));
  lir_append(&b, lir_store(A, R(pos), I64(1), lir_cast(A, it, R(nz))));
  lir_append(&b, lir_setfield(A, 0, LF_POS_LEN, 0, I64(2)));
  lir_append(&b, lir_setfield(A, 0, LF_CRD_LEN, 0, R(nz)));
  lir_append(&b, lir_setfield(A, 0, LF_VALS_LEN, 0, R(nz)));
  k->body = b;
  return k;
}

START_TEST(test_append_grows) {
  int w = _i == 0 ? 4 : 8;
  JitEngine *e = engine();
  tj_storage *x = fx_st_vec(TJ_F64, 5000);
  int64_t nref = 0;
  for (int i = 0; i < 5000; i++)
    if (i % 3 != 1) fx_val_set(x, i, i + 0.25), nref++;
  tj_storage *z = fx_st_new(1, TJ_F64, w, w);
  z->dims[0] = z->levels[0].size = 5000;
  z->levels[0].kind = TJ_LVL_COMPRESSED;
  z->levels[0].crd = calloc(4, (size_t)w);  /* a small initial capacity */
  z->levels[0].crd_cap = 4;
  JitKernel jk = compile(e, k_compress(z, x), NULL);
  tj_storage *ops[] = {z, x};
  ck_assert_int_eq(jit_kernel_run(&jk, ops), 0);
  ck_assert_int_eq(z->levels[0].pos_len, 2);
  ck_assert_int_eq(z->levels[0].crd_len, nref);
  ck_assert_int_eq(z->vals_len, nref);
  ck_assert_int_ge(z->levels[0].crd_cap, nref);
  ck_assert_int_ge(z->vals_cap, nref);
  ck_assert_int_eq(fx_idx_get(z->levels[0].pos, w, 0), 0);
  ck_assert_int_eq(fx_idx_get(z->levels[0].pos, w, 1), nref);
  for (int64_t q = 0, i = 0; i < 5000; i++) {
    if (i % 3 == 1) continue;
    ck_assert_int_eq(fx_idx_get(z->levels[0].crd, w, q), i);
    ck_assert_double_eq(fx_val_get(z, q), i + 0.25);
    q++;
  }
  jit_kernel_release(e, &jk);
  fx_st_free(z);
  fx_st_free(x);
  jit_engine_free(e);
}
END_TEST

/* ---- (4) while-loop co-iteration: sparse vector add ---- */

/* Appends into z one entry (coordinate c, value v). */
static void append(LirStmt **s, LirVar *zc, LirVar *zv, LirVar *nz, LirExpr *c,
                   LirExpr *v) {
  lir_append(s, lir_store(A, R(zc), R(nz), c));
  lir_append(s, lir_store(A, R(zv), R(nz), v));
  lir_append(s, lir_update(A, nz, LOP_ADD, I64(1)));
}

/* z = a + b over sparse vectors (64-bit indices):
 *   while (pa < pa_end && pb < pb_end) {
 *     ia = a_crd[pa]; ib = b_crd[pb]; i = min(ia, ib);
 *     if (ia == i && ib == i) z += a+b; else if (ia == i) z += a; else z += b;
 *     pa += ia == i; pb += ib == i; }
 *   while (pa < pa_end) z += a ...; while (pb < pb_end) z += b ... */
static LirKernel *k_spadd(const tj_storage *z, const tj_storage *a) {
  LirKernel *k = kernel("spadd", (const tj_storage *[]){z, a, a}, 3, 1);
  LirStmt *b = NULL;
  LirVar *apos = decl_field(k, &b, "a_pos", 1, LF_POS, 0);
  LirVar *bpos = decl_field(k, &b, "b_pos", 2, LF_POS, 0);
  LirVar *pa = decl(k, &b, "pa", LT_I64, LD(apos, I64(0)));
  LirVar *pa_end = decl(k, &b, "pa_end", LT_I64, LD(apos, I64(1)));
  LirVar *pb = decl(k, &b, "pb", LT_I64, LD(bpos, I64(0)));
  LirVar *pb_end = decl(k, &b, "pb_end", LT_I64, LD(bpos, I64(1)));
  LirStmt *c = reserve(0, TJ_ARR_POS, 0, I64(2));
  lir_append(&b, c);
  LirExpr *need = BIN(LOP_ADD, BIN(LOP_SUB, R(pa_end), R(pa)),
                      BIN(LOP_SUB, R(pb_end), R(pb)));
  for (int arr = TJ_ARR_CRD; arr <= TJ_ARR_VALS; arr++) {
    c = reserve(0, arr, 0, need);
    lir_append(&b, c);
  }
  LirVar *zp = decl_field(k, &b, "z_pos", 0, LF_POS, 0);
  LirVar *zc = decl_field(k, &b, "z_crd", 0, LF_CRD, 0);
  LirVar *zv = decl_field(k, &b, "z_vals", 0, LF_VALS, 0);
  LirVar *ac = decl_field(k, &b, "a_crd", 1, LF_CRD, 0);
  LirVar *av = decl_field(k, &b, "a_vals", 1, LF_VALS, 0);
  LirVar *bc = decl_field(k, &b, "b_crd", 2, LF_CRD, 0);
  LirVar *bv = decl_field(k, &b, "b_vals", 2, LF_VALS, 0);
  LirVar *nz = decl(k, &b, "nz", LT_I64, NULL);
  LirStmt *w = NULL;
  LirVar *ia = decl(k, &w, "ia", LT_I64, LD(ac, R(pa)));
  LirVar *ib = decl(k, &w, "ib", LT_I64, LD(bc, R(pb)));
  LirVar *i = decl(k, &w, "i", LT_I64, BIN(LOP_MIN, R(ia), R(ib)));
  LirStmt *both = NULL, *only_a = NULL, *only_b = NULL;
  append(&both, zc, zv, nz, R(i), BIN(LOP_ADD, LD(av, R(pa)), LD(bv, R(pb))));
  append(&only_a, zc, zv, nz, R(i), LD(av, R(pa)));
  append(&only_b, zc, zv, nz, R(i), LD(bv, R(pb)));
  LirExpr *a_here = BIN(LOP_EQ, R(ia), R(i)), *b_here = BIN(LOP_EQ, R(ib), R(i));
  lir_append(&w, lir_if(A, BIN(LOP_AND, a_here, b_here), both,
                        lir_if(A, a_here, only_a, only_b)));
  lir_append(&w, lir_update(A, pa, LOP_ADD, TO64(a_here)));
  lir_append(&w, lir_update(A, pb, LOP_ADD, TO64(b_here)));
  lir_append(&b, lir_while(A, BIN(LOP_AND, BIN(LOP_LT, R(pa), R(pa_end)),
                                  BIN(LOP_LT, R(pb), R(pb_end))), w));
  LirStmt *ta = NULL, *tb = NULL;
  append(&ta, zc, zv, nz, LD(ac, R(pa)), LD(av, R(pa)));
  lir_append(&ta, lir_update(A, pa, LOP_ADD, I64(1)));
  append(&tb, zc, zv, nz, LD(bc, R(pb)), LD(bv, R(pb)));
  lir_append(&tb, lir_update(A, pb, LOP_ADD, I64(1)));
  lir_append(&b, lir_while(A, BIN(LOP_LT, R(pa), R(pa_end)), ta));
  lir_append(&b, lir_while(A, BIN(LOP_LT, R(pb), R(pb_end)), tb));
  lir_append(&b, lir_store(A, R(zp), I64(1), R(nz)));
  lir_append(&b, lir_setfield(A, 0, LF_POS_LEN, 0, I64(2)));
  lir_append(&b, lir_setfield(A, 0, LF_CRD_LEN, 0, R(nz)));
  lir_append(&b, lir_setfield(A, 0, LF_VALS_LEN, 0, R(nz)));
  k->body = b;
  return k;
}

START_TEST(test_coiterate) {
  JitEngine *e = engine();
  int64_t ac[] = {0, 2, 3, 7, 9}, bc[] = {1, 2, 5, 9, 10, 12};
  double av[] = {1, 2, 3, 4, 5}, bv[] = {10, 20, 30, 40, 50, 60};
  tj_storage *a = fx_st_spvec(13, ac, av, 5, 8), *bb = fx_st_spvec(13, bc, bv, 6, 8);
  tj_storage *z = fx_st_new(1, TJ_F64, 8, 8);
  z->dims[0] = z->levels[0].size = 13;
  z->levels[0].kind = TJ_LVL_COMPRESSED;
  JitKernel jk = compile(e, k_spadd(z, a), NULL);
  tj_storage *ops[] = {z, a, bb};
  ck_assert_int_eq(jit_kernel_run(&jk, ops), 0);
  int64_t zc[] = {0, 1, 2, 3, 5, 7, 9, 10, 12};
  double zv[] = {1, 10, 22, 3, 30, 4, 45, 50, 60};
  ck_assert_int_eq(z->levels[0].crd_len, 9);
  ck_assert_int_eq(fx_idx_get(z->levels[0].pos, 8, 1), 9);
  for (int q = 0; q < 9; q++) {
    ck_assert_int_eq(fx_idx_get(z->levels[0].crd, 8, q), zc[q]);
    ck_assert_double_eq(fx_val_get(z, q), zv[q]);
  }
  /* One side empty: the tail loop alone. */
  tj_storage *empty = fx_st_spvec(13, ac, av, 0, 8);
  tj_storage *ops2[] = {z, empty, bb};
  ck_assert_int_eq(jit_kernel_run(&jk, ops2), 0);
  ck_assert_int_eq(z->levels[0].crd_len, 6);
  ck_assert_double_eq(fx_val_get(z, 5), 60);
  jit_kernel_release(e, &jk);
  fx_st_free(a);
  fx_st_free(bb);
  fx_st_free(empty);
  fx_st_free(z);
  jit_engine_free(e);
}
END_TEST

/* ---- (5) workspace and the failure path ---- */

/* w = alloc(n doubles); w[i] = 2 x[i]; zero w[0..n/2); out[0] = sum w;
 * [reserve out vals INT64_MAX/2 -> fails before out[0] is written];
 * cleanup: free w. */
static LirKernel *k_workspace(const tj_storage *out, const tj_storage *x,
                              bool fail) {
  LirKernel *k = kernel("workspace", (const tj_storage *[]){out, x}, 2, 1);
  LirStmt *b = NULL;
  LirVar *ws = decl(k, &b, "w", LT_PTR_F64, NULL);
  LirVar *n = decl_field(k, &b, "n", 1, LF_DIM, 0);
  LirVar *xv = decl_field(k, &b, "x_vals", 1, LF_VALS, 0);
  LirStmt *c = lir_call(A, LH_ALLOC);
  c->u.call.ptr = ws;
  c->u.call.a = BIN(LOP_MUL, R(n), I64(8));
  lir_append(&b, c);
  LirVar *i = lir_var(A, k, "i", LT_I64);
  lir_append(&b, lir_for(A, i, I64(0), R(n),
                         lir_store(A, R(ws), R(i), BIN(LOP_MUL, LD(xv, R(i)),
                                                       lir_const_fp(A, LT_F64, 2)))));
  c = lir_call(A, LH_ZERO);
  c->u.call.ptr = ws;
  c->u.call.a = I64(0);
  c->u.call.b = BIN(LOP_DIV, R(n), I64(2));
  lir_append(&b, c);
  if (fail) {
    c = reserve(0, TJ_ARR_VALS, 0, I64(INT64_MAX / 2));
    lir_append(&b, c);
  }
  LirVar *acc = decl(k, &b, "acc", LT_F64, NULL);
  LirVar *j = lir_var(A, k, "j", LT_I64);
  lir_append(&b, lir_for(A, j, I64(0), R(n), lir_update(A, acc, LOP_ADD, LD(ws, R(j)))));
  LirVar *ov = decl_field(k, &b, "out_vals", 0, LF_VALS, 0);
  lir_append(&b, lir_store(A, R(ov), I64(0), R(acc)));
  c = lir_call(A, LH_FREE);
  c->u.call.ptr = ws;
  k->cleanup = c;
  k->body = b;
  return k;
}

START_TEST(test_workspace) {
  JitEngine *e = engine();
  tj_storage *out = fx_st_vec(TJ_F64, 1), *x = fx_st_vec(TJ_F64, 100);
  double ref = 0;
  for (int i = 0; i < 100; i++) {
    fx_val_set(x, i, i + 1);
    if (i >= 50) ref += 2.0 * (i + 1);
  }
  tj_storage *ops[] = {out, x};
  JitKernel jk = compile(e, k_workspace(out, x, false), NULL);
  ck_assert_int_eq(jit_kernel_run(&jk, ops), TJ_KERNEL_OK);
  ck_assert_double_eq(fx_val_get(out, 0), ref);
  jit_kernel_release(e, &jk);
  fx_val_set(out, 0, -1);
  jk = compile(e, k_workspace(out, x, true), NULL);
  ck_assert_int_eq(jit_kernel_run(&jk, ops), TJ_KERNEL_NOMEM);
  ck_assert_double_eq(fx_val_get(out, 0), -1);  /* stopped at the reserve */
  jit_kernel_release(e, &jk);
  fx_st_free(out);
  fx_st_free(x);
  jit_engine_free(e);
}
END_TEST

/* ---- (6) scalar semantics: i32, f32, casts, select, short circuit ---- */

/* o32[4..] and of[8..] receive results computed from o32[0..3] and
 * of[0..3]; o32[15] counts the leading nonzeros of xi (exactly n long) with
 * `while (p < n && xi[p] != 0)`, which must not read xi[n]. */
static LirKernel *k_scalar(const tj_storage *o32, const tj_storage *of,
                           const tj_storage *xi) {
  LirKernel *k = kernel("scalar", (const tj_storage *[]){o32, of, xi}, 3, 2);
  LirStmt *b = NULL;
  LirVar *iv = decl_field(k, &b, "iv", 0, LF_VALS, 0);
  LirVar *fv = decl_field(k, &b, "fv", 1, LF_VALS, 0);
  LirVar *xv = decl_field(k, &b, "xv", 2, LF_VALS, 0);
  LirVar *n = decl_field(k, &b, "n", 2, LF_DIM, 0);
  LirVar *a = decl(k, &b, "a", LT_I32, LD(iv, I64(0)));
  LirVar *c = decl(k, &b, "c", LT_I32, LD(iv, I64(1)));
  LirVar *f = decl(k, &b, "f", LT_F32, LD(fv, I64(0)));
  LirVar *g = decl(k, &b, "g", LT_F32, LD(fv, I64(1)));
  LirExpr *ires[] = {
      BIN(LOP_DIV, R(a), R(c)), BIN(LOP_REM, R(a), R(c)),
      BIN(LOP_MIN, R(a), R(c)), BIN(LOP_MAX, R(a), R(c)),
      lir_un(A, LUN_ABS, R(a)), lir_un(A, LUN_NEG, R(a)),
      lir_cast(A, LT_I32, BIN(LOP_ADD, I64(1ll << 32), I64(5))),
      lir_cast(A, LT_I32, lir_const_fp(A, LT_F64, -3.7)),
      lir_select(A, BIN(LOP_LT, R(a), R(c)), R(a), R(c)),
      lir_cast(A, LT_I32, BIN(LOP_LT, R(a), R(c))),
      lir_cast(A, LT_I32, R(f))};
  for (int q = 0; q < 11; q++) lir_append(&b, lir_store(A, R(iv), I64(4 + q), ires[q]));
  LirExpr *fres[] = {
      lir_un(A, LUN_SQRT, R(f)), lir_un(A, LUN_EXP, R(g)), lir_un(A, LUN_LOG, R(f)),
      BIN(LOP_MIN, R(f), R(g)), BIN(LOP_MAX, R(f), R(g)),
      lir_un(A, LUN_ABS, R(g)), BIN(LOP_DIV, R(f), R(g)),
      lir_cast(A, LT_F32, BIN(LOP_DIV, lir_const_fp(A, LT_F64, 1), lir_const_fp(A, LT_F64, 3)))};
  for (int q = 0; q < 8; q++) lir_append(&b, lir_store(A, R(fv), I64(8 + q), fres[q]));
  LirVar *p = decl(k, &b, "p", LT_I64, NULL);
  LirExpr *cond = BIN(LOP_AND, BIN(LOP_LT, R(p), R(n)),
                      BIN(LOP_NE, LD(xv, R(p)), I64(0)));
  lir_append(&b, lir_while(A, cond, lir_update(A, p, LOP_ADD, I64(1))));
  lir_append(&b, lir_store(A, R(iv), I64(15), lir_cast(A, LT_I32, R(p))));
  k->body = b;
  return k;
}

START_TEST(test_scalar_semantics) {
  JitEngine *e = engine();
  tj_storage *o32 = fx_st_vec(TJ_I32, 16), *of = fx_st_vec(TJ_F32, 16), *xi = fx_st_vec(TJ_I64, 9);
  int32_t a = -7, c = 2;
  float f = 2.5f, g = -1.25f;
  ((int32_t *)o32->vals)[0] = a, ((int32_t *)o32->vals)[1] = c;
  ((float *)of->vals)[0] = f, ((float *)of->vals)[1] = g;
  for (int i = 0; i < 9; i++) ((int64_t *)xi->vals)[i] = i + 1;
  JitKernel jk = compile(e, k_scalar(o32, of, xi), NULL);
  tj_storage *ops[] = {o32, of, xi};
  ck_assert_int_eq(jit_kernel_run(&jk, ops), 0);
  int32_t iref[] = {a / c, a % c, a < c ? a : c, a > c ? a : c, 7, 7, 5, -3, a, 1, 2};
  for (int q = 0; q < 11; q++)
    ck_assert_msg(((int32_t *)o32->vals)[4 + q] == iref[q], "int result %d: %d != %d",
                  q, ((int32_t *)o32->vals)[4 + q], iref[q]);
  ck_assert_int_eq(((int32_t *)o32->vals)[15], 9);
  float fref[] = {sqrtf(f), expf(g), logf(f), fminf(f, g), fmaxf(f, g),
                  fabsf(g), f / g, (float)(1.0 / 3.0)};
  for (int q = 0; q < 8; q++)
    ck_assert_msg(fabsf(((float *)of->vals)[8 + q] - fref[q]) <= 1e-6f * (1 + fabsf(fref[q])),
                  "float result %d: %g != %g", q, ((float *)of->vals)[8 + q], fref[q]);
  ((int64_t *)xi->vals)[4] = 0;
  ck_assert_int_eq(jit_kernel_run(&jk, ops), 0);
  ck_assert_int_eq(((int32_t *)o32->vals)[15], 4);
  jit_kernel_release(e, &jk);
  fx_st_free(o32);
  fx_st_free(of);
  fx_st_free(xi);
  jit_engine_free(e);
}
END_TEST

/* ---- (7) printers and a forced CPU ---- */

START_TEST(test_print_ir_asm) {
  JitEngine *e = engine();
  tj_storage *a = fx_st_csr(TJ_F64, 4, 20, 20, 0.3), *x = fx_st_vec(TJ_F64, 20), *y = fx_st_vec(TJ_F64, 20);
  for (int j = 0; j < 20; j++) fx_val_set(x, j, j);
  JitOptions o = {.opt_level = 3, .want_ir = true, .want_asm = true, .fp_contract = true};
  JitKernel jk = compile(e, k_spmv(y, a, x), &o);
  ck_assert_ptr_nonnull(jk.ir_before);
  ck_assert_ptr_nonnull(jk.ir_after);
  ck_assert_ptr_nonnull(jk.asm_text);
  char def[160];
  snprintf(def, sizeof def, "i32 @%s(", jk.symbol);
  ck_assert_ptr_nonnull(strstr(jk.ir_before, "define i32 @"));
  ck_assert_ptr_nonnull(strstr(jk.ir_before, def));
  ck_assert_ptr_nonnull(strstr(jk.ir_after, def));
  ck_assert_ptr_nonnull(strstr(jk.ir_before, "alloca"));
  ck_assert_ptr_null(strstr(jk.ir_after, "alloca"));  /* promoted */
  ck_assert_str_ne(jk.ir_before, jk.ir_after);
  ck_assert_ptr_nonnull(strstr(jk.asm_text, jk.symbol));
  ck_assert_ptr_nonnull(strstr(jk.asm_text, "vfmadd"));
  check_spmv(&jk, y, a, x, 1e-12);
  jit_kernel_release(e, &jk);
  jit_engine_free(e);

  Diag d;
  diag_init(&d);
  e = jit_engine_new("x86-64-v3", "", &d);
  ck_assert_msg(e, "x86-64-v3 engine: %s", d.msg);
  ck_assert_str_eq(jit_engine_cpu(e), "x86-64-v3");
  JitOptions o3 = {.opt_level = 3, .want_asm = true};
  jk = compile(e, k_sum(y, x), &o3);
  ck_assert_ptr_null(strstr(jk.asm_text, "zmm"));  /* no AVX-512 */
  ck_assert_ptr_nonnull(strstr(jk.asm_text, "vaddsd"));  /* VEX (AVX) */
  tj_storage *ops[] = {y, x};
  ck_assert_int_eq(jit_kernel_run(&jk, ops), 0);
  ck_assert_double_eq(fx_val_get(y, 0), 190.0);
  jit_kernel_release(e, &jk);
  jk = compile(e, k_spmv(y, a, x), &o3);
  check_spmv(&jk, y, a, x, 1e-12);
  jit_kernel_release(e, &jk);
  jit_engine_free(e);
  fx_st_free(a);
  fx_st_free(x);
  fx_st_free(y);
}
END_TEST

/* ---- errors, object code, recompiles ---- */

START_TEST(test_errors) {
  JitEngine *e = engine();
  tj_storage *x = fx_st_vec(TJ_F64, 4);
  LirKernel *k = kernel("bad", (const tj_storage *[]){x}, 1, 1);
  LirVar *v = lir_var(A, k, "v", LT_I64);
  k->body = lir_decl(A, v, NULL);
  lir_append(&k->body, lir_assign(A, v, lir_const_fp(A, LT_F64, 1)));
  Diag d;
  diag_init(&d);
  JitOptions o = {.opt_level = 2};
  JitKernel jk;
  ck_assert(!jit_compile(e, k, &o, &jk, &d));
  ck_assert_int_eq(d.status, TJ_ERR_INTERNAL);
  ck_assert_ptr_nonnull(strstr(d.msg, "assignment type mismatch"));
  ck_assert_ptr_null(jk.fn);

  k = kernel("bad_operand", (const tj_storage *[]){x}, 1, 1);
  k->body = lir_setfield(A, 3, LF_VALS_LEN, 0, I64(1));
  diag_init(&d);
  ck_assert(!jit_compile(e, k, &o, &jk, &d));
  ck_assert_ptr_nonnull(strstr(d.msg, "operand index out of range"));

  k = kernel("bad_loop", (const tj_storage *[]){x}, 1, 1);
  LirVar *i = lir_var(A, k, "i", LT_I32);
  k->body = lir_for(A, i, lir_const_int(A, LT_I32, 0), I64(4), NULL);
  diag_init(&d);
  ck_assert(!jit_compile(e, k, &o, &jk, &d));
  ck_assert_ptr_nonnull(strstr(d.msg, "FOR bounds and step must have the iv's type"));

  diag_init(&d);
  static const char junk[] = "\177ELF this is not an object file";
  ck_assert(!jit_add_object(e, junk, sizeof junk, "nothing", &jk, &d));
  ck_assert_int_eq(d.status, TJ_ERR_JIT);
  ck_assert_msg(strlen(d.msg) > 0, "no message");
  fx_st_free(x);
  jit_engine_free(e);
}
END_TEST

START_TEST(test_object_and_recompile) {
  JitEngine *e = engine();
  tj_storage *a = fx_st_csr(TJ_F64, 8, 30, 30, 0.2), *x = fx_st_vec(TJ_F64, 30), *y = fx_st_vec(TJ_F64, 30);
  for (int j = 0; j < 30; j++) fx_val_set(x, j, 1.0 / (j + 1));
  Diag d;
  diag_init(&d);
  void *bytes;
  size_t len;
  char sym[128];
  JitOptions o = {.opt_level = 3, .symbol = "spmv_cached_0123"};
  ck_assert_msg(jit_emit_object(e, k_spmv(y, a, x), &o, &bytes, &len, sym, &d), "%s", d.msg);
  ck_assert_str_eq(sym, "spmv_cached_0123");
  ck_assert_uint_gt(len, 64);
  ck_assert(memcmp(bytes, "\177ELF", 4) == 0);
  JitEngine *e2 = engine();  /* as if in a later process */
  JitKernel jk;
  ck_assert_msg(jit_add_object(e2, bytes, len, sym, &jk, &d), "%s", d.msg);
  free(bytes);
  check_spmv(&jk, y, a, x, 1e-12);
  jit_kernel_release(e2, &jk);
  jit_engine_free(e2);
  /* The same LirKernel twice: distinct symbols, both callable. */
  LirKernel *k = k_spmv(y, a, x);
  JitKernel k1 = compile(e, k, NULL), k2 = compile(e, k, NULL);
  ck_assert_str_ne(k1.symbol, k2.symbol);
  check_spmv(&k1, y, a, x, 1e-12);
  jit_kernel_release(e, &k1);
  check_spmv(&k2, y, a, x, 1e-12);
  jit_kernel_release(e, &k2);
  jit_kernel_release(e, &k2);  /* second release is a no-op */
  fx_st_free(a);
  fx_st_free(x);
  fx_st_free(y);
  jit_engine_free(e);
}
END_TEST

/* ---- (8) two threads compiling and running at once ---- */

typedef struct Worker {
  JitEngine *e;
  int w, dtype;
  int failures;
  char msg[256];
} Worker;

static pthread_mutex_t arena_mu = PTHREAD_MUTEX_INITIALIZER;

static void *worker(void *arg) {
  Worker *wk = arg;
  tj_storage *a = fx_st_csr(wk->dtype, wk->w, 40, 40, 0.25);
  tj_storage *x = fx_st_vec(wk->dtype, 40), *y = fx_st_vec(wk->dtype, 40);
  for (int j = 0; j < 40; j++) fx_val_set(x, j, j % 5);
  double ref[40];
  spmv_ref(a, x, ref);
  pthread_mutex_lock(&arena_mu);  /* the test arena is not thread-safe */
  LirKernel *k = k_spmv(y, a, x);
  pthread_mutex_unlock(&arena_mu);
  for (int rep = 0; rep < 6; rep++) {
    Diag d;
    diag_init(&d);
    JitKernel jk;
    JitOptions o = {.opt_level = 3};
    if (!jit_compile(wk->e, k, &o, &jk, &d)) {
      wk->failures++;
      snprintf(wk->msg, sizeof wk->msg, "%s", d.msg);
      continue;
    }
    tj_storage *ops[] = {y, a, x};
    if (jit_kernel_run(&jk, ops) != 0) wk->failures++;
    for (int i = 0; i < 40; i++)
      if (fabs(fx_val_get(y, i) - ref[i]) > 1e-4 * (1 + fabs(ref[i]))) wk->failures++;
    jit_kernel_release(wk->e, &jk);
  }
  fx_st_free(a);
  fx_st_free(x);
  fx_st_free(y);
  return NULL;
}

START_TEST(test_threads) {
  JitEngine *e = engine();
  Worker wk[2] = {{e, 4, TJ_F64, 0, ""}, {e, 8, TJ_F32, 0, ""}};
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, worker, &wk[i]);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < 2; i++)
    ck_assert_msg(wk[i].failures == 0, "thread %d: %d failures %s", i,
                  wk[i].failures, wk[i].msg);
  jit_engine_free(e);
}
END_TEST

/* ---- (9) compile time (printed, not asserted) ---- */

static void print_times(const char *what, const JitKernel *jk) {
  printf("jit %-22s total %7.2f ms (ir %.2f, opt %.2f, codegen %.2f, link %.2f)\n",
         what, jk->times.total_ms, jk->times.ir_ms, jk->times.opt_ms,
         jk->times.codegen_ms, jk->times.link_ms);
}

START_TEST(test_compile_time) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  JitEngine *e = engine();
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double engine_ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
  tj_storage *a = fx_st_csr(TJ_F64, 4, 10, 10, 0.3), *x = fx_st_vec(TJ_F64, 10), *y = fx_st_vec(TJ_F64, 10);
  LirKernel *k = k_spmv(y, a, x);
  JitKernel jk = compile(e, k, NULL);
  printf("jit engine creation      %7.2f ms\n", engine_ms);
  print_times("spmv O3 first", &jk);
  jit_kernel_release(e, &jk);
  double best = 1e30;
  for (int rep = 0; rep < 5; rep++) {
    jk = compile(e, k, NULL);
    if (jk.times.total_ms < best) best = jk.times.total_ms;
    if (rep == 4) print_times("spmv O3 warm", &jk);
    jit_kernel_release(e, &jk);
  }
  printf("jit spmv O3 warm best     %7.2f ms\n", best);
  JitOptions o = {.opt_level = 3, .no_llvm_vectorize = true};
  jk = compile(e, k, &o);
  print_times("spmv O3 no-vectorize", &jk);
  jit_kernel_release(e, &jk);
  fx_st_free(a);
  fx_st_free(x);
  fx_st_free(y);
  jit_engine_free(e);
}
END_TEST

int main(void) {
  const LbCase cases[] = {
      {"dense_sum", test_dense_sum, 1},     {"spmv", test_spmv, 4},
      {"append", test_append_grows, 2},     {"coiterate", test_coiterate, 1},
      {"workspace", test_workspace, 1},     {"scalar", test_scalar_semantics, 1},
      {"print", test_print_ir_asm, 1},      {"errors", test_errors, 1},
      {"object", test_object_and_recompile, 1}, {"threads", test_threads, 1},
      {"compile_time", test_compile_time, 1}};
  return lb_run_suite("jit", cases, sizeof cases / sizeof cases[0]);
}

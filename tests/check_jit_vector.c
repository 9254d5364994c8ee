/* The LLVM backend's vector and parallel loops: loop IR kernels built by
 * hand with a vector FOR (step W, vec_width W) followed by the scalar
 * remainder FOR the lowering emits, or a FOR marked parallel, JIT-compiled
 * and compared with plain C. Covers axpy (f64/f32, W = 4/8/16, sizes
 * around W), reductions (sum, min, max; f64/f32/i64/i32), unit-stride
 * declarations and gathers, an SpMM inner loop, CSR SpMV rows in parallel
 * (with and without a balance array, 1-3 threads), a vector loop inside a
 * parallel loop, the assembly at no_llvm_vectorize, and a timing print. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ir/loop_ir.h"
#include "jit/engine.h"
#include "runtime/abi.h"
#include "util/lir_build.h"
#include "util/storage_fixture.h"

/* ---- loop IR shorthands ---- */

static int nnames;

static LirVar *var(LirKernel *k, const char *base, LirType t) {
  return lir_var(A, k, arena_printf(A, "%s%d", base, nnames++), t);
}

static LirType vtype(int dtype) {
  switch (dtype) {
  case TJ_F64: return LT_F64;
  case TJ_F32: return LT_F32;
  case TJ_I64: return LT_I64;
  default: return LT_I32;
  }
}

static LirExpr *cst(LirType t, double v) {
  return lir_type_is_float(t) ? lir_const_fp(A, t, v) : lir_const_int(A, t, (int64_t)v);
}

static LirKernel *kernel(const char *name, tj_storage **ops, int n) {
  LirKernel *k = lir_kernel(A, name);
  k->noperands = n;
  for (int i = 0; i < n; i++)
    k->operands[i] = (LirOperand){"t", ops[i]->order, ops[i]->dtype,
                                  ops[i]->pos_width, ops[i]->crd_width, i == 0};
  return k;
}

static LirVar *decl(LirKernel *k, LirStmt **body, const char *name, LirType t,
                    LirExpr *init) {
  LirVar *v = var(k, name, t);
  lir_append(body, lir_decl(A, v, init));
  return v;
}

static LirVar *decl_field(LirKernel *k, LirStmt **body, const char *name,
                          int op, LirField f, int lvl) {
  LirExpr *x = lir_field(A, k, op, f, lvl);
  return decl(k, body, name, x->type, x);
}

/* The body of an inner loop over j (built once per loop copy). */
typedef LirStmt *(*BodyFn)(LirKernel *k, LirVar *j, void *cx);

static LirStmt *vfor(LirVar *iv, LirExpr *lo, LirExpr *hi, int w, LirStmt *body) {
  LirStmt *s = lir_for(A, iv, lo, hi, body);
  s->u.loop.step = lir_const_int(A, iv->type, w);
  s->u.loop.at.vec_width = w;
  return s;
}

/* As the lowering emits it:
 *   nv = lo + (hi - lo) / W * W;
 *   for (jv = lo; jv < nv; jv += W) body   (vec_width W)
 *   for (js = nv; js < hi; js++) body */
static void split_loop(LirKernel *k, LirStmt **b, LirExpr *lo, LirExpr *hi,
                       int w, BodyFn f, void *cx) {
  LirVar *nv = decl(k, b, "nv", LT_I64,
      BIN(LOP_ADD, lo, BIN(LOP_MUL, BIN(LOP_DIV, BIN(LOP_SUB, hi, lo), I64(w)), I64(w))));
  LirVar *jv = var(k, "jv", LT_I64), *js = var(k, "js", LT_I64);
  lir_append(b, vfor(jv, lo, R(nv), w, f(k, jv, cx)));
  lir_append(b, lir_for(A, js, R(nv), hi, f(k, js, cx)));
}

static const JitOptions novec = {.opt_level = 3, .no_llvm_vectorize = true,
                                 .fp_contract = true};

static JitKernel compile(JitEngine *e, const LirKernel *k, const JitOptions *o) {
  Diag d;
  diag_init(&d);
  JitKernel jk;
  ck_assert_msg(jit_compile(e, k, o ? o : &novec, &jk, &d), "compile: %s", d.msg);
  return jk;
}

/* A packed FMA (vfmadd...pd / ...ps on xmm, ymm or zmm), not a scalar
 * ...sd / ...ss one. */
static bool has_vector_fma(const char *s) {
  for (const char *p = s ? strstr(s, "vfmadd") : NULL; p; p = strstr(p + 1, "vfmadd")) {
    const char *q = p + 6;
    while (*q >= '0' && *q <= '9') q++;
    if ((q[0] == 'p') && (q[1] == 'd' || q[1] == 's')) return true;
  }
  return false;
}

/* ---- axpy: y[j] += a * x[j] ---- */

typedef struct { LirVar *y, *x; LirType t; } Axpy;

static LirStmt *axpy_body(LirKernel *k, LirVar *j, void *cx) {
  (void)k;
  Axpy *a = cx;
  return lir_store_update(A, R(a->y), R(j), LOP_ADD,
                          BIN(LOP_MUL, cst(a->t, 1.5), LD(a->x, R(j))));
}

static LirKernel *k_axpy(tj_storage **ops, int w) {
  LirKernel *k = kernel("axpy", ops, 2);
  LirStmt *b = NULL;
  Axpy a = {decl_field(k, &b, "y", 0, LF_VALS, 0), decl_field(k, &b, "x", 1, LF_VALS, 0),
            vtype(ops[0]->dtype)};
  LirVar *n = decl_field(k, &b, "n", 1, LF_DIM, 0);
  split_loop(k, &b, I64(0), R(n), w, axpy_body, &a);
  k->body = b;
  return k;
}

static const struct { int dtype, w; } axpy_cases[] = {
    {TJ_F64, 4}, {TJ_F64, 8}, {TJ_F64, 16}, {TJ_F32, 4}, {TJ_F32, 8}, {TJ_F32, 16}};

START_TEST(test_axpy) {
  int dt = axpy_cases[_i].dtype, w = axpy_cases[_i].w;
  JitEngine *e = engine();
  int64_t sizes[] = {0, 1, w - 1, w, w + 1, 1000};
  tj_storage *y = fx_st_vec(dt, 1000), *x = fx_st_vec(dt, 1000);
  tj_storage *ops[] = {y, x};
  JitOptions o = novec;
  o.want_asm = true;
  JitKernel jk = compile(e, k_axpy(ops, w), &o);
  ck_assert_msg(has_vector_fma(jk.asm_text), "no vector FMA in the asm");
  ck_assert_ptr_nonnull(strstr(jk.asm_text, dt == TJ_F64 ? "vmovupd" : "vmovups"));
  for (unsigned q = 0; q < sizeof sizes / sizeof *sizes; q++) {
    int64_t n = sizes[q];
    double ref[1000];
    for (int64_t j = 0; j < 1000; j++) {
      fx_val_set(x, j, fx_rnd() - 0.5);
      fx_val_set(y, j, fx_rnd());
      ref[j] = fx_val_get(y, j) + (j < n ? 1.5 * fx_val_get(x, j) : 0);
    }
    x->dims[0] = n;
    ck_assert_int_eq(jit_kernel_run(&jk, ops), 0);
    for (int64_t j = 0; j < 1000; j++)
      ck_assert_msg(fabs(fx_val_get(y, j) - ref[j]) <= 1e-6,
                    "n=%ld y[%ld] = %g, expected %g", (long)n, (long)j, fx_val_get(y, j), ref[j]);
  }
  jit_kernel_release(e, &jk);
  fx_st_free(y);
  fx_st_free(x);
  jit_engine_free(e);
}
END_TEST

/* ---- reductions: s op= f(x[j], y[j]) into an outer variable ---- */

typedef struct { LirVar *x, *y, *s; LirBinOp op; } Red;

static LirStmt *red_body(LirKernel *k, LirVar *j, void *cx) {
  (void)k;
  Red *r = cx;
  LirExpr *x = LD(r->x, R(j));
  return lir_update(A, r->s, r->op,
                    r->op == LOP_ADD ? BIN(LOP_MUL, x, LD(r->y, R(j))) : x);
}

/* out[0] = init; for j: out op= ... */
static LirKernel *k_reduce(tj_storage **ops, int w, LirBinOp op, double init) {
  LirKernel *k = kernel("reduce", ops, 3);
  LirType t = vtype(ops[0]->dtype);
  LirStmt *b = NULL;
  LirVar *out = decl_field(k, &b, "out", 0, LF_VALS, 0);
  Red r = {decl_field(k, &b, "x", 1, LF_VALS, 0), decl_field(k, &b, "y", 2, LF_VALS, 0),
           decl(k, &b, "s", t, cst(t, init)), op};
  LirVar *n = decl_field(k, &b, "n", 1, LF_DIM, 0);
  LirVar *j = var(k, "j", LT_I64);
  if (w) split_loop(k, &b, I64(0), R(n), w, red_body, &r);
  else lir_append(&b, lir_for(A, j, I64(0), R(n), red_body(k, j, &r)));
  lir_append(&b, lir_store(A, R(out), I64(0), R(r.s)));
  k->body = b;
  return k;
}

static const struct { int dtype; LirBinOp op; } red_cases[] = {
    {TJ_F64, LOP_ADD}, {TJ_F32, LOP_ADD}, {TJ_I64, LOP_ADD}, {TJ_I32, LOP_ADD},
    {TJ_F64, LOP_MIN}, {TJ_F64, LOP_MAX}, {TJ_F32, LOP_MIN}, {TJ_I32, LOP_MAX},
    {TJ_I64, LOP_MIN}, {TJ_F64, LOP_MUL}};

START_TEST(test_reduce) {
  int dt = red_cases[_i].dtype;
  LirBinOp op = red_cases[_i].op;
  bool fp = dt == TJ_F64 || dt == TJ_F32;
  JitEngine *e = engine();
  int64_t sizes[] = {0, 1, 7, 8, 9, 1000};
  tj_storage *out = fx_st_vec(dt, 1), *x = fx_st_vec(dt, 1000), *y = fx_st_vec(dt, 1000);
  tj_storage *ops[] = {out, x, y};
  double init = op == LOP_MUL ? 1 : 3;
  JitKernel jk = compile(e, k_reduce(ops, 8, op, init), NULL);
  for (unsigned q = 0; q < sizeof sizes / sizeof *sizes; q++) {
    int64_t n = sizes[q];
    double ref = init;
    for (int64_t j = 0; j < n; j++) {
      fx_val_set(x, j, op == LOP_MUL ? 1 + (fx_rnd() - 0.5) / 50 : fp ? fx_rnd() * 4 - 2 : (int)(fx_rnd() * 200) - 100);
      fx_val_set(y, j, fp ? fx_rnd() : (int)(fx_rnd() * 10));
      double xv = fx_val_get(x, j);
      if (op == LOP_ADD) ref += xv * fx_val_get(y, j);
      else if (op == LOP_MUL) ref *= xv;
      else if (op == LOP_MIN) ref = xv < ref ? xv : ref;
      else ref = xv > ref ? xv : ref;
    }
    x->dims[0] = n;
    ck_assert_int_eq(jit_kernel_run(&jk, ops), 0);
    double tol = dt == TJ_F32 ? 1e-4 : fp ? 1e-10 : 0;
    ck_assert_msg(fabs(fx_val_get(out, 0) - ref) <= tol * (1 + fabs(ref)),
                  "case %d n=%ld: got %.17g, expected %.17g", _i, (long)n, fx_val_get(out, 0), ref);
  }
  jit_kernel_release(e, &jk);
  fx_st_free(out);
  fx_st_free(x);
  fx_st_free(y);
  jit_engine_free(e);
}
END_TEST

/* ---- unit-stride DECL and a gather ---- */

/* p = r * n + j; out[j] = B[idx[p]] + B[p] * 2 (idx: i32, B: f64) */
typedef struct { LirVar *out, *idx, *B, *r, *n; } Gather;

static LirStmt *gather_body(LirKernel *k, LirVar *j, void *cx) {
  Gather *g = cx;
  LirStmt *b = NULL;
  LirVar *p = decl(k, &b, "p", LT_I64, BIN(LOP_ADD, BIN(LOP_MUL, R(g->r), R(g->n)), R(j)));
  LirExpr *ix = lir_cast(A, LT_I64, LD(g->idx, R(p)));
  lir_append(&b, lir_store(A, R(g->out), R(j),
      BIN(LOP_ADD, LD(g->B, ix), BIN(LOP_MUL, LD(g->B, R(p)), lir_const_fp(A, LT_F64, 2)))));
  return lir_block(A, b);
}

START_TEST(test_gather) {
  JitEngine *e = engine();
  enum { N = 103 };
  tj_storage *out = fx_st_vec(TJ_F64, N), *idx = fx_st_vec(TJ_I32, 2 * N), *B = fx_st_vec(TJ_F64, 2 * N);
  for (int q = 0; q < 2 * N; q++) {
    fx_val_set(idx, q, (int)(fx_rnd() * 2 * N));
    fx_val_set(B, q, fx_rnd());
  }
  tj_storage *ops[] = {out, idx, B};
  LirKernel *k = kernel("gather", ops, 3);
  LirStmt *b = NULL;
  Gather g = {decl_field(k, &b, "out", 0, LF_VALS, 0), decl_field(k, &b, "idx", 1, LF_VALS, 0),
              decl_field(k, &b, "B", 2, LF_VALS, 0), decl(k, &b, "r", LT_I64, I64(1)),
              decl_field(k, &b, "n", 0, LF_DIM, 0)};
  split_loop(k, &b, I64(0), R(g.n), 8, gather_body, &g);
  k->body = b;
  JitOptions o = novec;
  o.want_ir = true;
  JitKernel jk = compile(e, k, &o);
  ck_assert_ptr_nonnull(strstr(jk.ir_before, "llvm.masked.gather"));
  ck_assert_ptr_nonnull(strstr(jk.ir_before, "load <8 x double>"));
  ck_assert_ptr_nonnull(strstr(jk.ir_before, "load <8 x i32>"));
  ck_assert_int_eq(jit_kernel_run(&jk, ops), 0);
  for (int j = 0; j < N; j++) {
    double ref = fx_val_get(B, (int64_t)fx_val_get(idx, N + j)) + fx_val_get(B, N + j) * 2;
    ck_assert_double_eq_tol(fx_val_get(out, j), ref, 1e-12);
  }
  jit_kernel_release(e, &jk);
  fx_st_free(out);
  fx_st_free(idx);
  fx_st_free(B);
  jit_engine_free(e);
}
END_TEST

/* ---- a masked tail: the remainder as one masked step of the vector loop ---- */

/* s op= x[idx[j]] + c, c what a lane that escaped the mask would add (its
 * loads read 0), and out[j + 1] = 2 x[idx[j]]: out[0] = s; the entries past
 * n keep their sentinel. */
static const struct { LirBinOp op; double c, lo, hi, init; } tail_cases[] = {
    {LOP_ADD, 1, -1, 1, 0}, {LOP_MIN, -10, 1, 2, 0}, {LOP_MAX, 10, -2, -1, 0},
    {LOP_MUL, 2, 0.99, 1.01, 1}};

START_TEST(test_masked_tail) {
  LirBinOp op = tail_cases[_i].op;
  double c = tail_cases[_i].c, init = tail_cases[_i].init;
  JitEngine *e = engine();
  enum { N = 40 };
  tj_storage *out = fx_st_vec(TJ_F64, N + 8), *idx = fx_st_vec(TJ_I32, N), *x = fx_st_vec(TJ_F64, N);
  tj_storage *ops[] = {out, idx, x};
  LirKernel *k = kernel("tail", ops, 3);
  LirStmt *b = NULL;
  LirVar *o = decl_field(k, &b, "out", 0, LF_VALS, 0), *ix = decl_field(k, &b, "idx", 1, LF_VALS, 0);
  LirVar *xv = decl_field(k, &b, "x", 2, LF_VALS, 0), *n = decl_field(k, &b, "n", 1, LF_DIM, 0);
  LirVar *sv = decl(k, &b, "s", LT_F64, cst(LT_F64, init));
  /* as vectorize.c splits a gather loop: one body shared by the vector
   * loop (masked_tail) and its remainder */
  LirVar *iv = var(k, "j", LT_I64);
  LirStmt *body = NULL;
  LirExpr *g = LD(xv, lir_cast(A, LT_I64, LD(ix, R(iv))));
  lir_append(&body, lir_update(A, sv, op, BIN(LOP_ADD, g, cst(LT_F64, c))));
  /* and a unit-stride store: out[j + 1] = x[idx[j]] * 2 */
  lir_append(&body, lir_store(A, R(o), BIN(LOP_ADD, R(iv), I64(1)),
                              BIN(LOP_MUL, g, cst(LT_F64, 2))));
  LirVar *nvv = decl(k, &b, "nv", LT_I64, BIN(LOP_MUL, BIN(LOP_DIV, R(n), I64(8)), I64(8)));
  LirStmt *vl = vfor(iv, I64(0), R(nvv), 8, lir_block(A, body));
  LirStmt *tl = lir_for(A, iv, R(nvv), R(n), vl->u.loop.body);
  vl->u.loop.at.masked_tail = true;
  tl->u.loop.at.remainder = true;
  lir_append(&b, vl);
  lir_append(&b, tl);
  lir_append(&b, lir_store(A, R(o), I64(0), R(sv)));
  k->body = b;
  JitOptions jo = novec;
  jo.want_ir = true;
  JitKernel jk = compile(e, k, &jo);
  ck_assert_ptr_nonnull(strstr(jk.ir_before, "vtail"));
  ck_assert_ptr_nonnull(strstr(jk.ir_before, "llvm.masked.store"));
  ck_assert_ptr_nonnull(strstr(jk.ir_before, "llvm.masked.load"));
  int64_t sizes[] = {0, 1, 7, 8, 9, 15, 16, 17, 23, 39, 40};
  for (unsigned q = 0; q < sizeof sizes / sizeof *sizes; q++) {
    int64_t m = sizes[q];
    for (int t = 0; t < N; t++) {
      fx_val_set(idx, t, (int)(fx_rnd() * N));
      fx_val_set(x, t, tail_cases[_i].lo + fx_rnd() * (tail_cases[_i].hi - tail_cases[_i].lo));
    }
    for (int t = 0; t < N + 8; t++) fx_val_set(out, t, -7);
    double ref = init;
    for (int64_t t = 0; t < m; t++) {
      double v = fx_val_get(x, (int64_t)fx_val_get(idx, t)) + c;
      ref = op == LOP_ADD ? ref + v : op == LOP_MUL ? ref * v : op == LOP_MIN ? fmin(ref, v) : fmax(ref, v);
    }
    idx->dims[0] = m;
    ck_assert_int_eq(jit_kernel_run(&jk, ops), 0);
    idx->dims[0] = N;
    ck_assert_msg(fabs(fx_val_get(out, 0) - ref) <= 1e-12 * (1 + fabs(ref)),
                  "case %d n=%ld: s = %.17g, expected %.17g", _i, (long)m, fx_val_get(out, 0), ref);
    for (int64_t t = 0; t < N + 7; t++) {
      double want = t < m ? 2 * fx_val_get(x, (int64_t)fx_val_get(idx, t)) : -7;
      ck_assert_msg(fx_val_get(out, t + 1) == want, "case %d n=%ld: out[%ld] = %g, expected %g",
                    _i, (long)m, (long)t + 1, fx_val_get(out, t + 1), want);
    }
  }
  jit_kernel_release(e, &jk);
  fx_st_free(out);
  fx_st_free(idx);
  fx_st_free(x);
  jit_engine_free(e);
}
END_TEST

/* ---- SpMM inner loop: C[i*N + j] += v * B[k*N + j] ---- */

typedef struct { LirVar *C, *B, *i, *kk, *v, *N; } Spmm;

static LirStmt *spmm_body(LirKernel *k, LirVar *j, void *cx) {
  (void)k;
  Spmm *s = cx;
  return lir_store_update(A, R(s->C), BIN(LOP_ADD, BIN(LOP_MUL, R(s->i), R(s->N)), R(j)),
      LOP_ADD, BIN(LOP_MUL, R(s->v), LD(s->B, BIN(LOP_ADD, BIN(LOP_MUL, R(s->kk), R(s->N)), R(j)))));
}

/* for i < m: for p in pos[i]..pos[i+1]: k = crd[p]; v = vals[p]; for j < N: ...
 * The row loop is parallel when par (balance by pos when bal). */
static LirKernel *k_spmm(tj_storage **ops, int w, bool par, bool bal) {
  LirKernel *k = kernel("spmm", ops, 3);
  LirStmt *b = NULL;
  Spmm s = {.C = decl_field(k, &b, "C", 0, LF_VALS, 0), .B = decl_field(k, &b, "B", 2, LF_VALS, 0)};
  LirVar *pos = decl_field(k, &b, "pos", 1, LF_POS, 1), *crd = decl_field(k, &b, "crd", 1, LF_CRD, 1);
  LirVar *av = decl_field(k, &b, "av", 1, LF_VALS, 0), *m = decl_field(k, &b, "m", 1, LF_DIM, 0);
  s.N = decl_field(k, &b, "N", 2, LF_DIM, 1);
  s.i = var(k, "i", LT_I64);
  LirVar *p = var(k, "p", LT_I64);
  LirStmt *inner = NULL;
  s.kk = decl(k, &inner, "k", LT_I64, lir_cast(A, LT_I64, LD(crd, R(p))));
  s.v = decl(k, &inner, "v", LT_F64, LD(av, R(p)));
  split_loop(k, &inner, I64(0), R(s.N), w, spmm_body, &s);
  LirExpr *lo = lir_cast(A, LT_I64, LD(pos, R(s.i)));
  LirExpr *hi = lir_cast(A, LT_I64, LD(pos, BIN(LOP_ADD, R(s.i), I64(1))));
  LirStmt *rows = lir_for(A, s.i, I64(0), R(m), lir_for(A, p, lo, hi, inner));
  rows->u.loop.at.parallel = par;
  if (bal) rows->u.loop.at.balance = R(pos);
  lir_append(&b, rows);
  k->body = b;
  return k;
}

static void spmm_ref(const tj_storage *a, const tj_storage *B, double *C) {
  int w = a->pos_width;
  int64_t N = B->dims[1];
  memset(C, 0, sizeof *C * (size_t)(a->dims[0] * N));
  for (int64_t i = 0; i < a->dims[0]; i++)
    for (int64_t p = fx_idx_get(a->levels[1].pos, w, i); p < fx_idx_get(a->levels[1].pos, w, i + 1); p++)
      for (int64_t j = 0; j < N; j++)
        C[i * N + j] += ((double *)a->vals)[p] *
                        ((double *)B->vals)[fx_idx_get(a->levels[1].crd, w, p) * N + j];
}

static tj_storage *st_dense(int64_t m, int64_t n) {
  tj_storage *s = fx_st_vec(TJ_F64, m * n);
  s->order = 2;
  s->dims[0] = m;
  s->dims[1] = n;
  return s;
}

/* _i: 0 serial, 1 parallel, 2 parallel balanced */
START_TEST(test_spmm) {
  JitEngine *e = engine();
  enum { M = 61, K = 45, N = 37 };
  tj_storage *a = fx_st_csr_skewed(_i == 2 ? 4 : 8, M, K, 0.15), *B = st_dense(K, N), *C = st_dense(M, N);
  for (int q = 0; q < K * N; q++) fx_val_set(B, q, fx_rnd());
  double *ref = malloc(sizeof *ref * M * N);
  spmm_ref(a, B, ref);
  tj_storage *ops[] = {C, a, B};
  JitOptions o = novec;
  o.want_ir = true;
  JitKernel jk = compile(e, k_spmm(ops, 8, _i > 0, _i == 2), &o);
  if (_i > 0) ck_assert_ptr_nonnull(strstr(jk.ir_before, "@tj_rt_parallel_for"));
  for (int nt = 1; nt <= 3; nt++) {
    tj_rt_set_threads(nt);
    memset(C->vals, 0, sizeof(double) * M * N);
    ck_assert_int_eq(jit_kernel_run(&jk, ops), 0);
    for (int q = 0; q < M * N; q++)
      ck_assert_msg(fabs(fx_val_get(C, q) - ref[q]) <= 1e-12 * (1 + fabs(ref[q])),
                    "threads=%d C[%d] = %g, expected %g", nt, q, fx_val_get(C, q), ref[q]);
  }
  jit_kernel_release(e, &jk);
  free(ref);
  fx_st_free(a);
  fx_st_free(B);
  fx_st_free(C);
  jit_engine_free(e);
}
END_TEST

/* ---- parallel CSR SpMV with an inner while loop ---- */

/* for i < m (parallel, step st): p = pos[i]; acc = 0;
 *   while (p < pos[i+1]) { acc += vals[p] * x[crd[p]]; p += 1; }  y[i] = acc */
static LirKernel *k_spmv_par(tj_storage **ops, bool bal, int st) {
  LirKernel *k = kernel("spmv_par", ops, 3);
  LirStmt *b = NULL;
  LirVar *y = decl_field(k, &b, "y", 0, LF_VALS, 0), *pos = decl_field(k, &b, "pos", 1, LF_POS, 1);
  LirVar *crd = decl_field(k, &b, "crd", 1, LF_CRD, 1), *av = decl_field(k, &b, "av", 1, LF_VALS, 0);
  LirVar *x = decl_field(k, &b, "x", 2, LF_VALS, 0), *m = decl_field(k, &b, "m", 1, LF_DIM, 0);
  LirVar *i = var(k, "i", LT_I64);
  LirStmt *row = NULL, *w = NULL;
  LirVar *p = decl(k, &row, "p", LT_I64, lir_cast(A, LT_I64, LD(pos, R(i))));
  LirVar *acc = decl(k, &row, "acc", LT_F64, NULL);
  lir_append(&w, lir_update(A, acc, LOP_ADD,
      BIN(LOP_MUL, LD(av, R(p)), LD(x, lir_cast(A, LT_I64, LD(crd, R(p)))))));
  lir_append(&w, lir_update(A, p, LOP_ADD, I64(1)));
  lir_append(&row, lir_while(A, BIN(LOP_LT, R(p),
      lir_cast(A, LT_I64, LD(pos, BIN(LOP_ADD, R(i), I64(1))))), w));
  lir_append(&row, lir_store(A, R(y), R(i), R(acc)));
  LirStmt *rows = lir_for(A, i, I64(0), R(m), row);
  rows->u.loop.step = I64(st);
  rows->u.loop.at.parallel = true;
  if (bal) rows->u.loop.at.balance = R(pos);
  lir_append(&b, rows);
  k->body = b;
  return k;
}

/* _i: bit 0 = balance, bit 1 = 32-bit pos, bit 2 = step 3 */
START_TEST(test_parallel_spmv) {
  JitEngine *e = engine();
  enum { M = 500, K = 300 };
  int st = _i & 4 ? 3 : 1;
  tj_storage *a = fx_st_csr_skewed(_i & 2 ? 4 : 8, M, K, 0.05), *x = fx_st_vec(TJ_F64, K), *y = fx_st_vec(TJ_F64, M);
  for (int q = 0; q < K; q++) fx_val_set(x, q, fx_rnd());
  double ref[M] = {0};
  int w = a->pos_width;
  for (int64_t i = 0; i < M; i += st) {
    double acc = 0;
    for (int64_t p = fx_idx_get(a->levels[1].pos, w, i); p < fx_idx_get(a->levels[1].pos, w, i + 1); p++)
      acc += ((double *)a->vals)[p] * fx_val_get(x, fx_idx_get(a->levels[1].crd, w, p));
    ref[i] = acc;
  }
  tj_storage *ops[] = {y, a, x};
  JitKernel jk = compile(e, k_spmv_par(ops, _i & 1, st), NULL);
  double serial[M];
  for (int nt = 1; nt <= 3; nt++) {
    tj_rt_set_threads(nt);
    memset(y->vals, 0, sizeof(double) * M);
    ck_assert_int_eq(jit_kernel_run(&jk, ops), 0);
    if (nt == 1) memcpy(serial, y->vals, sizeof serial);
    for (int i = 0; i < M; i++) {  /* same per-row order: bitwise equal */
      ck_assert_msg(fx_val_get(y, i) == serial[i], "threads=%d y[%d] = %.17g, serial %.17g",
                    nt, i, fx_val_get(y, i), serial[i]);
      ck_assert_double_eq_tol(fx_val_get(y, i), ref[i], 1e-12 * (1 + fabs(ref[i])));
    }
  }
  jit_kernel_release(e, &jk);
  fx_st_free(a);
  fx_st_free(x);
  fx_st_free(y);
  jit_engine_free(e);
}
END_TEST

/* ---- a vector loop inside a parallel loop ---- */

typedef struct { LirVar *C, *B, *i, *N; } Rows;

/* C[i*N + j] = sqrt(B[i*N + j]) * 2 + (j < 5 ? 1 : 0) */
static LirStmt *rows_body(LirKernel *k, LirVar *j, void *cx) {
  Rows *r = cx;
  LirStmt *b = NULL;
  LirVar *q = decl(k, &b, "q", LT_I64, BIN(LOP_ADD, BIN(LOP_MUL, R(r->i), R(r->N)), R(j)));
  LirExpr *x = BIN(LOP_MUL, lir_un(A, LUN_SQRT, LD(r->B, R(q))), lir_const_fp(A, LT_F64, 2));
  LirExpr *c = lir_select(A, BIN(LOP_LT, R(j), I64(5)), lir_const_fp(A, LT_F64, 1),
                          lir_const_fp(A, LT_F64, 0));
  lir_append(&b, lir_store(A, R(r->C), R(q), BIN(LOP_ADD, x, c)));
  return lir_block(A, b);
}

START_TEST(test_parallel_vector) {
  JitEngine *e = engine();
  enum { M = 33, N = 29 };
  tj_storage *C = st_dense(M, N), *B = st_dense(M, N);
  for (int q = 0; q < M * N; q++) fx_val_set(B, q, fx_rnd() * 10);
  tj_storage *ops[] = {C, B};
  LirKernel *k = kernel("rows", ops, 2);
  LirStmt *b = NULL;
  Rows r = {decl_field(k, &b, "C", 0, LF_VALS, 0), decl_field(k, &b, "B", 1, LF_VALS, 0),
            var(k, "i", LT_I64), decl_field(k, &b, "N", 0, LF_DIM, 1)};
  LirVar *m = decl_field(k, &b, "m", 0, LF_DIM, 0);
  LirStmt *row = NULL;
  split_loop(k, &row, I64(0), R(r.N), 4, rows_body, &r);
  LirStmt *rows = lir_for(A, r.i, I64(0), R(m), row);
  rows->u.loop.at.parallel = true;
  lir_append(&b, rows);
  k->body = b;
  JitOptions o = novec;
  o.want_asm = true;
  JitKernel jk = compile(e, k, &o);
  ck_assert_ptr_nonnull(strstr(jk.asm_text, "vsqrtpd"));
  for (int nt = 1; nt <= 3; nt++) {
    tj_rt_set_threads(nt);
    memset(C->vals, 0, sizeof(double) * M * N);
    ck_assert_int_eq(jit_kernel_run(&jk, ops), 0);
    for (int q = 0; q < M * N; q++)
      ck_assert_double_eq_tol(fx_val_get(C, q), sqrt(fx_val_get(B, q)) * 2 + (q % N < 5), 1e-12);
  }
  jit_kernel_release(e, &jk);
  fx_st_free(C);
  fx_st_free(B);
  jit_engine_free(e);
}
END_TEST

/* ---- a vector loop outside the contract fails with a diagnostic ---- */

START_TEST(test_vector_errors) {
  JitEngine *e = engine();
  tj_storage *y = fx_st_vec(TJ_F64, 16), *x = fx_st_vec(TJ_F64, 16);
  tj_storage *ops[] = {y, x};
  for (int c = 0; c < 2; c++) {
    LirKernel *k = kernel("bad", ops, 2);
    LirStmt *b = NULL;
    LirVar *yv = decl_field(k, &b, "y", 0, LF_VALS, 0), *xv = decl_field(k, &b, "x", 1, LF_VALS, 0);
    LirVar *s = decl(k, &b, "s", LT_F64, NULL), *j = var(k, "j", LT_I64);
    LirStmt *body = c == 0 ? lir_store(A, R(yv), I64(0), LD(xv, R(j)))  /* uniform index */
                           : lir_assign(A, s, LD(xv, R(j)));           /* s = x[j] */
    lir_append(&b, vfor(j, I64(0), I64(16), 4, body));
    k->body = b;
    Diag d;
    diag_init(&d);
    JitKernel jk;
    ck_assert(!jit_compile(e, k, &novec, &jk, &d));
    ck_assert_int_eq(d.status, TJ_ERR_INTERNAL);
    ck_assert_msg(strstr(d.msg, c == 0 ? "not unit-stride" : "outer variable"), "%s", d.msg);
  }
  fx_st_free(y);
  fx_st_free(x);
  jit_engine_free(e);
}
END_TEST

/* ---- timing: 1M-element dot product, scalar vs vector ---- */

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

START_TEST(test_dot_timing) {
  JitEngine *e = engine();
  enum { N = 1 << 20 };
  tj_storage *out = fx_st_vec(TJ_F64, 1), *x = fx_st_vec(TJ_F64, N), *y = fx_st_vec(TJ_F64, N);
  for (int q = 0; q < N; q++) fx_val_set(x, q, fx_rnd()), fx_val_set(y, q, fx_rnd());
  tj_storage *ops[] = {out, x, y};
  int w = strstr(jit_engine_features(e), "+avx512f") ? 8 : 4;
  double t[2], r[2];
  for (int v = 0; v < 2; v++) {
    JitKernel jk = compile(e, k_reduce(ops, v ? w : 0, LOP_ADD, 0), NULL);
    jit_kernel_run(&jk, ops);
    double best = 1e30;
    for (int rep = 0; rep < 20; rep++) {
      double t0 = now_ms();
      jit_kernel_run(&jk, ops);
      double dt = now_ms() - t0;
      if (dt < best) best = dt;
    }
    t[v] = best;
    r[v] = fx_val_get(out, 0);
    jit_kernel_release(e, &jk);
  }
  printf("dot 1M f64, no_llvm_vectorize: scalar %.3f ms, vector W=%d %.3f ms (%.2fx)\n",
         t[0], w, t[1], t[0] / t[1]);
  ck_assert_double_eq_tol(r[0], r[1], 1e-9 * fabs(r[0]));
  fx_st_free(out);
  fx_st_free(x);
  fx_st_free(y);
  jit_engine_free(e);
}
END_TEST

int main(void) {
  const LbCase cases[] = {
      {"axpy", test_axpy, sizeof axpy_cases / sizeof *axpy_cases},
      {"reduce", test_reduce, sizeof red_cases / sizeof *red_cases},
      {"gather", test_gather, 1},
      {"masked_tail", test_masked_tail, sizeof tail_cases / sizeof *tail_cases},
      {"spmm", test_spmm, 3},
      {"parallel_spmv", test_parallel_spmv, 8},
      {"parallel_vector", test_parallel_vector, 1},
      {"vector_errors", test_vector_errors, 1},
      {"dot_timing", test_dot_timing, 1}};
  return lb_run_suite("jit_vector", cases, sizeof cases / sizeof cases[0]);
}

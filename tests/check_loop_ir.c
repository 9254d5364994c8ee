/* Loop IR: printer, verifier and interpreter on kernels built by hand with
 * the constructors -- a dense sum, CSR SpMV, appending into a compressed
 * output through reserve, a while-loop union merge, a workspace freed in
 * cleanup, f32/i32 semantics, bounds faults, verifier messages, the
 * vectorization classes (each rule, and the classifier's hooks), golden
 * printer lines, and the printed C compiled with the system compiler and
 * run against the interpreter on the same storage.
 */
#include <check.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ir/lir_class.h"
#include "ir/loop_ir.h"
#include "lower/lir_interp.h"
#include "lower/lower.h"
#include "runtime/abi.h"

/* ---- building kernels ---- */

static Arena arena;
static Arena *A = &arena;

static void setup(void) { arena_init(A); }
static void teardown(void) { arena_free(A); }

static void operand(LirKernel *k, const char *name, int order, int dtype,
                    bool is_output) {
  LirOperand *o = &k->operands[k->noperands++];
  *o = (LirOperand){name, order, dtype, 4, 4, is_output};
}

static LirExpr *c64(int64_t v) { return lir_const_int(A, LT_I64, v); }
static LirExpr *ref(LirVar *v) { return lir_ref(A, v); }
static LirExpr *ld(LirVar *p, LirExpr *i) { return lir_load(A, ref(p), i); }
static LirExpr *i64(LirExpr *e) { return lir_cast(A, LT_I64, e); }
static LirExpr *bin(LirBinOp op, LirExpr *x, LirExpr *y) {
  return lir_bin(A, op, x, y);
}
static void add(LirStmt **l, LirStmt *s) { lir_append(l, s); }
/* A DECL of a new variable initialized by e. */
static LirVar *let(LirKernel *k, LirStmt **l, const char *n, LirType t,
                   LirExpr *e) {
  LirVar *v = lir_var(A, k, n, t);
  add(l, lir_decl(A, v, e));
  return v;
}
static LirStmt *reserve(int op, int arr, int level, LirExpr *need) {
  LirStmt *s = lir_call(A, LH_RESERVE);
  s->u.call.operand = op, s->u.call.arr = arr, s->u.call.level = level;
  s->u.call.a = need;
  return s;
}

/* s() = sum_i x(i); hi_extra reads past the end (for the bounds test). */
static LirKernel *build_sum(int hi_extra) {
  LirKernel *k = lir_kernel(A, "dense_sum");
  operand(k, "s", 0, TJ_F64, true);
  operand(k, "x", 1, TJ_F64, false);
  LirStmt *b = NULL, *loop = NULL;
  LirVar *xv = let(k, &b, "x_vals", LT_PTR_F64, lir_field(A, k, 1, LF_VALS, 0));
  LirVar *sv = let(k, &b, "s_vals", LT_PTR_F64, lir_field(A, k, 0, LF_VALS, 0));
  LirVar *n = let(k, &b, "n", LT_I64, lir_field(A, k, 1, LF_DIM, 0));
  LirVar *acc = let(k, &b, "acc", LT_F64, lir_const_fp(A, LT_F64, 0));
  LirVar *i = lir_var(A, k, "i", LT_I64);
  add(&loop, lir_update(A, acc, LOP_ADD, ld(xv, ref(i))));
  add(&b, lir_for(A, i, c64(0), bin(LOP_ADD, ref(n), c64(hi_extra)), loop));
  add(&b, lir_store(A, ref(sv), c64(0), ref(acc)));
  k->body = b;
  return k;
}

/* for q < n: x[q + off] = max(x[q + off], x[q]) when carried (off 1: a
 * running max, each iteration reads what the one before wrote), else
 * x[q] = max(x[q], 2 * x[q]). */
static LirKernel *build_running_max(bool carried) {
  LirKernel *k = lir_kernel(A, "running_max");
  operand(k, "x", 1, TJ_F64, true);
  LirStmt *b = NULL, *body = NULL;
  LirVar *xv = let(k, &b, "x_vals", LT_PTR_F64, lir_field(A, k, 0, LF_VALS, 0));
  LirVar *n = let(k, &b, "n", LT_I64, lir_field(A, k, 0, LF_DIM, 0));
  LirVar *q = lir_var(A, k, "q", LT_I64);
  LirExpr *at = carried ? bin(LOP_ADD, ref(q), c64(1)) : ref(q);
  LirExpr *other = carried ? ld(xv, ref(q)) : bin(LOP_MUL, lir_const_fp(A, LT_F64, 2), ld(xv, ref(q)));
  add(&body, lir_store(A, ref(xv), at, bin(LOP_MAX, ld(xv, at), other)));
  add(&b, lir_for(A, q, c64(0), bin(LOP_SUB, ref(n), c64(1)), body));
  k->body = b;
  return k;
}

/* y(i) = sum_p A_vals[p] * x[A_crd[p]] over CSR A (dense, compressed). */
static LirKernel *build_spmv(void) {
  LirKernel *k = lir_kernel(A, "spmv");
  operand(k, "y", 1, TJ_F64, true);
  operand(k, "A", 2, TJ_F64, false);
  operand(k, "x", 1, TJ_F64, false);
  LirStmt *b = NULL, *row = NULL, *inner = NULL;
  LirVar *ap = let(k, &b, "A_pos", LT_PTR_I32, lir_field(A, k, 1, LF_POS, 1));
  LirVar *ac = let(k, &b, "A_crd", LT_PTR_I32, lir_field(A, k, 1, LF_CRD, 1));
  LirVar *av = let(k, &b, "A_vals", LT_PTR_F64, lir_field(A, k, 1, LF_VALS, 0));
  LirVar *xv = let(k, &b, "x_vals", LT_PTR_F64, lir_field(A, k, 2, LF_VALS, 0));
  LirVar *yv = let(k, &b, "y_vals", LT_PTR_F64, lir_field(A, k, 0, LF_VALS, 0));
  LirVar *m = let(k, &b, "m", LT_I64, lir_field(A, k, 1, LF_DIM, 0));
  LirVar *i = lir_var(A, k, "i", LT_I64), *p = lir_var(A, k, "p", LT_I64);
  LirVar *t = let(k, &row, "t", LT_F64, NULL);
  add(&inner, lir_update(A, t, LOP_ADD,
                         bin(LOP_MUL, ld(av, ref(p)), ld(xv, ld(ac, ref(p))))));
  add(&row, lir_for(A, p, i64(ld(ap, ref(i))),
                    i64(ld(ap, bin(LOP_ADD, ref(i), c64(1)))), inner));
  add(&row, lir_store(A, ref(yv), ref(i), ref(t)));
  LirStmt *outer = lir_for(A, i, c64(0), ref(m), row);
  outer->u.loop.at.parallel = true;
  add(&b, outer);
  k->body = b;
  return k;
}

/* c = the nonzeros of dense d, appended into compressed c through reserve. */
static LirKernel *build_compress(void) {
  LirKernel *k = lir_kernel(A, "compress");
  operand(k, "c", 1, TJ_F64, true);
  operand(k, "d", 1, TJ_F64, false);
  LirStmt *b = NULL, *loop = NULL, *app = NULL;
  add(&b, reserve(0, TJ_ARR_POS, 0, c64(2)));
  LirVar *cp = let(k, &b, "c_pos", LT_PTR_I32, lir_field(A, k, 0, LF_POS, 0));
  add(&b, lir_store(A, ref(cp), c64(0), lir_const_int(A, LT_I32, 0)));
  LirVar *dv = let(k, &b, "d_vals", LT_PTR_F64, lir_field(A, k, 1, LF_VALS, 0));
  LirVar *nz = let(k, &b, "nz", LT_I64, c64(0));
  LirVar *i = lir_var(A, k, "i", LT_I64);
  LirVar *v = let(k, &loop, "v", LT_F64, ld(dv, ref(i)));
  LirExpr *need = bin(LOP_ADD, ref(nz), c64(1));
  add(&app, reserve(0, TJ_ARR_CRD, 0, need));
  add(&app, reserve(0, TJ_ARR_VALS, 0, need));
  LirVar *cc = let(k, &app, "c_crd", LT_PTR_I32, lir_field(A, k, 0, LF_CRD, 0));
  LirVar *cv = let(k, &app, "c_vals", LT_PTR_F64, lir_field(A, k, 0, LF_VALS, 0));
  add(&app, lir_store(A, ref(cc), ref(nz), lir_cast(A, LT_I32, ref(i))));
  add(&app, lir_store(A, ref(cv), ref(nz), ref(v)));
  add(&app, lir_update(A, nz, LOP_ADD, c64(1)));
  add(&loop, lir_if(A, bin(LOP_NE, ref(v), lir_const_fp(A, LT_F64, 0)), app,
                    NULL));
  add(&b, lir_for(A, i, c64(0), lir_field(A, k, 1, LF_DIM, 0), loop));
  add(&b, lir_store(A, ref(cp), c64(1), lir_cast(A, LT_I32, ref(nz))));
  add(&b, lir_setfield(A, 0, LF_POS_LEN, 0, c64(2)));
  add(&b, lir_setfield(A, 0, LF_CRD_LEN, 0, ref(nz)));
  add(&b, lir_setfield(A, 0, LF_VALS_LEN, 0, ref(nz)));
  k->body = b;
  return k;
}

/* The tail loop `while (p < end) { z[crd[p]] = vals[p]; p += 1; }`. */
static LirStmt *tail(LirVar *p, LirVar *end, LirVar *crd, LirVar *vals,
                     LirVar *zv) {
  LirStmt *body = NULL;
  add(&body, lir_store(A, ref(zv), i64(ld(crd, ref(p))), ld(vals, ref(p))));
  add(&body, lir_update(A, p, LOP_ADD, c64(1)));
  return lir_while(A, bin(LOP_LT, ref(p), ref(end)), body);
}

/* z = a + b for compressed vectors a, b into dense z: one while loop over
 * both, an if / else if / else per lattice point, then two tail loops. */
static LirKernel *build_merge(void) {
  LirKernel *k = lir_kernel(A, "merge_add");
  operand(k, "z", 1, TJ_F64, true);
  operand(k, "a", 1, TJ_F64, false);
  operand(k, "b", 1, TJ_F64, false);
  LirStmt *s = NULL, *w = NULL, *both = NULL, *only_a = NULL, *only_b = NULL;
  LirVar *zv = let(k, &s, "z_vals", LT_PTR_F64, lir_field(A, k, 0, LF_VALS, 0));
  LirVar *apos = let(k, &s, "a_pos", LT_PTR_I32, lir_field(A, k, 1, LF_POS, 0));
  LirVar *acrd = let(k, &s, "a_crd", LT_PTR_I32, lir_field(A, k, 1, LF_CRD, 0));
  LirVar *av = let(k, &s, "a_vals", LT_PTR_F64, lir_field(A, k, 1, LF_VALS, 0));
  LirVar *bpos = let(k, &s, "b_pos", LT_PTR_I32, lir_field(A, k, 2, LF_POS, 0));
  LirVar *bcrd = let(k, &s, "b_crd", LT_PTR_I32, lir_field(A, k, 2, LF_CRD, 0));
  LirVar *bv = let(k, &s, "b_vals", LT_PTR_F64, lir_field(A, k, 2, LF_VALS, 0));
  LirVar *pa = let(k, &s, "pa", LT_I64, i64(ld(apos, c64(0))));
  LirVar *pa_end = let(k, &s, "pa_end", LT_I64, i64(ld(apos, c64(1))));
  LirVar *pb = let(k, &s, "pb", LT_I64, i64(ld(bpos, c64(0))));
  LirVar *pb_end = let(k, &s, "pb_end", LT_I64, i64(ld(bpos, c64(1))));
  LirVar *ia = let(k, &w, "ia", LT_I64, i64(ld(acrd, ref(pa))));
  LirVar *ib = let(k, &w, "ib", LT_I64, i64(ld(bcrd, ref(pb))));
  LirVar *i = let(k, &w, "i", LT_I64, bin(LOP_MIN, ref(ia), ref(ib)));
  LirExpr *a_here = bin(LOP_EQ, ref(ia), ref(i));
  LirExpr *b_here = bin(LOP_EQ, ref(ib), ref(i));
  add(&both, lir_store(A, ref(zv), ref(i),
                       bin(LOP_ADD, ld(av, ref(pa)), ld(bv, ref(pb)))));
  add(&only_a, lir_store(A, ref(zv), ref(i), ld(av, ref(pa))));
  add(&only_b, lir_store(A, ref(zv), ref(i), ld(bv, ref(pb))));
  add(&w, lir_if(A, bin(LOP_AND, a_here, b_here), both,
                 lir_if(A, a_here, only_a, only_b)));
  add(&w, lir_update(A, pa, LOP_ADD, i64(a_here)));
  add(&w, lir_update(A, pb, LOP_ADD, i64(b_here)));
  add(&s, lir_while(A, bin(LOP_AND, bin(LOP_LT, ref(pa), ref(pa_end)),
                           bin(LOP_LT, ref(pb), ref(pb_end))), w));
  add(&s, tail(pa, pa_end, acrd, av, zv));
  add(&s, tail(pb, pb_end, bcrd, bv, zv));
  k->body = s;
  return k;
}

/* y(i) = 2 * x(n-1-i) through a workspace w freed in cleanup. With
 * overrun, the second loop reads w[n] (a fault after the allocation);
 * without free, cleanup forgets w. */
static LirKernel *build_workspace(bool overrun, bool free_it) {
  LirKernel *k = lir_kernel(A, "ws_reverse");
  operand(k, "y", 1, TJ_F64, true);
  operand(k, "x", 1, TJ_F64, false);
  LirStmt *b = NULL, *l1 = NULL, *l2 = NULL;
  LirVar *w = let(k, &b, "w", LT_PTR_F64, NULL);
  LirVar *xv = let(k, &b, "x_vals", LT_PTR_F64, lir_field(A, k, 1, LF_VALS, 0));
  LirVar *yv = let(k, &b, "y_vals", LT_PTR_F64, lir_field(A, k, 0, LF_VALS, 0));
  LirVar *n = let(k, &b, "n", LT_I64, lir_field(A, k, 1, LF_DIM, 0));
  LirStmt *al = lir_call(A, LH_ALLOC);
  al->u.call.ptr = w, al->u.call.a = bin(LOP_MUL, ref(n), c64(8));
  add(&b, al);
  LirVar *i = lir_var(A, k, "i", LT_I64), *j = lir_var(A, k, "j", LT_I64);
  add(&l1, lir_store(A, ref(w), ref(i), bin(LOP_MUL, ld(xv, ref(i)),
                                            lir_const_fp(A, LT_F64, 2))));
  add(&b, lir_for(A, i, c64(0), ref(n), l1));
  LirExpr *back = bin(LOP_SUB, bin(LOP_SUB, ref(n), c64(overrun ? 0 : 1)),
                      ref(j));
  add(&l2, lir_store(A, ref(yv), ref(j), ld(w, back)));
  add(&b, lir_for(A, j, c64(0), ref(n), l2));
  k->body = b;
  if (free_it) {
    LirStmt *fr = lir_call(A, LH_FREE);
    fr->u.call.ptr = w;
    k->cleanup = fr;
  }
  return k;
}

static char *print_kernel(const LirKernel *k, bool with_header);
#define ck_assert_has(text, line) \
  ck_assert_msg(strstr((text), (line)), "missing line: %s\nin:\n%s", (line), \
                (text))

/* ---- storage by hand ---- */

static tj_storage dense_vec(int dtype, void *vals, int64_t n) {
  tj_storage s = {.order = 1, .dtype = dtype, .pos_width = 4, .crd_width = 4};
  s.dims[0] = n;
  s.levels[0] = (tj_level_storage){.kind = TJ_LVL_DENSE, .size = n};
  s.vals = vals, s.vals_len = n;
  return s;
}

static tj_storage scalar(double *val) {
  tj_storage s = {.order = 0, .dtype = TJ_F64, .pos_width = 4, .crd_width = 4};
  s.vals = val, s.vals_len = 1;
  return s;
}

static tj_storage sparse_vec(int32_t *pos, int32_t *crd, double *vals,
                             int64_t n) {
  tj_storage s = {.order = 1, .dtype = TJ_F64, .pos_width = 4, .crd_width = 4};
  s.dims[0] = n;
  int64_t nnz = pos ? pos[1] : 0;
  s.levels[0] = (tj_level_storage){.kind = TJ_LVL_COMPRESSED, .size = n,
                                   .pos = pos, .crd = crd, .pos_len = 2,
                                   .crd_len = nnz};
  s.vals = vals, s.vals_len = nnz;
  return s;
}

/* 3x4 CSR:  [1 0 2 0; 0 0 0 0; 3 4 0 5] */
static int32_t csr_pos[] = {0, 2, 2, 5}, csr_crd[] = {0, 2, 0, 1, 3};
static double csr_vals[] = {1, 2, 3, 4, 5}, spmv_x[] = {1, 10, 100, 1000};

static tj_storage csr(void) {
  tj_storage s = {.order = 2, .dtype = TJ_F64, .pos_width = 4, .crd_width = 4};
  s.dims[0] = 3, s.dims[1] = 4;
  s.map[0].dim = 0, s.map[1].dim = 1;
  s.levels[0] = (tj_level_storage){.kind = TJ_LVL_DENSE, .size = 3};
  s.levels[1] = (tj_level_storage){.kind = TJ_LVL_COMPRESSED, .size = 4,
                                   .pos = csr_pos, .crd = csr_crd,
                                   .pos_len = 4, .crd_len = 5};
  s.vals = csr_vals, s.vals_len = 5;
  return s;
}

static int32_t ma_pos[] = {0, 3}, ma_crd[] = {0, 3, 5};
static int32_t mb_pos[] = {0, 4}, mb_crd[] = {1, 3, 6, 7};
static double ma_vals[] = {1, 2, 3}, mb_vals[] = {10, 20, 30, 40};
static const double merge_want[8] = {1, 10, 0, 22, 0, 3, 30, 40};
static double dense_in[] = {0, 1.5, 0, 0, -2, 0, 7, 0};

static int32_t run(const LirKernel *k, tj_storage **ops, Diag *d) {
  diag_init(d);
  return lir_interp(k, ops, d);
}

static void free_arrays(tj_storage *s) {
  for (int l = 0; l < s->order; l++) {
    free(s->levels[l].pos);
    free(s->levels[l].crd);
  }
  free(s->vals);
}

/* ---- interpreter ---- */

START_TEST(test_dense_sum) {
  double xs[] = {1, 2, 3, 4.5}, out = -1;
  tj_storage s = scalar(&out), x = dense_vec(TJ_F64, xs, 4);
  tj_storage *ops[] = {&s, &x};
  Diag d;
  ck_assert_int_eq(run(build_sum(0), ops, &d), 0);
  ck_assert_msg(diag_ok(&d), "%s", d.msg);
  ck_assert_double_eq(out, 10.5);
}
END_TEST

START_TEST(test_spmv_csr) {
  double y[3] = {-1, -1, -1};
  tj_storage ys = dense_vec(TJ_F64, y, 3), as = csr(),
             xs = dense_vec(TJ_F64, spmv_x, 4);
  tj_storage *ops[] = {&ys, &as, &xs};
  Diag d;
  ck_assert_int_eq(run(build_spmv(), ops, &d), 0);
  ck_assert_double_eq(y[0], 201);
  ck_assert_double_eq(y[1], 0);
  ck_assert_double_eq(y[2], 3 + 40 + 5000);
}
END_TEST

START_TEST(test_append_compressed) {
  tj_storage c = sparse_vec(NULL, NULL, NULL, 8),
             dd = dense_vec(TJ_F64, dense_in, 8);
  c.levels[0].pos_len = 0;
  tj_storage *ops[] = {&c, &dd};
  Diag d;
  ck_assert_int_eq(run(build_compress(), ops, &d), 0);
  ck_assert_msg(diag_ok(&d), "%s", d.msg);
  int32_t *pos = c.levels[0].pos, *crd = c.levels[0].crd;
  double *vals = c.vals;
  ck_assert_int_eq(c.levels[0].pos_len, 2);
  ck_assert_int_eq(c.levels[0].crd_len, 3);
  ck_assert_int_eq(c.vals_len, 3);
  ck_assert_int_ge(c.levels[0].crd_cap, 3);
  ck_assert_int_eq(pos[0], 0);
  ck_assert_int_eq(pos[1], 3);
  ck_assert_int_eq(crd[0], 1);
  ck_assert_int_eq(crd[1], 4);
  ck_assert_int_eq(crd[2], 6);
  ck_assert_double_eq(vals[0], 1.5);
  ck_assert_double_eq(vals[1], -2);
  ck_assert_double_eq(vals[2], 7);
  free_arrays(&c);
}
END_TEST

START_TEST(test_merge_union) {
  double z[8] = {0};
  tj_storage zs = dense_vec(TJ_F64, z, 8),
             as = sparse_vec(ma_pos, ma_crd, ma_vals, 8),
             bs = sparse_vec(mb_pos, mb_crd, mb_vals, 8);
  tj_storage *ops[] = {&zs, &as, &bs};
  Diag d;
  ck_assert_int_eq(run(build_merge(), ops, &d), 0);
  ck_assert_msg(diag_ok(&d), "%s", d.msg);
  for (int i = 0; i < 8; i++) ck_assert_double_eq(z[i], merge_want[i]);
}
END_TEST

START_TEST(test_workspace_cleanup) {
  double x[] = {1, 2, 3}, y[3] = {0};
  tj_storage ys = dense_vec(TJ_F64, y, 3), xs = dense_vec(TJ_F64, x, 3);
  tj_storage *ops[] = {&ys, &xs};
  Diag d;
  ck_assert_int_eq(run(build_workspace(false, true), ops, &d), 0);
  ck_assert_double_eq(y[0], 6);
  ck_assert_double_eq(y[1], 4);
  ck_assert_double_eq(y[2], 2);
  /* a fault after the allocation still frees w (ASan checks the leak) */
  ck_assert_int_eq(run(build_workspace(true, true), ops, &d),
                   LIR_INTERP_FAULT);
  ck_assert_str_eq(d.msg,
                   "loop IR interpreter: index 3 out of bounds 0..2 of w");
  /* a kernel that forgets to free is reported, and the memory released */
  ck_assert_int_eq(run(build_workspace(false, false), ops, &d),
                   LIR_INTERP_FAULT);
  ck_assert_str_eq(d.msg, "loop IR interpreter: workspace w was never freed");
}
END_TEST

/* f[0] = 16777216f + 1f (rounds in float), f[1] = sqrtf(2f),
 * f[2] = (float)1e54 (inf); n[0] = INT32_MAX + 1, n[1] = -7 / 2,
 * n[2] = -7 % 2, n[3] = (int32_t)-2.7f, n[4] = INT32_MAX * 2. */
static LirKernel *build_arith(void) {
  LirKernel *k = lir_kernel(A, "arith");
  operand(k, "f", 1, TJ_F32, true);
  operand(k, "n", 1, TJ_I32, true);
  LirStmt *b = NULL;
  LirVar *fv = let(k, &b, "f_vals", LT_PTR_F32, lir_field(A, k, 0, LF_VALS, 0));
  LirVar *nv = let(k, &b, "n_vals", LT_PTR_I32, lir_field(A, k, 1, LF_VALS, 0));
  LirVar *big = let(k, &b, "big", LT_F32, lir_const_fp(A, LT_F32, 16777216.0));
  LirVar *mx = let(k, &b, "mx", LT_I32, lir_const_int(A, LT_I32, INT32_MAX));
  LirVar *m7 = let(k, &b, "m7", LT_I32, lir_const_int(A, LT_I32, -7));
  LirVar *e18 = let(k, &b, "e18", LT_F64, lir_const_fp(A, LT_F64, 1e18));
  LirExpr *one_f = lir_const_fp(A, LT_F32, 1), *two = lir_const_int(A, LT_I32, 2);
  LirExpr *fs[] = {bin(LOP_ADD, ref(big), one_f),
                   lir_un(A, LUN_SQRT, lir_const_fp(A, LT_F32, 2)),
                   lir_cast(A, LT_F32, bin(LOP_MUL, ref(e18),
                                           bin(LOP_MUL, ref(e18), ref(e18))))};
  LirExpr *ns[] = {bin(LOP_ADD, ref(mx), lir_const_int(A, LT_I32, 1)),
                   bin(LOP_DIV, ref(m7), two), bin(LOP_REM, ref(m7), two),
                   lir_cast(A, LT_I32, lir_const_fp(A, LT_F32, -2.7)),
                   bin(LOP_MUL, ref(mx), two)};
  for (int i = 0; i < 3; i++) add(&b, lir_store(A, ref(fv), c64(i), fs[i]));
  for (int i = 0; i < 5; i++) add(&b, lir_store(A, ref(nv), c64(i), ns[i]));
  k->body = b;
  return k;
}

START_TEST(test_f32_i32_semantics) {
  float f[3] = {0};
  int32_t n[5] = {0};
  tj_storage fs = dense_vec(TJ_F32, f, 3), ns = dense_vec(TJ_I32, n, 5);
  tj_storage *ops[] = {&fs, &ns};
  Diag d;
  ck_assert_int_eq(run(build_arith(), ops, &d), 0);
  ck_assert_msg(diag_ok(&d), "%s", d.msg);
  ck_assert_float_eq(f[0], 16777216.0f);   /* in double it would be ...17 */
  ck_assert_float_eq(f[1], sqrtf(2.0f));
  ck_assert(isinf(f[2]));
  ck_assert_int_eq(n[0], INT32_MIN);
  ck_assert_int_eq(n[1], -3);
  ck_assert_int_eq(n[2], -1);
  ck_assert_int_eq(n[3], -2);
  ck_assert_int_eq(n[4], -2);
}
END_TEST

START_TEST(test_out_of_bounds) {
  double xs[] = {1, 2, 3, 4}, out = 0;
  tj_storage s = scalar(&out), x = dense_vec(TJ_F64, xs, 4);
  tj_storage *ops[] = {&s, &x};
  Diag d;
  ck_assert_int_eq(run(build_sum(1), ops, &d), LIR_INTERP_FAULT);
  ck_assert_int_eq(d.status, TJ_ERR_INVALID);
  ck_assert_str_eq(d.msg,
                   "loop IR interpreter: index 4 out of bounds 0..3 of x_vals");
  ck_assert_double_eq(out, 0);  /* the fault stopped the kernel */
  /* a storage that does not match the kernel is refused up front */
  x.dtype = TJ_F32;
  ck_assert_int_eq(run(build_sum(0), ops, &d), LIR_INTERP_FAULT);
  ck_assert_str_eq(d.msg, "loop IR interpreter: operand x has dtype f32 but "
                          "the kernel expects f64");
}
END_TEST

/* A pointer read before a reserve that moves the array is stale after it. */
START_TEST(test_stale_pointer) {
  LirKernel *k = lir_kernel(A, "stale");
  operand(k, "c", 1, TJ_F64, true);
  LirStmt *b = NULL;
  add(&b, reserve(0, TJ_ARR_VALS, 0, c64(4)));
  LirVar *cv = let(k, &b, "c_vals", LT_PTR_F64, lir_field(A, k, 0, LF_VALS, 0));
  add(&b, reserve(0, TJ_ARR_VALS, 0, c64(1 << 20)));
  add(&b, lir_store(A, ref(cv), c64(0), lir_const_fp(A, LT_F64, 1)));
  k->body = b;
  tj_storage c = sparse_vec(NULL, NULL, NULL, 4);
  tj_storage *ops[] = {&c};
  Diag d;
  ck_assert_int_eq(run(k, ops, &d), LIR_INTERP_FAULT);
  ck_assert_str_eq(d.msg, "loop IR interpreter: stale pointer to c_vals (the "
                          "array moved after a reserve)");
  free_arrays(&c);
}
END_TEST

/* out = the workspace {3, 1, 2, 0} sorted, then entries 1..2 zeroed:
 * {0, 0, 0, 3}; with bad_range the zero range runs past the end. */
static LirKernel *build_sort_zero(bool bad_range) {
  LirKernel *k = lir_kernel(A, "sort_zero");
  operand(k, "o", 1, TJ_I32, true);
  LirStmt *b = NULL, *l = NULL, *cl = NULL;
  LirVar *w = let(k, &b, "w", LT_PTR_I32, NULL);
  LirVar *ov = let(k, &b, "o_vals", LT_PTR_I32, lir_field(A, k, 0, LF_VALS, 0));
  LirStmt *al = lir_call(A, LH_ALLOC), *so = lir_call(A, LH_SORT_CRD),
          *ze = lir_call(A, LH_ZERO), *fr = lir_call(A, LH_FREE);
  al->u.call.ptr = w, al->u.call.a = c64(16);
  add(&b, al);
  int32_t init[] = {3, 1, 2, 0};
  for (int i = 0; i < 4; i++)
    add(&b, lir_store(A, ref(w), c64(i), lir_const_int(A, LT_I32, init[i])));
  so->u.call.ptr = w, so->u.call.a = c64(0), so->u.call.b = c64(4);
  add(&b, so);
  ze->u.call.ptr = w, ze->u.call.a = c64(1), ze->u.call.b = c64(bad_range ? 5 : 3);
  add(&b, ze);
  LirVar *i = lir_var(A, k, "i", LT_I64);
  add(&l, lir_store(A, ref(ov), ref(i), ld(w, ref(i))));
  add(&b, lir_for(A, i, c64(0), c64(4), l));
  fr->u.call.ptr = w;
  add(&cl, fr);
  k->body = b, k->cleanup = cl;
  return k;
}

START_TEST(test_sort_and_zero) {
  int32_t o[4] = {9, 9, 9, 9};
  tj_storage os = dense_vec(TJ_I32, o, 4);
  tj_storage *ops[] = {&os};
  Diag d;
  ck_assert_int_eq(run(build_sort_zero(false), ops, &d), 0);
  ck_assert_msg(diag_ok(&d), "%s", d.msg);
  ck_assert_int_eq(o[0], 0);
  ck_assert_int_eq(o[1], 0);
  ck_assert_int_eq(o[2], 0);
  ck_assert_int_eq(o[3], 3);
  ck_assert_int_eq(run(build_sort_zero(true), ops, &d), LIR_INTERP_FAULT);
  ck_assert_str_eq(d.msg, "loop IR interpreter: zero range 1..5 out of bounds "
                          "0..4 of w");
  char *c = print_kernel(build_sort_zero(false), false);
  ck_assert_has(c, "  tj_rt_sort_crd(w, 4, sizeof *w);\n");
  ck_assert_has(c, "  memset(w + 1, 0, (3 - 1) * sizeof *w);\n");
  free(c);
}
END_TEST

/* ---- verifier ---- */

START_TEST(test_verify_scope) {
  LirKernel *k = build_spmv();
  Diag d;
  diag_init(&d);
  ck_assert(lir_verify(k, &d));
  /* use the row accumulator t after the row loop */
  LirStmt *outer = k->body;
  while (outer->next) outer = outer->next;
  LirVar *t = outer->u.loop.body->u.decl.var;
  LirVar *m = NULL;
  for (LirStmt *s = k->body; s; s = s->next)
    if (s->kind == LS_DECL && !strcmp(s->u.decl.var->name, "m"))
      m = s->u.decl.var;
  lir_append(&k->body, lir_assign(A, m, lir_cast(A, LT_I64, ref(t))));
  ck_assert(!lir_verify(k, &d));
  ck_assert_int_eq(d.status, TJ_ERR_INTERNAL);
  ck_assert_str_eq(d.msg, "loop IR: variable 't' used outside its scope in "
                          "assignment to 'm'");
  /* the interpreter refuses unverifiable IR with the same message */
  ck_assert_int_eq(run(k, NULL, &d), LIR_INTERP_FAULT);
  ck_assert_str_eq(d.msg, "loop IR: variable 't' used outside its scope in "
                          "assignment to 'm'");
}
END_TEST

START_TEST(test_verify_types) {
  Diag d;
  LirKernel *k = lir_kernel(A, "bad");
  operand(k, "x", 1, TJ_F64, false);
  LirVar *s = lir_var(A, k, "s", LT_F64), *h = lir_var(A, k, "h", LT_F32);
  add(&k->body, lir_decl(A, s, NULL));
  add(&k->body, lir_decl(A, h, NULL));
  add(&k->body, lir_assign(A, s, bin(LOP_ADD, ref(s), ref(h))));
  diag_init(&d);
  ck_assert(!lir_verify(k, &d));
  ck_assert_str_eq(d.msg, "loop IR: type mismatch in '+': f64 vs f32 in "
                          "assignment to 's'");
  /* store of an f32 into an f64 array */
  k->body->next->next =
      lir_store(A, lir_field(A, k, 0, LF_VALS, 0), c64(0), ref(h));
  diag_init(&d);
  ck_assert(!lir_verify(k, &d));
  ck_assert_str_eq(d.msg,
                   "loop IR: value of type f32 assigned to f64 in store");
  /* a while condition that is not bool */
  k->body->next->next = lir_while(A, ref(s), NULL);
  diag_init(&d);
  ck_assert(!lir_verify(k, &d));
  ck_assert_str_eq(d.msg,
                   "loop IR: condition has type f64, expected bool in while loop");
  /* SETFIELD of a field that is not a length */
  k->body->next->next = lir_setfield(A, 0, LF_DIM, 0, c64(3));
  diag_init(&d);
  ck_assert(!lir_verify(k, &d));
  ck_assert_str_eq(d.msg,
                   "loop IR: setfield of a field that is not a length in setfield");
}
END_TEST

/* ---- printer ---- */

static char *print_kernel_flags(const LirKernel *k, unsigned flags) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ck_assert_ptr_nonnull(f);
  lir_print(f, k, flags);
  fclose(f);
  return buf;
}

static char *print_kernel(const LirKernel *k, bool with_header) {
  return print_kernel_flags(k, with_header ? LIR_PRINT_HEADER : 0);
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

/* ---- vectorization classes (ir/lir_class.c) ---- */

/* Variables of a loop over j: n and x outer (uniform), t a body variable the
 * caller says is varying, f a float the caller says is unit (which no rule
 * may keep unit), p/q arrays; the env counts reads and records loads. */
typedef struct ClassWorld {
  LirKernel *k;
  LirVar *j, *n, *x, *t, *f, *p, *q;
  int reads[16];
  int nloads;
  LirClass load_ptr, load_idx;  /* of the last load */
} ClassWorld;

static LirClass world_var(void *cx, const LirVar *v) {
  ClassWorld *w = cx;
  return v == w->t ? LIR_VARYING : v == w->f ? LIR_UNIT : LIR_UNIFORM;
}
static void world_read(void *cx, const LirVar *v) { ((ClassWorld *)cx)->reads[v->id]++; }
static void world_load(void *cx, LirClass ptr, LirClass idx) {
  ClassWorld *w = cx;
  w->nloads++, w->load_ptr = ptr, w->load_idx = idx;
}

static void world_init(ClassWorld *w) {
  *w = (ClassWorld){.k = lir_kernel(A, "classes")};
  operand(w->k, "x", 1, TJ_F64, false);
  w->j = lir_var(A, w->k, "j", LT_I64), w->n = lir_var(A, w->k, "n", LT_I64);
  w->x = lir_var(A, w->k, "x", LT_F64), w->t = lir_var(A, w->k, "t", LT_I64);
  w->f = lir_var(A, w->k, "f", LT_F64), w->p = lir_var(A, w->k, "p", LT_PTR_F64);
  w->q = lir_var(A, w->k, "q", LT_PTR_I32);
}

static LirClass world_classify(ClassWorld *w, const LirExpr *e) {
  LirClassEnv env = {world_var, world_read, world_load, w};
  return lir_classify(e, w->j, &env);
}

typedef struct ClassCase {
  const char *what;
  LirExpr *e;
  LirClass want;
} ClassCase;

/* Fills c with one case per rule; returns how many. */
static int class_cases(ClassWorld *w, ClassCase *c) {
  LirExpr *j = ref(w->j), *n = ref(w->n), *x = ref(w->x);
  LirExpr *j32 = lir_cast(A, LT_I32, j);
  int k = 0;
  c[k++] = (ClassCase){"constant", c64(3), LIR_UNIFORM};
  c[k++] = (ClassCase){"field", lir_field(A, w->k, 0, LF_DIM, 0), LIR_UNIFORM};
  c[k++] = (ClassCase){"iv", j, LIR_UNIT};
  c[k++] = (ClassCase){"outer var", n, LIR_UNIFORM};
  c[k++] = (ClassCase){"varying var", ref(w->t), LIR_VARYING};
  c[k++] = (ClassCase){"iv + n", bin(LOP_ADD, j, n), LIR_UNIT};
  c[k++] = (ClassCase){"n + iv", bin(LOP_ADD, n, j), LIR_UNIT};
  c[k++] = (ClassCase){"iv - n", bin(LOP_SUB, j, n), LIR_UNIT};
  c[k++] = (ClassCase){"n - iv", bin(LOP_SUB, n, j), LIR_VARYING};
  c[k++] = (ClassCase){"iv + iv", bin(LOP_ADD, j, j), LIR_VARYING};
  c[k++] = (ClassCase){"iv * n", bin(LOP_MUL, j, n), LIR_VARYING};
  c[k++] = (ClassCase){"n * n", bin(LOP_MUL, n, n), LIR_UNIFORM};
  c[k++] = (ClassCase){"iv < n", bin(LOP_LT, j, n), LIR_VARYING};
  c[k++] = (ClassCase){"float unit + x", bin(LOP_ADD, ref(w->f), x), LIR_VARYING};
  c[k++] = (ClassCase){"(i32) iv", j32, LIR_UNIT};
  c[k++] = (ClassCase){"(i32) iv + 1", bin(LOP_ADD, j32, lir_const_int(A, LT_I32, 1)),
                       LIR_UNIT};
  c[k++] = (ClassCase){"(i64)(i32) iv", i64(j32), LIR_UNIT};
  c[k++] = (ClassCase){"(double) iv", lir_cast(A, LT_F64, j), LIR_VARYING};
  c[k++] = (ClassCase){"(double) n", lir_cast(A, LT_F64, n), LIR_UNIFORM};
  c[k++] = (ClassCase){"(bool) iv", lir_cast(A, LT_BOOL, j), LIR_VARYING};
  c[k++] = (ClassCase){"(i64) varying", i64(ref(w->t)), LIR_VARYING};
  c[k++] = (ClassCase){"-n", lir_un(A, LUN_NEG, n), LIR_UNIFORM};
  c[k++] = (ClassCase){"-iv", lir_un(A, LUN_NEG, j), LIR_VARYING};
  c[k++] = (ClassCase){"p[n]", ld(w->p, n), LIR_UNIFORM};
  c[k++] = (ClassCase){"p[iv]", ld(w->p, j), LIR_VARYING};
  c[k++] = (ClassCase){"p[q[iv]]", ld(w->p, i64(ld(w->q, j))), LIR_VARYING};
  c[k++] = (ClassCase){"n < n ? x : x", lir_select(A, bin(LOP_LT, n, n), x, x), LIR_UNIFORM};
  c[k++] = (ClassCase){"n < n ? p[iv] : x",
                       lir_select(A, bin(LOP_LT, n, n), ld(w->p, j), x), LIR_VARYING};
  return k;
}

enum { NCLASS_CASES = 28 };

START_TEST(test_classify_rules) {
  ClassWorld w;
  ClassCase c[32];
  world_init(&w);
  ck_assert_int_eq(class_cases(&w, c), NCLASS_CASES);
  ck_assert_msg(world_classify(&w, c[_i].e) == c[_i].want, "%s: class %d, want %d",
                c[_i].what, world_classify(&w, c[_i].e), c[_i].want);
}
END_TEST

/* The hooks see every read and every load, also under a uniform select. */
START_TEST(test_classify_hooks) {
  ClassWorld w;
  world_init(&w);
  LirExpr *n = ref(w.n), *j = ref(w.j);
  LirExpr *gather = ld(w.p, bin(LOP_ADD, i64(ld(w.q, j)), n));
  ck_assert_int_eq(world_classify(&w, gather), LIR_VARYING);
  ck_assert_int_eq(w.nloads, 2);
  ck_assert_int_eq(w.load_ptr, LIR_UNIFORM);
  ck_assert_int_eq(w.load_idx, LIR_VARYING);
  ck_assert_int_eq(w.reads[w.j->id], 1);
  ck_assert_int_eq(w.reads[w.n->id], 1);
  ck_assert_int_eq(w.reads[w.p->id], 1);
  LirExpr *sel = lir_select(A, bin(LOP_LT, n, n), ld(w.p, n), ref(w.x));
  ck_assert_int_eq(world_classify(&w, sel), LIR_UNIFORM);
  ck_assert_int_eq(w.nloads, 3);
  ck_assert_int_eq(w.load_idx, LIR_UNIFORM);
  ck_assert_int_eq(w.reads[w.n->id], 4);
  ck_assert_int_eq(w.reads[w.x->id], 1);
}
END_TEST

START_TEST(test_print_merge) {
  char *c = print_kernel(build_merge(), false);
  ck_assert_int_eq(count(c, "while ("), 3);
  ck_assert_has(c, "int32_t merge_add(tj_storage **operands) {\n");
  ck_assert_has(c, "  tj_storage *a = operands[1];\n");
  ck_assert_has(c, "  int32_t *a_crd = ((int32_t *)a->levels[0].crd);\n");
  ck_assert_has(c, "  while (pa < pa_end && pb < pb_end) {\n");
  ck_assert_has(c, "    int64_t i = (ia < ib ? ia : ib);\n");
  ck_assert_has(c, "    if (ia == i && ib == i) {\n"
                   "      z_vals[i] = a_vals[pa] + b_vals[pb];\n"
                   "    } else if (ia == i) {\n"
                   "      z_vals[i] = a_vals[pa];\n"
                   "    } else {\n");
  ck_assert_has(c, "    pa += (int64_t)(ia == i);\n");
  ck_assert_has(c, "    z_vals[(int64_t)a_crd[pa]] = a_vals[pa];\n");
  ck_assert_has(c, "  return rc;\n}\n");
  ck_assert(!strstr(c, "fail:"));  /* nothing can fail */
  free(c);
}
END_TEST

START_TEST(test_print_calls_and_cleanup) {
  char *c = print_kernel(build_compress(), true);
  ck_assert_has(c, "#include \"runtime/abi.h\"\n");
  ck_assert_has(c, "  if ((rc = tj_rt_reserve(c, TJ_ARR_POS, 0, 2)) != 0) "
                   "goto fail;\n");
  ck_assert_has(c, "      if ((rc = tj_rt_reserve(c, TJ_ARR_CRD, 0, nz + 1)) "
                   "!= 0) goto fail;\n");
  ck_assert_has(c, "    if (v != 0.0) {\n");
  ck_assert_has(c, "  c->levels[0].crd_len = nz;\n");
  ck_assert_has(c, "  for (int64_t i = 0; i < d->dims[0]; i++) {\n");
  ck_assert_has(c, "fail:\n  return rc;\n");
  free(c);
  c = print_kernel(build_workspace(false, true), false);
  /* w is read by cleanup: declared at the top, assigned in place */
  ck_assert_has(c, "  int32_t rc = 0;\n  double *w = 0;\n  w = 0;\n");
  ck_assert_has(c, "  if ((rc = tj_rt_alloc(n * 8, (void **)&w)) != 0) "
                   "goto fail;\n");
  ck_assert_has(c, "fail:\n  tj_rt_free(w);\n  w = 0;\n  return rc;\n");
  free(c);
  c = print_kernel(build_spmv(), false);
  ck_assert_has(c, "  /* parallel (#pragma omp parallel for) */\n"
                   "  for (int64_t i = 0; i < m; i++) {\n");
  ck_assert_has(c, "    for (int64_t p = (int64_t)A_pos[i]; "
                   "p < (int64_t)A_pos[i + 1]; p++) {\n");
  ck_assert_has(c, "      t += A_vals[p] * x_vals[A_crd[p]];\n");
  free(c);
  c = print_kernel(build_arith(), false);
  ck_assert_has(c, "  float big = 16777216.0f;\n");
  ck_assert_has(c, "  f_vals[1] = sqrtf(2.0f);\n");
  ck_assert_has(c, "  double e18 = 1e+18;\n");
  ck_assert_has(c, "  f_vals[2] = (float)(e18 * (e18 * e18));\n");
  ck_assert_has(c, "  n_vals[3] = (int32_t)-2.70000005f;\n");
  free(c);
}
END_TEST

/* ---- the printed C, compiled and run against the interpreter ---- */

typedef struct Tmp { char dir[64]; char root[1024]; } Tmp;

static bool have_cc(void) { return system("cc --version >/dev/null 2>&1") == 0; }

static void tmp_init(Tmp *t) {
  const char *td = getenv("TJ_TEST_DIR");  /* else this file's folder */
  snprintf(t->root, sizeof t->root, "%s", td ? td : __FILE__);
  char *slash = strrchr(t->root, '/');
  if (!td && slash) *slash = 0;
  strcat(t->root, "/..");
  snprintf(t->dir, sizeof t->dir, "/tmp/tj_lir_XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(t->dir));
}

static void tmp_done(Tmp *t) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", t->dir);
  ck_assert_int_eq(system(cmd), 0);
}

/* Generated code reaches the runtime helpers through pointers the test
 * fills in: the test binary does not export its symbols to a dlopen'ed
 * library (no -rdynamic), so the helper names are macros over them. */
static const char *prelude =
    "#include <math.h>\n#include <stdbool.h>\n#include <stdint.h>\n"
    "#include <string.h>\n#include \"runtime/abi.h\"\n"
    "int32_t (*tj_p_reserve)(tj_storage *, int32_t, int32_t, int64_t);\n"
    "int32_t (*tj_p_alloc)(int64_t, void **);\n"
    "void (*tj_p_free)(void *);\n"
    "void (*tj_p_sort_crd)(void *, int64_t, int32_t);\n"
    "void (*tj_p_parallel_for_sched)(int64_t, int64_t, const void *, int32_t, const void *,\n"
    "                                int32_t, int32_t, tj_par_body, void *);\n"
    "#define tj_rt_reserve tj_p_reserve\n#define tj_rt_alloc tj_p_alloc\n"
    "#define tj_rt_free tj_p_free\n#define tj_rt_sort_crd tj_p_sort_crd\n"
    "#define tj_rt_parallel_for_sched tj_p_parallel_for_sched\n";

static void write_file(const char *path, const char *a, const char *b) {
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(a, f);
  fputs(b, f);
  fclose(f);
}

static void set_ptr(void *so, const char *name, void *fn) {
  void **slot = dlsym(so, name);
  ck_assert_msg(slot != NULL, "dlsym %s: %s", name, dlerror());
  *slot = fn;
}

/* Compiles k's C printed with flags (as is, -Wall -Werror) and as a shared
 * library; returns the dlopen handle and sets *fn to the kernel. */
static void *compile_flags(Tmp *t, const LirKernel *k, tj_kernel_fn *fn, unsigned flags) {
  char path[128], so_path[128], cmd[2048];
  char *c = print_kernel_flags(k, flags | LIR_PRINT_HEADER);
  snprintf(path, sizeof path, "%s/%s.c", t->dir, k->name);
  write_file(path, c, "");
  free(c);
  snprintf(cmd, sizeof cmd, "cc -std=c11 -Wall -Wextra -Werror -c -I'%s' "
           "-include stdbool.h '%s' -o '%s/%s.o'", t->root, path, t->dir,
           k->name);
  ck_assert_msg(system(cmd) == 0, "failed: %s", cmd);
  c = print_kernel_flags(k, flags);
  snprintf(path, sizeof path, "%s/%s_so.c", t->dir, k->name);
  write_file(path, prelude, c);
  free(c);
  snprintf(so_path, sizeof so_path, "%s/%s.so", t->dir, k->name);
  snprintf(cmd, sizeof cmd, "cc -std=c11 -O1 -shared -fPIC -I'%s' '%s' -o "
           "'%s' -lm", t->root, path, so_path);
  ck_assert_msg(system(cmd) == 0, "failed: %s", cmd);
  void *so = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(so != NULL, "dlopen: %s", dlerror());
  set_ptr(so, "tj_p_reserve", (void *)tj_rt_reserve);
  set_ptr(so, "tj_p_alloc", (void *)tj_rt_alloc);
  set_ptr(so, "tj_p_free", (void *)tj_rt_free);
  set_ptr(so, "tj_p_sort_crd", (void *)tj_rt_sort_crd);
  set_ptr(so, "tj_p_parallel_for_sched", (void *)tj_rt_parallel_for_sched);
  *(void **)fn = dlsym(so, k->name);
  ck_assert_ptr_nonnull(*(void **)fn);
  return so;
}

static void *compile(Tmp *t, const LirKernel *k, tj_kernel_fn *fn) {
  return compile_flags(t, k, fn, 0);
}

/* SpMV with a prefetch of x a row past the array in its inner loop: a
 * hint, so the interpreter reads nothing there, the compiled C (GCC's and
 * clang's __builtin_prefetch) runs it, and both give SpMV's values; the
 * verifier wants a pointer and an integer index. */
static LirKernel *build_spmv_prefetch(void) {
  LirKernel *k = build_spmv();
  LirStmt *s = k->body;
  while (s->kind != LS_FOR) s = s->next;
  LirStmt *inner = s->u.loop.body;
  while (inner->kind != LS_FOR) inner = inner->next;
  LirVar *xv = k->body->next->next->next->u.decl.var;   /* x_vals */
  LirStmt *pf = lir_prefetch(A, ref(xv), bin(LOP_ADD, ref(inner->u.loop.iv), c64(1000)));
  pf->next = inner->u.loop.body;
  inner->u.loop.body = pf;
  return k;
}

START_TEST(test_prefetch) {
  LirKernel *k = build_spmv_prefetch();
  Diag d;
  diag_init(&d);
  ck_assert_msg(lir_verify(k, &d), "%s", d.msg);
  char *c = print_kernel(k, false);
  ck_assert_msg(strstr(c, "__builtin_prefetch(&x_vals[p + 1000]);"), "%s", c);
  free(c);
  double y[3] = {-1, -1, -1};
  tj_storage ys = dense_vec(TJ_F64, y, 3), as = csr(), xs = dense_vec(TJ_F64, spmv_x, 4);
  ck_assert_int_eq(run(k, (tj_storage *[]){&ys, &as, &xs}, &d), 0);
  ck_assert_double_eq(y[0], 201);
  ck_assert_double_eq(y[2], 3 + 40 + 5000);
  if (have_cc()) {
    Tmp t;
    tmp_init(&t);
    tj_kernel_fn fn;
    double yc[3] = {0};
    tj_storage y2 = dense_vec(TJ_F64, yc, 3);
    void *so = compile(&t, k, &fn);
    ck_assert_int_eq(fn((tj_storage *[]){&y2, &as, &xs}), 0);
    ck_assert_mem_eq(y, yc, sizeof y);
    dlclose(so);
    tmp_done(&t);
  }
  LirKernel *bad = lir_kernel(A, "bad");
  operand(bad, "x", 1, TJ_F64, false);
  LirVar *s = lir_var(A, bad, "s", LT_F64);
  add(&bad->body, lir_decl(A, s, NULL));
  add(&bad->body, lir_prefetch(A, ref(s), c64(0)));
  diag_init(&d);
  ck_assert(!lir_verify(bad, &d));
  ck_assert_str_eq(d.msg, "loop IR: prefetch through f64, which is not a pointer in prefetch");
}
END_TEST

START_TEST(test_compiled_matches_interp) {
  if (!have_cc()) {
    fprintf(stderr, "check_loop_ir: SKIP compiled-C test: no cc found\n");
    return;
  }
  Tmp t;
  tmp_init(&t);
  Diag d;
  tj_kernel_fn fn;
  /* SpMV */
  double yi[3] = {0}, yc[3] = {0};
  tj_storage as = csr(), xs = dense_vec(TJ_F64, spmv_x, 4);
  tj_storage y1 = dense_vec(TJ_F64, yi, 3), y2 = dense_vec(TJ_F64, yc, 3);
  LirKernel *k = build_spmv();
  void *so = compile(&t, k, &fn);
  ck_assert_int_eq(run(k, (tj_storage *[]){&y1, &as, &xs}, &d), 0);
  ck_assert_int_eq(fn((tj_storage *[]){&y2, &as, &xs}), 0);
  ck_assert_mem_eq(yi, yc, sizeof yi);
  dlclose(so);
  /* append into a compressed output */
  tj_storage c1 = sparse_vec(NULL, NULL, NULL, 8),
             c2 = sparse_vec(NULL, NULL, NULL, 8),
             dd = dense_vec(TJ_F64, dense_in, 8);
  k = build_compress();
  so = compile(&t, k, &fn);
  ck_assert_int_eq(run(k, (tj_storage *[]){&c1, &dd}, &d), 0);
  ck_assert_int_eq(fn((tj_storage *[]){&c2, &dd}), 0);
  ck_assert_int_eq(c2.levels[0].pos_len, 2);
  ck_assert_int_eq(c2.levels[0].crd_len, c1.levels[0].crd_len);
  ck_assert_int_eq(c2.vals_len, c1.vals_len);
  ck_assert_mem_eq(c1.levels[0].pos, c2.levels[0].pos, 8);
  ck_assert_mem_eq(c1.levels[0].crd, c2.levels[0].crd, 3 * 4);
  ck_assert_mem_eq(c1.vals, c2.vals, 3 * 8);
  free_arrays(&c1);
  free_arrays(&c2);
  dlclose(so);
  /* while-loop merge */
  double zi[8] = {0}, zc[8] = {0};
  tj_storage z1 = dense_vec(TJ_F64, zi, 8), z2 = dense_vec(TJ_F64, zc, 8),
             ma = sparse_vec(ma_pos, ma_crd, ma_vals, 8),
             mb = sparse_vec(mb_pos, mb_crd, mb_vals, 8);
  k = build_merge();
  so = compile(&t, k, &fn);
  ck_assert_int_eq(run(k, (tj_storage *[]){&z1, &ma, &mb}, &d), 0);
  ck_assert_int_eq(fn((tj_storage *[]){&z2, &ma, &mb}), 0);
  ck_assert_mem_eq(zi, zc, sizeof zi);
  ck_assert_mem_eq(zc, merge_want, sizeof zc);
  dlclose(so);
  /* workspace + cleanup, and f32 / wrapping-free arithmetic */
  double wx[] = {1, 2, 3}, wi[3], wc[3];
  tj_storage wxs = dense_vec(TJ_F64, wx, 3), w1 = dense_vec(TJ_F64, wi, 3),
             w2 = dense_vec(TJ_F64, wc, 3);
  k = build_workspace(false, true);
  so = compile(&t, k, &fn);
  ck_assert_int_eq(run(k, (tj_storage *[]){&w1, &wxs}, &d), 0);
  ck_assert_int_eq(fn((tj_storage *[]){&w2, &wxs}), 0);
  ck_assert_mem_eq(wi, wc, sizeof wi);
  dlclose(so);
  tmp_done(&t);
}
END_TEST

/* Parallel loops for the C rendering's outlining (y and x of 10):
 *   for (i = 1; i < 10; i += 3) parallel(static): y[i] = 2 x[i]   (trip numbers)
 *   for (j = 0; j < 10; j++) parallel(dynamic): atomic y[0] += x[j]
 *   total = 0; for (q ...) parallel: total += x[q]   (an outer variable: serial)
 *   y[9] = total
 *   for (r = 0; r < 2; r++) parallel:                 (the inner one runs inside it)
 *     for (c = 0; c < 3; c++) parallel: y[2 + 3r] += x[3r + c] */
static LirKernel *build_parallel(void) {
  LirKernel *k = lir_kernel(A, "par");
  operand(k, "y", 1, TJ_F64, true);
  operand(k, "x", 1, TJ_F64, false);
  LirStmt *b = NULL, *l1 = NULL, *l2 = NULL, *l3 = NULL, *l4 = NULL;
  LirVar *yv = let(k, &b, "y_vals", LT_PTR_F64, lir_field(A, k, 0, LF_VALS, 0));
  LirVar *xv = let(k, &b, "x_vals", LT_PTR_F64, lir_field(A, k, 1, LF_VALS, 0));
  LirVar *i = lir_var(A, k, "i", LT_I64), *j = lir_var(A, k, "j", LT_I64);
  LirVar *q = lir_var(A, k, "q", LT_I64), *r = lir_var(A, k, "r", LT_I64);
  LirVar *c = lir_var(A, k, "c", LT_I64);
  add(&l1, lir_store(A, ref(yv), ref(i), bin(LOP_MUL, lir_const_fp(A, LT_F64, 2), ld(xv, ref(i)))));
  LirStmt *f1 = lir_for(A, i, c64(1), c64(10), l1);
  f1->u.loop.step = c64(3);
  f1->u.loop.at = (LoopAttrs){.parallel = true, .schedule = TJ_PAR_STATIC};
  add(&b, f1);
  LirStmt *at = lir_store_update(A, ref(yv), c64(0), LOP_ADD, ld(xv, ref(j)));
  at->u.store.atomic = true;
  add(&l2, at);
  LirStmt *f2 = lir_for(A, j, c64(0), c64(10), l2);
  f2->u.loop.at = (LoopAttrs){.parallel = true, .schedule = TJ_PAR_DYNAMIC};
  add(&b, f2);
  LirVar *total = let(k, &b, "total", LT_F64, lir_const_fp(A, LT_F64, 0));
  add(&l3, lir_update(A, total, LOP_ADD, ld(xv, ref(q))));
  LirStmt *f3 = lir_for(A, q, c64(0), c64(10), l3);
  f3->u.loop.at.parallel = true;
  add(&b, f3);
  add(&b, lir_store(A, ref(yv), c64(9), ref(total)));
  LirExpr *r3 = bin(LOP_MUL, c64(3), ref(r));
  add(&l4, lir_store_update(A, ref(yv), bin(LOP_ADD, c64(2), r3), LOP_ADD,
                            ld(xv, bin(LOP_ADD, r3, ref(c)))));
  LirStmt *inner = lir_for(A, c, c64(0), c64(3), l4);
  inner->u.loop.at.parallel = true;
  LirStmt *f4 = lir_for(A, r, c64(0), c64(2), inner);
  f4->u.loop.at.parallel = true;
  add(&b, f4);
  k->body = b;
  return k;
}

/* The parallel rendering compiles cleanly (-Wall -Wextra -Werror), outlines
 * what it can, and computes on 2 threads what the interpreter and a hand
 * count give: x = 1..10, y = (55, 4, 6, 0, 10, 15, 0, 16, 0, 55). */
START_TEST(test_compiled_parallel) {
  if (!have_cc()) {
    fprintf(stderr, "check_loop_ir: SKIP compiled-C test: no cc found\n");
    return;
  }
  Tmp t;
  tmp_init(&t);
  LirKernel *k = build_parallel();
  Diag d;
  diag_init(&d);
  ck_assert_msg(lir_verify(k, &d), "%s", d.msg);
  char *c = print_kernel_flags(k, LIR_PRINT_PARALLEL);
  ck_assert_msg(strstr(c, "static void par_par0(") && strstr(c, "static void par_par1(") &&
                strstr(c, "static void par_par2(") && !strstr(c, "par_par3"), "%s", c);
  ck_assert_msg(strstr(c, "tj_rt_parallel_for_sched(0, tj_hi > tj_lo ? (tj_hi - tj_lo + tj_step - 1) "
                          "/ tj_step : 0, 0, 0, 0, 0, TJ_PAR_STATIC, par_par0, &tj_c0);") &&
                strstr(c, "int64_t i = (int64_t)(tj_c->tj_lo + tj_t * tj_c->tj_step);") &&
                strstr(c, "__atomic_compare_exchange(tj_p, &tj_old, &tj_new, true") &&
                strstr(c, "for (int64_t q = 0; q < 10; q++) {") &&
                strstr(c, "for (int64_t c = 0; c < 3; c++) {"), "%s", c);
  free(c);
  tj_kernel_fn fn;
  void *so = compile_flags(&t, k, &fn, LIR_PRINT_PARALLEL);
  double xs[10], yi[10] = {0}, yc[10] = {0};
  for (int q = 0; q < 10; q++) xs[q] = q + 1;
  static const double want[10] = {55, 4, 6, 0, 10, 15, 0, 16, 0, 55};
  tj_storage x = dense_vec(TJ_F64, xs, 10), y1 = dense_vec(TJ_F64, yi, 10),
             y2 = dense_vec(TJ_F64, yc, 10);
  ck_assert_int_eq(run(k, (tj_storage *[]){&y1, &x}, &d), 0);
  tj_rt_set_threads(2);
  ck_assert_int_eq(fn((tj_storage *[]){&y2, &x}), 0);
  tj_rt_set_threads(0);
  ck_assert_mem_eq(yi, want, sizeof yi);
  ck_assert_mem_eq(yc, want, sizeof yc);
  dlclose(so);
  tmp_done(&t);
}
END_TEST

/* Promotion's row groups (split_groups) copy a loop L once per group of 4
 * rows of its 8-row candidate loop; the rest of L's body runs in every
 * copy. Over y of 24 and x of 5 (r: a free loop around L):
 *   for (r = 0; r < 1; r++) for (p = 0; p < n; p++) {     (n = 5, x's extent)
 *     for (ii = 0; ii < 8; ii++) y[ii] += x[p];             the candidate
 *     extra }
 * with extra one of: nothing; y[8] += x[p] (an update outside the
 * candidate); a second 8-row loop y[8 + jj] += 2 x[p]; the candidate's
 * body also adding x[p] into a scalar t declared before L, which L reads
 * (y[16 + p] += t, the running sum). By hand (x = 1..5): y[0..7] = 15;
 * y[8] = 15, or y[8..15] = 30; y[16 + p] = 8 (1 + .. + (p + 1)) =
 * 4 (p + 1)(p + 2). Promotion must keep each. */
static LirKernel *build_row_groups(int extra) {
  LirKernel *k = lir_kernel(A, "groups");
  operand(k, "y", 1, TJ_F64, true);
  operand(k, "x", 1, TJ_F64, false);
  LirStmt *b = NULL, *lb = NULL, *qb = NULL, *q2b = NULL;
  LirVar *yv = let(k, &b, "y_vals", LT_PTR_F64, lir_field(A, k, 0, LF_VALS, 0));
  LirVar *xv = let(k, &b, "x_vals", LT_PTR_F64, lir_field(A, k, 1, LF_VALS, 0));
  LirVar *n = let(k, &b, "n", LT_I64, lir_field(A, k, 1, LF_DIM, 0));
  LirVar *r = lir_var(A, k, "r", LT_I64), *p = lir_var(A, k, "p", LT_I64);
  LirVar *ii = lir_var(A, k, "ii", LT_I64), *jj = lir_var(A, k, "jj", LT_I64);
  LirVar *sv = extra == 3 ? let(k, &b, "t", LT_F64, lir_const_fp(A, LT_F64, 0)) : NULL;
  add(&qb, lir_store_update(A, ref(yv), ref(ii), LOP_ADD, ld(xv, ref(p))));
  if (sv) add(&qb, lir_update(A, sv, LOP_ADD, ld(xv, ref(p))));
  add(&lb, lir_for(A, ii, c64(0), c64(8), qb));
  if (extra == 1) add(&lb, lir_store_update(A, ref(yv), c64(8), LOP_ADD, ld(xv, ref(p))));
  if (extra == 2) {
    add(&q2b, lir_store_update(A, ref(yv), bin(LOP_ADD, c64(8), ref(jj)), LOP_ADD,
                               bin(LOP_MUL, lir_const_fp(A, LT_F64, 2), ld(xv, ref(p)))));
    add(&lb, lir_for(A, jj, c64(0), c64(8), q2b));
  }
  if (sv) add(&lb, lir_store_update(A, ref(yv), bin(LOP_ADD, c64(16), ref(p)), LOP_ADD, ref(sv)));
  add(&b, lir_for(A, r, c64(0), c64(1), lir_for(A, p, c64(0), ref(n), lb)));
  k->body = b;
  return k;
}

START_TEST(test_promote_row_groups) {
  for (int extra = 0; extra < 4; extra++) {
    LirKernel *k = build_row_groups(extra);
    double xs[5] = {1, 2, 3, 4, 5}, want[24] = {0}, got[24] = {0};
    tj_storage x = dense_vec(TJ_F64, xs, 5), y1 = dense_vec(TJ_F64, want, 24),
               y2 = dense_vec(TJ_F64, got, 24);
    Diag d;
    ck_assert_int_eq(run(k, (tj_storage *[]){&y1, &x}, &d), 0);
    for (int i = 0; i < 8; i++) ck_assert(want[i] == 15);   /* the interpreter, by hand */
    ck_assert(want[8] == (extra == 1 ? 15 : extra == 2 ? 30 : 0));
    for (int q = 0; q < 5; q++) ck_assert(want[16 + q] == (extra == 3 ? 4 * (q + 1) * (q + 2) : 0));
    lower_promote(A, k, 512);
    diag_init(&d);
    ck_assert_msg(lir_verify(k, &d), "extra %d: %s", extra, d.msg);
    ck_assert_int_eq(run(k, (tj_storage *[]){&y2, &x}, &d), 0);
    for (int i = 0; i < 24; i++)
      ck_assert_msg(got[i] == want[i], "extra %d: y[%d] = %g after promotion, want %g", extra, i,
                    got[i], want[i]);
  }
}
END_TEST

/* The vectorizer leaves a loop whose stores reach a later iteration's
 * loads (a running max over x[q], x[q + 1]) scalar, and still takes the
 * same loop reading and writing x[q] only. */
START_TEST(test_vectorize_carried_memory) {
  LowerOptions o = {.vector_bits = 512, .vector_gather = true};
  for (int carried = 0; carried < 2; carried++) {
    LirKernel *k = build_running_max(carried);
    int n = lower_vectorize(A, k, &o, LT_F64);
    ck_assert_msg(n == (carried ? 0 : 1), "carried %d: %d loops vectorized", carried, n);
  }
}
END_TEST

static Suite *loop_ir_suite(void) {
  Suite *s = suite_create("loop_ir");
  TCase *interp = tcase_create("interp");
  tcase_add_checked_fixture(interp, setup, teardown);
  tcase_add_test(interp, test_dense_sum);
  tcase_add_test(interp, test_vectorize_carried_memory);
  tcase_add_test(interp, test_promote_row_groups);
  tcase_add_test(interp, test_spmv_csr);
  tcase_add_test(interp, test_append_compressed);
  tcase_add_test(interp, test_merge_union);
  tcase_add_test(interp, test_workspace_cleanup);
  tcase_add_test(interp, test_f32_i32_semantics);
  tcase_add_test(interp, test_out_of_bounds);
  tcase_add_test(interp, test_stale_pointer);
  tcase_add_test(interp, test_sort_and_zero);
  suite_add_tcase(s, interp);
  TCase *verify = tcase_create("verify");
  tcase_add_checked_fixture(verify, setup, teardown);
  tcase_add_test(verify, test_verify_scope);
  tcase_add_test(verify, test_verify_types);
  suite_add_tcase(s, verify);
  TCase *cls = tcase_create("classify");
  tcase_add_checked_fixture(cls, setup, teardown);
  tcase_add_loop_test(cls, test_classify_rules, 0, NCLASS_CASES);
  tcase_add_test(cls, test_classify_hooks);
  suite_add_tcase(s, cls);
  TCase *print = tcase_create("print");
  tcase_add_checked_fixture(print, setup, teardown);
  tcase_add_test(print, test_print_merge);
  tcase_add_test(print, test_print_calls_and_cleanup);
  suite_add_tcase(s, print);
  TCase *cc = tcase_create("compiled");
  tcase_add_checked_fixture(cc, setup, teardown);
  tcase_set_timeout(cc, 120);
  tcase_add_test(cc, test_compiled_matches_interp);
  tcase_add_test(cc, test_compiled_parallel);
  tcase_add_test(cc, test_prefetch);
  suite_add_tcase(s, cc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(loop_ir_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

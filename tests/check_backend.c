/* The code-generation backends behind jit/backend.h: every kernel of a
 * representative set runs through the C backend (the loop IR's C compiled
 * by cc) and the LLVM backend on the same inputs, and both must agree with
 * each other and with tj_reference (within the dtype's tolerance: LLVM may
 * fuse a*b+c and reorder vector reductions). Also: the C backend's stages,
 * its error messages (no compiler, a failing compile), and that the kernel
 * cache keys on the backend while the disk cache holds only LLVM objects.
 * Parallel kernels (static, balanced, dynamic, pos-split; atomics by
 * fetch-add and compare-and-swap; per-thread partials; a per-thread
 * workspace) run through the C backend on 2 threads, against LLVM, the
 * reference and values computed by hand, and their C is checked for the
 * runtime's parallel-for and the atomics.
 * Without any C compiler the tests that need one print SKIP.
 */
#include <check.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/kernel_check.h"
#include "util/tensors.h"

static bool have_cc(void) {
  if (system("${CC:-cc} --version >/dev/null 2>&1") == 0) return true;
  const char *cc = getenv("CC");
  fprintf(stderr, "check_backend: SKIP: no C compiler ('%s') found\n", cc && *cc ? cc : "cc");
  return false;
}

static tj_options with_backend(int backend) {
  tj_options o = tj_options_default();
  o.backend = backend;
  return o;
}

/* ---- both backends on the same kernels ---- */

typedef struct Cross {
  const char *expr, *formats, *extents;
} Cross;

static const Cross crosses[] = {
  {"y(i) = A(i,j) * x(j)", "A:ds", "i=23 j=17"},                       /* SpMV CSR */
  {"y(i) = A(i,j) * x(j)", "A:ds:1,0", "i=23 j=17"},                   /* SpMV CSC */
  {"y(i) = A(i,j) * x(j)", "A:uq", "i=23 j=17"},                       /* SpMV COO */
  {"C(i,j) = A(i,k) * B(k,j)", "A:ds", "i=19 j=21 k=13"},              /* SpMM */
  {"A(i,j) = B(i,j) * C(i,k) * D(k,j)", "A:ds B:ds", "i=15 j=18 k=9"}, /* SDDMM */
  {"A(i,j) = B(i,j) + C(i,j)", "A:ds B:ds C:ds", "i=17 j=14"},         /* sparse add */
  {"A(i,j) = B(i,k) * C(k,j)", "A:ds B:ds C:ds", "i=16 j=15 k=14"},    /* SpGEMM */
  {"A(i,j) = B(i,k,l) * C(k,j) * D(l,j)", "B:sss", "i=9 j=11 k=8 l=7"},/* MTTKRP */
  {"C(i,j) = A(i,k) * B(k,j)", "", "i=37 j=41 k=19"},                  /* dense GEMM */
  {"y(i) = b(i) - A(i,j) * x(j)", "A:ds", "i=21 j=16"},                /* nested sum */
  {"y(i) = s1(i) + s2(i) + s3(i) + s4(i) + s5(i) + s6(i) + s7(i) + s8(i)",
   "s1:s s2:s s3:s s4:s s5:s s6:s s7:s s8:s", "i=60"},                 /* 8-way union */
  {"y(i) = s1(i) + s2(i) + s3(i) + s4(i) + s5(i) + s6(i) + s7(i) + s8(i)",
   "y:s s1:s s2:s s3:s s4:s s5:s s6:s s7:s s8:s", "i=60"},             /* into sparse */
};

/* C backend first (with the assemble/compute split and the interpreter),
 * then LLVM on the same inputs; two seeds, one with empty rows. */
START_TEST(test_cross) {
  if (!have_cc()) return;
  const Cross *x = &crosses[_i];
  tj_options c = with_backend(TJ_BACKEND_C), llvm = with_backend(TJ_BACKEND_LLVM);
  tj_context *cx = NULL;
  ck_assert_int_eq(tj_context_new(&cx), TJ_OK);
  KcCase cases[] = {
    {.expr = x->expr, .formats = x->formats, .extents = x->extents, .density = 0.3,
     .seed = 11 + (uint64_t)_i, .flags = KC_SPLIT, .opts = &c, .cross = &llvm},
    {.expr = x->expr, .formats = x->formats, .extents = x->extents, .density = 0.25,
     .pattern = KC_EMPTY_ROWS, .seed = 97 + (uint64_t)_i, .opts = &c, .cross = &llvm},
  };
  for (size_t q = 0; q < sizeof cases / sizeof *cases; q++) {
    KcOutcome o;
    ck_assert_msg(kc_run(cx, &cases[q], &o) == KC_PASS, "%s", o.msg);
  }
  tj_context_free(cx);
}
END_TEST

/* ---- parallel kernels through the C backend ----
 * On 2 threads (TJ_PAR_MIN_WORK=0 from CTest, so even these small loops
 * split): the rendering outlines each parallel loop and calls the runtime's
 * parallel-for, and atomic updates are the compiler's atomics. */

typedef struct ParCase {
  const char *expr, *formats, *extents, *schedule;
  tj_dtype dtype;
} ParCase;

#define SPMV "y(i) = A(i,j) * x(j)"
#define TSPMV "y(j) = A(i,j) * x(i)"
static const ParCase pars[] = {
  {SPMV, "A:ds", "i=41 j=29", NULL, 0},                                  /* default: by nonzeros */
  {SPMV, "A:ds", "i=41 j=29", "split(i, i0, i1, 4) parallelize(i0, static)", 0},
  {SPMV, "A:ds", "i=41 j=29", "parallelize(i, balanced)", 0},
  {SPMV, "A:dd", "i=41 j=29", "split(i, i0, i1, 3) parallelize(i0, dynamic)", 0},
  {SPMV, "A:ss", "i=41 j=29", "pos(i, ip, A(i,j)) split(ip, i0, i1, 2) parallelize(i0, dynamic)", 0},
  {"C(i,k) = A(i,j) * B(j,k)", "A:ds", "i=23 j=17 k=9", "parallelize(i, static)", 0},
  {"A(i,j) = B(i,k) * C(k,j)", "A:ds B:ds C:ds", "i=16 j=15 k=14", NULL, 0},  /* SpGEMM */
  /* atomics: + (CAS on floats, fetch-add on integers), max, * */
  {TSPMV, "A:ds", "i=41 j=29", "parallelize(i, atomics)", 0},
  {TSPMV, "A:ds", "i=41 j=29", "parallelize(i, atomics)", TJ_I64},
  {TSPMV, "A:ds", "i=41 j=29", "split(i, i0, i1, 2) parallelize(i0, dynamic, atomics)", TJ_F32},
  {SPMV, "A:ds:1,0", "i=41 j=29", "parallelize(j, dynamic, atomics)", 0},
  {SPMV, "A:ds", "i=41 j=29", "fuse(i, j, f) pos(f, fp, A(i,j)) split(fp, f0, f1, 3) "
                              "parallelize(f0, static, atomics)", 0},
  /* per-thread partials; a per-thread workspace row (in a for over i, and
     in a co-iteration whose rows the driver splits) */
  {TSPMV, "A:ds", "i=41 j=29", "parallelize(i, partials)", 0},
  {TSPMV, "A:ds", "i=41 j=29", "split(i, i0, i1, 4) parallelize(i0, partials)", 0},
  {"y(i) = b(i) - (B(i,j) + C(i,j)) * x(j)", "B:ds C:ss x:s", "i=23 j=19",
   "precompute(B(i,j) + C(i,j), {j}, w) parallelize(i, dynamic)", 0},
  {"y(i) = b(i) - (B(i,j) + C(i,j)) * x(j)", "B:ds C:ds", "i=23 j=19",
   "precompute(B(i,j) + C(i,j), {j}, w) parallelize(i, static)", 0},
};

/* The C backend on 2 threads, then LLVM on the same inputs; both against
 * the reference, over three row patterns. */
START_TEST(test_parallel_cross) {
  if (!have_cc()) return;
  const ParCase *pc = &pars[_i];
  tj_options c = with_backend(TJ_BACKEND_C), llvm = with_backend(TJ_BACKEND_LLVM);
  c.nthreads = llvm.nthreads = 2;
  tj_context *cx = NULL;
  ck_assert_int_eq(tj_context_new(&cx), TJ_OK);
  static const KcPattern patterns[] = {KC_RANDOM, KC_EMPTY_ROWS, KC_ONE_ROW};
  for (int p = 0; p < 3; p++) {
    KcCase kc = {.expr = pc->expr, .formats = pc->formats, .extents = pc->extents,
                 .dtype = pc->dtype, .density = 0.3, .pattern = patterns[p],
                 .seed = 5 + (uint64_t)(_i * 3 + p), .flags = KC_SPLIT, .opts = &c,
                 .schedule = pc->schedule, .cross = &llvm};
    KcOutcome o;
    ck_assert_msg(kc_run(cx, &kc, &o) == KC_PASS, "[%s] %s", pc->schedule, o.msg);
  }
  tj_context_free(cx);
}
END_TEST

/* A = [1 0 2 0; 0 0 0 0; 0 3 0 4; 5 6 7 8; 0 0 0 9] (5x4), as in
 * check_schedule_loops' hand-computed cases. */
static const double hand_a[20] = {1, 0, 2, 0, 0, 0, 0, 0, 0, 3, 0, 4, 5, 6, 7, 8, 0, 0, 0, 9};

typedef struct HandRun {
  const char *expr, *fmt, *sched, *defs;
  bool transposed;          /* y(j) over A's columns (x of 5), else y(i) (x of 4) */
  double want[5];
  const char *c_has;        /* a line the C the backend compiles holds */
  bool by_rows;             /* the driver runs row ranges on threads (partials):
                               the kernel itself has no parallel loop */
} HandRun;

static char *stage_text(tj_kernel *k, tj_stage st, tj_status *status);

/* The C text the kernel's backend compiles (-print-c). */
static char *c_text(tj_kernel *k) {
  tj_status st;
  char *t = stage_text(k, TJ_STAGE_C, &st);
  ck_assert_int_eq(st, TJ_OK);
  return t;
}

/* Runs r through the C backend on 2 threads, three times (the values are
 * reset each run), against r->want. */
static void hand_run(const HandRun *r) {
  int64_t da[2] = {5, 4}, nx = r->transposed ? 5 : 4, ny = r->transposed ? 4 : 5;
  static const double xv[5] = {1, 2, 3, 4, 5};
  tj_options o = with_backend(TJ_BACKEND_C);
  o.nthreads = 2;
  o.defs = r->defs;
  tj_context *cx = NULL;
  ck_assert_int_eq(tj_context_new(&cx), TJ_OK);
  tj_tensor *A = tu_tensor("A", r->fmt, 2, da, hand_a), *x = tu_tensor("x", "d", 1, &nx, xv);
  tj_tensor *y = tu_tensor("y", "d", 1, &ny, NULL);
  tj_kernel *k = NULL;
  ck_assert_msg(tj_compile(cx, r->expr, (tj_tensor *[]){y, A, x}, 3, r->sched, &o, &k) == TJ_OK,
                "[%s] %s", r->sched, tj_last_error());
  for (int rep = 0; rep < 3; rep++) {
    ck_assert_msg(tj_kernel_run(k, TJ_EVALUATE, NULL, 0) == TJ_OK, "%s", tj_last_error());
    for (int64_t i = 0; i < ny; i++) {
      double v;
      ck_assert_int_eq(tj_tensor_get(y, (int64_t[]){i}, &v), TJ_OK);
      ck_assert_msg(v == r->want[i], "[%s | %s] y(%lld) = %g, want %g", r->expr, r->sched,
                    (long long)i, v, r->want[i]);
    }
  }
  char *t = c_text(k);
  ck_assert_msg(!strstr(t, "tj_rt_parallel_for_sched(") == r->by_rows && strstr(t, r->c_has),
                "[%s | %s] a parallel call %s or no '%s' in:\n%.1500s", r->expr, r->sched,
                r->by_rows ? "present" : "missing", r->c_has, t);
  free(t);
  tj_tensor_free(A);
  tj_tensor_free(x);
  tj_tensor_free(y);
  tj_context_free(cx);
}

/* By hand, x = (1, 2, 3, 4) or (1, 2, 3, 4, 5):
 *   A x = (1+6, 0, 6+16, 5+12+21+32, 36) = (7, 0, 22, 70, 36)
 *   A' x = (1+20, 9+24, 2+28, 12+32+45) = (21, 33, 30, 89)
 *   max_j A(i,j) x(j) over stored entries = (6, -inf, 16, 32, 36)
 *   prod_j A(i,j) x(j) over stored entries = (6, 1, 96, 40320, 36)
 *   g(x, y) = x*y + x + y, identity 0: prod (1 + v) - 1 = (13, 0, 118, 56627, 36) */
START_TEST(test_parallel_by_hand) {
  if (!have_cc()) return;
  static const HandRun runs[] = {
    {SPMV, "ds", "split(i, i0, i1, 2) parallelize(i0, static)", NULL, false,
     {7, 0, 22, 70, 36}, "TJ_PAR_STATIC", false},
    {SPMV, "ds", "parallelize(i, balanced)", NULL, false, {7, 0, 22, 70, 36}, "TJ_PAR_BALANCED", false},
    {SPMV, "ss", "pos(i, ip, A(i,j)) split(ip, i0, i1, 1) parallelize(i0, dynamic)", NULL, false,
     {7, 0, 22, 70, 36}, "TJ_PAR_DYNAMIC", false},
    {TSPMV, "ds", "parallelize(i, atomics)", NULL, true, {21, 33, 30, 89},
     "__atomic_compare_exchange(tj_p, &tj_old, &tj_new", false},
    {TSPMV, "ds", "parallelize(i, partials)", NULL, true, {21, 33, 30, 89},
     "for (int64_t i = 0; i < A_dim0; i++) {", true},
    {"y(i) = reduce(max, j, A(i,j) * x(j))", "ds:1,0", "parallelize(j, atomics)", NULL, false,
     {6, -INFINITY, 16, 32, 36}, "do tj_new = (tj_old > tj_x ? tj_old : tj_x);", false},
    {"y(i) = reduce(*, j, A(i,j) * x(j))", "ds:1,0", "parallelize(j, atomics)", NULL, false,
     {6, 1, 96, 40320, 36}, "double old;", false},   /* read atomically, not plainly */
    {"y(i) = reduce(g, j, A(i,j) * x(j))", "ds:1,0", "parallelize(j, atomics)",
     "g(x, y) = x * y + x + y identity 0 commutative associative", false,
     {13, 0, 118, 56627, 36}, "__atomic_load(tj_p, &old, __ATOMIC_RELAXED);", false},
    {SPMV, "ds", "fuse(i, j, f) pos(f, fp, A(i,j)) parallelize(fp, dynamic, atomics)", NULL,
     false, {7, 0, 22, 70, 36}, "__atomic_compare_exchange(", false},
  };
  for (size_t r = 0; r < sizeof runs / sizeof *runs; r++) hand_run(&runs[r]);
}
END_TEST

/* Integer + updates are one fetch-add, by hand: A' x in i64. */
START_TEST(test_parallel_fetch_add) {
  if (!have_cc()) return;
  tj_format ds, d;
  ck_assert_int_eq(tj_format_parse("ds", &ds), TJ_OK);
  ck_assert_int_eq(tj_format_parse("d", &d), TJ_OK);
  int64_t da[2] = {5, 4}, n5 = 5, n4 = 4;
  tj_tensor *A, *x, *y;
  ck_assert_int_eq(tj_tensor_new("A", TJ_I64, 2, da, &ds, &A), TJ_OK);
  ck_assert_int_eq(tj_tensor_new("x", TJ_I64, 1, &n5, &d, &x), TJ_OK);
  ck_assert_int_eq(tj_tensor_new("y", TJ_I64, 1, &n4, &d, &y), TJ_OK);
  for (int64_t q = 0; q < 20; q++)
    if (hand_a[q] != 0)
      ck_assert_int_eq(tj_tensor_insert(A, (int64_t[]){q / 4, q % 4}, hand_a[q]), TJ_OK);
  for (int64_t i = 0; i < 5; i++) ck_assert_int_eq(tj_tensor_insert(x, &i, (double)(i + 1)), TJ_OK);
  ck_assert_int_eq(tj_tensor_pack(A), TJ_OK);
  ck_assert_int_eq(tj_tensor_pack(x), TJ_OK);
  ck_assert_int_eq(tj_tensor_pack(y), TJ_OK);
  tj_options o = with_backend(TJ_BACKEND_C);
  o.nthreads = 2;
  tj_context *cx = NULL;
  ck_assert_int_eq(tj_context_new(&cx), TJ_OK);
  tj_kernel *k = NULL;
  ck_assert_msg(tj_compile(cx, TSPMV, (tj_tensor *[]){y, A, x}, 3, "parallelize(i, atomics)", &o,
                           &k) == TJ_OK, "%s", tj_last_error());
  ck_assert_int_eq(tj_kernel_run(k, TJ_EVALUATE, NULL, 0), TJ_OK);
  static const double want[4] = {21, 33, 30, 89};
  for (int64_t j = 0; j < 4; j++) {
    double v;
    ck_assert_int_eq(tj_tensor_get(y, &j, &v), TJ_OK);
    ck_assert_msg(v == want[j], "y(%lld) = %g, want %g", (long long)j, v, want[j]);
  }
  char *t = c_text(k);
  ck_assert_msg(strstr(t, "__atomic_fetch_add(&y_vals[j], ") != NULL, "%.1500s", t);
  free(t);
  tj_tensor_free(A);
  tj_tensor_free(x);
  tj_tensor_free(y);
  tj_context_free(cx);
}
END_TEST

/* The residual with a per-thread workspace row, by hand:
 *   B = A above, C = [1 0 0 0; 0 1 0 0; 0 0 1 0; 0 0 0 1; 0 0 0 0],
 *   x = (1, 2, 3, 4), b = (10, 20, 30, 40, 50)
 *   (B + C) x = (2+6, 2, 6+3+16, 5+12+21+36, 36) = (8, 2, 25, 74, 36)
 *   y = b - (B + C) x = (2, 18, 5, -34, 14) */
START_TEST(test_parallel_workspace) {
  if (!have_cc()) return;
  static const double cv[20] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0};
  static const double xv[4] = {1, 2, 3, 4}, bv[5] = {10, 20, 30, 40, 50};
  static const double want[5] = {2, 18, 5, -34, 14};
  int64_t d2[2] = {5, 4}, n5 = 5, n4 = 4;
  tj_tensor *ops[5] = {tu_tensor("y", "d", 1, &n5, NULL), tu_tensor("b", "d", 1, &n5, bv),
                       tu_tensor("B", "ds", 2, d2, hand_a), tu_tensor("C", "ds", 2, d2, cv),
                       tu_tensor("x", "d", 1, &n4, xv)};
  tj_options o = with_backend(TJ_BACKEND_C);
  o.nthreads = 2;
  tj_context *cx = NULL;
  ck_assert_int_eq(tj_context_new(&cx), TJ_OK);
  tj_kernel *k = NULL;
  ck_assert_msg(tj_compile(cx, "y(i) = b(i) - (B(i,j) + C(i,j)) * x(j)", ops, 5,
                           "precompute(B(i,j) + C(i,j), {j}, w) parallelize(i, dynamic)", &o,
                           &k) == TJ_OK, "%s", tj_last_error());
  for (int rep = 0; rep < 3; rep++) {
    ck_assert_int_eq(tj_kernel_run(k, TJ_EVALUATE, NULL, 0), TJ_OK);
    for (int64_t i = 0; i < 5; i++) {
      double v;
      ck_assert_int_eq(tj_tensor_get(ops[0], &i, &v), TJ_OK);
      ck_assert_msg(v == want[i], "y(%lld) = %g, want %g", (long long)i, v, want[i]);
    }
  }
  char *t = c_text(k);
  ck_assert_msg(strstr(t, "tj_rt_thread_slot(") && strstr(t, "TJ_PAR_DYNAMIC, evaluate_par"),
                "%.1500s", t);
  free(t);
  for (int q = 0; q < 5; q++) tj_tensor_free(ops[q]);
  tj_context_free(cx);
}
END_TEST

/* ---- one SpMV compiled by hand ---- */

typedef struct Spmv {
  tj_context *cx;
  tj_tensor *ops[3];
} Spmv;

static void spmv_new(Spmv *s) {
  int64_t dy[] = {6}, da[] = {6, 5}, dx[] = {5};
  ck_assert_int_eq(tj_context_new(&s->cx), TJ_OK);
  s->ops[0] = kc_tensor("y", "", 1, dy, TJ_F64, 0, 0.0, KC_RANDOM, 1, 2, 0);
  s->ops[1] = kc_tensor("A", "ds", 2, da, TJ_F64, 0, 0.5, KC_RANDOM, 3, 4, 0);
  s->ops[2] = kc_tensor("x", "", 1, dx, TJ_F64, 0, 1.0, KC_RANDOM, 5, 6, 0);
  for (int k = 0; k < 3; k++) ck_assert_ptr_nonnull(s->ops[k]);
}

static tj_status spmv_compile(Spmv *s, int backend, tj_kernel **k) {
  tj_options o = with_backend(backend);
  return tj_compile(s->cx, "y(i) = A(i,j) * x(j)", s->ops, 3, NULL, &o, k);
}

static void spmv_free(Spmv *s) {
  for (int k = 0; k < 3; k++) tj_tensor_free(s->ops[k]);
  tj_context_free(s->cx);
}

/* The stage printed into a string (malloc'd), and its status. */
static char *stage_text(tj_kernel *k, tj_stage st, tj_status *status) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ck_assert_ptr_nonnull(f);
  *status = tj_kernel_print(k, st, f);
  fclose(f);
  return buf;
}

START_TEST(test_stages) {
  if (!have_cc()) return;
  Spmv s;
  spmv_new(&s);
  tj_kernel *kc = NULL, *kl = NULL;
  ck_assert_int_eq(spmv_compile(&s, TJ_BACKEND_C, &kc), TJ_OK);
  ck_assert_int_eq(spmv_compile(&s, TJ_BACKEND_LLVM, &kl), TJ_OK);
  tj_status st;
  char *t = stage_text(kc, TJ_STAGE_C, &st);
  ck_assert_int_eq(st, TJ_OK);
  ck_assert_ptr_nonnull(strstr(t, "#include \"runtime/abi.h\""));
  ck_assert_ptr_nonnull(strstr(t, "int32_t evaluate(tj_storage **operands) {"));
  ck_assert_ptr_nonnull(strstr(t, "void tj_c_bind_helpers("));
  free(t);
  t = stage_text(kc, TJ_STAGE_ASM, &st);
  ck_assert_int_eq(st, TJ_OK);
  ck_assert_msg(strstr(t, "evaluate:") != NULL, "no evaluate label in:\n%s", t);
  free(t);
  for (tj_stage ll = TJ_STAGE_LLVM; ll <= TJ_STAGE_LLVM_OPT; ll++) {
    t = stage_text(kc, ll, &st);
    ck_assert_int_eq(st, TJ_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(tj_last_error(), "the C backend has no LLVM IR stage"));
    ck_assert_ptr_nonnull(strstr(tj_last_error(), "(-print-c)"));
    free(t);
  }
  /* The LLVM backend's C is the loop IR's rendering, without the helpers. */
  t = stage_text(kl, TJ_STAGE_C, &st);
  ck_assert_int_eq(st, TJ_OK);
  ck_assert_ptr_nonnull(strstr(t, "int32_t evaluate(tj_storage **operands) {"));
  ck_assert_ptr_null(strstr(t, "tj_c_bind_helpers"));
  free(t);
  t = stage_text(kl, TJ_STAGE_LLVM, &st);
  ck_assert_int_eq(st, TJ_OK);
  ck_assert_ptr_nonnull(strstr(t, "define"));
  free(t);
  spmv_free(&s);
}
END_TEST

/* ---- errors ---- */

START_TEST(test_no_compiler) {
  setenv("CC", "/nonexistent/cc", 1);   /* Check forks: the parent keeps its CC */
  Spmv s;
  spmv_new(&s);
  tj_kernel *k = NULL;
  ck_assert_int_eq(spmv_compile(&s, TJ_BACKEND_C, &k), TJ_ERR_JIT);
  ck_assert_msg(strstr(tj_last_error(), "C backend: the C compiler '/nonexistent/cc' was not "
                                        "found (set CC to a C compiler)") != NULL,
                "%s", tj_last_error());
  /* The LLVM backend never needs one. */
  ck_assert_int_eq(spmv_compile(&s, TJ_BACKEND_LLVM, &k), TJ_OK);
  ck_assert_int_eq(tj_kernel_run(k, TJ_EVALUATE, NULL, 0), TJ_OK);
  spmv_free(&s);
}
END_TEST

START_TEST(test_compile_error) {
  if (!have_cc()) return;
  const char *cc = getenv("CC");
  char bad[256];
  snprintf(bad, sizeof bad, "%s -Dtj_storage=struct", cc && *cc ? cc : "cc");
  setenv("CC", bad, 1);
  Spmv s;
  spmv_new(&s);
  tj_kernel *k = NULL;
  ck_assert_int_eq(spmv_compile(&s, TJ_BACKEND_C, &k), TJ_ERR_JIT);
  const char *msg = tj_last_error();
  ck_assert_msg(strstr(msg, "failed on the kernel's C:\n") && strstr(msg, "error"), "%s", msg);
  spmv_free(&s);
}
END_TEST

START_TEST(test_unknown_backend) {
  Spmv s;
  spmv_new(&s);
  tj_kernel *k = NULL;
  ck_assert_int_eq(spmv_compile(&s, 7, &k), TJ_ERR_INVALID);
  ck_assert_ptr_nonnull(strstr(tj_last_error(), "unknown backend 7"));
  spmv_free(&s);
}
END_TEST

/* ---- caches ---- */

static int files_in(const char *dir) {
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

START_TEST(test_cache_keys_backend) {
  if (!have_cc()) return;
  char dir[] = "/tmp/tj_backend_cache_XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  Spmv s;
  spmv_new(&s);
  ck_assert_int_eq(tj_context_set_cache_dir(s.cx, dir), TJ_OK);
  tj_kernel *k = NULL;
  ck_assert_int_eq(spmv_compile(&s, TJ_BACKEND_C, &k), TJ_OK);
  ck_assert_int_eq(tj_kernel_times(k).cache_hit, 0);
  ck_assert_int_eq(files_in(dir), 0);   /* no disk cache for the C backend */
  ck_assert_int_eq(spmv_compile(&s, TJ_BACKEND_LLVM, &k), TJ_OK);
  ck_assert_int_eq(tj_kernel_times(k).cache_hit, 0);   /* another key */
  ck_assert_int_eq(files_in(dir), 1);
  ck_assert_int_eq(spmv_compile(&s, TJ_BACKEND_C, &k), TJ_OK);
  ck_assert_int_eq(tj_kernel_times(k).cache_hit, 1);
  spmv_free(&s);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("backend");
  TCase *tc = tcase_create("cross");
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, test_cross, 0, (int)(sizeof crosses / sizeof *crosses));
  suite_add_tcase(s, tc);
  tc = tcase_create("parallel");
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, test_parallel_cross, 0, (int)(sizeof pars / sizeof *pars));
  tcase_add_test(tc, test_parallel_by_hand);
  tcase_add_test(tc, test_parallel_fetch_add);
  tcase_add_test(tc, test_parallel_workspace);
  suite_add_tcase(s, tc);
  tc = tcase_create("stages");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_stages);
  suite_add_tcase(s, tc);
  tc = tcase_create("errors");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_no_compiler);
  tcase_add_test(tc, test_compile_error);
  tcase_add_test(tc, test_unknown_backend);
  suite_add_tcase(s, tc);
  tc = tcase_create("cache");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_cache_keys_backend);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

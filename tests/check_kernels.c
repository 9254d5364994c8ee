/* The differential kernel corpus: every kernel shape the compiler must
 * lower (issues 5 and 6), in every sensible format combination, run through
 * the JIT and the loop-IR interpreter and compared with the reference
 * interpreter on seeded random inputs (tests/util/kernel_check.c).
 *
 * Kernel families are a table: an expression plus, per tensor, a list of
 * formats; each loop-test iteration is one combination of formats, checked
 * with three seeds (fixed density, random density incl. 0 and 1, empty
 * rows). Then dtypes and widths, edge shapes, the assemble/compute split,
 * the kernel cache, and a property-based test over random expressions.
 * Every failure prints "seed=... expr=... formats=..." and what differs.
 * TJ_TEST_SAMPLE=n (the ThreadSanitizer build) runs one case in n of each
 * table (tests/util/sample.h).
 */
#include <check.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jit/driver.h"
#include "util/kernel_check.h"
#include "util/sample.h"

#define L(...) ((const char *const[]){__VA_ARGS__, NULL})

typedef struct Family {
  const char *name;
  const char *expr;
  const char *extents;
  const char *tensors[5];
  const char *const *opts[5];
  unsigned flags;
  const char *full;
} Family;

static const char *const MATS[] = {"ds", "ds:1,0", "ss", "uq", "dd", NULL};
static const char *const SPMAT[] = {"ds", "ss", "uq", "dd", NULL};
static const char *const VEC[] = {"d", "s", NULL};
static const char *const MAT_OUT[] = {"ds", "ss", "dd", NULL};

static const Family FAMILIES[] = {
  {"spmv", "y(i) = A(i,j) * x(j)", "i=5 j=7", {"A", "x", "y"},
   {MATS, VEC, VEC}, 0, NULL},
  {"spmv_ss_csc", "y(i) = A(i,j) * x(j)", "i=6 j=4", {"A", "x", "y"},
   {L("ss:1,0"), VEC, VEC}, 0, NULL},
  {"spmm", "C(i,j) = A(i,k) * B(k,j)", "i=5 j=3 k=6", {"A", "B", "C"},
   {L("ds", "ds:1,0", "ss", "uq"), L("dd", "dd:1,0"), L("dd", "sd")}, 0, NULL},
  {"sddmm", "A(i,j) = B(i,j) * C(i,k) * D(j,k)", "i=5 j=6 k=3",
   {"B", "C", "D", "A"}, {L("ds", "ss", "uq"), L("dd"), L("dd"), L("ds", "dd", "uq")}, 0, NULL},
  {"add", "A(i,j) = B(i,j) + C(i,j)", "i=5 j=6", {"B", "C", "A"},
   {SPMAT, SPMAT, L("ds", "ss", "dd", "do", "sd", "uq")}, 0, NULL},
  {"mul", "A(i,j) = B(i,j) * C(i,j)", "i=5 j=6", {"B", "C", "A"},
   {SPMAT, SPMAT, MAT_OUT}, 0, NULL},
  {"sub", "A(i,j) = B(i,j) - C(i,j)", "i=5 j=6", {"B", "C", "A"},
   {SPMAT, SPMAT, L("ds", "dd")}, 0, NULL},
  {"lat3_sum_of_prod", "a(i) = b(i) + c(i) * d(i)", "i=9", {"b", "c", "d", "a"},
   {VEC, VEC, VEC, VEC}, 0, NULL},
  {"lat3_prod_of_sum", "a(i) = (b(i) + c(i)) * d(i)", "i=9", {"b", "c", "d", "a"},
   {VEC, VEC, VEC, VEC}, 0, NULL},
  {"spgemm", "A(i,j) = B(i,k) * C(k,j)", "i=5 j=6 k=4", {"B", "C", "A"},
   {L("ds", "ss"), L("ds", "ss"), L("ds", "ss", "dd", "do", "so", "sd")}, 0, NULL},
  {"nonordered_in", "A(i,j) = B(i,j) + C(i,k) * D(k,j)", "i=5 j=6 k=4", {"B", "C", "D", "A"},
   {L("do", "so"), L("do"), L("ds", "do"), L("ds", "do")}, 0, NULL},
  {"ttv", "A(i,j) = B(i,j,k) * c(k)", "i=4 j=5 k=3", {"B", "c", "A"},
   {L("sss", "dss", "uqq"), VEC, L("ds", "ss", "dd", "sd", "uq")}, 0, NULL},
  {"ttm", "A(i,j,k) = B(i,j,l) * C(k,l)", "i=3 j=4 k=5 l=3", {"B", "C", "A"},
   {L("sss", "dss", "uqq"), L("dd"), L("ddd", "dds", "ssd", "dsd")}, 0, NULL},
  {"copy3", "A(i,j,k) = B(i,j,k)", "i=2 j=3 k=4", {"B", "A"},
   {L("ddd", "sss", "uqq"), L("ddd", "dds", "dss", "sss", "uqq")}, 0, NULL},
  {"mttkrp", "A(i,j) = B(i,k,l) * C(k,j) * D(l,j)", "i=4 j=3 k=5 l=3",
   {"B", "C", "D", "A"}, {L("sss", "dss", "uqq"), L("dd"), L("dd"), L("dd", "sd", "uq")}, 0, NULL},
  {"inner3", "a = B(i,j,k) * C(i,j,k)", "i=3 j=4 k=5", {"B", "C"},
   {L("sss", "dss"), L("sss", "ddd", "uqq")}, 0, NULL},
  {"block_spmv", "y(i,k) = A(i,j,k,l) * x(j,l)", "i=3 j=4 k=2 l=3", {"A", "x", "y"},
   {L("dsdd"), L("dd"), L("dd")}, 0, NULL},
  {"gemm", "C(i,j) = A(i,k) * B(k,j)", "i=5 j=6 k=7", {"A", "B", "C"},
   {L("dd", "dd:1,0"), L("dd", "dd:1,0"), L("dd")}, 0, NULL},
  {"bcast_row", "A(i,j) = b(i)", "i=4 j=5", {"b", "A"}, {VEC, L("dd", "ds")}, 0, NULL},
  {"bcast_add", "A(i,j) = b(j) + C(i,j)", "i=4 j=5", {"b", "C", "A"},
   {VEC, L("dd", "ds"), L("dd", "ds")}, 0, NULL},
  {"sum_all", "a = B(i,j)", "i=5 j=6", {"B"}, {L("dd", "ds", "ss", "uq", "ds:1,0")}, 0, NULL},
  {"dot", "a = b(i) * c(i)", "i=11", {"b", "c"}, {VEC, VEC}, 0, NULL},
  {"transpose", "A(i,j) = B(j,i)", "i=4 j=6", {"B", "A"},
   {L("ds", "ss", "uq"), L("dd", "dd:1,0")}, 0, NULL},
  {"transpose_add", "A(i,j) = B(i,j) + C(j,i)", "i=5 j=5", {"B", "C", "A"},
   {L("ds"), L("ds"), L("dd", "ds")}, 0, NULL},
  {"transpose_add_rect", "A(i,j) = B(i,j) + C(j,i)", "i=4 j=6", {"B", "C", "A"},
   {L("ds", "dd"), L("ds", "ss"), L("dd")}, 0, NULL},
  {"sqrt", "a(i) = sqrt(b(i))", "i=9", {"b", "a"}, {VEC, VEC}, KC_POSITIVE, NULL},
  {"abs", "a(i) = abs(b(i))", "i=9", {"b", "a"}, {VEC, VEC}, 0, NULL},
  {"neg", "a(i) = -b(i)", "i=9", {"b", "a"}, {VEC, VEC}, 0, NULL},
  {"exp", "a(i) = exp(b(i))", "i=9", {"b", "a"}, {VEC, VEC}, 0, NULL},
  {"plus_const", "a(i) = b(i) + 2", "i=9", {"b", "a"}, {VEC, VEC}, 0, NULL},
  {"min", "a(i) = min(b(i), c(i))", "i=9", {"b", "c", "a"}, {VEC, VEC, VEC}, 0, NULL},
  {"max", "a(i) = max(b(i), c(i))", "i=9", {"b", "c", "a"}, {VEC, VEC, VEC}, 0, NULL},
  {"div_dense", "a(i) = b(i) / c(i)", "i=9", {"b", "c", "a"},
   {VEC, L("d"), VEC}, 0, "c"},
  {"div_sparse_plus_one", "a(i) = b(i) / (c(i) + 1)", "i=9", {"b", "c", "a"},
   {VEC, VEC, VEC}, KC_POSITIVE, NULL},
  {"div_by_residual", "y(i) = b(i) / (A(i,j) * x(j) + 2)", "i=6 j=5", {"A", "x", "b", "y"},
   {L("ds", "dd"), VEC, VEC, VEC}, KC_POSITIVE, NULL},
  {"mat_div_dense", "A(i,j) = B(i,j) / C(i,j)", "i=4 j=5", {"B", "C", "A"},
   {L("ds", "uq"), L("dd"), L("ds", "dd")}, 0, "C"},
  {"accum_spmv", "y(i) += A(i,j) * x(j)", "i=5 j=7", {"A", "x", "y"},
   {L("ds", "ss", "uq", "dd"), VEC, L("d")}, 0, NULL},
  {"accum_add", "A(i,j) += B(i,j) * C(i,j)", "i=5 j=4", {"B", "C", "A"},
   {L("ds", "dd"), L("ss", "dd"), L("dd")}, 0, NULL},
  {"scale_sub", "a(i) = 2 * b(i) - c(i)", "i=9", {"b", "c", "a"}, {VEC, VEC, VEC}, 0, NULL},
  /* Sums over a subexpression (ir/sums.c): a temp per sum inside the loops. */
  {"residual", "y(i) = b(i) - A(i,j) * x(j)", "i=6 j=5", {"A", "x", "b", "y"},
   {MATS, VEC, VEC, VEC}, 0, NULL},
  {"spmv_plus", "a(i) = B(i,j) * c(j) + d(i)", "i=7 j=4", {"B", "c", "d", "a"},
   {L("ds", "ss", "ds:1,0"), VEC, VEC, L("d")}, 0, NULL},
  {"gemm_plus", "A(i,j) = B(i,k) * C(k,j) + D(i,j)", "i=5 j=4 k=6", {"B", "C", "D", "A"},
   {L("ds", "ss", "dd"), L("ds", "dd"), L("ds", "dd"), MAT_OUT}, 0, NULL},
  {"nested_sums", "y(i) = A(i,j) * (B(j,k) * x(k) + c(j))", "i=5 j=6 k=4",
   {"A", "B", "x", "c", "y"}, {L("ds", "dd"), L("ds", "ss"), VEC, VEC, VEC}, 0, NULL},
  {"sibling_sums", "y(i) = sum(j, A(i,j) * x(j)) - 2 * sum(k, B(i,k) * z(k))", "i=6 j=5 k=4",
   {"A", "B", "x", "z", "y"}, {L("ds", "dd"), L("ds", "ss"), VEC, VEC, VEC}, 0, NULL},
  {"scalar_of_sums", "a = sum(i, b(i) * c(i)) * sum(j, d(j)) + 1", "i=9 j=4",
   {"b", "c", "d"}, {VEC, VEC, VEC}, 0, NULL},
};
#define NFAM ((int)(sizeof FAMILIES / sizeof *FAMILIES))

static int nopts(const char *const *o) {
  int n = 0;
  while (o[n]) n++;
  return n;
}

static int ncombos(const Family *f) {
  int n = 1;
  for (int t = 0; t < 5 && f->tensors[t]; t++) n *= nopts(f->opts[t]);
  return n;
}

/* Formats string of combination i of f ("A:ds x:s y:d"). */
static void combo(const Family *f, int i, char *buf, size_t n) {
  buf[0] = 0;
  for (int t = 0; t < 5 && f->tensors[t]; t++) {
    int k = nopts(f->opts[t]);
    size_t len = strlen(buf);
    snprintf(buf + len, n - len, "%s%s:%s", t ? " " : "", f->tensors[t],
             f->opts[t][i % k]);
    i /= k;
  }
}

static bool output_sparse(const Family *f, const char *formats) {
  /* The output is the tensor on the lhs: its name starts the expression. */
  char name[16] = {0}, key[20];
  sscanf(f->expr, "%15[A-Za-z_0-9]", name);
  snprintf(key, sizeof key, "%s:", name);
  for (const char *p = formats; p && *p; p = strchr(p, ' ') ? strchr(p, ' ') + 1 : NULL)
    if (strncmp(p, key, strlen(key)) == 0) {
      size_t n = strcspn(p + strlen(key), " :");
      return memchr(p + strlen(key), 's', n) != NULL;
    }
  return false;
}

/* ---- kernel families ---- */

static int fam_start[NFAM + 1];

static void run_case(tj_context *cx, const KcCase *c) {
  KcOutcome o;
  KcResult r = kc_run(cx, c, &o);
  ck_assert_msg(r == KC_PASS, "%s", o.msg);
}

START_TEST(test_family) {
  int f = 0;
  while (fam_start[f + 1] <= _i) f++;
  if (!tu_sampled(_i - fam_start[f])) return;   /* TJ_TEST_SAMPLE */
  const Family *fam = &FAMILIES[f];
  char formats[256];
  combo(fam, _i - fam_start[f], formats, sizeof formats);
  tj_context *cx = NULL;
  ck_assert_int_eq(tj_context_new(&cx), TJ_OK);
  bool split = output_sparse(fam, formats);
  KcCase cases[] = {
    {.expr = fam->expr, .formats = formats, .extents = fam->extents,
     .density = 0.3, .seed = 1000u + (uint64_t)_i,
     .flags = fam->flags | (split ? KC_SPLIT : 0), .full = fam->full},
    {.expr = fam->expr, .formats = formats, .extents = fam->extents,
     .density = -1, .seed = 2000u + (uint64_t)_i, .flags = fam->flags, .full = fam->full},
    {.expr = fam->expr, .formats = formats, .extents = fam->extents,
     .density = 0.6, .pattern = KC_EMPTY_ROWS, .seed = 3000u + (uint64_t)_i,
     .flags = fam->flags, .full = fam->full},
    {.expr = fam->expr, .formats = formats, .extents = fam->extents,
     .density = 0.5, .pattern = KC_DUPLICATES, .seed = 4000u + (uint64_t)_i,
     .flags = fam->flags, .full = fam->full},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) run_case(cx, &cases[k]);
  tj_context_free(cx);
}
END_TEST

/* ---- dtypes and index widths ---- */

typedef struct Typed {
  const char *expr, *formats, *extents;
  tj_dtype dt;
  int width;
} Typed;

static const Typed TYPED[] = {
  {"y(i) = A(i,j) * x(j)", "A:ds x:d y:d", "i=5 j=7", TJ_F32, 0},
  {"y(i) = A(i,j) * x(j)", "A:ds x:d y:d", "i=5 j=7", TJ_I32, 0},
  {"y(i) = A(i,j) * x(j)", "A:uq x:s y:s", "i=5 j=7", TJ_I64, 0},
  {"y(i) = A(i,j) * x(j)", "A:ss x:d y:d", "i=5 j=7", TJ_F32, 64},
  {"A(i,j) = B(i,j) + C(i,j)", "B:ds C:ss A:ds", "i=5 j=6", TJ_F32, 0},
  {"A(i,j) = B(i,j) + C(i,j)", "B:ds C:uq A:ss", "i=5 j=6", TJ_I32, 0},
  {"A(i,j) = B(i,j) - C(i,j)", "B:ds C:ds A:ds", "i=5 j=6", TJ_I64, 64},
  {"A(i,j) = B(i,k) * C(k,j)", "B:ds C:ds A:ds", "i=5 j=6 k=4", TJ_F32, 0},
  {"A(i,j) = B(i,k) * C(k,j)", "B:ds C:ds A:ds", "i=5 j=6 k=4", TJ_I64, 0},
  {"A(i,j) = B(i,k) * C(k,j)", "B:ds C:ds A:ds", "i=5 j=6 k=4", TJ_F64, 64},
  {"A(i,j) = B(i,j,k) * c(k)", "B:sss c:s A:ds", "i=4 j=5 k=3", TJ_F64, 64},
  {"A(i,j) = B(i,j,k) * c(k)", "B:uqq c:d A:dd", "i=4 j=5 k=3", TJ_I32, 64},
  {"y(i) = A(i,j) * x(j)", "A:uq x:d y:d", "i=5 j=7", TJ_F64, 64},
  {"a = b(i) * c(i)", "b:s c:s", "i=13", TJ_I32, 0},
  {"a(i) = abs(b(i)) + max(b(i), c(i))", "b:s c:s a:s", "i=9", TJ_I64, 0},
  {"C(i,j) = A(i,k) * B(k,j)", "A:dd B:dd C:dd", "i=9 j=10 k=11", TJ_F32, 0},
  {"a(i) = sqrt(b(i))", "b:s a:s", "i=9", TJ_F32, 0},
};
#define NTYPED ((int)(sizeof TYPED / sizeof *TYPED))

START_TEST(test_typed) {
  if (!tu_sampled(_i)) return;
  const Typed *t = &TYPED[_i];
  tj_context *cx = NULL;
  ck_assert_int_eq(tj_context_new(&cx), TJ_OK);
  for (int s = 0; s < 3; s++) {
    KcCase c = {.expr = t->expr, .formats = t->formats, .extents = t->extents,
                .dtype = t->dt, .width = t->width, .density = s ? -1 : 0.4,
                .seed = 500u + (uint64_t)(_i * 7 + s),
                .flags = strstr(t->expr, "sqrt") ? KC_POSITIVE : 0};
    if (s == 0 && strstr(t->formats, "A:ds") && strstr(t->expr, "A(i,j) ="))
      c.flags |= KC_SPLIT;
    run_case(cx, &c);
  }
  tj_context_free(cx);
}
END_TEST

/* ---- edge shapes: empty, empty rows, one row, 1x1, zero-sized ---- */

typedef struct Edge {
  const char *expr, *formats, *extents;
  double density;
  KcPattern pat;
} Edge;

static const Edge EDGES[] = {
  {"y(i) = A(i,j) * x(j)", "A:ds x:s y:s", "i=5 j=7", 0.0, KC_RANDOM},
  {"y(i) = A(i,j) * x(j)", "A:uq x:d y:d", "i=5 j=7", 0.0, KC_RANDOM},
  {"A(i,j) = B(i,j) + C(i,j)", "B:ds C:ss A:ss", "i=5 j=6", 0.0, KC_RANDOM},
  {"A(i,j) = B(i,k) * C(k,j)", "B:ds C:ds A:ds", "i=5 j=6 k=4", 0.0, KC_RANDOM},
  {"A(i,j) = B(i,j,k) * c(k)", "B:sss c:s A:ss", "i=4 j=5 k=3", 0.0, KC_RANDOM},
  {"a = B(i,j,k) * C(i,j,k)", "B:sss C:sss", "i=3 j=4 k=5", 0.0, KC_RANDOM},
  {"y(i) = A(i,j) * x(j)", "A:ss x:d y:s", "i=8 j=7", 0.7, KC_EMPTY_ROWS},
  {"A(i,j) = B(i,j) * C(i,j)", "B:ds C:uq A:ds", "i=8 j=6", 0.8, KC_EMPTY_ROWS},
  {"A(i,j) = B(i,k) * C(k,j)", "B:ds C:ds A:ds", "i=8 j=6 k=8", 0.7, KC_EMPTY_ROWS},
  {"y(i) = A(i,j) * x(j)", "A:ds x:d y:s", "i=7 j=6", 1.0, KC_ONE_ROW},
  {"A(i,j) = B(i,j) + C(i,j)", "B:ss C:ds A:ss", "i=7 j=6", 1.0, KC_ONE_ROW},
  {"A(i,j) = B(i,k) * C(k,j)", "B:ds C:ds A:ss", "i=7 j=6 k=7", 1.0, KC_ONE_ROW},
  {"C(i,j) = A(i,k) * B(k,j)", "A:uq B:dd C:dd", "i=7 j=3 k=6", 1.0, KC_ONE_ROW},
  {"y(i) = A(i,j) * x(j)", "A:ds x:s y:s", "i=1 j=1", 1.0, KC_RANDOM},
  {"A(i,j) = B(i,k) * C(k,j)", "B:ds C:ds A:ds", "i=1 j=1 k=1", 1.0, KC_RANDOM},
  {"A(i,j) = B(i,j) + C(i,j)", "B:uq C:ss A:ss", "i=1 j=1", 1.0, KC_RANDOM},
  {"a = B(i,j,k) * C(i,j,k)", "B:sss C:uqq", "i=1 j=1 k=1", 1.0, KC_RANDOM},
  {"y(i) = A(i,j) * x(j)", "A:ds x:d y:d", "i=0 j=3", 1.0, KC_RANDOM},
  {"y(i) = A(i,j) * x(j)", "A:ds x:d y:d", "i=3 j=0", 1.0, KC_RANDOM},
  {"A(i,j) = B(i,j) + C(i,j)", "B:ds C:ss A:ds", "i=0 j=0", 1.0, KC_RANDOM},
  {"A(i,j) = B(i,k) * C(k,j)", "B:ds C:ds A:ds", "i=3 j=4 k=0", 1.0, KC_RANDOM},
  {"a = b(i) * c(i)", "b:s c:s", "i=0", 1.0, KC_RANDOM},
  {"A(i,j) = B(i,j) + C(i,j)", "B:ds C:ds A:ds", "i=6 j=6", 1.0, KC_RANDOM},
  {"A(i,j) = B(i,k) * C(k,j)", "B:ds C:ds A:ds", "i=6 j=6 k=6", 1.0, KC_RANDOM},
};
#define NEDGES ((int)(sizeof EDGES / sizeof *EDGES))

START_TEST(test_edges) {
  if (!tu_sampled(_i)) return;
  const Edge *e = &EDGES[_i];
  tj_context *cx = NULL;
  ck_assert_int_eq(tj_context_new(&cx), TJ_OK);
  KcCase c = {.expr = e->expr, .formats = e->formats, .extents = e->extents,
              .density = e->density, .pattern = e->pat, .seed = 77u + (uint64_t)_i,
              .flags = strstr(e->formats, "A:d") ? 0 : KC_SPLIT};
  run_case(cx, &c);
  tj_context_free(cx);
}
END_TEST

/* ---- assemble once, compute twice with new values ---- */

static void split_case(const char *expr, const char *formats,
                       const char *extents, uint64_t seed) {
  tj_context *cx = NULL;
  ck_assert_int_eq(tj_context_new(&cx), TJ_OK);
  KcCase c = {.expr = expr, .formats = formats, .extents = extents,
              .density = 0.4, .seed = seed, .flags = KC_SPLIT};
  run_case(cx, &c);
  tj_context_free(cx);
}

START_TEST(test_split) {
  static const char *const rows[][3] = {
    {"y(i) = A(i,j) * x(j)", "A:ds x:s y:s", "i=6 j=5"},
    {"A(i,j) = B(i,j) + C(i,j)", "B:ds C:ss A:ds", "i=6 j=5"},
    {"A(i,j) = B(i,j) * C(i,j)", "B:uq C:ds A:ss", "i=6 j=5"},
    {"A(i,j) = B(i,k) * C(k,j)", "B:ds C:ds A:ds", "i=6 j=5 k=4"},
    {"A(i,j) = B(i,k) * C(k,j)", "B:ss C:ds A:ss", "i=6 j=5 k=4"},
    {"A(i,j) = B(i,j,k) * c(k)", "B:sss c:s A:ss", "i=4 j=5 k=3"},
    {"A(i,j) = B(i,j) * C(i,k) * D(j,k)", "B:ds C:dd D:dd A:ds", "i=5 j=6 k=3"},
    {"a(i) = b(i) + c(i) * d(i)", "b:s c:s d:s a:s", "i=12"},
  };
  split_case(rows[_i][0], rows[_i][1], rows[_i][2], 9100u + (uint64_t)_i);
}
END_TEST

/* Hand-driven: operands swapped through the operands array, output reused. */
START_TEST(test_split_rebind) {
  tj_context *cx = NULL;
  ck_assert_int_eq(tj_context_new(&cx), TJ_OK);
  int64_t dA[2] = {6, 5}, dy[1] = {6}, dx[1] = {5};
  tj_tensor *A = kc_tensor("A", "ds", 2, dA, TJ_F64, 0, 0.5, KC_RANDOM, 1, 2, 0);
  tj_tensor *x = kc_tensor("x", "d", 1, dx, TJ_F64, 0, 1.0, KC_RANDOM, 3, 4, 0);
  tj_tensor *y = kc_tensor("y", "s", 1, dy, TJ_F64, 0, 0.0, KC_RANDOM, 5, 6, 0);
  ck_assert_ptr_nonnull(A);
  ck_assert_ptr_nonnull(x);
  ck_assert_ptr_nonnull(y);
  tj_tensor *ops[3] = {y, A, x};
  tj_kernel *k = NULL;
  const char *expr = "y(i) = A(i,j) * x(j)";
  ck_assert_msg(tj_compile(cx, expr, ops, 3, NULL, NULL, &k) == TJ_OK, "%s", tj_last_error());
  ck_assert_msg(tj_kernel_run(k, TJ_ASSEMBLE, NULL, 0) == TJ_OK, "%s", tj_last_error());
  ck_assert_msg(tj_kernel_run(k, TJ_COMPUTE, NULL, 0) == TJ_OK, "%s", tj_last_error());
  for (int round = 0; round < 3; round++) {
    tj_tensor *A2 = kc_tensor("A", "ds", 2, dA, TJ_F64, 0, 0.5, KC_RANDOM, 1,
                              100 + (uint64_t)round, 0);
    tj_tensor *x2 = kc_tensor("x", "d", 1, dx, TJ_F64, 0, 1.0, KC_RANDOM, 3,
                              200 + (uint64_t)round, 0);
    tj_tensor *yr = kc_tensor("y", "d", 1, dy, TJ_F64, 0, 0.0, KC_RANDOM, 0, 0, 0);
    tj_tensor *ops2[3] = {y, A2, x2}, *ref[3] = {yr, A2, x2};
    ck_assert_msg(tj_kernel_run(k, TJ_COMPUTE, ops2, 3) == TJ_OK, "%s", tj_last_error());
    ck_assert_msg(tj_reference(expr, ref, 3) == TJ_OK, "%s", tj_last_error());
    char why[1024] = "";
    ck_assert_msg(kc_compare(y, yr, why, sizeof why),
                  "round %d: expr=%s formats=A:ds x:d y:s compute after rebind: %s",
                  round, expr, why);
    tj_tensor_free(A2);
    tj_tensor_free(x2);
    tj_tensor_free(yr);
  }
  tj_tensor_free(A);
  tj_tensor_free(x);
  tj_tensor_free(y);
  tj_context_free(cx);
}
END_TEST

/* ---- dense nests: outer-loop vectorization and unroll-and-jam ----
 * All-dense contractions run their output indices outermost, the innermost
 * one as a wide outer vector loop (4 registers, then 1, then scalar) around
 * the reduction, rows jammed by 4 with a remainder, columns and reduction
 * tiled by 256 for the cache. Extents straddle every
 * boundary: rows around 4, columns around W and the outer width (AVX-512:
 * 8 / 32 doubles, 16 / 64 floats; AVX2, forced by one variant: 4 / 8). */
/* Compiles for an AVX2-only host (x86-64-v3): 4 doubles / 8 floats. */
static void force_avx2(tj_options *o) {
  o->cpu = "x86-64-v3";
  o->features = "+avx2,+fma";
}

typedef struct DenseCase {
  const char *expr, *extents;
  tj_dtype dtype;
} DenseCase;

static const DenseCase DENSE[] = {
    {"A(i,j) = B(i,k) * C(k,j)", "i=%d j=%d k=7", TJ_F64},
    {"A(i,j) = B(i,k) * C(k,j)", "i=%d j=%d k=300", TJ_F64}, /* 2 k blocks */
    {"A(i,j) = B(i,k) * C(k,j)", "i=%d j=%d k=3", TJ_F32},
    {"A(i,j) = B(i,k) * C(k,j)", "i=%d j=%d k=6", TJ_I64},
    {"A(i,j) = B(k,i) * C(k,j)", "i=%d j=%d k=5", TJ_F64},
    {"A(i,j) = B(i,k) * C(j,k)", "i=%d j=%d k=9", TJ_F64},
    {"A(i,j) += B(i,k) * C(k,j)", "i=%d j=%d k=4", TJ_F64},
    {"A(i,j) = B(i,k) * C(k,j) + D(i,j)", "i=%d j=%d k=4", TJ_F64},
    {"y(i) = A(i,j) * x(j)", "i=%d j=%d", TJ_F64},
    {"A(i,j,l) = B(i,j,k) * C(k,l)", "i=%d l=%d j=3 k=5", TJ_F64},
    {"A(i,j) = B(i,k,l) * C(k,j) * D(l,j)", "i=%d j=%d k=3 l=4", TJ_F64},
    {"C(a,b,c) = A(a,d,c) * B(d,b)", "a=%d c=%d b=3 d=6", TJ_F64},
};
#define NDENSE ((int)(sizeof DENSE / sizeof DENSE[0]))

START_TEST(test_dense_blocking) {
  static const int rows[] = {1, 4, 6, 9};
  static const int cols[] = {1, 7, 8, 9, 17, 31, 32, 33, 41, 65, 300}; /* 300: 2 j blocks */
  if (!tu_sampled(_i)) return;
  const DenseCase *dc = &DENSE[_i];
  tj_context *cx = NULL;
  ck_assert_int_eq(tj_context_new(&cx), TJ_OK);
  for (int r = 0; r < 4; r++)
    for (int c = 0; c < 11; c++)
      for (int v = 0; v < 4; v++) {
        tj_options o = tj_options_default();
        o.nthreads = 1 + (c + r) % 2;
        o.no_vectorize = v == 1;
        o.no_unroll_jam = v == 2;
        if (v == 3) force_avx2(&o);
        char extents[64];
        snprintf(extents, sizeof extents, dc->extents, rows[r], cols[c]);
        KcCase k = {.expr = dc->expr, .formats = "", .extents = extents, .dtype = dc->dtype,
                    .density = 1, .seed = 9100u + (unsigned)(_i * 1000 + r * 10 + c),
                    .flags = (c == 3 ? KC_SPLIT : 0u) | (c > 3 ? KC_NO_INTERP : 0u), .opts = &o};
        run_case(cx, &k);
      }
  tj_context_free(cx);
}
END_TEST

/* ---- one sparse operand times dense ones, output indices first ----
 * With vectorization on, SpMM, MTTKRP and TTM run the innermost output
 * index as an outer vector loop around the sparse fiber (the row of the
 * output in registers across the reduction): 4 registers, then 1, then
 * scalar around one fiber (SpMM); 8, 4, 2, 1 registers, then scalar
 * around fibers nested two deep (MTTKRP). Columns straddle every tier
 * (AVX-512: 8 doubles a register, 16 floats; AVX2: 4 / 8), every sparse
 * format the planner can walk in that order, at 1, 2 and 3 threads, and
 * against the scalar pipeline. */
static const DenseCase SPARSE_OUTER[] = {
    {"C(i,j) = A(i,k) * B(k,j)", "A:ds|i=9 k=11 j=%d", TJ_F64},
    {"C(i,j) = A(i,k) * B(k,j)", "A:ss|i=9 k=11 j=%d", TJ_F64},
    {"C(i,j) = A(i,k) * B(k,j)", "A:uq|i=9 k=11 j=%d", TJ_F64},
    {"C(i,j) = A(i,k) * B(k,j)", "A:ds|i=9 k=11 j=%d", TJ_F32},
    {"C(i,j) = A(i,k) * B(k,j)", "A:ds|i=9 k=11 j=%d", TJ_I64},
    {"C(i,j) += A(i,k) * B(k,j)", "A:ds|i=9 k=11 j=%d", TJ_F64},
    {"C(i,j) = 2 * A(i,k) * B(k,j)", "A:ds|i=9 k=11 j=%d", TJ_F64},
    {"A(i,j) = B(i,k,l) * C(k,j) * D(l,j)", "B:sss|i=5 k=6 l=4 j=%d", TJ_F64},
    {"A(i,j) = B(i,k,l) * C(k,j) * D(l,j)", "B:dss|i=5 k=6 l=4 j=%d", TJ_F64},
    {"A(i,j) = B(i,k,l) * C(k,j) * D(l,j)", "B:uqq|i=5 k=6 l=4 j=%d", TJ_F64},
    {"A(i,j,k) = B(i,j,l) * C(k,l)", "B:sss|i=4 j=5 l=6 k=%d", TJ_F64},
    {"A(i,j,l) = B(i,j,k) * C(k,l)", "B:sss|i=4 j=5 k=6 l=%d", TJ_F64},
};
#define NSPARSE_OUTER ((int)(sizeof SPARSE_OUTER / sizeof SPARSE_OUTER[0]))

START_TEST(test_sparse_outer_vector) {
  static const int cols[] = {1, 7, 8, 9, 17, 24, 31, 32, 33, 56, 65, 100};
  if (!tu_sampled(_i)) return;
  const DenseCase *sc = &SPARSE_OUTER[_i];
  const char *bar = strchr(sc->extents, '|');
  char formats[32];
  snprintf(formats, sizeof formats, "%.*s", (int)(bar - sc->extents), sc->extents);
  tj_context *cx = NULL;
  ck_assert_int_eq(tj_context_new(&cx), TJ_OK);
  for (int c = 0; c < 12; c++)
    for (int v = 0; v < 5; v++) {
      tj_options o = tj_options_default();
      o.nthreads = v < 3 ? 1 + v : 1 + c % 2;
      o.no_vectorize = v == 3;
      if (v == 4) force_avx2(&o);
      char extents[64];
      snprintf(extents, sizeof extents, bar + 1, cols[c]);
      /* rows zeroed in the row loop: gaps before a stored row, rows past
       * the last one, all rows of an empty operand */
      KcCase k = {.expr = sc->expr, .formats = formats, .extents = extents, .dtype = sc->dtype,
                  .density = c == 2 ? 0 : 0.4, .pattern = c % 3 == 1 ? KC_EMPTY_ROWS : KC_RANDOM,
                  .seed = 9700u + (unsigned)(_i * 100 + c * 5 + v),
                  .flags = (c % 2 ? KC_SPLIT : 0u) | (c > 3 ? KC_NO_INTERP : 0u), .opts = &o};
      run_case(cx, &k);
    }
  tj_context_free(cx);
}
END_TEST

/* ---- kernel cache ---- */

/* ---- threads x vectorization x remainder sizes ----
 * Issue 8's matrix: each kernel at 1, 2 and 3 (oversubscribed) threads,
 * with tensorjit's vectorization on and off, at extents around the vector
 * width (8 doubles on AVX-512, 4 on AVX2) of the index it vectorizes. */
typedef struct Matrixed {
  const char *expr, *formats, *vec_index;
} Matrixed;

static const Matrixed MATRIXED[] = {
    {"y(i) = A(i,j) * x(j)", "A:ds", "j"},
    {"C(i,j) = A(i,k) * B(k,j)", "A:ds", "j"},
    {"A(i,j) = B(i,j) * C(i,k) * D(j,k)", "A:ds B:ds", "k"},
    {"A(i,j) = B(i,j) + C(i,j)", "A:ds B:ds C:ds", "j"},
    {"A(i,j) = B(i,k) * C(k,j)", "A:ds B:ds C:ds", "j"},
    {"A(i,j) = B(i,k,l) * C(k,j) * D(l,j)", "B:sss", "j"},
    {"A(i,j,k) = B(i,j,l) * C(k,l)", "B:sss", "l"},
    {"A(i,j) = B(i,k) * C(k,j)", "", "j"},
    {"a = B(i,j) * C(i,j)", "", "j"},
    {"A(i,j) = B(i,j) * C(i,j) + B(i,j)", "", "j"},
};
#define NMATRIXED ((int)(sizeof MATRIXED / sizeof MATRIXED[0]))
static const int THREADS[] = {1, 2, 3};
static const int SIZES[] = {1, 3, 4, 5, 7, 8, 9, 13};

START_TEST(test_threads_and_vectors) {
  if (!tu_sampled(_i)) return;
  const Matrixed *m = &MATRIXED[_i];
  tj_context *cx = NULL;
  ck_assert_int_eq(tj_context_new(&cx), TJ_OK);
  for (int t = 0; t < 3; t++)
    for (int nv = 0; nv < 2; nv++)
      for (int z = 0; z < 8; z++) {
        tj_options o = tj_options_default();
        o.nthreads = THREADS[t];
        o.no_vectorize = nv;
        char extents[64];
        /* i = 37 rows: enough for the row-chunked parallel paths at 3 threads */
        snprintf(extents, sizeof extents, "%s=%d i=37", m->vec_index, SIZES[z]);
        KcCase c = {.expr = m->expr, .formats = m->formats, .extents = extents,
                    .density = 0.4, .seed = 7000u + (unsigned)(_i * 100 + z),
                    .flags = KC_NO_INTERP | (z % 2 ? KC_SPLIT : 0u), .opts = &o};
        run_case(cx, &c);
      }
  tj_context_free(cx);
}
END_TEST

START_TEST(test_cache) {
  tj_context *cx = NULL;
  ck_assert_int_eq(tj_context_new(&cx), TJ_OK);
  KcCase first = {.expr = "y(i) = A(i,j) * x(j)", .formats = "A:ds x:s y:d",
                  .extents = "i=6 j=5", .density = 0.4, .seed = 11};
  KcCase renamed = {.expr = "w(r) = M(r,c) * v(c)", .formats = "M:ds v:s w:d",
                    .extents = "r=6 c=5", .density = 0.4, .seed = 12};
  KcCase resized = {.expr = "w(r) = M(r,c) * v(c)", .formats = "M:ds v:s w:d",
                    .extents = "r=9 c=3", .density = 0.4, .seed = 13};
  KcCase other = {.expr = "w(r) = M(r,c) * v(c)", .formats = "M:ss v:s w:d",
                  .extents = "r=6 c=5", .density = 0.4, .seed = 14};
  KcOutcome o;
  ck_assert_msg(kc_run(cx, &first, &o) == KC_PASS, "%s", o.msg);
  ck_assert_msg(o.cache_hit == 0, "first compile reports cache_hit=%d", o.cache_hit);
  ck_assert_msg(kc_run(cx, &renamed, &o) == KC_PASS, "%s", o.msg);
  ck_assert_msg(o.cache_hit == 1, "renamed tensors/indices: cache_hit=%d, want 1 "
                "(expr=%s formats=%s)", o.cache_hit, renamed.expr, renamed.formats);
  ck_assert_msg(kc_run(cx, &resized, &o) == KC_PASS, "%s", o.msg);
  ck_assert_msg(kc_run(cx, &other, &o) == KC_PASS, "%s", o.msg);
  ck_assert_msg(o.cache_hit == 0, "different format M:ss hit the cache (cache_hit=%d)",
                o.cache_hit);
  tj_context_free(cx);
}
END_TEST

/* ---- property-based: random expressions, formats, sparsity ---- */

#define PROP_BATCHES 25
#define PROP_PER_BATCH 21

typedef struct Gen {
  uint64_t s;
  char expr[256], formats[256], extents[64];
  int64_t ext[4];
} Gen;

static int pick(Gen *g, int n) { return (int)(kc_rand(&g->s) % (uint64_t)n); }

static const char IDX[] = "ijkl";

/* Writes an access name(v0,v1..) of `order` distinct random indices,
 * preferring the output's. */
static void gen_access(Gen *g, char *buf, size_t n, const char *name, int order,
                       int *vars) {
  int perm[4] = {0, 1, 2, 3};
  for (int a = 3; a > 0; a--) {
    int b = pick(g, a + 1), t = perm[a];
    perm[a] = perm[b];
    perm[b] = t;
  }
  size_t k = (size_t)snprintf(buf, n, "%s", name);
  if (order > 0) k += (size_t)snprintf(buf + k, n - k, "(");
  for (int m = 0; m < order; m++) {
    vars[m] = perm[m];
    k += (size_t)snprintf(buf + k, n - k, "%s%c", m ? "," : "", IDX[perm[m]]);
  }
  if (order > 0) snprintf(buf + k, n - k, ")");
}

static void gen_format(Gen *g, char *buf, size_t n, int order, bool is_out) {
  char lv[8] = {0};
  if (is_out) {
    int dense = pick(g, 3) ? order : pick(g, order + 1);
    for (int l = 0; l < order; l++) lv[l] = l < dense ? 'd' : 's';
    if (order >= 2 && pick(g, 5) == 0) { /* a dense tail (`sd`) or COO (`uq`) */
      bool coo = pick(g, 2);
      int k = 1 + pick(g, order - 1);
      for (int l = 0; l < order; l++) lv[l] = coo ? (l ? 'q' : 'u') : l < k ? 's' : 'd';
    }
  } else if (order >= 2 && pick(g, 6) == 0) {
    lv[0] = 'u';
    for (int l = 1; l < order; l++) lv[l] = 'q';
  } else {
    for (int l = 0; l < order; l++) lv[l] = pick(g, 2) ? 's' : 'd';
  }
  size_t k = (size_t)snprintf(buf, n, "%s", lv);
  if (order >= 2 && pick(g, 4) == 0 && !(is_out && strchr(lv, 's'))) {
    int perm[4] = {0, 1, 2, 3};
    for (int a = order - 1; a > 0; a--) {
      int b = pick(g, a + 1), t = perm[a];
      perm[a] = perm[b];
      perm[b] = t;
    }
    k += (size_t)snprintf(buf + k, n - k, ":");
    for (int m = 0; m < order; m++)
      k += (size_t)snprintf(buf + k, n - k, "%s%d", m ? "," : "", perm[m]);
  }
}

/* Joins terms [lo, hi) into a random + - * tree. */
static void gen_tree(Gen *g, char terms[][40], int lo, int hi, char *buf, size_t n) {
  if (hi - lo == 1) {
    snprintf(buf, n, "%s%s", pick(g, 10) == 0 ? "-" : "", terms[lo]);
    return;
  }
  int mid = lo + 1 + pick(g, hi - lo - 1);
  char a[256], b[256];
  gen_tree(g, terms, lo, mid, a, sizeof a);
  gen_tree(g, terms, mid, hi, b, sizeof b);
  static const char ops[] = "+-*";
  snprintf(buf, n, "(%s %c %s)", a, ops[pick(g, 3)], b);
}

static void gen_case(Gen *g) {
  static const char *names[] = {"A", "B", "C", "D"};
  int vars[4];
  char out[40], terms[4][40], f[32];
  int out_order = pick(g, 4);
  gen_access(g, out, sizeof out, "Z", out_order, vars);
  gen_format(g, f, sizeof f, out_order, true);
  size_t fk = (size_t)snprintf(g->formats, sizeof g->formats, "Z:%s", f);
  int nops = 1 + pick(g, 4);
  for (int t = 0; t < nops; t++) {
    int order = 1 + pick(g, 3);
    gen_access(g, terms[t], sizeof terms[t], names[t], order, vars);
    gen_format(g, f, sizeof f, order, false);
    fk += (size_t)snprintf(g->formats + fk, sizeof g->formats - fk, " %s:%s",
                           names[t], f);
  }
  char rhs[256];
  gen_tree(g, terms, 0, nops, rhs, sizeof rhs);
  snprintf(g->expr, sizeof g->expr, "%s = %s", out, rhs);
  snprintf(g->extents, sizeof g->extents, "i=%d j=%d k=%d l=%d", 1 + pick(g, 7),
           1 + pick(g, 7), 1 + pick(g, 7), 1 + pick(g, 7));
}

/* Runs one case in a child process so that a crashing kernel is reported
 * as that case's failure; the outcome comes back through a pipe. */
static KcResult run_isolated(const KcCase *kc, KcOutcome *o) {
  int fd[2];
  memset(o, 0, sizeof *o);
  if (pipe(fd) != 0) return kc_run(NULL, kc, o);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    tj_context *cx = NULL;
    if (tj_context_new(&cx) == TJ_OK) kc_run(cx, kc, o);
    else o->result = KC_SETUP_ERROR;
    ssize_t w = write(fd[1], o, sizeof *o);
    _exit(w == (ssize_t)sizeof *o ? 0 : 1);
  }
  close(fd[1]);
  ssize_t got = 0, r;
  while (got < (ssize_t)sizeof *o &&
         (r = read(fd[0], (char *)o + got, sizeof *o - (size_t)got)) > 0)
    got += r;
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (got == (ssize_t)sizeof *o) return o->result;
  o->result = KC_RUN_ERROR;
  o->status = TJ_ERR_INTERNAL;
  snprintf(o->msg, sizeof o->msg, "seed=%" PRIu64 " expr=\"%s\" formats=\"%s\" "
           "extents=\"%s\" pattern=%d: CRASH (%s %d)", kc->seed, kc->expr,
           kc->formats, kc->extents, (int)kc->pattern,
           WIFSIGNALED(status) ? "signal" : "exit status",
           WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
  return o->result;
}

START_TEST(test_property) {
  int npass = 0, nunsup = 0, nbad = 0;
  char first_bad[2100] = "";
  for (int c = 0; c < PROP_PER_BATCH; c++) {
    if (!tu_sampled(c)) continue;
    uint64_t seed = 0x7e57000u + (uint64_t)(_i * PROP_PER_BATCH + c);
    Gen g = {.s = seed};
    gen_case(&g);
    tj_options opt = tj_options_default();
    opt.opt_level = 1; /* compile time dominates; the families run at O3 */
    opt.nthreads = 1 + c % 3; /* 3: oversubscribed on two cores */
    KcCase kc = {.expr = g.expr, .formats = g.formats, .extents = g.extents,
                 .density = -1, .seed = seed, .flags = KC_QUIET, .opts = &opt,
                 .pattern = pick(&g, 8) == 0 ? KC_DUPLICATES : KC_RANDOM};
    KcOutcome o;
    KcResult r = run_isolated(&kc, &o);
    if (r == KC_PASS) {
      npass++;
    } else if (r == KC_COMPILE_ERROR && o.status == TJ_ERR_UNSUPPORTED) {
      nunsup++;
      fprintf(stderr, "property UNSUPPORTED: %s\n", o.msg);
    } else {
      nbad++;
      fprintf(stderr, "property FAIL: %s\n", o.msg);
      if (!first_bad[0]) snprintf(first_bad, sizeof first_bad, "%s", o.msg);
    }
  }
  fprintf(stderr, "property batch %d: %d pass, %d unsupported, %d fail\n", _i,
          npass, nunsup, nbad);
  ck_assert_msg(nbad == 0, "%d of %d random cases failed; first: %s", nbad,
                PROP_PER_BATCH, first_bad);
}
END_TEST

/* parallelize(i, s) of a kernel built in row chunks (a sparse output; a
 * reduction into per-chunk partials): static cuts one chunk of equal rows
 * per thread, dynamic 16, balanced (the default) 4 of equal rows plus
 * nonzeros; the kernel keeps its chunk outputs, so their count shows the
 * cut. Values against plain loops: B is 600 x 40 CSR whose row r holds
 * columns r % 7 + 7e, e = 0 .. r % 5 (skewed rows), each (r + 1). */
START_TEST(test_row_chunk_strategies) {
  enum { N = 600, M = 40 };
  tj_format csr;
  ck_assert_int_eq(tj_format_parse("ds", &csr), TJ_OK);
  int64_t dims[2] = {N, M}, m = M, n = N;
  tj_tensor *B, *c, *d, *y;
  ck_assert_int_eq(tj_tensor_new("B", TJ_F64, 2, dims, &csr, &B), TJ_OK);
  for (int64_t r = 0; r < N; r++)
    for (int64_t e = 0; e <= r % 5; e++)
      ck_assert_int_eq(tj_tensor_insert(B, (int64_t[]){r, r % 7 + 7 * e}, (double)(r + 1)), TJ_OK);
  ck_assert_int_eq(tj_tensor_pack(B), TJ_OK);
  tj_format vec = tj_format_dense(1);
  ck_assert_int_eq(tj_tensor_new("c", TJ_F64, 1, &m, &vec, &c), TJ_OK);
  for (int64_t j = 0; j < M; j++) ck_assert_int_eq(tj_tensor_insert(c, &j, (double)(j + 2)), TJ_OK);
  ck_assert_int_eq(tj_tensor_pack(c), TJ_OK);
  ck_assert_int_eq(tj_tensor_new("d", TJ_F64, 1, &n, &vec, &d), TJ_OK);
  for (int64_t i = 0; i < N; i++) ck_assert_int_eq(tj_tensor_insert(d, &i, (double)(i % 3 + 1)), TJ_OK);
  ck_assert_int_eq(tj_tensor_pack(d), TJ_OK);
  ck_assert_int_eq(tj_tensor_new("y", TJ_F64, 1, &m, &vec, &y), TJ_OK);
  setenv("TJ_PAR_MIN_WORK", "0", 1);
  tj_context *cx;
  ck_assert_int_eq(tj_context_new(&cx), TJ_OK);
  tj_options two = tj_options_default();
  two.nthreads = 2;
  static const struct { const char *sched; int chunks; } st[] = {
      {"parallelize(i, static)", 2}, {"parallelize(i, dynamic)", 32},
      {"parallelize(i, balanced)", 8}, {"parallelize(i)", 8}, {NULL, 8}};
  for (int s = 0; s < 5; s++) {
    const char *name = st[s].sched ? st[s].sched : "no schedule";
    tj_tensor *A;
    ck_assert_int_eq(tj_tensor_new("A", TJ_F64, 2, dims, &csr, &A), TJ_OK);
    tj_kernel *k;
    ck_assert_int_eq(tj_compile(cx, "A(i,j) = B(i,j) * c(j)", (tj_tensor *[]){A, B, c}, 3,
                                st[s].sched, &two, &k), TJ_OK);
    ck_assert_int_eq(tj_kernel_run(k, TJ_EVALUATE, NULL, 0), TJ_OK);
    ck_assert_msg(k->nchunks == st[s].chunks, "%s: %d chunks, want %d", name, k->nchunks,
                  st[s].chunks);
    ck_assert_int_eq(tj_tensor_nnz(A), tj_tensor_nnz(B));
    for (int64_t r = 0; r < N; r++)
      for (int64_t e = 0; e <= r % 5; e++) {
        int64_t at[2] = {r, r % 7 + 7 * e};
        double got;
        ck_assert_int_eq(tj_tensor_get(A, at, &got), TJ_OK);
        ck_assert_msg(got == (double)(r + 1) * (double)(at[1] + 2), "%s: A(%lld,%lld) = %g",
                      name, (long long)r, (long long)at[1], got);
      }
    tj_tensor_free(A);
  }
  /* y(j) = B(i,j) * d(i): the row loop sums into y, run as chunks of rows
   * into per-chunk partial copies of y, the first chunk's y itself (so the
   * kernel keeps one chunk output fewer). */
  double want[M] = {0};
  for (int64_t r = 0; r < N; r++)
    for (int64_t e = 0; e <= r % 5; e++) want[r % 7 + 7 * e] += (double)(r + 1) * (double)(r % 3 + 1);
  static const struct { const char *sched; int chunks; } red[] = {
      {"parallelize(i, static, partials)", 1}, {"parallelize(i, dynamic, partials)", 31},
      {"parallelize(i, partials)", 7}};
  for (int s = 0; s < 3; s++) {
    tj_kernel *k;
    ck_assert_int_eq(tj_compile(cx, "y(j) = B(i,j) * d(i)", (tj_tensor *[]){y, B, d}, 3,
                                red[s].sched, &two, &k), TJ_OK);
    ck_assert_int_eq(tj_kernel_run(k, TJ_EVALUATE, NULL, 0), TJ_OK);
    ck_assert_msg(k->nchunks == red[s].chunks, "%s: %d chunks, want %d", red[s].sched,
                  k->nchunks, red[s].chunks);
    for (int64_t j = 0; j < M; j++) {
      double got;
      ck_assert_int_eq(tj_tensor_get(y, &j, &got), TJ_OK);
      ck_assert_msg(got == want[j], "%s: y(%lld) = %g, want %g", red[s].sched, (long long)j, got,
                    want[j]);
    }
  }
  unsetenv("TJ_PAR_MIN_WORK");
  tj_context_free(cx);
  tj_tensor_free(B), tj_tensor_free(c), tj_tensor_free(d), tj_tensor_free(y);
}
END_TEST

/* ---- suite ---- */

/* TTV over leaf fibers of 0 to 20 entries (every branch of the peel pass)
 * under each TJ_PEEL: the width shows in the loop IR after the peel pass
 * (TJ_PEEL is in the cache key: each setting compiles its own kernel),
 * 0 peels nothing, and the values are a hand loop's. */
START_TEST(test_peel_widths) {
  enum { I = 3, J = 7, K = 24 };
  tj_format sss, ss, vec = tj_format_dense(1);
  ck_assert_int_eq(tj_format_parse("sss", &sss), TJ_OK);
  ck_assert_int_eq(tj_format_parse("ss", &ss), TJ_OK);
  int64_t dB[3] = {I, J, K}, dA[2] = {I, J}, nk = K;
  tj_tensor *B, *c;
  ck_assert_int_eq(tj_tensor_new("B", TJ_F64, 3, dB, &sss, &B), TJ_OK);
  ck_assert_int_eq(tj_tensor_new("c", TJ_F64, 1, &nk, &vec, &c), TJ_OK);
  double cv[K], want[I][J] = {{0}};
  for (int64_t k = 0; k < K; k++) {
    cv[k] = 0.5 + (double)k;
    ck_assert_int_eq(tj_tensor_insert(c, &k, cv[k]), TJ_OK);
  }
  for (int64_t i = 0; i < I; i++)
    for (int64_t j = 0; j < J; j++)
      for (int64_t q = 0; q < (i * J + j) % 21; q++) {   /* 5 is prime to K: distinct k */
        int64_t at[3] = {i, j, (q * 5 + j) % K};
        double v = 1.0 + (double)((i + j + q) % 7);
        ck_assert_int_eq(tj_tensor_insert(B, at, v), TJ_OK);
        want[i][j] += v * cv[at[2]];
      }
  ck_assert_int_eq(tj_tensor_pack(B), TJ_OK);
  ck_assert_int_eq(tj_tensor_pack(c), TJ_OK);
  tj_context *cx;
  ck_assert_int_eq(tj_context_new(&cx), TJ_OK);
  tj_options one = tj_options_default();
  one.nthreads = 1;
  static const struct { const char *env, *has; } w[] = {
      {NULL, " <= 3) {"}, {"2", " <= 2) {"}, {"4", " <= 4) {"}, {"8", " <= 8) {"}, {"0", NULL}};
  for (int s = 0; s < 5; s++) {
    if (w[s].env) setenv("TJ_PEEL", w[s].env, 1);
    else unsetenv("TJ_PEEL");
    tj_tensor *A;
    ck_assert_int_eq(tj_tensor_new("A", TJ_F64, 2, dA, &ss, &A), TJ_OK);
    tj_tensor *ops[3] = {A, B, c};
    tj_kernel *k;
    ck_assert_msg(tj_compile(cx, "A(i,j) = B(i,j,k) * c(k)", ops, 3, NULL, &one, &k) == TJ_OK,
                  "%s", tj_last_error());
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_int_eq(tj_kernel_print_after(k, "peel", f), TJ_OK);
    fclose(f);
    const char *env = w[s].env ? w[s].env : "unset";
    if (w[s].has) ck_assert_msg(strstr(text, w[s].has), "TJ_PEEL=%s: no '%s' in\n%s", env, w[s].has, text);
    else ck_assert_msg(!strstr(text, "peel_n"), "TJ_PEEL=%s: peeled\n%s", env, text);
    free(text);
    ck_assert_int_eq(tj_kernel_run(k, TJ_EVALUATE, NULL, 0), TJ_OK);
    for (int64_t i = 0; i < I; i++)
      for (int64_t j = 0; j < J; j++) {
        double got;
        ck_assert_int_eq(tj_tensor_get(A, (int64_t[]){i, j}, &got), TJ_OK);
        ck_assert_msg(fabs(got - want[i][j]) <= 1e-12 * (1 + fabs(want[i][j])),
                      "TJ_PEEL=%s: A(%lld,%lld) = %.17g, want %.17g", env, (long long)i,
                      (long long)j, got, want[i][j]);
      }
    tj_kernel_free(k);
    tj_tensor_free(A);
  }
  unsetenv("TJ_PEEL");
  tj_context_free(cx);
  tj_tensor_free(B);
  tj_tensor_free(c);
}
END_TEST

static Suite *kernels_suite(void) {
  Suite *s = suite_create("kernels");
  for (int f = 0; f < NFAM; f++) fam_start[f + 1] = fam_start[f] + ncombos(&FAMILIES[f]);
  for (int f = 0; f < NFAM; f++) {
    TCase *tc = tcase_create(FAMILIES[f].name);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_family, fam_start[f], fam_start[f + 1]);
    suite_add_tcase(s, tc);
  }
  TCase *tc = tcase_create("dtypes_widths");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_typed, 0, NTYPED);
  suite_add_tcase(s, tc);
  tc = tcase_create("edges");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_edges, 0, NEDGES);
  suite_add_tcase(s, tc);
  tc = tcase_create("split");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, test_split, 0, 8);
  tcase_add_test(tc, test_split_rebind);
  suite_add_tcase(s, tc);
  tc = tcase_create("cache");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_cache);
  tcase_add_test(tc, test_row_chunk_strategies);
  tcase_add_test(tc, test_peel_widths);
  suite_add_tcase(s, tc);
  tc = tcase_create("dense_blocking");
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, test_dense_blocking, 0, NDENSE);
  suite_add_tcase(s, tc);
  tc = tcase_create("sparse_outer_vector");
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, test_sparse_outer_vector, 0, NSPARSE_OUTER);
  suite_add_tcase(s, tc);
  tc = tcase_create("threads_vectors");
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, test_threads_and_vectors, 0, NMATRIXED);
  suite_add_tcase(s, tc);
  tc = tcase_create("property");
  tcase_set_timeout(tc, 300);
  tcase_add_loop_test(tc, test_property, 0, PROP_BATCHES);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(kernels_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

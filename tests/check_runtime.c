/* Runtime storage: formats, pack/unpack/get, conversions, kernel helpers.
 *
 * Every sparse result is checked against an independent dense copy built
 * next to the inserts; small known matrices pin the exact pos/crd arrays.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/tensor.h"

static tj_format fmt_of(const char *spec) {
  tj_format f;
  ck_assert_msg(tj_format_parse(spec, &f) == TJ_OK, "%s: %s", spec,
                tj_last_error());
  return f;
}

static uint64_t rng_state;
static uint64_t rng(void) {
  rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return rng_state >> 33;
}

static int64_t prod(const int64_t *dims, int order) {
  int64_t p = 1;
  for (int m = 0; m < order; m++) p *= dims[m];
  return p;
}

/* Inserts random entries (with some duplicates) into t and into dense. */
static int64_t filled_coords;   /* distinct coordinates of the last fill_random */

static int64_t fill_random(tj_tensor *t, double *dense, double density) {
  int order = tj_tensor_order(t);
  int64_t dims[TJ_MAX_ORDER], n = 0;
  filled_coords = 0;
  for (int m = 0; m < order; m++) dims[m] = tj_tensor_dim(t, m);
  int64_t total = prod(dims, order);
  for (int64_t lin = 0; lin < total; lin++) {
    if ((double)(rng() % 1000) / 1000.0 >= density) continue;
    int64_t c[TJ_MAX_ORDER], rest = lin;
    for (int m = order - 1; m >= 0; m--) c[m] = rest % dims[m], rest /= dims[m];
    int reps = rng() % 5 == 0 ? 2 : 1;
    filled_coords++;
    for (int k = 0; k < reps; k++) {
      double v = (double)(rng() % 19) - 9 + 0.5;
      ck_assert_int_eq(tj_tensor_insert(t, c, v), TJ_OK);
      dense[lin] += v;
      n++;
    }
  }
  return n;
}

/* Checks t against dense: get at every coordinate, to_dense, unpack
 * (sum and level order). */
static void check_against(tj_tensor *t, const double *dense) {
  int order = tj_tensor_order(t);
  int64_t dims[TJ_MAX_ORDER];
  for (int m = 0; m < order; m++) dims[m] = tj_tensor_dim(t, m);
  int64_t total = prod(dims, order);
  for (int64_t lin = 0; lin < total; lin++) {
    int64_t c[TJ_MAX_ORDER], rest = lin;
    for (int m = order - 1; m >= 0; m--) c[m] = rest % dims[m], rest /= dims[m];
    double v;
    ck_assert_int_eq(tj_tensor_get(t, c, &v), TJ_OK);
    ck_assert_msg(fabs(v - dense[lin]) < 1e-9, "get at %lld: %g vs %g",
                  (long long)lin, v, dense[lin]);
  }
  double *d2 = malloc((size_t)(total + 1) * sizeof *d2);
  ck_assert_int_eq(rt_tensor_to_dense(t, d2, NULL), TJ_OK);
  for (int64_t i = 0; i < total; i++) ck_assert(fabs(d2[i] - dense[i]) < 1e-9);
  int64_t *coords, n;
  double *vals;
  ck_assert_int_eq(tj_tensor_unpack(t, &coords, &vals, &n), TJ_OK);
  ck_assert_int_eq(n, tj_tensor_nnz(t));
  memset(d2, 0, (size_t)(total + 1) * sizeof *d2);
  const tj_format *f = tj_tensor_format(t);
  for (int64_t e = 0; e < n; e++) {
    int64_t lin = 0;
    for (int m = 0; m < order; m++) lin = lin * dims[m] + coords[e * order + m];
    d2[lin] += vals[e];
    if (e == 0) continue;
    int cmp = 0;   /* level order: previous <= current */
    for (int l = 0; l < order && !cmp; l++) {
      int64_t a = coords[(e - 1) * order + f->mode_order[l]];
      int64_t b = coords[e * order + f->mode_order[l]];
      cmp = (a > b) - (a < b);
    }
    ck_assert_msg(cmp <= 0, "unpack not in level order at %lld", (long long)e);
  }
  for (int64_t i = 0; i < total; i++) ck_assert(fabs(d2[i] - dense[i]) < 1e-9);
  free(coords), free(vals), free(d2);
}

static const char *fmts2[] = {"dd", "dd:1,0", "ds", "ds:1,0", "sd",
                              "sd:1,0", "ss", "ss:1,0", "uq", "uc"};

START_TEST(round_trip_order2) {
  rng_state = 1234 + (uint64_t)_i;
  int64_t dims[2] = {13, 17};
  tj_format f = fmt_of(fmts2[_i]);
  tj_tensor *t;
  ck_assert_int_eq(tj_tensor_new("A", TJ_F64, 2, dims, &f, &t), TJ_OK);
  double dense[13 * 17] = {0};
  int64_t inserted = fill_random(t, dense, 0.3);
  ck_assert_int_eq(tj_tensor_pack(t), TJ_OK);
  /* COO with a unique column level (uq) sums duplicate (i, j); uc keeps them */
  if (!strcmp(fmts2[_i], "uq")) ck_assert_int_eq(tj_tensor_nnz(t), filled_coords);
  if (!strcmp(fmts2[_i], "uc")) ck_assert_int_eq(tj_tensor_nnz(t), inserted);
  ck_assert_int_gt(inserted, filled_coords);   /* the fill made duplicates */
  if (f.levels[0] == 'd' && f.levels[1] == 'd')
    ck_assert_int_eq(tj_tensor_nnz(t), 13 * 17);
  check_against(t, dense);
  /* every other format converted from this one holds the same values */
  for (size_t k = 0; k < sizeof fmts2 / sizeof *fmts2; k++) {
    tj_format g = fmt_of(fmts2[k]);
    tj_tensor *u;
    ck_assert_int_eq(tj_tensor_convert(t, &g, &u), TJ_OK);
    check_against(u, dense);
    tj_tensor_free(u);
  }
  tj_tensor_free(t);
}
END_TEST

/* [[1,0,2,0],[0,0,0,0],[0,3,0,4]] */
static tj_tensor *known(const char *spec) {
  int64_t dims[2] = {3, 4};
  tj_format f = fmt_of(spec);
  tj_tensor *t;
  ck_assert_int_eq(tj_tensor_new("K", TJ_F64, 2, dims, &f, &t), TJ_OK);
  int64_t c[4][2] = {{2, 3}, {0, 2}, {2, 1}, {0, 0}};
  double v[4] = {4, 2, 3, 1};
  for (int k = 0; k < 4; k++) ck_assert_int_eq(tj_tensor_insert(t, c[k], v[k]), TJ_OK);
  ck_assert_int_eq(tj_tensor_pack(t), TJ_OK);
  return t;
}

static void expect_idx(const void *a, int w, int64_t len, int64_t got_len,
                       const int64_t *want) {
  ck_assert_int_eq(got_len, len);
  for (int64_t i = 0; i < len; i++)
    ck_assert_int_eq(rt_idx(a, w, i), want[i]);
}

START_TEST(known_layouts) {
  tj_tensor *t = known("ds");
  tj_storage *s = rt_tensor_storage(t);
  ck_assert_int_eq(s->pos_width, 4);
  expect_idx(s->levels[1].pos, 4, 4, s->levels[1].pos_len, (int64_t[]){0, 2, 2, 4});
  expect_idx(s->levels[1].crd, 4, 4, s->levels[1].crd_len, (int64_t[]){0, 2, 1, 3});
  ck_assert(((double *)s->vals)[2] == 3);
  tj_tensor_free(t);

  t = known("ds:1,0");
  s = rt_tensor_storage(t);
  ck_assert_int_eq(s->map[0].dim, 1);
  ck_assert_int_eq(s->map[0].op, TJ_LX_DIM);
  expect_idx(s->levels[1].pos, 4, 5, s->levels[1].pos_len, (int64_t[]){0, 1, 2, 3, 4});
  expect_idx(s->levels[1].crd, 4, 4, s->levels[1].crd_len, (int64_t[]){0, 2, 0, 2});
  double *v = s->vals;
  ck_assert(v[0] == 1 && v[1] == 3 && v[2] == 2 && v[3] == 4);
  tj_tensor_free(t);

  t = known("ss");
  s = rt_tensor_storage(t);
  expect_idx(s->levels[0].pos, 4, 2, s->levels[0].pos_len, (int64_t[]){0, 2});
  expect_idx(s->levels[0].crd, 4, 2, s->levels[0].crd_len, (int64_t[]){0, 2});
  expect_idx(s->levels[1].pos, 4, 3, s->levels[1].pos_len, (int64_t[]){0, 2, 4});
  tj_tensor_free(t);

  t = known("sd");
  s = rt_tensor_storage(t);
  expect_idx(s->levels[0].crd, 4, 2, s->levels[0].crd_len, (int64_t[]){0, 2});
  ck_assert_int_eq(s->vals_len, 8);   /* two stored rows of 4 */
  tj_tensor_free(t);

  t = known("uq");
  s = rt_tensor_storage(t);
  ck_assert_int_eq(s->levels[0].kind, TJ_LVL_COMPRESSED);
  ck_assert(s->levels[0].flags & TJ_LVL_NONUNIQUE);
  ck_assert_int_eq(s->levels[1].kind, TJ_LVL_SINGLETON);
  expect_idx(s->levels[0].pos, 4, 2, s->levels[0].pos_len, (int64_t[]){0, 4});
  expect_idx(s->levels[0].crd, 4, 4, s->levels[0].crd_len, (int64_t[]){0, 0, 2, 2});
  expect_idx(s->levels[1].crd, 4, 4, s->levels[1].crd_len, (int64_t[]){0, 2, 1, 3});
  tj_tensor_free(t);
}
END_TEST

START_TEST(empty_tensors) {
  const char *specs[] = {"ds", "ss", "uq", "dd", "sd:1,0"};
  for (int k = 0; k < 5; k++) {
    int64_t dims[2] = {5, 3};
    tj_format f = fmt_of(specs[k]);
    tj_tensor *t;
    ck_assert_int_eq(tj_tensor_new("E", TJ_F64, 2, dims, &f, &t), TJ_OK);
    ck_assert_int_eq(tj_tensor_nnz(t), 0);
    ck_assert_int_eq(tj_tensor_pack(t), TJ_OK);
    double dense[15] = {0};
    check_against(t, dense);
    ck_assert_int_eq(tj_tensor_nnz(t), k == 3 ? 15 : 0);
    if (k == 0) {   /* CSR of nothing: a pos array of zeros */
      tj_storage *s = rt_tensor_storage(t);
      expect_idx(s->levels[1].pos, 4, 6, s->levels[1].pos_len,
                 (int64_t[]){0, 0, 0, 0, 0, 0});
    }
    tj_tensor_free(t);
  }
  /* zero-sized dims */
  int64_t dims[2] = {0, 7};
  tj_format f = fmt_of("ds");
  tj_tensor *t;
  ck_assert_int_eq(tj_tensor_new("Z", TJ_F64, 2, dims, &f, &t), TJ_OK);
  ck_assert_int_eq(tj_tensor_pack(t), TJ_OK);
  ck_assert_int_eq(tj_tensor_nnz(t), 0);
  tj_tensor_free(t);
}
END_TEST

START_TEST(empty_rows_and_duplicates) {
  int64_t dims[2] = {6, 6};
  tj_format f = fmt_of("ds");
  tj_tensor *t, *c;
  ck_assert_int_eq(tj_tensor_new("D", TJ_F64, 2, dims, &f, &t), TJ_OK);
  int64_t a[2] = {4, 1}, b[2] = {1, 5};
  tj_tensor_insert(t, a, 2);
  tj_tensor_insert(t, b, 1);
  tj_tensor_insert(t, a, 3);
  ck_assert_int_eq(tj_tensor_pack(t), TJ_OK);
  ck_assert_int_eq(tj_tensor_nnz(t), 2);
  double v;
  tj_tensor_get(t, a, &v);
  ck_assert(v == 5);
  tj_storage *s = rt_tensor_storage(t);
  expect_idx(s->levels[1].pos, 4, 7, s->levels[1].pos_len,
             (int64_t[]){0, 0, 1, 1, 1, 2, 2});
  /* COO with a nonunique column level keeps both copies; get sums them */
  tj_format g = fmt_of("uc");
  ck_assert_int_eq(tj_tensor_new("C", TJ_F64, 2, dims, &g, &c), TJ_OK);
  tj_tensor_insert(c, a, 2);
  tj_tensor_insert(c, a, 3);
  ck_assert_int_eq(tj_tensor_pack(c), TJ_OK);
  ck_assert_int_eq(tj_tensor_nnz(c), 2);
  tj_tensor_get(c, a, &v);
  ck_assert(v == 5);
  /* packing again merges new inserts with the stored contents */
  tj_tensor_insert(t, a, 10);
  int64_t z[2] = {0, 0};
  tj_tensor_insert(t, z, 7);
  ck_assert_int_eq(tj_tensor_pack(t), TJ_OK);
  ck_assert_int_eq(tj_tensor_nnz(t), 3);
  tj_tensor_get(t, a, &v);
  ck_assert(v == 15);
  tj_tensor_get(t, z, &v);
  ck_assert(v == 7);
  tj_tensor_free(t);
  tj_tensor_free(c);
}
END_TEST

START_TEST(widths) {
  int64_t dims[2] = {40, 50};
  for (int w = 32; w <= 64; w += 32) {
    tj_format f = fmt_of("ss:1,0");
    f.pos_width = f.crd_width = w;
    tj_tensor *t;
    ck_assert_int_eq(tj_tensor_new("W", TJ_F64, 2, dims, &f, &t), TJ_OK);
    ck_assert_int_eq(rt_tensor_storage(t)->pos_width, w / 8);
    ck_assert_int_eq(rt_tensor_storage(t)->crd_width, w / 8);
    ck_assert_int_eq(tj_tensor_format(t)->crd_width, w);
    rng_state = 99;
    double dense[40 * 50] = {0};
    fill_random(t, dense, 0.1);
    ck_assert_int_eq(tj_tensor_pack(t), TJ_OK);
    check_against(t, dense);
    tj_tensor_free(t);
  }
  /* default width is 32 */
  tj_format f = fmt_of("ds");
  tj_tensor *t;
  ck_assert_int_eq(tj_tensor_new("W", TJ_F64, 2, dims, &f, &t), TJ_OK);
  ck_assert_int_eq(tj_tensor_format(t)->pos_width, 32);
  tj_tensor_free(t);
  /* explicit 32-bit coordinates cannot index 2^32 columns */
  int64_t big[2] = {4, 1LL << 32};
  f.crd_width = 32;
  ck_assert_int_eq(tj_tensor_new("W", TJ_F64, 2, big, &f, &t), TJ_ERR_FORMAT);
  ck_assert(strstr(tj_last_error(), "do not fit crdWidth 32"));
  f.crd_width = 12;
  ck_assert_int_eq(tj_tensor_new("W", TJ_F64, 2, dims, &f, &t), TJ_ERR_FORMAT);
  ck_assert(strstr(tj_last_error(), "must be 8, 16, 32 or 64"));
}
END_TEST

static const char *fmts3[] = {"sss", "uqq", "ddd", "dsd", "sds:2,0,1",
                              "dss:1,2,0", "ssd", "suq"};

START_TEST(order3_conversions) {
  rng_state = 77 + (uint64_t)_i;
  int64_t dims[3] = {4, 5, 6};
  tj_format f = fmt_of(fmts3[_i]);
  tj_tensor *t;
  ck_assert_int_eq(tj_tensor_new("T", TJ_F64, 3, dims, &f, &t), TJ_OK);
  double dense[120] = {0};
  fill_random(t, dense, 0.15);
  ck_assert_int_eq(tj_tensor_pack(t), TJ_OK);
  check_against(t, dense);
  /* CSF -> COO -> dense -> CSF chain from this format */
  const char *chain[] = {"sss", "uqq", "ddd", "dsd", "sss:2,1,0"};
  tj_tensor *cur = t;
  for (int k = 0; k < 5; k++) {
    tj_format g = fmt_of(chain[k]);
    tj_tensor *next;
    ck_assert_int_eq(tj_tensor_convert(cur, &g, &next), TJ_OK);
    check_against(next, dense);
    if (cur != t) tj_tensor_free(cur);
    cur = next;
  }
  tj_tensor_free(cur);
  tj_tensor_free(t);
}
END_TEST

/* An all-dense tensor to another dense level order moves its values
 * directly (permute_dense): every coordinate reads the same as in the
 * source, for 8-, 4- and 1-byte values, including a zero extent. */
START_TEST(dense_transposes) {
  static const tj_dtype dts[] = {TJ_F64, TJ_F32, TJ_I8};
  static const char *const to[] = {"ddd:2,0,1", "ddd:1,2,0", "ddd:0,2,1", "ddd", "sds:2,1,0"};
  for (int z = 0; z < 2; z++)
    for (int d = 0; d < 3; d++) {
      int64_t dims[3] = {3, z ? 0 : 4, 5};
      tj_format f = fmt_of("ddd");
      tj_tensor *t;
      ck_assert_int_eq(tj_tensor_new("T", dts[d], 3, dims, &f, &t), TJ_OK);
      for (int64_t lin = 0; lin < prod(dims, 3); lin++) {
        int64_t c[3] = {lin / (dims[1] * 5), lin / 5 % dims[1], lin % 5};
        if (lin % 7 != 3) ck_assert_int_eq(tj_tensor_insert(t, c, (double)(lin % 23) - 11), TJ_OK);
      }
      ck_assert_int_eq(tj_tensor_pack(t), TJ_OK);
      for (int k = 0; k < 5; k++) {
        tj_format g = fmt_of(to[k]);
        tj_tensor *u;
        ck_assert_int_eq(tj_tensor_convert(t, &g, &u), TJ_OK);
        ck_assert_int_eq(tj_tensor_dtype(u), dts[d]);
        for (int64_t lin = 0; lin < prod(dims, 3); lin++) {
          int64_t c[3] = {lin / (dims[1] * 5), lin / 5 % dims[1], lin % 5};
          double a, b;
          ck_assert_int_eq(tj_tensor_get(t, c, &a), TJ_OK);
          ck_assert_int_eq(tj_tensor_get(u, c, &b), TJ_OK);
          ck_assert_msg(a == b && a == (lin % 7 == 3 ? 0 : (double)(lin % 23) - 11),
                        "%s dtype %d at %lld: %g, source %g", to[k], (int)dts[d], (long long)lin,
                        b, a);
        }
        tj_tensor_free(u);
      }
      tj_tensor_free(t);
    }
}
END_TEST

START_TEST(order4_dsdd) {
  rng_state = 5;
  int64_t dims[4] = {3, 4, 2, 5};
  tj_format f = fmt_of("dsdd");
  tj_tensor *t, *u;
  ck_assert_int_eq(tj_tensor_new("Q", TJ_F64, 4, dims, &f, &t), TJ_OK);
  double dense[120] = {0};
  fill_random(t, dense, 0.2);
  ck_assert_int_eq(tj_tensor_pack(t), TJ_OK);
  check_against(t, dense);
  tj_format g = fmt_of("ssss:3,1,0,2");
  ck_assert_int_eq(tj_tensor_convert(t, &g, &u), TJ_OK);
  check_against(u, dense);
  tj_tensor_free(u);
  tj_tensor_free(t);
}
END_TEST

START_TEST(hypersparse) {
  int64_t dims[2] = {10000000000LL, 10000000000LL};
  tj_format f = fmt_of("ss");
  tj_tensor *t, *u;
  ck_assert_int_eq(tj_tensor_new("H", TJ_F64, 2, dims, &f, &t), TJ_OK);
  ck_assert_int_eq(tj_tensor_format(t)->crd_width, 64);
  rng_state = 3;
  int64_t cs[1000][2];
  for (int k = 0; k < 1000; k++) {
    cs[k][0] = (int64_t)((rng() << 20 ^ rng()) % (uint64_t)dims[0]);
    cs[k][1] = (int64_t)((rng() << 20 ^ rng()) % (uint64_t)dims[1]);
    ck_assert_int_eq(tj_tensor_insert(t, cs[k], k + 1), TJ_OK);
  }
  ck_assert_int_eq(tj_tensor_pack(t), TJ_OK);
  ck_assert_int_eq(tj_tensor_nnz(t), 1000);
  ck_assert_int_lt(tj_tensor_bytes(t), 100 * 1024);
  for (int k = 0; k < 1000; k += 37) {
    double v;
    tj_tensor_get(t, cs[k], &v);
    ck_assert(v == k + 1);
  }
  /* DCSC and COO of the same: also small */
  const char *others[] = {"ss:1,0", "uq"};
  for (int k = 0; k < 2; k++) {
    tj_format g = fmt_of(others[k]);
    ck_assert_int_eq(tj_tensor_convert(t, &g, &u), TJ_OK);
    ck_assert_int_eq(tj_tensor_nnz(u), 1000);
    ck_assert_int_lt(tj_tensor_bytes(u), 100 * 1024);
    double v;
    tj_tensor_get(u, cs[500], &v);
    ck_assert(v == 501);
    tj_tensor_free(u);
  }
  tj_tensor_free(t);
}
END_TEST

START_TEST(format_parse_good) {
  tj_format f = fmt_of("ds:1,0");
  ck_assert_int_eq(f.order, 2);
  ck_assert_str_eq(f.levels, "ds");
  ck_assert(f.mode_order[0] == 1 && f.mode_order[1] == 0);
  char buf[64];
  tj_format_print(&f, buf, sizeof buf);
  ck_assert_str_eq(buf, "ds:1,0");
  f = fmt_of("(i,j) -> (j : dense, i : compressed)");
  tj_format_print(&f, buf, sizeof buf);
  ck_assert_str_eq(buf, "ds:1,0");
  f = fmt_of("(i, j, k) -> (i : compressed(nonunique), j : singleton(nonunique),"
             " k : singleton)");
  tj_format_print(&f, buf, sizeof buf);
  ck_assert_str_eq(buf, "ucq");
  f = fmt_of("uqq");
  ck_assert_int_eq(f.order, 3);
  f = tj_format_dense(3);
  tj_format_print(&f, buf, sizeof buf);
  ck_assert_str_eq(buf, "ddd");
  f = fmt_of("");
  ck_assert_int_eq(f.order, 0);
}
END_TEST

static const struct { const char *spec, *msg; } bad_formats[] = {
  {"dx", "bad level letter 'x' at column 2"},
  {"ds:1,1", "mode order is not a permutation of 0..1"},
  {"ds:0", "mode order has 1 entries but the format has 2 levels"},
  {"ds:0,1,2", "mode order has more entries than the 2 levels"},
  {"sssssssss", "has more than 8 levels"},
  {"sq", "singleton level 1 needs a nonunique level"},
  {"q", "singleton level 0 needs a nonunique level"},
  {"ds:a", "expected a mode number at column 4"},
  {"(i,j) -> (j : dense, i : sparse)", "unknown level type at column 26"},
  {"(i,j) -> (j : dense, k : compressed)", "unknown dim 'k'"},
  {"(i,j) -> (j : dense)", "2 dims but 1 levels"},
  {"(i,j) -> (i : dense, i : dense)", "not a permutation"},
};

START_TEST(format_parse_errors) {
  tj_format f;
  ck_assert_int_eq(tj_format_parse(bad_formats[_i].spec, &f), TJ_ERR_PARSE);
  ck_assert_msg(strstr(tj_last_error(), bad_formats[_i].msg),
                "%s: got '%s'", bad_formats[_i].spec, tj_last_error());
}
END_TEST

START_TEST(reserve_growth) {
  tj_format f = fmt_of("ds");
  int64_t dims[2] = {3, 3};
  tj_tensor *t;
  ck_assert_int_eq(tj_tensor_new("R", TJ_F64, 2, dims, &f, &t), TJ_OK);
  tj_storage *s = rt_tensor_storage(t);
  ck_assert_int_eq(tj_rt_reserve(s, TJ_ARR_CRD, 1, 5), TJ_KERNEL_OK);
  ck_assert_int_eq(s->levels[1].crd_cap, 16);
  int32_t *crd = s->levels[1].crd;
  for (int i = 0; i < 16; i++) ck_assert_int_eq(crd[i], 0);
  crd[3] = 42;
  ck_assert_int_eq(tj_rt_reserve(s, TJ_ARR_CRD, 1, 100), TJ_KERNEL_OK);
  ck_assert_int_eq(s->levels[1].crd_cap, 128);
  crd = s->levels[1].crd;
  ck_assert_int_eq(crd[3], 42);
  for (int i = 16; i < 128; i++) ck_assert_int_eq(crd[i], 0);
  /* Arrays start on a cache line, also grown and past the huge-page size
   * (malloc would put those 16 bytes past a page). */
  ck_assert_int_eq((uintptr_t)crd % 64, 0);
  ck_assert_int_eq(tj_rt_reserve(s, TJ_ARR_VALS, 0, 3), TJ_KERNEL_OK);
  ck_assert_int_eq((uintptr_t)s->vals % 64, 0);
  ck_assert_int_eq(tj_rt_reserve(s, TJ_ARR_VALS, 0, (int64_t)(RT_HUGE_BYTES / 8) + 5), TJ_KERNEL_OK);
  ck_assert_int_eq((uintptr_t)s->vals % 64, 0);
  ck_assert_double_eq(((double *)s->vals)[RT_HUGE_BYTES / 8 + 4], 0);
  ((double *)s->vals)[7] = 2.5;   /* grown again, up to RT_REMAP_BYTES: a fresh array */
  ck_assert_int_eq(tj_rt_reserve(s, TJ_ARR_VALS, 0, 3 * (int64_t)s->vals_cap), TJ_KERNEL_OK);
  ck_assert_int_eq((uintptr_t)s->vals % 64, 0);
  ck_assert_double_eq(((double *)s->vals)[7], 2.5);
  ck_assert_double_eq(((double *)s->vals)[s->vals_cap - 1], 0);
  /* past RT_REMAP_BYTES: realloc (mremap), the alignment, contents and zeroed tail kept */
  ck_assert_int_eq(tj_rt_reserve(s, TJ_ARR_VALS, 0, (int64_t)(RT_REMAP_BYTES / 8) + 5), TJ_KERNEL_OK);
  ck_assert((size_t)s->vals_cap * 8 > RT_REMAP_BYTES);
  ((double *)s->vals)[s->vals_cap - 2] = -1.5;
  int64_t was = s->vals_cap;
  ck_assert_int_eq(tj_rt_reserve(s, TJ_ARR_VALS, 0, was + 1), TJ_KERNEL_OK);
  ck_assert_int_eq((uintptr_t)s->vals % 64, 0);
  ck_assert_double_eq(((double *)s->vals)[7], 2.5);
  ck_assert_double_eq(((double *)s->vals)[was - 2], -1.5);
  ck_assert_double_eq(((double *)s->vals)[was], 0);
  ck_assert_double_eq(((double *)s->vals)[s->vals_cap - 1], 0);
  rt_storage_clear(s);
  ck_assert_int_eq(tj_rt_reserve(s, TJ_ARR_CRD, 1, 100), TJ_KERNEL_OK);
  crd = s->levels[1].crd;
  crd[3] = 42;
  ck_assert_int_eq(tj_rt_reserve(s, TJ_ARR_CRD, 1, 20), TJ_KERNEL_OK);
  ck_assert_int_eq(s->levels[1].crd_cap, 128);
  ck_assert_int_eq(tj_rt_reserve(s, TJ_ARR_VALS, 0, 17), TJ_KERNEL_OK);
  ck_assert_int_eq(s->vals_cap, 32);
  ck_assert_int_eq(tj_rt_reserve(s, TJ_ARR_POS, 1, 4), TJ_KERNEL_OK);
  ck_assert_int_eq(s->levels[1].pos_cap, 16);
  ck_assert_int_eq(tj_rt_reserve(s, TJ_ARR_POS, 9, 4), TJ_KERNEL_SHAPE);
  ck_assert_int_eq(tj_rt_reserve(s, TJ_ARR_VALS, 0, INT64_MAX), TJ_KERNEL_NOMEM);
  ck_assert_int_eq(s->vals_cap, 32);
  rt_storage_clear(s);
  ck_assert(s->vals == NULL && s->levels[1].crd_cap == 0);
  void *w;
  ck_assert_int_eq(tj_rt_alloc(64, &w), TJ_KERNEL_OK);
  ck_assert(w && ((char *)w)[63] == 0);
  tj_rt_free(w);
  int64_t c64[] = {5, -1, 3, 3, 0};
  tj_rt_sort_crd(c64, 5, 8);
  ck_assert(c64[0] == -1 && c64[1] == 0 && c64[4] == 5);
  int32_t c32[] = {9, 2, 7};
  tj_rt_sort_crd(c32, 3, 4);
  ck_assert(c32[0] == 2 && c32[2] == 9);
  /* 8- and 16-bit lists are unsigned and sorted in their own width (they
   * were once read as 64-bit: past the list's end). 40 entries take the
   * quicksort, 30 distinct 16-bit ones the bitmap. */
  uint8_t c8[41];
  uint16_t c16[31];
  int lo8 = 255, sum8 = 0;
  for (int k = 0; k < 40; k++) {
    c8[k] = (uint8_t)(255 - (k * 37) % 256);
    lo8 = c8[k] < lo8 ? c8[k] : lo8;
    sum8 += c8[k];
  }
  c8[40] = 77;   /* past the list: untouched */
  tj_rt_sort_crd(c8, 40, 1);
  for (int k = 1; k < 40; k++) ck_assert_int_le(c8[k - 1], c8[k]);
  for (int k = 0; k < 40; k++) sum8 -= c8[k];
  ck_assert_int_eq(sum8, 0);
  ck_assert_int_eq(c8[0], lo8);
  ck_assert_int_eq(c8[39], 255);
  ck_assert_int_eq(c8[40], 77);
  for (int k = 0; k < 30; k++) c16[k] = (uint16_t)(65535 - k * 2000);
  c16[30] = 7;
  tj_rt_sort_crd(c16, 30, 2);
  for (int k = 0; k < 30; k++) ck_assert_int_eq(c16[k], 65535 - (29 - k) * 2000);
  ck_assert_int_eq(c16[30], 7);
  tj_tensor_free(t);
}
END_TEST

/* The bitmap sort of distinct 32-bit lists (workspace rows): 100 values
 * 655 apart (1000, 1655, ..., 65845: a span of four 64-word groups) in a
 * shuffled order come out as 1000 + 655 k; a repeated value gives the
 * bitmap up and leaves it clear, so the list is sorted with its repeat and
 * a second distinct list after it gets no stale entry. */
START_TEST(sort_crd_bitmap) {
  int32_t c[101];
  for (int k = 0; k < 100; k++) c[k] = 1000 + 655 * ((k * 37) % 100);
  c[100] = -5; /* past the list: untouched */
  tj_rt_sort_crd(c, 100, 4);
  for (int k = 0; k < 100; k++) ck_assert_int_eq(c[k], 1000 + 655 * k);
  ck_assert_int_eq(c[100], -5);
  for (int k = 0; k < 100; k++) c[k] = 1000 + 655 * ((k * 37) % 100);
  c[100] = 1000 + 655 * 50; /* a repeat of the 51st */
  tj_rt_sort_crd(c, 101, 4);
  for (int k = 0; k <= 50; k++) ck_assert_int_eq(c[k], 1000 + 655 * k);
  for (int k = 51; k < 101; k++) ck_assert_int_eq(c[k], 1000 + 655 * (k - 1));
  for (int k = 0; k < 40; k++) c[k] = 3 + 1601 * ((k * 7) % 40); /* 3 .. 62442 */
  tj_rt_sort_crd(c, 40, 4);
  for (int k = 0; k < 40; k++) ck_assert_int_eq(c[k], 3 + 1601 * k);
}
END_TEST

/* The marks of 3 words (192 marks, then 3 touched bytes and 64 to spare)
 * read back: 1, 40, 63, 64, 130, 191 marked, words 0 and 2 touched (word
 * 1's 64 is not read): 1, 40, 63, 130, 191 in order, the touched bytes
 * cleared, the marks kept; then word 1 alone at width 2, word 2 at 8. */
START_TEST(marked_crd_reads_marks) {
  static uint8_t mark[3 * 64 + 3 + 64];
  memset(mark, 0, sizeof mark);
  const int on[] = {1, 40, 63, 64, 130, 191};
  for (int k = 0; k < 6; k++) mark[on[k]] = 1;
  mark[192 + 0] = 1, mark[192 + 2] = 1;   /* word 1 (64) not touched */
  int32_t c4[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
  ck_assert_int_eq(tj_rt_marked_crd(c4, mark, 3, 4), 5);
  const int32_t want[] = {1, 40, 63, 130, 191};
  for (int k = 0; k < 5; k++) ck_assert_int_eq(c4[k], want[k]);
  ck_assert_int_eq(c4[5], -1);
  for (int w = 0; w < 3; w++) ck_assert_int_eq(mark[192 + w], 0);   /* touched cleared */
  ck_assert_int_eq(mark[130], 1);                                     /* marks kept */
  ck_assert_int_eq(tj_rt_marked_crd(c4, mark, 3, 4), 0);              /* nothing touched */
  mark[192 + 1] = 1;
  uint16_t c2[4] = {0};
  ck_assert_int_eq(tj_rt_marked_crd(c2, mark, 3, 2), 1);
  ck_assert_int_eq(c2[0], 64);
  int64_t c8[2] = {0};
  mark[192 + 2] = 1;
  ck_assert_int_eq(tj_rt_marked_crd(c8, mark, 3, 8), 2);
  ck_assert_int_eq(c8[0], 130);
  ck_assert_int_eq(c8[1], 191);
}
END_TEST

/* Parallel loops share only enough work: a body records its ranges. */
typedef struct Calls {
  int n;
  int64_t lo[64], hi[64];
} Calls;
static void record_range(void *ctx, int64_t lo, int64_t hi) {
  Calls *c = ctx;
  int k = __atomic_fetch_add(&c->n, 1, __ATOMIC_RELAXED);
  if (k < 64) {
    c->lo[k] = lo;
    c->hi[k] = hi;
  }
}

START_TEST(parallel_min_work) {
  enum { ROWS = 1000 };
  static int32_t pos[ROWS + 1];
  for (int i = 0; i <= ROWS; i++) pos[i] = 10 * i; /* 11 000 rows + entries */
  char *saved = getenv("TJ_PAR_MIN_WORK") ? strdup(getenv("TJ_PAR_MIN_WORK")) : NULL;
  tj_rt_set_threads(2);
  setenv("TJ_PAR_MIN_WORK", "11001", 1); /* more than the loop has: one call */
  ck_assert_int_eq(tj_rt_par_min_work(), 11001);
  Calls one = {0};
  tj_rt_parallel_for_sched(0, ROWS, pos, 4, NULL, 0, TJ_PAR_DEFAULT, record_range, &one);
  ck_assert_int_eq(one.n, 1);
  ck_assert(one.lo[0] == 0 && one.hi[0] == ROWS);
  Calls st = {0};
  tj_rt_parallel_for_sched(0, ROWS, pos, 4, NULL, 0, TJ_PAR_STATIC, record_range, &st);
  ck_assert_int_eq(st.n, 1);
  setenv("TJ_PAR_MIN_WORK", "11000", 1); /* exactly the loop's work: shared */
  Calls many = {0};
  tj_rt_parallel_for_sched(0, ROWS, pos, 4, NULL, 0, TJ_PAR_DEFAULT, record_range, &many);
  ck_assert_int_eq(many.n, 16); /* 8 chunks a thread, together the whole range */
  int64_t covered = 0;
  for (int c = 0; c < many.n; c++) covered += many.hi[c] - many.lo[c];
  ck_assert_int_eq(covered, ROWS);
  /* a light body (one innermost trip a unit) needs twice the work */
  Calls light = {0};
  tj_rt_parallel_for_sched(0, ROWS, pos, 4, NULL, 0, TJ_PAR_DEFAULT | TJ_PAR_LIGHT, record_range,
                           &light);
  ck_assert_int_eq(light.n, 1);
  ck_assert(light.lo[0] == 0 && light.hi[0] == ROWS);
  setenv("TJ_PAR_MIN_WORK", "5500", 1); /* half the loop's work: a light one is shared */
  Calls shared = {0};
  tj_rt_parallel_for_sched(0, ROWS, pos, 4, NULL, 0, TJ_PAR_STATIC | TJ_PAR_LIGHT, record_range,
                           &shared);
  ck_assert_int_eq(shared.n, 2); /* static: one block a thread, the flag stripped */
  ck_assert_int_eq(shared.hi[0] - shared.lo[0] + shared.hi[1] - shared.lo[1], ROWS);
  unsetenv("TJ_PAR_MIN_WORK");
  ck_assert_int_eq(tj_rt_par_min_work(), 1 << 16);
  if (saved) setenv("TJ_PAR_MIN_WORK", saved, 1);
  free(saved);
  tj_rt_set_threads(0);
}
END_TEST

START_TEST(dense_cast_print) {
  int64_t dims[2] = {2, 3};
  double dense[6] = {0, 1.5, 0, -2, 0, 3};
  const char *specs[] = {"ds", "dd:1,0", "uq"};
  for (int k = 0; k < 3; k++) {
    tj_format f = fmt_of(specs[k]);
    tj_tensor *t, *c;
    ck_assert_int_eq(tj_tensor_new("P", TJ_F64, 2, dims, &f, &t), TJ_OK);
    ck_assert_int_eq(rt_tensor_from_dense(t, dense, NULL), TJ_OK);
    ck_assert_int_eq(tj_tensor_nnz(t), k == 1 ? 6 : 3);
    check_against(t, dense);
    ck_assert_int_eq(tj_tensor_cast(t, TJ_I32, &c), TJ_OK);
    double v;
    int64_t at[2] = {0, 1};
    tj_tensor_get(c, at, &v);
    ck_assert(v == 2);   /* 1.5 rounds to 2 */
    ck_assert_int_eq(tj_tensor_dtype(c), TJ_I32);
    tj_tensor_free(c);
    tj_tensor_free(t);
  }
  tj_format f = fmt_of("ds");
  tj_tensor *t;
  tj_tensor_new("P", TJ_F32, 2, dims, &f, &t);
  rt_tensor_from_dense(t, dense, NULL);
  ck_assert_int_eq(tj_tensor_rename(t, "Pr"), TJ_OK);
  ck_assert_str_eq(tj_tensor_name(t), "Pr");
  char *buf = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&buf, &len);
  tj_tensor_print(t, mem, 2);
  fclose(mem);
  ck_assert_msg(strstr(buf, "Pr: f32 2x3 ds nnz=3"), "%s", buf);
  ck_assert(strstr(buf, "(0,1) 1.5"));
  ck_assert(strstr(buf, "(1,0) -2"));
  ck_assert(strstr(buf, "... (1 more)"));
  free(buf);
  ck_assert_int_eq(tj_tensor_bytes(t), 4 * 3 + 4 * 3 + 4 * 3);
  ck_assert_str_eq(tj_dtype_name(TJ_I64), "i64");
  tj_tensor_free(t);
  /* order-0 scalar */
  ck_assert_int_eq(tj_tensor_new("s", TJ_F64, 0, NULL, NULL, &t), TJ_OK);
  tj_tensor_insert(t, NULL, 2.5);
  tj_tensor_insert(t, NULL, 1);
  ck_assert_int_eq(tj_tensor_pack(t), TJ_OK);
  double v;
  tj_tensor_get(t, NULL, &v);
  ck_assert(v == 3.5);
  tj_tensor_free(t);
}
END_TEST

START_TEST(argument_errors) {
  int64_t dims[2] = {3, -1};
  tj_tensor *t;
  ck_assert_int_eq(tj_tensor_new("N", TJ_F64, 2, dims, NULL, &t), TJ_ERR_SHAPE);
  ck_assert(strstr(tj_last_error(), "dim 1 is negative"));
  dims[1] = 3;
  tj_format f = fmt_of("sss");
  ck_assert_int_eq(tj_tensor_new("N", TJ_F64, 2, dims, &f, &t), TJ_ERR_SHAPE);
  ck_assert(strstr(tj_last_error(), "has 3 levels but the tensor has order 2"));
  ck_assert_int_eq(tj_tensor_new("N", TJ_F64, 2, dims, NULL, &t), TJ_OK);
  int64_t c[2] = {1, 3};
  ck_assert_int_eq(tj_tensor_insert(t, c, 1), TJ_ERR_SHAPE);
  ck_assert(strstr(tj_last_error(), "coordinate 3 in mode 1 is out of range 0..2"));
  tj_tensor *u;
  ck_assert_int_eq(tj_tensor_convert(t, &f, &u), TJ_ERR_SHAPE);
  ck_assert(strstr(tj_last_error(), "cannot convert tensor N of order 2"));
  tj_tensor_free(t);
}
END_TEST

START_TEST(pack_large) {
  /* 2M random entries: the radix sort keeps this well under a second */
  int64_t dims[2] = {100000, 100000}, n = 2000000;
  tj_format f = fmt_of("ds:1,0");
  tj_tensor *t;
  ck_assert_int_eq(tj_tensor_new("L", TJ_F64, 2, dims, &f, &t), TJ_OK);
  rng_state = 11;
  double sum = 0;
  for (int64_t k = 0; k < n; k++) {
    int64_t c[2] = {(int64_t)(rng() % 100000), (int64_t)(rng() % 100000)};
    tj_tensor_insert(t, c, 1.0);
    sum += 1.0;
  }
  ck_assert_int_eq(tj_tensor_pack(t), TJ_OK);
  tj_storage *s = rt_tensor_storage(t);
  double got = 0;
  for (int64_t i = 0; i < s->vals_len; i++) got += ((double *)s->vals)[i];
  ck_assert(got == sum);
  for (int64_t j = 0; j < 100000; j++)   /* sorted rows within each column */
    for (int64_t q = rt_idx(s->levels[1].pos, 4, j) + 1;
         q < rt_idx(s->levels[1].pos, 4, j + 1); q++)
      ck_assert(rt_idx(s->levels[1].crd, 4, q - 1) < rt_idx(s->levels[1].crd, 4, q));
  tj_tensor_free(t);
}
END_TEST

static Suite *runtime_suite(void) {
  Suite *s = suite_create("runtime");
  TCase *tc = tcase_create("formats");
  tcase_set_timeout(tc, 120);
  tcase_add_loop_test(tc, round_trip_order2, 0, sizeof fmts2 / sizeof *fmts2);
  tcase_add_test(tc, known_layouts);
  tcase_add_test(tc, empty_tensors);
  tcase_add_test(tc, empty_rows_and_duplicates);
  tcase_add_test(tc, widths);
  tcase_add_loop_test(tc, order3_conversions, 0, sizeof fmts3 / sizeof *fmts3);
  tcase_add_test(tc, dense_transposes);
  tcase_add_test(tc, order4_dsdd);
  tcase_add_test(tc, hypersparse);
  tcase_add_test(tc, format_parse_good);
  tcase_add_loop_test(tc, format_parse_errors, 0,
                      sizeof bad_formats / sizeof *bad_formats);
  tcase_add_test(tc, reserve_growth);
  tcase_add_test(tc, sort_crd_bitmap);
  tcase_add_test(tc, marked_crd_reads_marks);
  tcase_add_test(tc, parallel_min_work);
  tcase_add_test(tc, dense_cast_print);
  tcase_add_test(tc, argument_errors);
  tcase_add_test(tc, pack_large);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(runtime_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* File I/O: real matrices and tensors, round trips, .gz, malformed input.
 *
 * Real data under $TJ_DATA_DIR is checked against MANIFEST.md's numbers
 * and against sums computed by an independent little parser here. The
 * malformed corpus in tests/data/bad has a table of expected messages.
 */
#include <check.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "runtime/tensor.h"

typedef struct Manifest {
  char file[64];
  int64_t rows, cols, expanded;
} Manifest;

static Manifest mats[64];
static int nmats;
static const char *data_dir;

/* Reads the matrices table of MANIFEST.md: | `f.mtx` | name | r x c | stored | expanded | ... */
static void load_manifest(void) {
  char path[1024], line[2048];
  snprintf(path, sizeof path, "%s/MANIFEST.md", data_dir);
  FILE *f = fopen(path, "r");
  if (!f) return;
  while (fgets(line, sizeof line, f) && nmats < 64) {
    if (strncmp(line, "| `", 3) || !strstr(line, ".mtx`")) continue;
    Manifest *m = &mats[nmats];
    char *cols[8] = {0};
    int k = 0;
    for (char *p = strtok(line, "|"); p && k < 8; p = strtok(NULL, "|")) cols[k++] = p;
    if (k < 5) continue;
    if (sscanf(cols[0], " `%63[^`]`", m->file) != 1) continue;
    long long r, c, e;
    if (sscanf(cols[2], " %lld x %lld", &r, &c) != 2) continue;
    if (sscanf(cols[4], " %lld", &e) != 1) continue;
    m->rows = r, m->cols = c, m->expanded = e;
    nmats++;
  }
  fclose(f);
}

typedef struct Sums {
  int64_t n, pos_sum;   /* entries; sum of (i+1)*(j+1) */
  double val_sum, weighted;
} Sums;

static void add_sum(Sums *s, int64_t i, int64_t j, double v) {
  s->n++;
  s->pos_sum += (i + 1) * (j + 1);
  s->val_sum += v;
  s->weighted += v * (double)((i % 97) + 1) * (double)((j % 89) + 1);
}

/* An independent reader for coordinate .mtx (plain files only). */
static Sums reference_sums(const char *path) {
  Sums s = {0};
  FILE *f = fopen(path, "r");
  ck_assert_msg(f != NULL, "%s", path);
  char line[512];
  ck_assert(fgets(line, sizeof line, f));
  int sym = strstr(line, "symmetric") != NULL, skew = strstr(line, "skew") != NULL;
  int pattern = strstr(line, "pattern") != NULL, size_seen = 0;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '%' || line[0] == '\n') continue;
    if (!size_seen) { size_seen = 1; continue; }
    long long i, j;
    double v = 1;
    int got = sscanf(line, "%lld %lld %lf", &i, &j, &v);
    ck_assert_int_ge(got, pattern ? 2 : 3);
    add_sum(&s, i - 1, j - 1, v);
    if ((sym || skew) && i != j) add_sum(&s, j - 1, i - 1, skew ? -v : v);
  }
  fclose(f);
  return s;
}

static Sums tensor_sums(const tj_tensor *t) {
  Sums s = {0};
  int64_t *c, n;
  double *v;
  ck_assert_int_eq(tj_tensor_unpack(t, &c, &v, &n), TJ_OK);
  for (int64_t e = 0; e < n; e++) add_sum(&s, c[2 * e], c[2 * e + 1], v[e]);
  free(c), free(v);
  return s;
}

static int close_enough(double a, double b) {
  return fabs(a - b) <= 1e-9 * (fabs(a) + fabs(b)) + 1e-9;
}

static const char *mat_formats[] = {"ds", "ds:1,0", "ss", "uq"};

START_TEST(real_matrices) {
  if (nmats == 0) {
    printf("SKIP: ../shared/data not found\n");
    return;
  }
  const Manifest *m = &mats[_i];
  char path[1024];
  snprintf(path, sizeof path, "%s/matrices/%s", data_dir, m->file);
  Sums ref = reference_sums(path);
  ck_assert_int_eq(ref.n, m->expanded);
  for (int k = 0; k < 4; k++) {
    tj_format f;
    ck_assert_int_eq(tj_format_parse(mat_formats[k], &f), TJ_OK);
    tj_tensor *t = NULL;
    ck_assert_msg(tj_tensor_read(path, NULL, &f, &t) == TJ_OK, "%s",
                  tj_last_error());
    ck_assert_int_eq(tj_tensor_dim(t, 0), m->rows);
    ck_assert_int_eq(tj_tensor_dim(t, 1), m->cols);
    ck_assert_msg(tj_tensor_nnz(t) == m->expanded, "%s as %s: nnz %lld, "
                  "manifest %lld", m->file, mat_formats[k],
                  (long long)tj_tensor_nnz(t), (long long)m->expanded);
    Sums s = tensor_sums(t);
    ck_assert_int_eq(s.pos_sum, ref.pos_sum);
    ck_assert_msg(close_enough(s.val_sum, ref.val_sum), "%s: %.17g vs %.17g",
                  m->file, s.val_sum, ref.val_sum);
    ck_assert(close_enough(s.weighted, ref.weighted));
    char stem[64];
    snprintf(stem, sizeof stem, "%s", m->file);
    *strrchr(stem, '.') = 0;
    ck_assert_str_eq(tj_tensor_name(t), stem);
    tj_tensor_free(t);
  }
}
END_TEST

START_TEST(real_tensors) {
  if (nmats == 0) {
    printf("SKIP: ../shared/data not found\n");
    return;
  }
  char path[1024];
  snprintf(path, sizeof path, "%s/tensors/openflight.tns", data_dir);
  tj_tensor *t, *u;
  ck_assert_msg(tj_tensor_read(path, "F", NULL, &t) == TJ_OK, "%s", tj_last_error());
  ck_assert_str_eq(tj_tensor_format(t)->levels, "sss");
  ck_assert_int_eq(tj_tensor_order(t), 3);
  ck_assert_int_eq(tj_tensor_dim(t, 0), 539);
  ck_assert_int_eq(tj_tensor_dim(t, 1), 2939);
  ck_assert_int_eq(tj_tensor_dim(t, 2), 2939);
  ck_assert_int_eq(tj_tensor_nnz(t), 51982);
  /* independent: the first line of the file is stored */
  FILE *f = fopen(path, "r");
  long long a, b, c;
  double v, got;
  ck_assert_int_eq(fscanf(f, "%lld %lld %lld %lf", &a, &b, &c, &v), 4);
  fclose(f);
  int64_t at[3] = {a - 1, b - 1, c - 1};
  tj_tensor_get(t, at, &got);
  ck_assert(got == v);
  tj_format coo;
  tj_format_parse("uqq", &coo);
  ck_assert_int_eq(tj_tensor_convert(t, &coo, &u), TJ_OK);
  ck_assert_int_eq(tj_tensor_nnz(u), 51982);
  tj_tensor_get(u, at, &got);
  ck_assert(got == v);
  tj_tensor_free(u);
  tj_tensor_free(t);
  snprintf(path, sizeof path, "%s/tensors/jf17k_kg4.tns", data_dir);
  ck_assert_int_eq(tj_tensor_read(path, NULL, NULL, &t), TJ_OK);
  ck_assert_str_eq(tj_tensor_format(t)->levels, "ssss");
  ck_assert_int_eq(tj_tensor_dim(t, 0), 104);
  ck_assert_int_eq(tj_tensor_nnz(t), 34544);
  ck_assert_str_eq(tj_tensor_name(t), "jf17k_kg4");
  tj_tensor_free(t);
}
END_TEST

/* A fresh temp directory per test (fork mode: one per process). */
static char tmpdir[256];
static void make_tmpdir(void) {
  const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(tmpdir, sizeof tmpdir, "%s/tj_io_XXXXXX", base);
  ck_assert(mkdtemp(tmpdir) != NULL);
}

/* Removes the temp directory and its files (a checked fixture). */
static void remove_tmpdir(void) {
  if (!tmpdir[0]) return;
  DIR *d = opendir(tmpdir);
  struct dirent *e;
  char p[600];
  while (d && (e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
    unlink(p);
  }
  if (d) closedir(d);
  rmdir(tmpdir);
  tmpdir[0] = 0;
}

static const char *tmp_path(const char *name) {
  static char p[512];
  snprintf(p, sizeof p, "%s/%s", tmpdir, name);
  return p;
}

static void write_text(const char *name, const char *text) {
  FILE *f = fopen(tmp_path(name), "w");
  fputs(text, f);
  fclose(f);
}

/* Reads tmp file `name` as dense r x c and compares with want. */
static void expect_dense(const char *name, int64_t r, int64_t c,
                         const double *want) {
  tj_tensor *t = NULL;
  ck_assert_msg(tj_tensor_read(tmp_path(name), NULL, NULL, &t) == TJ_OK,
                "%s", tj_last_error());
  ck_assert_int_eq(tj_tensor_dim(t, 0), r);
  ck_assert_int_eq(tj_tensor_dim(t, 1), c);
  double d[64];
  rt_tensor_to_dense(t, d, NULL);
  for (int64_t i = 0; i < r * c; i++)
    ck_assert_msg(d[i] == want[i], "%s[%lld]: %g vs %g", name, (long long)i,
                  d[i], want[i]);
  tj_tensor_free(t);
}

START_TEST(mtx_variants) {
  make_tmpdir();
  write_text("sym.mtx", "%%MatrixMarket matrix coordinate real symmetric\n"
             "3 3 3\n1 1 4\n3 1 2\n2 2 5\n");
  expect_dense("sym.mtx", 3, 3, (double[]){4, 0, 2, 0, 5, 0, 2, 0, 0});
  write_text("skew.mtx", "%%MatrixMarket matrix coordinate real skew-symmetric\n"
             "3 3 2\n2 1 3\n3 2 -1\n");
  expect_dense("skew.mtx", 3, 3, (double[]){0, -3, 0, 3, 0, 1, 0, -1, 0});
  write_text("pat.mtx", "%%MatrixMarket matrix coordinate pattern general\n"
             "% comment\n\n2 3 2\n1 3\n2 1\n");
  expect_dense("pat.mtx", 2, 3, (double[]){0, 0, 1, 1, 0, 0});
  write_text("int.mtx", "%%MatrixMarket matrix coordinate integer general\n"
             "2 2 2\n1 2 -7\n2 2 0\n");
  expect_dense("int.mtx", 2, 2, (double[]){0, -7, 0, 0});
  tj_tensor *t;
  ck_assert_int_eq(tj_tensor_read(tmp_path("int.mtx"), NULL, NULL, &t), TJ_OK);
  ck_assert_int_eq(tj_tensor_nnz(t), 2);   /* the explicit zero is stored */
  tj_tensor_free(t);
  /* read as bool: a pattern file's entries are true; an integer file's
   * nonzeros are true and its explicit zero a stored false; as i8 */
  bool b;
  int8_t v8;
  ck_assert_int_eq(tj_tensor_read_as(tmp_path("pat.mtx"), NULL, NULL, TJ_BOOL, &t), TJ_OK);
  ck_assert_int_eq(tj_tensor_dtype(t), TJ_BOOL);
  ck_assert_int_eq(tj_tensor_get_bool(t, (int64_t[]){0, 2}, &b), TJ_OK);
  ck_assert(b);
  ck_assert_int_eq(tj_tensor_get_bool(t, (int64_t[]){0, 1}, &b), TJ_OK);
  ck_assert(!b);
  tj_tensor_free(t);
  ck_assert_int_eq(tj_tensor_read_as(tmp_path("int.mtx"), NULL, NULL, TJ_BOOL, &t), TJ_OK);
  ck_assert_int_eq(tj_tensor_nnz(t), 2);
  ck_assert_int_eq(tj_tensor_get_bool(t, (int64_t[]){0, 1}, &b), TJ_OK);
  ck_assert(b);
  tj_tensor_free(t);
  write_text("i8.tns", "1 2 -7\n3 1 100\n");
  ck_assert_int_eq(tj_tensor_read_as(tmp_path("i8.tns"), NULL, NULL, TJ_I8, &t), TJ_OK);
  ck_assert_int_eq(tj_tensor_get_i8(t, (int64_t[]){0, 1}, &v8), TJ_OK);
  ck_assert_int_eq(v8, -7);
  ck_assert_int_eq(tj_tensor_get_i8(t, (int64_t[]){2, 0}, &v8), TJ_OK);
  ck_assert_int_eq(v8, 100);
  tj_tensor_free(t);
  ck_assert_int_eq(tj_tensor_read_as(tmp_path("pat.mtx"), NULL, NULL, (tj_dtype)TJ_NDTYPES, &t),
                   TJ_ERR_DTYPE);
  /* integers as i64 exactly: 2^53 + 1 is no double; mirrored negated by a
   * skew-symmetric file; a real token in an integer file rounds */
  int64_t v64;
  write_text("big.mtx", "%%MatrixMarket matrix coordinate integer skew-symmetric\n"
             "2 2 1\n2 1 9007199254740993\n");
  ck_assert_int_eq(tj_tensor_read_as(tmp_path("big.mtx"), NULL, NULL, TJ_I64, &t), TJ_OK);
  ck_assert_int_eq(tj_tensor_get_i64(t, (int64_t[]){1, 0}, &v64), TJ_OK);
  ck_assert(v64 == (INT64_C(1) << 53) + 1);
  ck_assert_int_eq(tj_tensor_get_i64(t, (int64_t[]){0, 1}, &v64), TJ_OK);
  ck_assert(v64 == -(INT64_C(1) << 53) - 1);
  tj_tensor_free(t);
  write_text("big.tns", "1 9007199254740993\n2 -9223372036854775808\n3 2.5\n");
  ck_assert_int_eq(tj_tensor_read_as(tmp_path("big.tns"), NULL, NULL, TJ_I64, &t), TJ_OK);
  const int64_t want64[3] = {(INT64_C(1) << 53) + 1, INT64_MIN, 3};
  for (int64_t k = 0; k < 3; k++) {
    ck_assert_int_eq(tj_tensor_get_i64(t, (int64_t[]){k}, &v64), TJ_OK);
    ck_assert(v64 == want64[k]);
  }
  tj_tensor_free(t);
  /* u64 exactly up to 2^64 - 1 (no detour through strtoll's range or a
   * double); a negative token saturates to 0, one past 2^64 - 1 to it */
  uint64_t u64;
  write_text("u64.tns", "1 18446744073709551615\n2 9223372036854775809\n"
             "3 9007199254740993\n4 -3\n5 18446744073709551616\n6 +7\n");
  ck_assert_int_eq(tj_tensor_read_as(tmp_path("u64.tns"), NULL, NULL, TJ_U64, &t), TJ_OK);
  const uint64_t wantu[6] = {UINT64_MAX, (UINT64_C(1) << 63) + 1, (UINT64_C(1) << 53) + 1, 0,
                             UINT64_MAX, 7};
  for (int64_t k = 0; k < 6; k++) {
    ck_assert_int_eq(tj_tensor_get_u64(t, (int64_t[]){k}, &u64), TJ_OK);
    ck_assert_msg(u64 == wantu[k], "u64 entry %lld: %llu", (long long)k,
                  (unsigned long long)u64);
  }
  /* written back exactly (integers are not printed through a double) */
  ck_assert_int_eq(tj_tensor_write(t, tmp_path("u64o.tns")), TJ_OK);
  tj_tensor_free(t);
  char text[512] = {0};
  FILE *f = fopen(tmp_path("u64o.tns"), "r");
  ck_assert_ptr_nonnull(f);
  size_t got = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  ck_assert_msg(got > 0 && strcmp(text, "1 18446744073709551615\n2 9223372036854775809\n"
                                          "3 9007199254740993\n4 0\n5 18446744073709551615\n"
                                          "6 7\n") == 0, "%s", text);
  ck_assert_int_eq(tj_tensor_read_as(tmp_path("big.tns"), NULL, NULL, TJ_I64, &t), TJ_OK);
  ck_assert_int_eq(tj_tensor_write(t, tmp_path("bigo.mtx")), TJ_ERR_SHAPE); /* order 1 */
  ck_assert_int_eq(tj_tensor_write(t, tmp_path("bigo.tns")), TJ_OK);
  tj_tensor_free(t);
  f = fopen(tmp_path("bigo.tns"), "r");
  ck_assert_ptr_nonnull(f);
  memset(text, 0, sizeof text);
  got = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  ck_assert_msg(got > 0 && strcmp(text, "1 9007199254740993\n2 -9223372036854775808\n3 3\n") == 0,
                "%s", text);
  write_text("arr.mtx", "%%MatrixMarket matrix array real general\n"
             "2 3\n1\n2\n3\n4\n5\n6\n");
  expect_dense("arr.mtx", 2, 3, (double[]){1, 3, 5, 2, 4, 6});
  write_text("arrsym.mtx", "%%MatrixMarket matrix array real symmetric\n"
             "2 2\n1\n2\n3\n");
  expect_dense("arrsym.mtx", 2, 2, (double[]){1, 2, 2, 3});
  /* sniffed by content when the extension is unknown */
  write_text("noext", "%%MatrixMarket matrix coordinate real general\n"
             "1 2 1\n1 2 8\n");
  expect_dense("noext", 1, 2, (double[]){0, 8});
}
END_TEST

/* An input whose declared size cannot fit in this machine's memory is
 * refused before any entry is read or any array allocated, with a message
 * naming the file or tensor and the sizes. */
START_TEST(declared_size_beyond_memory) {
  make_tmpdir();
  const char *cases[][2] = {
      {"coo.mtx", "%%MatrixMarket matrix coordinate real general\n"
                  "1000000000 1000000000 900000000000\n1 1 1\n"},
      {"sym.mtx", "%%MatrixMarket matrix coordinate real symmetric\n"
                  "1000000000 1000000000 500000000000\n1 1 1\n"},
      {"arr.mtx", "%%MatrixMarket matrix array real general\n1000000 1000000\n1\n"}};
  for (int c = 0; c < 3; c++) {
    write_text(cases[c][0], cases[c][1]);
    tj_tensor *t = NULL;
    ck_assert_int_eq(tj_tensor_read(tmp_path(cases[c][0]), "A", NULL, &t), TJ_ERR_NOMEM);
    ck_assert_ptr_null(t);
    const char *m = tj_last_error();
    ck_assert_msg(strstr(m, cases[c][0]) && strstr(m, "its header declares") &&
                      strstr(m, "more than this machine's memory"), "%s", m);
  }
  /* A dense 10^6 x 10^6 f64 (8 TB) is refused when created; a CSR with
   * 10^7 rows (40 MB of positions) is not. */
  int64_t big[2] = {1000000, 1000000}, tall[2] = {10000000, 10000000};
  tj_format dd = tj_format_dense(2), ds;
  ck_assert_int_eq(tj_format_parse("ds", &ds), TJ_OK);
  tj_tensor *t = NULL;
  ck_assert_int_eq(tj_tensor_new("D", TJ_F64, 2, big, &dd, &t), TJ_ERR_NOMEM);
  ck_assert_ptr_null(t);
  ck_assert_msg(strstr(tj_last_error(), "tensor D: its dense levels (1e+12 values) would need 8e+03 GB"),
                "%s", tj_last_error());
  ck_assert_int_eq(tj_tensor_new("S", TJ_F64, 2, tall, &ds, &t), TJ_OK);
  tj_tensor_free(t);
}
END_TEST

START_TEST(gz_read) {
  make_tmpdir();
  gzFile g = gzopen(tmp_path("m.mtx.gz"), "wb");
  gzputs(g, "%%MatrixMarket matrix coordinate real symmetric\n3 3 2\n"
            "2 1 1.25\n3 3 -2\n");
  gzclose(g);
  tj_tensor *t;
  ck_assert_msg(tj_tensor_read(tmp_path("m.mtx.gz"), NULL, NULL, &t) == TJ_OK,
                "%s", tj_last_error());
  ck_assert_str_eq(tj_tensor_name(t), "m");
  ck_assert_int_eq(tj_tensor_nnz(t), 3);
  double v;
  tj_tensor_get(t, (int64_t[]){0, 1}, &v);
  ck_assert(v == 1.25);
  tj_tensor_free(t);
  g = gzopen(tmp_path("t.tns.gz"), "wb");
  gzputs(g, "# comment\n1 2 3 0.5\n\n2 1 1 7\n");
  gzclose(g);
  ck_assert_int_eq(tj_tensor_read(tmp_path("t.tns.gz"), NULL, NULL, &t), TJ_OK);
  ck_assert_int_eq(tj_tensor_dim(t, 2), 3);
  tj_tensor_get(t, (int64_t[]){1, 0, 0}, &v);
  ck_assert(v == 7);
  tj_tensor_free(t);
}
END_TEST

/* Random tensor of the given dims with a dense copy. */
static tj_tensor *random_tensor(int order, const int64_t *dims,
                                const char *spec, double *dense,
                                uint64_t seed) {
  tj_format f;
  ck_assert_int_eq(tj_format_parse(spec, &f), TJ_OK);
  tj_tensor *t;
  ck_assert_int_eq(tj_tensor_new("R", TJ_F64, order, dims, &f, &t), TJ_OK);
  int64_t total = 1;
  for (int m = 0; m < order; m++) total *= dims[m];
  for (int64_t lin = 0; lin < total; lin++) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    dense[lin] = 0;
    if ((seed >> 33) % 4) continue;
    int64_t c[8], rest = lin;
    for (int m = order - 1; m >= 0; m--) c[m] = rest % dims[m], rest /= dims[m];
    dense[lin] = (double)(seed >> 40) / 3.0 - 1000.0;   /* not short in decimal */
    tj_tensor_insert(t, c, dense[lin]);
  }
  ck_assert_int_eq(tj_tensor_pack(t), TJ_OK);
  return t;
}

static void expect_same(const tj_tensor *t, const double *dense, int64_t total) {
  double *d = malloc((size_t)total * sizeof *d);
  rt_tensor_to_dense(t, d, NULL);
  for (int64_t i = 0; i < total; i++) ck_assert(d[i] == dense[i]);
  free(d);
}

START_TEST(write_read_round_trip) {
  make_tmpdir();
  int64_t dims2[2] = {9, 11}, dims3[3] = {4, 3, 5};
  double d2[99], d3[60];
  const char *paths[] = {"a.mtx", "a.mtx.gz", "a2.tns"};
  for (int k = 0; k < 3; k++) {
    tj_tensor *t = random_tensor(2, dims2, "ds:1,0", d2, 42 + k), *u;
    ck_assert_int_eq(tj_tensor_write(t, tmp_path(paths[k])), TJ_OK);
    ck_assert_msg(tj_tensor_read(tmp_path(paths[k]), NULL, NULL, &u) == TJ_OK,
                  "%s", tj_last_error());
    ck_assert_int_eq(tj_tensor_nnz(u), tj_tensor_nnz(t));
    expect_same(u, d2, 99);
    tj_tensor_free(u);
    tj_tensor_free(t);
  }
  tj_tensor *t = random_tensor(3, dims3, "dsd", d3, 7), *u;
  ck_assert_int_eq(tj_tensor_write(t, tmp_path("b.tns")), TJ_OK);
  tj_format f;
  tj_format_parse("sss", &f);
  ck_assert_int_eq(tj_tensor_read(tmp_path("b.tns"), NULL, &f, &u), TJ_OK);
  /* dims come from the largest coordinate; the random tensor fills them */
  ck_assert_int_eq(tj_tensor_dim(u, 0), 4);
  expect_same(u, d3, 60);
  tj_tensor_free(u);
  ck_assert_int_eq(tj_tensor_write(t, tmp_path("b.mtx")), TJ_ERR_SHAPE);
  ck_assert(strstr(tj_last_error(), "a .mtx file holds a matrix"));
  tj_tensor_free(t);
  /* order 0: one line with the value */
  ck_assert_int_eq(tj_tensor_new("s", TJ_F64, 0, NULL, NULL, &t), TJ_OK);
  tj_tensor_insert(t, NULL, 0.1);
  tj_tensor_pack(t);
  ck_assert_int_eq(tj_tensor_write(t, tmp_path("s.tns")), TJ_OK);
  FILE *fp = fopen(tmp_path("s.tns"), "r");
  char line[64];
  ck_assert(fgets(line, sizeof line, fp));
  fclose(fp);
  ck_assert_str_eq(line, "0.10000000000000001\n");
  ck_assert_int_eq(tj_tensor_read(tmp_path("s.tns"), NULL, NULL, &u), TJ_OK);
  ck_assert_int_eq(tj_tensor_order(u), 0);
  double v;
  tj_tensor_get(u, NULL, &v);
  ck_assert(v == 0.1);
  tj_tensor_free(u);
  tj_tensor_free(t);
  ck_assert_int_eq(tj_tensor_write(t = NULL, "x.tns"), TJ_ERR_INVALID);
}
END_TEST

static const struct { const char *file, *msg; } bad_files[] = {
  {"banner.mtx", "banner.mtx:1: bad Matrix Market banner"},
  {"no_banner.mtx", "no_banner.mtx:1: bad Matrix Market banner"},
  {"complex.mtx", "complex.mtx:1: complex Matrix Market files are not supported"},
  {"empty.mtx", "empty.mtx:1: empty file"},
  {"no_size.mtx", "no_size.mtx:1: missing size line"},
  {"too_few.mtx", "too_few.mtx:4: file ends after 2 of the 3 entries declared"},
  {"too_many.mtx", "too_many.mtx:6: more entries than the 2 declared in the header"},
  {"zero_row.mtx", "zero_row.mtx:4: row 0 is out of range 1..3"},
  {"past_col.mtx", "past_col.mtx:4: column 5 is out of range 1..4"},
  {"bad_value.mtx", "bad_value.mtx:4: bad value 'abc' (not a number)"},
  {"neg_dim.mtx", "neg_dim.mtx:2: negative row count -3"},
  {"overflow_dim.mtx", "overflow_dim.mtx:2: column count '99999999999999999999' overflows 64 bits"},
  {"size_line.mtx", "size_line.mtx:2: bad column count 'x' in the size line"},
  {"missing_value.mtx", "missing_value.mtx:4: entry has no value"},
  {"trailing.mtx", "trailing.mtx:3: unexpected text after the entry"},
  {"array_short.mtx", "array_short.mtx:5: file ends after 3 of the 4 array values"},
  /* the mirror of (4, 2) would be (2, 4), past 3 columns (fuzz_io) */
  {"skew_not_square.mtx", "skew_not_square.mtx:2: a skew-symmetric matrix must be square, not 5 x 3"},
  {"ragged.tns", "ragged.tns:4: expected 4 fields (3 coordinates and a value) as on the first data line, found 3"},
  {"zero_coord.tns", "zero_coord.tns:2: coordinate 0 in mode 1 is out of range (coordinates are 1-based)"},
  {"bad_value.tns", "bad_value.tns:3: bad value 'x1' (not a number)"},
  {"bad_coord.tns", "bad_coord.tns:2: bad coordinate '1.5' in mode 0"},
  {"huge_coord.tns", "huge_coord.tns:2: bad coordinate '9223372036854775808' in mode 0"},
  {"empty.tns", "empty.tns:3: no entries"},
  {"too_many_modes.tns", "too_many_modes.tns:1: 10 coordinates per line; at most 8 modes"},
  {"truncated.mtx.gz", "unexpected end of compressed data"},
  /* a NUL once cut the line and joined the rest to the next (fuzz_io) */
  {"nul_byte.mtx", "nul_byte.mtx:3: NUL byte in the text (not a text file?)"},
  {"nul_byte.tns", "nul_byte.tns:2: NUL byte in the text (not a text file?)"},
};

static void bad_path(char *buf, size_t n, const char *file) {
  const char *dir = getenv("TJ_TEST_DIR");
  snprintf(buf, n, "%s/data/bad/%s", dir ? dir : "tests", file);
}

START_TEST(malformed_corpus) {
  char path[1024];
  bad_path(path, sizeof path, bad_files[_i].file);
  tj_tensor *t = (tj_tensor *)&path;   /* must be reset to NULL */
  ck_assert_int_eq(tj_tensor_read(path, NULL, NULL, &t), TJ_ERR_IO);
  ck_assert(t == NULL);
  ck_assert_msg(strstr(tj_last_error(), bad_files[_i].msg), "%s: got '%s'",
                bad_files[_i].file, tj_last_error());
  ck_assert(strstr(tj_last_error(), bad_files[_i].file));
}
END_TEST

START_TEST(corpus_complete) {
  char path[1024];
  bad_path(path, sizeof path, "");
  DIR *d = opendir(path);
  ck_assert_msg(d != NULL, "%s", path);
  struct dirent *e;
  size_t nfiles = 0;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    nfiles++;
    int found = 0;
    for (size_t k = 0; k < sizeof bad_files / sizeof *bad_files; k++)
      found |= !strcmp(bad_files[k].file, e->d_name);
    ck_assert_msg(found, "%s has no expected message", e->d_name);
  }
  closedir(d);
  ck_assert_int_eq(nfiles, sizeof bad_files / sizeof *bad_files);
  /* a directory and a missing file */
  tj_tensor *t;
  ck_assert_int_eq(tj_tensor_read(path, NULL, NULL, &t), TJ_ERR_IO);
  ck_assert(strstr(tj_last_error(), "is a directory"));
  bad_path(path, sizeof path, "missing.mtx");
  ck_assert_int_eq(tj_tensor_read(path, NULL, NULL, &t), TJ_ERR_IO);
  ck_assert(strstr(tj_last_error(), "missing.mtx: cannot open: No such file"));
  /* a format whose order does not match the file */
  tj_format f;
  tj_format_parse("sss", &f);
  make_tmpdir();
  write_text("m.mtx", "%%MatrixMarket matrix coordinate real general\n1 1 1\n1 1 1\n");
  ck_assert_int_eq(tj_tensor_read(tmp_path("m.mtx"), NULL, &f, &t), TJ_ERR_SHAPE);
  ck_assert(strstr(tj_last_error(), "has 3 levels but the tensor has order 2"));
}
END_TEST

static Suite *io_suite(void) {
  Suite *s = suite_create("io");
  TCase *tc = tcase_create("io");
  tcase_set_timeout(tc, 300);
  tcase_add_checked_fixture(tc, NULL, remove_tmpdir);
  tcase_add_loop_test(tc, real_matrices, 0, nmats ? nmats : 1);
  tcase_add_test(tc, real_tensors);
  tcase_add_test(tc, mtx_variants);
  tcase_add_test(tc, gz_read);
  tcase_add_test(tc, declared_size_beyond_memory);
  tcase_add_test(tc, write_read_round_trip);
  tcase_add_loop_test(tc, malformed_corpus, 0, sizeof bad_files / sizeof *bad_files);
  tcase_add_test(tc, corpus_complete);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  data_dir = getenv("TJ_DATA_DIR");
  struct stat sb;
  if (data_dir && stat(data_dir, &sb) == 0 && S_ISDIR(sb.st_mode)) load_manifest();
  else printf("SKIP: ../shared/data not found\n");
  SRunner *sr = srunner_create(io_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* The public API around compiled kernels: the in-memory and on-disk kernel
 * caches, thread safety (concurrent compiles, one kernel run from several
 * threads on different tensors), assemble/compute reuse, and errors that
 * come back as status codes with messages. */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "tensorjit.h"

#define OK(call) ck_assert_msg((call) == TJ_OK, "%s", tj_last_error())

static tj_tensor *matrix(const char *name, const char *fmt, int64_t n, int64_t m,
                         unsigned seed, int density) {
  tj_format f;
  OK(tj_format_parse(fmt, &f));
  int64_t dims[2] = {n, m};
  tj_tensor *t;
  OK(tj_tensor_new(name, TJ_F64, 2, dims, &f, &t));
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < m; j++) {
      seed = seed * 1103515245u + 12345u;
      if ((int)(seed >> 16) % 100 < density) {
        int64_t c[2] = {i, j};
        OK(tj_tensor_insert(t, c, (double)((seed >> 8) % 17) - 8));
      }
    }
  OK(tj_tensor_pack(t));
  return t;
}

static tj_tensor *vec(const char *name, int64_t n, double base) {
  tj_format f = tj_format_dense(1);
  tj_tensor *t;
  OK(tj_tensor_new(name, TJ_F64, 1, &n, &f, &t));
  for (int64_t i = 0; i < n; i++) OK(tj_tensor_insert(t, &i, base + (double)i));
  OK(tj_tensor_pack(t));
  return t;
}

/* Makes *t an all-zero dense f64 vector of n entries named name. */
static tj_status zeros(const char *name, int64_t n, tj_tensor **t) {
  tj_format f = tj_format_dense(1);
  return tj_tensor_new(name, TJ_F64, 1, &n, &f, t);
}

/* Fills ops with {y, A, x} for y(i) = A(i,j) * x(j) under the given names:
 * A a 40 x 30 CSR matrix (seed 7, 20% stored), x = 1, 2, ..., y zero.
 * The caller frees all three. */
static void spmv_operands(const char *y, const char *a, const char *x,
                          tj_tensor *ops[3]) {
  ops[1] = matrix(a, "ds", 40, 30, 7, 20);
  ops[2] = vec(x, 30, 1);
  OK(zeros(y, 40, &ops[0]));
}

static double max_diff(const tj_tensor *a, const tj_tensor *b) {
  tj_format f = tj_format_dense(tj_tensor_order(a));
  tj_tensor *da, *db;
  OK(tj_tensor_convert(a, &f, &da));
  OK(tj_tensor_convert(b, &f, &db));
  int64_t *c;
  double *v, worst = 0;
  int64_t n;
  OK(tj_tensor_unpack(da, &c, &v, &n));
  for (int64_t e = 0; e < n; e++) {
    double w;
    OK(tj_tensor_get(db, c + e * tj_tensor_order(a), &w));
    if (fabs(w - v[e]) > worst) worst = fabs(w - v[e]);
  }
  free(c);
  free(v);
  OK(tj_tensor_unpack(db, &c, &v, &n));
  for (int64_t e = 0; e < n; e++) {
    double w;
    OK(tj_tensor_get(da, c + e * tj_tensor_order(a), &w));
    if (fabs(w - v[e]) > worst) worst = fabs(w - v[e]);
  }
  free(c);
  free(v);
  tj_tensor_free(da);
  tj_tensor_free(db);
  return worst;
}

/* SpMV through the API with y checked against the reference. */
static void spmv_check(tj_context *cx, const char *expr, const char *yname,
                       const char *aname, const char *xname, int *hit) {
  tj_tensor *ops[3], *yr;
  spmv_operands(yname, aname, xname, ops);
  OK(zeros(yname, 40, &yr));
  tj_tensor *y = ops[0], *A = ops[1], *x = ops[2], *rops[] = {yr, A, x};
  tj_kernel *k;
  OK(tj_compile(cx, expr, ops, 3, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  OK(tj_reference(expr, rops, 3));
  ck_assert_double_le(max_diff(y, yr), 1e-9);
  *hit = tj_kernel_times(k).cache_hit;
  tj_tensor_free(A);
  tj_tensor_free(x);
  tj_tensor_free(y);
  tj_tensor_free(yr);
}

START_TEST(memory_cache_hits_renamed_kernels) {
  tj_context *cx;
  OK(tj_context_new(&cx));
  OK(tj_context_set_cache_dir(cx, NULL));
  int hit;
  spmv_check(cx, "y(i) = A(i,j) * x(j)", "y", "A", "x", &hit);
  ck_assert_int_eq(hit, 0);
  spmv_check(cx, "out(r) = M(r,c) * v(c)", "out", "M", "v", &hit);
  ck_assert_int_eq(hit, 1);
  tj_context_free(cx);
}
END_TEST

/* A miss times every stage, and the stages fit in the total; a hit runs
 * no stage past the setup. */
START_TEST(compile_times_cover_the_stages) {
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_tensor *A = matrix("A", "ds", 8, 8, 3, 30), *B = matrix("B", "ds", 8, 8, 4, 30);
  tj_tensor *ops[] = {matrix("C", "ds", 8, 8, 5, 0), A, B}, *C = ops[0];
  tj_kernel *k;
  OK(tj_compile(cx, "C(i,j) = A(i,j) * B(i,j)", ops, 3, NULL, NULL, &k));
  tj_compile_times t = tj_kernel_times(k);
  ck_assert_int_eq(t.cache_hit, 0);
  double stages[] = {t.parse_ms, t.setup_ms, t.lower_ms, t.llvm_ir_ms, t.optimize_ms,
                     t.codegen_ms}, sum = 0;
  for (int i = 0; i < 6; i++) {
    ck_assert_msg(stages[i] > 0, "stage %d took no time", i);
    sum += stages[i];
  }
  ck_assert_double_le(sum, t.total_ms);
  /* the same stages in the compiling thread's CPU time */
  double cpu[] = {t.lower_cpu_ms, t.llvm_ir_cpu_ms, t.optimize_cpu_ms, t.codegen_cpu_ms};
  sum = 0;
  for (int i = 0; i < 4; i++) {
    ck_assert_msg(cpu[i] > 0, "stage %d took no CPU time", i);
    sum += cpu[i];
  }
  ck_assert_double_le(sum, t.total_cpu_ms);
  OK(tj_compile(cx, "C(i,j) = A(i,j) * B(i,j)", ops, 3, NULL, NULL, &k));
  t = tj_kernel_times(k);
  ck_assert_int_eq(t.cache_hit, 1);
  /* CPU time, not wall time: a loaded machine may preempt the thread */
  ck_assert(t.lower_cpu_ms < 1 && t.llvm_ir_ms == 0 && t.optimize_ms == 0 && t.codegen_ms == 0);
  ck_assert(t.llvm_ir_cpu_ms == 0 && t.optimize_cpu_ms == 0 && t.codegen_cpu_ms == 0);
  tj_tensor *all[] = {A, B, C};
  for (int i = 0; i < 3; i++) tj_tensor_free(all[i]);
  tj_context_free(cx);
}
END_TEST

START_TEST(memory_cache_misses_on_differences) {
  tj_context *cx;
  OK(tj_context_new(&cx));
  OK(tj_context_set_cache_dir(cx, NULL));
  tj_tensor *A = matrix("A", "ds", 8, 8, 3, 30), *B = matrix("B", "ss", 8, 8, 4, 30);
  tj_tensor *C = matrix("C", "ds", 8, 8, 5, 0);
  tj_tensor *ops[] = {C, A, B};
  tj_kernel *k;
  OK(tj_compile(cx, "C(i,j) = A(i,j) + B(i,j)", ops, 3, NULL, NULL, &k));
  ck_assert_int_eq(tj_kernel_times(k).cache_hit, 0);
  OK(tj_compile(cx, "C(i,j) = A(i,j) + B(i,j)", ops, 3, NULL, NULL, &k));
  ck_assert_int_eq(tj_kernel_times(k).cache_hit, 1);
  OK(tj_compile(cx, "C(i,j) = A(i,j) * B(i,j)", ops, 3, NULL, NULL, &k));
  ck_assert_int_eq(tj_kernel_times(k).cache_hit, 0);   /* expression */
  tj_tensor *B2 = matrix("B", "ds", 8, 8, 4, 30);
  tj_tensor *ops2[] = {C, A, B2};
  OK(tj_compile(cx, "C(i,j) = A(i,j) + B(i,j)", ops2, 3, NULL, NULL, &k));
  ck_assert_int_eq(tj_kernel_times(k).cache_hit, 0);   /* format */
  tj_tensor *B3;
  OK(tj_tensor_cast(B2, TJ_F32, &B3));
  tj_tensor *A3, *C3;
  OK(tj_tensor_cast(A, TJ_F32, &A3));
  OK(tj_tensor_cast(C, TJ_F32, &C3));
  tj_tensor *ops3[] = {C3, A3, B3};
  OK(tj_compile(cx, "C(i,j) = A(i,j) + B(i,j)", ops3, 3, NULL, NULL, &k));
  ck_assert_int_eq(tj_kernel_times(k).cache_hit, 0);   /* dtype */
  OK(tj_compile(cx, "C(i,j) = A(i,j) + B(i,j)", ops2, 3, "reorder(i,j)", NULL, &k));
  ck_assert_int_eq(tj_kernel_times(k).cache_hit, 0);   /* schedule */
  tj_options o = tj_options_default();
  o.opt_level = 1;
  OK(tj_compile(cx, "C(i,j) = A(i,j) + B(i,j)", ops2, 3, NULL, &o, &k));
  ck_assert_int_eq(tj_kernel_times(k).cache_hit, 0);   /* options */
  tj_tensor *all[] = {A, B, C, B2, B3, A3, C3};
  for (int i = 0; i < 7; i++) tj_tensor_free(all[i]);
  tj_context_free(cx);
}
END_TEST

static char *temp_dir(void) {
  char *d = strdup("/tmp/tj_cache_XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(d));
  return d;
}

static void remove_dir(char *d) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
  ck_assert_int_eq(system(cmd), 0);
  free(d);
}

static int count_files(const char *d) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "ls '%s' | grep -c '\\.o$'", d);
  FILE *p = popen(cmd, "r");
  int n = 0;
  if (fscanf(p, "%d", &n) != 1) n = -1;
  pclose(p);
  return n;
}

START_TEST(disk_cache_survives_a_restart) {
  char *dir = temp_dir();
  int hit;
  tj_context *cx;
  OK(tj_context_new(&cx));
  OK(tj_context_set_cache_dir(cx, dir));
  spmv_check(cx, "y(i) = A(i,j) * x(j)", "y", "A", "x", &hit);
  ck_assert_int_eq(hit, 0);
  tj_context_free(cx);
  ck_assert_int_eq(count_files(dir), 1);
  OK(tj_context_new(&cx));          /* a new engine: nothing in memory */
  OK(tj_context_set_cache_dir(cx, dir));
  spmv_check(cx, "y(i) = A(i,j) * x(j)", "y", "A", "x", &hit);
  ck_assert_int_eq(hit, 2);
  /* a kernel compiled now beside the loaded one: symbol numbers are not
   * reused (they restarted at 0 per engine, and the loaded object's name
   * collided: "Duplicate definition of symbol 'evaluate_tj0'") */
  spmv_check(cx, "y(i) = A(i,j) * x(j) * 2", "y", "A", "x", &hit);
  ck_assert_int_eq(hit, 0);
  spmv_check(cx, "y(i) = A(i,j) * x(j) * 3", "y", "A", "x", &hit);
  ck_assert_int_eq(hit, 0);
  tj_context_free(cx);
  remove_dir(dir);
}
END_TEST

START_TEST(disk_cache_rejects_truncated_and_foreign_files) {
  char *dir = temp_dir();
  int hit;
  tj_context *cx;
  OK(tj_context_new(&cx));
  OK(tj_context_set_cache_dir(cx, dir));
  spmv_check(cx, "y(i) = A(i,j) * x(j)", "y", "A", "x", &hit);
  tj_context_free(cx);
  char cmd[512];
  snprintf(cmd, sizeof cmd, "for f in '%s'/*.o; do truncate -s 300 \"$f\"; done", dir);
  ck_assert_int_eq(system(cmd), 0);
  OK(tj_context_new(&cx));
  OK(tj_context_set_cache_dir(cx, dir));
  spmv_check(cx, "y(i) = A(i,j) * x(j)", "y", "A", "x", &hit);
  ck_assert_int_eq(hit, 0);         /* rejected, recompiled, rewritten */
  tj_context_free(cx);
  snprintf(cmd, sizeof cmd, "for f in '%s'/*.o; do head -c 4000 /dev/urandom > \"$f\"; done", dir);
  ck_assert_int_eq(system(cmd), 0);
  OK(tj_context_new(&cx));
  OK(tj_context_set_cache_dir(cx, dir));
  spmv_check(cx, "y(i) = A(i,j) * x(j)", "y", "A", "x", &hit);
  ck_assert_int_eq(hit, 0);
  tj_context_free(cx);
  OK(tj_context_new(&cx));
  OK(tj_context_set_cache_dir(cx, dir));
  spmv_check(cx, "y(i) = A(i,j) * x(j)", "y", "A", "x", &hit);
  ck_assert_int_eq(hit, 2);         /* the rewritten file is good again */
  tj_context_free(cx);
  remove_dir(dir);
}
END_TEST

/* ---- trust: what the disk cache refuses to load ---- */

/* Captures what the library prints on stderr between start and end. */
typedef struct Capture {
  int saved;
  char path[32];
} Capture;

static void capture_start(Capture *c) {
  fflush(stderr);
  snprintf(c->path, sizeof c->path, "/tmp/tj_err_XXXXXX");
  int fd = mkstemp(c->path);
  ck_assert_int_ge(fd, 0);
  c->saved = dup(2);
  dup2(fd, 2);
  close(fd);
}

/* What was printed (malloc'd). */
static char *capture_end(Capture *c) {
  fflush(stderr);
  dup2(c->saved, 2);
  close(c->saved);
  FILE *f = fopen(c->path, "rb");
  char *text = calloc(1, 65536);
  size_t n = fread(text, 1, 65535, f);
  text[n] = 0;
  fclose(f);
  unlink(c->path);
  return text;
}

/* A header that claims more object code than the file holds is refused
 * before anything that size is allocated (fuzz_cache: a 4 GB malloc for a
 * 200-byte file), and the kernel is compiled and the file rewritten. */
START_TEST(disk_cache_refuses_a_size_beyond_the_file) {
  char *dir = temp_dir();
  int hit;
  tj_context *cx;
  OK(tj_context_new(&cx));
  OK(tj_context_set_cache_dir(cx, dir));
  spmv_check(cx, "y(i) = A(i,j) * x(j)", "y", "A", "x", &hit);
  tj_context_free(cx);
  char cmd[512];
  /* obj_len is the u64 at offset 16 of the header: set it to 0xfd000000 */
  snprintf(cmd, sizeof cmd, "for f in '%s'/*.o; do printf '\\000\\000\\000\\375\\000\\000\\000\\000' | "
           "dd of=\"$f\" bs=1 seek=16 conv=notrunc status=none; done", dir);
  ck_assert_int_eq(system(cmd), 0);
  Capture cap;
  capture_start(&cap);
  OK(tj_context_new(&cx));
  OK(tj_context_set_cache_dir(cx, dir));
  spmv_check(cx, "y(i) = A(i,j) * x(j)", "y", "A", "x", &hit);
  tj_context_free(cx);
  char *err = capture_end(&cap);
  ck_assert_int_eq(hit, 0);
  ck_assert_msg(strstr(err, "size does not match the file's length"), "%s", err);
  free(err);
  remove_dir(dir);
}
END_TEST

/* An input created but never packed has no arrays yet: it reads as empty
 * (a kernel once dereferenced its NULL values; fuzz_repl found it through
 * `x = zeros(5)` and `y(i) = A(i,j) * x(j)`). */
START_TEST(unpacked_inputs_read_as_empty) {
  static const char *formats[] = {"ds", "dd", "ss", "uq"};
  for (int f = 0; f < 4; f++) {
    tj_context *cx;
    OK(tj_context_new(&cx));
    tj_format fa, fd = tj_format_dense(1);
    OK(tj_format_parse(formats[f], &fa));
    int64_t dims[2] = {6, 5};
    tj_tensor *y, *a, *x;
    OK(tj_tensor_new("y", TJ_F64, 1, dims, &fd, &y));
    OK(tj_tensor_new("A", TJ_F64, 2, dims, &fa, &a));
    OK(tj_tensor_new("x", TJ_F64, 1, &dims[1], &fd, &x));
    tj_tensor *ops[3] = {y, a, x};
    tj_kernel *k;
    OK(tj_compile(cx, "y(i) = A(i,j) * x(j) + 1", ops, 3, NULL, NULL, &k));
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    for (int64_t i = 0; i < 6; i++) {
      double v;
      OK(tj_tensor_get(y, &i, &v));
      ck_assert_msg(v == 1, "format %s: y(%d) = %g", formats[f], (int)i, v);
    }
    ck_assert_int_eq(tj_tensor_nnz(a), 0);   /* the inputs stay as they were */
    ck_assert_int_eq(tj_tensor_nnz(x), 0);
    tj_tensor_free(y), tj_tensor_free(a), tj_tensor_free(x);
    tj_context_free(cx);
  }
}
END_TEST

static int count_str(const char *s, const char *what) {
  int n = 0;
  for (const char *p = s; (p = strstr(p, what)); p += strlen(what)) n++;
  return n;
}

/* The one cache file in dir (malloc'd path). */
static char *only_file(const char *dir) {
  char cmd[256], line[512];
  snprintf(cmd, sizeof cmd, "ls '%s'/*.o", dir);
  FILE *p = popen(cmd, "r");
  ck_assert_ptr_nonnull(fgets(line, sizeof line, p));
  pclose(p);
  line[strcspn(line, "\n")] = 0;
  return strdup(line);
}

/* Fills dir with one good cache file for SpMV (checked to load). */
static void populate(const char *dir) {
  int hit;
  tj_context *cx;
  OK(tj_context_new(&cx));
  OK(tj_context_set_cache_dir(cx, dir));
  spmv_check(cx, "y(i) = A(i,j) * x(j)", "y", "A", "x", &hit);
  tj_context_free(cx);
  OK(tj_context_new(&cx));
  OK(tj_context_set_cache_dir(cx, dir));
  spmv_check(cx, "y(i) = A(i,j) * x(j)", "y", "A", "x", &hit);
  ck_assert_int_eq(hit, 2);
  tj_context_free(cx);
  ck_assert_int_eq(count_files(dir), 1);
}

/* Compiles two kernels with the cache in use: neither comes from disk,
 * both are right, and stderr has exactly one warning naming `path` and
 * `why`. */
static void expect_refused(const char *use, const char *path, const char *why) {
  Capture c;
  capture_start(&c);
  int hit1, hit2;
  tj_context *cx;
  OK(tj_context_new(&cx));
  OK(tj_context_set_cache_dir(cx, use));
  spmv_check(cx, "y(i) = A(i,j) * x(j)", "y", "A", "x", &hit1);
  spmv_check(cx, "y(i) = A(i,j) * x(j) + 0 * x(j)", "y", "A", "x", &hit2);
  tj_context_free(cx);
  char *err = capture_end(&c);
  ck_assert_int_eq(hit1, 0);
  ck_assert_int_eq(hit2, 0);
  ck_assert_msg(count_str(err, "tensorjit: warning:") == 1, "one warning expected:\n%s", err);
  ck_assert_msg(strstr(err, path) && strstr(err, why), "want '%s' and '%s' in:\n%s", path, why,
                err);
  free(err);
}

static mode_t mode_of(const char *path) {
  struct stat st;
  ck_assert_int_eq(lstat(path, &st), 0);
  return st.st_mode & 07777;
}

START_TEST(disk_cache_creates_private_folders_and_files) {
  char *top = temp_dir(), dir[256], mid[256];
  snprintf(mid, sizeof mid, "%s/a", top);
  snprintf(dir, sizeof dir, "%s/a/b/", top);   /* missing parents, trailing slash */
  mode_t old = umask(0);                        /* modes must not come from the umask */
  Capture c;
  capture_start(&c);
  populate(dir);
  char *err = capture_end(&c);
  umask(old);
  ck_assert_msg(strstr(err, "warning") == NULL, "%s", err);
  free(err);
  ck_assert_int_eq(mode_of(mid), 0700);
  dir[strlen(dir) - 1] = 0;
  ck_assert_int_eq(mode_of(dir), 0700);
  char *file = only_file(dir);
  ck_assert_int_eq(mode_of(file), 0600);
  free(file);
  remove_dir(top);
}
END_TEST

START_TEST(disk_cache_default_folder_only_when_asked) {
  char *xdg = temp_dir(), dir[256];
  snprintf(dir, sizeof dir, "%s/tensorjit", xdg);
  setenv("XDG_CACHE_HOME", xdg, 1);
  unsetenv("TJ_CACHE_DIR");
  int hit;
  tj_context *cx;
  OK(tj_context_new(&cx));                      /* not asked: no disk cache */
  spmv_check(cx, "y(i) = A(i,j) * x(j)", "y", "A", "x", &hit);
  tj_context_free(cx);
  struct stat st;
  ck_assert_int_ne(stat(dir, &st), 0);
  setenv("TJ_CACHE_DIR", "", 1);                /* "" asks for the default */
  OK(tj_context_new(&cx));
  spmv_check(cx, "y(i) = A(i,j) * x(j)", "y", "A", "x", &hit);
  tj_context_free(cx);
  ck_assert_int_eq(mode_of(dir), 0700);
  ck_assert_int_eq(count_files(dir), 1);
  unsetenv("TJ_CACHE_DIR");
  OK(tj_context_new(&cx));                      /* the API's "" is the same */
  OK(tj_context_set_cache_dir(cx, ""));
  spmv_check(cx, "y(i) = A(i,j) * x(j)", "y", "A", "x", &hit);
  ck_assert_int_eq(hit, 2);
  tj_context_free(cx);
  remove_dir(xdg);
}
END_TEST

static bool can_chown(void) {
  if (geteuid() == 0) return true;
  printf("SKIP: cache files owned by someone else need root (chown)\n");
  fflush(stdout);
  return false;
}

enum { BAD_GROUP, BAD_OTHER, BAD_OWNER, BAD_LINK, BAD_LINK_SLASH, BAD_DIR_CASES };

START_TEST(disk_cache_refuses_untrusted_folders) {
  if (_i == BAD_OWNER && !can_chown()) return;
  char *dir = temp_dir(), link[256], use[256];
  populate(dir);
  snprintf(link, sizeof link, "%s-link", dir);
  snprintf(use, sizeof use, "%s", dir);
  const char *why = NULL, *shown = dir;
  switch (_i) {
  case BAD_GROUP: chmod(dir, 0770); why = "writable by its group (mode 0770)"; break;
  case BAD_OTHER: chmod(dir, 0707); why = "writable by others (mode 0707)"; break;
  case BAD_OWNER:
    ck_assert_int_eq(chown(dir, 65534, 65534), 0);
    why = "owned by uid 65534, not by this user";
    break;
  case BAD_LINK: case BAD_LINK_SLASH:   /* "link/" would follow the link if kept */
    ck_assert_int_eq(symlink(dir, link), 0);
    snprintf(use, sizeof use, "%s%s", link, _i == BAD_LINK_SLASH ? "/" : "");
    why = "a symbolic link";
    shown = link;
    break;
  }
  char what[300];
  snprintf(what, sizeof what, "not using kernel cache folder %s:", shown);
  expect_refused(use, what, why);
  ck_assert_int_eq(count_files(dir), 1);        /* nothing written there */
  unlink(link);
  remove_dir(dir);
}
END_TEST

enum { BADF_GROUP, BADF_OTHER, BADF_OWNER, BADF_LINK, BADF_HARDLINK, BAD_FILE_CASES };

START_TEST(disk_cache_refuses_untrusted_files) {
  if (_i == BADF_OWNER && !can_chown()) return;
  char *dir = temp_dir();
  populate(dir);
  char *file = only_file(dir), real[300], hard[300];
  snprintf(hard, sizeof hard, "%s-hard", dir);
  const char *why = NULL;
  switch (_i) {
  case BADF_GROUP: chmod(file, 0620); why = "writable by its group (mode 0620)"; break;
  case BADF_OTHER: chmod(file, 0602); why = "writable by others (mode 0602)"; break;
  case BADF_OWNER:
    ck_assert_int_eq(chown(file, 65534, 65534), 0);
    why = "owned by uid 65534, not by this user";
    break;
  case BADF_LINK:
    snprintf(real, sizeof real, "%s/elsewhere", dir);
    ck_assert_int_eq(rename(file, real), 0);
    ck_assert_int_eq(symlink(real, file), 0);
    why = "a symbolic link (not followed)";
    break;
  case BADF_HARDLINK:   /* another name for our own file, outside the folder */
    ck_assert_int_eq(link(file, hard), 0);
    why = "has 2 hard links (ours have one)";
    break;
  }
  struct stat before, after;
  ck_assert_int_eq(lstat(file, &before), 0);
  char shown[400];
  snprintf(shown, sizeof shown, "ignoring kernel cache file %s:", file);
  expect_refused(dir, shown, why);
  ck_assert_int_eq(lstat(file, &after), 0);     /* left alone, not replaced */
  ck_assert_int_eq(before.st_ino, after.st_ino);
  ck_assert_int_eq(before.st_mode, after.st_mode);
  unlink(hard);
  free(file);
  remove_dir(dir);
}
END_TEST

/* A folder whose parent others could write to (and so rename it away) is
 * refused; a sticky parent such as /tmp is not. */
START_TEST(disk_cache_refuses_untrusted_parents) {
  char *parent = temp_dir(), dir[256], what[300], why[400];
  snprintf(dir, sizeof dir, "%s/cache", parent);
  populate(dir);
  snprintf(what, sizeof what, "not using kernel cache folder %s:", dir);
  chmod(parent, 0777);
  snprintf(why, sizeof why, "its parent %s is writable by others (mode 0777) without the sticky bit",
           parent);
  expect_refused(dir, what, why);
  chmod(parent, 0770);
  snprintf(why, sizeof why, "its parent %s is writable by its group (mode 0770)", parent);
  expect_refused(dir, what, why);
  chmod(parent, 01777);
  Capture c;
  capture_start(&c);
  int hit;
  tj_context *cx;
  OK(tj_context_new(&cx));
  OK(tj_context_set_cache_dir(cx, dir));
  spmv_check(cx, "y(i) = A(i,j) * x(j)", "y", "A", "x", &hit);
  tj_context_free(cx);
  char *err = capture_end(&c);
  ck_assert_msg(hit == 2 && !strstr(err, "warning"), "hit %d, stderr:\n%s", hit, err);
  free(err);
  ck_assert_int_eq(count_files(dir), 1);
  remove_dir(parent);
}
END_TEST

typedef struct Job {
  tj_context *cx;
  int which;
  int failures;
} Job;

static void *compile_and_run(void *arg) {
  Job *j = arg;
  static const char *exprs[] = {"y(i) = A(i,j) * x(j)", "y(i) = A(i,j) * x(j) + x(i)",
                                "y(i) = A(i,j) * A(i,j) * x(j)", "y(i) = (A(i,j) + 1) * x(j)"};
  for (int rep = 0; rep < 3; rep++) {
    const char *e = exprs[(j->which + rep) % 4];
    tj_tensor *A = matrix("A", "ds", 30, 30, 11 + j->which, 25), *x = vec("x", 30, j->which);
    tj_tensor *y, *yr;
    zeros("y", 30, &y);
    zeros("y", 30, &yr);
    tj_tensor *ops[] = {y, A, x}, *rops[] = {yr, A, x};
    tj_kernel *k;
    if (tj_compile(j->cx, e, ops, 3, NULL, NULL, &k) != TJ_OK ||
        tj_kernel_run(k, TJ_EVALUATE, NULL, 0) != TJ_OK || tj_reference(e, rops, 3) != TJ_OK ||
        max_diff(y, yr) > 1e-9)
      j->failures++;
    tj_tensor_free(A);
    tj_tensor_free(x);
    tj_tensor_free(y);
    tj_tensor_free(yr);
  }
  return NULL;
}

START_TEST(two_threads_compile_at_once) {
  tj_context *cx;
  OK(tj_context_new(&cx));
  pthread_t th[3];
  Job jobs[3];
  for (int t = 0; t < 3; t++) {
    jobs[t] = (Job){cx, t, 0};
    ck_assert_int_eq(pthread_create(&th[t], NULL, compile_and_run, &jobs[t]), 0);
  }
  for (int t = 0; t < 3; t++) {
    pthread_join(th[t], NULL);
    ck_assert_int_eq(jobs[t].failures, 0);
  }
  tj_context_free(cx);
}
END_TEST

typedef struct RunJob {
  tj_kernel *k;
  int seed;
  int failures;
} RunJob;

static void *run_on_own_tensors(void *arg) {
  RunJob *r = arg;
  tj_tensor *A = matrix("A", "ds", 50, 40, 100 + r->seed, 30), *x = vec("x", 40, r->seed);
  tj_tensor *y, *yr;
  zeros("y", 50, &y);
  zeros("y", 50, &yr);
  tj_tensor *ops[] = {y, A, x}, *rops[] = {yr, A, x};
  for (int rep = 0; rep < 20; rep++)
    if (tj_kernel_run(r->k, TJ_EVALUATE, ops, 3) != TJ_OK) r->failures++;
  if (tj_reference("y(i) = A(i,j) * x(j)", rops, 3) != TJ_OK || max_diff(y, yr) > 1e-9)
    r->failures++;
  tj_tensor_free(A);
  tj_tensor_free(x);
  tj_tensor_free(y);
  tj_tensor_free(yr);
  return NULL;
}

START_TEST(one_kernel_many_threads) {
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_tensor *A = matrix("A", "ds", 50, 40, 1, 30), *x = vec("x", 40, 0);
  tj_tensor *y;
  OK(zeros("y", 50, &y));
  tj_tensor *ops[] = {y, A, x};
  tj_kernel *k;
  OK(tj_compile(cx, "y(i) = A(i,j) * x(j)", ops, 3, NULL, NULL, &k));
  pthread_t th[4];
  RunJob jobs[4];
  for (int t = 0; t < 4; t++) {
    jobs[t] = (RunJob){k, t + 1, 0};
    pthread_create(&th[t], NULL, run_on_own_tensors, &jobs[t]);
  }
  for (int t = 0; t < 4; t++) {
    pthread_join(th[t], NULL);
    ck_assert_int_eq(jobs[t].failures, 0);
  }
  tj_tensor_free(A);
  tj_tensor_free(x);
  tj_tensor_free(y);
  tj_context_free(cx);
}
END_TEST

START_TEST(compute_reuses_assembled_output) {
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_tensor *B = matrix("B", "ds", 30, 20, 1, 30), *C = matrix("C", "ds", 30, 20, 2, 30);
  tj_tensor *A = matrix("A", "ds", 30, 20, 3, 0), *Ar = matrix("A", "dd", 30, 20, 3, 0);
  tj_tensor *ops[] = {A, B, C}, *rops[] = {Ar, B, C};
  tj_kernel *k;
  OK(tj_compile(cx, "A(i,j) = B(i,j) * C(i,j) + B(i,j)", ops, 3, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_ASSEMBLE, NULL, 0));
  OK(tj_kernel_run(k, TJ_COMPUTE, NULL, 0));
  OK(tj_reference("A(i,j) = B(i,j) * C(i,j) + B(i,j)", rops, 3));
  ck_assert_double_le(max_diff(A, Ar), 1e-9);
  int64_t nnz = tj_tensor_nnz(A);
  /* Same pattern, new values: compute again without re-assembling. */
  tj_tensor *B2 = matrix("B", "ds", 30, 20, 1, 30);
  int64_t *c;
  double *v;
  int64_t n;
  OK(tj_tensor_unpack(B2, &c, &v, &n));
  tj_tensor *B3;
  tj_format f;
  OK(tj_format_parse("ds", &f));
  int64_t dims[2] = {30, 20};
  OK(tj_tensor_new("B", TJ_F64, 2, dims, &f, &B3));
  for (int64_t e = 0; e < n; e++) OK(tj_tensor_insert(B3, c + 2 * e, v[e] * 3 + 1));
  OK(tj_tensor_pack(B3));
  free(c);
  free(v);
  tj_tensor *ops3[] = {A, B3, C}, *rops3[] = {Ar, B3, C};
  OK(tj_kernel_run(k, TJ_COMPUTE, ops3, 3));
  ck_assert_int_eq(tj_tensor_nnz(A), nnz);
  OK(tj_reference("A(i,j) = B(i,j) * C(i,j) + B(i,j)", rops3, 3));
  ck_assert_double_le(max_diff(A, Ar), 1e-9);
  tj_tensor *all[] = {A, Ar, B, B2, B3, C};
  for (int i = 0; i < 6; i++) tj_tensor_free(all[i]);
  tj_context_free(cx);
}
END_TEST

typedef struct ErrCase {
  const char *expr;
  const char *schedule;
  tj_status status;
  const char *msg;
} ErrCase;

static const ErrCase errors[] = {
    {"y(i) = A(i,j) * z(j)", NULL, TJ_ERR_SHAPE, "unknown tensor 'z'"},
    {"y(i) = A(i,j) *", NULL, TJ_ERR_PARSE, "1:"},
    {"y(i) = A(i,j,k) * x(j)", NULL, TJ_ERR_SHAPE, "A has order 2"},
    {"y(i) = A(i,j) * x(j)", "frobnicate(i)", TJ_ERR_PARSE, "unknown schedule directive"},
    {"y(i) = A(i,j) * x(j)", "parallelize(j)", TJ_ERR_UNSUPPORTED,
     "an inner loop runs in parallel only over an index of a dense output"},
    {"y(i) = A(j,i) * x(j)", NULL, TJ_ERR_SHAPE, "extent"},
};

START_TEST(errors_are_status_codes_with_messages) {
  const ErrCase *ec = &errors[_i];
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_tensor *ops[3];
  spmv_operands("y", "A", "x", ops);
  tj_kernel *k = NULL;
  tj_status st = tj_compile(cx, ec->expr, ops, 3, ec->schedule, NULL, &k);
  ck_assert_msg(st != TJ_OK, "%s compiled", ec->expr);
  ck_assert_msg(strstr(tj_last_error(), ec->msg), "got '%s'", tj_last_error());
  if (ec->status != TJ_ERR_SHAPE) ck_assert_int_eq(st, ec->status);
  ck_assert_ptr_null(k);
  for (int i = 0; i < 3; i++) tj_tensor_free(ops[i]);
  tj_context_free(cx);
}
END_TEST

START_TEST(run_refuses_mismatched_operands) {
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_tensor *ops[3];
  spmv_operands("y", "A", "x", ops);
  tj_tensor *y = ops[0], *A = ops[1], *x = ops[2];
  tj_kernel *k;
  OK(tj_compile(cx, "y(i) = A(i,j) * x(j)", ops, 3, NULL, NULL, &k));
  tj_tensor *x2 = vec("x", 31, 1);
  tj_tensor *bad[] = {y, A, x2};
  ck_assert_int_eq(tj_kernel_run(k, TJ_EVALUATE, bad, 3), TJ_ERR_SHAPE);
  ck_assert_ptr_nonnull(strstr(tj_last_error(), "index j has extent 30 in A but 31 in x"));
  tj_tensor *Acsc = matrix("A", "ds:1,0", 40, 30, 7, 20);
  tj_tensor *bad2[] = {y, Acsc, x};
  ck_assert_int_eq(tj_kernel_run(k, TJ_EVALUATE, bad2, 3), TJ_ERR_FORMAT);
  tj_tensor *missing[] = {y, A};
  ck_assert_int_eq(tj_kernel_run(k, TJ_EVALUATE, missing, 2), TJ_ERR_INVALID);
  ck_assert_ptr_nonnull(strstr(tj_last_error(), "no operand named 'x'"));
  tj_tensor *all[] = {A, x, y, x2, Acsc};
  for (int i = 0; i < 5; i++) tj_tensor_free(all[i]);
  tj_context_free(cx);
}
END_TEST

Suite *api_suite(void) {
  Suite *s = suite_create("api");
  TCase *c = tcase_create("cache");
  tcase_set_timeout(c, 120);
  tcase_add_test(c, memory_cache_hits_renamed_kernels);
  tcase_add_test(c, memory_cache_misses_on_differences);
  tcase_add_test(c, compile_times_cover_the_stages);
  tcase_add_test(c, disk_cache_survives_a_restart);
  tcase_add_test(c, disk_cache_rejects_truncated_and_foreign_files);
  tcase_add_test(c, disk_cache_refuses_a_size_beyond_the_file);
  suite_add_tcase(s, c);
  TCase *tr = tcase_create("trust");
  tcase_set_timeout(tr, 120);
  tcase_add_test(tr, disk_cache_creates_private_folders_and_files);
  tcase_add_test(tr, disk_cache_default_folder_only_when_asked);
  tcase_add_loop_test(tr, disk_cache_refuses_untrusted_folders, 0, BAD_DIR_CASES);
  tcase_add_loop_test(tr, disk_cache_refuses_untrusted_files, 0, BAD_FILE_CASES);
  tcase_add_test(tr, disk_cache_refuses_untrusted_parents);
  suite_add_tcase(s, tr);
  TCase *t = tcase_create("threads");
  tcase_set_timeout(t, 120);
  tcase_add_test(t, two_threads_compile_at_once);
  tcase_add_test(t, one_kernel_many_threads);
  suite_add_tcase(s, t);
  TCase *r = tcase_create("runs");
  tcase_set_timeout(r, 60);
  tcase_add_test(r, compute_reuses_assembled_output);
  tcase_add_loop_test(r, errors_are_status_codes_with_messages, 0,
                      sizeof errors / sizeof errors[0]);
  tcase_add_test(r, run_refuses_mismatched_operands);
  tcase_add_test(r, unpacked_inputs_read_as_empty);
  suite_add_tcase(s, r);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(api_suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* Failure injection: every allocation of a path fails in turn.
 *
 * For each path (pack, convert, cast, read, write, compile, run) and each
 * n = 1, 2, ... the n-th allocation from the start of the call fails
 * (tests/failinj: the binary's malloc family is wrapped at link time),
 * until a run sees fewer than n allocations and completes. Every failed
 * call must return TJ_ERR_NOMEM with an "out of memory" message, leave the
 * caller's tensors exactly as they were (contents, pending inserts, format)
 * and leave no file under the name it was asked to write; in an ASan build
 * LeakSanitizer runs after every call and must find nothing.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "failinj/failinj.h"
#include "runtime/tensor.h"
#include "tensorjit.h"

#define OK(call) ck_assert_msg((call) == TJ_OK, "%s", tj_last_error())

/* What a caller can observe of a tensor. */
typedef struct Snap {
  tj_format fmt;
  tj_dtype dtype;
  int64_t dims[TJ_MAX_ORDER_PUBLIC];
  int64_t n, pending;
  int64_t *coords;
  double *vals, *pending_vals;
} Snap;

static Snap snap(const tj_tensor *t) {
  Snap s = {.fmt = *tj_tensor_format(t), .dtype = tj_tensor_dtype(t)};
  for (int m = 0; m < s.fmt.order; m++) s.dims[m] = tj_tensor_dim(t, m);
  OK(tj_tensor_unpack(t, &s.coords, &s.vals, &s.n));
  s.pending = t->coo.n;
  s.pending_vals = malloc((size_t)(s.pending + 1) * sizeof(double));
  if (s.pending) memcpy(s.pending_vals, t->coo.vals, (size_t)s.pending * sizeof(double));
  return s;
}

static void snap_free(Snap *s) { free(s->coords), free(s->vals), free(s->pending_vals); }

/* t is as it was when s was taken. */
static void same(const tj_tensor *t, const Snap *s, const char *what, int64_t n) {
  Snap now = snap(t);
  ck_assert_msg(memcmp(&now.fmt, &s->fmt, sizeof s->fmt) == 0 && now.dtype == s->dtype &&
                    memcmp(now.dims, s->dims, sizeof s->dims) == 0,
                "%s, allocation %d failed: the tensor's shape changed", what, (int)n);
  ck_assert_msg(now.n == s->n && now.pending == s->pending,
                "%s, allocation %d failed: %d entries (%d pending), expected %d (%d)", what,
                (int)n, (int)now.n, (int)now.pending, (int)s->n, (int)s->pending);
  int order = s->fmt.order;
  ck_assert_msg((s->n == 0 || (memcmp(now.coords, s->coords, (size_t)(s->n * order) * 8) == 0 &&
                               memcmp(now.vals, s->vals, (size_t)s->n * 8) == 0)) &&
                    (s->pending == 0 ||
                     memcmp(now.pending_vals, s->pending_vals, (size_t)s->pending * 8) == 0),
                "%s, allocation %d failed: the tensor's entries changed", what, (int)n);
  snap_free(&now);
}

/* After a call armed to fail its n-th allocation: true when that
 * allocation happened (so the loop goes on to n + 1). The call must then
 * have failed with TJ_ERR_NOMEM and an "out of memory" message, or
 * recovered (TJ_OK: the allocation was optional, e.g. a size hint; the
 * caller checks the result); without it, it must have succeeded. */
static bool fired_cleanly(tj_status st, const char *what, int64_t n) {
  int64_t seen = fi_disarm();
  ck_assert_msg(!fi_leaked(), "%s: leak after allocation %d failed", what, (int)n);
  if (!fi_fired()) {
    ck_assert_msg(st == TJ_OK, "%s: failed with no allocation failing (%d seen): %s", what,
                  (int)seen, tj_last_error());
    return false;
  }
  ck_assert_msg(st == TJ_OK || st == TJ_ERR_NOMEM, "%s: allocation %d of %d failed, status %d: %s",
                what, (int)n, (int)seen, (int)st, tj_last_error());
  ck_assert_msg(st == TJ_OK || strstr(tj_last_error(), "out of memory"),
                "%s: allocation %d: message '%s'", what, (int)n, tj_last_error());
  return true;
}

/* t and ref hold the same values everywhere (stored zeros or not). */
static void same_values(const tj_tensor *t, const tj_tensor *ref, const char *what, int64_t n) {
  int order = tj_tensor_order(ref);
  int64_t rows = tj_tensor_dim(ref, 0), cols = order == 2 ? tj_tensor_dim(ref, 1) : 1;
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) {
      int64_t c[2] = {i, j};
      double a = 0, b = 0;
      OK(tj_tensor_get(t, c, &a));
      OK(tj_tensor_get(ref, c, &b));
      ck_assert_msg(a == b, "%s, allocation %d: value at (%d,%d) is %g, expected %g", what,
                    (int)n, (int)i, (int)j, a, b);
    }
}

static tj_tensor *matrix(const char *name, const char *fmt, int64_t rows, int64_t cols,
                         int nnz, unsigned seed, bool pack) {
  tj_format f;
  OK(tj_format_parse(fmt, &f));
  int64_t dims[2] = {rows, cols};
  tj_tensor *t;
  OK(tj_tensor_new(name, TJ_F64, 2, dims, &f, &t));
  for (int e = 0; e < nnz; e++) {
    seed = seed * 1103515245u + 12345u;
    int64_t c[2] = {(seed >> 8) % rows, (seed >> 4) % cols};
    OK(tj_tensor_insert(t, c, (double)(seed % 13) - 6));
  }
  if (pack) OK(tj_tensor_pack(t));
  return t;
}

static tj_tensor *vector(const char *name, int64_t n, bool fill) {
  tj_format f = tj_format_dense(1);
  tj_tensor *t;
  OK(tj_tensor_new(name, TJ_F64, 1, &n, &f, &t));
  for (int64_t i = 0; fill && i < n; i++) OK(tj_tensor_insert(t, &i, (double)(i % 7) + 1));
  if (fill) OK(tj_tensor_pack(t));
  return t;
}

/* ---- storage: pack, convert, cast ---- */

static const char *FORMATS[] = {"ds", "ds:1,0", "ss", "uq", "dd", "sd"};
enum { NFORMATS = sizeof FORMATS / sizeof FORMATS[0] };

/* Pack of fresh inserts, and of inserts merged into packed contents:
 * on failure the tensor is as it was (and packs afterwards), on success
 * it holds what an uninjected pack gives. */
static tj_tensor *pack_input(int f, int merge) {
  tj_tensor *t = matrix("A", FORMATS[f], 30, 20, 120, 3, merge);
  for (int e = 0; merge && e < 40; e++) {
    int64_t c[2] = {e % 30, (e * 7) % 20};
    OK(tj_tensor_insert(t, c, 2.5));
  }
  return t;
}

START_TEST(pack_fails_cleanly) {
  for (int merge = 0; merge < 2; merge++) {
    tj_tensor *want = pack_input(_i, merge);
    OK(tj_tensor_pack(want));
    Snap packed = snap(want);
    int64_t n = 1;
    for (;; n++) {
      tj_tensor *t = pack_input(_i, merge);
      Snap s = snap(t);
      fi_arm(n);
      tj_status st = tj_tensor_pack(t);
      bool fired = fired_cleanly(st, "pack", n);
      if (st != TJ_OK) {
        same(t, &s, "pack", n);
        OK(tj_tensor_pack(t));   /* and it packs afterwards */
      }
      same(t, &packed, "pack", n);
      snap_free(&s);
      tj_tensor_free(t);
      if (!fired) break;
    }
    /* adding into dense values allocates nothing; every other pack does */
    ck_assert(n > 1 || (merge && !strcmp(FORMATS[_i], "dd")));
    snap_free(&packed);
    tj_tensor_free(want);
  }
}
END_TEST

/* Creating a tensor, and inserting into it until its buffer grows: a
 * failed insert leaves the entries inserted before it, and nothing else. */
START_TEST(new_and_insert_fail_cleanly) {
  tj_format f;
  OK(tj_format_parse(FORMATS[_i], &f));
  int64_t dims[2] = {30, 20};
  for (int64_t n = 1;; n++) {
    tj_tensor *t = (tj_tensor *)&f;
    fi_arm(n);
    tj_status st = tj_tensor_new("A", TJ_F64, 2, dims, &f, &t);
    bool fired = fired_cleanly(st, "new", n);
    if (st == TJ_OK) tj_tensor_free(t);
    else ck_assert_ptr_null(t);
    if (!fired) break;
  }
  for (int64_t n = 1;; n++) {
    tj_tensor *t;
    OK(tj_tensor_new("A", TJ_F64, 2, dims, &f, &t));
    fi_arm(n);
    int done = 0;
    tj_status st = TJ_OK;
    for (; done < 300 && st == TJ_OK; done++) {
      int64_t c[2] = {done % 30, (done * 7) % 20};
      st = tj_tensor_insert(t, c, done);
    }
    bool fired = fired_cleanly(st, "insert", n);
    ck_assert_int_eq(t->coo.n, st == TJ_OK ? 300 : done - 1);
    for (int64_t e = 0; e < t->coo.n; e++) ck_assert(t->coo.vals[e].f == (double)e);
    OK(tj_tensor_pack(t));
    tj_tensor_free(t);
    if (!fired) break;
  }
}
END_TEST

START_TEST(convert_fails_cleanly) {
  tj_tensor *src = matrix("A", FORMATS[_i], 30, 20, 150, 5, true);
  Snap s = snap(src);
  for (int to = 0; to < NFORMATS; to++) {
    tj_format f;
    OK(tj_format_parse(FORMATS[to], &f));
    for (int64_t n = 1;; n++) {
      tj_tensor *out = (tj_tensor *)&s;   /* must become NULL on failure */
      fi_arm(n);
      tj_status st = tj_tensor_convert(src, &f, &out);
      bool fired = fired_cleanly(st, "convert", n);
      same(src, &s, "convert", n);
      if (st == TJ_OK) {
        ck_assert_int_eq(tj_tensor_nnz(out) > 0, 1);
        tj_tensor_free(out);
      } else {
        ck_assert_ptr_null(out);
      }
      if (!fired) break;
    }
  }
  for (int64_t n = 1;; n++) {
    tj_tensor *out;
    fi_arm(n);
    tj_status st = tj_tensor_cast(src, TJ_F32, &out);
    bool fired = fired_cleanly(st, "cast", n);
    same(src, &s, "cast", n);
    if (st == TJ_OK) {
      ck_assert_int_eq(tj_tensor_nnz(out), tj_tensor_nnz(src));
      tj_tensor_free(out);
    } else {
      ck_assert_ptr_null(out);
    }
    if (!fired) break;
  }
  snap_free(&s);
  tj_tensor_free(src);
}
END_TEST

/* ---- files ---- */

static char dir[64];

static void make_dir(void) {
  snprintf(dir, sizeof dir, "/tmp/tj_failinj_XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void remove_tree(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  ck_assert_int_eq(system(cmd), 0);
}

/* The number of entries in dir (no temporaries left behind). */
static int files_in_dir(void) {
  char cmd[128], line[64];
  snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
  FILE *p = popen(cmd, "r");
  ck_assert_ptr_nonnull(fgets(line, sizeof line, p));
  pclose(p);
  return atoi(line);
}

static const char *FILES[] = {"m.mtx", "m.tns", "m.mtx.gz", "t.tns", "t.tns.gz"};

/* Reading each kind of file: *out stays NULL on failure. */
START_TEST(read_fails_cleanly) {
  make_dir();
  char path[128];
  snprintf(path, sizeof path, "%s/%s", dir, FILES[_i]);
  tj_tensor *src;
  if (FILES[_i][0] == 'm') {
    src = matrix("A", "ds", 40, 30, 200, 9, true);
  } else {
    tj_format f;
    OK(tj_format_parse("sss", &f));
    int64_t dims[3] = {6, 5, 4};
    OK(tj_tensor_new("T", TJ_F64, 3, dims, &f, &src));
    for (int e = 0; e < 60; e++) {
      int64_t c[3] = {e % 6, (e * 3) % 5, (e * 7) % 4};
      OK(tj_tensor_insert(src, c, e + 0.5));
    }
    OK(tj_tensor_pack(src));
  }
  OK(tj_tensor_write(src, path));
  tj_tensor *want;
  OK(tj_tensor_read(path, NULL, NULL, &want));
  for (int64_t n = 1;; n++) {
    tj_tensor *out = (tj_tensor *)path;
    fi_arm(n);
    tj_status st = tj_tensor_read(path, NULL, NULL, &out);
    bool fired = fired_cleanly(st, "read", n);
    if (st == TJ_OK) {
      Snap a = snap(want);
      same(out, &a, "read", n);
      snap_free(&a);
      tj_tensor_free(out);
    } else {
      ck_assert_ptr_null(out);
    }
    if (!fired) break;
  }
  tj_tensor_free(want);
  tj_tensor_free(src);
  remove_tree();
}
END_TEST

/* Writing: on failure no file under the final name, nothing left over;
 * an existing file of that name keeps its contents. */
START_TEST(write_fails_cleanly) {
  make_dir();
  tj_tensor *src = matrix("A", "ds", 40, 30, 200, 9, true);
  char path[128];
  snprintf(path, sizeof path, "%s/%s", dir, _i ? "m.mtx.gz" : "m.tns");
  for (int existing = 0; existing < 2; existing++) {
    if (existing) {
      FILE *f = fopen(path, "w");
      fputs("old\n", f);
      fclose(f);
    }
    for (int64_t n = 1;; n++) {
      fi_arm(n);
      tj_status st = tj_tensor_write(src, path);
      bool fired = fired_cleanly(st, "write", n);
      ck_assert_int_eq(files_in_dir(), existing || st == TJ_OK ? 1 : 0);
      if (!fired) break;
      if (existing && st != TJ_OK) {
        char buf[16] = {0};
        FILE *f = fopen(path, "r");
        ck_assert_ptr_nonnull(fgets(buf, sizeof buf, f));
        fclose(f);
        ck_assert_str_eq(buf, "old\n");
      }
    }
    unlink(path);
  }
  tj_tensor_free(src);
  remove_tree();
}
END_TEST

/* ---- compile and run ---- */

typedef struct Kernel {
  const char *expr, *schedule;
  const char *fy, *fa, *fb;   /* formats of the output and the two inputs */
  bool vector_b;
} Kernel;

static const Kernel KERNELS[] = {
    {"y(i) = A(i,j) * x(j)", NULL, "d", "ds", "d", true},
    {"C(i,j) = A(i,k) * B(k,j)", NULL, "ds", "ds", "ds", false},
    {"C(i,j) = A(i,j) + B(i,j)", NULL, "ss", "ss", "ds", false},
    {"y(i) = A(i,j) * x(j)", "parallelize(i)", "d", "ds", "d", true},
    /* CSC walked by rows: converted at every run */
    {"y(i) = A(i,j) * x(j)", NULL, "d", "ds:1,0", "d", true},
    {"C(i,j) = A(i,k) * B(k,j)", "parallelize(i)", "ds", "ds", "ds", false},
};
enum { NKERNELS = sizeof KERNELS / sizeof KERNELS[0] };

static void operands(const Kernel *k, tj_tensor *ops[3]) {
  char nb[2] = {k->vector_b ? 'x' : 'B', 0};
  if (k->vector_b) {
    ops[0] = vector("y", 60, false);
    ops[2] = vector(nb, 50, true);
  } else {
    ops[0] = matrix("C", k->fy, 60, 50, 0, 1, false);
    ops[2] = matrix(nb, k->fb, 50, 50, 300, 11, true);
    if (strstr(k->expr, "+")) {
      tj_tensor_free(ops[2]);
      ops[2] = matrix(nb, k->fb, 60, 50, 300, 11, true);
    }
  }
  ops[1] = matrix("A", k->fa, 60, 50, 400, 7, true);
}

/* Writing through a temporary and a rename keeps what a plain overwrite
 * kept: the replaced file's mode, and a symbolic link (its target gets the
 * new contents); nothing else is left in the folder. */
START_TEST(write_keeps_links_and_modes) {
  make_dir();
  tj_tensor *src = matrix("A", "ss", 20, 10, 50, 9, true);
  char path[128], link[128];
  snprintf(path, sizeof path, "%s/m.mtx", dir);
  snprintf(link, sizeof link, "%s/l.mtx", dir);
  FILE *f = fopen(path, "w");
  fputs("old\n", f);
  fclose(f);
  ck_assert_int_eq(chmod(path, 0640), 0);
  ck_assert_int_eq(symlink("m.mtx", link), 0);
  OK(tj_tensor_write(src, link));
  struct stat st;
  ck_assert_int_eq(lstat(link, &st), 0);
  ck_assert(S_ISLNK(st.st_mode));
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert_int_eq(st.st_mode & 07777, 0640);
  tj_tensor *back;
  OK(tj_tensor_read(path, NULL, NULL, &back));
  ck_assert_int_eq(tj_tensor_nnz(back), tj_tensor_nnz(src));
  tj_tensor_free(back);
  ck_assert_int_eq(files_in_dir(), 2);
  tj_tensor_free(src);
  remove_tree();
}
END_TEST

/* ---- a full disk ---- */

/* Sets the file-size limit (SIGXFSZ ignored: a write past it fails with
 * EFBIG, as on a full disk); returns the old limit. No Check assertion
 * may run until it is restored: Check itself writes files. */
static struct rlimit limit_file_size(rlim_t bytes) {
  struct rlimit old, lim;
  ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
  lim = old;
  lim.rlim_cur = bytes;
  signal(SIGXFSZ, SIG_IGN);
  if (setrlimit(RLIMIT_FSIZE, &lim) != 0) ck_abort_msg("setrlimit failed");
  return old;
}

/* Output files past the limit: TJ_ERR_IO naming the file, no file under
 * its name and no temporary left, an older file of that name intact; the
 * same through /dev/full, written directly. */
START_TEST(write_to_a_full_disk) {
  make_dir();
  tj_tensor *src = matrix("A", "ss", 200, 100, 2000, 9, true);
  char path[128];
  snprintf(path, sizeof path, "%s/%s", dir, FILES[_i]);
  for (int existing = 0; existing < 2; existing++) {
    if (existing) {
      FILE *f = fopen(path, "w");
      fputs("old\n", f);
      fclose(f);
    }
    struct rlimit old = limit_file_size(4096);
    tj_status st = tj_tensor_write(src, path);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
    ck_assert_int_eq(st, TJ_ERR_IO);
    ck_assert_msg(strstr(tj_last_error(), path) && strstr(tj_last_error(), "write failed"), "%s",
                  tj_last_error());
    ck_assert_int_eq(files_in_dir(), existing);
    if (existing) {
      char buf[16] = {0};
      FILE *f = fopen(path, "r");
      ck_assert_ptr_nonnull(fgets(buf, sizeof buf, f));
      fclose(f);
      ck_assert_str_eq(buf, "old\n");
    }
  }
  OK(tj_tensor_write(src, path));   /* with room, the write replaces it */
  tj_tensor *back;
  OK(tj_tensor_read(path, NULL, NULL, &back));
  ck_assert_int_eq(tj_tensor_nnz(back), tj_tensor_nnz(src));
  tj_tensor_free(back);
  if (access("/dev/full", W_OK) == 0) {
    ck_assert_int_eq(tj_tensor_write(src, "/dev/full"), TJ_ERR_IO);
    ck_assert_msg(strstr(tj_last_error(), "No space left"), "%s", tj_last_error());
  }
  tj_tensor_free(src);
  remove_tree();
}
END_TEST

/* Cache files past the limit: the kernel still compiles and runs, with a
 * warning; no cache file and no temporary are left in the folder. */
START_TEST(cache_on_a_full_disk) {
  make_dir();
  tj_tensor *ops[3];
  operands(&KERNELS[0], ops);
  tj_context *cx;
  OK(tj_context_new(&cx));
  OK(tj_context_set_cache_dir(cx, dir));
  struct rlimit old = limit_file_size(512);
  tj_kernel *k;
  tj_status st = tj_compile(cx, KERNELS[0].expr, ops, 3, NULL, NULL, &k);
  ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
  ck_assert_msg(st == TJ_OK, "%s", tj_last_error());
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  ck_assert_int_eq(files_in_dir(), 0);
  tj_context_free(cx);
  for (int t = 0; t < 3; t++) tj_tensor_free(ops[t]);
  remove_tree();
}
END_TEST

/* Compiling in a fresh context: *out untouched-NULL on failure, the
 * operands as they were. */
START_TEST(compile_fails_cleanly) {
  const Kernel *kd = &KERNELS[_i];
  tj_tensor *ops[3];
  operands(kd, ops);
  Snap s1 = snap(ops[1]), s2 = snap(ops[2]);
  tj_tensor *want, *refops[3] = {NULL, ops[1], ops[2]};
  OK(tj_tensor_convert(ops[0], tj_tensor_format(ops[0]), &refops[0]));
  OK(tj_reference(kd->expr, refops, 3));
  want = refops[0];
  for (int64_t n = 1;; n++) {
    tj_context *cx;
    OK(tj_context_new(&cx));
    tj_kernel *k = NULL;
    fi_arm(n);
    tj_status st = tj_compile(cx, kd->expr, ops, 3, kd->schedule, NULL, &k);
    bool fired = fired_cleanly(st, kd->expr, n);
    same(ops[1], &s1, kd->expr, n);
    same(ops[2], &s2, kd->expr, n);
    if (st != TJ_OK) {
      ck_assert_ptr_null(k);
      /* the same context still compiles it */
      OK(tj_compile(cx, kd->expr, ops, 3, kd->schedule, NULL, &k));
    }
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    same_values(ops[0], want, kd->expr, n);
    tj_context_free(cx);
    if (!fired) break;
  }
  snap_free(&s1), snap_free(&s2);
  tj_tensor_free(want);
  for (int t = 0; t < 3; t++) tj_tensor_free(ops[t]);
}
END_TEST

/* The reference interpreter (densify, evaluate, pack the result back):
 * on failure the output as it was (tensorjit once freed its arrays when
 * a push failed, and kept them). */
START_TEST(reference_fails_cleanly) {
  const Kernel *kd = &KERNELS[_i];
  tj_tensor *ops[3];
  operands(kd, ops);
  OK(tj_reference(kd->expr, ops, 3));   /* the output holds a result */
  Snap full = snap(ops[0]), s1 = snap(ops[1]), s2 = snap(ops[2]);
  for (int64_t n = 1;; n++) {
    fi_arm(n);
    tj_status st = tj_reference(kd->expr, ops, 3);
    bool fired = fired_cleanly(st, "reference", n);
    same(ops[0], &full, "reference", n);
    same(ops[1], &s1, "reference", n);
    same(ops[2], &s2, "reference", n);
    if (!fired) break;
  }
  snap_free(&full), snap_free(&s1), snap_free(&s2);
  for (int t = 0; t < 3; t++) tj_tensor_free(ops[t]);
}
END_TEST

/* A reference over more values than memory holds is refused (the count
 * once overflowed into a small array the densify step overran). */
START_TEST(reference_refuses_what_cannot_densify) {
  int64_t big = (int64_t)1 << 33;
  tj_tensor *s, *a;
  tj_format dcsr, scalar = tj_format_dense(0);
  OK(tj_format_parse("ss", &dcsr));
  dcsr.crd_width = 64;
  int64_t dims[2] = {big, big};
  OK(tj_tensor_new("s", TJ_F64, 0, NULL, &scalar, &s));
  OK(tj_tensor_new("A", TJ_F64, 2, dims, &dcsr, &a));
  int64_t c[2] = {big - 1, 3};
  OK(tj_tensor_insert(a, c, 2));
  OK(tj_tensor_pack(a));
  tj_tensor *ops[2] = {s, a};
  ck_assert_int_eq(tj_reference("s = A(i,j)", ops, 2), TJ_ERR_NOMEM);
  ck_assert_msg(strstr(tj_last_error(), "densifying A (more values than memory)"), "%s",
                tj_last_error());
  tj_tensor_free(s), tj_tensor_free(a);
}
END_TEST

/* A fresh output like ops[0] (unpacked: no arrays yet). */
static tj_tensor *fresh_output(const tj_tensor *like) {
  int64_t dims[2] = {tj_tensor_dim(like, 0), tj_tensor_dim(like, 1)};
  tj_tensor *t;
  OK(tj_tensor_new(tj_tensor_name(like), tj_tensor_dtype(like), tj_tensor_order(like), dims,
                   tj_tensor_format(like), &t));
  return t;
}

/* += into a sparse output that holds entries, each phase: a failed run
 * gives the output back exactly as it was (the kernel had already written
 * its arrays); a run that completes matches one made without failures. */
START_TEST(accumulate_fails_cleanly) {
  /* _i 1: SpGEMM, run as a sum into a temporary and a union (driver_accum.c) */
  const char *expr = _i ? "C(i,j) += A(i,k) * B(k,j)" : "C(i,j) += A(i,j) * B(i,j)";
  static const char *fmts[] = {"ds", "ss", "uq", "ds:1,0", "sd"};
  tj_tensor *a = matrix("A", "ds", 60, 50, 400, 7, true);
  tj_tensor *b = matrix("B", "ds", _i ? 50 : 60, 50, 300, 11, true);
  tj_context *cx;
  OK(tj_context_new(&cx));
  for (int f = 0; f < (_i ? 5 : 3); f++) {
    tj_tensor *c = matrix("C", fmts[f], 60, 50, 200, 3, true), *want;
    tj_kernel *k;
    tj_options o = tj_options_default();
    o.nthreads = 2;
    OK(tj_compile(cx, expr, (tj_tensor *[]){c, a, b}, 3, NULL, &o, &k));
    for (int ph = TJ_ASSEMBLE; ph <= TJ_EVALUATE; ph++) {
      OK(tj_tensor_cast(c, TJ_F64, &want));   /* exact copies: stored zeros too */
      if (ph == TJ_COMPUTE) OK(tj_kernel_run(k, TJ_ASSEMBLE, (tj_tensor *[]){want, a, b}, 3));
      tj_tensor *start;
      OK(tj_tensor_cast(want, TJ_F64, &start));
      OK(tj_kernel_run(k, (tj_phase)ph, (tj_tensor *[]){want, a, b}, 3));
      for (int64_t n = 1;; n++) {
        tj_tensor *out;
        OK(tj_tensor_cast(start, TJ_F64, &out));
        Snap before = snap(out);
        fi_arm(n);
        tj_status st = tj_kernel_run(k, (tj_phase)ph, (tj_tensor *[]){out, a, b}, 3);
        char what[96];
        snprintf(what, sizeof what, "%s into %s, phase %d", expr, fmts[f], ph);
        bool fired = fired_cleanly(st, what, n);
        if (st != TJ_OK) {
          same(out, &before, what, n);
        } else {
          same_values(out, want, what, n);
          ck_assert_int_eq(tj_tensor_nnz(out), tj_tensor_nnz(want));   /* the same pattern */
        }
        snap_free(&before);
        tj_tensor_free(out);
        if (!fired) break;
      }
      tj_tensor_free(start);
      tj_tensor_free(want);
    }
    tj_kernel_free(k);
    tj_tensor_free(c);
  }
  tj_context_free(cx);
  tj_tensor_free(a), tj_tensor_free(b);
}
END_TEST

/* Compiling SpGEMM += into CSC and COO outputs (a sum into a temporary
 * whose format is tried in turn, then a union): a failed compile is out
 * of memory, not a fall back to a kernel that stores every column; one
 * that completes gives the pattern and values of one made without
 * failures. */
START_TEST(accumulate_compile_fails_cleanly) {
  static const char *fmts[] = {"ds:1,0", "uq"};
  const char *expr = "C(i,j) += A(i,k) * B(k,j)";
  tj_tensor *a = matrix("A", "ds", 60, 50, 400, 7, true);
  tj_tensor *b = matrix("B", "ds", 50, 50, 300, 11, true);
  tj_tensor *c = matrix("C", fmts[_i], 60, 50, 200, 3, true), *want;
  OK(tj_tensor_cast(c, TJ_F64, &want));
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  OK(tj_compile(cx, expr, (tj_tensor *[]){want, a, b}, 3, NULL, NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  tj_context_free(cx);
  ck_assert_int_lt(tj_tensor_nnz(want), 60 * 50 / 2);   /* not every column */
  Snap sa = snap(a), sb = snap(b), sc = snap(c);
  for (int64_t n = 1;; n++) {
    OK(tj_context_new(&cx));
    k = NULL;
    fi_arm(n);
    tj_status st = tj_compile(cx, expr, (tj_tensor *[]){c, a, b}, 3, NULL, NULL, &k);
    bool fired = fired_cleanly(st, expr, n);
    same(a, &sa, expr, n), same(b, &sb, expr, n), same(c, &sc, expr, n);
    if (st != TJ_OK) {
      ck_assert_ptr_null(k);
      OK(tj_compile(cx, expr, (tj_tensor *[]){c, a, b}, 3, NULL, NULL, &k));
    }
    tj_tensor *out;
    OK(tj_tensor_cast(c, TJ_F64, &out));
    OK(tj_kernel_run(k, TJ_EVALUATE, (tj_tensor *[]){out, a, b}, 3));
    same_values(out, want, expr, n);
    ck_assert_int_eq(tj_tensor_nnz(out), tj_tensor_nnz(want));
    tj_tensor_free(out);
    tj_context_free(cx);
    if (!fired) break;
  }
  snap_free(&sa), snap_free(&sb), snap_free(&sc);
  tj_tensor_free(a), tj_tensor_free(b), tj_tensor_free(c), tj_tensor_free(want);
}
END_TEST

/* Memory that stays exhausted from the n-th allocation on: compiling and
 * running fail with out of memory (no crash, no leak) until n is past
 * what they need. */
START_TEST(exhausted_memory_fails_cleanly) {
  const Kernel *kd = &KERNELS[_i];
  tj_tensor *ops[3];
  operands(kd, ops);
  for (int64_t n = 1;; n++) {
    tj_context *cx;
    OK(tj_context_new(&cx));
    tj_kernel *k = NULL;
    fi_arm_all(n);
    tj_status st = tj_compile(cx, kd->expr, ops, 3, kd->schedule, NULL, &k);
    if (st == TJ_OK) st = tj_kernel_run(k, TJ_EVALUATE, NULL, 0);
    bool fired = fired_cleanly(st, kd->expr, n);
    tj_context_free(cx);
    if (!fired) break;
  }
  for (int t = 0; t < 3; t++) tj_tensor_free(ops[t]);
}
END_TEST

/* A reduction into a dense output on two threads through partial outputs
 * (CSC by column chunks, COO and DCSR by chunks of level-0 positions):
 * under += a failed run leaves y as it was; a run that completes matches
 * one made without failures. */
START_TEST(partials_fail_cleanly) {
  static const char *fmts[] = {"ds:1,0", "uq", "ss"};
  setenv("TJ_PAR_MIN_WORK", "0", 1);   /* partials on this small input */
  tj_tensor *a = matrix("A", fmts[_i], 3000, 3000, 36000, 5, true);
  tj_tensor *x = vector("x", 3000, true);
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_options o = tj_options_default();
  o.nthreads = 2;
  for (int acc = 0; acc < 2; acc++) {
    const char *expr = acc ? "y(i) += A(i,j) * x(j)" : "y(i) = A(i,j) * x(j)";
    tj_tensor *want = vector("y", 3000, true);
    tj_kernel *k;
    OK(tj_compile(cx, expr, (tj_tensor *[]){want, a, x}, 3, NULL, &o, &k));
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    tj_kernel_free(k);
    char what[96];
    snprintf(what, sizeof what, "%s, A %s, 2 threads", expr, fmts[_i]);
    for (int64_t n = 1;; n++) {
      tj_tensor *y = vector("y", 3000, true);
      /* a new handle (the code cached): its chunk outputs are allocated
       * while the chunks run */
      OK(tj_compile(cx, expr, (tj_tensor *[]){y, a, x}, 3, NULL, &o, &k));
      Snap before = snap(y);
      fi_arm(n);
      tj_status st = tj_kernel_run(k, TJ_EVALUATE, NULL, 0);
      bool fired = fired_cleanly(st, what, n);
      if (st == TJ_OK) same_values(y, want, what, n);
      else if (acc) same(y, &before, what, n);
      snap_free(&before);
      tj_kernel_free(k);
      tj_tensor_free(y);
      if (!fired) break;
    }
    tj_tensor_free(want);
  }
  unsetenv("TJ_PAR_MIN_WORK");
  tj_context_free(cx);
  tj_tensor_free(a), tj_tensor_free(x);
}
END_TEST

/* Running into a fresh output each time (assembling a sparse output and
 * growing its arrays, parallel row chunks): the inputs as they were, and
 * the output either as it was (empty) or complete; then computing values
 * again into an assembled output. */
START_TEST(run_fails_cleanly) {
  const Kernel *kd = &KERNELS[_i];
  tj_tensor *ops[3];
  operands(kd, ops);
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_kernel *k;
  tj_options o = tj_options_default();
  o.nthreads = 2;
  OK(tj_compile(cx, kd->expr, ops, 3, kd->schedule, &o, &k));
  OK(tj_kernel_run(k, TJ_ASSEMBLE, NULL, 0));
  OK(tj_kernel_run(k, TJ_COMPUTE, NULL, 0));   /* both phases compiled */
  Snap full = snap(ops[0]);
  Snap s1 = snap(ops[1]), s2 = snap(ops[2]);
  int64_t most = 0;
  for (int phase = 0; phase < 2; phase++) {   /* evaluate, then compute */
    for (int64_t n = 1;; n++) {
      tj_tensor *run_ops[3] = {phase ? ops[0] : fresh_output(ops[0]), ops[1], ops[2]};
      Snap before = snap(run_ops[0]);
      fi_arm(n);
      tj_status st = tj_kernel_run(k, phase ? TJ_COMPUTE : TJ_EVALUATE, run_ops, 3);
      bool fired = fired_cleanly(st, kd->expr, n);
      same(ops[1], &s1, kd->expr, n);
      same(ops[2], &s2, kd->expr, n);
      same(run_ops[0], st != TJ_OK ? &before : &full, kd->expr, n);
      snap_free(&before);
      if (!phase) tj_tensor_free(run_ops[0]);
      if (n > most) most = n;
      if (!fired) break;
    }
  }
  ck_assert_int_gt(most, 1);   /* evaluating into a fresh output allocates */
  snap_free(&full), snap_free(&s1), snap_free(&s2);
  tj_context_free(cx);
  for (int t = 0; t < 3; t++) tj_tensor_free(ops[t]);
}
END_TEST

static Suite *failinj_suite(void) {
  Suite *s = suite_create("failinj");
  TCase *st = tcase_create("storage");
  tcase_set_timeout(st, 120);
  tcase_add_loop_test(st, new_and_insert_fail_cleanly, 0, NFORMATS);
  tcase_add_loop_test(st, pack_fails_cleanly, 0, NFORMATS);
  tcase_add_loop_test(st, convert_fails_cleanly, 0, NFORMATS);
  suite_add_tcase(s, st);
  TCase *io = tcase_create("files");
  tcase_set_timeout(io, 120);
  tcase_add_loop_test(io, read_fails_cleanly, 0, sizeof FILES / sizeof FILES[0]);
  tcase_add_loop_test(io, write_fails_cleanly, 0, 2);
  tcase_add_test(io, write_keeps_links_and_modes);
  tcase_add_loop_test(io, write_to_a_full_disk, 0, sizeof FILES / sizeof FILES[0]);
  suite_add_tcase(s, io);
  TCase *jit = tcase_create("jit");
  tcase_set_timeout(jit, 600);
  tcase_add_test(jit, cache_on_a_full_disk);
  tcase_add_loop_test(jit, compile_fails_cleanly, 0, NKERNELS);
  tcase_add_loop_test(jit, run_fails_cleanly, 0, NKERNELS);
  tcase_add_loop_test(jit, accumulate_fails_cleanly, 0, 2);
  tcase_add_loop_test(jit, partials_fail_cleanly, 0, 3);
  tcase_add_loop_test(jit, accumulate_compile_fails_cleanly, 0, 2);
  tcase_add_loop_test(jit, reference_fails_cleanly, 0, NKERNELS);
  tcase_add_loop_test(jit, exhausted_memory_fails_cleanly, 0, NKERNELS);
  tcase_add_test(jit, reference_refuses_what_cannot_densify);
  suite_add_tcase(s, jit);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(failinj_suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

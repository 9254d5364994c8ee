/* The loop rewrites of the schedule (split, divide, pos, bound, and
 * reorder / parallelize / vectorize / unroll through the names they make):
 * kernels against the reference interpreter and the loop-IR interpreter
 * over formats, seeds and row patterns (kc_run, on 2 threads, assemble and
 * compute split); TACO's CPU schedules for SpMV, SpMM, SDDMM, TTV and
 * MTTKRP, with loops between a split's halves (i0, i1, j0, k, j1); one SpMV checked
 * against values computed by hand; the concrete notation they print; and
 * every refusal with its message. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorjit.h"
#include "util/kernel_check.h"
#include "util/tensors.h"

#define OK(call) ck_assert_msg((call) == TJ_OK, "%s", tj_last_error())

typedef struct LoopCase {
  const char *expr, *formats, *extents, *schedule;
} LoopCase;

#define SPMV "y(i) = A(i,j) * x(j)"
#define SPMM "C(i,k) = A(i,j) * B(j,k)"
#define SDDMM "A(i,j) = B(i,j) * C(i,k) * D(k,j)"
#define TTV "A(i,j) = B(i,j,k) * c(k)"
#define MTTKRP "A(i,j) = B(i,k,l) * C(k,j) * D(l,j)"
static const LoopCase cases[] = {
    /* TACO's SpMV: rows in blocks of 4, the blocks across threads */
    {SPMV, "A:ds", "i=37 j=29", "split(i, i0, i1, 4) reorder(i0, i1, j) parallelize(i0, static)"},
    {SPMV, "A:dd", "i=37 j=29", "split(i, i0, i1, 4) parallelize(i0, dynamic)"},
    /* the nonzeros of a row in blocks of 3 (positions) */
    {SPMV, "A:ds", "i=37 j=29", "pos(j, jp, A(i,j)) split(jp, j0, j1, 3)"},
    {SPMV, "A:ss", "i=37 j=29", "pos(j, jp, A(i,j)) divide(jp, j0, j1, 2)"},
    /* a pos-split row loop: the stored rows of DCSR in blocks, in parallel */
    {SPMV, "A:ss", "i=37 j=29", "pos(i, ip, A(i,j)) split(ip, i0, i1, 2) parallelize(i0, dynamic)"},
    {SPMV, "A:ss", "i=37 j=29", "pos(i, ip, A(i,j)) split(ip, i0, i1, 5) pos(j, jp, A(i,j)) "
                                "split(jp, j0, j1, 2) parallelize(i0, static)"},
    {SPMV, "A:ds:1,0", "i=37 j=29", "pos(i, ip, A(i,j)) split(ip, i0, i1, 3)"},
    {SPMV, "A:ds", "i=37 j=29", "divide(i, i0, i1, 3) parallelize(i0, static)"},
    {SPMV, "A:ds", "i=37 j=29", "divide(i, i0, i1, 50)"},  /* more parts than rows */
    {SPMV, "A:dd", "i=37 j=7", "bound(j, jb, 7, max_exact) split(i, i0, i1, 2)"},
    {SPMV, "A:dd", "i=37 j=29", "split(j, j0, j1, 8) vectorize(j1, 4)"},
    {SPMV, "A:dd", "i=37 j=29", "split(i, i0, i1, 3) unroll(i1, 2) split(j, j0, j1, 1)"},
    /* a sum's loop (the residual): split inside the where */
    {"y(i) = b(i) - A(i,j) * x(j)", "A:ds", "i=23 j=19", "pos(j, jp, A(i,j)) split(jp, j0, j1, 2)"},
    /* TACO's SpMM, with k inside the split of j's positions */
    {SPMM, "A:ds", "i=21 j=17 k=9", "split(i, i0, i1, 4) pos(j, jp, A(i,j)) "
                                    "split(jp, j0, j1, 2) reorder(i0, i1, j0, j1, k) "
                                    "parallelize(i0, static)"},
    {SPMM, "A:ds", "i=21 j=17 k=9", "split(i, i0, i1, 4) split(k, k0, k1, 4) parallelize(i0)"},
    /* TACO's SpMM and SDDMM orders: k between the halves of j's positions */
    {SPMM, "A:ds", "i=21 j=17 k=9", "split(i, i0, i1, 4) pos(j, jp, A(i,j)) "
                                    "split(jp, j0, j1, 2) reorder(i0, i1, j0, k, j1) "
                                    "parallelize(i0, static)"},
    {SDDMM, "B:ds", "i=19 j=17 k=6", "split(i, i0, i1, 4) pos(j, jp, B(i,j)) "
                                     "split(jp, j0, j1, 2) reorder(i0, i1, j0, k, j1) "
                                     "parallelize(i0, static)"},
    /* a dense loop over blocks outside the row loop, and divide */
    {SPMV, "A:dd", "i=37 j=29", "split(j, j0, j1, 8) reorder(j0, i, j1)"},
    {SPMV, "A:dd", "i=37 j=29", "divide(i, i0, i1, 3) reorder(i0, j, i1)"},
    /* TACO's SDDMM into a CSR output shaped like B: k between the halves of
       j's positions, B's positions fused with the rows, DCSR, a dense tail */
    {SDDMM, "A:ds B:ds", "i=19 j=17 k=6", "split(i, i0, i1, 4) pos(j, jpos, B(i,j)) "
                                          "split(jpos, jpos0, jpos1, 2) "
                                          "reorder(i0, i1, jpos0, k, jpos1) parallelize(i0) "
                                          "vectorize(jpos1, 4)"},
    {SDDMM, "A:ds B:ds", "i=19 j=17 k=6", "split(i, i0, i1, 4) pos(j, jpos, B(i,j)) "
                                          "split(jpos, jpos0, jpos1, 2) "
                                          "reorder(i0, i1, jpos0, k, jpos1) "
                                          "parallelize(i0, dynamic)"},
    {SDDMM, "A:ds B:ds", "i=19 j=17 k=6", "reorder(i, j, k) fuse(i, j, f) pos(f, fp, B(i,j)) "
                                          "split(fp, f0, f1, 4) parallelize(f0, static)"},
    {SDDMM, "A:ss B:ss", "i=19 j=17 k=6", "pos(i, ip, B(i,j)) split(ip, i0, i1, 3) "
                                          "pos(j, jpos, B(i,j)) split(jpos, jpos0, jpos1, 2) "
                                          "reorder(i0, i1, jpos0, k, jpos1) parallelize(i0)"},
    {SDDMM, "A:sd B:sd", "i=19 j=17 k=6", "pos(i, ip, B(i,j)) split(ip, i0, i1, 3) "
                                          "split(j, j0, j1, 4) reorder(i0, i1, j0, k, j1)"},
    {"A(i,j) = -B(i,j) * 2 * C(i,j)", "A:ds B:ds", "i=19 j=17",
     "reorder(i, j) fuse(i, j, f) pos(f, fp, B(i,j)) split(fp, f0, f1, 3) parallelize(f0)"},
    /* TACO's SDDMM, into a sparse and a dense output */
    {SDDMM, "A:ds B:ds", "i=19 j=17 k=6", "split(i, i0, i1, 4) pos(j, jp, B(i,j)) "
                                          "split(jp, j0, j1, 2) reorder(i0, i1, j0, j1, k) "
                                          "parallelize(i0)"},
    {SDDMM, "B:ds", "i=19 j=17 k=6", "split(i, i0, i1, 4) pos(j, jp, B(i,j)) "
                                     "split(jp, j0, j1, 2) parallelize(i0, static)"},
    /* TTV: rows in blocks, the fibers of a row by positions */
    {TTV, "B:dss", "i=9 j=8 k=7", "split(i, i0, i1, 2) pos(j, jp, B(i,j,k)) split(jp, j0, j1, 3) "
                                  "parallelize(i0, static)"},
    {TTV, "A:ds B:dss", "i=9 j=8 k=7", "pos(k, kp, B(i,j,k)) split(kp, k0, k1, 2)"},
    {TTV, "B:sss", "i=9 j=8 k=7", "pos(i, ip, B(i,j,k)) split(ip, i0, i1, 2) parallelize(i0)"},
    /* TACO's MTTKRP */
    {MTTKRP, "B:dss", "i=8 j=5 k=7 l=6", "split(i, i1, i2, 2) reorder(i1, i2, k, l, j) "
                                         "parallelize(i1, static)"},
    {MTTKRP, "B:sss", "i=8 j=5 k=7 l=6", "pos(l, lp, B(i,k,l)) split(lp, l0, l1, 2)"},
    /* sparse outputs built in row chunks, with rewritten loops inside */
    {"A(i,j) = B(i,j) * 2", "A:ds B:ds", "i=31 j=23", "pos(j, jp, B(i,j)) split(jp, j0, j1, 3)"},
    {"A(i,j) = B(i,j) + C(i,j)", "A:ds B:ds C:ds", "i=31 j=23", "split(i, i0, i1, 5)"},
    /* parallelize of an inner loop over a dense output's index */
    {"A(i,j) = B(i,j) * C(i,j)", "", "i=23 j=37", "parallelize(j, static)"},
    {"A(i,j) = B(i,k) * C(k,j)", "B:ds", "i=19 j=23 k=17", "reorder(i,k,j) parallelize(j, dynamic)"},
    {"A(i,j) = B(i,j) * C(i,j)", "B:ds", "i=23 j=37", "pos(j, jp, B(i,j)) split(jp, j0, j1, 4) "
                                                      "parallelize(j0)"},
    {TTV, "B:dss", "i=9 j=8 k=7", "parallelize(j, static)"},
    /* an outermost reduction into a dense output: per-thread partials */
    {"y(j) = A(i,j) * x(i)", "A:ds", "i=37 j=29", "parallelize(i, partials)"},
    {"y(j) = A(i,j) * x(i)", "A:ds", "i=37 j=29", "split(i, i0, i1, 4) parallelize(i0, partials)"},
    /* an inner reduction loop: per-thread copies of the output, folded after */
    {SPMV, "A:ds", "i=37 j=29", "parallelize(j, partials)"},
    {SPMV, "A:dd", "i=37 j=29", "split(j, j0, j1, 4) parallelize(j0, static, partials)"},
    {SPMV, "A:ds", "i=37 j=29", "pos(j, jp, A(i,j)) split(jp, j0, j1, 2) "
                                "parallelize(j0, dynamic, partials)"},
    {"A(i,j) = B(i,k) * C(k,j)", "B:ds", "i=9 j=8 k=7", "reorder(i, k, j) parallelize(k, partials)"},
    {MTTKRP, "B:dss", "i=8 j=5 k=7 l=6", "parallelize(k, partials)"},
    /* a reduction loop scattering into a shared dense output: atomic updates */
    {"y(j) = A(i,j) * x(i)", "A:ds", "i=37 j=29", "parallelize(i, atomics)"},
    {SPMV, "A:ds:1,0", "i=37 j=29", "parallelize(j, dynamic, atomics)"},
    {SPMV, "A:ds:1,0", "i=37 j=29", "split(j, j0, j1, 4) parallelize(j0, static, atomics)"},
    {"A(i,j) = B(i,k) * C(k,j)", "B:ds", "i=19 j=23 k=17", "reorder(i,k,j) parallelize(k, atomics)"},
    {"A(i,j) = B(i,k) * C(k,j)", "B:ds:1,0", "i=19 j=23 k=17", "reorder(k,i,j) parallelize(k, atomics)"},
    /* fuse: two dense loops as one; TACO's nonzero-balanced SpMV (the row loop
       and the row's positions fused, split by positions, rows shared between
       blocks: atomics); SpMM and TTV over fused positions */
    {"A(i,j) = B(i,j) * C(i,j) + B(i,j)", "", "i=23 j=17",
     "fuse(i, j, f) split(f, f0, f1, 16) parallelize(f0, static)"},
    {SPMV, "A:dd", "i=37 j=29", "fuse(i, j, f) parallelize(f, atomics)"},
    {"y(j) = A(i,j) * x(i)", "", "i=37 j=29", "reorder(i, j) fuse(i, j, f)"}, /* no row chunks */
    {SPMV, "A:ds", "i=37 j=29", "fuse(i, j, f) pos(f, fp, A(i,j)) split(fp, f0, f1, 8) "
                                "parallelize(f0, static, atomics)"},
    {SPMV, "A:ds", "i=37 j=29", "fuse(i, j, f) pos(f, fp, A(i,j)) parallelize(fp, atomics)"},
    {SPMV, "A:ds", "i=37 j=29", "fuse(i, j, f) pos(f, fp, A(i,j)) split(fp, f0, f1, 5)"},
    {SPMM, "A:ds", "i=21 j=17 k=9", "reorder(i, j, k) fuse(i, j, f) pos(f, fp, A(i,j)) "
                                    "split(fp, f0, f1, 4) parallelize(f0, atomics)"},
    {TTV, "B:dss", "i=9 j=8 k=7", "fuse(i, j, f) pos(f, fp, B(i,j,k)) split(fp, f0, f1, 3) "
                                  "parallelize(f0, static)"},
    /* fused positions under a compressed row level: DCSR SpMV, CSF TTV */
    {SPMV, "A:ss", "i=37 j=29", "fuse(i, j, f) pos(f, fp, A(i,j)) split(fp, f0, f1, 4) "
                                "parallelize(f0, atomics)"},
    {TTV, "B:sss", "i=9 j=8 k=7", "fuse(i, j, f) pos(f, fp, B(i,j,k)) split(fp, f0, f1, 3) "
                                  "parallelize(f0, static)"},
    {"y(i) = B(i,j,k) * c(k)", "B:sss", "i=9 j=8 k=7",
     "fuse(i, j, f) pos(f, fp, B(i,j,k)) divide(fp, f0, f1, 3) parallelize(f0, atomics)"},
    /* precompute of a subexpression over {j}: a dense row workspace, read
       where the subexpression was (reset on read, or by its producer's loops) */
    {"y(i) = (B(i,j) + C(i,j)) * x(j)", "B:ds C:ds", "i=23 j=19",
     "precompute(B(i,j) + C(i,j), {j}, w)"},
    {"y(i) = (B(i,j) + C(i,j)) * x(j)", "B:ds C:ss x:s", "i=23 j=19",
     "precompute(B(i,j) + C(i,j), {j}, w)"},
    {"A(i,j) = (B(i,j) - C(i,j)) * x(j) + B(i,j)", "B:ds C:ds", "i=23 j=19",
     "precompute(B(i,j) - C(i,j), {j}, w)"},
    {"y(j) = (B(i,j) + C(i,j)) * x(i)", "B:ds C:ds", "i=23 j=19",
     "precompute(B(i,j) + C(i,j), {j}, w)"},
    {"A(i,j) = B(i,k,l) * D(l,j) * C(k,j)", "B:sss", "i=8 j=5 k=7 l=6",
     "precompute(B(i,k,l) * D(l,j), {j}, w)"},
    {MTTKRP, "B:dss", "i=8 j=5 k=7 l=6", "precompute(B(i,k,l) * C(k,j), {j}, w)"},
    {"A(i,j) = (B(i,j) + C(i,j)) * D(i,j)", "A:ds B:ds C:ds D:ds", "i=23 j=19",
     "precompute(B(i,j) + C(i,j), {j}, w)"},   /* a sparse output: D's entries */
    /* the workspace inside a sum's loop (the residual, GEMM plus a matrix,
       two sums), and under the parallel row loop (a row per thread) */
    {"y(i) = b(i) - (B(i,j) + C(i,j)) * x(j)", "B:ds C:ds", "i=23 j=19",
     "precompute(B(i,j) + C(i,j), {j}, w)"},
    {"y(i) = b(i) - (B(i,j) + C(i,j)) * x(j)", "B:ds C:ss x:s", "i=23 j=19",
     "precompute(B(i,j) + C(i,j), {j}, w) parallelize(i, dynamic)"},
    {"A(i,j) = (B(i,k) + E(i,k)) * C(k,j) + D(i,j)", "", "i=9 j=8 k=7",
     "precompute(B(i,k) + E(i,k), {k}, w)"},
    {"y(i) = A(i,k) * z(k) - (B(i,j) + C(i,j)) * x(j)", "A:ds B:ds C:ss", "i=23 j=19 k=11",
     "precompute(B(i,j) + C(i,j), {j}, w) parallelize(i, static)"},
    {"A(i,j) = B(i,j) - (E(i,k) + F(i,k)) * C(k,j)", "A:ds B:ds", "i=9 j=8 k=7",
     "precompute(E(i,k) + F(i,k), {k}, w)"},
    /* matrix (and order-3) workspaces, GEMM plus a matrix through one */
    {"A(i,j) = (B(i,j) + C(i,j)) * x(j)", "B:ds C:ss", "i=23 j=19",
     "precompute(B(i,j) + C(i,j), {i, j}, w)"},
    {"A(i,j) = B(i,k,l) * D(l,j) * C(k,j)", "B:sss", "i=8 j=5 k=7 l=6",
     "precompute(B(i,k,l) * D(l,j), {k, j}, w) parallelize(i, dynamic)"},
    {"A(i,j) = B(i,k,l) * D(l,j) * C(k,j)", "B:dss", "i=8 j=5 k=7 l=6",
     "precompute(B(i,k,l) * D(l,j), {i, k, j}, w)"},
    {"A(i,j) = B(i,k) * C(k,j) + D(i,j)", "B:ds", "i=9 j=8 k=7",
     "precompute(B(i,k) * C(k,j), {i, j}, w)"},
    {"A(i,j) = B(i,k) * C(k,j) + D(i,j)", "B:ds C:ds", "i=9 j=8 k=7",
     "precompute(B(i,k) * C(k,j), {j}, w) parallelize(i, dynamic)"},
    {"A(i,j) = (B(i,k) * C(k,j)) * D(i,j)", "B:ds D:ds", "i=9 j=8 k=7",
     "precompute(B(i,k) * C(k,j), {i, j}, w)"},
    /* the loops of a workspace split, bound, pos-split (the producer's own),
       unrolled and vectorized */
    {"A(i,j) = (B(i,j) + C(i,j)) * x(j)", "B:dd C:dd", "i=23 j=19",
     "precompute(B(i,j) + C(i,j), {j}, w) split(j, j0, j1, 4) vectorize(j1, 4)"},
    {"y(i) = (B(i,j) + C(i,j)) * x(j)", "B:dd C:dd", "i=23 j=19",
     "precompute(B(i,j) + C(i,j), {j}, w) divide(j, j0, j1, 3) unroll(j1, 2)"},
    {"A(i,j) = B(i,k,l) * D(l,j) * C(k,j)", "B:sss", "i=8 j=5 k=7 l=6",
     "precompute(B(i,k,l) * D(l,j), {j}, w) pos(l, lp, B(i,k,l)) split(lp, l0, l1, 2) "
     "bound(j, jb, 5, max_exact)"},
    {"A(i,j) = B(i,k) * C(k,j) + D(i,j)", "B:ds", "i=9 j=8 k=7",
     "precompute(B(i,k) * C(k,j), {i, j}, w) split(i, i0, i1, 4) split(j, j0, j1, 2)"},
    /* dense GEMM, both output loops split */
    {"A(i,j) = B(i,k) * C(k,j)", "", "i=19 j=23 k=17",
     "split(i, i0, i1, 8) split(j, j0, j1, 4) reorder(i0, i1, j0, j1, k)"},
};
enum { NCASES = sizeof cases / sizeof cases[0] };
static const KcPattern patterns[] = {KC_RANDOM, KC_EMPTY_ROWS, KC_ONE_ROW};

START_TEST(rewrites_against_the_reference) {
  const LoopCase *lc = &cases[_i];
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_options two = tj_options_default();
  two.nthreads = 2;
  for (int p = 0; p < 3; p++)
    for (uint64_t seed = 1; seed <= 3; seed++) {
      KcCase c = {.expr = lc->expr, .formats = lc->formats, .extents = lc->extents,
                  .density = 0.3, .pattern = patterns[p], .seed = seed, .flags = KC_SPLIT,
                  .opts = &two, .schedule = lc->schedule};
      KcOutcome o;
      ck_assert_msg(kc_run(cx, &c, &o) == KC_PASS, "[%s] %s", lc->schedule, o.msg);
    }
  tj_context_free(cx);
}
END_TEST

static tj_tensor *matrix(const char *name, const char *fmt, int64_t n, int64_t m,
                         const double *v) {
  tj_format f;
  OK(tj_format_parse(fmt, &f));
  int64_t dims[2] = {n, m};
  tj_tensor *t;
  OK(tj_tensor_new(name, TJ_F64, 2, dims, &f, &t));
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < m; j++)
      if (v[i * m + j] != 0) OK(tj_tensor_insert(t, (int64_t[]){i, j}, v[i * m + j]));
  OK(tj_tensor_pack(t));
  return t;
}

static tj_tensor *vector(const char *name, int64_t n, const double *v) {
  int64_t dims[1] = {n};
  tj_tensor *t;
  OK(tj_tensor_new(name, TJ_F64, 1, dims, NULL, &t));
  for (int64_t i = 0; i < n; i++) OK(tj_tensor_insert(t, (int64_t[]){i}, v[i]));
  OK(tj_tensor_pack(t));
  return t;
}

/* SpMV on a 5x4 matrix with an empty row, by hand:
 *   A = [1 0 2 0; 0 0 0 0; 0 3 0 4; 5 6 7 8; 0 0 0 9], x = (1, 2, 3, 4)
 *   y = (1+6, 0, 6+16, 5+12+21+32, 36) = (7, 0, 22, 70, 36)
 * through each rewrite of the row and column loops, on 2 threads. */
START_TEST(spmv_by_hand) {
  static const double a[20] = {1, 0, 2, 0, 0, 0, 0, 0, 0, 3, 0, 4, 5, 6, 7, 8, 0, 0, 0, 9};
  static const double xv[4] = {1, 2, 3, 4}, want[5] = {7, 0, 22, 70, 36};
  static const struct { const char *fmt, *sched; } runs[] = {
      {"ds", "split(i, i0, i1, 2) reorder(i0, i1, j) parallelize(i0, static)"},
      {"ds", "pos(j, jp, A(i,j)) split(jp, j0, j1, 3)"},
      {"ss", "pos(i, ip, A(i,j)) split(ip, i0, i1, 1) parallelize(i0, dynamic)"},
      {"ss", "pos(i, ip, A(i,j)) divide(ip, i0, i1, 2) pos(j, jp, A(i,j)) divide(jp, j0, j1, 3)"},
      {"dd", "bound(j, jb, 4, max_exact) divide(i, i0, i1, 4)"},
      {"ds", "fuse(i, j, f) pos(f, fp, A(i,j)) split(fp, f0, f1, 3) "
             "parallelize(f0, static, atomics)"},
      {"ds", "fuse(i, j, f) pos(f, fp, A(i,j)) parallelize(fp, dynamic, atomics)"},
      {"dd", "fuse(i, j, f) split(f, f0, f1, 3) parallelize(f0, atomics)"},
      /* DCSR: the rows are the compressed row level's positions (rows 0, 2,
         3, 4; row 1 is not stored), i its coordinate there */
      {"ss", "fuse(i, j, f) pos(f, fp, A(i,j))"},
      {"ss", "fuse(i, j, f) pos(f, fp, A(i,j)) split(fp, f0, f1, 3) "
             "parallelize(f0, static, atomics)"},
      {"ss", "fuse(i, j, f) pos(f, fp, A(i,j)) divide(fp, f0, f1, 4) "
             "parallelize(f0, dynamic, atomics)"},
  };
  tj_options two = tj_options_default();
  two.nthreads = 2;
  for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
    tj_context *cx;
    OK(tj_context_new(&cx));
    tj_tensor *A = matrix("A", runs[r].fmt, 5, 4, a), *x = vector("x", 4, xv);
    tj_tensor *y = vector("y", 5, (double[5]){0});
    tj_kernel *k;
    OK(tj_compile(cx, SPMV, (tj_tensor *[]){y, A, x}, 3, runs[r].sched, &two, &k));
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    for (int64_t i = 0; i < 5; i++) {
      double v;
      OK(tj_tensor_get(y, (int64_t[]){i}, &v));
      ck_assert_msg(v == want[i], "[%s] y(%lld) = %g, want %g", runs[r].sched, (long long)i, v,
                    want[i]);
    }
    tj_tensor_free(A);
    tj_tensor_free(x);
    tj_tensor_free(y);
    tj_context_free(cx);
  }
}
END_TEST

/* The transposed product with per-thread partials, by hand (A as above,
 * x = (1, 2, 3, 4, 5)): y(j) = sum_i A(i,j) x(i) = (1+20, 9+24, 2+28,
 * 12+32+45) = (21, 33, 30, 89). */
START_TEST(partials_by_hand) {
  static const double a[20] = {1, 0, 2, 0, 0, 0, 0, 0, 0, 3, 0, 4, 5, 6, 7, 8, 0, 0, 0, 9};
  static const double xv[5] = {1, 2, 3, 4, 5}, want[4] = {21, 33, 30, 89};
  tj_options two = tj_options_default();
  two.nthreads = 2;
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_tensor *A = matrix("A", "ds", 5, 4, a), *x = vector("x", 5, xv);
  tj_tensor *y = vector("y", 4, (double[4]){0});
  tj_kernel *k;
  OK(tj_compile(cx, "y(j) = A(i,j) * x(i)", (tj_tensor *[]){y, A, x}, 3,
                "split(i, i0, i1, 2) parallelize(i0, partials)", &two, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  for (int64_t j = 0; j < 4; j++) {
    double v;
    OK(tj_tensor_get(y, (int64_t[]){j}, &v));
    ck_assert_msg(v == want[j], "y(%lld) = %g, want %g", (long long)j, v, want[j]);
  }
  tj_tensor_free(A);
  tj_tensor_free(x);
  tj_tensor_free(y);
  tj_context_free(cx);
}
END_TEST

/* Per-thread partials of an inner reduction loop, by hand: A (5 x 4) as
 * above, x = (1, 2, 3, 4), the columns across 2 threads:
 *   y = A x                 = (1+6, 0, 6+16, 5+12+21+32, 36) = (7, 0, 22, 70, 36)
 *   y = max_j A(i,j) x(j)   = (6, 0, 16, 32, 36) (every entry of a dense A)
 * on both backends, run twice (the copies start from the identity again). */
START_TEST(inner_partials_by_hand) {
  static const double a[20] = {1, 0, 2, 0, 0, 0, 0, 0, 0, 3, 0, 4, 5, 6, 7, 8, 0, 0, 0, 9};
  static const double xv[4] = {1, 2, 3, 4};
  static const double sum[5] = {7, 0, 22, 70, 36}, max[5] = {6, 0, 16, 32, 36};
  static const struct { const char *expr, *fa, *sched; const double *want; } runs[] = {
      {SPMV, "ds", "parallelize(j, partials)", sum},
      {SPMV, "dd", "split(j, j0, j1, 2) parallelize(j0, static, partials)", sum},
      {"y(i) = reduce(max, j, A(i,j) * x(j))", "dd", "parallelize(j, dynamic, partials)", max},
  };
  for (int r = 0; r < 6; r++) {
    tj_options two = tj_options_default();
    two.nthreads = 2;
    if (r >= 3) two.backend = TJ_BACKEND_C;
    tj_context *cx;
    OK(tj_context_new(&cx));
    tj_tensor *A = matrix("A", runs[r % 3].fa, 5, 4, a), *x = vector("x", 4, xv);
    tj_tensor *y = vector("y", 5, (double[5]){0});
    tj_kernel *k;
    OK(tj_compile(cx, runs[r % 3].expr, (tj_tensor *[]){y, A, x}, 3, runs[r % 3].sched, &two,
                  &k));
    for (int rep = 0; rep < 2; rep++) {
      OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
      for (int64_t i = 0; i < 5; i++) {
        double v;
        OK(tj_tensor_get(y, (int64_t[]){i}, &v));
        ck_assert_msg(v == runs[r % 3].want[i], "[%s %s] y(%lld) = %g, want %g",
                      runs[r % 3].expr, runs[r % 3].sched, (long long)i, v, runs[r % 3].want[i]);
      }
    }
    tj_tensor_free(A);
    tj_tensor_free(x);
    tj_tensor_free(y);
    tj_context_free(cx);
  }
}
END_TEST

/* Atomic updates with no atomicrmw, by a compare-and-swap loop, by hand:
 * A = [1 0 2 0; 0 0 0 0; 0 3 0 4; 5 6 7 8; 0 0 0 9] in CSC, x = (1, 2, 3, 4),
 * the columns across 2 threads, over the stored v_ij = A(i,j) x(j) (an
 * empty row: the identity):
 *   reduce(*, j, v)  = (1*6, 1, 6*16, 5*12*21*32, 36) = (6, 1, 96, 40320, 36)
 *   reduce(g, j, v), g(x, y) = x*y + x + y = (1+x)(1+y) - 1, identity 0:
 *     prod (1 + v) - 1 = (2*7 - 1, 0, 7*17 - 1, 6*13*22*33 - 1, 37 - 1)
 *                      = (13, 0, 118, 56627, 36) */
START_TEST(atomics_cas_by_hand) {
  static const double a[20] = {1, 0, 2, 0, 0, 0, 0, 0, 0, 3, 0, 4, 5, 6, 7, 8, 0, 0, 0, 9};
  static const double xv[4] = {1, 2, 3, 4};
  static const struct { const char *expr; double want[5]; } runs[] = {
      {"y(i) = reduce(*, j, A(i,j) * x(j))", {6, 1, 96, 40320, 36}},
      {"y(i) = reduce(g, j, A(i,j) * x(j))", {13, 0, 118, 56627, 36}},
  };
  tj_options two = tj_options_default();
  two.nthreads = 2;
  two.defs = "g(x, y) = x * y + x + y identity 0 commutative associative";
  for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
    tj_context *cx;
    OK(tj_context_new(&cx));
    tj_tensor *A = matrix("A", "ds:1,0", 5, 4, a), *x = vector("x", 4, xv);
    tj_tensor *y = vector("y", 5, (double[5]){0});
    tj_kernel *k;
    OK(tj_compile(cx, runs[r].expr, (tj_tensor *[]){y, A, x}, 3, "parallelize(j, atomics)",
                  &two, &k));
    for (int rep = 0; rep < 3; rep++) {
      OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
      for (int64_t i = 0; i < 5; i++) {
        double v;
        OK(tj_tensor_get(y, (int64_t[]){i}, &v));
        ck_assert_msg(v == runs[r].want[i], "[%s] y(%lld) = %g, want %g", runs[r].expr,
                      (long long)i, v, runs[r].want[i]);
      }
    }
    char *c = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&c, &len);
    OK(tj_kernel_print(k, TJ_STAGE_COMPUTE, f));
    fclose(f);
    ck_assert_msg(strstr(c, "double old = y_vals[") && strstr(c, "/* atomic */ y_vals["),
                  "[%s] %s", runs[r].expr, c);
    free(c);
    f = open_memstream(&c, &len);
    OK(tj_kernel_print(k, TJ_STAGE_LLVM, f));
    fclose(f);
    ck_assert_msg(strstr(c, "cmpxchg"), "[%s] %s", runs[r].expr, c);
    free(c);
    tj_tensor_free(A);
    tj_tensor_free(x);
    tj_tensor_free(y);
    tj_context_free(cx);
  }
}
END_TEST

/* The same product with atomic updates, by hand: CSR walked by rows
 * (loop i, a reduction) and A's transpose in CSC (loop over its columns),
 * the rows or columns across 2 threads updating y atomically; integer
 * values, so any order of the updates gives these sums exactly. */
START_TEST(atomics_by_hand) {
  static const double a[20] = {1, 0, 2, 0, 0, 0, 0, 0, 0, 3, 0, 4, 5, 6, 7, 8, 0, 0, 0, 9};
  static const double xv[5] = {1, 2, 3, 4, 5}, want[4] = {21, 33, 30, 89};
  static const struct { const char *expr, *fmt, *sched; } runs[] = {
      {"y(j) = A(i,j) * x(i)", "ds", "parallelize(i, atomics)"},
      {"y(j) = A(i,j) * x(i)", "ds", "split(i, i0, i1, 2) parallelize(i0, dynamic, atomics)"},
      {"y(j) = A(i,j) * x(i)", "ds:1,0", "reorder(i, j) parallelize(i, atomics)"},
  };
  tj_options two = tj_options_default();
  two.nthreads = 2;
  for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
    tj_context *cx;
    OK(tj_context_new(&cx));
    tj_tensor *A = matrix("A", runs[r].fmt, 5, 4, a), *x = vector("x", 5, xv);
    tj_tensor *y = vector("y", 4, (double[4]){0});
    tj_kernel *k;
    OK(tj_compile(cx, runs[r].expr, (tj_tensor *[]){y, A, x}, 3, runs[r].sched, &two, &k));
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    for (int64_t j = 0; j < 4; j++) {
      double v;
      OK(tj_tensor_get(y, (int64_t[]){j}, &v));
      ck_assert_msg(v == want[j], "[%s] y(%lld) = %g, want %g", runs[r].sched, (long long)j, v,
                    want[j]);
    }
    char *c = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&c, &len);
    OK(tj_kernel_print(k, TJ_STAGE_COMPUTE, f));
    fclose(f);
    ck_assert_msg(strstr(c, "/* atomic */ y_vals["), "[%s] %s", runs[r].sched, c);
    free(c);
    tj_tensor_free(A);
    tj_tensor_free(x);
    tj_tensor_free(y);
    tj_context_free(cx);
  }
  /* max by columns of CSC (atomicrmw fmax): y(i) = max_j A(i,j) x(j) over
   * the stored entries, x = (1, 2, 3, 4): (6, -inf for the empty row, 16,
   * 32, 36) */
  static const double xm[4] = {1, 2, 3, 4}, wmax[5] = {6, -INFINITY, 16, 32, 36};
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_tensor *A = matrix("A", "ds:1,0", 5, 4, a), *x = vector("x", 4, xm);
  tj_tensor *y = vector("y", 5, (double[5]){0});
  tj_kernel *k;
  OK(tj_compile(cx, "y(i) = reduce(max, j, A(i,j) * x(j))", (tj_tensor *[]){y, A, x}, 3,
                "parallelize(j, atomics)", &two, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  for (int64_t i = 0; i < 5; i++) {
    double v;
    OK(tj_tensor_get(y, (int64_t[]){i}, &v));
    ck_assert_msg(v == wmax[i], "max: y(%lld) = %g, want %g", (long long)i, v, wmax[i]);
  }
  tj_tensor_free(A);
  tj_tensor_free(x);
  tj_tensor_free(y);
  tj_context_free(cx);
}
END_TEST

/* A tensor of format fmt holding the nonzeros of v (row-major, dims d). */
static tj_tensor *tensor_of(const char *name, const char *fmt, int order, const int64_t *d,
                            const double *v) {
  return tu_tensor(name, fmt, order, d, v);
}

/* n values, a third of them nonzero when sparse, small integers (so every
 * order of summation gives the same double). */
static double *values_of(int64_t n, unsigned seed, bool sparse) {
  double *v = calloc((size_t)n, sizeof *v);
  for (int64_t q = 0; q < n; q++) {
    seed = seed * 1664525u + 1013904223u;
    if (!sparse || (seed >> 20) % 3 == 0) v[q] = (double)((seed >> 8) % 9) - 4;
  }
  return v;
}

/* TACO's SDDMM schedule into a CSR output, by hand, on 2 threads (its
 * pattern is B's: an entry where C D is 0 stays, as an explicit 0):
 *   B = [1 0 2 0; 0 0 0 0; 0 3 0 4; 5 6 7 8; 0 0 0 9]
 *   C = [1 2; 3 4; 0 1; 2 0; 1 1], D = [1 0 2 1; 0 1 1 2]
 *   C D = [1 2 4 5; 3 4 10 11; 0 1 1 2; 2 0 4 2; 1 1 3 3]
 *   A = B .* (C D) = [1 0 8 0; 0 0 0 0; 0 3 0 8; 10 0 28 16; 0 0 0 27]
 * with B's 9 entries (A(3,1) = 6 * 0 among them), through assemble and
 * compute run apart and through evaluate, twice (the values are reset). */
START_TEST(sddmm_into_csr_by_hand) {
  static const double b[20] = {1, 0, 2, 0, 0, 0, 0, 0, 0, 3, 0, 4, 5, 6, 7, 8, 0, 0, 0, 9};
  static const double c[10] = {1, 2, 3, 4, 0, 1, 2, 0, 1, 1}, d[8] = {1, 0, 2, 1, 0, 1, 1, 2};
  static const double want[20] = {1, 0, 8, 0, 0, 0, 0, 0, 0, 3, 0, 8, 10, 0, 28, 16, 0, 0, 0, 27};
  static const int64_t want_crd[9][2] = {{0, 0}, {0, 2}, {2, 1}, {2, 3}, {3, 0},
                                         {3, 1}, {3, 2}, {3, 3}, {4, 3}};
  static const char *scheds[] = {
      "split(i, i0, i1, 16) pos(j, jpos, B(i,j)) split(jpos, jpos0, jpos1, 8) "
      "reorder(i0, i1, jpos0, k, jpos1) parallelize(i0, static) vectorize(jpos1, 8)",
      "split(i, i0, i1, 2) pos(j, jpos, B(i,j)) split(jpos, jpos0, jpos1, 2) "
      "reorder(i0, i1, jpos0, k, jpos1) parallelize(i0, dynamic)",
      "reorder(i, j, k) fuse(i, j, f) pos(f, fp, B(i,j)) split(fp, f0, f1, 2) "
      "parallelize(f0, static)",
  };
  tj_options two = tj_options_default();
  two.nthreads = 2;
  for (size_t r = 0; r < sizeof scheds / sizeof scheds[0]; r++)
    for (int split = 0; split < 2; split++) {
      tj_context *cx;
      OK(tj_context_new(&cx));
      tj_tensor *A = matrix("A", "ds", 5, 4, (double[20]){0}), *B = matrix("B", "ds", 5, 4, b);
      tj_tensor *C = matrix("C", "dd", 5, 2, c), *D = matrix("D", "dd", 2, 4, d);
      tj_kernel *k;
      OK(tj_compile(cx, SDDMM, (tj_tensor *[]){A, B, C, D}, 4, scheds[r], &two, &k));
      for (int rep = 0; rep < 2; rep++) {
        tu_run(k, split);
        int64_t *crd, nnz;
        double *v;
        OK(tj_tensor_unpack(A, &crd, &v, &nnz));
        ck_assert_msg(nnz == 9, "[%s] %lld entries, want B's 9", scheds[r], (long long)nnz);
        for (int q = 0; q < 9; q++) {
          int64_t i = crd[2 * q], j = crd[2 * q + 1];
          ck_assert_msg(i == want_crd[q][0] && j == want_crd[q][1] && v[q] == want[i * 4 + j],
                        "[%s] entry %d: A(%lld,%lld) = %g, want A(%lld,%lld) = %g", scheds[r],
                        q, (long long)i, (long long)j, v[q], (long long)want_crd[q][0],
                        (long long)want_crd[q][1],
                        want[want_crd[q][0] * 4 + want_crd[q][1]]);
        }
        free(crd);
        free(v);
      }
      tj_tensor *all[] = {A, B, C, D};
      for (int t = 0; t < 4; t++) tj_tensor_free(all[t]);
      tj_context_free(cx);
    }
}
END_TEST

/* TACO's CPU schedules for its scheduling examples, as written there
 * (split 32 / 4 / chunk sizes scaled to these small operands), on 2
 * threads; values against plain loops over the dense arrays the operands
 * were built from:
 *   SpMV   fuse(i,j,f) pos(f,fpos,A(i,j)) split(fpos,chunk,fpos2,8) parallelize(chunk, atomics)
 *          and split(i,i0,i1,4) reorder(i0,i1,j) parallelize(i0)
 *   SpMM   split(i,i0,i1,4) pos(j,jpos,A(i,j)) split(jpos,jpos0,jpos1,4)
 *          reorder(i0,i1,jpos0,k,jpos1) parallelize(i0) vectorize(jpos1,4)
 *   SDDMM  the same over B's positions (a dense output, and a CSR one shaped like B)
 *   TTV    fuse(i,j,f) pos(f,fpos,B(i,j,k)) split(fpos,chunk,fpos2,4) parallelize(chunk)
 *   MTTKRP split(i,i1,i2,4) reorder(i1,i2,k,l,j) parallelize(i1) */
START_TEST(taco_schedules_by_plain_loops) {
  enum { I = 41, J = 37, K = 9, L = 7 };
  tj_options two = tj_options_default();
  two.nthreads = 2;
  double *A = values_of(I * J, 1, true), *x = values_of(J, 2, false);
  double *Bd = values_of(J * K, 3, false), *C = values_of(I * K, 4, false);
  double *D = values_of(K * J, 5, false), *B3 = values_of(I * J * K, 6, true);
  double *c = values_of(K, 7, false), *M3 = values_of(I * K * L, 8, true);
  double *Cm = values_of(K * J, 9, false), *Dm = values_of(L * J, 10, false);
  double *want = calloc(I * J, sizeof *want);
  static const struct { int kind; const char *expr, *fmt, *sched; } runs[] = {
      {0, SPMV, "ds", "fuse(i, j, f) pos(f, fpos, A(i,j)) split(fpos, chunk, fpos2, 8) "
                      "parallelize(chunk, static, atomics)"},
      {0, SPMV, "ds", "split(i, i0, i1, 4) reorder(i0, i1, j) parallelize(i0, static)"},
      {1, SPMM, "ds", "split(i, i0, i1, 4) pos(j, jpos, A(i,j)) split(jpos, jpos0, jpos1, 4) "
                      "reorder(i0, i1, jpos0, k, jpos1) parallelize(i0, static) "
                      "vectorize(jpos1, 4)"},
      {2, SDDMM, "ds", "split(i, i0, i1, 4) pos(j, jpos, B(i,j)) split(jpos, jpos0, jpos1, 4) "
                       "reorder(i0, i1, jpos0, k, jpos1) parallelize(i0, static)"},
      {5, SDDMM, "ds", "split(i, i0, i1, 4) pos(j, jpos, B(i,j)) split(jpos, jpos0, jpos1, 4) "
                       "reorder(i0, i1, jpos0, k, jpos1) parallelize(i0, static) "
                       "vectorize(jpos1, 4)"},
      {3, TTV, "dss", "fuse(i, j, f) pos(f, fpos, B(i,j,k)) split(fpos, chunk, fpos2, 4) "
                      "parallelize(chunk, static)"},
      {4, MTTKRP, "dss", "split(i, i1, i2, 4) reorder(i1, i2, k, l, j) parallelize(i1, static)"},
  };
  for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
    int kind = runs[r].kind, out_csr = kind == 5;   /* 5: SDDMM into CSR */
    if (out_csr) kind = 2;
    tj_context *cx;
    OK(tj_context_new(&cx));
    tj_tensor *ops[4];
    int64_t n1 = kind == 1 ? K : J;            /* the output's columns (SpMV: none) */
    int64_t od[2] = {I, n1}, dAJ[2] = {I, J}, dJK[2] = {J, K}, dIK[2] = {I, K}, dKJ[2] = {K, J};
    int64_t d3[3] = {I, J, K}, m3[3] = {I, K, L}, dLJ[2] = {L, J}, dJ = J, dK = K;
    double *zero = calloc(I * (J > K ? J : K), sizeof *zero);
    ops[0] = kind == 0 ? tensor_of("y", "d", 1, od, zero) : tensor_of(kind == 1 ? "C" : "A",
                                                                       out_csr ? "ds" : "dd",
                                                                       2, od, zero);
    int nops = 3;
    switch (kind) {
    case 0: ops[1] = tensor_of("A", runs[r].fmt, 2, dAJ, A), ops[2] = tensor_of("x", "d", 1, &dJ, x); break;
    case 1: ops[1] = tensor_of("A", runs[r].fmt, 2, dAJ, A), ops[2] = tensor_of("B", "dd", 2, dJK, Bd); break;
    case 2:
      ops[1] = tensor_of("B", runs[r].fmt, 2, dAJ, A), ops[2] = tensor_of("C", "dd", 2, dIK, C);
      ops[3] = tensor_of("D", "dd", 2, dKJ, D), nops = 4;
      break;
    case 3: ops[1] = tensor_of("B", runs[r].fmt, 3, d3, B3), ops[2] = tensor_of("c", "d", 1, &dK, c); break;
    default:
      ops[1] = tensor_of("B", runs[r].fmt, 3, m3, M3), ops[2] = tensor_of("C", "dd", 2, dKJ, Cm);
      ops[3] = tensor_of("D", "dd", 2, dLJ, Dm), nops = 4;
    }
    for (int64_t i = 0; i < I; i++)
      for (int64_t j = 0; j < (kind == 0 ? 1 : n1); j++) {
        double w = 0;
        if (kind == 0) for (int64_t q = 0; q < J; q++) w += A[i * J + q] * x[q];
        if (kind == 1) for (int64_t q = 0; q < J; q++) w += A[i * J + q] * Bd[q * K + j];
        if (kind == 2) for (int64_t q = 0; q < K; q++) w += A[i * J + j] * C[i * K + q] * D[q * J + j];
        if (kind == 3) for (int64_t q = 0; q < K; q++) w += B3[(i * J + j) * K + q] * c[q];
        if (kind == 4)
          for (int64_t q = 0; q < K; q++)
            for (int64_t l = 0; l < L; l++) w += M3[(i * K + q) * L + l] * Cm[q * J + j] * Dm[l * J + j];
        want[i * n1 + j] = w;
      }
    tj_kernel *k;
    OK(tj_compile(cx, runs[r].expr, ops, nops, runs[r].sched, &two, &k));
    OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
    for (int64_t i = 0; i < I; i++)
      for (int64_t j = 0; j < (kind == 0 ? 1 : n1); j++) {
        double v;
        OK(tj_tensor_get(ops[0], (int64_t[]){i, j}, &v));
        ck_assert_msg(v == want[i * n1 + j], "[%s] (%lld,%lld) = %g, want %g", runs[r].sched,
                      (long long)i, (long long)j, v, want[i * n1 + j]);
      }
    if (out_csr)   /* B's pattern: one entry per entry of B */
      ck_assert_int_eq(tj_tensor_nnz(ops[0]), tj_tensor_nnz(ops[1]));
    for (int t = 0; t < nops; t++) tj_tensor_free(ops[t]);
    free(zero);
    tj_context_free(cx);
  }
  double *all[] = {A, x, Bd, C, D, B3, c, M3, Cm, Dm, want};
  for (int q = 0; q < 11; q++) free(all[q]);
}
END_TEST

static char *stage_of(const char *expr, const char *fa, const char *sched, tj_stage st) {
  static const double a[20] = {1, 0, 2, 0, 0, 0, 0, 0, 0, 3, 0, 4, 5, 6, 7, 8, 0, 0, 0, 9};
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_tensor *A = matrix("A", fa, 5, 4, a), *x = vector("x", 4, a), *y = vector("y", 5, a);
  tj_tensor *b = vector("b", 5, a);
  tj_kernel *k;
  OK(tj_compile(cx, expr, (tj_tensor *[]){y, A, x, b}, 4, sched, NULL, &k));
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  OK(tj_kernel_print(k, st, f));
  fclose(f);
  tj_tensor_free(A);
  tj_tensor_free(x);
  tj_tensor_free(y);
  tj_tensor_free(b);
  tj_context_free(cx);
  return buf;
}

static char *cin_of(const char *expr, const char *fa, const char *sched) {
  return stage_of(expr, fa, sched, TJ_STAGE_CIN);
}

/* vectorize(i, w) marks the loops of i in the notation, and the pass
 * vectorizes those (the inner half of a split here), not a loop that
 * happens to share the name. */
START_TEST(vectorize_is_a_rewrite_of_the_loop) {
  char *c = stage_of(SPMV, "dd", "split(j, j0, j1, 8) vectorize(j1, 2)", TJ_STAGE_C);
  ck_assert_msg(strstr(c, "vector(2)"), "%s", c);
  ck_assert_msg(!strstr(c, "vector(4)") && !strstr(c, "vector(8)"), "%s", c);
  free(c);
  c = stage_of(SPMV, "dd", "vectorize(i, 2)", TJ_STAGE_C); /* the row loop: not vectorizable */
  ck_assert_msg(!strstr(c, "vector("), "%s", c);
  free(c);
}
END_TEST

/* What -print-cin shows is the loops that run, under the names the
 * schedule gave them, with the relations after the statement. */
START_TEST(notation_shows_the_rewrites) {
  static const char *const want[][4] = {
      {SPMV, "ds", "split(i, i0, i1, 16) parallelize(i0, static)",
       "suchthat(forall(i0:parallel(static), forall(i1, forall(j, y(i) += A(i,j) * x(j)))), "
       "split(i, i0, i1, 16))\n"},
      {SPMV, "ss", "pos(i, ip, A(i,j)) split(ip, i0, i1, 8) pos(j, jp, A(i,j)) unroll(jp, 2)",
       "suchthat(forall(i0, forall(i1, forall(jp:unroll(2), y(i) += A(i,j) * x(j)))), "
       "pos(i, ip, A(i,j)), split(ip, i0, i1, 8), pos(j, jp, A(i,j)))\n"},
      {SPMV, "dd", "bound(j, jb, 4, max_exact) divide(i, i0, i1, 2) vectorize(jb, 4)",
       "suchthat(forall(i0, forall(i1, forall(jb:vectorize(4), y(i) += A(i,j) * x(j)))), "
       "divide(i, i0, i1, 2), bound(j, jb, 4, max_exact))\n"},
      {"x(j) = A(i,j) * y(i)", "ds", "parallelize(i, partials)",
       "forall(i:parallel(partials), forall(j, x(j) += A(i,j) * y(i)))\n"},
      {"y(i) = b(i) - A(i,j) * x(j)", "ds", "pos(j, jp, A(i,j)) split(jp, j0, j1, 2)",
       "suchthat(forall(i, where(y(i) = b(i) - t_j, forall(j0, forall(j1, t_j += A(i,j) * "
       "x(j))))), pos(j, jp, A(i,j)), split(jp, j0, j1, 2))\n"},
      {SPMV, "ds", "fuse(i, j, f) pos(f, fp, A(i,j)) split(fp, f0, f1, 8) "
                   "parallelize(f0, static, atomics)",
       "suchthat(forall(f0:parallel(static, atomics), forall(f1, y(i) += A(i,j) * x(j))), "
       "fuse(i, j, f), pos(f, fp, A(i,j)), split(fp, f0, f1, 8))\n"},
      {SPMV, "dd", "split(j, j0, j1, 8) reorder(j0, i, j1) vectorize(j1, 4)",
       "suchthat(forall(j0, forall(i, forall(j1:vectorize(4), y(i) += A(i,j) * x(j)))), "
       "split(j, j0, j1, 8))\n"},
  };
  for (size_t w = 0; w < sizeof want / sizeof want[0]; w++) {
    char *got = cin_of(want[w][0], want[w][1], want[w][2]);
    ck_assert_msg(strcmp(got, want[w][3]) == 0, "[%s]\n got %s want %s", want[w][2], got,
                  want[w][3]);
    free(got);
  }
}
END_TEST

typedef struct Refusal {
  const char *expr, *fa, *schedule, *msg;
} Refusal;

static const Refusal refusals[] = {
    {SPMV, "ds", "split(j, j0, j1, 4)", "walks A's sparse level by coordinates; split its "
     "positions: pos(j, jp, ...) first"},
    {SPMV, "ds", "pos(i, ip, A(i,j))", "walks a dense range; pos walks the positions"},
    {SPMV, "ds", "pos(j, jp, B(i,j))", "has no access of B that uses j"},
    {SPMV, "ds", "pos(j, jp, A(j,i))", "has no access of A that uses j"},
    /* (a root sum of A x + A walks each term in its own loop; a max does not) */
    {"y(i) = reduce(max, j, A(i,j) * x(j) + A(i,j))", "ds",
     "pos(j, jp, A(i,j)) split(jp, j0, j1, 2)", "co-iterates sparse operands"},
    {SPMV, "ds", "split(i, i0, i1, 4) pos(i0, ip, A(i,j))", "already split (into i0 and i1)"},
    {SPMV, "ds", "split(i, i0, i1, 4) split(i1, a, b, 2)", "one split or divide per loop"},
    {SPMV, "ds", "split(i, i0, i1, 4) reorder(i1, i0, j)", "it must come after i0"},
    {SPMV, "ds", "fuse(i, j, f)", "fuse(i, j, f): the loop over j walks a sparse level or "
     "co-iterates; fuse dense loops, or a row loop and the compressed level below it"},
    {SPMV, "uq", "fuse(i, j, f) pos(f, fp, A(i,j))", "the loop over i co-iterates sparse "
     "operands (or walks duplicates)"},
    {SPMV, "ds", "fuse(i, j, f) pos(f, fp, A(i,j)) split(fp, f0, f1, 8) parallelize(f0)",
     "the fused loop f sums over j into entries other iterations update too; "
     "parallelize(..., atomics)"},
    {SPMV, "dd", "fuse(i, j, f) unroll(j, 2)", "unroll(j): the loops of i and j are one loop "
     "since fuse(i, j, f); name f"},
    {SPMV, "dd", "fuse(j, i, f)", "the loop of i must be directly inside the loop of j"},
    {SPMV, "dd", "fuse(i, j, f) bound(f, fb, 4, max_exact)", "f is a fused loop"},
    {SPMV, "dd", "fuse(i, j, j)", "fuse(i, ...): the name j is already taken"},
    {SPMV, "dd", "split(j, j0, j1, 8) reorder(j0, i)", "reorder: j0 names the outer half of the "
     "split of j but not its inner half j1"},
    {SPMV, "ds", "pos(j, jp, A(i,j)) split(jp, j0, j1, 4) reorder(j0, i, j1)", "has its outer "
     "half above the loop of i, where the positions it walks are not known yet"},
    {SPMV, "dd", "split(j, j0, j1, 8) reorder(j0, i, j1) parallelize(j0)", "j0 sits above i, "
     "away from its inner half j1"},
    {SPMV, "dd", "split(j, j0, j1, 8) split(i, i0, i1, 4) reorder(j0, i0, i1, j1)",
     "one split's halves may have loops between them at a time"},
    {SPMV, "ds", "split(i, i0, i1, 4) parallelize(i1)", "runs inside one thread's block"},
    {SPMV, "ds", "split(i, i0, i1, 4) parallelize(i)", "name one of them"},
    {SPMV, "ds", "split(i, i0, i1, 4) vectorize(i0, 4)", "a loop over blocks"},
    {SPMV, "ds", "split(i, j, i1, 4)", "the name j is already taken"},
    {SPMV, "ds", "split(i, i0, i0, 4)", "the two halves need two names"},
    {SPMV, "ds", "split(i, i0, i1, 0)", "split factor 0 is not between 1 and 2^30"},
    {SPMV, "ds", "split(q, i0, i1, 2)", "split: unknown index 'q'"},
    {SPMV, "ds", "split(i, i0, i1, 4) parallelize(i0, balanced)", "equal numbers of iterations"},
    {SPMV, "ds", "split(i, i0, i1)", "expected ','"},
    {SPMV, "dd", "bound(j, jb, 3, max_exact)", "the loop over j has extent 4, not 3"},
    {SPMV, "dd", "bound(j, jb, 4, min_exact)", "a loop starts at 0, so a lower bound of 4 would "
     "leave out its first iterations"},
    {SPMV, "dd", "bound(j, jb, 3, max_constraint)", "the loop over j has extent 4, more than 3"},
    {SPMV, "ds", "bound(j, jb, 4, max_exact)", "walks a sparse level; bound a dense loop"},
    {SPMV, "ds", "pos(j, jp, A(i,j)) bound(jp, jb, 4, max_exact)", "only a coordinate loop"},
    {SPMV, "ds", "divide(j, j0, j1, 2) parallelize(j0)", "an inner loop runs in parallel only "
     "over an index of a dense output whose outer loop is not a reduction"},
    {SPMV, "ds", "parallelize(i, atomics)", "its iterations write disjoint entries of the "
     "output: there is no race to guard"},
    {SPMV, "ds", "parallelize(j, atomics)", "it sums into a scalar temp below the output's "
     "last index"},
    {"x(j) = A(i,j) * y(i)", "uq", "parallelize(i, atomics)", "walks a nonunique (COO) level"},
    {SPMV, "ds", "parallelize(i, partials)", "writes disjoint rows of the output; there is "
     "nothing to combine"},
    {"A(i,j) = y(i) * x(j)", "dd", "parallelize(j, partials)", "parallelize(j, partials): its "
     "iterations write disjoint entries of the output: there is nothing to combine"},
    {SPMV, "ds", "parallelize(i, static, sharing)", "unknown race strategy 'sharing'"},
    {"A(i,j) = y(i) * x(j)", "dd", "parallelize(j, balanced)", "only the outermost loop's rows "
     "are weighed by nonzeros"},
    {"y(i) = reduce(max, j, A(i,j) * x(j) + A(i,j))", "ds", "vectorize(j, 4)",
     "only for loops (a dense range, or one sparse level) vectorize"},
};
enum { NREFUSALS = sizeof refusals / sizeof refusals[0] };

START_TEST(refusals_with_messages) {
  static const double a[20] = {1, 0, 2, 0, 0, 0, 0, 0, 0, 3, 0, 4, 5, 6, 7, 8, 0, 0, 0, 9};
  const Refusal *r = &refusals[_i];
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_tensor *A = matrix("A", r->fa, 5, 4, a), *x = vector("x", 4, a), *y = vector("y", 5, a);
  tj_kernel *k = NULL;
  ck_assert_int_ne(tj_compile(cx, r->expr, (tj_tensor *[]){y, A, x}, 3, r->schedule, NULL, &k),
                   TJ_OK);
  ck_assert_msg(strstr(tj_last_error(), r->msg), "[%s] got: %s", r->schedule, tj_last_error());
  tj_tensor_free(A);
  tj_tensor_free(x);
  tj_tensor_free(y);
  tj_context_free(cx);
}
END_TEST

/* bound() promises an extent: a run on operands of another extent is
 * refused, not run past their ends. */
START_TEST(bound_is_checked_at_every_run) {
  static const double a[20] = {1, 0, 2, 0, 0, 0, 0, 0, 0, 3, 0, 4, 5, 6, 7, 8, 0, 0, 0, 9};
  tj_context *cx;
  OK(tj_context_new(&cx));
  tj_tensor *A = matrix("A", "dd", 5, 4, a), *x = vector("x", 4, a), *y = vector("y", 5, a);
  tj_tensor *A2 = matrix("A", "dd", 4, 5, a), *x2 = vector("x", 5, a), *y2 = vector("y", 4, a);
  tj_kernel *k;
  OK(tj_compile(cx, SPMV, (tj_tensor *[]){y, A, x}, 3, "bound(j, jb, 4, max_exact)", NULL, &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  ck_assert_int_eq(tj_kernel_run(k, TJ_EVALUATE, (tj_tensor *[]){y2, A2, x2}, 3), TJ_ERR_SHAPE);
  ck_assert_msg(strstr(tj_last_error(), "bound(j, jb, 4, max_exact): index j has extent 5"),
                "%s", tj_last_error());
  /* max_constraint: at most 5; the loop runs to the extent (4, then 5);
   * y2 = A2 x2 by hand: A2 = [1 0 2 0 0; 0 0 0 0 3; 0 4 5 6 7; 8 0 0 0 9],
   * x2 = (1, 0, 2, 0, 0): y2 = (1 + 4, 0, 10, 8) */
  OK(tj_compile(cx, SPMV, (tj_tensor *[]){y, A, x}, 3, "bound(j, jb, 5, max_constraint)", NULL,
                &k));
  OK(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  OK(tj_kernel_run(k, TJ_EVALUATE, (tj_tensor *[]){y2, A2, x2}, 3));
  static const double want2[4] = {5, 0, 10, 8};
  for (int64_t i = 0; i < 4; i++) {
    double v;
    OK(tj_tensor_get(y2, &i, &v));
    ck_assert_msg(v == want2[i], "y2(%lld) = %g, want %g", (long long)i, v, want2[i]);
  }
  tj_tensor *A3 = matrix("A", "dd", 3, 6, a), *x3 = vector("x", 6, a), *y3 = vector("y", 3, a);
  ck_assert_int_eq(tj_kernel_run(k, TJ_EVALUATE, (tj_tensor *[]){y3, A3, x3}, 3), TJ_ERR_SHAPE);
  ck_assert_msg(strstr(tj_last_error(), "bound(j, jb, 5, max_constraint): index j has extent 6"),
                "%s", tj_last_error());
  tj_tensor *all[] = {A, x, y, A2, x2, y2, A3, x3, y3};
  for (int t = 0; t < 9; t++) tj_tensor_free(all[t]);
  tj_context_free(cx);
}
END_TEST

int main(void) {
  Suite *s = suite_create("schedule_loops");
  TCase *t = tcase_create("schedule_loops");
  tcase_set_timeout(t, 300);
  tcase_add_loop_test(t, rewrites_against_the_reference, 0, NCASES);
  tcase_add_test(t, spmv_by_hand);
  tcase_add_test(t, partials_by_hand);
  tcase_add_test(t, inner_partials_by_hand);
  tcase_add_test(t, atomics_by_hand);
  tcase_add_test(t, atomics_cas_by_hand);
  tcase_add_test(t, taco_schedules_by_plain_loops);
  tcase_add_test(t, sddmm_into_csr_by_hand);
  tcase_add_test(t, notation_shows_the_rewrites);
  tcase_add_test(t, vectorize_is_a_rewrite_of_the_loop);
  tcase_add_loop_test(t, refusals_with_messages, 0, NREFUSALS);
  tcase_add_test(t, bound_is_checked_at_every_run);
  suite_add_tcase(s, t);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

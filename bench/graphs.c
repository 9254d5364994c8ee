/* tjgraphs: graph kernels under semirings and masks, tensorjit against
 * SuiteSparse:GraphBLAS in the same run (issue 16's bench rows).
 *
 *   relax     one Bellman-Ford relaxation, d'(i) = min_j A(i,j) + d(j):
 *             tensorjit "y(i) = A(i,j) * d(j)" under min.plus; GraphBLAS
 *             GrB_mxv with GrB_MIN_PLUS_SEMIRING_FP64
 *   bfs       one BFS level from a frontier q, skipping the visited v:
 *             "n(j) = except(v(j), q(i) * A(i,j))" under or.and (f64; v a
 *             dense 0/1 vector, a valued mask; bfs-sparse: v sparse);
 *             GrB_vxm with GrB_LOR_LAND_SEMIRING_BOOL on a bool matrix and
 *             the complemented structural mask (GrB_DESC_RSC)
 *   triangles sum over the edges (i,j) of L of |{k : L(i,k), L(j,k)}|, L the
 *             strictly lower triangle: "t = mask(L(i,j), L(i,k) * T(j,k))"
 *             under plus.pair with T = L (dot products of rows); GrB_mxm
 *             C<L> = L * L' with GxB_PLUS_PAIR_FP64 (GrB_DESC_ST1), then
 *             GrB_reduce
 *   pagerank  one PageRank iteration (pull), y(i) = t + sum_j A(j,i) r(j) s(j),
 *             t = 0.15 / n, s(j) = 0.85 / outdeg(j) (0 for a dangling j):
 *             tensorjit w(j) = r(j) * s(j), then "y(i) = t + A(j,i) * w(j)"
 *             with A by columns (ds:1,0): one gather per edge, as GraphBLAS
 *             (fused, r(j) * s(j) per edge, two gathers: ~2x slower on
 *             luxembourg_osm); GraphBLAS w = r .* s (GrB_eWiseMult), y = t
 *             (GrB_assign), y += A' w (GrB_mxv, PLUS_TIMES, A' transposed once)
 *
 * Graphs: wiki-Vote and luxembourg_osm from ../shared/data, and an R-MAT
 * graph (scale 16, 16 edges per node, a = 0.57, b = c = 0.19, seed 1).
 * Every result is checked against GraphBLAS's before timing. Prints one
 * line per kernel, graph and thread count: medians (ms) and GraphBLAS /
 * tensorjit (above 1: tensorjit faster).
 * Usage: tjgraphs [--data DIR] [--reps N] [--quick] [--only KERNEL] [--threads N]
 * [--cpu] (--threads: 1..N threads, default 2; --cpu: the calling thread's
 * CPU time instead of wall time, honest at 1 thread on a loaded machine)
 */
#include <GraphBLAS.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"

#define GBCHECK(call) do { if ((call) != GrB_SUCCESS) { fprintf(stderr, "tjgraphs: %s failed\n", #call); exit(1); } } while (0)

/* A graph as COO edges (0-based), values 1. */
typedef struct Graph {
  char name[64];
  int64_t n, m;
  int64_t *src, *dst;
} Graph;

static uint64_t rng_next(uint64_t *s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return *s;
}

static void rmat(Graph *g, int scale, int per_node) {
  snprintf(g->name, sizeof g->name, "rmat%d", scale);
  g->n = (int64_t)1 << scale;
  g->m = g->n * per_node;
  g->src = malloc(sizeof *g->src * (size_t)g->m);
  g->dst = malloc(sizeof *g->dst * (size_t)g->m);
  uint64_t s = 1;
  for (int64_t e = 0; e < g->m; e++) {
    int64_t i = 0, j = 0;
    for (int b = 0; b < scale; b++) {
      double r = (double)(rng_next(&s) >> 11) / 9007199254740992.0;
      int qi = r >= 0.57 + 0.19, qj = (r >= 0.57 && r < 0.76) || r >= 0.95;
      i = 2 * i + qi, j = 2 * j + qj;
    }
    g->src[e] = i, g->dst[e] = j;
  }
}

static int read_graph(Graph *g, const char *path, const char *name) {
  tj_tensor *t;
  if (tj_tensor_read(path, name, NULL, &t) != TJ_OK) return 0;
  snprintf(g->name, sizeof g->name, "%s", name);
  g->n = tj_tensor_dim(t, 0) > tj_tensor_dim(t, 1) ? tj_tensor_dim(t, 0) : tj_tensor_dim(t, 1);
  int64_t *c;
  double *v;
  TJ(tj_tensor_unpack(t, &c, &v, &g->m));
  g->src = malloc(sizeof *g->src * (size_t)(g->m + 1));
  g->dst = malloc(sizeof *g->dst * (size_t)(g->m + 1));
  for (int64_t e = 0; e < g->m; e++) g->src[e] = c[2 * e], g->dst[e] = c[2 * e + 1];
  free(c), free(v);
  tj_tensor_free(t);
  return 1;
}

/* A tensorjit matrix of the edges (only those keep(i, j) accepts), values
 * 1, duplicates merged to 1, and the same GraphBLAS matrix (FP64 and BOOL). */
static tj_tensor *matrix(const Graph *g, const char *name, const char *fmt, int lower,
                         GrB_Matrix *gd, GrB_Matrix *gb) {
  tj_format f;
  TJ(tj_format_parse(fmt, &f));
  int64_t dims[2] = {g->n, g->n};
  tj_tensor *t;
  TJ(tj_tensor_new(name, TJ_F64, 2, dims, &f, &t));
  GBCHECK(GrB_Matrix_new(gd, GrB_FP64, (GrB_Index)g->n, (GrB_Index)g->n));
  if (gb) GBCHECK(GrB_Matrix_new(gb, GrB_BOOL, (GrB_Index)g->n, (GrB_Index)g->n));
  for (int64_t e = 0; e < g->m; e++) {
    int64_t i = g->src[e], j = g->dst[e];
    if (lower) { /* symmetrize, keep i > j */
      if (i == j) continue;
      if (i < j) { int64_t x = i; i = j; j = x; }
    }
    GBCHECK(GrB_Matrix_setElement_FP64(*gd, 1.0, (GrB_Index)i, (GrB_Index)j));
    if (gb) GBCHECK(GrB_Matrix_setElement_BOOL(*gb, true, (GrB_Index)i, (GrB_Index)j));
  }
  GBCHECK(GrB_Matrix_wait(*gd, GrB_MATERIALIZE));
  if (gb) GBCHECK(GrB_Matrix_wait(*gb, GrB_MATERIALIZE));
  GrB_Index nv;
  GBCHECK(GrB_Matrix_nvals(&nv, *gd));
  GrB_Index *I = malloc(sizeof *I * (nv + 1)), *J = malloc(sizeof *J * (nv + 1));
  double *X = malloc(sizeof *X * (nv + 1));
  GBCHECK(GrB_Matrix_extractTuples_FP64(I, J, X, &nv, *gd));
  for (GrB_Index e = 0; e < nv; e++) TJ(tj_tensor_insert(t, (int64_t[]){(int64_t)I[e], (int64_t)J[e]}, 1.0));
  TJ(tj_tensor_pack(t));
  free(I), free(J), free(X);
  return t;
}

static tj_tensor *vec(const char *name, const char *fmt, int64_t n) {
  tj_format f;
  TJ(tj_format_parse(fmt, &f));
  tj_tensor *t;
  TJ(tj_tensor_new(name, TJ_F64, 1, &n, &f, &t));
  return t;
}

typedef struct Timing {
  double tj, grb;
} Timing;

static int g_reps = 15;
static const char *g_only;  /* --only KERNEL: run just that kernel */
static int want(const char *kernel) { return !g_only || !strcmp(g_only, kernel); }

/* Alternates the two runs reps times (tensorjit's: kernels k[0..nk) in
 * turn); medians into *t. */
/* --cpu: the calling thread's CPU time instead of wall time (on a loaded
 * machine; at 1 thread it is all of both libraries' work). */
static clockid_t g_clock = CLOCK_MONOTONIC;
static double now_ms(void) {
  struct timespec t;
  clock_gettime(g_clock, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void time_steps(tj_kernel *const *k, int nk, void (*grb)(void *), void *ctx, Timing *t) {
  double a[64], b[64];
  for (int r = 0; r < g_reps; r++) {
    double t0 = now_ms();
    for (int q = 0; q < nk; q++) TJ(tj_kernel_run(k[q], TJ_EVALUATE, NULL, 0));
    double t1 = now_ms();
    grb(ctx);
    a[r] = t1 - t0, b[r] = now_ms() - t1;
  }
  t->tj = bench_median(a, g_reps), t->grb = bench_median(b, g_reps);
}

static void time_both(tj_kernel *k, void (*grb)(void *), void *ctx, Timing *t) {
  time_steps(&k, 1, grb, ctx, t);
}

static tj_kernel *compile(const char *expr, tj_tensor **ops, int n, const char *sr, int nth) {
  static tj_context *cx;
  if (!cx) TJ(tj_context_new(&cx));
  tj_options o = tj_options_default();
  o.semiring = sr;
  o.nthreads = nth;
  tj_kernel *k;
  TJ(tj_compile(cx, expr, ops, n, NULL, &o, &k));
  return k;
}

static void report(const char *kernel, const Graph *g, int nth, const Timing *t, int ok) {
  printf("%-10s %-16s %d  tensorjit %9.3f ms  GraphBLAS %9.3f ms  ratio %5.2fx  %s\n", kernel,
         g->name, nth, t->tj, t->grb, t->grb / t->tj, ok ? "agree" : "DISAGREE");
  fflush(stdout);
}

/* ---- relax ---- */
typedef struct Relax { GrB_Vector y, d; GrB_Matrix A; } Relax;
static void relax_grb(void *c) {
  Relax *r = c;
  GBCHECK(GrB_mxv(r->y, NULL, NULL, GrB_MIN_PLUS_SEMIRING_FP64, r->A, r->d, NULL));
  GBCHECK(GrB_Vector_wait(r->y, GrB_MATERIALIZE));
}

static int bench_relax(const Graph *g, int nth) {
  GrB_Matrix A;
  tj_tensor *At = matrix(g, "A", "ds", 0, &A, NULL);
  tj_tensor *d = vec("d", "d", g->n), *y = vec("y", "d", g->n);
  Relax r = {.A = A};
  GBCHECK(GrB_Vector_new(&r.d, GrB_FP64, (GrB_Index)g->n));
  GBCHECK(GrB_Vector_new(&r.y, GrB_FP64, (GrB_Index)g->n));
  uint64_t s = 7;
  for (int64_t i = 0; i < g->n; i++) {
    double v = (double)(rng_next(&s) % 1000);
    TJ(tj_tensor_insert(d, &i, v));
    GBCHECK(GrB_Vector_setElement_FP64(r.d, v, (GrB_Index)i));
  }
  TJ(tj_tensor_pack(d));
  tj_tensor *ops[] = {y, At, d};
  tj_kernel *k = compile("y(i) = A(i,j) * d(j)", ops, 3, "min.plus", nth);
  TJ(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  relax_grb(&r);
  int ok = 1;
  for (int64_t i = 0; i < g->n && ok; i++) {
    double a, b = INFINITY;
    TJ(tj_tensor_get(y, &i, &a));
    GrB_Vector_extractElement_FP64(&b, r.y, (GrB_Index)i); /* absent: stays inf */
    ok = a == b;
  }
  Timing t;
  time_both(k, relax_grb, &r, &t);
  report("relax", g, nth, &t, ok);
  GrB_free(&r.d), GrB_free(&r.y), GrB_free(&A);
  tj_tensor_free(At), tj_tensor_free(d), tj_tensor_free(y);
  return ok;
}

/* ---- bfs ---- */
typedef struct Bfs { GrB_Vector next, q, v; GrB_Matrix A; } Bfs;
static void bfs_grb(void *c) {
  Bfs *b = c;
  GBCHECK(GrB_vxm(b->next, b->v, NULL, GrB_LOR_LAND_SEMIRING_BOOL, b->q, b->A, GrB_DESC_RSC));
  GBCHECK(GrB_Vector_wait(b->next, GrB_MATERIALIZE));
}

static int bench_bfs(const Graph *g, int nth, const char *vfmt) {
  GrB_Matrix Ad, Ab;
  tj_tensor *At = matrix(g, "A", "ds", 0, &Ad, &Ab);
  /* visited as a dense 0/1 vector (a valued mask, located per j) or sparse
   * (structural; planned as a 0/1 pattern built per run) */
  tj_tensor *q = vec("q", "s", g->n), *v = vec("v", vfmt, g->n), *nx = vec("n", "s", g->n);
  Bfs b = {.A = Ab};
  GBCHECK(GrB_Vector_new(&b.q, GrB_BOOL, (GrB_Index)g->n));
  GBCHECK(GrB_Vector_new(&b.v, GrB_BOOL, (GrB_Index)g->n));
  GBCHECK(GrB_Vector_new(&b.next, GrB_BOOL, (GrB_Index)g->n));
  uint64_t s = 11;
  for (int64_t i = 0; i < g->n; i++) {
    uint64_t r = rng_next(&s) % 100;
    if (r < 2) { /* frontier: 2%, visited: the frontier and 10% more */
      TJ(tj_tensor_insert(q, &i, 1.0));
      GBCHECK(GrB_Vector_setElement_BOOL(b.q, true, (GrB_Index)i));
    }
    if (r < 12) {
      TJ(tj_tensor_insert(v, &i, 1.0));
      GBCHECK(GrB_Vector_setElement_BOOL(b.v, true, (GrB_Index)i));
    }
  }
  TJ(tj_tensor_pack(q));
  TJ(tj_tensor_pack(v));
  tj_tensor *ops[] = {nx, At, q, v};
  tj_kernel *k = compile("n(j) = except(v(j), q(i) * A(i,j))", ops, 4, "or.and", nth);
  TJ(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  bfs_grb(&b);
  GrB_Index nv;
  GBCHECK(GrB_Vector_nvals(&nv, b.next));
  int64_t *c;
  double *x;
  int64_t nnz;
  TJ(tj_tensor_unpack(nx, &c, &x, &nnz));
  int ok = (GrB_Index)nnz == nv;
  for (int64_t e = 0; e < nnz && ok; e++) {
    bool w = false;
    ok = x[e] == 1 && GrB_Vector_extractElement_BOOL(&w, b.next, (GrB_Index)c[e]) == GrB_SUCCESS && w;
  }
  free(c), free(x);
  Timing t;
  time_both(k, bfs_grb, &b, &t);
  report(vfmt[0] == 'd' ? "bfs" : "bfs-sparse", g, nth, &t, ok);
  GrB_free(&b.q), GrB_free(&b.v), GrB_free(&b.next), GrB_free(&Ad), GrB_free(&Ab);
  tj_tensor_free(At), tj_tensor_free(q), tj_tensor_free(v), tj_tensor_free(nx);
  return ok;
}

/* ---- triangles ---- */
typedef struct Tri { GrB_Matrix L, C; double count; } Tri;
static void tri_grb(void *c) {
  Tri *t = c;
  GBCHECK(GrB_mxm(t->C, t->L, NULL, GxB_PLUS_PAIR_FP64, t->L, t->L, GrB_DESC_ST1));
  GBCHECK(GrB_Matrix_reduce_FP64(&t->count, NULL, GrB_PLUS_MONOID_FP64, t->C, NULL));
}

static int bench_triangles(const Graph *g, int nth) {
  Tri tr;
  tj_tensor *L = matrix(g, "L", "ds", 1, &tr.L, NULL);
  int64_t none = 0;
  tj_format scal = tj_format_dense(0);
  tj_tensor *count;
  TJ(tj_tensor_new("t", TJ_F64, 0, &none, &scal, &count));
  /* T is L under another name (its arrays wrapped, not copied), read as
   * T(j,k): the expression's two row walks of L */
  tj_tensor *renamed;
  tj_arrays arr;
  TJ(tj_tensor_arrays(L, &arr));
  TJ(tj_tensor_wrap("T", &arr, TJ_WRAP_TRUSTED, &renamed));
  GBCHECK(GrB_Matrix_new(&tr.C, GrB_FP64, (GrB_Index)g->n, (GrB_Index)g->n));
  tj_tensor *ops[] = {count, L, renamed};
  tj_kernel *k = compile("t = mask(L(i,j), L(i,k) * T(j,k))", ops, 3, "plus.pair", nth);
  TJ(tj_kernel_run(k, TJ_EVALUATE, NULL, 0));
  tri_grb(&tr);
  double got;
  TJ(tj_tensor_get(count, NULL, &got));
  int ok = got == tr.count;
  Timing t;
  time_both(k, tri_grb, &tr, &t);
  report("triangles", g, nth, &t, ok);
  if (!ok) fprintf(stderr, "  tensorjit %.0f, GraphBLAS %.0f triangles\n", got, tr.count);
  GrB_free(&tr.L), GrB_free(&tr.C);
  tj_tensor_free(renamed), tj_tensor_free(L), tj_tensor_free(count);
  return ok;
}

/* ---- pagerank ---- */
typedef struct Rank { GrB_Vector y, r, s, w; GrB_Matrix A, AT; double t; GrB_Index n; } Rank;
static void rank_grb(void *c) {
  Rank *k = c;
  GBCHECK(GrB_Vector_eWiseMult_BinaryOp(k->w, NULL, NULL, GrB_TIMES_FP64, k->r, k->s, NULL));
  GBCHECK(GrB_Vector_assign_FP64(k->y, NULL, NULL, k->t, GrB_ALL, k->n, NULL));
  GBCHECK(GrB_mxv(k->y, NULL, GrB_PLUS_FP64, GrB_PLUS_TIMES_SEMIRING_FP64, k->AT, k->w, NULL));
  GBCHECK(GrB_Vector_wait(k->y, GrB_MATERIALIZE));
}

static int bench_pagerank(const Graph *g, int nth) {
  Rank k = {.n = (GrB_Index)g->n, .t = 0.15 / (double)g->n};
  tj_tensor *At = matrix(g, "A", "ds:1,0", 0, &k.A, NULL);
  tj_tensor *r = vec("r", "d", g->n), *s = vec("s", "d", g->n), *y = vec("y", "d", g->n);
  tj_tensor *w = vec("w", "d", g->n);
  int64_t none = 0;
  tj_format scal = tj_format_dense(0);
  tj_tensor *t;
  TJ(tj_tensor_new("t", TJ_F64, 0, &none, &scal, &t));
  TJ(tj_tensor_insert(t, NULL, k.t));
  TJ(tj_tensor_pack(t));
  /* A' made once, as tensorjit's A by columns is (GrB_DESC_T0 would
   * transpose per call) */
  GBCHECK(GrB_Matrix_new(&k.AT, GrB_FP64, k.n, k.n));
  GBCHECK(GrB_transpose(k.AT, NULL, NULL, k.A, NULL));
  GBCHECK(GrB_Matrix_wait(k.AT, GrB_MATERIALIZE));
  GrB_Vector deg;
  GBCHECK(GrB_Vector_new(&deg, GrB_FP64, k.n));
  GBCHECK(GrB_Matrix_reduce_Monoid(deg, NULL, NULL, GrB_PLUS_MONOID_FP64, k.A, NULL));
  GrB_Vector *vs[] = {&k.y, &k.r, &k.s, &k.w};
  for (int q = 0; q < 4; q++) GBCHECK(GrB_Vector_new(vs[q], GrB_FP64, k.n));
  for (int64_t i = 0; i < g->n; i++) {
    double d = 0, rv = 1.0 / (double)g->n * (1 + (double)(i % 7) / 10);
    GrB_Vector_extractElement_FP64(&d, deg, (GrB_Index)i); /* absent: a dangling node */
    double sv = d > 0 ? 0.85 / d : 0;
    TJ(tj_tensor_insert(r, &i, rv));
    TJ(tj_tensor_insert(s, &i, sv));
    GBCHECK(GrB_Vector_setElement_FP64(k.r, rv, (GrB_Index)i));
    GBCHECK(GrB_Vector_setElement_FP64(k.s, sv, (GrB_Index)i));
  }
  TJ(tj_tensor_pack(r));
  TJ(tj_tensor_pack(s));
  tj_tensor *wops[] = {w, r, s}, *ops[] = {y, t, At, w};
  tj_kernel *kr[] = {compile("w(j) = r(j) * s(j)", wops, 3, NULL, nth),
                     compile("y(i) = t + A(j,i) * w(j)", ops, 4, NULL, nth)};
  for (int q = 0; q < 2; q++) TJ(tj_kernel_run(kr[q], TJ_EVALUATE, NULL, 0));
  rank_grb(&k);
  int ok = 1;
  for (int64_t i = 0; i < g->n && ok; i++) {
    double a, b = 0;
    TJ(tj_tensor_get(y, &i, &a));
    GBCHECK(GrB_Vector_extractElement_FP64(&b, k.y, (GrB_Index)i));
    ok = fabs(a - b) <= 1e-12 * fabs(b) + 1e-300;
  }
  Timing tm;
  time_steps(kr, 2, rank_grb, &k, &tm);
  report("pagerank", g, nth, &tm, ok);
  for (int q = 0; q < 4; q++) GrB_free(vs[q]);
  GrB_free(&deg), GrB_free(&k.A), GrB_free(&k.AT);
  tj_tensor_free(At), tj_tensor_free(r), tj_tensor_free(s), tj_tensor_free(y), tj_tensor_free(t);
  tj_tensor_free(w);
  return ok;
}

int main(int argc, char **argv) {
  const char *data = TJ_BENCH_DATA;
  int quick = 0, max_threads = 2;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--data") && i + 1 < argc) data = argv[++i];
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) g_reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--quick")) quick = 1;
    else if (!strcmp(argv[i], "--only") && i + 1 < argc) g_only = argv[++i];
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) max_threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--cpu")) g_clock = CLOCK_THREAD_CPUTIME_ID;
    else {
      fprintf(stderr, "usage: tjgraphs [--data DIR] [--reps N] [--quick] [--only KERNEL] "
                      "[--threads N] [--cpu]\n");
      return 2;
    }
  }
  if (quick) g_reps = 3;
  /* Two OpenMP runtimes share the process (tensorjit's libomp, GraphBLAS's):
   * libomp's workers spin 200 ms after each region by default, starving
   * GraphBLAS's threads on 2 cores and the other way round (PageRank on
   * luxembourg_osm at 2 threads: 20 ms instead of 0.45). tensorjit's sleep
   * at once instead, unless the caller says otherwise. */
  setenv("KMP_BLOCKTIME", "0", 0);
  if (g_reps < 1 || g_reps > 64) g_reps = 15;
  GBCHECK(GrB_init(GrB_NONBLOCKING));
  Graph gs[3];
  int ng = 0;
  char path[1024];
  const char *names[] = {"wiki-Vote", "luxembourg_osm"};
  for (int i = 0; i < 2; i++) {
    snprintf(path, sizeof path, "%s/matrices/%s.mtx", data, names[i]);
    if (read_graph(&gs[ng], path, names[i])) ng++;
    else printf("(%s not found: skipped)\n", path);
  }
  rmat(&gs[ng++], quick ? 12 : 16, 16);
  int bad = 0;
  for (int nth = 1; nth <= max_threads; nth++) {
    GBCHECK(GxB_Global_Option_set(GxB_NTHREADS, nth));
    for (int g = 0; g < ng; g++) {
      if (want("relax")) bad += !bench_relax(&gs[g], nth);
      if (want("bfs")) bad += !bench_bfs(&gs[g], nth, "d");
      if (want("bfs-sparse")) bad += !bench_bfs(&gs[g], nth, "s");
      if (want("triangles")) bad += !bench_triangles(&gs[g], nth);
      if (want("pagerank")) bad += !bench_pagerank(&gs[g], nth);
    }
  }
  printf("%d disagreement(s)\n", bad);
  for (int g = 0; g < ng; g++) free(gs[g].src), free(gs[g].dst);
  GrB_finalize();
  return bad != 0;
}

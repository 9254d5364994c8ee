/* Parallel loops for JIT-compiled kernels on the OpenMP runtime (libomp).
 * The JIT outlines a parallel loop's body into a function over an iteration
 * range and calls tj_rt_parallel_for, a small function built here with
 * OpenMP: this keeps the generated code free of the runtime's internal
 * entry points (__kmpc_fork_call and friends), whose ABI is private to the
 * compilers, while still running on libomp's thread pool. Chunks are sized
 * by work (rows + nonzeros) when a pos array is given, so power-law rows
 * do not leave a core idle, and handed out dynamically.
 */
#include <omp.h>
#include <stdlib.h>

#include "abi.h"
#include "tensor.h"

static _Thread_local int threads_requested;

void tj_rt_set_threads(int n) { threads_requested = n; }

int tj_rt_threads(void) {
  if (threads_requested > 0) return threads_requested;
  const char *env = getenv("TJ_NUM_THREADS");
  int n = env ? atoi(env) : 0;
  return n > 0 ? n : omp_get_max_threads();
}

int64_t tj_rt_thread_slot(int64_t n) {
  int64_t t = omp_get_thread_num();
  return t >= 0 && t < n ? t : 0;
}

/* Waking a sleeping worker costs 10-100 us on this 2-core VM (KMP_BLOCKTIME=0,
 * as the bench runs), and a row-plus-entry of SpMV about 0.3 ns. On a quiet
 * machine (tjbench --only spmv-csr, TJ_PAR_MIN_WORK swept) wiki-Vote's SpMV
 * (8 k rows, 104 k entries: 112 k) took 0.040 ms on one thread and 0.028 ms
 * on two (MKL 0.027), so 2^16 rather than 2^17 (measured at load 20, where
 * it lost); smaller loops stay serial. A TJ_PAR_LIGHT loop (the units are
 * its innermost trips: SpMV, TTV's leaves) needs twice that: on the Intel
 * host with the 260 MB L3 (2026-12-04) bcsstk13's SpMV (2 k rows, 84 k
 * entries) ran 1.39-1.53x slower on two threads than on one, waking the
 * second one costing ~35 us, while TTV over openflight_sym (~163 k leaf
 * units) gained 1.38x (bench/README.md, "SpMV CSR on every matrix"). */
enum { PAR_MIN_WORK = 1 << 16 };

int64_t tj_rt_par_min_work(void) {
  const char *env = getenv("TJ_PAR_MIN_WORK");
  long long n = env ? atoll(env) : -1;
  return n >= 0 ? (int64_t)n : PAR_MIN_WORK;
}

/* How rows are weighed: entries below them (one or two levels down). */
typedef struct Weights {
  const void *pos, *leaf;
  int32_t w, leaf_w;
} Weights;

/* Work up to row r: rows plus entries below, monotonic in r. */
static int64_t work_at(const Weights *g, int64_t r) {
  int64_t p = rt_idx(g->pos, g->w, r);
  return (g->leaf ? rt_idx(g->leaf, g->leaf_w, p) : p) + r;
}

/* First row r in [lo, hi] with work_at(r) >= target. */
static int64_t split_row(const Weights *g, int64_t lo, int64_t hi, int64_t target) {
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (work_at(g, mid) < target) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

void rt_split_rows(int64_t lo, int64_t hi, const void *pos, int32_t pos_width,
                   int n, int64_t *bounds) {
  Weights g = {pos, NULL, pos_width, 0};
  int64_t base = pos ? work_at(&g, lo) : 0;
  int64_t total = pos ? work_at(&g, hi) - base : hi - lo;
  bounds[0] = lo;
  bounds[n] = hi;
  for (int c = 1; c < n; c++)
    bounds[c] = pos ? split_row(&g, lo, hi, base + total * c / n) : lo + (hi - lo) * c / n;
}

/* One equal block of rows per thread. */
static void run_static(int64_t lo, int64_t hi, int nt, tj_par_body body, void *ctx) {
#pragma omp parallel for schedule(static, 1) num_threads(nt)
  for (int c = 0; c < nt; c++) {
    int64_t a = lo + (hi - lo) * c / nt, b = lo + (hi - lo) * (c + 1) / nt;
    if (a < b) body(ctx, a, b);
  }
}

void tj_rt_parallel_for_sched(int64_t lo, int64_t hi, const void *pos, int32_t pos_width,
                              const void *leaf, int32_t leaf_width, int32_t strategy,
                              tj_par_body body, void *ctx) {
  int nt = tj_rt_threads();
  if (hi <= lo) return;
  if (nt <= 1 || hi - lo < 2) {
    body(ctx, lo, hi);
    return;
  }
  if (nt > hi - lo) nt = (int)(hi - lo);
  bool light = strategy & TJ_PAR_LIGHT;
  strategy &= ~TJ_PAR_LIGHT;
  if (pos) { /* too little work to share: one thread */
    Weights w = {pos, leaf, pos_width, leaf_width};
    if (work_at(&w, hi) - work_at(&w, lo) < tj_rt_par_min_work() * (light ? 2 : 1)) {
      body(ctx, lo, hi);
      return;
    }
  }
  if (strategy == TJ_PAR_STATIC) {
    run_static(lo, hi, nt, body, ctx);
    return;
  }
  if (strategy == TJ_PAR_DYNAMIC) pos = NULL;
  Weights g = {pos, pos ? leaf : NULL, pos_width, leaf_width};
  int64_t nchunks = (int64_t)nt * (strategy == TJ_PAR_DYNAMIC ? 16 : 8);
  if (nchunks > hi - lo) nchunks = hi - lo;
  int64_t base = pos ? work_at(&g, lo) : 0;
  int64_t total = pos ? work_at(&g, hi) - base : hi - lo;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
  for (int64_t c = 0; c < nchunks; c++) {
    int64_t a, b;
    if (pos) {
      a = split_row(&g, lo, hi, base + total * c / nchunks);
      b = c == nchunks - 1 ? hi : split_row(&g, lo, hi, base + total * (c + 1) / nchunks);
    } else {
      a = lo + (hi - lo) * c / nchunks;
      b = lo + (hi - lo) * (c + 1) / nchunks;
    }
    if (a < b) body(ctx, a, b);
  }
}

void tj_rt_parallel_for_leaves(int64_t lo, int64_t hi, const void *pos, int32_t pos_width,
                               const void *leaf, int32_t leaf_width, tj_par_body body,
                               void *ctx) {
  tj_rt_parallel_for_sched(lo, hi, pos, pos_width, leaf, leaf_width, TJ_PAR_DEFAULT, body, ctx);
}

void tj_rt_parallel_for(int64_t lo, int64_t hi, const void *pos,
                        int32_t pos_width, tj_par_body body, void *ctx) {
  tj_rt_parallel_for_leaves(lo, hi, pos, pos_width, NULL, 0, body, ctx);
}

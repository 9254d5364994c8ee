/* Running compiled kernels: bind operands, check their shapes, convert the
 * operands the plan reads in another mode order, call the kernel through
 * the kernel ABI, turn its return code into a message. Also the reference
 * evaluation (dense, long double) the tests and the CLI compare against. */
#include <stdlib.h>
#include <string.h>

#include "../ir/level.h"
#include "../lower/lir_interp.h"
#include "driver.h"

static bool check_extents(const Expr *e, tj_tensor **ops, int64_t *ext, const char **who,
                          Diag *d) {
  switch (e->kind) {
  case EX_LITERAL: return true;
  case EX_ACCESS:
    for (int m = 0; m < e->u.access.n; m++) {
      int v = e->u.access.idx[m]->id;
      int64_t dim = tj_tensor_dim(ops[e->u.access.t->id], m);
      if (ext[v] < 0) {
        ext[v] = dim;
        who[v] = e->u.access.t->name;
      } else if (ext[v] != dim) {
        return diag_error(d, TJ_ERR_SHAPE, "index %s has extent %lld in %s but %lld in %s",
                          e->u.access.idx[m]->name, (long long)ext[v], who[v],
                          (long long)dim, e->u.access.t->name);
      }
    }
    return true;
  default: {
    Expr *k[2];
    int n = nt_children(e, k);
    for (int i = 0; i < n; i++)
      if (!check_extents(k[i], ops, ext, who, d)) return false;
    return true;
  }
  }
}

/* bound(i, ib, n, max_exact) promised that i's extent is n: the kernel's
 * loop runs n times whatever the operands' dims; max_constraint, at most n. */
static bool check_bounds(const Cin *c, const int64_t *ext, Diag *d) {
  switch (c->kind) {
  case CIN_FORALL: {
    const CinLoopForm *f = &c->u.forall.form;
    const IndexVar *v = c->u.forall.iv;
    bool exact = f->bound_kind == BOUND_MAX_EXACT;
    if (f->bound_kind && (exact ? ext[v->id] != f->bound : ext[v->id] > f->bound))
      return diag_error(d, TJ_ERR_SHAPE, "bound(%s, %s, %lld, %s): index %s has extent "
                        "%lld", v->name, f->bound_name, (long long)f->bound,
                        cin_bound_name(f->bound_kind), v->name, (long long)ext[v->id]);
    return check_bounds(c->u.forall.body, ext, d);
  }
  case CIN_WHERE:
    return check_bounds(c->u.where.consumer, ext, d) && check_bounds(c->u.where.producer, ext, d);
  case CIN_SEQUENCE: return true;   /* its statements take no bound (plan_sequence) */
  case CIN_ASSIGN: return true;
  }
  return true;
}

/* Every index has one extent across the bound operands, and each operand
 * has the format and dtype the kernel was compiled for. */
static bool check_operands(const tj_kernel *k, tj_tensor **ops, Diag *d) {
  const Assignment *as = k->entry->as;
  int64_t ext[NT_MAX_INDICES];
  const char *who[NT_MAX_INDICES];
  for (int v = 0; v < as->nindices; v++) ext[v] = -1;
  for (int t = 0; t < as->ntensors; t++) {
    const TensorDecl *dc = &as->tensors[t]->decl;
    const tj_format *f = tj_tensor_format(ops[t]);
    if (tj_tensor_order(ops[t]) != dc->order || tj_tensor_dtype(ops[t]) != dc->dtype ||
        strcmp(f->levels, dc->format.levels) != 0 ||
        memcmp(f->mode_order, dc->format.mode_order, sizeof f->mode_order) != 0 ||
        f->pos_width != dc->format.pos_width || f->crd_width != dc->format.crd_width ||
        memcmp(f->slice, dc->format.slice, sizeof f->slice) != 0 ||   /* a view's slices */
        memcmp(f->win, dc->format.win, sizeof f->win) != 0)   /* and windows are compiled in */
      return diag_error(d, TJ_ERR_FORMAT,
                        "operand %s does not have the order, format and dtype "
                        "the kernel was compiled for",
                        tj_tensor_name(ops[t]));
  }
  /* Extents, checked in source order (the checker bounds the depth). */
  return check_extents(k->as->lhs, ops, ext, who, d) &&
         check_extents(k->as->rhs, ops, ext, who, d) && check_bounds(k->entry->cin, ext, d);
}

static tj_status kernel_code(int32_t rc);

/* ---- parallel sparse outputs: two-phase row-range assembly ----
 * Rows are split into chunks of equal work; each chunk runs the row-range
 * kernel into a chunk-local output (assemble/evaluate) or straight into
 * the assembled output's values (compute); the chunks are then
 * concatenated (rt_storage_concat). Each chunk allocates its own
 * workspace, so SpGEMM's dense workspace is per thread. A reduction's
 * chunks write partial outputs instead, the first of them (under =) the
 * output itself, combined in chunk order. */
typedef struct RowJob {
  tj_kernel_fn fn;
  int n;                       /* tensor operands */
  tj_storage **st;
  tj_storage **outs;           /* per chunk outputs, or NULL (compute) */
  tj_storage *range;           /* per chunk range descriptors, or NULL */
  int seg;                     /* > 0: operand seg read through views[c] */
  tj_storage *views;
  bool fill;                   /* chunk outputs other than the run's output
                                  start as the identity */
  RtVal identity;
  int32_t *rc;
} RowJob;

/* A partial output of n values, each the root reduction's identity: what
 * a kernel under += does not write before it adds to it. */
static int32_t fill_partial(tj_storage *s, RtVal identity) {
  int64_t n = 1;
  for (int m = 0; m < s->order; m++) n *= s->dims[m];
  if (tj_rt_reserve(s, TJ_ARR_VALS, 0, n ? n : 1)) return TJ_KERNEL_NOMEM;
  if (s->dtype == TJ_F64)
    for (int64_t q = 0; q < n; q++) ((double *)s->vals)[q] = identity.f;
  else
    for (int64_t q = 0; q < n; q++) rt_storage_put(s, q, identity);
  s->vals_len = n;
  return 0;
}

static void run_chunks(void *ctx, int64_t lo, int64_t hi) {
  RowJob *job = ctx;
  for (int64_t c = lo; c < hi; c++) {
    tj_storage *ops[NT_MAX_TENSORS + 1];
    memcpy(ops, job->st, (size_t)job->n * sizeof *ops);
    if (job->outs) ops[0] = job->outs[c];
    if (job->range) ops[job->n] = &job->range[c];
    if (job->seg) ops[job->seg] = &job->views[c];
    job->rc[c] = job->fill && ops[0] != job->st[0] ? fill_partial(ops[0], job->identity) : 0;
    if (!job->rc[c]) job->rc[c] = job->fn(ops);
  }
}

/* A pos array weighing the output's rows: an input's level-1 pos under a
 * dense level-0 of the same extent, or NULL. */
static const void *row_weights(tj_storage **st, int n, int64_t rows, int32_t *w) {
  for (int t = 1; t < n; t++)
    if (st[t]->order >= 2 && st[t]->levels[0].kind == TJ_LVL_DENSE &&
        st[t]->levels[0].size == rows && st[t]->levels[1].kind == TJ_LVL_COMPRESSED &&
        st[t]->levels[1].pos) {
      *w = st[t]->pos_width;
      return st[t]->levels[1].pos;
    }
  return NULL;
}

void drv_kernel_release_chunks(struct tj_kernel *k) {
  for (int c = 0; c < k->nchunks; c++) rt_storage_release(&k->chunks[c]);
  free(k->chunks);
  k->chunks = NULL;
  k->nchunks = 0;
}

/* nchunks chunk outputs shaped like out: the kernel's cached ones when
 * free (*cached set, chunk_lock held), else fresh ones. */
static tj_storage *take_chunks(tj_kernel *k, const tj_storage *out, int nchunks, bool *cached) {
  *cached = pthread_mutex_trylock(&k->chunk_lock) == 0;
  if (*cached) {
    bool same = k->nchunks == nchunks && k->chunks && k->chunks[0].order == out->order &&
                k->chunks[0].dtype == out->dtype && k->chunks[0].pos_width == out->pos_width &&
                k->chunks[0].crd_width == out->crd_width;
    if (!same) {
      drv_kernel_release_chunks(k);
      k->chunks = calloc((size_t)nchunks, sizeof *k->chunks);
      if (!k->chunks) {
        pthread_mutex_unlock(&k->chunk_lock);
        *cached = false;
        return NULL;
      }
      k->nchunks = nchunks;
      for (int c = 0; c < nchunks; c++) rt_storage_empty_like(out, &k->chunks[c]);
    }
    for (int c = 0; c < nchunks; c++) {       /* reuse the arrays, restart the lengths */
      memcpy(k->chunks[c].dims, out->dims, sizeof out->dims);
      for (int l = 0; l < out->order; l++) {
        k->chunks[c].levels[l].size = out->levels[l].size;
        k->chunks[c].levels[l].pos_len = k->chunks[c].levels[l].crd_len = 0;
      }
      k->chunks[c].vals_len = 0;
    }
    return k->chunks;
  }
  tj_storage *chunk = calloc((size_t)nchunks, sizeof *chunk);
  for (int c = 0; chunk && c < nchunks; c++) rt_storage_empty_like(out, &chunk[c]);
  return chunk;
}

static void give_back_chunks(tj_kernel *k, tj_storage *chunk, int nchunks, bool cached) {
  if (cached) {
    pthread_mutex_unlock(&k->chunk_lock);
    return;
  }
  for (int c = 0; chunk && c < nchunks; c++) rt_storage_release(&chunk[c]);
  free(chunk);
}

/* The extent of index v: the dim of the first access in e that uses it. */
static int64_t extent_in(const Expr *e, const IndexVar *v, tj_storage **st) {
  switch (e->kind) {
  case EX_LITERAL: return -1;
  case EX_ACCESS:
    for (int m = 0; m < e->u.access.n; m++)
      if (e->u.access.idx[m] == v) return st[e->u.access.t->id]->dims[m];
    return -1;
  default: {
    Expr *k[2];
    int n = nt_children(e, k);
    int64_t x = -1;
    for (int i = 0; i < n && x < 0; i++) x = extent_in(k[i], v, st);
    return x;
  }
  }
}

/* How a row-chunked reduction's partial outputs combine: by the root
 * operator, a reduction operator (nt_op_is_reduction). */
static RtCombine combine_of(OpKind op) {
  switch (op) {
  case OP_MUL: return RT_COMBINE_MUL;
  case OP_MIN: return RT_COMBINE_MIN;
  case OP_MAX: return RT_COMBINE_MAX;
  case OP_OR: return RT_COMBINE_OR;
  case OP_AND: return RT_COMBINE_AND;
  default: return RT_COMBINE_ADD;
  }
}

/* The work of a run, as the runtime weighs parallel loops: the inputs'
 * stored entries (a dense input's every element). */
static int64_t input_work(tj_storage **st, int n) {
  int64_t w = 0;
  for (int t = 1; t < n; t++) w += st[t]->vals_len;
  return w;
}

/* A reduction into a larger output runs on threads, one partial output
 * each, while PARTIAL_RATIO times its size per thread is at most its work
 * (rows plus stored entries) and the work is at least 16 times the
 * runtime's threshold for parallel loops (2^20 by default). Two threads
 * cost about 0.13 ms more (two forks) plus 3 ns per output value (a
 * partial zeroed, the partials combined): CSC SpMV on random n x n
 * matrices with d entries per column, 1 thread / 2 threads forced, at
 * real-time priority (load 9.5): n = 200 k, d = 2, 4, 6, 8, 16: 0.75x,
 * 1.15x, 1.21x, 1.39x, 1.36x; n = 100 k, d = 8 / 16: 0.91x / 1.36x;
 * n = 50 k, d = 4 / 8 / 16: 0.60x / 0.91x / 1.14x; n = 30 k, d = 16:
 * 0.93x; n = 10 k, d = 8: 0.46x. TJ_PARTIAL_RATIO overrides. */
enum { PARTIAL_RATIO = 4 };

static int64_t partial_ratio(void) {
  const char *env = getenv("TJ_PARTIAL_RATIO");
  long long n = env && *env ? atoll(env) : -1;
  return n >= 0 ? (int64_t)n : PARTIAL_RATIO;
}

/* How many partial outputs a parallel reduction (reduce_rows) writes, one
 * per chunk of the outer loop, or 0: the kernel runs on one thread. Each
 * partial is zeroed by its chunk's kernel and combined value by value:
 * - a small output (at most 2^16 values, 16 per thread times its size
 *   within the work) takes the chunks parallelize(i, s) asks for (4 a
 *   thread by default, balanced when a thread is slow to come): partials
 *   per chunk made CSC and COO SpMV on u50k (50 k rows, 800 k entries)
 *   2-4x slower on two threads, hence the bound on the size;
 * - a larger one, or any of a seg_rows plan (each chunk runs the whole
 *   kernel), takes one chunk per thread (the output itself the first
 *   thread's under =), its values combined by every thread over a slice,
 *   when the work pays for them (PARTIAL_RATIO). */
static int partial_chunks(const CacheEntry *e, tj_storage **st, int threads, int64_t work) {
  int64_t size = 1;
  for (int m = 0; m < st[0]->order; m++) size *= st[0]->dims[m];
  int64_t outer = extent_in(e->as->rhs, e->plan.order[0], st);
  ParStrategy how = e->plan.row_strategy;
  if (!e->plan.seg_rows && size <= (1 << 16) && outer >= 4 * threads &&
      size * 4 * threads * 4 <= work)
    return threads * (how == PAR_STATIC ? 1 : how == PAR_DYNAMIC ? 16 : 4);
  bool pays = size * partial_ratio() * threads <= work && work >= 16 * tj_rt_par_min_work();
  return outer >= threads && pays ? threads : 0;
}

/* How many sparse partial outputs a parallelize(j, partials) into a sparse
 * output writes: one per thread, in evaluate alone (assembly keeps the
 * pattern in one piece; compute would assemble every chunk's again, and
 * ran 1.5-1.9x slower on two threads than the serial compute that gathers
 * along the assembled pattern: y(i) = A(j,i) * x(j), 200 k, 16 and 32 a
 * row, load 14-16); 0 when the outer loop has fewer iterations than
 * threads, or for a vector when PARTIAL_RATIO times its extent per thread
 * exceeds the work (each chunk's workspace and the merge are as long as
 * the extent: 2 entries a row ran 1.8-2.8 ms on one thread and 10-16 ms
 * on two, load 8.5). */
static int sparse_partial_chunks(const CacheEntry *e, LowerPhase ph, tj_storage **st,
                                 int threads, int64_t work) {
  int64_t outer = extent_in(e->as->rhs, e->plan.order[0], st);
  int64_t size = st[0]->order == 1 ? st[0]->dims[0] : 0;
  bool pays = size * partial_ratio() * threads <= work;
  return ph == PHASE_EVALUATE && outer >= threads && pays ? threads : 0;
}

/* The GETT plans of e's kernel that time their candidates at the first
 * run (e's own, or its statements'): for each, its timing key and whether
 * this run times it (no choice in memory nor in the disk cache). Returns
 * how many. The disk is asked once per plan and key: a run that does not
 * time (a failed candidate, TJ_GETT_TUNE=0) leaves no choice, and would
 * ask again. */
static int disk_timed(CacheEntry *e, tj_storage **st, uint64_t *gkey, bool *timing) {
  int n = 0;
  for (int q = 0; q < (e->nseq ? e->nseq : 1); q++) {
    const GettPlan *g = e->nseq ? &e->seq[q].gett : &e->gett;
    uint64_t *probed = e->nseq ? &e->seq[q].gett_probed : &e->gett_probed;
    if (g->method == GETT_LOOPS || !g->tune) continue;
    gkey[n] = rt_gett_tune_key(st, g->words);
    bool probe = rt_gett_tuned_get(gkey[n]) < 0 &&
                 __atomic_exchange_n(probed, gkey[n], __ATOMIC_RELAXED) != gkey[n];
    timing[n] = probe && !drv_disk_gett_load(e, gkey[n]);
    n++;
  }
  return n;
}

/* The level-0 entries of a pos_rows plan's walked operand, when they are
 * the output's level-0 entries (the compute phase writes by them): as many,
 * from position 0. Else -1: the compute kernel runs on one thread. */
static int64_t shared_rows(const CacheEntry *e, tj_storage **st) {
  const tj_storage *b = st[e->plan.pos_rows], *out = st[0];
  if (b->order < 1 || b->levels[0].kind != TJ_LVL_COMPRESSED || !b->levels[0].pos ||
      b->levels[0].pos_len < 2 || out->levels[0].kind != TJ_LVL_COMPRESSED)
    return -1;
  int64_t first = rt_idx(b->levels[0].pos, b->pos_width, 0);
  int64_t end = rt_idx(b->levels[0].pos, b->pos_width, 1);
  return first == 0 && end == out->levels[0].crd_len ? end : -1;
}

/* The rows a chunked run splits: a sparse output's own rows, a pos_rows
 * plan's shared level-0 positions, or, for reductions, the outermost
 * (reduction) loop's extent, an operand's dim. */
static int64_t split_extent(const CacheEntry *e, LowerPhase ph, tj_storage **st) {
  if (e->plan.rangeable) return st[0]->levels[0].size;
  if (e->plan.reduce_rows) return extent_in(e->as->rhs, e->plan.order[0], st);
  return e->plan.pos_rows && ph == PHASE_COMPUTE ? shared_rows(e, st) : -1;
}

/* Combines a reduction's partial outputs into out (values reserved), in
 * chunk order: by slices of the values on every thread when they are at
 * least twice the runtime's threshold (2^17: a fork costs 10-100 us, and
 * one for bcsstk33's 8.7 k values by 8 partials made CSC SpMV's 2-thread
 * run 0.78-1.01x its 1-thread one), by a definition's combine kernel on
 * this thread. */
typedef struct CombineJob {
  tj_storage *out;
  tj_storage **parts;
  int n;
  bool accumulate;
  RtCombine how;
} CombineJob;

static void combine_slice(void *ctx, int64_t lo, int64_t hi) {
  CombineJob *job = ctx;
  rt_storage_combine_range(job->out, job->parts, job->n, job->accumulate, job->how, lo, hi);
}

static tj_status combine_partials(CacheEntry *e, tj_storage *out, tj_storage **parts, int n,
                                  bool acc, Diag *d) {
  if (e->as->root_def) {
    if (!drv_ensure_compiled(e, DRV_COMBINE, d)) return drv_fail(d);
    return rt_storage_fold_partials(out, parts, n, acc, e->bk[DRV_COMBINE].fn);
  }
  int64_t size = 1;
  for (int m = 0; m < out->order; m++) size *= out->dims[m];
  if (size < 2 * tj_rt_par_min_work())
    return rt_storage_sum_partials(out, parts, n, acc, combine_of(e->as->root_op));
  if (tj_rt_reserve(out, TJ_ARR_VALS, 0, size))
    return rt_set_error(TJ_ERR_NOMEM, "out of memory for the output's values");
  CombineJob job = {out, parts, n, acc, combine_of(e->as->root_op)};
  tj_rt_parallel_for_sched(0, size, NULL, 0, NULL, 0, TJ_PAR_STATIC, combine_slice, &job);
  out->vals_len = size;
  return TJ_OK;
}

/* Runs the row variant of phase ph in nchunks chunks of the split extent
 * on the given threads, then joins the chunks' outputs into st[0]. */
static tj_status run_rows(tj_kernel *k, LowerPhase ph, tj_storage **st, int nchunks, Diag *d) {
  CacheEntry *e = k->entry;
  if (!e->plan.rangeable && !e->plan.pos_rows) ph = PHASE_EVALUATE; /* partials: one kernel */
  if (!drv_ensure_compiled(e, DRV_ROWS(ph), d)) return drv_fail(d);
  int n = e->as->ntensors;
  tj_storage *out = st[0];
  int64_t rows = split_extent(e, ph, st);
  ParStrategy how = e->plan.row_strategy;
  if (nchunks > rows) nchunks = (int)rows;
  /* a reduction's first chunk writes the output itself unless it adds to it */
  int own = e->plan.reduce_rows && !e->as->accumulate && !e->plan.out_sparse ? 1 : 0;
  int64_t *bounds = calloc((size_t)nchunks + 1, sizeof *bounds);
  tj_storage *range = calloc((size_t)nchunks, sizeof *range);
  tj_storage **outs = calloc((size_t)nchunks, sizeof *outs);
  bool cached = false;
  int nfresh = nchunks - own;   /* chunk outputs apart from out */
  bool joined = ph != PHASE_COMPUTE;   /* chunk outputs, joined after */
  tj_storage *chunk = joined && nfresh ? take_chunks(k, out, nfresh, &cached) : NULL;
  int32_t *rc = calloc((size_t)nchunks, sizeof *rc);
  tj_status status = TJ_OK;
  if (!bounds || !range || !rc || !outs || (joined && nfresh && !chunk)) {
    status = rt_set_error(TJ_ERR_NOMEM, "out of memory splitting rows");
    goto done;
  }
  for (int c = 0; joined && c < nchunks; c++) outs[c] = c < own ? out : &chunk[c - own];
  int32_t w = st[e->plan.pos_rows]->pos_width;
  const void *weights = e->plan.pos_rows ? st[e->plan.pos_rows]->levels[1].pos   /* may be NULL */
                                         : row_weights(st, n, rows, &w);
  if (how == PAR_STATIC || how == PAR_DYNAMIC) weights = NULL;
  rt_split_rows(0, rows, weights, w, nchunks, bounds);
  for (int c = 0; c < nchunks; c++) {
    range[c].order = 2;
    range[c].dims[0] = bounds[c];
    range[c].dims[1] = bounds[c + 1];
  }
  int last = out->order - 1;
  if (ph == PHASE_COMPUTE && tj_rt_reserve(out, TJ_ARR_VALS, 0, out->levels[last].crd_len)) {
    status = rt_set_error(TJ_ERR_NOMEM, "out of memory for the output's values");
    goto done;
  }
  RowJob job = {e->bk[DRV_ROWS(ph)].fn, n, st, joined ? outs : NULL, range, 0, NULL,
                false, {0}, rc};
  tj_rt_parallel_for_sched(0, nchunks, NULL, 0, NULL, 0,
                           how == PAR_STATIC ? TJ_PAR_STATIC : TJ_PAR_DYNAMIC, run_chunks, &job);
  for (int c = 0; c < nchunks && status == TJ_OK; c++)
    if (rc[c]) status = kernel_code(rc[c]);
  if (status == TJ_OK && joined)
    status = e->plan.rangeable  ? rt_storage_concat(out, outs, nchunks)
             : e->plan.out_sparse ? rt_storage_merge(out, outs, nchunks, combine_of(e->as->root_op))
                                  : combine_partials(e, out, outs, nchunks, e->as->accumulate, d);
  if (status == TJ_OK && ph == PHASE_COMPUTE) out->vals_len = out->levels[last].crd_len;
done:
  give_back_chunks(k, chunk, nfresh, cached);
  free(outs);
  free(range);
  free(bounds);
  free(rc);
  return status;
}

/* The first position from p (at most end) that does not continue the run
 * of equal level-0 coordinates at p - 1 (p > first): a chunk boundary
 * there leaves a run whole (COO `uc`'s duplicates of one entry, which
 * stand for their sum: split, a min.plus SpMV took the least of the
 * parts). */
static int64_t run_end(const tj_storage *a, int64_t first, int64_t p, int64_t end) {
  const void *crd = a->levels[0].crd;
  int32_t cw = a->crd_width;
  if (!crd || p <= first) return p;
  int64_t prev = rt_idx(crd, cw, p - 1);
  while (p < end && rt_idx(crd, cw, p) == prev) p++;
  return p;
}

/* A seg_rows plan's run: operand x's level-0 positions cut into nchunks
 * ranges of about equal length (no run of equal coordinates split: run_end),
 * each read by the whole kernel through a copy of
 * x's storage whose level-0 pos is {lo, hi} (the same crd and vals
 * arrays), into a partial output of its own, combined in chunk order.
 * Under = the first chunk's is the output itself; under += every chunk
 * adds into a partial that starts as the identity (the kernel does not
 * write it first), so a run that fails leaves the output as it was. */
static tj_status run_segments(tj_kernel *k, tj_storage **st, int nchunks, Diag *d) {
  CacheEntry *e = k->entry;
  if (!drv_ensure_compiled(e, PHASE_EVALUATE, d)) return drv_fail(d);
  int x = e->plan.seg_rows, n = e->as->ntensors;
  tj_storage *out = st[0];
  const tj_storage *a = st[x];
  int32_t w = a->pos_width;
  int64_t first = rt_idx(a->levels[0].pos, w, 0), end = rt_idx(a->levels[0].pos, w, 1);
  if (nchunks > end - first) nchunks = end > first ? (int)(end - first) : 1;
  int own = e->as->accumulate ? 0 : 1, nfresh = nchunks - own;
  tj_storage *views = calloc((size_t)nchunks, sizeof *views);
  int64_t *pos = calloc(2 * (size_t)nchunks, sizeof *pos);   /* room for any width */
  tj_storage **outs = calloc((size_t)nchunks, sizeof *outs);
  int32_t *rc = calloc((size_t)nchunks, sizeof *rc);
  bool cached = false;
  tj_storage *chunk = nfresh > 0 ? take_chunks(k, out, nfresh, &cached) : NULL;
  tj_status status = TJ_OK;
  if (!views || !pos || !outs || !rc || (nfresh > 0 && !chunk)) {
    status = rt_set_error(TJ_ERR_NOMEM, "out of memory splitting positions");
    goto done;
  }
  for (int64_t c = 0, lo = first; c < nchunks; c++) {
    outs[c] = c < own ? out : &chunk[c - own];
    views[c] = *a;
    views[c].levels[0].pos = &pos[2 * c];
    views[c].levels[0].pos_len = 2;
    int64_t at = first + (end - first) * (c + 1) / nchunks;
    int64_t hi = c + 1 < nchunks ? run_end(a, first, at > lo ? at : lo, end) : end;
    rt_idx_set(&pos[2 * c], w, 0, lo);
    rt_idx_set(&pos[2 * c], w, 1, hi);
    lo = hi;
  }
  ParStrategy how = e->plan.row_strategy;
  RtVal identity = rt_val_from_double(out->dtype, nt_root_identity(e->as));
  RowJob job = {e->bk[PHASE_EVALUATE].fn, n, st, outs, NULL, x, views,
                e->as->accumulate, identity, rc};
  tj_rt_parallel_for_sched(0, nchunks, NULL, 0, NULL, 0,
                           how == PAR_STATIC ? TJ_PAR_STATIC : TJ_PAR_DYNAMIC, run_chunks, &job);
  for (int c = 0; c < nchunks && status == TJ_OK; c++)
    if (rc[c]) status = kernel_code(rc[c]);
  if (status == TJ_OK)
    status = combine_partials(e, out, outs, nchunks, e->as->accumulate, d);
done:
  give_back_chunks(k, chunk, nfresh, cached);
  free(rc);
  free(outs);
  free(pos);
  free(views);
  return status;
}

static tj_status kernel_code(int32_t rc) {
  if (rc == TJ_KERNEL_NOMEM)
    return rt_set_error(TJ_ERR_NOMEM, "kernel ran out of memory growing its output");
  return rt_set_error(TJ_ERR_INTERNAL, "kernel returned error code %d", rc);
}

static tj_status run_bound(tj_kernel *k, tj_phase phase, tj_tensor *const *operands,
                           int n, bool interpret);

/* A kernel over blocked operands runs on their views (driver_blocked.c),
 * made afresh each run from the given operands or the compile's. */
static tj_status run_blocked(tj_kernel *k, tj_phase phase, tj_tensor *const *operands,
                             int n, bool interpret) {
  Diag d;
  diag_init(&d);
  if (!operands) operands = drv_blocked_orig(k->blk, &n);
  if (n + drv_blocked_masks(k->blk) > NT_MAX_TENSORS)
    return rt_set_error(TJ_ERR_INVALID, "tj_kernel_run: more than %d operands", NT_MAX_TENSORS);
  tj_tensor *store = calloc(NT_MAX_TENSORS, sizeof *store);
  tj_tensor *views[NT_MAX_TENSORS];
  if (!store) return rt_set_error(TJ_ERR_NOMEM, "out of memory");
  if (drv_blocked_rebuilds(k->blk)) phase = TJ_EVALUATE;   /* n_out_of_m: built whole */
  bool made = drv_blocked_views(k->blk, operands, n, store, phase != TJ_ASSEMBLE, views, &d);
  tj_status st = made ? run_bound(k, phase, views, n + drv_blocked_masks(k->blk), interpret)
                      : drv_fail(&d);
  if (made) {   /* the output's values back (on success), padded copies freed */
    tj_status fs = drv_blocked_finish(k->blk, operands, views, n, k->as->tensors[0]->name,
                                      st == TJ_OK);
    if (st == TJ_OK) st = fs;
  }
  free(store);
  return st;
}

static tj_status run_past_standin(tj_kernel *k, tj_phase phase, tj_tensor *const *operands,
                                  int n, bool interpret) {
  if (k->acc) return drv_accum_run(k, phase, operands, n, interpret);
  return drv_run_one(k, phase, operands, n, interpret);
}

static tj_status run(tj_kernel *k, tj_phase phase, tj_tensor *const *operands,
                     int n, bool interpret) {
  if (!k || phase < TJ_ASSEMBLE || phase > TJ_EVALUATE)
    return rt_set_error(TJ_ERR_INVALID, "tj_kernel_run: bad kernel or phase");
  if (k->standin) return drv_standin_run(k, operands, n, interpret, run_past_standin);
  return run_past_standin(k, phase, operands, n, interpret);
}

tj_status drv_run_one(tj_kernel *k, tj_phase phase, tj_tensor *const *operands, int n,
                      bool interpret) {
  if (k->blk) return run_blocked(k, phase, operands, n, interpret);
  return run_bound(k, phase, operands, n, interpret);
}

/* After ASSEMBLE of a += into a sparse output: out (the union of its old
 * pattern and the rhs's) takes back the values it had, before, and the
 * semiring's zero where it had none, so a COMPUTE adds the rhs to them. */
static tj_status keep_values(const tj_kernel *k, tj_tensor *out, tj_tensor *before) {
  tj_dtype dt = tj_tensor_dtype(out);
  RtVal zero = rt_val_from_double(dt, nt_semiring_zero(k->as->semiring));
  int64_t lost;
  tj_status st = rt_storage_carry(rt_tensor_storage(out), rt_tensor_storage(before), zero, &lost);
  if (st == TJ_OK && lost)
    st = rt_set_error(TJ_ERR_INTERNAL, "the assembly of %s dropped %lld of its entries",
                      tj_tensor_name(out), (long long)lost);
  return st;
}

/* Gives out the contents it had before a failed run of a += into it:
 * the arrays of its copy, before (which is left empty). */
static void restore_output(tj_tensor *out, tj_tensor *before) {
  tj_storage *s = rt_tensor_storage(out);
  rt_storage_clear(s);
  *s = *rt_tensor_storage(before);
  rt_storage_detach(rt_tensor_storage(before));
}

/* After a run of a sparse output assembled away from the caller's arrays
 * (callers: its storage before, with them): the result goes back into them
 * where it fits them all; the arrays of its own the storage had before the
 * run are freed (the caller's never are). */
static void release_shadow(tj_storage *out, tj_storage *callers) {
  rt_storage_keep_callers(out, callers);
  rt_storage_clear(callers);   /* frees what was not foreign */
}

/* A sparse output with 8- or 16-bit positions: the kernel stores them
 * narrowed, so a level whose count outgrows posWidth is found after the
 * run. The output is then emptied (under +=, the caller gives it back its
 * old contents) and the run fails with the count. */
static tj_status check_narrow_positions(tj_tensor *out) {
  tj_storage *s = rt_tensor_storage(out);
  for (int l = 0; l < s->order && s->pos_width < 4; l++) {
    if (!s->levels[l].pos) continue;
    tj_status st = rt_check_positions(tj_tensor_name(out), l, s->levels[l].crd_len, s->pos_width);
    if (st == TJ_OK) continue;
    rt_storage_clear(s);
    return st;
  }
  return TJ_OK;
}

/* Whether the plan's vec_layout copies (TTM's C(k,l) read as C(l,k), made
 * at every run) pay at these operands' sizes: while their elements are at
 * most TJ_LAYOUT_COPY_RATIO (default 4) times the other inputs' stored
 * entries. Contiguous lanes saved ~6 ns per entry of openflight_sym's TTM
 * (K = 16) and the copy cost ~0.4 ns per element, so a copy 4x the entries
 * still pays; a C far larger than the sparse operand (16 x 10^6 against
 * 10^5 entries: 128 MB copied, and allocated, per run for a kernel of a
 * millisecond) runs the plain variant instead, reading C in place. */
static bool layout_copy_pays(const CacheEntry *e, tj_tensor **ops) {
  int64_t copy = 0, work = 0;
  for (int t = 1; t < e->as->ntensors; t++) {
    int64_t n = rt_tensor_storage(ops[t])->vals_len;
    if (e->plan.vec_layout[t]) copy += n;
    else work += n;
  }
  if (!copy) return true;
  const char *env = getenv("TJ_LAYOUT_COPY_RATIO");
  double ratio = env && *env ? atof(env) : 4.0;
  return (double)copy <= ratio * (double)work;
}

/* method(sell) runs over A's SELL copy when A is read in place (not a
 * view, not a converted copy), is a CSR matrix the copy takes, and its
 * rows are short enough for the copy to pay (rt_sell_pays); else the
 * kernel's own loops run (the same result). */
static bool sell_ready(const CacheEntry *e, tj_tensor **ops, tj_storage **st) {
  return e->sell_a && !ops[e->sell_a]->base && st[e->sell_a] == rt_tensor_storage(ops[e->sell_a]) &&
         rt_sell_form(st[e->sell_a]) && rt_sell_pays(st[e->sell_a]) && st[e->sell_x]->vals &&
         st[e->sell_x]->vals_len >= st[e->sell_x]->dims[0];
}

/* y (+)= A x over A's SELL copy (built at the first such run, kept on A). */
static tj_status run_sell(const CacheEntry *e, tj_tensor **ops, tj_storage **st) {
  const RtSell *sell;
  tj_status status = rt_sell_get(ops[e->sell_a], &sell);
  if (status != TJ_OK) return status;
  tj_storage *y = st[0];
  if (tj_rt_reserve(y, TJ_ARR_VALS, 0, y->dims[0])) {
    rt_sell_release(sell);
    return rt_set_error(TJ_ERR_NOMEM, "out of memory for the values of %s", tj_tensor_name(ops[0]));
  }
  y->vals_len = y->dims[0];
  rt_sell_spmv(sell, st[e->sell_x]->vals, y->vals, e->as->accumulate);
  rt_sell_release(sell);
  return TJ_OK;
}

/* run() of a kernel whose operands are bound as they are. */
static tj_status run_bound(tj_kernel *k, tj_phase phase, tj_tensor *const *operands,
                           int n, bool interpret) {
  Diag d;
  diag_init(&d);
  tj_tensor *ops[NT_MAX_TENSORS];
  if (operands) {
    if (!drv_bind(k->as, operands, n, ops, &d)) return drv_fail(&d);
  } else {
    memcpy(ops, k->bound, sizeof ops);
  }
  if (!check_operands(k, ops, &d)) return drv_fail(&d);
  CacheEntry *e = k->entry;
  LowerPhase ph = phase == TJ_ASSEMBLE ? PHASE_ASSEMBLE
                  : phase == TJ_COMPUTE ? PHASE_COMPUTE : PHASE_EVALUATE;
  bool plain = !layout_copy_pays(e, ops);   /* the variant reading every operand as declared */
  int var = plain ? (int)DRV_PLAIN(ph) : (int)ph;
  if (!interpret && !drv_ensure_compiled(e, var, &d)) return drv_fail(&d);
  if (interpret && !drv_ensure_lowered(e, var, &d)) return drv_fail(&d);
  /* += into a sparse output reads a copy of the output as it was (a copy,
   * not the arrays themselves: a kernel writes the output's in place) */
  int old = k->as->old_output;
  tj_tensor *before = NULL;
  if (old) {
    tj_status cs = rt_tensor_copy(ops[0], &before);
    if (cs != TJ_OK) return cs;
    ops[old] = before;
  }
  /* A sparse output over the caller's arrays is assembled into arrays of
   * its own, which go back into the caller's after the run when all fit
   * (a kernel grows one array at a time: written in place, a caller could
   * see new positions over its old, shorter coordinates). */
  tj_storage *out_st = rt_tensor_storage(ops[0]), callers = *out_st;
  bool shadow = ph != PHASE_COMPUTE && out_st->foreign &&
                lv_format_has_sparse(tj_tensor_format(ops[0]));
  tj_tensor *tmp[NT_MAX_TENSORS] = {0};
  tj_storage *st[NT_MAX_TENSORS];
  tj_status status = TJ_OK;
  bool kept = false;   /* k->patterns in use: pattern_lock held */
  for (int t = 0; t < e->as->ntensors; t++)
    if (e->plan.pattern[t] && !kept) kept = pthread_mutex_trylock(&k->pattern_lock) == 0;
  for (int t = 0; t < e->as->ntensors && status == TJ_OK; t++) {
    /* Converted operands, and inputs never packed (tj_tensor_new without
     * tj_tensor_pack: no arrays yet, read as empty), run on a packed copy;
     * a mask's pattern is the kernel's kept one when free. */
    bool conv = e->plan.convert[t] && !(plain && e->plan.vec_layout[t]);
    if (conv || (t > 0 && !rt_tensor_is_packed(ops[t]))) {
      const tj_format *f = conv ? &e->plan.fmt[t] : tj_tensor_format(ops[t]);
      tj_tensor *pat = NULL;
      bool rebuilt;
      status = !e->plan.pattern[t] ? rt_tensor_convert_all(ops[t], f, &tmp[t])
               : kept ? rt_pattern_refresh(&k->patterns[t], ops[t], f, &pat, &rebuilt)
                      : rt_tensor_pattern(ops[t], f, &tmp[t]);
      if (status == TJ_OK) st[t] = rt_tensor_storage(pat ? pat : tmp[t]);
    } else {
      st[t] = rt_tensor_storage(ops[t]);
    }
  }
  tj_rt_set_threads(k->opts.nthreads);
  int threads = tj_rt_threads();
  /* Split rows across threads only with enough work to share (the runtime's
   * threshold for parallel loops); else the kernel runs on this thread. */
  int64_t work = status == TJ_OK ? input_work(st, e->as->ntensors) : 0;
  /* parallelize(i, s) cuts a sparse output's rows into one chunk of equal
   * rows per thread (static), 16 of equal rows per thread handed out as
   * threads free up (dynamic), or 4 per thread of equal rows plus nonzeros
   * (balanced, the default); a reduction's chunks, partial_chunks. */
  bool shared = !interpret && !plain && threads > 1 && work >= tj_rt_par_min_work();
  ParStrategy how = e->plan.row_strategy;
  int nchunks = !shared ? 0
                : e->plan.reduce_rows && e->plan.out_sparse
                    ? sparse_partial_chunks(e, ph, st, threads, work)
                : e->plan.reduce_rows || e->plan.seg_rows
                    ? (phase != TJ_ASSEMBLE ? partial_chunks(e, st, threads, work) : 0)
                : !e->plan.rangeable && !e->plan.pos_rows ? 0
                : split_extent(e, ph, st) < 4 * threads ? 0
                : threads * (how == PAR_STATIC ? 1 : how == PAR_DYNAMIC ? 16 : 4);
  bool ran = status == TJ_OK;   /* the kernel writes the output from here */
  shadow = shadow && ran;
  if (shadow) rt_storage_detach(out_st);
  bool sell = status == TJ_OK && !interpret && ph != PHASE_ASSEMBLE && sell_ready(e, ops, st);
  if (sell) {
    status = run_sell(e, ops, st);
  } else if (status == TJ_OK && nchunks && e->plan.seg_rows) {
    status = run_segments(k, st, nchunks, &d);
  } else if (status == TJ_OK && nchunks) {
    status = run_rows(k, ph, st, nchunks, &d);
  } else if (status == TJ_OK) {
    /* A GETT kernel (or statement of a sequence) that times its candidates
     * at the first run takes a choice kept in the disk cache, and keeps the
     * one it makes there. */
    uint64_t gkey[NT_SEQ_MAX];
    bool timing[NT_SEQ_MAX];
    int ng = !interpret && e->disk && ph != PHASE_ASSEMBLE ? disk_timed(e, st, gkey, timing) : 0;
    int32_t rc = interpret ? lir_interp(e->lir[var], st, &d) : e->bk[var].fn(st);
    if (!diag_ok(&d)) status = drv_fail(&d);
    else if (rc != 0) status = kernel_code(rc);
    for (int q = 0; q < ng; q++)
      if (timing[q] && status == TJ_OK) drv_disk_gett_save(e, gkey[q]);
  }
  if (kept) pthread_mutex_unlock(&k->pattern_lock);
  if (ran) rt_tensor_touch(ops[0]);   /* its SELL copy, if any, is stale */
  for (int t = 0; t < NT_MAX_TENSORS; t++) tj_tensor_free(tmp[t]);
  if (status == TJ_OK && ph != PHASE_COMPUTE) status = check_narrow_positions(ops[0]);
  if (before && status == TJ_OK && ph == PHASE_ASSEMBLE) status = keep_values(k, ops[0], before);
  if (before && ran && status != TJ_OK) restore_output(ops[0], before);   /* no data lost */
  if (shadow) release_shadow(out_st, &callers);
  tj_tensor_free(before);
  return status;
}

tj_status tj_kernel_run(tj_kernel *k, tj_phase phase, tj_tensor *const *operands, int n) {
  return run(k, phase, operands, n, false);
}

tj_status drv_kernel_interpret(tj_kernel *k, tj_phase phase, tj_tensor *const *operands,
                               int n) {
  return run(k, phase, operands, n, true);
}

tj_status tj_reference(const char *expr, tj_tensor *const *operands, int n) {
  return tj_reference_opts(expr, operands, n, NULL);
}

tj_status tj_reference_opts(const char *expr, tj_tensor *const *operands, int n,
                            const tj_options *opts) {
  if (!expr || (n > 0 && !operands))
    return rt_set_error(TJ_ERR_INVALID, "tj_reference: NULL argument");
  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d);
  double *dense[NT_MAX_TENSORS] = {0};
  uint8_t *stored[NT_MAX_TENSORS] = {0};
  tj_tensor *ops[NT_MAX_TENSORS];
  tj_status st = TJ_OK;
  Assignment *as = NULL;
  if (!arena_reserve(&a, 1 << 16)) {
    diag_error(&d, TJ_ERR_NOMEM, "out of memory");
  } else {
    as = drv_front_end(&a, expr, operands, n, opts, &d);
    if (a.failed) {
      as = NULL;
      if (diag_ok(&d)) diag_error(&d, TJ_ERR_NOMEM, "out of memory while parsing");
    }
  }
  if (!as || !drv_bind(as, operands, n, ops, &d)) {
    st = drv_fail(&d);
    goto done;
  }
  /* Every tensor densified with its pattern: the operands' say which
   * entries are absent, the output's receives which ones exist. */
  for (int t = 0; t < as->ntensors && st == TJ_OK; t++) {
    int64_t size = 1;
    bool fits = true;
    for (int m = 0; m < tj_tensor_order(ops[t]); m++) {
      int64_t dim = tj_tensor_dim(ops[t], m);
      fits = fits && (dim == 0 || size <= (int64_t)(SIZE_MAX / sizeof(double)) / dim);
      size = fits ? size * dim : 0;
    }
    size_t cells = (size_t)(size ? size : 1);
    bool sparse = lv_format_has_sparse(tj_tensor_format(ops[t]));
    dense[t] = fits ? calloc(cells, sizeof(double)) : NULL;
    if (dense[t] && (sparse || t == 0)) stored[t] = calloc(cells, 1);
    if (!dense[t] || ((sparse || t == 0) && !stored[t]))
      st = rt_set_error(TJ_ERR_NOMEM, "reference: out of memory densifying %s (%s)",
                        tj_tensor_name(ops[t]), fits ? "no room" : "more values than memory");
    else if (t > 0 || as->accumulate)
      st = rt_tensor_to_dense(ops[t], dense[t], t > 0 ? stored[t] : NULL);
  }
  if (st == TJ_OK) {
    uint8_t *out_stored = stored[0];
    stored[0] = NULL; /* the output is no operand */
    RefEvalIn in = {(const uint8_t *const *)stored,
                    lv_format_has_sparse(tj_tensor_format(ops[0])), out_stored};
    if (!nt_ref_eval(as, dense, &in, &d)) st = drv_fail(&d);
    if (st == TJ_OK) st = rt_tensor_from_dense(ops[0], dense[0], out_stored);
    stored[0] = out_stored;
  }
done:
  for (int t = 0; t < NT_MAX_TENSORS; t++) free(dense[t]), free(stored[t]);
  arena_free(&a);
  return st;
}

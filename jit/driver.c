/* The compile driver: the pipeline behind tj_compile, as one list of calls
 *   parse -> check -> concrete notation (schedule) -> plan -> lower -> backend
 * and the in-memory kernel cache. A cache key is the expression printed
 * with tensors and indices renamed by first use (T0.., i0..), plus each
 * operand's format, dtype and widths, the schedule, the codegen options and
 * the target; dims are not in it, because kernels read dims at run time.
 * A hit costs the parse and check of the expression plus one hash lookup.
 *
 * The cache's size: a context keeps at most `limit` entries (tj_context_set_
 * cache_limit, TJ_KERNEL_CACHE_MAX; DRV_CACHE_LIMIT by default) and at most
 * `max_bytes` bytes of them (tj_context_set_cache_bytes, TJ_KERNEL_CACHE_
 * BYTES; no limit by default), an entry's bytes being entry_size's
 * estimate, updated whenever it lowers or compiles a variant. Entries are
 * kept in order of use; past either limit the least recently used entry that
 * no tj_kernel handle holds is evicted: its machine code is removed from
 * the JIT (LLJIT resource trackers, through the backend's release) and its
 * IR freed. A handle pins its entry, so a kernel that is running, or can
 * still be run, always has its code; tj_kernel_free lets an entry go.
 */
#include "driver.h"
#include "../ir/level.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


tj_status drv_fail(const Diag *d) {
  return rt_set_error(d->status == TJ_OK ? TJ_ERR_INTERNAL : d->status, "%s", d->msg);
}

tj_options tj_options_default(void) {
  return (tj_options){.opt_level = 3};
}

/* Entries a context keeps unless told otherwise: a typical entry costs
 * 30-70 KB (its machine code in the JIT, its loop IR), so about 50 MB. */
#define DRV_CACHE_LIMIT 1024

/* The environment variable `name` as a count (0: no limit), *v unchanged
 * when it is unset; with suffixes (K, M, G: powers of 1024) when `bytes`. */
static tj_status limit_from_env(const char *name, bool bytes, size_t *v) {
  const char *s = getenv(name);
  if (!s) return TJ_OK;
  char *end;
  errno = 0;
  unsigned long long n = strtoull(s, &end, 10);
  bool digits = end != s;
  int shift = !bytes || !*end ? 0 : strchr("kK", *end) ? 10 : strchr("mM", *end) ? 20
              : strchr("gG", *end) ? 30 : -1;
  if (shift > 0) end++;
  if (!digits || *end || shift < 0 || errno || s[0] == '-' || n > (SIZE_MAX >> shift))
    return rt_set_error(TJ_ERR_INVALID, "%s='%s' is not a count of %s (0: no limit)", name,
                        s, bytes ? "bytes (digits, then optionally K, M or G)" : "kernels");
  *v = (size_t)n << shift;
  return TJ_OK;
}

tj_status tj_context_new(tj_context **out) {
  if (!out) return rt_set_error(TJ_ERR_INVALID, "tj_context_new: out is NULL");
  size_t limit = DRV_CACHE_LIMIT, max_bytes = 0;
  if (limit_from_env("TJ_KERNEL_CACHE_MAX", false, &limit) != TJ_OK ||
      limit_from_env("TJ_KERNEL_CACHE_BYTES", true, &max_bytes) != TJ_OK)
    return TJ_ERR_INVALID;
  tj_context *cx = calloc(1, sizeof *cx);
  if (!cx) return rt_set_error(TJ_ERR_NOMEM, "out of memory creating a context");
  pthread_mutex_init(&cx->lock, NULL);
  cx->limit = limit;
  cx->max_bytes = max_bytes;
  const char *dir = getenv("TJ_CACHE_DIR");   /* "" asks for the default */
  tj_status st = dir ? tj_context_set_cache_dir(cx, dir) : TJ_OK;
  if (st != TJ_OK) {
    tj_context_free(cx);
    return st;
  }
  *out = cx;
  return TJ_OK;
}

/* The folder is opened and checked lazily (drv_disk_open), so setting one
 * costs nothing until a kernel needs it; a refusal is a warning, not an error. */
tj_status tj_context_set_cache_dir(tj_context *cx, const char *dir) {
  if (!cx) return rt_set_error(TJ_ERR_INVALID, "context is NULL");
  DiskCache *dc = NULL;
  if (dir) {
    dc = calloc(1, sizeof *dc);
    if (dc) dc->path = strdup(dir);
    if (!dc || !dc->path) {
      free(dc);
      return rt_set_error(TJ_ERR_NOMEM, "out of memory");
    }
    dc->fd = -1;
  }
  pthread_mutex_lock(&cx->lock);
  if (dc) {
    dc->next = cx->disks;
    cx->disks = dc;
  }
  cx->disk = dc;
  pthread_mutex_unlock(&cx->lock);
  return TJ_OK;
}

static void entry_free(CacheEntry *e) {
  for (int v = 0; v < DRV_VARIANTS; v++)
    if (e->compiled[v]) e->be->release(e->bstate, &e->bk[v]);
  arena_free(&e->arena);
  pthread_mutex_destroy(&e->lock);
  free(e->key);
  free(e);
}

static void entries_free(CacheEntry *e) {
  for (CacheEntry *n; e; e = n) {
    n = e->next;
    entry_free(e);
  }
}

/* ---- the order of use (cx locked) ---- */

static void lru_unlink(tj_context *cx, CacheEntry *e) {
  if (e->prev) e->prev->next = e->next;
  else cx->entries = e->next;
  if (e->next) e->next->prev = e->prev;
  else cx->entries_tail = e->prev;
  e->next = e->prev = NULL;
  cx->nentries--;
  cx->bytes -= e->bytes;
}

static void lru_push_front(tj_context *cx, CacheEntry *e) {
  e->prev = NULL;
  e->next = cx->entries;
  if (cx->entries) cx->entries->prev = e;
  else cx->entries_tail = e;
  cx->entries = e;
  cx->nentries++;
  cx->bytes += e->bytes;
}

static bool over_limits(const tj_context *cx) {
  return (cx->limit && cx->nentries > cx->limit) || (cx->max_bytes && cx->bytes > cx->max_bytes);
}

/* Unlinks least recently used entries no handle holds until cx keeps no
 * more than its limits; returns them (linked by next) for entries_free,
 * which the caller runs after unlocking. */
static CacheEntry *lru_trim(tj_context *cx) {
  CacheEntry *victims = NULL;
  for (CacheEntry *e = cx->entries_tail, *p; e && over_limits(cx); e = p) {
    p = e->prev;
    if (e->refs > 0) continue;
    lru_unlink(cx, e);
    e->next = victims;
    victims = e;
    cx->evictions++;
  }
  return victims;
}

/* Drops one reference to e and trims the cache. */
static void entry_unref(tj_context *cx, CacheEntry *e) {
  pthread_mutex_lock(&cx->lock);
  e->refs--;
  CacheEntry *victims = lru_trim(cx);
  pthread_mutex_unlock(&cx->lock);
  entries_free(victims);
}

tj_status tj_context_set_cache_limit(tj_context *cx, size_t max_kernels) {
  if (!cx) return rt_set_error(TJ_ERR_INVALID, "context is NULL");
  pthread_mutex_lock(&cx->lock);
  cx->limit = max_kernels;
  CacheEntry *victims = lru_trim(cx);
  pthread_mutex_unlock(&cx->lock);
  entries_free(victims);
  return TJ_OK;
}

tj_status tj_context_set_cache_bytes(tj_context *cx, size_t max_bytes) {
  if (!cx) return rt_set_error(TJ_ERR_INVALID, "context is NULL");
  pthread_mutex_lock(&cx->lock);
  cx->max_bytes = max_bytes;
  CacheEntry *victims = lru_trim(cx);
  pthread_mutex_unlock(&cx->lock);
  entries_free(victims);
  return TJ_OK;
}

/* An entry's size: the memory its machine code and data take in the JIT
 * (BackendKernel.code_bytes of each compiled variant), its arena (key,
 * plan, loop IR) and its struct. Call with e->lock held. */
static size_t entry_size(const CacheEntry *e) {
  size_t n = sizeof *e + strlen(e->key) + 1 + e->arena.total;
  for (int v = 0; v < DRV_VARIANTS; v++)
    if (e->compiled[v]) n += e->bk[v].code_bytes;
  return n;
}

/* Records e's size after it grew (call with e->lock held; e is in use, so
 * it stays) and unlinks what the limits then evict: returned for
 * entries_free after e->lock is released. Locks: e->lock, then cx->lock. */
static CacheEntry *entry_account(CacheEntry *e) {
  size_t now = entry_size(e);
  tj_context *cx = e->cx;
  pthread_mutex_lock(&cx->lock);
  cx->bytes += now - e->bytes;   /* e is linked: its bytes are in cx->bytes */
  e->bytes = now;
  CacheEntry *victims = lru_trim(cx);
  pthread_mutex_unlock(&cx->lock);
  return victims;
}

tj_status tj_context_cache_stats(tj_context *cx, tj_cache_stats *out) {
  if (!cx || !out) return rt_set_error(TJ_ERR_INVALID, "tj_context_cache_stats: NULL argument");
  pthread_mutex_lock(&cx->lock);
  *out = (tj_cache_stats){.entries = cx->nentries, .limit = cx->limit, .hits = cx->hits,
                          .misses = cx->misses, .evictions = cx->evictions,
                          .bytes = cx->bytes, .byte_limit = cx->max_bytes};
  for (CacheEntry *e = cx->entries; e; e = e->next) out->in_use += e->refs > 0;
  pthread_mutex_unlock(&cx->lock);
  return TJ_OK;
}

static void kernel_free(struct tj_kernel *k) {
  drv_kernel_release_chunks(k);
  drv_blocked_free(k->blk);
  drv_accum_free(k->acc);
  drv_standin_free(k->standin);
  pthread_mutex_destroy(&k->chunk_lock);
  for (int t = 0; t < NT_MAX_TENSORS; t++) rt_pattern_free(&k->patterns[t]);
  pthread_mutex_destroy(&k->pattern_lock);
  arena_free(&k->arena);
  free(k);
}

void drv_kernel_own(tj_kernel *k) {
  tj_context *cx = k->cx;
  pthread_mutex_lock(&cx->lock);
  if (k->prev) k->prev->next = k->next;
  else cx->kernels = k->next;
  if (k->next) k->next->prev = k->prev;
  k->next = k->prev = NULL;
  pthread_mutex_unlock(&cx->lock);
}

void drv_kernel_drop(tj_kernel *k) {
  if (!k) return;
  entry_unref(k->cx, k->entry);
  kernel_free(k);
}

void tj_kernel_free(tj_kernel *k) {
  if (!k) return;
  drv_kernel_own(k);
  drv_kernel_drop(k);
}

void tj_context_free(tj_context *cx) {
  if (!cx) return;
  for (struct tj_kernel *k = cx->kernels, *n; k; k = n) {
    n = k->next;
    kernel_free(k);
  }
  entries_free(cx->entries);
  for (Engine *g = cx->engines, *n; g; g = n) {
    n = g->next;
    g->be->close(g->state);
    free(g->cpu);
    free(g->features);
    free(g);
  }
  for (DiskCache *dc = cx->disks, *n; dc; dc = n) {
    n = dc->next;
    drv_disk_free(dc);
  }
  pthread_mutex_destroy(&cx->lock);
  free(cx);
}

static bool same_str(const char *a, const char *b) {
  return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* The backend an option selects; NULL with d set for an unknown one. */
static const Backend *backend_of(const tj_options *o, Diag *d) {
  if (o->backend == TJ_BACKEND_LLVM) return &backend_llvm;
  if (o->backend == TJ_BACKEND_C) return &backend_c;
  diag_error(d, TJ_ERR_INVALID, "unknown backend %d (TJ_BACKEND_LLVM or TJ_BACKEND_C)",
             o->backend);
  return NULL;
}

/* The state of backend be for a cpu/feature pair, opened on first use (cx
 * locked). */
static void *engine_for(tj_context *cx, const Backend *be, const tj_options *o, Diag *d) {
  for (Engine *g = cx->engines; g; g = g->next)
    if (g->be == be && same_str(g->cpu, o->cpu) && same_str(g->features, o->features))
      return g->state;
  Engine *g = calloc(1, sizeof *g);
  if (!g) return diag_error(d, TJ_ERR_NOMEM, "out of memory"), NULL;
  g->be = be;
  g->state = be->open(o->cpu, o->features, d);
  if (!g->state) {
    free(g);
    return NULL;
  }
  g->cpu = o->cpu ? strdup(o->cpu) : NULL;
  g->features = o->features ? strdup(o->features) : NULL;
  g->next = cx->engines;
  cx->engines = g;
  return g->state;
}

bool drv_bind(const Assignment *as, tj_tensor *const *ops, int n,
              tj_tensor **out, Diag *d) {
  for (int t = 0; t < as->ntensors; t++) {
    out[t] = NULL;
    for (int k = 0; k < n; k++)
      if (ops[k] && strcmp(tj_tensor_name(ops[k]), as->tensors[t]->name) == 0) {
        if (out[t] && out[t] != ops[k])
          return diag_error(d, TJ_ERR_INVALID, "two operands are named '%s'",
                            as->tensors[t]->name);
        out[t] = ops[k];
      }
    if (t > 0 && t == as->old_output) out[t] = out[0];   /* its contents before the run */
    if (!out[t])
      return diag_error(d, TJ_ERR_INVALID,
                        "no operand named '%s' was given for the expression",
                        as->tensors[t]->name);
  }
  if (as->ntensors > 0 && tj_tensor_is_view(out[0]))
    return diag_error(d, TJ_ERR_INVALID, "output %s is a view (a slice of another tensor); "
                      "a kernel writes into a tensor of its own", as->tensors[0]->name);
  /* a view of the output would read arrays the run reallocates or zeroes */
  for (int t = 1; t < as->ntensors; t++)
    if (t != as->old_output && out[t]->base == out[0])
      return diag_error(d, TJ_ERR_INVALID, "operand %s is a view of the output %s, which the "
                        "run overwrites; convert the view into a tensor of its own first",
                        as->tensors[t]->name, as->tensors[0]->name);
  return true;
}

static void decl_of(tj_tensor *t, TensorDecl *dcl) {
  memset(dcl, 0, sizeof *dcl);
  dcl->name = tj_tensor_name(t);
  dcl->order = tj_tensor_order(t);
  for (int m = 0; m < dcl->order; m++) dcl->dims[m] = tj_tensor_dim(t, m);
  dcl->dtype = tj_tensor_dtype(t);
  dcl->format = *tj_tensor_format(t);
  if (rt_format_blocked(&dcl->format)) {
    /* The reference reads a blocked tensor by its dims: declared with one
     * level per dim, sparse where one of the dim's levels is. */
    tj_format f = tj_format_dense(dcl->order);
    for (int l = 0; l < dcl->format.order; l++)
      if (!rt_level_type(dcl->format.levels[l]) ||
          rt_level_type(dcl->format.levels[l])->kind != TJ_LVL_DENSE)
        f.levels[dcl->format.mode_order[l]] = 's';
    dcl->format = f;
  }
}

/* Whether some tensor of as or some declaration is named name. */
static bool name_taken(const Assignment *as, const TensorDecl *decls, int nd, const char *name) {
  for (int t = 0; t < as->ntensors; t++)
    if (strcmp(as->tensors[t]->name, name) == 0) return true;
  for (int k = 0; k < nd; k++)
    if (strcmp(decls[k].name, name) == 0) return true;
  return false;
}

/* `A(..) += rhs` into an output declared sparse becomes `A(..) = A_old(..) +
 * rhs` (nt_accumulate_as_union), A_old declared like A under the first
 * name A_old, A_old_, ... that no tensor or operand has; drv_bind gives it
 * A, and a run reads a copy of A's contents from before the run. */
static bool accumulate_sparse(Arena *a, Assignment *as, TensorDecl *decls, int *nd, Diag *d) {
  const TensorDecl *out = NULL;
  for (int k = 0; k < *nd && !out; k++)
    if (strcmp(decls[k].name, as->tensors[0]->name) == 0) out = &decls[k];
  if (!as->accumulate || !out || !lv_format_has_sparse(&out->format)) return true;
  if (*nd == NT_MAX_TENSORS)
    return diag_error(d, TJ_ERR_INVALID, "more than %d operands given (NT_MAX_TENSORS)",
                      NT_MAX_TENSORS);
  size_t len = strlen(out->name) + 5;
  char *name = arena_alloc(a, len + 1);
  if (!name) return diag_error(d, TJ_ERR_NOMEM, "out of memory");
  snprintf(name, len + 1, "%s_old", out->name);
  while (name_taken(as, decls, *nd, name)) {
    char *longer = arena_alloc(a, ++len + 1);
    if (!longer) return diag_error(d, TJ_ERR_NOMEM, "out of memory");
    snprintf(longer, len + 1, "%s_", name);
    name = longer;
  }
  decls[*nd] = *out;
  decls[(*nd)++].name = name;
  return nt_accumulate_as_union(a, as, name, d);
}

/* drv_front_end; with lower, a `+=` into a sparse output rewritten as a
 * union and the semiring applied, else the assignment as written, checked
 * (its sums placed for the semiring) but its + and * not rewritten. */
static Assignment *front_end(Arena *a, const char *expr, tj_tensor *const *ops, int n,
                             const tj_options *o, bool lower, Diag *d) {
  const char *semiring = o ? o->semiring : NULL;
  const NtSemiring *sr = nt_semiring(semiring);
  if (!sr) {
    char names[256];
    nt_semiring_names(names, sizeof names);
    return diag_error(d, TJ_ERR_INVALID, "unknown semiring '%s' (one of: %s)", semiring,
                      names), NULL;
  }
  NtDefs *defs = o && o->defs ? arena_alloc(a, sizeof *defs) : NULL;
  if (o && o->defs && (!defs || !nt_parse_defs(a, o->defs, defs, d))) {
    if (!defs) diag_error(d, TJ_ERR_NOMEM, "out of memory");
    return NULL;
  }
  Assignment *as = nt_parse_with(a, expr, defs, d);
  if (!as) return NULL;
  /* the sums are placed (nt_check) knowing whether the semiring's mul
   * distributes over its add; nt_apply_semiring then rewrites + and * */
  if (sr != nt_semiring(NULL)) as->semiring = sr;
  TensorDecl decls[NT_MAX_TENSORS];
  int nd = 0;
  for (int k = 0; k < n; k++) {
    if (!ops[k]) continue;
    if (nd == NT_MAX_TENSORS)
      return diag_error(d, TJ_ERR_INVALID, "more than %d operands given (NT_MAX_TENSORS)",
                        NT_MAX_TENSORS), NULL;
    decl_of(ops[k], &decls[nd++]);
  }
  if ((lower && !accumulate_sparse(a, as, decls, &nd, d)) ||
      !nt_check(a, as, decls, nd, NULL, 0, d) || (lower && !nt_apply_semiring(a, as, sr, d)))
    return NULL;
  return as;
}

Assignment *drv_front_end(Arena *a, const char *expr, tj_tensor *const *ops,
                             int n, const tj_options *o, Diag *d) {
  return front_end(a, expr, ops, n, o, true, d);
}

tj_tensor *drv_operand_named(tj_tensor *const *ops, int n, const char *name) {
  for (int k = 0; k < n; k++)
    if (ops[k] && !strcmp(tj_tensor_name(ops[k]), name)) return ops[k];
  return NULL;
}

Assignment *drv_notation(Arena *a, const char *expr, tj_tensor *const *ops, int n,
                         const tj_options *o, Diag *d) {
  return front_end(a, expr, ops, n, o, false, d);
}

/* The canonical key: renamed expression, formats, schedule, options. */
static char *canonical_key(const Assignment *as, const char *schedule,
                           const tj_options *o) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return NULL;
  const char *tn[NT_MAX_TENSORS], *in[NT_MAX_INDICES];
  char tbuf[NT_MAX_TENSORS][8], ibuf[NT_MAX_INDICES][8];
  for (int t = 0; t < as->ntensors; t++) {
    tn[t] = as->tensors[t]->name;
    snprintf(tbuf[t], 8, "T%d", t);
    as->tensors[t]->name = tbuf[t];
  }
  for (int v = 0; v < as->nindices; v++) {
    in[v] = as->indices[v]->name;
    snprintf(ibuf[v], 8, "i%d", v);
    as->indices[v]->name = ibuf[v];
  }
  nt_print(f, as);
  for (int t = 0; t < as->ntensors; t++) as->tensors[t]->name = tn[t];
  for (int v = 0; v < as->nindices; v++) as->indices[v]->name = in[v];
  for (int t = 0; t < as->ntensors; t++) {
    const TensorDecl *dc = &as->tensors[t]->decl;
    char fb[640];
    tj_format_print(&dc->format, fb, sizeof fb);
    fprintf(f, "|T%d:%s:%d:%d:%d", t, fb, dc->dtype, dc->format.pos_width,
            dc->format.crd_width);
    for (int l = 0; l < dc->format.order; l++) {   /* block windows are compiled in */
      const tj_window *w = &dc->format.win[l];
      if (w->block)
        fprintf(f, ":w%d=%d,%d,%lld,%lld,%lld", l, w->block, w->k, (long long)w->lead,
                (long long)w->size, (long long)w->stride);
    }
  }
  /* Settings read from the environment that change the generated code. */
  const char *pipe = getenv("TJ_LLVM_PIPELINE");
  fprintf(f, "|pipe=%s|gather=%d|mtail=%d|promote=%d|peel=%d|pf=%d", pipe ? pipe : "",
          drv_env_on("TJ_VECTOR_GATHER"), drv_env_on("TJ_MASKED_TAIL"),
          drv_env_on("TJ_PROMOTE"), drv_peel_width(), drv_prefetch_ahead());
  /* A dense contraction's method and blocking depend on its extents. */
  char why[160];   /* a sequence's statements may be dense contractions */
  if (lower_gett_form(as) || nt_sequence_why_not(as, why, sizeof why)) {
    const char *blk = getenv("TJ_GETT_BLOCK");
    fprintf(f, "|gett=%s|ext", blk ? blk : "");
    for (int v = 0; v < as->nindices; v++) fprintf(f, ",%lld", (long long)as->indices[v]->extent);
  }
  /* Vector tiers are emitted up to the extent of their index (lower_tier_cap). */
  fprintf(f, "|tiers");
  for (int v = 0; v < as->nindices; v++) fprintf(f, ",%d", lower_tier_cap(as->indices[v]->extent));
  fprintf(f, "|sr=%s", as->semiring ? as->semiring->name : "");
  /* a definition's reduction prints as its name: its body is in the text */
  fprintf(f, "|defs=%s", o && o->defs ? o->defs : "");
  /* The schedule names indices by the user's names: key them as given. */
  fprintf(f, "|s=%s|O%d|v%d|lv%d|uj%d|cpu=%s|f=%s|lat%d|sc%d|be%d", schedule ? schedule : "",
          o->opt_level, o->no_vectorize, o->no_llvm_vectorize, o->no_unroll_jam,
          o->cpu ? o->cpu : "host", o->features ? o->features : "host", drv_lattice_max(),
          drv_scatter_min(), o->backend);
  if (schedule) {
    /* index names matter in a schedule: record the renaming */
    for (int v = 0; v < as->nindices; v++) fprintf(f, "|%s", as->indices[v]->name);
  }
  fclose(f);
  return buf;
}

/* ---- the compiler's passes, in order ----
 *
 *   front end    parse, check extents and dtypes, place the sums    ir/
 *   notation     concrete index notation, the schedule applied      ir/cin.c
 *   plan         loop order the formats allow, conversions, workspace  lower/iter_graph.c
 *   order        output indices first for vectorized contractions  lower/order.c
 *   schedule     parallelize, fuse, precompute, vectorize checked   lower/schedule.c
 *   options      target width, code-generation switches            driver_options.c
 *   contraction  GETT / TTGT / LoG or the loops; the notation made
 *                to the plan (lower_plan_notation: what is lowered)  lower/gett.c
 *   lower        the loop IR of one kernel variant                  lower/lower*.c
 *   tile, promote, vectorize, unroll-jam, peel, prefetch (LOWER_PASSES) lower/
 *   verify                                                           ir/lir_verify.c
 *   backend      LLVM IR, optimize, machine code, link              jit/engine.c
 *
 * The steps through contraction run once per cache entry (plan_entry); the rest once per
 * kernel variant, on first use (lower_variant, drv_ensure_compiled).
 * -print-notation, -print-cin, -print-lattice show the first ones,
 * -print-after=<pass> the loop IR after any of lower..unroll-jam, and
 * -print-c, -print-llvm(-opt), -print-asm the last ones. */

/* A plain parallelize(v) of an output index: GETT, TTGT and LoG run their
 * own loops on the kernel's threads, so it asks for parallelism, not for
 * a loop nest (a strategy, partials or atomics name how loops split). */
static bool parallel_only(const Assignment *as, const SchedDirective *sd) {
  if (sd->kind != SCHED_PARALLELIZE || sd->arg || sd->width) return false;
  const Expr *lhs = as->lhs;
  for (int m = 0; m < lhs->u.access.n; m++)
    if (strcmp(lhs->u.access.idx[m]->name, sd->vars[0]) == 0) return true;
  return false;
}

/* method(sell): whether as is y(i) (+)= A(i,j) * x(j) (either factor
 * order) with A CSR (dense, compressed; any compressed variant) and x, y
 * dense vectors, all f64 or all f32, plus.times; then e->sell_a / sell_x
 * name A and x. */
static bool plan_sell(CacheEntry *e, const Assignment *as) {
  const Expr *r = as->rhs;
  if (as->semiring || as->root_op != OP_ADD || nt_expr_op(r) != OP_MUL || as->old_output ||
      as->ntensors != 3)
    return false;
  const Expr *f[2] = {r->u.op.a, r->u.op.b};
  if (f[0]->kind != EX_ACCESS || f[1]->kind != EX_ACCESS) return false;
  const Expr *a = f[0]->u.access.n == 2 ? f[0] : f[1], *x = a == f[0] ? f[1] : f[0];
  const Expr *acc[3] = {as->lhs, a, x};
  for (int k = 0; k < 3; k++) {
    const TensorDecl *dc = &acc[k]->u.access.t->decl;
    const tj_format *fm = &dc->format;
    /* y and x one dense level; A a dense level over a compressed one
     * (positions and coordinates, any order or uniqueness: SELL sums
     * every stored entry) */
    bool ok = k == 1 ? acc[k]->u.access.n == 2 && lv_at(fm, 0, LV_FULL) &&
                           lv_at(fm, 1, LV_COMPACT | LV_HAS_POS | LV_HAS_CRD) &&
                           !lv_at(fm, 1, LV_FIXED_SEG) && fm->mode_order[1] == 1
                     : acc[k]->u.access.n == 1 && lv_at(fm, 0, LV_FULL);
    if (!ok || dc->dtype != as->lhs->dtype || (dc->dtype != TJ_F64 && dc->dtype != TJ_F32) ||
        lv_format_sliced(fm) || fm->ndims || fm->mode_order[0] != 0)
      return false;
  }
  const IndexVar *i = as->lhs->u.access.idx[0], *j = x->u.access.idx[0];
  if (i == j || a->u.access.idx[0] != i || a->u.access.idx[1] != j) return false;
  e->sell_a = a->u.access.t->id;
  e->sell_x = x->u.access.t->id;
  return true;
}

/* A pure dense contraction goes to GETT / TTGT / LoG (the model's choice,
 * or the schedule's method(...)); its operands are read as stored. The
 * user's first nuser directives other than method() and a plain
 * parallelize ask for a loop nest: then the model leaves it to the loops,
 * and a forced method refuses them. (A 2-thread dgemm under parallelize(i)
 * ran the loop nest: 40 ms against GETT's 19 on one thread.) */
static bool plan_contraction(CacheEntry *e, const Assignment *as, const Schedule *s,
                             int nuser, Diag *d) {
  int forced = -2;
  const SchedDirective *loop = NULL;
  for (int k = 0; k < nuser; k++)
    if (parallel_only(as, &s->d[k])) {
      continue;
    } else if (s->d[k].kind == SCHED_SEQUENCE || s->d[k].kind == SCHED_NOSEQUENCE) {
      continue;
    } else if (s->d[k].kind == SCHED_METHOD && strcmp(s->d[k].arg, "sell") == 0) {
      if (!plan_sell(e, as))
        return diag_error(d, TJ_ERR_UNSUPPORTED, "method(sell) needs y(i) = A(i,j) * x(j) "
                          "(or +=) with A CSR and x, y dense vectors, all f64 or all f32");
      lower_gett_plan(as, e->opt.vector_bits, GETT_LOOPS, &e->gett);   /* the loops: no GETT */
      return true;
    } else if (s->d[k].kind == SCHED_METHOD) {
      forced = lower_gett_method_of(s->d[k].arg);
      if (forced == -2)
        return diag_error(d, TJ_ERR_INVALID, "method(%s): unknown method (gett, ttgt, log, "
                          "model, loops or sell)", s->d[k].arg);
    } else {
      loop = &s->d[k];
    }
  if (loop && forced >= 0) {
    char *what = nt_directive_text(loop);
    bool ok = diag_error(d, TJ_ERR_INVALID, "method(%s) replaces the loop nest and cannot be "
                         "combined with %s", lower_gett_method_name(forced),
                         what ? what : "loop directives");
    free(what);
    return ok;
  }
  if (loop) forced = GETT_LOOPS;
  if (!lower_gett_plan(as, e->opt.vector_bits, forced, &e->gett)) {
    if (forced >= 0)
      return diag_error(d, TJ_ERR_UNSUPPORTED, "method(%s) needs a pure dense contraction "
                        "C(I_m,I_n) = A(I_m,I_k) * B(I_n,I_k) in f64 or f32",
                        lower_gett_method_name(forced));
    return true;
  }
  for (int t = 0; t < as->ntensors; t++) {
    e->plan.convert[t] = false;
    e->plan.fmt[t] = as->tensors[t]->decl.format;
  }
  e->plan.rangeable = e->plan.reduce_rows = false;
  e->plan.pos_rows = e->plan.seg_rows = 0;
  return true;
}

/* Memory set aside while an arena is built up (planning, lowering): an
 * allocation that fails there takes it over and the work runs to its end
 * in valid memory, then is discarded as out of memory (the builders do not
 * check every constructor's result). Freed when not taken. */
#define BUILD_RESERVE ((size_t)1 << 20)

/* Notation through options for one statement as (e's plan, options,
 * contraction method and notation); s may gain the default order. */
static bool plan_statement(CacheEntry *e, Assignment *as, Schedule *sched, Diag *d) {
  int nuser = sched->n;   /* the user's directives, before the default order */
  ScheduleSwitches sw = {!e->no_vectorize, drv_scatter_min(), drv_split_sum_min()};
  Cin *cin = lower_plan_schedule(&e->arena, as, sched, &sw, &e->plan, &e->opt, d);
  if (!cin) return false;
  drv_set_options(e, as);
  if (!plan_contraction(e, as, sched, nuser, d)) return false;
  lower_plan_vector_layout(as, &e->plan, e->no_vectorize ? 0 : e->opt.vector_bits / 64);
  e->cin = lower_plan_notation(&e->arena, &e->plan, cin, d);
  e->as = as;
  return e->cin != NULL;
}

/* Front end through options, for a new cache entry (in its own arena). */
static bool plan_steps(CacheEntry *e, const char *expr, tj_tensor *const *ops,
                       int n, const char *schedule, Diag *d) {
  tj_options fo = {.semiring = e->semiring, .defs = e->defs};
  Assignment *as = drv_front_end(&e->arena, expr, ops, n, &fo, d);
  if (!as) return false;
  Schedule sched = {0};
  if (schedule && !nt_schedule_parse(schedule, &sched, &e->arena, d)) return false;
  Assignment *parts[NT_SEQ_MAX];
  int nparts = drv_sequence_wanted(&e->arena, as, &sched, parts, d);
  if (nparts < 0) return false;
  if (nparts > 0) return drv_plan_sequence(e, as, &sched, parts, nparts, plan_statement, d);
  if (!(as = nt_precompute_scalars(&e->arena, as, &sched, d))) return false;
  return plan_statement(e, as, &sched, d);
}

/* plan_steps with the arena's reserve: any allocation failure is reported
 * as out of memory and leaves the entry unplanned (the next compile with
 * its key plans it again). */
static bool plan_entry(CacheEntry *e, const char *expr, tj_tensor *const *ops,
                       int n, const char *schedule, Diag *d) {
  e->arena.failed = 0;   /* an earlier failure was reported; this is a retry */
  if (!arena_reserve(&e->arena, BUILD_RESERVE))
    return diag_error(d, TJ_ERR_NOMEM, "out of memory while planning");
  bool ok = plan_steps(e, expr, ops, n, schedule, d);
  if (e->arena.failed) {
    ok = false;
    if (diag_ok(d)) diag_error(d, TJ_ERR_NOMEM, "out of memory while planning");
  }
  arena_unreserve(&e->arena);
  if (!ok) e->as = NULL, e->cin = NULL;
  return ok;
}

int drv_pass_count(const char *name) {
  if (strcmp(name, "lower") == 0) return 0;
  for (int p = 0; LOWER_PASSES[p].name; p++)
    if (strcmp(name, LOWER_PASSES[p].name) == 0) return p + 1;
  return -1;
}

LirKernel *drv_lower_variant(CacheEntry *e, Arena *a, int v, int npasses, Diag *d) {
  static const char *names[] = {"assemble", "compute", "evaluate",
                                "assemble_rows", "compute_rows", "evaluate_rows", "combine",
                                "assemble_plain", "compute_plain", "evaluate_plain"};
  bool plain = v >= DRV_PLAIN(0);
  LowerPhase ph = (LowerPhase)(plain ? v - DRV_PLAIN(0) : v % 3);
  LowerInput in = {e->cin, lower_operands(e->as), &e->plan, &e->opt};
  a->failed = 0;   /* an arena's failure is reported once, by the call it failed */
  if (!arena_reserve(a, BUILD_RESERVE))
    return diag_error(d, TJ_ERR_NOMEM, "out of memory while lowering"), NULL;
  LowerPlan *pp = plain ? arena_alloc(a, sizeof *pp) : NULL;
  if (pp) {   /* the plan with its vec_layout copies undone (they were all conversions) */
    *pp = e->plan;
    for (int t = 0; t < e->as->ntensors; t++)
      if (pp->vec_layout[t]) {
        pp->fmt[t] = e->as->tensors[t]->decl.format;
        pp->convert[t] = pp->vec_layout[t] = false;
      }
    in.plan = pp;
  }
  bool gett = e->gett.method != GETT_LOOPS && ph != PHASE_ASSEMBLE;
  LirKernel *k = e->nseq ? drv_lower_sequence(e, a, v, names[v], d)
                 : v == DRV_COMBINE ? lower_kernel_combine(a, &in, names[v], d)
                 : v >= 3 && !plain ? lower_kernel_rows(a, &in, ph, names[v], d)
                 : gett ? lower_gett_kernel(a, &in, &e->gett, names[v], d)
                        : lower_kernel(a, &in, ph, names[v], d);
  for (int p = 0; k && p < npasses && LOWER_PASSES[p].name; p++) LOWER_PASSES[p].run(a, k, &e->opt);
  bool failed = a->failed;
  arena_unreserve(a);
  if (failed) {
    if (diag_ok(d)) diag_error(d, TJ_ERR_NOMEM, "out of memory while lowering");
    return NULL;
  }
  return k && lir_verify(k, d) ? k : NULL;
}

static bool lower_locked(CacheEntry *e, int v, Diag *d) {
  if (!e->lir[v]) e->lir[v] = drv_lower_variant(e, &e->arena, v, INT32_MAX, d);
  return e->lir[v] != NULL;
}

bool drv_ensure_lowered(CacheEntry *e, int v, Diag *d) {
  pthread_mutex_lock(&e->lock);
  bool had = e->lir[v] != NULL;
  bool ok = lower_locked(e, v, d);
  CacheEntry *victims = had ? NULL : entry_account(e);   /* the plan, the loop IR */
  pthread_mutex_unlock(&e->lock);
  entries_free(victims);
  return ok;
}

bool drv_ensure_compiled(CacheEntry *e, int v, Diag *d) {
  CacheEntry *victims = NULL;
  pthread_mutex_lock(&e->lock);
  bool ok = e->compiled[v];
  if (!ok) {
    /* The disk cache holds objects: only for a backend that makes them. */
    ok = lower_locked(e, v, d) &&
         (e->disk && e->be->emit_object
              ? drv_disk_compile(e, v, e->disk, &e->from_disk[v], d)
              : e->be->compile(e->bstate, e->lir[v], &e->bopt, &e->bk[v], d));
    e->compiled[v] = ok;
    victims = entry_account(e);
  }
  pthread_mutex_unlock(&e->lock);
  entries_free(victims);
  return ok;
}

static CacheEntry *cache_find(tj_context *cx, const char *key, uint64_t h) {
  for (CacheEntry *e = cx->entries; e; e = e->next)
    if (e->hash == h && strcmp(e->key, key) == 0) return e;
  return NULL;
}

static CacheEntry *new_entry(tj_context *cx, char *key, uint64_t h,
                             const tj_options *o, Diag *d) {
  CacheEntry *e = calloc(1, sizeof *e);
  if (!e) {
    diag_error(d, TJ_ERR_NOMEM, "out of memory");
    return NULL;
  }
  arena_init(&e->arena);
  pthread_mutex_init(&e->lock, NULL);
  e->cx = cx;
  e->key = key;
  e->hash = h;
  e->no_vectorize = o->no_vectorize != 0;
  e->no_unroll_jam = o->no_unroll_jam != 0;
  const NtSemiring *sr = nt_semiring(o->semiring);
  e->semiring = sr ? sr->name : NULL;
  e->defs = o->defs ? arena_strdup(&e->arena, o->defs) : NULL;
  e->bopt = (BackendOptions){.opt_level = o->opt_level,
                             .no_llvm_vectorize = o->no_llvm_vectorize != 0,
                             .fp_contract = true};
  e->be = backend_of(o, d);
  e->bstate = e->be ? engine_for(cx, e->be, o, d) : NULL;
  if (!e->bstate) {
    e->key = NULL;
    entry_free(e);
    return NULL;
  }
  /* Called with cx locked: the folder is checked once per context. */
  if (cx->disk && e->be->emit_object) {
    drv_disk_open(cx->disk);
    if (cx->disk->fd >= 0) e->disk = cx->disk;
  }
  return e;
}

tj_status tj_compile(tj_context *cx, const char *expr, tj_tensor *const *operands,
                     int n, const char *schedule, const tj_options *opts,
                     tj_kernel **out) {
  return drv_compile(cx, expr, operands, n, schedule, opts, false, out);
}

/* Whether s's output is of order 3 or more and stored in a level order
 * other than its dims' or with a singleton level (COO): the planner's own
 * order for a contraction into it may store coordinates the rhs lacks. (In
 * dim order with a workspace level last, a failed exactness check is its
 * own strictness: TTM over a dense C stores whole fibers, the product's
 * pattern, whichever loops run.) */
static bool output_reordered(const DrvSplit *s) {
  const tj_tensor *out = drv_split_output(s);
  if (!out) return false;
  const tj_format *f = tj_tensor_format(out);
  bool other = false;
  for (int l = 0; l < f->order; l++)
    other |= f->mode_order[l] != l || lv_at(f, l, LV_BRANCHLESS);
  return f->order >= 3 && other;
}

static tj_status compile_read(tj_context *cx, DrvSplit *sp, const char *expr,
                              tj_tensor *const *operands, int n, const char *schedule,
                              const tj_options *opts, bool exact, tj_kernel **out);

/* The routes of a `=` whose own kernel may store coordinates the rhs
 * lacks, in turn: its own kernel where exact, else (unscheduled)
 * Gustavson's loops in the output's level order where exact, else through
 * the temporaries (drv_accum_compile) where exact. With level_only, none
 * is tried unless the output's level order has loops. Each try is its own
 * cache entry. */
static tj_status exact_routes(tj_context *cx, DrvSplit *sp, const char *expr,
                              tj_tensor *const *ops, int n, const char *schedule,
                              const tj_options *opts, bool level_only, tj_kernel **out) {
  char level_order[1024];
  bool level = !(schedule && *schedule) &&
               drv_accum_level_schedule(sp, level_order, sizeof level_order);
  if (level_only && !level) return TJ_ERR_UNSUPPORTED;
  tj_status st = compile_read(cx, sp, expr, ops, n, schedule, opts, true, out);
  if (st == TJ_OK || st == TJ_ERR_NOMEM) return st;
  if (level) {
    st = compile_read(cx, sp, expr, ops, n, level_order, opts, true, out);
    if (st == TJ_OK || st == TJ_ERR_NOMEM) return st;
  }
  return drv_accum_compile(cx, sp, ops, n, schedule, opts, out);
}

tj_status drv_compile(tj_context *cx, const char *expr, tj_tensor *const *operands, int n,
                      const char *schedule, const tj_options *opts, bool exact,
                      tj_kernel **out) {
  if (!cx || !expr || !out || (n > 0 && !operands))
    return rt_set_error(TJ_ERR_INVALID, "tj_compile: NULL argument");
  DrvSplit *sp;
  tj_status st = drv_split_read(expr, operands, n, opts, &sp);
  if (st == TJ_OK) st = compile_read(cx, sp, expr, operands, n, schedule, opts, exact, out);
  drv_split_free(sp);
  return st;
}

/* drv_compile with expr read once into sp (NULL: no route needs it). */
static tj_status compile_read(tj_context *cx, DrvSplit *sp, const char *expr,
                              tj_tensor *const *operands, int n, const char *schedule,
                              const tj_options *opts, bool exact, tj_kernel **out) {
  double t0 = jit_now_ms(), c0 = jit_cpu_ms();
  tj_options o = opts ? *opts : tj_options_default();
  if (o.opt_level < 0 || o.opt_level > 3)
    return rt_set_error(TJ_ERR_INVALID, "optimization level %d is not in 0..3", o.opt_level);
  Diag d;
  diag_init(&d);
  if (drv_standin_wanted(sp))   /* an output no kernel writes */
    return drv_standin_compile(cx, sp, expr, operands, n, schedule, opts, out);
  DrvBlocked *blk = NULL;   /* blocked operands: compiled over their views */
  if (drv_blocked_any(operands, n)) {
    if (o.semiring && strcmp(o.semiring, "plus.times") != 0)
      return rt_set_error(TJ_ERR_UNSUPPORTED, "semiring %s over blocked operands: the zero "
                          "fill of stored blocks and of padding would read as entries; "
                          "convert the blocked operand to CSR", o.semiring);
    blk = drv_blocked_plan(expr, operands, n, schedule, &d);
    int nk = blk ? n + drv_blocked_masks(blk) : 0;   /* n and the views' masks */
    tj_tensor **views = blk ? calloc((size_t)nk, sizeof *views) : NULL;
    if (blk && !views) diag_error(&d, TJ_ERR_NOMEM, "out of memory");
    if (!views || !drv_blocked_views(blk, operands, n, drv_blocked_compile_views(blk),
                                     true, views, &d)) {
      free(views);
      drv_blocked_free(blk);
      return drv_fail(&d);
    }
    tj_status st = tj_compile(cx, drv_blocked_expr(blk), views, nk, drv_blocked_schedule(blk),
                              opts, out);
    drv_blocked_finish(blk, operands, views, n, NULL, false);   /* padded copies: runs make their own */
    free(views);
    if (!drv_blocked_output(blk)) st = drv_blocked_explain(blk, expr, st);
    if (st != TJ_OK && st != TJ_ERR_NOMEM && drv_blocked_output(blk)) {
      char why[512];   /* the rewritten kernel's reason, said of the blocked output */
      snprintf(why, sizeof why, "%s", tj_last_error());
      st = rt_set_error(st, "%s cannot be computed into blocked output %s (%s); compute a "
                        "CSR or dense output and convert it", expr, drv_blocked_output(blk), why);
    }
    if (st != TJ_OK) {
      drv_blocked_free(blk);
      return st;
    }
    (*out)->blk = blk;
    return TJ_OK;
  }
  /* A += with a sum below a sparse output: the sum on its own, else the
   * union form below (out of memory is no reason to store every column). */
  if (drv_accum_wanted(sp, true)) {
    tj_status st = drv_accum_compile(cx, sp, operands, n, schedule, opts, out);
    if (st == TJ_OK || st == TJ_ERR_NOMEM) return st;
  }
  /* A `=` of the same kind whose own kernel would store coordinates where
   * the rhs is absent: unscheduled, the loops in the output's level order
   * (exact where a workspace takes its last level: SpGEMM into CSC over
   * CSR, the operands converted), else the same route, else (below) that
   * kernel. Each try is its own cache entry, so a second compile plans
   * none again. */
  if (!exact && drv_accum_wanted(sp, false)) {
    tj_status st = exact_routes(cx, sp, expr, operands, n, schedule, opts, false, out);
    if (st == TJ_OK || st == TJ_ERR_NOMEM) return st;
  } else if (!exact && !(schedule && *schedule) && output_reordered(sp)) {
    /* Any other sum below a sparse last level of an output of order 3
     * and up in another level order or COO (A(i,j,l) = B(i,j,k) * C(k,l)
     * into sss:2,0,1 runs l, i, j, k and stores every (l, i, j) B's
     * fibers reach): the same routes where its level order has loops. */
    tj_status st = exact_routes(cx, sp, expr, operands, n, schedule, opts, true, out);
    if (st == TJ_OK || st == TJ_ERR_NOMEM) return st;
  }
  struct tj_kernel *k = calloc(1, sizeof *k);
  if (!k) return rt_set_error(TJ_ERR_NOMEM, "out of memory");
  arena_init(&k->arena);
  pthread_mutex_init(&k->chunk_lock, NULL);
  pthread_mutex_init(&k->pattern_lock, NULL);
  if (!arena_reserve(&k->arena, BUILD_RESERVE / 16)) {
    diag_error(&d, TJ_ERR_NOMEM, "out of memory");
  } else {
    k->as = drv_front_end(&k->arena, expr, operands, n, &o, &d);
    if (k->as && !nt_semiring_kernel_exact(k->as, &d)) k->as = NULL;
    if (k->arena.failed) {
      k->as = NULL;
      if (diag_ok(&d)) diag_error(&d, TJ_ERR_NOMEM, "out of memory while parsing");
    }
    arena_unreserve(&k->arena);
  }
  char *key = k->as ? canonical_key(k->as, schedule, &o) : NULL;
  if (k->as && !key) diag_error(&d, TJ_ERR_NOMEM, "out of memory");
  if (key && !drv_bind(k->as, operands, n, k->bound, &d)) {
    free(key);
    key = NULL;
  }
  if (!key) goto fail;
  double t1 = jit_now_ms();
  k->times.parse_ms = t1 - t0;
  uint64_t h = rt_fnv1a(RT_FNV_BASIS, key, strlen(key));
  pthread_mutex_lock(&cx->lock);
  CacheEntry *e = cache_find(cx, key, h);
  if (e) {
    free(key);
    k->times.cache_hit = 1;
    cx->hits++;
    lru_unlink(cx, e);
  } else {
    e = new_entry(cx, key, h, &o, &d);
    if (!e) free(key);
    cx->misses++;
  }
  CacheEntry *victims = NULL;
  if (e) {
    e->refs++;   /* held by k from here: never evicted while k lives */
    lru_push_front(cx, e);
    victims = lru_trim(cx);
  }
  pthread_mutex_unlock(&cx->lock);
  entries_free(victims);
  if (!e) goto fail;
  k->entry = e;
  k->cx = cx;
  k->opts = o;
  k->nbound = k->as->ntensors;
  double t2 = jit_now_ms(), c2 = jit_cpu_ms();
  k->times.setup_ms = t2 - t1;
  pthread_mutex_lock(&e->lock);
  bool planned = e->as || plan_entry(e, expr, operands, n, schedule, &d);
  pthread_mutex_unlock(&e->lock);
  /* A failed plan or compile leaves the entry uncompiled (and retried by
   * the next compile with this key, unless evicted before). */
  if (planned && exact && !lower_plan_output_exact(e->as, &e->plan))
    planned = diag_error(&d, TJ_ERR_UNSUPPORTED, "%s: the output would store coordinates "
                         "where the right-hand side is absent", expr);
  if (!planned || !drv_ensure_lowered(e, PHASE_EVALUATE, &d)) goto fail_entry;
  k->times.lower_ms = jit_now_ms() - t2;
  k->times.lower_cpu_ms = jit_cpu_ms() - c2;
  if (!drv_ensure_compiled(e, PHASE_EVALUATE, &d)) goto fail_entry;
  if (!k->times.cache_hit && e->from_disk[PHASE_EVALUATE]) k->times.cache_hit = 2;
  if (!k->times.cache_hit) {
    const BackendTimes *bt = &e->bk[PHASE_EVALUATE].times;
    k->times.llvm_ir_ms = bt->ir_ms;
    k->times.optimize_ms = bt->opt_ms;
    k->times.codegen_ms = bt->codegen_ms;
    k->times.llvm_ir_cpu_ms = bt->ir_cpu_ms;
    k->times.optimize_cpu_ms = bt->opt_cpu_ms;
    k->times.codegen_cpu_ms = bt->codegen_cpu_ms;
  }
  k->times.total_ms = jit_now_ms() - t0;
  k->times.total_cpu_ms = jit_cpu_ms() - c0;
  pthread_mutex_lock(&cx->lock);
  k->next = cx->kernels;
  if (k->next) k->next->prev = k;
  cx->kernels = k;
  pthread_mutex_unlock(&cx->lock);
  *out = k;
  return TJ_OK;

fail_entry:
  entry_unref(cx, e);
fail:
  pthread_mutex_destroy(&k->chunk_lock);
  pthread_mutex_destroy(&k->pattern_lock);
  arena_free(&k->arena);
  free(k);
  return drv_fail(&d);
}

tj_compile_times tj_kernel_times(const tj_kernel *k) {
  tj_compile_times z = {0};
  return k ? k->times : z;
}

tj_status tj_kernel_operand_format(const tj_kernel *k, const char *name, tj_format *fmt,
                                   int *converted) {
  if (!k || !name || !fmt || !converted)
    return rt_set_error(TJ_ERR_INVALID, "tj_kernel_operand_format: NULL argument");
  for (int t = 0; t < k->as->ntensors; t++) {
    if (strcmp(k->as->tensors[t]->name, name) != 0) continue;
    const LowerPlan *p = &k->entry->plan;
    *fmt = p->convert[t] ? p->fmt[t] : k->as->tensors[t]->decl.format;
    *converted = p->pattern[t] ? 2 : p->convert[t];
    return TJ_OK;
  }
  for (int m = 0; k->acc && drv_accum_sum(k->acc, m); m++)   /* an operand of a temporary's sum */
    if (tj_kernel_operand_format(drv_accum_sum(k->acc, m), name, fmt, converted) == TJ_OK)
      return TJ_OK;
  return rt_set_error(TJ_ERR_INVALID, "tj_kernel_operand_format: the kernel has no tensor %s",
                      name);
}

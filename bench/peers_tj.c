/* tensorjit's own variants of a case as extra rows, timed in the same run
 * as the case's peers so their ratios need no second run:
 *   tj-unsorted   the case's kernel into a `do` output (its last level
 *                 compressed(nonordered): no per-row sort), TJ_EVALUATE;
 *                 unranked, as MKL-unsorted is
 *   tj-assemble   TJ_ASSEMBLE alone of the case's kernel
 *   tj-compute    TJ_COMPUTE alone: values into the structure the
 *                 setup's evaluating run assembled
 *   tj-fresh      TJ_EVALUATE into an output made for the run (the
 *                 previous run's freed first, in the timed run), as MKL's
 *                 add makes a new result handle every run; the tensorjit
 *                 row reruns into the arrays of its previous run
 *   tj-1thread    in the 2-thread tables only: the case's 1-thread
 *                 kernel (its phase as the tensorjit row's), so the
 *                 2-thread row's gain over one thread is a ratio of runs
 *                 interleaved in the same rounds
 *   tj-loops      the case's kernel without its schedule's method(...)
 *                 (SpMV CSR: the CSR loops, where the tensorjit row runs
 *                 method(sell)); unranked
 * Each compiles in a context of its own (1 thread, or 2 with
 * parallelize of the outer index, as the tensorjit row) on a fresh output
 * of the case's dims. The assemble row's result is checked after a
 * compute (assembly alone leaves the values zero).
 */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

typedef struct TjV {
  TjRun run;          /* first: the peer's run is tj_run */
  Case copy;          /* the case with ops[0] our output */
  tj_context *cx;
  tj_tensor *out;
  tj_tensor *fresh;   /* tj-fresh: the last run's output */
} TjV;

static void tv_done(void *p) {
  TjV *v = p;
  tj_context_free(v->cx);
  tj_tensor_free(v->out);
  tj_tensor_free(v->fresh);
  free(v);
}

static void *tv_setup(Case *c, int nth, const char *fmt, tj_phase phase, bool plain) {
  const tj_tensor *o = c->ops[0];
  TjV *v = xcalloc(1, sizeof *v);
  tj_format f = o->fmt;
  if (fmt && tj_format_parse(fmt, &f) != TJ_OK) goto fail;
  if (tj_context_new(&v->cx) != TJ_OK ||
      tj_tensor_new(o->name, (tj_dtype)o->st.dtype, o->st.order, o->st.dims, &f, &v->out) != TJ_OK ||
      tj_tensor_pack(v->out) != TJ_OK)
    goto fail;
  v->copy = *c;
  v->copy.ops[0] = v->out;
  if (plain) v->copy.sched = NULL;
  tj_options opts = tj_options_default();
  opts.nthreads = nth;
  Row r;
  memset(&r, 0, sizeof r);
  v->run.k = tj_build(v->cx, &v->copy, &opts, &r);
  if (!v->run.k) {
    snprintf(c->note, sizeof c->note, "%s", r.note);
    tv_done(v);
    return NULL;
  }
  v->run.phase = TJ_EVALUATE;
  tj_run(&v->run);             /* assembles the structure compute fills */
  v->run.phase = phase;
  if (v->run.st != TJ_OK) goto fail;
  snprintf(c->note, sizeof c->note, "%s", r.note);
  return v;
fail:
  snprintf(c->note, sizeof c->note, "tensorjit: %.200s", tj_last_error());
  tv_done(v);
  return NULL;
}
static void *unsorted_setup(Case *c, int nth) { return tv_setup(c, nth, "do", TJ_EVALUATE, false); }
static void *assemble_setup(Case *c, int nth) { return tv_setup(c, nth, NULL, TJ_ASSEMBLE, false); }
static void *compute_setup(Case *c, int nth) { return tv_setup(c, nth, NULL, TJ_COMPUTE, false); }
static void *loops_setup(Case *c, int nth) { return tv_setup(c, nth, NULL, TJ_EVALUATE, true); }
static void *one_thread_setup(Case *c, int nth) {
  (void)nth;
  return tv_setup(c, 1, NULL, c->okind == OUT_VALS ? TJ_COMPUTE : TJ_EVALUATE, false);
}

static void fresh_run(void *p) {
  TjV *v = p;
  tj_tensor_free(v->fresh);
  v->fresh = NULL;
  const tj_tensor *o = v->out;
  tj_tensor *ops[MAX_OPS];
  memcpy(ops, v->copy.ops, sizeof ops);
  v->run.st = tj_tensor_new(o->name, (tj_dtype)o->st.dtype, o->st.order, o->st.dims, &o->fmt,
                            &v->fresh);
  if (v->run.st == TJ_OK) v->run.st = tj_tensor_pack(v->fresh);
  ops[0] = v->fresh;
  if (v->run.st == TJ_OK) v->run.st = tj_kernel_run(v->run.k, TJ_EVALUATE, ops, v->copy.nops);
}

static void tv_out(void *p, Out *o) {
  TjV *v = p;
  if (v->run.st == TJ_OK && v->run.phase == TJ_ASSEMBLE) {
    TjRun fill = {v->run.k, TJ_OK, TJ_COMPUTE};
    tj_run(&fill);
    v->run.st = fill.st;
  }
  out_from_tensor(&v->copy, v->fresh ? v->fresh : v->out, o);
  if (v->run.st != TJ_OK) o->n = -1;
}

const Peer P_TJ_UNSORTED = {.name = "tj-unsorted", .setup = unsorted_setup, .run = tj_run,
                            .out = tv_out, .done = tv_done, .max_threads = 2, .unranked = 1};
const Peer P_TJ_ASSEMBLE = {.name = "tj-assemble", .setup = assemble_setup, .run = tj_run,
                            .out = tv_out, .done = tv_done, .max_threads = 2, .unranked = 1};
const Peer P_TJ_COMPUTE = {.name = "tj-compute", .setup = compute_setup, .run = tj_run,
                           .out = tv_out, .done = tv_done, .max_threads = 2, .unranked = 1};
const Peer P_TJ_FRESH = {.name = "tj-fresh", .setup = compute_setup, .run = fresh_run,
                         .out = tv_out, .done = tv_done, .max_threads = 2, .unranked = 1};
const Peer P_TJ_1T = {.name = "tj-1thread", .setup = one_thread_setup, .run = tj_run,
                      .out = tv_out, .done = tv_done, .max_threads = 2, .unranked = 1};
const Peer P_TJ_LOOPS = {.name = "tj-loops", .setup = loops_setup, .run = tj_run,
                         .out = tv_out, .done = tv_done, .max_threads = 2, .unranked = 1};

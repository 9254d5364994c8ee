/* Schedule directives the planner does not handle itself (parallelize,
 * vectorize, precompute), the target's vector width, and the concrete index
 * notation shown for a plan with a workspace:
 *   forall(i, where(forall(j, A(i,j) = w(j)),
 *                   forall(k, forall(j, w(j) += B(i,k) * C(k,j)))))
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ir/level.h"
#include "driver.h"

/* precompute(<rhs>, {j}, <w>): the whole right-hand side into a dense
 * workspace over j, the sparse output's last index (the planner's row
 * workspace, Gustavson's SpGEMM); into a dense output, and of a
 * subexpression, a dense row (or over {i, j, ...} a dense matrix or
 * tensor) the consumer reads in its place (lower/precompute.c). Scalar workspaces (the index set {}) were applied
 * to the assignment already (nt_precompute_scalars). */
static bool apply_precompute(const Assignment *as, LowerPlan *p, const SchedDirective *sd,
                             Arena *a, Diag *d) {
  Precompute pc;
  if (!nt_precompute_parse(a, as, sd, &pc, d)) return false;
  if (pc.nvars == 0) return true;
  const tj_format *f = &p->fmt[0];
  IndexVar *last = p->out_sparse ? as->lhs->u.access.idx[f->mode_order[f->order - 1]] : NULL;
  if (pc.node != as->rhs || !p->out_sparse)
    return lower_plan_subexpr_workspace(as, p, pc.node, pc.vars, pc.nvars, pc.ws, sd->arg, d);
  if (pc.nvars > 1)
    return diag_error(d, TJ_ERR_UNSUPPORTED,
                      "precompute(%s): the whole right-hand side of a sparse output goes "
                      "through a row workspace over its last index (here: %s); a workspace "
                      "over more indices is lowered for a subexpression or a dense output",
                      sd->arg, last->name);
  IndexVar *v = pc.vars[0];
  if (v != last)
    return diag_error(d, TJ_ERR_UNSUPPORTED,
                      "precompute(%s): a workspace is built over the last index of a sparse "
                      "output (here: %s)", sd->arg, last ? last->name : "the output is dense");
  int depth = 0;
  while (p->order[depth] != v) depth++;
  for (int k = 0; k < depth; k++)
    if (nt_is_reduction_var(as, p->order[k])) depth = k;
  p->ws_var = v;
  p->ws_depth = depth;
  p->ws_name = pc.ws;
  return true;
}


/* Whether an operand's first level, walked by the outermost loop, is
 * nonunique (a COO row list: walked by segments, never in parallel). */
static bool walks_nonunique_outer(const Assignment *as, const LowerPlan *p) {
  for (int t = 1; t < as->ntensors; t++) {
    const tj_format *f = &p->fmt[t];
    if (f->order > 0 && !lv_at(f, 0, LV_UNIQUE)) return true;
  }
  return false;
}

int drv_lattice_max(void) {
  const char *s = getenv("TJ_WIDE_UNION_THRESHOLD");
  long v = s ? strtol(s, NULL, 10) : 0;
  return v > 0 && v < 1 << 20 ? (int)v : 0;
}

int drv_prefetch_ahead(void) {
  const char *s = getenv("TJ_PREFETCH");
  if (!s || !*s) return LOWER_PREFETCH_AHEAD;
  long v = strtol(s, NULL, 10);
  return v > 0 && v <= 256 ? (int)v : 0;
}

int drv_scatter_min(void) {
  const char *s = getenv("TJ_SCATTER_UNION_MIN");
  long v = s ? strtol(s, NULL, 10) : 0;
  return v > 0 && v < 1 << 20 ? (int)v : 0;
}

int drv_split_sum_min(void) {
  int v = drv_scatter_min();
  return v ? v : LOWER_SPLIT_SUM_MIN;
}

/* Vector width from the backend's target (AVX-512: 512 bits, AVX2: 256),
 * parallelism, and the schedule's parallelize / vectorize directives. */
bool drv_apply_schedule(CacheEntry *e, const Assignment *as, const Cin *cin, const Schedule *s,
                        Diag *d) {
  LowerPlan *p = &e->plan;
  LowerOptions *o = &e->opt;
  o->vector_bits = e->no_vectorize ? 0 : e->be->vector_bits(e->bstate);
  o->parallel = true;
  o->unroll_jam = e->no_unroll_jam ? 0 : 4;
  /* Gathers: on by default (measured wins on long rows, guarded for short
   * ones in the pass); TJ_VECTOR_GATHER=0 turns them off. */
  const char *g = getenv("TJ_VECTOR_GATHER");
  o->vector_gather = !(g && *g == '0');
  /* Peeling of short gather reductions: on by default; TJ_PEEL=0 turns it off. */
  const char *pe = getenv("TJ_PEEL");
  o->peel = !(pe && *pe == '0');
  o->prefetch = drv_prefetch_ahead();
  /* A gather loop's remainder as one masked step: on by default;
   * TJ_MASKED_TAIL=0 turns it off (the scalar remainder loop runs). */
  const char *mt = getenv("TJ_MASKED_TAIL");
  o->masked_tail = !(mt && *mt == '0');
  /* Register promotion of fixed updates into dense outputs: on by
   * default; TJ_PROMOTE=0 turns it off. */
  const char *pr = getenv("TJ_PROMOTE");
  o->promote = !(pr && *pr == '0') && !p->out_sparse;
  o->lattice_max = drv_lattice_max();
  o->extents = as;
  /* A sparse output shaped like an operand is updated in place, like a
   * dense one: one kernel, its row loop parallel, no row chunks. */
  p->out_like = lower_plan_out_like(as, p, cin);
  int planned_ws = p->ws_depth;   /* a reduction between its levels needs no row workspace */
  if (p->out_like) p->rangeable = false, p->pos_rows = 0, p->ws_depth = -1;
  for (int k = 0; k < s->n; k++) {
    const SchedDirective *sd = &s->d[k];
    int part = 0;
    if (sd->kind == SCHED_PARALLELIZE) {
      IndexVar *v = cin_loop_named(cin, sd->vars[0], &part);
      if (v && sd->arg && strcmp(sd->arg, "atomics") == 0) {
        if (p->order[0] == v && walks_nonunique_outer(as, p))
          return diag_error(d, TJ_ERR_UNSUPPORTED,
                            "parallelize(%s, atomics): the loop walks a nonunique (COO) level "
                            "by segments; use a compressed or dense outer level (CSC)",
                            sd->vars[0]);
        p->reduce_rows = false;   /* one kernel, its updates atomic (lowering checks) */
        continue;
      }
      if (v && sd->arg && strcmp(sd->arg, "partials") == 0 && p->nloops > 0 &&
          p->order[0] != v) {   /* an inner loop: per-thread copies (lower/partials.c) */
        if (p->out_sparse)
          return diag_error(d, TJ_ERR_UNSUPPORTED, "parallelize(%s, partials): per-thread "
                            "partial outputs of an inner loop are dense copies of the "
                            "output, which is sparse here", sd->vars[0]);
        p->reduce_rows = false;   /* one kernel; lowering checks the rest */
        continue;
      }
      if (v && p->nloops > 0 && p->order[0] != v) { /* an inner loop (lowering checks more) */
        if ((p->out_sparse && !p->out_like) || p->reduce_rows || nt_is_reduction_var(as, v))
          return diag_error(d, TJ_ERR_UNSUPPORTED,
                            "parallelize(%s): an inner loop runs in parallel only over an index "
                            "of a dense output whose outer loop is not a reduction (or, with "
                            "atomics, over a reduction into a dense output); the outermost "
                            "loop is %s", sd->vars[0], p->order[0]->name);
        continue;
      }
      if (!v || p->nloops == 0)
        return diag_error(d, TJ_ERR_UNSUPPORTED, "parallelize(%s): no loop to run in parallel",
                          sd->vars[0]);
      bool dense_rows = (!p->out_sparse || p->out_like) && !nt_is_reduction_var(as, v);
      if (sd->arg && !p->reduce_rows)
        return diag_error(d, TJ_ERR_UNSUPPORTED,
                          "parallelize(%s, partials): %s", sd->vars[0],
                          dense_rows ? "the loop writes disjoint rows of the output; there "
                                       "is nothing to combine"
                                     : "partials are lowered for an outermost reduction loop "
                                       "into a dense output");
      if (!dense_rows && !p->rangeable && !p->reduce_rows && !p->pos_rows)
        return diag_error(d, TJ_ERR_UNSUPPORTED,
                          "parallelize(%s): the loop over %s writes a shared output (a "
                          "reduction, or a sparse output whose first level is not dense)",
                          sd->vars[0], sd->vars[0]);
      if (sd->width && !dense_rows) /* the chunks of a row-chunked build (driver_run.c) */
        p->row_strategy = (ParStrategy)sd->width;
      if (walks_nonunique_outer(as, p))
        return diag_error(d, TJ_ERR_UNSUPPORTED,
                          "parallelize(%s): the outer loop walks a nonunique (COO) level; "
                          "use a dense or compressed outer level",
                          sd->vars[0]);
    } else if (sd->kind == SCHED_FUSE) {
      p->reduce_rows = false;   /* the fused loop is no row loop to chunk */
      p->pos_rows = 0;
    } else if (sd->kind == SCHED_PRECOMPUTE) {
      if (!apply_precompute(as, p, sd, &e->arena, d)) return false;
    } else if (sd->kind == SCHED_VECTORIZE) {
      o->vec_width = e->no_vectorize ? 0 : sd->width; /* the loops carry the request */
    }
  }
  lower_plan_scatter_union(as, p, drv_scatter_min(), drv_split_sum_min());
  if (p->ws_depth == 0) p->pos_rows = 0;   /* one workspace around every row */
  if (p->out_like && (p->ws_depth >= 0 || p->vws_depth >= 0)) {  /* the lowering refuses */
    p->out_like = 0;
    if (p->ws_depth < 0) p->ws_depth = planned_ws;
  }
  return true;
}

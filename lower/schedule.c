/* The plan of one statement from its concrete notation: every step that
 * decides loops from the notation, the formats and the schedule, beside
 * the planner (the driver in jit/ only caches, picks the target and runs).
 *
 *   cin_from_assignment     the notation, its foralls in the requested order
 *   plan_loops              the order the formats allow (lower_plan); the
 *                           outer loops of a sparse output in its level order
 *   lower_order_contraction the default order of a vectorized contraction,
 *                           a reorder directive added to the schedule, and
 *                           the notation and plan made again
 *   apply_directives        parallelize, fuse, precompute and vectorize,
 *                           each checked against the plan with a message
 *   lower_plan_scatter_union  the workspace of a wide union
 *
 * The notation returned is the one the directives named loops in; the
 * driver then settles the contraction method, the vector layout and
 * rewrites the notation to the plan (lower_plan_notation), which is what
 * is lowered and printed.
 */
#include <string.h>

#include "lowerer.h"

/* A sparse output is appended in its levels' order, so where the order
 * is kept strictly for sums (not for the user's reorder), the outer loops,
 * the output's indices in the notation, take the order of its levels:
 * y(j,i) = ... sum_k ... into a CSC y runs i, j (it was refused as
 * "visited out of order"). Unchanged unless want starts with exactly the
 * output's indices. */
static void outer_in_level_order(const Assignment *as, IndexVar **want, int nw) {
  const tj_format *f = &as->tensors[0]->decl.format;
  const Expr *lhs = as->lhs;
  int n = lhs->u.access.n;
  if (!lv_format_has_sparse(f) || f->ndims || f->order != n || n > nw) return;
  for (int m = 0; m < n; m++) {
    bool found = false;
    for (int l = 0; l < n; l++) found |= want[l] == lhs->u.access.idx[m];
    if (!found) return;
  }
  for (int l = 0; l < n; l++) want[l] = lhs->u.access.idx[f->mode_order[l]];
}

/* The plan for the loop order the concrete notation asks for: kept
 * strictly under an explicit reorder or fuse, or when sums nest their loops. */
static bool plan_loops(const Assignment *as, const Cin *cin, const Schedule *s, LowerPlan *p,
                       Diag *d) {
  IndexVar *want[NT_MAX_INDICES];
  int nw = cin_loop_order(cin, want, NT_MAX_INDICES);
  const Expr *sums[1];
  bool strict = nt_sums(as->rhs, sums, 1) > 0, users = false;
  for (int k = 0; k < s->n; k++)
    users |= s->d[k].kind == SCHED_REORDER || s->d[k].kind == SCHED_FUSE;
  if (strict && !users) outer_in_level_order(as, want, nw);
  return lower_plan(as, want, nw, strict || users, p, d);
}

/* precompute(<rhs>, {j}, <w>): the whole right-hand side into a dense
 * workspace over j, the sparse output's last index (the planner's row
 * workspace, Gustavson's SpGEMM); into a dense output, and of a
 * subexpression, a dense row (or over {i, j, ...} a dense matrix or
 * tensor) the consumer reads in its place (lower/precompute.c). Scalar
 * workspaces (the index set {}) were applied to the assignment already
 * (nt_precompute_scalars). */
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
  /* the drain appends one segment per row to a compressed last level; a
   * dense tail (sd, ssd) is stored whole and a singleton (COO) repeats its
   * parent's coordinate per entry: neither is a segment to append */
  if (v == last && !lv_at(f, f->order - 1, LV_HAS_POS))
    return diag_error(d, TJ_ERR_UNSUPPORTED,
                      "precompute(%s): the row workspace is drained into a segment of the "
                      "output's last level, and %s's last level (over %s) is %s; precompute "
                      "into a compressed last level (CSR ds, DCSR ss)",
                      sd->arg, as->lhs->u.access.t->name, last->name,
                      lv_of(f, f->order - 1)->name);
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

/* parallelize(v, partials) of the outermost loop v into a sparse output:
 * each chunk of v's range runs the whole kernel into a sparse partial of
 * the output's format, and the driver merges the partials (rt_storage_merge:
 * the union of their patterns, values combined by the root operator). A
 * reduction over v (y(i) = A(j,i) * x(j) over j) overlaps the partials; a
 * loop over rows of a first level that is not dense (DCSR's) makes them
 * disjoint, and the merge concatenates. */
static bool apply_sparse_partials(const Assignment *as, const SchedDirective *sd, LowerPlan *p,
                                  Diag *d) {
  const tj_format *f = &p->fmt[0];
  const char *v = sd->vars[0], *out = as->lhs->u.access.t->name;
  bool reduces = nt_is_reduction_var(as, p->order[0]);
  const char *why = !p->outer_dense
                        ? "the loop walks a sparse level; partial sparse outputs bound a "
                          "dense outer loop to each thread's range"
                    : as->accumulate || as->old_output
                        ? "partial sparse outputs are merged under =, not += (each would "
                          "add the output's old values)"
                    : reduces && !nt_is_root_reduction(as, p->order[0])
                        ? "the loop's sum lies inside a subexpression; partials are combined "
                          "for a reduction at the root of the right-hand side"
                    : reduces && as->root_def
                        ? "a definition's reduction combines dense partial outputs only"
                    : reduces && !nt_op_is_reduction(as->root_op)
                        ? "the root operator is no reduction operator to combine partials by"
                    : !reduces && p->rangeable
                        ? "the loop writes disjoint rows of the output, whose row chunks "
                          "are concatenated already; use parallelize(i)"
                    : f->ndims ? "partial sparse outputs are merged for unblocked formats"
                               : NULL;
  if (why) return diag_error(d, TJ_ERR_UNSUPPORTED, "parallelize(%s, partials): %s", v, why);
  for (int l = 0; l < f->order; l++)
    if (f->levels[l] != 'd' && f->levels[l] != 's')
      return diag_error(d, TJ_ERR_UNSUPPORTED, "parallelize(%s, partials): partial sparse "
                        "outputs are merged level by level for dense and compressed levels; "
                        "%s's level %d is %s", v, out, l, lv_of(f, l)->name);
  p->reduce_rows = true;   /* the driver's row-range kernels into partials */
  p->rangeable = false;
  p->pos_rows = p->seg_rows = 0;
  return true;
}

/* parallelize(v[, strategy | partials | atomics]) against plan p: which
 * run-time form takes it (row chunks, partials, atomics, an inner
 * parallel loop), or a message saying why none does. */
static bool apply_parallelize(const Assignment *as, const Cin *cin, const SchedDirective *sd,
                              LowerPlan *p, Diag *d) {
  int part = 0;
  IndexVar *v = cin_loop_named(cin, sd->vars[0], &part);
  if (v && sd->arg && strcmp(sd->arg, "atomics") == 0) {
    if (p->order[0] == v && walks_nonunique_outer(as, p))
      return diag_error(d, TJ_ERR_UNSUPPORTED,
                        "parallelize(%s, atomics): the loop walks a nonunique (COO) level "
                        "by segments; use a compressed or dense outer level (CSC)",
                        sd->vars[0]);
    p->reduce_rows = false;   /* one kernel, its updates atomic (lowering checks) */
    p->seg_rows = 0;
    return true;
  }
  if (v && sd->arg && strcmp(sd->arg, "partials") == 0 && p->nloops > 0 && p->order[0] != v) {
    if (p->out_sparse)   /* an inner loop: per-thread copies (lower/partials.c) */
      return diag_error(d, TJ_ERR_UNSUPPORTED, "parallelize(%s, partials): per-thread "
                        "partial outputs of an inner loop are dense copies of the "
                        "output, which is sparse here", sd->vars[0]);
    p->reduce_rows = false;   /* one kernel; lowering checks the rest */
    p->seg_rows = 0;
    return true;
  }
  if (v && p->nloops > 0 && p->order[0] != v) { /* an inner loop (lowering checks more) */
    if ((p->out_sparse && !p->out_like) || p->reduce_rows || nt_is_reduction_var(as, v))
      return diag_error(d, TJ_ERR_UNSUPPORTED,
                        "parallelize(%s): an inner loop runs in parallel only over an index "
                        "of a dense output whose outer loop is not a reduction (or, with "
                        "atomics, over a reduction into a dense output); the outermost "
                        "loop is %s", sd->vars[0], p->order[0]->name);
    return true;
  }
  if (!v || p->nloops == 0)
    return diag_error(d, TJ_ERR_UNSUPPORTED, "parallelize(%s): no loop to run in parallel",
                      sd->vars[0]);
  bool dense_rows = (!p->out_sparse || p->out_like) && !nt_is_reduction_var(as, v);
  if (sd->arg && strcmp(sd->arg, "partials") == 0 && p->out_sparse && !p->out_like)
    return apply_sparse_partials(as, sd, p, d);
  if (sd->arg && !p->reduce_rows)
    return diag_error(d, TJ_ERR_UNSUPPORTED, "parallelize(%s, partials): %s", sd->vars[0],
                      dense_rows ? "the loop writes disjoint rows of the output; there "
                                   "is nothing to combine"
                                 : "partials are lowered for a dense outermost loop "
                                   "reducing at the root into a dense output (or, into a "
                                   "sparse one, merged)");
  if (!dense_rows && !p->rangeable && !p->reduce_rows && !p->pos_rows)
    return diag_error(d, TJ_ERR_UNSUPPORTED,
                      "parallelize(%s): the loop over %s writes a shared output (a "
                      "reduction, or a sparse output whose first level is not dense)",
                      sd->vars[0], sd->vars[0]);
  if (sd->width && !dense_rows)   /* the chunks of a row-chunked run (jit/driver_run.c) */
    p->row_strategy = (ParStrategy)sd->width;
  if (walks_nonunique_outer(as, p))
    return diag_error(d, TJ_ERR_UNSUPPORTED,
                      "parallelize(%s): the outer loop walks a nonunique (COO) level; "
                      "use a dense or compressed outer level", sd->vars[0]);
  return true;
}

/* The directives the loop order does not express, applied to p in the
 * schedule's order; the output shaped like an operand and the wide-union
 * workspace settled with them. */
static bool apply_directives(Arena *a, const Assignment *as, const Cin *cin, const Schedule *s,
                             const ScheduleSwitches *sw, LowerPlan *p, LowerOptions *o,
                             Diag *d) {
  /* A sparse output shaped like an operand is updated in place, like a
   * dense one: one kernel, its row loop parallel, no row chunks. */
  p->out_like = lower_plan_out_like(as, p, cin);
  int planned_ws = p->ws_depth;   /* a reduction between its levels needs no row workspace */
  /* duplicates walked one by one (lower/dup_walk.c) keep to plain loops:
   * under a fuse or a parallelize the user names, the copy is read */
  bool keep_copy = false;
  for (int k = 0; k < s->n; k++)
    keep_copy |= s->d[k].kind == SCHED_FUSE || s->d[k].kind == SCHED_PARALLELIZE;
  if (keep_copy) lower_plan_recheck_dups(as, p, true);
  if (p->out_like) p->rangeable = false, p->pos_rows = 0, p->ws_depth = -1;
  for (int k = 0; k < s->n; k++) {
    const SchedDirective *sd = &s->d[k];
    if (sd->kind == SCHED_PARALLELIZE) {
      if (!apply_parallelize(as, cin, sd, p, d)) return false;
    } else if (sd->kind == SCHED_FUSE) {
      p->reduce_rows = false;   /* the fused loop is no row loop to chunk */
      p->pos_rows = p->seg_rows = 0;
    } else if (sd->kind == SCHED_PRECOMPUTE) {
      if (!apply_precompute(as, p, sd, a, d)) return false;
    } else if (sd->kind == SCHED_VECTORIZE) {
      o->vec_width = sw->vectorizing ? sd->width : 0;   /* the loops carry the request */
    }
  }
  lower_plan_scatter_union(as, p, sw->scatter_min, sw->split_sum_min);
  if (p->ws_depth == 0) p->pos_rows = p->seg_rows = 0;   /* one workspace around every row */
  if (p->vws_depth >= 0 || p->out_like) p->seg_rows = 0;
  if (p->out_like && (p->ws_depth >= 0 || p->vws_depth >= 0)) {  /* the lowering refuses */
    p->out_like = 0;
    if (p->ws_depth < 0) p->ws_depth = planned_ws;
  }
  lower_plan_recheck_dups(as, p, keep_copy);   /* a workspace or split sum now: the copy */
  return true;
}

Cin *lower_plan_schedule(Arena *a, const Assignment *as, Schedule *s,
                         const ScheduleSwitches *sw, LowerPlan *p, LowerOptions *o, Diag *d) {
  Cin *cin = cin_from_assignment(a, as, s, d);
  if (!cin || !plan_loops(as, cin, s, p, d)) return NULL;
  if (lower_order_contraction(as, p, sw->vectorizing, s)) {
    cin = cin_from_assignment(a, as, s, d);
    if (!cin || !plan_loops(as, cin, s, p, d)) return NULL;
  }
  return apply_directives(a, as, cin, s, sw, p, o, d) ? cin : NULL;
}

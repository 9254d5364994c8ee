/* The iteration graph: one path per tensor access with a sparse level, its
 * variables in the tensor's level order. The loop order is a topological
 * order of the accepted paths that stays as close as possible to the
 * requested order. A path that would close a cycle (e.g. B(i,j) + C(j,i)
 * with both CSR) is not forced: that operand is converted to the mode order
 * the loops need, at run time, and the printed kernel says so.
 */
#include <stdio.h>
#include <string.h>

#include "lowerer.h"

typedef struct Graph {
  int n;                                 /* index variables */
  bool edge[NT_MAX_INDICES][NT_MAX_INDICES];
} Graph;

/* Index variable stored at level l of access e under format f. */
static IndexVar *level_var(const Expr *e, const tj_format *f, int l) {
  return e->u.access.idx[f->mode_order[l]];
}

static bool reaches(const Graph *g, int from, int to) {
  bool seen[NT_MAX_INDICES] = {0};
  int stack[NT_MAX_INDICES * NT_MAX_INDICES], top = 0;
  stack[top++] = from;
  while (top) {
    int v = stack[--top];
    if (v == to) return true;
    if (seen[v]) continue;
    seen[v] = true;
    for (int w = 0; w < g->n; w++)
      if (g->edge[v][w] && !seen[w]) stack[top++] = w;
  }
  return false;
}

/* Adds the path of access e if it keeps g acyclic (and, when strict,
 * agrees with the requested positions); returns whether it was added. */
static bool add_path(Graph *g, const Expr *e, const tj_format *f,
                     const int *want_pos, bool strict) {
  Graph trial = *g;
  for (int l = 0; l + 1 < f->order; l++) {
    int a = level_var(e, f, l)->id, b = level_var(e, f, l + 1)->id;
    if (a == b) return false;
    if (strict && want_pos[a] > want_pos[b]) return false;
    if (reaches(&trial, b, a)) return false;
    trial.edge[a][b] = true;
  }
  *g = trial;
  return true;
}

typedef struct AccessList {
  int n;
  const Expr *e[LW_MAX_ACCESS];
} AccessList;

bool lw_collect_accesses(const Expr *e, const Expr **out, int *n, int max) {
  if (e->kind == EX_ACCESS) {
    if (*n >= max) return false;
    out[(*n)++] = e;
    return true;
  }
  Expr *k[2];
  int nk = nt_children(e, k);
  for (int i = 0; i < nk; i++)
    if (!lw_collect_accesses(k[i], out, n, max)) return false;
  return true;
}

/* The output access, then the rhs accesses in source order; false (d set)
 * past LW_MAX_ACCESS, the width of the lowering's access masks. */
static bool collect_all(const Assignment *as, AccessList *acc, Diag *d) {
  acc->n = 0;
  acc->e[acc->n++] = as->lhs;
  if (lw_collect_accesses(as->rhs, acc->e, &acc->n, LW_MAX_ACCESS)) return true;
  return diag_error(d, TJ_ERR_UNSUPPORTED,
                    "the right-hand side reads more than %d tensor accesses "
                    "(LW_MAX_ACCESS); split the expression", LW_MAX_ACCESS - 1);
}

/* Kahn's algorithm, always taking the ready variable wanted earliest. */
static bool topo_order(const Graph *g, const int *want_pos, int *order) {
  int indeg[NT_MAX_INDICES] = {0};
  bool done[NT_MAX_INDICES] = {0};
  for (int a = 0; a < g->n; a++)
    for (int b = 0; b < g->n; b++) indeg[b] += g->edge[a][b];
  for (int k = 0; k < g->n; k++) {
    int best = -1;
    for (int v = 0; v < g->n; v++)
      if (!done[v] && indeg[v] == 0 &&
          (best < 0 || want_pos[v] < want_pos[best]))
        best = v;
    if (best < 0) return false;
    done[best] = true;
    order[k] = best;
    for (int w = 0; w < g->n; w++) indeg[w] -= g->edge[best][w];
  }
  return true;
}

static bool check_input_format(const TensorVar *t, Diag *d) {
  const tj_format *f = &t->decl.format;
  for (int l = 0; l < f->order; l++) {
    const LevelType *lt = lv_of(f, l);
    if (lv_has(lt, LV_BRANCHLESS) && (l == 0 || lv_at(f, l - 1, LV_FULL)))
      return diag_error(d, TJ_ERR_FORMAT,
                        "%s: a singleton level ('q', level %d) needs a "
                        "compressed or singleton parent level",
                        t->name, l);
  }
  return true;
}

static bool check_output_format(const Assignment *as, Diag *d) {
  const TensorVar *t = as->tensors[0];
  const tj_format *f = &t->decl.format;
  bool seen_sparse = false;
  for (int l = 0; l < f->order; l++) {
    if (!lw_output_level_ok(f, l))
      return diag_error(d, TJ_ERR_UNSUPPORTED,
                        "output %s: level %d is '%c'; outputs support dense "
                        "('d') and compressed ('s', 'o') levels, a "
                        "compressed-nonunique level with singletons down to "
                        "the last level (COO: 'uq', 'uqq'), and one with no "
                        "singleton below it ('du', 'us', 'ud': each coordinate "
                        "written once)",
                        t->name, l, f->levels[l]);
    seen_sparse |= !lv_at(f, l, LV_FULL);
  }
  if (seen_sparse && as->accumulate)
    return diag_error(d, TJ_ERR_UNSUPPORTED,
                      "'+=' into sparse output %s is not supported; use '=' "
                      "or a dense output",
                      t->name);
  return true;
}

/* Whether every access of tensor t in e is the mask of a mask/except. */
static bool only_masks(const Expr *e, const TensorVar *t) {
  if (e->kind == EX_ACCESS) return e->u.access.t != t; /* a use that is no mask */
  Expr *k[2];
  int n = nt_children(e, k);
  OpKind op = nt_expr_op(e);
  bool mask = op == OP_MASK || op == OP_EXCEPT;
  for (int i = 0; i < n; i++)
    if (!(i == 0 && mask && k[0]->kind == EX_ACCESS) && !only_masks(k[i], t)) return false;
  return true;
}


static void mode_order_for(const Expr *e, const int *loop_pos, tj_format *f) {
  int n = f->order;
  for (int m = 0; m < n; m++) f->mode_order[m] = m;
  for (int a = 1; a < n; a++)
    for (int b = a; b > 0; b--) {
      int x = f->mode_order[b - 1], y = f->mode_order[b];
      if (loop_pos[e->u.access.idx[x]->id] <= loop_pos[e->u.access.idx[y]->id])
        break;
      f->mode_order[b - 1] = y;
      f->mode_order[b] = x;
    }
}

static bool plan_workspace(const Assignment *as, LowerPlan *p, Diag *d) {
  const Expr *lhs = as->lhs;
  const tj_format *f = &p->fmt[0];
  p->ws_depth = -1;
  p->vws_depth = -1;
  p->vws_sum = NULL;
  p->out_like = 0;
  p->out_sparse = lv_format_has_sparse(f);
  if (!p->out_sparse) return true;
  int first_red = p->nloops;
  for (int k = 0; k < p->nloops; k++)
    if (nt_is_reduction_var(as, p->order[k])) {
      first_red = k;
      break;
    }
  for (int l = 0; l < f->order; l++) {
    IndexVar *v = level_var(lhs, f, l);
    int depth = 0;
    while (p->order[depth] != v) depth++;
    if (depth < first_red || l > lw_out_leaf(f)) continue; /* a dense tail is located */
    if (l != f->order - 1 || !lv_at(f, l, LV_HAS_POS))
      return diag_error(d, TJ_ERR_UNSUPPORTED,
                        "output %s: level %d (index %s) would be written "
                        "after reduction index %s; only the last output "
                        "level can be scattered through a workspace",
                        as->tensors[0]->name, l, v->name,
                        p->order[first_red]->name);
    p->ws_depth = first_red;
    p->ws_var = v;
  }
  return true;
}

/* A sparse tensor used only as masks whose first level is walked inside
 * another loop would be co-iterated from its start for every iteration of
 * that loop (a BFS step's visited set: quadratic); it is read as a dense
 * 0/1 pattern instead (LowerPlan.pattern), located per coordinate. */
static void plan_mask_patterns(const Assignment *as, const AccessList *acc, const int *loop_pos,
                               LowerPlan *p) {
  for (int k = 1; k < acc->n; k++) {
    const TensorVar *t = acc->e[k]->u.access.t;
    tj_format *f = &p->fmt[t->id];
    if (p->pattern[t->id] || !lv_format_has_sparse(f) || f->order == 0 ||
        loop_pos[level_var(acc->e[k], f, 0)->id] == 0 || !only_masks(as->rhs, t))
      continue;
    tj_format dense = tj_format_dense(f->order);
    memcpy(dense.mode_order, f->mode_order, sizeof dense.mode_order);
    *f = dense;
    p->convert[t->id] = p->pattern[t->id] = true;
  }
}

/* What rhs_full_at reads: the plan, each index's loop depth, and the
 * depth of the output's leaf. */
#define LEAF_CASES_MAX 12   /* accesses walked at the leaf whose cases are tried */

typedef struct Presence {
  const Assignment *as;
  const LowerPlan *p;
  int depth_of[NT_MAX_INDICES];
  int leaf;
  const Expr *walked[LEAF_CASES_MAX];   /* the accesses the leaf's loop walks */
  int nwalked;
  unsigned present;   /* by_case: which of them the leaf's case stores */
  bool by_case;       /* at the leaf too, only those in present are */
} Presence;

/* Whether access e's next level at the loop at `depth` is sparse (the
 * loop walks it). */
static bool walked_at(const Presence *pr, const Expr *e, int depth) {
  const tj_format *f = &pr->p->fmt[e->u.access.t->id];
  int bound = 0;
  for (int l = 0; l < f->order; l++)
    if (pr->depth_of[level_var(e, f, l)->id] < depth) bound++;
  return bound < f->order && pr->depth_of[level_var(e, f, bound)->id] == depth &&
         !lv_at(f, bound, LV_FULL);
}

/* Whether e may be present at every coordinate of the loop at `depth`
 * once the leaf's coordinate is stored (lw_lattice's rules over the plan:
 * its lattice there has a full point). Below the leaf, an access the
 * leaf's loop walks counts as present (a stored coordinate has entries
 * below it). */
static bool rhs_full_at(const Presence *pr, const Expr *e, int depth) {
  double zero = nt_semiring_zero(pr->as->semiring);
  switch (e->kind) {
  case EX_ACCESS:
    for (int a = 0; a < pr->nwalked; a++)
      if (pr->walked[a] == e && (depth > pr->leaf || pr->by_case)) return pr->present >> a & 1;
    return !walked_at(pr, e, depth);
  case EX_LITERAL: return e->u.lit.value != zero;
  case EX_SUM: return nt_sum_identity(e) != zero || rhs_full_at(pr, e->u.sum.a, depth);
  default: break;
  }
  Expr *k[2];
  int n = nt_children(e, k);
  bool x = rhs_full_at(pr, k[0], depth), y = n == 2 && rhs_full_at(pr, k[1], depth);
  switch (nt_expr_algebra(e, pr->as->semiring)) {
  case OA_INTERSECT:
  case OA_NUMERATOR: return x && y;
  case OA_UNION: return x || y;
  case OA_KEEP:
  case OA_LEFT: return x;
  case OA_RIGHT:
  case OA_EXCEPT: return y;
  case OA_DENSE: return true;
  }
  return true;
}

/* Whether the loop over v walks every coordinate (its lattice has a full
 * point: the rhs may be nonzero where the sparse accesses there are absent,
 * as in A + B with B dense, A + 1 or exp(A)); a sparse level walked in it
 * is then merged with the loop's counter (crd == v), in order. */
static bool loop_full_at(const Assignment *as, const LowerPlan *p, const IndexVar *v) {
  Presence pr = {.as = as, .p = p, .leaf = NT_MAX_INDICES};
  for (int x = 0; x < NT_MAX_INDICES; x++) pr.depth_of[x] = NT_MAX_INDICES;
  for (int k = 0; k < p->nloops; k++) pr.depth_of[p->order[k]->id] = k;
  return rhs_full_at(&pr, as->rhs, pr.depth_of[v->id]);
}

/* Whether a level below level l of f is sparse: the output's positions
 * there are appended one fiber of l after another, in l's order. */
static bool sparse_below(const tj_format *f, int l) {
  for (int l2 = l + 1; l2 < f->order; l2++)
    if (!lv_at(f, l2, LV_FULL)) return true;
  return false;
}

/* Why level l (index v) of access k, stored without order, must be read
 * in order, or NULL: its loop merges it with another sparse level (a union
 * or intersection walks both lists in step) or with the dense walk of
 * every coordinate (loop_full_at), or appends v to an ordered output
 * level (not through a workspace, which sorts) or appends the fibers of a
 * dense output level over v (CSR's rows: each row's positions follow the
 * previous row's), or it is walked by runs of equal coordinates (a
 * nonunique level) that must be adjacent. */
static const char *order_need(const Assignment *as, const AccessList *acc, int k, int l,
                              const LowerPlan *p, const IndexVar **with) {
  const Expr *e = acc->e[k];
  const tj_format *f = &p->fmt[e->u.access.t->id];
  const IndexVar *v = *with = level_var(e, f, l);
  if (lw_level_segmented(f, l) && !p->dups_walked[e->u.access.t->id])
    return "walked by runs of equal coordinates, which must be adjacent";
  if (loop_full_at(as, p, v))
    return "merged with a walk of every coordinate (the expression is nonzero where it "
           "is absent)";
  for (int k2 = acc->n - 1; k2 >= 0; k2--) {   /* operands first, then the output */
    const Expr *e2 = acc->e[k2];
    const tj_format *f2 = &p->fmt[e2->u.access.t->id];
    for (int l2 = 0; k2 != k && l2 < f2->order; l2++) {
      if (level_var(e2, f2, l2) != v) continue;
      if (lv_at(f2, l2, LV_FULL)) {
        if (k2 == 0 && sparse_below(f2, l2))
          return "the loop of a dense output level whose sparse levels below are appended "
                 "in its order";
        continue;
      }
      if (k2 > 0) return "co-iterated with another sparse level";
      if (lv_at(f2, l2, LV_ORDERED) && p->ws_var != v)
        return "appended in order to an ordered output level";
    }
  }
  return NULL;
}

/* An operand level stored without order is read in place where its loop
 * walks it alone; where order is needed (order_need) the operand is
 * converted to its ordered counterpart, and so is any operand converted
 * for another reason (the copy is sorted anyway). */
static void plan_order_conversions(const Assignment *as, const AccessList *acc, LowerPlan *p) {
  for (int k = 1; k < acc->n; k++) {
    const TensorVar *t = acc->e[k]->u.access.t;
    tj_format *f = &p->fmt[t->id];
    for (int l = 0; l < f->order && !p->convert[t->id]; l++) {
      if (lv_at(f, l, LV_ORDERED)) continue;
      const IndexVar *v = NULL;
      const char *why = order_need(as, acc, k, l, p, &v);
      if (!why) continue;
      p->convert[t->id] = true;
      p->copy_why[t->id] = (CopyWhy){why, "nonordered", l, v};
    }
  }
  for (int t = 1; t < NT_MAX_TENSORS; t++)
    if (p->convert[t] && !p->pattern[t]) lv_make_ordered(&p->fmt[t]);
}

/* A nonunique level over a dense or compressed one (`us`, `ud`) is read
 * through a copy whose such levels are unique (`ss`, `sd`): a run of equal
 * coordinates there owns one fiber per position, and the copy merges them
 * into one, summing the entries they share (lv_make_runs_unique); except
 * where each position's fiber may be walked on its own (dups_walked). */
static void plan_unique_conversions(const AccessList *acc, LowerPlan *p) {
  for (int k = 1; k < acc->n; k++) {
    const TensorVar *t = acc->e[k]->u.access.t;
    if (p->convert[t->id] || p->dups_walked[t->id]) continue;
    int l = lv_make_runs_unique(&p->fmt[t->id]);
    if (l < 0) continue;
    p->convert[t->id] = true;
    p->copy_why[t->id] = (CopyWhy){"above a dense or compressed level: a repeated coordinate "
                                   "owns a fiber per position, which the copy merges, "
                                   "summing duplicates",
                                   "nonunique", l, level_var(acc->e[k], &p->fmt[t->id], l)};
  }
}

/* The first level of f a copy would make unique or ordered for its runs
 * (its fibers merged, its entries sorted), or -1. */
static int copied_run_level(const tj_format *f) {
  for (int l = 0; l < f->order; l++)
    if (lv_runs_own_fibers(f, l) || (!lv_at(f, l, LV_UNIQUE) && !lv_at(f, l, LV_ORDERED)))
      return l;
  return -1;
}

void lower_plan_recheck_dups(const Assignment *as, LowerPlan *p, bool keep_copy) {
  bool lost = false;
  for (int t = 1; t < as->ntensors; t++) {
    bool drop = keep_copy && copied_run_level(&p->fmt[t]) >= 0;
    if (p->dups_walked[t] && !p->convert[t] && (drop || !lower_plan_dups_walked(as, p, t)))
      p->dups_walked[t] = false, lost = true;
  }
  AccessList acc;
  Diag quiet;
  diag_init(&quiet);
  if (lost && collect_all(as, &acc, &quiet)) {
    plan_unique_conversions(&acc, p);
    plan_order_conversions(as, &acc, p);
  }
  for (int t = 1; t < as->ntensors; t++)   /* a copy's levels walk as the copy's rule says */
    if (p->convert[t]) p->dups_walked[t] = lower_plan_dups_walked(as, p, t);
}

void lower_plan_print_conversions(FILE *out, const Assignment *as, const LowerPlan *p) {
  AccessList acc;
  Diag quiet;
  diag_init(&quiet);
  if (!collect_all(as, &acc, &quiet)) acc.n = 0;
  for (int t = 1; t < as->ntensors; t++) {
    int l = copied_run_level(&p->fmt[t]);
    const Expr *e = NULL;
    for (int k = 1; k < acc.n && !e; k++)
      if (acc.e[k]->u.access.t->id == t) e = acc.e[k];
    if (!p->convert[t] && p->dups_walked[t] && l >= 0 && e) {
      char from[96];
      tj_format_print(&p->fmt[t], from, sizeof from);
      fprintf(out, "// %s is read in place (stored %s): its nonunique level %d over %s is "
              "walked entry by entry, each entry adding its share to the same sum\n",
              as->tensors[t]->name, from, l, level_var(e, &p->fmt[t], l)->name);
    }
    const CopyWhy *cw = &p->copy_why[t];
    if (!p->convert[t] || p->pattern[t] || !cw->why) continue;
    char from[96], to[96];
    tj_format_print(&as->tensors[t]->decl.format, from, sizeof from);
    tj_format_print(&p->fmt[t], to, sizeof to);
    fprintf(out, "// %s is read through a copy in format %s (stored %s): its %s "
            "level %d over %s is %s\n", as->tensors[t]->name, to, from, cw->prop,
            cw->level, cw->var->name, cw->why);
  }
}

/* Whether f stores zero fill: a dense level below a sparse one stores a
 * whole block of entries (zeros included) under each stored position, so
 * its pattern is not one a transposed copy in the same letters keeps (sd
 * stores whole rows; sd:1,0 whole columns). */
static bool stores_zero_fill(const tj_format *f) {
  for (int l = 1; l < f->order; l++)
    if (lv_at(f, l, LV_FULL) && !lv_at(f, l - 1, LV_FULL)) return true;
  return false;
}

/* One planning attempt; out_first adds edges from every output index to
 * every reduction index first, so a sparse output can always be appended
 * in loop order (operands that disagree are converted instead). */
static bool plan_once(const Assignment *as, IndexVar *const *want, int nwant,
                      bool strict, bool out_first, LowerPlan *p, Diag *d) {
  memset(p, 0, sizeof *p);
  Graph g = {.n = as->nindices};
  if (out_first)
    for (int m = 0; m < as->lhs->u.access.n; m++)
      for (int v = 0; v < as->nindices; v++)
        if (nt_is_reduction_var(as, as->indices[v]))
          g.edge[as->lhs->u.access.idx[m]->id][v] = true;
  int want_pos[NT_MAX_INDICES];
  for (int v = 0; v < as->nindices; v++) want_pos[v] = NT_MAX_INDICES + v;
  for (int k = 0; k < nwant; k++) want_pos[want[k]->id] = k;
  for (int t = 0; t < as->ntensors; t++) p->fmt[t] = as->tensors[t]->decl.format;
  if (!check_output_format(as, d)) return false;
  for (int t = 1; t < as->ntensors; t++)
    if (!check_input_format(as->tensors[t], d)) return false;

  AccessList acc;
  if (!collect_all(as, &acc, d)) return false;
  p->ws_depth = p->vws_depth = -1;   /* the workspaces: none yet (a sparse output's
                                        is planned below; such plans walk no runs) */
  for (int t = 1; t < as->ntensors; t++) p->dups_walked[t] = lower_plan_dups_walked(as, p, t);
  plan_unique_conversions(&acc, p);
  bool rejected[LW_MAX_ACCESS] = {0};
  for (int k = 0; k < acc.n; k++) {
    const TensorVar *t = acc.e[k]->u.access.t;
    if (!lv_format_has_sparse(&p->fmt[t->id])) continue;
    if (add_path(&g, acc.e[k], &p->fmt[t->id], want_pos, strict)) continue;
    if (k == 0)
      return diag_error(d, TJ_ERR_UNSUPPORTED,
                        "output %s cannot be assembled in the requested loop "
                        "order: its levels (%s) would be visited out of order",
                        t->name, p->fmt[0].levels);
    rejected[k] = true;
  }
  /* Soft edges: dense operands (and a dense output) prefer to be walked
   * in their storage order (unit stride innermost); taken only where they
   * close no cycle, and never forcing a conversion. */
  for (int k = 0; k < acc.n; k++) {
    const TensorVar *t = acc.e[k]->u.access.t;
    if (!lv_format_has_sparse(&p->fmt[t->id]) && !strict)
      add_path(&g, acc.e[k], &p->fmt[t->id], want_pos, strict);
  }
  int order[NT_MAX_INDICES];
  if (!topo_order(&g, want_pos, order)) return TJ_BUG(d, "cyclic iteration graph");
  int loop_pos[NT_MAX_INDICES];
  p->nloops = as->nindices;
  for (int k = 0; k < p->nloops; k++) {
    p->order[k] = as->indices[order[k]];
    loop_pos[order[k]] = k;
  }
  bool transposed[NT_MAX_TENSORS] = {0};
  for (int k = 1; k < acc.n; k++) {
    if (!rejected[k]) continue;
    const TensorVar *t = acc.e[k]->u.access.t;
    tj_format f = p->fmt[t->id];
    /* a dense level below a sparse one stores whole blocks, zeros
       included: transposed in the same letters the copy would store other
       blocks (sd: whole rows; sd:1,0: whole columns), and where entries
       matter (a semiring's zero, min reductions) that changes the answer.
       A copy with every level compressed stores exactly the same entries
       (conversion keeps stored zeros). */
    if (stores_zero_fill(&f))
      for (int l = 0; l < f.order; l++) f.levels[l] = 's';
    lv_make_runs_unique(&f);   /* a copy anyway: its runs' fibers merged */
    mode_order_for(acc.e[k], loop_pos, &f);
    if (transposed[t->id] &&
        memcmp(f.mode_order, p->fmt[t->id].mode_order, sizeof f.mode_order))
      return diag_error(d, TJ_ERR_UNSUPPORTED,
                        "%s is accessed in two conflicting orders; bind a "
                        "transposed copy under another name",
                        t->name);
    p->fmt[t->id] = f;
    p->convert[t->id] = transposed[t->id] = true;
  }
  /* A converted tensor must now fit the loop order in every access. */
  for (int k = 1; k < acc.n; k++) {
    const TensorVar *t = acc.e[k]->u.access.t;
    if (!p->convert[t->id] || rejected[k]) continue;
    for (int l = 0; l + 1 < p->fmt[t->id].order; l++)
      if (loop_pos[level_var(acc.e[k], &p->fmt[t->id], l)->id] >
          loop_pos[level_var(acc.e[k], &p->fmt[t->id], l + 1)->id])
        return diag_error(d, TJ_ERR_UNSUPPORTED,
                          "%s is accessed in two conflicting orders; bind a "
                          "transposed copy under another name",
                          t->name);
  }
  if (!plan_workspace(as, p, d)) return false;
  plan_order_conversions(as, &acc, p);
  plan_mask_patterns(as, &acc, loop_pos, p);
  lower_plan_recheck_dups(as, p, false);   /* other operands' copies may be sparser */
  return true;
}

/* Sums nest their loops inside the loops of the scope around them: after
 * the output's indices and the root reductions come the sums' indices in
 * preorder (ir/sums.c), or the kernel would sum the wrong subexpression. */
static bool check_sum_order(const Assignment *as, const LowerPlan *p, Diag *d) {
  const Expr *sums[NT_MAX_INDICES];
  int ns = nt_sums(as->rhs, sums, NT_MAX_INDICES);
  if (ns > NT_MAX_INDICES)
    return diag_error(d, TJ_ERR_UNSUPPORTED, "more than %d sums in one expression",
                      NT_MAX_INDICES);
  int first = p->nloops - ns;
  for (int k = 0; k < ns; k++) {
    if (p->order[first + k] == sums[k]->u.sum.iv) continue;
    const char *outer = first > 0 ? p->order[first - 1]->name : "";
    return diag_error(d, TJ_ERR_UNSUPPORTED,
                      "the loop over %s must run inside the loops of the scope that "
                      "contains sum(%s, ...)%s%s: sums nest innermost, outer sums first",
                      sums[k]->u.sum.iv->name, sums[k]->u.sum.iv->name,
                      first > 0 ? ", below " : "", outer);
  }
  return true;
}

/* Whether e is a product of accesses and literals (negated or not): absent
 * wherever one of its accesses is. */
static bool is_product(const Expr *e) {
  if (e->kind == EX_ACCESS || e->kind == EX_LITERAL) return true;
  switch (nt_expr_op(e)) {
  case OP_NEG: return is_product(e->u.op.a);
  case OP_MUL: return is_product(e->u.op.a) && is_product(e->u.op.b);
  default: return false;
  }
}

/* LowerPlan.pos_rows: the operand whose compressed level 0 alone the
 * outermost loop walks (every other access dense wherever it reads that
 * index), into a sparse output whose level 0 is compressed over the same
 * index, by a product: each of the operand's level-0 entries makes at
 * most one output row, in order, so the output's level-0 positions are
 * the operand's wherever the two counts agree (the driver checks). TTV's
 * A(i,j) = B(i,j,k) * c(k) with B and A CSF. 0 when there is none. */
static int pos_rows_operand(const Assignment *as, const AccessList *acc, const LowerPlan *p) {
  const tj_format *o = &p->fmt[0];
  if (!p->out_sparse || p->nloops == 0 || as->accumulate || as->semiring || as->root_def ||
      p->ws_depth == 0 || o->order == 0 || lv_at(o, 0, LV_FULL) ||
      !lv_at(o, 0, LV_HAS_POS | LV_UNIQUE) || level_var(as->lhs, o, 0) != p->order[0] ||
      !is_product(as->rhs))
    return 0;
  for (int l = 1; l < o->order; l++)   /* the chunk's start: pos_l[...] of pos_1[lo] */
    if (!lv_at(o, l, LV_HAS_POS | LV_UNIQUE)) return 0;
  int walker = 0;
  for (int k = 1; k < acc->n; k++) {
    const TensorVar *t = acc->e[k]->u.access.t;
    const tj_format *f = &p->fmt[t->id];
    if (lv_format_sliced(f)) return 0;   /* chunks of a view's positions: not its slice */
    for (int l = 0; l < f->order; l++) {
      if (level_var(acc->e[k], f, l) != p->order[0] || lv_at(f, l, LV_FULL)) continue;
      if (l > 0 || walker || !lv_at(f, 0, LV_HAS_POS | LV_UNIQUE)) return 0;
      walker = t->id;
    }
  }
  return walker;
}

/* Whether e, under the assignment's semiring, is a product of accesses
 * and literals (its mul, which intersects; negated or not). */
static bool is_semiring_product(const Assignment *as, const Expr *e) {
  if (!as->semiring) return is_product(e);
  if (e->kind == EX_ACCESS || e->kind == EX_LITERAL) return true;
  OpKind op = nt_expr_op(e);
  return op == as->semiring->mul && is_semiring_product(as, e->u.op.a) &&
         is_semiring_product(as, e->u.op.b);
}

/* LowerPlan.seg_rows: the operand whose level 0 (with positions, sparse)
 * alone the outermost loop walks, every other access dense wherever it
 * reads that index, into a dense output reduced over the rest at the
 * root, by a product: any split of the operand's level-0 positions splits
 * the reduction's terms, whose partial outputs combine by the root
 * operator. COO SpMV's y(i) = A(i,j) * x(j), A uq. 0 when there is none. */
static int seg_rows_operand(const Assignment *as, const AccessList *acc, const LowerPlan *p) {
  const Expr *sums[1];
  bool reduces = false;
  for (int v = 0; v < as->nindices; v++) reduces |= nt_is_reduction_var(as, as->indices[v]);
  if (p->out_sparse || p->nloops == 0 || !reduces || nt_sums(as->rhs, sums, 1) > 0 ||
      !(as->root_def || nt_op_is_reduction(as->root_op)) || p->ws_depth == 0 ||
      p->vws_depth >= 0 || !is_semiring_product(as, as->rhs))
    return 0;
  int walker = 0;
  for (int k = 1; k < acc->n; k++) {
    const TensorVar *t = acc->e[k]->u.access.t;
    const tj_format *f = &p->fmt[t->id];
    for (int l = 0; l < f->order; l++) {
      if (level_var(acc->e[k], f, l) != p->order[0] || lv_at(f, l, LV_FULL)) continue;
      if (l > 0 || walker || !lv_at(f, 0, LV_HAS_POS) || lv_format_sliced(f)) return 0;
      walker = t->id;
    }
  }
  return walker;
}

bool lower_plan(const Assignment *as, IndexVar *const *want, int nwant,
                bool strict, LowerPlan *p, Diag *d) {
  Diag first;
  diag_init(&first);
  if (!plan_once(as, want, nwant, strict, false, p, &first)) {
    /* A sparse output that would be scattered after a reduction: retry
     * with output indices outermost, converting operands as needed. */
    Diag retry;
    diag_init(&retry);
    if (first.status != TJ_ERR_UNSUPPORTED || strict ||
        !plan_once(as, want, nwant, strict, true, p, &retry)) {
      *d = first;
      return false;
    }
  }
  AccessList acc;
  if (!collect_all(as, &acc, d)) return false;
  /* Row ranges need a dense loop at depth 0: every operand walked there
   * is dense at that level. */
  bool dense_outer = p->nloops > 0;
  for (int k = 1; k < acc.n && dense_outer; k++) {
    const tj_format *f = &p->fmt[acc.e[k]->u.access.t->id];
    if (f->order > 0 && level_var(acc.e[k], f, 0) == p->order[0] && !lv_at(f, 0, LV_FULL))
      dense_outer = false;
  }
  p->rangeable = dense_outer && p->out_sparse && lv_at(&p->fmt[0], 0, LV_FULL) &&
                 lw_out_concat_ok(&p->fmt[0]) &&
                 level_var(as->lhs, &p->fmt[0], 0) == p->order[0];
  /* Partial outputs per chunk of rows are combined by the root operator,
   * a reduction operator (the runtime's rt_storage_sum_partials: + * min
   * max or and), or a definition's (the entry's combine kernel). */
  p->pos_rows = pos_rows_operand(as, &acc, p);
  /* A converted operand (or a mask's pattern) is a copy of a view's
   * slice, a tensor of its own: no slices in its format. */
  for (int t = 0; t < as->ntensors; t++)
    if (p->convert[t] || p->pattern[t]) lv_format_unslice(&p->fmt[t]);
  p->outer_dense = dense_outer;
  p->reduce_rows = dense_outer && !p->out_sparse && nt_is_root_reduction(as, p->order[0]) &&
                   (as->root_def || nt_op_is_reduction(as->root_op));
  p->seg_rows = dense_outer ? 0 : seg_rows_operand(as, &acc, p);
  return check_sum_order(as, p, d);
}

/* Collects into pr->walked the accesses of e the leaf's loop walks; false
 * past LEAF_CASES_MAX of them. */
static bool walked_at_leaf(Presence *pr, const Expr *e) {
  if (e->kind == EX_ACCESS) {
    if (!walked_at(pr, e, pr->leaf)) return true;
    if (pr->nwalked == LEAF_CASES_MAX) return false;
    pr->walked[pr->nwalked++] = e;
    return true;
  }
  if (e->kind == EX_LITERAL) return true;
  if (e->kind == EX_SUM) return walked_at_leaf(pr, e->u.sum.a);
  Expr *k[2];
  int n = nt_children(e, k);
  for (int c = 0; c < n; c++)
    if (!walked_at_leaf(pr, k[c])) return false;
  return true;
}

bool lower_plan_output_exact(const Assignment *as, const LowerPlan *p) {
  const tj_format *f = &p->fmt[0];
  int leaf = p->out_sparse ? lw_out_leaf(f) : -1;
  if (leaf < 0) return true;
  const IndexVar *v = level_var(as->lhs, f, leaf);
  if (p->ws_depth >= 0 && p->ws_var == v) return true;
  Presence pr = {.as = as, .p = p};
  for (int x = 0; x < NT_MAX_INDICES; x++) pr.depth_of[x] = NT_MAX_INDICES;
  for (int k = 0; k < p->nloops; k++) pr.depth_of[p->order[k]->id] = k;
  pr.leaf = pr.depth_of[v->id];
  if (rhs_full_at(&pr, as->rhs, pr.leaf)) return false;   /* every coordinate stored */
  if (!walked_at_leaf(&pr, as->rhs)) return false;
  /* each case of the leaf's lattice (which walked accesses store the
   * coordinate) that stores it must find an entry in every loop below */
  pr.by_case = true;
  for (pr.present = 0; pr.present < 1u << pr.nwalked; pr.present++) {
    if (!rhs_full_at(&pr, as->rhs, pr.leaf)) continue;
    for (int d = pr.leaf + 1; d < p->nloops; d++)
      if (!rhs_full_at(&pr, as->rhs, d)) return false;
  }
  return true;
}

Cin *lower_plan_notation(Arena *a, const LowerPlan *p, const Cin *cin, Diag *d) {
  int outer = 0;
  for (const Cin *c = cin; c->kind == CIN_FORALL; c = c->u.forall.body) outer++;
  Cin *out = cin_reorder(a, cin, p->order, outer, d);
  if (out && p->ws_depth >= 0) out = cin_workspace(a, out, p->ws_var, p->ws_depth,
                                                      p->ws_name ? p->ws_name : "w", d);
  if (out && p->vws_depth >= 0)
    out = cin_subexpr_workspace(a, out, p->vws_node, p->vws_sum, p->vws_vars, p->vws_nvars,
                                p->vws_depth, p->vws_name, d);
  return out;
}

/* The loop nest the lowering walks, read from the concrete index notation
 * (not from the planner): the loops in nesting order — the outer forall
 * chain, then each where's producer loops, a sum's nested inside its
 * scope — and the one workspace where, if any:
 *
 *   forall(i, where(y(i) = b(i) - t_j, forall(j, t_j += A(i,j) * x(j))))
 *     -> loops i, j; no workspace
 *   forall(i, where(forall(j, A(i,j) = w(j)), forall(k, forall(j, w(j) += ...))))
 *     -> loops i, k, j; workspace over j at depth 1
 *
 *   forall(i, where(forall(j, y(i) += w(j) * x(j)), forall(j, w(j) = B(i,j) + C(i,j))))
 *     -> loops i, j; a subexpression's workspace at depth 1 (its producer
 *        over j, then the consumer's loops below j)
 *   where(forall(i, forall(j, A(i,j) = w(i,j) * D(i,j))),
 *         forall(i, forall(k, forall(j, w(i,j) += B(i,k) * C(k,j)))))
 *     -> loops i, k, j; a workspace over i, j at depth 0 (the consumer
 *        skips k's loop)
 *
 * Shapes the lowering cannot emit yet (two workspaces) are refused with a
 * message.
 *
 * The statement is folded from the assignments the same way: a where()
 * of a sum's temp puts the sum back in its consumer's rhs (an EX_SUM over
 * the temp's loop, of its producer's rhs and operator), a workspace where
 * puts back what its producer computes; so the emitter lowers exactly
 * what the notation says:
 *   forall(i, where(y(i) = b(i) - t_j, forall(j, t_j += A(i,j) * x(j))))
 *     -> y(i) = b(i) - sum(j, A(i,j) * x(j))
 */
#include "lowerer.h"

/* The statement of a part of the notation (lower_nest's fold). */
typedef struct Stmt {
  const Expr *lhs, *rhs;
  OpKind op;
  const NtDef *def;
  const NtSemiring *semiring;
  bool keeps_old;
} Stmt;

/* e with each access of t replaced by with; nodes above none are shared
 * (the emitter finds accesses by node); NULL when out of memory. */
static const Expr *replace_access(Arena *a, const Expr *e, const TensorVar *t, const Expr *with) {
  if (e->kind == EX_ACCESS) return e->u.access.t == t ? with : e;
  Expr *k[2];
  int n = nt_children(e, k);
  if (n == 0) return e;
  const Expr *ck[2] = {replace_access(a, k[0], t, with),
                       n > 1 ? replace_access(a, k[1], t, with) : NULL};
  if (!ck[0] || (n > 1 && !ck[1])) return NULL;
  if (ck[0] == k[0] && (n < 2 || ck[1] == k[1])) return e;
  Expr *c = arena_alloc(a, sizeof *c);
  if (!c) return NULL;
  *c = *e;
  if (e->kind == EX_SUM) c->u.sum.a = (Expr *)ck[0];
  else c->u.op.a = (Expr *)ck[0], c->u.op.b = (Expr *)ck[1];
  return c;
}

/* The index of c's first loop (a where's: its consumer's), or NULL. */
static IndexVar *first_loop(const Cin *c) {
  switch (c->kind) {
  case CIN_FORALL: return c->u.forall.iv;
  case CIN_WHERE: return first_loop(c->u.where.consumer);
  default: return NULL;
  }
}

/* sum(iv, body) by op (or def): the node a sum's temp stands for. */
static Expr *sum_node(Arena *a, IndexVar *iv, const Expr *body, OpKind op, const NtDef *def,
                      const char *temp) {
  Expr *s = nt_reduce(a, op, iv, (Expr *)body, false, 0);
  if (!s) return NULL;
  s->u.sum.def = def;
  s->u.sum.temp = temp;
  s->dtype = body->dtype;
  return s;
}

static bool fold(Arena *a, const Cin *c, Stmt *s, Diag *d) {
  switch (c->kind) {
  case CIN_ASSIGN:
    *s = (Stmt){c->u.assign.lhs, c->u.assign.rhs, c->u.assign.op, c->u.assign.def,
                c->u.assign.semiring, c->u.assign.keeps_old};
    return true;
  case CIN_FORALL: return fold(a, c->u.forall.body, s, d);
  case CIN_SEQUENCE: return TJ_BUG(d, "a sequence reached one statement's loop nest");
  case CIN_WHERE: break;
  }
  Stmt p;
  if (!fold(a, c->u.where.consumer, s, d) || !fold(a, c->u.where.producer, &p, d)) return false;
  const TensorVar *ws = c->u.where.ws;
  IndexVar *sum_iv = c->u.where.summed;
  bool temp = !c->u.where.subexpr && ws->decl.order == 0;
  if (temp && !(sum_iv = first_loop(c->u.where.producer)))
    return TJ_BUG(d, "a sum's temp produced by no loop");
  if (!c->u.where.subexpr && !temp)   /* drained into the output: the producer's update */
    s->op = p.op, s->def = p.def;
  /* what the consumer reads ws in place of: the producer's rhs, or its
   * reduction over sum_iv (by the producer's update) */
  const Expr *in_place =
      sum_iv ? sum_node(a, sum_iv, p.rhs, p.op, p.def, temp ? ws->name : NULL) : p.rhs;
  s->rhs = in_place ? replace_access(a, s->rhs, ws, in_place) : NULL;
  if (!s->rhs) return diag_error(d, TJ_ERR_NOMEM, "out of memory while lowering");
  return true;
}

static bool walk(const Cin *c, LoopNest *n, Diag *d);

/* The assignment at the end of a forall chain, or NULL. */
static const Cin *chain_assign(const Cin *c) {
  while (c->kind == CIN_FORALL) c = c->u.forall.body;
  return c->kind == CIN_ASSIGN ? c : NULL;
}

/* A subexpression's workspace: the producer's loops (down to j), then the
 * consumer's below its loop over j. */
static bool walk_subexpr(const Cin *c, LoopNest *n, Diag *d) {
  const Cin *cons = c->u.where.consumer;
  const Cin *pa = chain_assign(c->u.where.producer), *ca = chain_assign(cons);
  if (n->ws_depth >= 0 || n->vws_depth >= 0 || cons->kind != CIN_FORALL || !pa || !ca)
    return diag_error(d, TJ_ERR_UNSUPPORTED,
                      "lowering takes one workspace, read by a loop over its index");
  int first = n->nloops;
  n->vws_depth = first;
  n->vws_first = cons->u.forall.iv;
  n->vws_node = pa->u.assign.rhs;
  n->vws_sums = pa->u.assign.accumulate;
  n->vws_rhs = ca->u.assign.rhs;
  n->vws_access = pa->u.assign.lhs;
  /* the consumer's foralls over the workspace's indices; their loops are
   * the producer's too */
  for (int m = 1; m < n->vws_access->u.access.n; m++) {
    cons = cons->u.forall.body;
    if (cons->kind != CIN_FORALL)
      return diag_error(d, TJ_ERR_UNSUPPORTED, "lowering takes one workspace, read by loops "
                        "over its indices");
  }
  n->vws_var = cons->u.forall.iv;
  if (!walk(c->u.where.producer, n, d)) return false;
  n->vws_end = n->nloops;
  if (!walk(cons->u.forall.body, n, d)) return false;
  /* split, divide, bound, unroll and vectorize of a loop of the workspace's
   * index apply to the producer's and the consumer's loop alike; pos only to
   * the producer's own loops (the consumer walks other accesses) */
  const Expr *wa = n->vws_access;
  for (int k = first; k < n->nloops; k++) {
    const CinLoopForm *f = n->form[k];
    const char *ws = wa->u.access.t->name;
    bool shared = false;
    for (int m = 0; m < wa->u.access.n; m++) shared |= wa->u.access.idx[m] == n->order[k];
    if (f->fuse || f->fused || n->par[k] || f->race || n->par_asked == k)
      return diag_error(d, TJ_ERR_UNSUPPORTED, "the loop of %s reads or writes the workspace "
                        "%s: its loops take no fuse or parallelize (a parallel loop around "
                        "the where gives each thread a workspace of its own)",
                        n->order[k]->name, ws);
    if (f->pos && shared)
      return diag_error(d, TJ_ERR_UNSUPPORTED, "pos(%s, %s, ...): %s is an index of the "
                        "workspace %s, whose producer and consumer walk different accesses; "
                        "pos takes the producer's own loops (of indices summed only inside "
                        "the subexpression)", n->order[k]->name, f->pos, n->order[k]->name, ws);
  }
  return true;
}

static bool walk(const Cin *c, LoopNest *n, Diag *d) {
  switch (c->kind) {
  case CIN_FORALL:
    if (n->nloops == NT_MAX_INDICES) return diag_error(d, TJ_ERR_UNSUPPORTED, "too many loops");
    n->unroll[n->nloops] = c->u.forall.unroll;
    n->par[n->nloops] = c->u.forall.par;
    n->vec[n->nloops] = c->u.forall.vec_width;
    if (c->u.forall.flags & CIN_PARALLEL) n->par_asked = n->nloops;
    n->form[n->nloops] = &c->u.forall.form;
    n->order[n->nloops++] = c->u.forall.iv;
    return walk(c->u.forall.body, n, d);
  case CIN_WHERE:
    if (c->u.where.subexpr) return walk_subexpr(c, n, d);
    if (c->u.where.ws && c->u.where.ws->decl.order > 0) {
      const Cin *drain = c->u.where.consumer;
      if (n->ws_depth >= 0 || n->vws_depth >= 0 || drain->kind != CIN_FORALL)
        return diag_error(d, TJ_ERR_UNSUPPORTED,
                          "lowering takes one workspace, drained by a loop over its index");
      n->ws_depth = n->nloops;
      n->ws_var = drain->u.forall.iv;
      return walk(c->u.where.producer, n, d);
    }
    /* a sum's temp: the consumer's loops (nested sums), then the producer's */
    return walk(c->u.where.consumer, n, d) && walk(c->u.where.producer, n, d);
  case CIN_SEQUENCE:   /* lower_kernel_seq lowers each statement on its own */
    return TJ_BUG(d, "a sequence reached one statement's loop nest");
  case CIN_ASSIGN: return true;
  }
  return TJ_BUG(d, "unknown concrete notation node");
}

bool lower_nest_reduces(const LoopNest *n, const IndexVar *v) {
  return nt_reduces(n->lhs, n->rhs, v);
}

bool lower_nest_root_reduces(const LoopNest *n, const IndexVar *v) {
  return nt_root_reduces(n->lhs, n->rhs, v);
}

double lower_nest_identity(const LoopNest *n) { return nt_reduction_identity(n->op, n->def); }

bool lower_nest(Arena *a, const Cin *c, LoopNest *n, Diag *d) {
  Stmt s;
  if (!fold(a, c, &s, d)) return false;
  n->lhs = s.lhs, n->rhs = s.rhs, n->op = s.op, n->def = s.def;
  n->semiring = s.semiring, n->keeps_old = s.keeps_old;
  n->nloops = 0;
  n->ws_depth = -1;
  n->ws_var = NULL;
  n->vws_depth = -1;
  n->vws_var = NULL;
  n->vws_first = NULL;
  n->par_asked = -1;
  if (!walk(c, n, d)) return false;
  for (int k = 0; k < n->nloops; k++)
    if (n->form[k]->fuse && (k + 1 == n->nloops || !n->form[k + 1]->fused))
      return diag_error(d, TJ_ERR_UNSUPPORTED, "fuse(%s, %s, %s): the loop of %s is no longer "
                        "directly inside the loop of %s", n->order[k]->name,
                        n->form[k]->fuse_inner->name, n->form[k]->fuse,
                        n->form[k]->fuse_inner->name, n->order[k]->name);
  for (int k = 0; k < n->nloops; k++) {   /* the loop an outer half sits on */
    const IndexVar *at = n->form[k]->outer_at;
    n->outer_at[k] = -1;
    for (int q = 0; at && q < k; q++)
      if (n->order[q] == at) n->outer_at[k] = q;
    if (at && n->outer_at[k] < 0)
      return diag_error(d, TJ_ERR_UNSUPPORTED, "split of %s: its outer half %s sits above the "
                        "loop of %s, which now runs inside it (the formats or a later "
                        "reorder moved it); put %s above %s", n->order[k]->name,
                        n->form[k]->outer, at->name, at->name, n->form[k]->inner);
  }
  return true;
}

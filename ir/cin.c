/* Concrete index notation and schedule directives.
 *
 * cin_from_assignment nests one forall per index variable around the
 * assignment: the output's indices in output order, then the summed
 * indices in first-use order; then reorder / parallelize / vectorize from
 * the schedule are applied to that loop list (precompute is kept as text
 * for lowering, which builds the where() around a workspace). Inside the
 * nest a reduction reads as `+=` (or `min=`, `*=`: its operator's): the
 * loops accumulate into the output, which `=` sets to the identity first. Schedules are text: "reorder(i,k,j)
 * parallelize(i) vectorize(j,8) precompute(B(i,k)*C(k,j), j, w)", the
 * directives separated by blanks, commas or semicolons.
 */
#include "cin_loops.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- constructors ---- */

Cin *cin_forall(Arena *a, IndexVar *iv, Cin *body) {
  Cin *c = arena_alloc(a, sizeof *c);
  if (!c) return NULL;
  c->kind = CIN_FORALL;
  c->u.forall.iv = iv;
  c->u.forall.body = body;
  return c;
}

Cin *cin_where(Arena *a, Cin *consumer, Cin *producer, TensorVar *ws) {
  Cin *c = arena_alloc(a, sizeof *c);
  if (!c) return NULL;
  c->kind = CIN_WHERE;
  c->u.where.consumer = consumer;
  c->u.where.producer = producer;
  c->u.where.ws = ws;
  return c;
}

Cin *cin_assign(Arena *a, Expr *lhs, Expr *rhs, bool accumulate) {
  Cin *c = arena_alloc(a, sizeof *c);
  if (!c) return NULL;
  c->kind = CIN_ASSIGN;
  c->u.assign.lhs = lhs;
  c->u.assign.rhs = rhs;
  c->u.assign.accumulate = accumulate;
  c->u.assign.op = OP_ADD;
  return c;
}

/* ---- default loop order and schedule application ---- */

static void add_loop(Loops *l, IndexVar *v) {
  for (int i = 0; i < l->n; i++)
    if (l->iv[i] == v) return;
  if (l->n < NT_MAX_INDICES) l->iv[l->n++] = v;
}

/* Appends e's indices in first-use order. */
static void collect(Loops *l, const Expr *e) {
  if (e->kind == EX_ACCESS) {
    for (int m = 0; m < e->u.access.n; m++) add_loop(l, e->u.access.idx[m]);
    return;
  }
  Expr *k[2];
  int n = nt_children(e, k);
  for (int i = 0; i < n; i++) collect(l, k[i]);
}

/* Moves the indices that sum nodes bind behind the others, in preorder of
 * the sums (outer sums first): each sum's loop nests inside its parent's. */
static void sums_last(Loops *l, const Expr *rhs) {
  const Expr *s[NT_MAX_INDICES];
  int ns = nt_sums(rhs, s, NT_MAX_INDICES);
  if (ns == 0) return;
  Loops kept = {0};
  for (int i = 0; i < l->n; i++) {
    bool bound = false;
    for (int k = 0; k < ns && k < NT_MAX_INDICES; k++) bound |= s[k]->u.sum.iv == l->iv[i];
    if (!bound) add_loop(&kept, l->iv[i]);
  }
  for (int k = 0; k < ns && k < NT_MAX_INDICES; k++) add_loop(&kept, s[k]->u.sum.iv);
  *l = kept;
}

static bool apply(Loops *l, const Assignment *as, const Schedule *s, Diag *d) {
  for (int i = 0; s && i < s->n; i++) {
    const SchedDirective *sd = &s->d[i];
    switch (sd->kind) {
    case SCHED_REORDER:
      if (!loops_reorder(l, s, sd, d)) return false;
      break;
    case SCHED_PARALLELIZE:
    case SCHED_VECTORIZE:
    case SCHED_UNROLL:
      if (!loops_flag(l, s, sd, d)) return false;
      break;
    case SCHED_SPLIT:
    case SCHED_DIVIDE:
    case SCHED_POS:
    case SCHED_BOUND:
    case SCHED_FUSE:
      if (!loops_rewrite(l, as, s, sd, d)) return false;
      break;
    case SCHED_PRECOMPUTE: break; /* lowering builds the where() */
    case SCHED_METHOD: break;     /* the driver's choice of kernel */
    case SCHED_SEQUENCE:
    case SCHED_NOSEQUENCE: break; /* the driver's: nt_sequence_split */
    }
  }
  return true;
}

/* The loop list with each fused loop (one slot during scheduling) back as
 * its two loops, the inner one marked fused. */
static void unfuse(Loops *l) {
  Loops out = {0};
  for (int i = 0; i < l->n && out.n < NT_MAX_INDICES; i++) {
    int k = out.n++;
    out.iv[k] = l->iv[i], out.flags[k] = l->flags[i], out.vec_width[k] = l->vec_width[i];
    out.unroll[k] = l->unroll[i], out.par[k] = l->par[i], out.form[k] = l->form[i];
    if (l->form[i].fuse && out.n < NT_MAX_INDICES) {
      k = out.n++;
      out.iv[k] = (IndexVar *)l->form[i].fuse_inner;
      out.form[k].fused = true;
    }
  }
  *l = out;
}

/* forall(v, body) with the flags the schedule gave v. */
static Cin *scheduled_forall(Arena *a, const Loops *l, IndexVar *v, Cin *body) {
  Cin *c = body ? cin_forall(a, v, body) : NULL;
  for (int i = 0; c && i < l->n; i++)
    if (l->iv[i] == v) {
      c->u.forall.flags = l->flags[i];
      c->u.forall.vec_width = l->vec_width[i];
      c->u.forall.unroll = l->unroll[i];
      c->u.forall.par = l->par[i];
      c->u.forall.form = l->form[i];
    }
  return c;
}

/* forall over from's index with from's flags, around body. */
static Cin *forall_like(Arena *a, const Cin *from, Cin *body) {
  Cin *c = body ? cin_forall(a, from->u.forall.iv, body) : NULL;
  if (c) {
    c->u.forall.flags = from->u.forall.flags;
    c->u.forall.vec_width = from->u.forall.vec_width;
    c->u.forall.unroll = from->u.forall.unroll;
    c->u.forall.par = from->u.forall.par;
    c->u.forall.form = from->u.forall.form;
  }
  return c;
}

const char *cin_bound_name(BoundKind k) {
  return k == BOUND_MAX_EXACT ? "max_exact" : k == BOUND_MAX_CONSTRAINT ? "max_constraint" : "";
}

const char *cin_strategy_name(int strategy) {
  static const char *names[] = {"", "static", "balanced", "dynamic"};
  return strategy >= 0 && strategy < 4 ? names[strategy] : "?";
}

typedef struct Temps {
  int n;
  const Expr *sum[NT_MAX_INDICES];
  Expr *t[NT_MAX_INDICES];
} Temps;

/* e with each sum that no other sum of e encloses replaced by a scalar
 * temp `t_j` (recorded in tt); nodes without sums are shared, not copied. */
static Expr *with_temps(Arena *a, const Expr *e, Temps *tt) {
  Expr *k[2];
  int n = nt_children(e, k);
  if (e->kind == EX_SUM) {
    if (tt->n == NT_MAX_INDICES) return NULL;
    TensorVar *t = arena_alloc(a, sizeof *t);
    if (!t) return NULL;
    t->id = -1;
    t->name = e->u.sum.temp ? e->u.sum.temp : arena_printf(a, "t_%s", e->u.sum.iv->name);
    tt->sum[tt->n] = e;
    return tt->t[tt->n++] = nt_access(a, t, 0, NULL, 0);
  }
  const Expr *none[1];
  if (n == 0 || nt_sums(e, none, 0) == 0) return (Expr *)e;
  Expr *c = arena_alloc(a, sizeof *c);
  if (!c) return NULL;
  *c = *e;
  Expr *ck[2] = {with_temps(a, k[0], tt), n > 1 ? with_temps(a, k[1], tt) : NULL};
  if (!ck[0] || (n > 1 && !ck[1])) return NULL;
  c->u.op.a = ck[0], c->u.op.b = ck[1];
  return c;
}

/* The statement of one summation scope (TACO's where): stmt, an
 * assignment whose rhs may hold sums, with those sums read from temps,
 * each temp produced beside it by a statement of its own (the sum's
 * operator, stmt's semiring):
 *   where(y(i) = b(i) - t_j, forall(j, t_j += A(i,j) * x(j))) */
static Cin *scope_stmt(Arena *a, const Loops *l, Cin *stmt) {
  Temps tt = {0};
  Expr *r = stmt ? with_temps(a, stmt->u.assign.rhs, &tt) : NULL;
  if (!r) return NULL;
  stmt->u.assign.rhs = r;
  Cin *c = stmt;
  for (int k = 0; k < tt.n && c; k++) {
    const Expr *sum = tt.sum[k];
    Cin *body = cin_assign(a, tt.t[k], sum->u.sum.a, true);
    if (body) {
      body->u.assign.op = sum->u.sum.op;
      body->u.assign.def = sum->u.sum.def;
      body->u.assign.op_name = sum->u.sum.def ? sum->u.sum.def->name : NULL;
      body->u.assign.semiring = stmt->u.assign.semiring;
    }
    Cin *producer = scheduled_forall(a, l, sum->u.sum.iv, scope_stmt(a, l, body));
    c = producer ? cin_where(a, c, producer, tt.t[k]->u.access.t) : NULL;
  }
  return c;
}

Cin *cin_from_assignment(Arena *a, const Assignment *as, const Schedule *s,
                         Diag *d) {
  Loops l = {0};
  collect(&l, as->lhs);
  int nlhs = l.n;
  collect(&l, as->rhs);
  sums_last(&l, as->rhs);
  if (!apply(&l, as, s, d)) return NULL;
  unfuse(&l);
  const Expr *sums[NT_MAX_INDICES];
  int nroot = l.n - nt_sums(as->rhs, sums, NT_MAX_INDICES);
  for (int k = 0; k + 1 < l.n; k++) /* a fuse stays inside one scope */
    if (l.form[k].fuse && (k < nroot) != (k + 1 < nroot))
      return diag_error(d, TJ_ERR_UNSUPPORTED, "fuse(%s, %s, %s): %s is summed over a "
                        "subexpression, so its loop nests inside that sum's where(), not "
                        "directly inside the loop of %s", l.iv[k]->name, l.iv[k + 1]->name,
                        l.form[k].fuse, l.iv[k + 1]->name, l.iv[k]->name), NULL;
  Cin *c = cin_assign(a, as->lhs, as->rhs, as->accumulate || nroot > nlhs);
  if (c) {
    c->u.assign.op = as->root_op;
    c->u.assign.def = as->root_def;
    c->u.assign.op_name = as->root_def ? as->root_def->name : NULL;
    c->u.assign.semiring = as->semiring;
    c->u.assign.keeps_old = as->accumulate;
  }
  c = scope_stmt(a, &l, c);
  /* A sum's loop nests inside its scope: a reorder cannot move it out. */
  for (int k = 0; k < l.n - nroot; k++)
    if (l.iv[nroot + k] != sums[k]->u.sum.iv)
      return diag_error(d, TJ_ERR_UNSUPPORTED,
                        "reorder: index %s is summed over a subexpression (%s(%s, ...)), "
                        "so its loop must stay inside the loops of the indices around "
                        "that sum", sums[k]->u.sum.iv->name,
                        sums[k]->u.sum.implicit ? "an implicit sum" : "sum",
                        sums[k]->u.sum.iv->name), NULL;
  for (int i = nroot - 1; c && i >= 0; i--) c = scheduled_forall(a, &l, l.iv[i], c);
  if (!c) diag_error(d, TJ_ERR_NOMEM, "out of memory building the loop nest");
  return c;
}

/* Appends the loops of c in nesting order: a where's consumer, then its
 * producer; a subexpression's workspace: its producer, then the loops of
 * the consumer below the one over the workspace's index (that index is
 * the producer's innermost loop). */
static int loop_order(const Cin *c, IndexVar **order, int n, int max) {
  switch (c->kind) {
  case CIN_FORALL:
    if (n < max) order[n] = c->u.forall.iv;
    return loop_order(c->u.forall.body, order, n + 1, max);
  case CIN_WHERE:
    if (c->u.where.subexpr && c->u.where.consumer->kind == CIN_FORALL) {
      n = loop_order(c->u.where.producer, order, n, max);
      const Cin *cons = c->u.where.consumer;   /* below its loops over w's indices */
      for (int m = 1; m < c->u.where.ws->decl.order && cons->u.forall.body->kind == CIN_FORALL; m++)
        cons = cons->u.forall.body;
      return loop_order(cons->u.forall.body, order, n, max);
    }
    n = loop_order(c->u.where.consumer, order, n, max);
    return loop_order(c->u.where.producer, order, n, max);
  case CIN_SEQUENCE:   /* each statement is lowered on its own: its loops in turn */
    n = loop_order(c->u.seq.first, order, n, max);
    return loop_order(c->u.seq.second, order, n, max);
  case CIN_ASSIGN: break;
  }
  return n;
}

int cin_loop_order(const Cin *c, IndexVar **order, int max) {
  int n = loop_order(c, order, 0, max);
  return n < max ? n : max;
}

/* The foralls from c down to the first other statement, outermost first,
 * in loops (*n of them); that statement. */
static const Cin *loop_chain(const Cin *c, const Cin **loops, int *n) {
  *n = 0;
  for (; c->kind == CIN_FORALL && *n < NT_MAX_INDICES; c = c->u.forall.body) loops[(*n)++] = c;
  return c;
}

Cin *cin_reorder(Arena *a, const Cin *c, IndexVar *const *order, int n, Diag *d) {
  const Cin *loops[NT_MAX_INDICES];
  int m;
  const Cin *inner = loop_chain(c, loops, &m);
  if (m != n)
    return diag_error(d, TJ_ERR_INTERNAL, "reorder: %d loops for a nest of %d", n, m), NULL;
  Cin *out = (Cin *)inner;
  for (int k = n - 1; k >= 0 && out; k--) {
    const Cin *from = NULL;
    for (int q = 0; q < m; q++)
      if (loops[q]->u.forall.iv == order[k]) from = loops[q];
    if (!from)
      return diag_error(d, TJ_ERR_INTERNAL, "reorder: %s is not a loop of the nest",
                        order[k]->name), NULL;
    out = forall_like(a, from, out);
  }
  if (!out) diag_error(d, TJ_ERR_NOMEM, "out of memory");
  return out;
}

/* The access w(vars) of a new workspace w named name over nvars indices,
 * of dtype dt; NULL when out of memory. */
static Expr *workspace_access(Arena *a, const char *name, IndexVar *const *vars, int nvars,
                              tj_dtype dt, TensorVar **w) {
  *w = arena_alloc(a, sizeof **w);
  if (!*w) return NULL;
  (*w)->id = -1;
  (*w)->name = name;
  (*w)->decl.order = nvars;
  (*w)->decl.dtype = dt;
  Expr *wj = nt_access(a, *w, nvars, vars, 0);
  if (wj) wj->dtype = dt;
  return wj;
}

/* x (an assignment, or NULL) with from's reduction operator and semiring
 * (and, when x writes from's lhs, whether it keeps the output's contents). */
static Cin *with_op(Cin *x, const Cin *from) {
  if (!x) return NULL;
  x->u.assign.op = from->u.assign.op, x->u.assign.op_name = from->u.assign.op_name;
  x->u.assign.def = from->u.assign.def;
  x->u.assign.semiring = from->u.assign.semiring;
  x->u.assign.keeps_old = x->u.assign.lhs == from->u.assign.lhs && from->u.assign.keeps_old;
  return x;
}

Cin *cin_workspace(Arena *a, const Cin *c, IndexVar *j, int depth, const char *name, Diag *d) {
  const Cin *loops[NT_MAX_INDICES];
  int n;
  const Cin *assign = loop_chain(c, loops, &n);
  bool inside = false;
  for (int k = depth; k < n; k++) inside |= loops[k]->u.forall.iv == j;
  if (assign->kind != CIN_ASSIGN || depth < 0 || depth >= n || !inside)
    return diag_error(d, TJ_ERR_INTERNAL, "workspace over %s at loop %d: the notation has "
                      "another shape", j->name, depth), NULL;
  TensorVar *w;
  Expr *wj = workspace_access(a, name, &j, 1, (tj_dtype)0, &w);
  Cin *producer = wj ? with_op(cin_assign(a, wj, assign->u.assign.rhs, true), assign) : NULL;
  for (int k = n - 1; k >= depth && producer; k--) producer = forall_like(a, loops[k], producer);
  Cin *drain = wj ? with_op(cin_assign(a, assign->u.assign.lhs, wj, false), assign) : NULL;
  Cin *consumer = drain ? cin_forall(a, j, drain) : NULL;
  Cin *out = producer && consumer ? cin_where(a, consumer, producer, w) : NULL;
  for (int k = depth - 1; k >= 0 && out; k--) out = forall_like(a, loops[k], out);
  if (!out) diag_error(d, TJ_ERR_NOMEM, "out of memory");
  return out;
}

/* x with node e replaced by w; nodes not above e are shared (the lowering
 * finds accesses by node). */
static Expr *with_node(Arena *a, const Expr *x, const Expr *e, Expr *w) {
  if (x == e) return w;
  Expr *k[2];
  int n = nt_children(x, k);
  if (n == 0) return (Expr *)x;
  Expr *ck[2] = {with_node(a, k[0], e, w), n > 1 ? with_node(a, k[1], e, w) : NULL};
  if (!ck[0] || (n > 1 && !ck[1])) return NULL;
  if (ck[0] == k[0] && (n < 2 || ck[1] == k[1])) return (Expr *)x;
  Expr *c = arena_alloc(a, sizeof *c);
  if (!c) return NULL;
  *c = *x;
  if (x->kind == EX_SUM) c->u.sum.a = ck[0];
  else c->u.op.a = ck[0], c->u.op.b = ck[1];
  return c;
}

/* Whether c has a loop over j. */
static bool has_loop(const Cin *c, const IndexVar *j) {
  switch (c->kind) {
  case CIN_FORALL: return c->u.forall.iv == j || has_loop(c->u.forall.body, j);
  case CIN_WHERE: return has_loop(c->u.where.consumer, j) || has_loop(c->u.where.producer, j);
  case CIN_SEQUENCE: return has_loop(c->u.seq.first, j) || has_loop(c->u.seq.second, j);
  case CIN_ASSIGN: return false;
  }
  return false;
}

enum { AT_J = -2 };   /* the where at j's own loop (inside a sum's where) */

/* Whether v is one of vars. */
static bool in_set(IndexVar *const *vars, int nvars, const IndexVar *v) {
  for (int q = 0; q < nvars; q++)
    if (vars[q] == v) return true;
  return false;
}

static Cin *subexpr_where(Arena *a, const Cin *c, const Expr *e, const Expr *sum,
                          IndexVar *const *vars, int nvars, int depth, const char *name,
                          Diag *d) {
  const Cin *loops[NT_MAX_INDICES];
  int n, dj = -1, found = 0;
  IndexVar *j = vars[nvars - 1];
  const Cin *assign = loop_chain(c, loops, &n);
  for (int k = 0; k < n; k++)
    if (loops[k]->u.forall.iv == j) dj = k;
  /* the sum the producer takes: its where(lhs = ... t_k ..., forall(k, t_k
   * += e)) ends the chain; the consumer reads w in t_k's place */
  const Cin *sum_loop = NULL;
  const Expr *replaced = e;
  if (sum && assign->kind == CIN_WHERE && !assign->u.where.subexpr) {
    sum_loop = assign->u.where.producer;
    const Cin *t = sum_loop->kind == CIN_FORALL ? sum_loop->u.forall.body : NULL;
    if (!t || sum_loop->u.forall.iv != sum->u.sum.iv || t->kind != CIN_ASSIGN ||
        t->u.assign.rhs != e)
      return diag_error(d, TJ_ERR_INTERNAL, "the sum over %s the workspace %s takes has "
                        "another shape", sum->u.sum.iv->name, name), NULL;
    replaced = t->u.assign.lhs;
    assign = assign->u.where.consumer;
  }
  for (int k = 0; k <= dj; k++) found += in_set(vars, nvars, loops[k]->u.forall.iv);
  if (depth == AT_J) depth = dj;
  if (assign->kind == CIN_WHERE && !assign->u.where.subexpr && dj < 0 &&
      (depth >= n || depth < 0)) {
    /* inside a sum's where (the residual's forall(i, where(y(i) = b(i) - t_j,
     * forall(j, t_j += ...)))): the workspace goes into the loops of the
     * sum over j, at j's loop */
    bool in_producer = has_loop(assign->u.where.producer, j);
    const Cin *side = in_producer ? assign->u.where.producer : assign->u.where.consumer;
    Cin *in = nvars == 1 ? subexpr_where(a, side, e, sum, vars, 1, AT_J, name, d) : NULL;
    if (nvars != 1)
      return diag_error(d, TJ_ERR_INTERNAL, "a workspace over %d indices inside a sum's "
                        "where", nvars), NULL;
    Cin *out = in ? arena_alloc(a, sizeof *out) : NULL;
    if (!out) return in ? diag_error(d, TJ_ERR_NOMEM, "out of memory"), NULL : NULL;
    *out = *assign;
    if (in_producer) out->u.where.producer = in;
    else out->u.where.consumer = in;
    for (int k = n - 1; k >= 0 && out; k--) out = forall_like(a, loops[k], out);
    if (!out) diag_error(d, TJ_ERR_NOMEM, "out of memory");
    return out;
  }
  if (assign->kind != CIN_ASSIGN || depth < 0 || dj < depth || found != nvars)
    return diag_error(d, TJ_ERR_INTERNAL, "workspace of a subexpression over %s at loop %d: "
                      "the notation has another shape", j->name, depth), NULL;
  TensorVar *w;
  Expr *wj = workspace_access(a, name, vars, nvars, e->dtype, &w);
  Expr *rhs = wj ? with_node(a, assign->u.assign.rhs, replaced, wj) : NULL;
  /* the producer sums when it has loops other than the workspace's */
  Cin *producer = wj ? cin_assign(a, wj, (Expr *)e, dj - depth + 1 > nvars || sum_loop) : NULL;
  if (producer) producer->u.assign.semiring = assign->u.assign.semiring;
  if (producer && sum_loop) producer = forall_like(a, sum_loop, producer);
  for (int k = dj; k >= depth && producer; k--) producer = forall_like(a, loops[k], producer);
  Cin *consumer =
      rhs ? with_op(cin_assign(a, assign->u.assign.lhs, rhs, assign->u.assign.accumulate), assign)
          : NULL;
  for (int k = n - 1; k > dj && consumer; k--) consumer = forall_like(a, loops[k], consumer);
  for (int k = dj; k >= depth && consumer; k--)   /* the workspace's own loops */
    if (in_set(vars, nvars, loops[k]->u.forall.iv)) consumer = forall_like(a, loops[k], consumer);
  Cin *out = producer && consumer ? cin_where(a, consumer, producer, w) : NULL;
  if (out) out->u.where.subexpr = true, out->u.where.summed = sum ? sum->u.sum.iv : NULL;
  for (int k = depth - 1; k >= 0 && out; k--) out = forall_like(a, loops[k], out);
  if (!out) diag_error(d, TJ_ERR_NOMEM, "out of memory");
  return out;
}

Cin *cin_subexpr_workspace(Arena *a, const Cin *c, const Expr *e, const Expr *sum,
                           IndexVar *const *vars, int nvars, int depth, const char *name,
                           Diag *d) {
  if (nvars < 1) return diag_error(d, TJ_ERR_INTERNAL, "a workspace over no index"), NULL;
  return subexpr_where(a, c, e, sum, vars, nvars, depth, name, d);
}

static void print_cin(FILE *out, const Cin *c);

/* name(a, b) for the two-statement nodes. */
static void print_pair(FILE *out, const char *name, const Cin *a, const Cin *b) {
  fprintf(out, "%s(", name);
  print_cin(out, a);
  fputs(", ", out);
  print_cin(out, b);
  fputc(')', out);
}

static void print_par(FILE *out, const Cin *c) {
  const char *race = c->u.forall.form.race;
  if (c->u.forall.flags & CIN_PARALLEL) fputs(":parallel", out);
  if (c->u.forall.par && race)
    fprintf(out, "(%s, %s)", cin_strategy_name(c->u.forall.par), race);
  else if (c->u.forall.par || race)
    fprintf(out, "(%s)", race ? race : cin_strategy_name(c->u.forall.par));
}

static void print_inner_flags(FILE *out, const Cin *c) {
  if (c->u.forall.vec_width > 0) fprintf(out, ":vectorize(%d)", c->u.forall.vec_width);
  if (c->u.forall.unroll > 0) fprintf(out, ":unroll(%d)", c->u.forall.unroll);
}

/* The index c's loop walks: the fused index, or its own. */
static const char *coord_name(const Cin *c) {
  const CinLoopForm *f = &c->u.forall.form;
  return f->fuse ? f->fuse : c->u.forall.iv->name;
}

/* The name the loop of c goes by: its bound or pos variable, or its index. */
static const char *loop_name(const Cin *c) {
  const CinLoopForm *f = &c->u.forall.form;
  return f->bound_name ? f->bound_name : f->pos ? f->pos : coord_name(c);
}

/* The body of c's loop as printed: a fused loop's inner forall is not. */
static const Cin *printed_body(const Cin *c) {
  const Cin *b = c->u.forall.body;
  return c->u.forall.form.fuse && b->kind == CIN_FORALL && b->u.forall.form.fused
             ? b->u.forall.body : b;
}

/* The form of a split loop below c whose outer half sits right above c's
 * loop (CinLoopForm.outer_at), or NULL. */
static const CinLoopForm *outer_half_above(const Cin *c, const Cin *below) {
  switch (below->kind) {
  case CIN_FORALL:
    if (below->u.forall.form.outer_at == c->u.forall.iv) return &below->u.forall.form;
    return outer_half_above(c, below->u.forall.body);
  case CIN_WHERE: {
    const CinLoopForm *f = outer_half_above(c, below->u.where.consumer);
    return f ? f : outer_half_above(c, below->u.where.producer);
  }
  case CIN_SEQUENCE:
  case CIN_ASSIGN: return NULL;
  }
  return NULL;
}

static void print_forall_here(FILE *out, const Cin *c);

/* A split loop prints as its two halves:
 *   forall(i0:parallel, forall(i1:vectorize(8), ...))
 * and, with loops between them, the outer half above the loop it sits on:
 *   forall(j0, forall(k, forall(j1, ...))) */
static void print_forall(FILE *out, const Cin *c) {
  const CinLoopForm *h = outer_half_above(c, c->u.forall.body);
  if (h) fprintf(out, "forall(%s, ", h->outer);
  print_forall_here(out, c);
  if (h) fputc(')', out);
}

static void print_forall_here(FILE *out, const Cin *c) {
  const CinLoopForm *f = &c->u.forall.form;
  if ((f->split || f->divide) && f->outer_at) {
    fprintf(out, "forall(%s", f->inner);
    print_par(out, c);
    print_inner_flags(out, c);
    fputs(", ", out);
    print_cin(out, printed_body(c));
    fputc(')', out);
    return;
  }
  if (f->split || f->divide) {
    fprintf(out, "forall(%s", f->outer);
    if (f->par_outer) print_par(out, c);
    fprintf(out, ", forall(%s", f->inner);
    if (!f->par_outer) print_par(out, c);
    print_inner_flags(out, c);
    fputs(", ", out);
    print_cin(out, printed_body(c));
    fputs("))", out);
    return;
  }
  fprintf(out, "forall(%s", loop_name(c));
  print_par(out, c);
  print_inner_flags(out, c);
  fputs(", ", out);
  print_cin(out, printed_body(c));
  fputc(')', out);
}

static void print_cin(FILE *out, const Cin *c) {
  switch (c->kind) {
  case CIN_FORALL: print_forall(out, c); break;
  case CIN_WHERE: print_pair(out, "where", c->u.where.consumer, c->u.where.producer); break;
  case CIN_SEQUENCE: print_pair(out, "sequence", c->u.seq.first, c->u.seq.second); break;
  case CIN_ASSIGN:
    nt_print_expr(out, c->u.assign.lhs);
    if (c->u.assign.accumulate && c->u.assign.op_name)  /* a definition: t = f(t, ...) */
      fprintf(out, " %s= ", c->u.assign.op_name);
    else if (c->u.assign.accumulate)
      fprintf(out, " %s= ", nt_op(c->u.assign.op)->spelling);
    else fputs(" = ", out);
    nt_print_expr(out, c->u.assign.rhs);
    break;
  }
}

/* The relations printed so far (each once: the statements of a sequence
 * repeat the loop rewrites they share); out NULL only counts them. */
typedef struct Relations {
  FILE *out;
  int n;
  size_t len;
  char seen[2048];
} Relations;

/* Adds one relation ", split(i, i0, i1, 8)" unless it was added before
 * (past the record's room, a repeated one prints again). */
static void relation(Relations *r, const char *fmt, ...) {
  va_list ap, aq;
  va_start(ap, fmt);
  va_copy(aq, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *one = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (one) vsnprintf(one, (size_t)n + 1, fmt, aq);
  va_end(aq);
  if (!one) return;   /* out of memory: the relation is left out */
  r->seen[r->len] = '\0';
  if (!strstr(r->seen, one)) {
    if (r->len + (size_t)n < sizeof r->seen) {
      memcpy(r->seen + r->len, one, (size_t)n);
      r->len += (size_t)n;
    }
    r->n++;
    if (r->out) fputs(one, r->out);
  }
  free(one);
}

/* The relations of c's loops (TACO's suchthat), in nesting order:
 *   , bound(i, ib, 64, max_exact), pos(j, jp, A(i,j)), split(jp, j0, j1, 8) */
static void print_relations(Relations *r, const Cin *c, const Expr *shared);

/* Whether c's loop is over an index of the workspace access ws (NULL: no). */
static bool over_ws_index(const Cin *c, const Expr *ws) {
  for (int m = 0; ws && m < ws->u.access.n; m++)
    if (ws->u.access.idx[m] == c->u.forall.iv) return true;
  return false;
}

/* print_relations of one forall; a subexpression workspace's consumer
 * loops over its indices (shared: w's access) are the producer's copies,
 * printed there. */
static void forall_relations(Relations *r, const Cin *c, const Expr *shared) {
  if (!over_ws_index(c, shared)) {
    const CinLoopForm *f = &c->u.forall.form;
    const char *v = coord_name(c);
    if (f->fuse)
      relation(r, ", fuse(%s, %s, %s)", c->u.forall.iv->name, f->fuse_inner->name, f->fuse);
    if (f->bound_kind)
      relation(r, ", bound(%s, %s, %lld, %s)", v, f->bound_name, (long long)f->bound,
               cin_bound_name(f->bound_kind));
    if (f->pos) {
      char *acc = nt_expr_text(f->pos_access);
      relation(r, ", pos(%s, %s, %s)", v, f->pos, acc ? acc : "?");
      free(acc);
    }
    if (f->split || f->divide)
      relation(r, ", %s(%s, %s, %s, %d)", f->split ? "split" : "divide", loop_name(c),
               f->outer, f->inner, f->split ? f->split : f->divide);
  }
  print_relations(r, c->u.forall.body, shared);
}

static void print_relations(Relations *r, const Cin *c, const Expr *shared) {
  switch (c->kind) {
  case CIN_FORALL: forall_relations(r, c, shared); return;
  case CIN_WHERE: {
    const Expr *ws = shared;
    if (c->u.where.subexpr) {   /* w's access: the producer's assignment's lhs */
      const Cin *p = c->u.where.producer;
      while (p->kind == CIN_FORALL) p = p->u.forall.body;
      if (p->kind == CIN_ASSIGN) ws = p->u.assign.lhs;
    }
    print_relations(r, c->u.where.consumer, ws);
    print_relations(r, c->u.where.producer, shared);
    return;
  }
  case CIN_SEQUENCE:
    print_relations(r, c->u.seq.first, shared);
    print_relations(r, c->u.seq.second, shared);
    return;
  case CIN_ASSIGN: return;
  }
}

/* The assignment that first writes the statement's output: a where's
 * consumer (its producer writes a workspace), a sequence's first statement. */
static const Cin *first_output_write(const Cin *c) {
  switch (c->kind) {
  case CIN_FORALL: return first_output_write(c->u.forall.body);
  case CIN_WHERE: return first_output_write(c->u.where.consumer);
  case CIN_SEQUENCE: return first_output_write(c->u.seq.first);
  case CIN_ASSIGN: return c;
  }
  return c;
}

/* keep(y, S) around a statement whose output keeps its contents (the
 * user's `+=`): without it, an output a reduction writes starts from the
 * reduction's identity, so `y(i) = A(i,j) * x(j)` and `y(i) += ...` would
 * print alike. */
void cin_print(FILE *out, const Cin *c) {
  const Cin *w = first_output_write(c);
  bool keep = w->u.assign.keeps_old && w->u.assign.lhs->kind == EX_ACCESS;
  if (keep) fprintf(out, "keep(%s, ", w->u.assign.lhs->u.access.t->name);
  Relations r = {0};
  print_relations(&r, c, NULL);
  if (r.n == 0) {
    print_cin(out, c);
  } else {
    fputs("suchthat(", out);
    print_cin(out, c);
    r = (Relations){.out = out};
    print_relations(&r, c, NULL);
    fputc(')', out);
  }
  if (keep) fputc(')', out);
}

IndexVar *cin_loop_named(const Cin *c, const char *name, int *part) {
  switch (c->kind) {
  case CIN_FORALL: {
    const CinLoopForm *f = &c->u.forall.form;
    *part = 0;
    if (strcmp(c->u.forall.iv->name, name) == 0 || (f->pos && strcmp(f->pos, name) == 0) ||
        (f->bound_name && strcmp(f->bound_name, name) == 0) ||
        (f->fuse && strcmp(f->fuse, name) == 0))
      return c->u.forall.iv;
    *part = 1;
    if (f->outer && strcmp(f->outer, name) == 0) return c->u.forall.iv;
    *part = 2;
    if (f->inner && strcmp(f->inner, name) == 0) return c->u.forall.iv;
    return cin_loop_named(c->u.forall.body, name, part);
  }
  case CIN_WHERE: {
    IndexVar *v = cin_loop_named(c->u.where.consumer, name, part);
    return v ? v : cin_loop_named(c->u.where.producer, name, part);
  }
  case CIN_SEQUENCE: {
    IndexVar *v = cin_loop_named(c->u.seq.first, name, part);
    return v ? v : cin_loop_named(c->u.seq.second, name, part);
  }
  case CIN_ASSIGN: return NULL;
  }
  return NULL;
}

/* ---- schedule text ---- */

/* Directive names, by SchedKind. */
static const char *const SCHED_NAMES[] = {"reorder", "precompute", "parallelize", "vectorize",
                                          "unroll",  "method",     "sequence",    "nosequence",
                                          "split",   "divide",     "pos",         "bound",
                                          "fuse"};
enum { NSCHED = sizeof SCHED_NAMES / sizeof *SCHED_NAMES };

typedef struct SchedParser {
  const char *src, *p;
  Arena *a;
  Diag *d;
} SchedParser;

static void skip_blank(SchedParser *sp) {
  while (*sp->p == ' ' || *sp->p == '\t' || *sp->p == '\n' || *sp->p == '\r')
    sp->p++;
}

static int col_of(const SchedParser *sp) { return (int)(sp->p - sp->src) + 1; }

static bool serr(SchedParser *sp, const char *msg, const char *arg) {
  return diag_error_at(sp->d, TJ_ERR_PARSE, sp->src, col_of(sp), msg, arg);
}

/* An identifier at sp->p (arena copy), or NULL with d set. */
static const char *ident(SchedParser *sp, const char *what) {
  skip_blank(sp);
  const char *q = sp->p;
  if (!isalpha((unsigned char)*q) && *q != '_') {
    serr(sp, "expected %s", what);
    return NULL;
  }
  while (isalnum((unsigned char)*q) || *q == '_') q++;
  char *s = arena_strndup(sp->a, sp->p, (size_t)(q - sp->p));
  if (!s) diag_error(sp->d, TJ_ERR_NOMEM, "out of memory");
  sp->p = q;
  return s;
}

static bool punct(SchedParser *sp, char c, const char *what) {
  skip_blank(sp);
  if (*sp->p == c) {
    sp->p++;
    return true;
  }
  return serr(sp, "expected %s", what);
}

/* precompute(...): keeps the balanced text inside the parentheses. */
static bool parse_raw_arg(SchedParser *sp, SchedDirective *sd) {
  const char *start = sp->p;
  int depth = 1;
  for (; *sp->p && depth > 0; sp->p++) {
    if (*sp->p == '(') depth++;
    if (*sp->p == ')') depth--;
  }
  if (depth > 0) return serr(sp, "unclosed '(' in %s", "precompute");
  sd->arg = arena_strndup(sp->a, start, (size_t)(sp->p - 1 - start));
  if (!sd->arg) return diag_error(sp->d, TJ_ERR_NOMEM, "out of memory");
  return true;
}

static bool parse_width(SchedParser *sp, SchedDirective *sd) {
  skip_blank(sp);
  int col = col_of(sp);
  char *end;
  long w = strtol(sp->p, &end, 10);
  if (end == sp->p || !isdigit((unsigned char)*sp->p))
    return serr(sp, "expected %s", "a vector width");
  sp->p = end;
  if (w < 1 || w > 64 || (w & (w - 1)) != 0)
    return diag_error_at(sp->d, TJ_ERR_PARSE, sp->src, col, "vectorize width "
                         "%ld is not a power of two between 1 and 64", w);
  sd->width = (int)w;
  return true;
}

static bool parse_factor(SchedParser *sp, SchedDirective *sd) {
  skip_blank(sp);
  int col = col_of(sp);
  char *end;
  long f = strtol(sp->p, &end, 10);
  if (end == sp->p || !isdigit((unsigned char)*sp->p))
    return serr(sp, "expected %s", "an unroll factor");
  sp->p = end;
  if (f < 2 || f > 64)
    return diag_error_at(sp->d, TJ_ERR_PARSE, sp->src, col, "unroll factor %ld is not "
                         "between 2 and 64", f);
  sd->width = (int)f;
  return true;
}

/* parallelize(i, <strategy>[, <race>]) or parallelize(i, <race>): the race
 * strategy (how threads combine a reduction into a shared output) is
 * "partials" or "atomics" (kept in sd->arg). */
static bool parse_strategy(SchedParser *sp, SchedDirective *sd) {
  skip_blank(sp);
  int col = col_of(sp);
  const char *name = ident(sp, "a strategy (static, balanced or dynamic) or a race strategy "
                               "(partials or atomics)");
  if (!name) return false;
  if (strcmp(name, "partials") == 0 || strcmp(name, "atomics") == 0) {
    sd->arg = name;
    return true;
  }
  for (int k = PAR_STATIC; k <= PAR_DYNAMIC; k++)
    if (strcmp(name, cin_strategy_name(k)) == 0) {
      sd->width = k;
      skip_blank(sp);
      if (*sp->p != ',') return true;
      sp->p++;
      skip_blank(sp);
      col = col_of(sp);
      if (!(name = ident(sp, "a race strategy (partials or atomics)"))) return false;
      if (strcmp(name, "partials") == 0 || strcmp(name, "atomics") == 0) {
        sd->arg = name;
        return true;
      }
      return diag_error_at(sp->d, TJ_ERR_PARSE, sp->src, col, "parallelize: unknown race "
                           "strategy '%s' (partials or atomics)", name);
    }
  return diag_error_at(sp->d, TJ_ERR_PARSE, sp->src, col, "parallelize: unknown strategy '%s' "
                       "(static, balanced or dynamic; or partials or atomics)", name);
}

/* The index list of reorder / parallelize / vectorize / unroll. */
static bool parse_vars(SchedParser *sp, SchedDirective *sd) {
  int maxv = sd->kind == SCHED_REORDER ? NT_MAX_INDICES : 1;
  do {
    if (sd->nvars == maxv)
      return serr(sp, "too many indices in %s",
                  sd->kind == SCHED_REORDER ? "reorder" : "this directive");
    if (!(sd->vars[sd->nvars++] = ident(sp, "an index variable")))
      return false;
    skip_blank(sp);
    if (sd->kind == SCHED_VECTORIZE)
      return punct(sp, ',', "',' and a vector width") && parse_width(sp, sd) &&
             punct(sp, ')', "')'");
    if (sd->kind == SCHED_UNROLL)
      return punct(sp, ',', "',' and an unroll factor") && parse_factor(sp, sd) &&
             punct(sp, ')', "')'");
    if (sd->kind == SCHED_PARALLELIZE && *sp->p == ',') {
      sp->p++;
      return parse_strategy(sp, sd) && punct(sp, ')', "')'");
    }
  } while (*sp->p == ',' && sp->p++);
  return punct(sp, ')', "',' or ')'");
}

/* A count of split / divide / bound: 1 .. 2^30. */
static bool parse_count(SchedParser *sp, SchedDirective *sd, const char *what) {
  skip_blank(sp);
  int col = col_of(sp);
  char *end;
  long long f = strtoll(sp->p, &end, 10);
  if (end == sp->p || !isdigit((unsigned char)*sp->p)) return serr(sp, "expected %s", what);
  sp->p = end;
  if (f < 1 || f > 1 << 30)
    return diag_error_at(sp->d, TJ_ERR_PARSE, sp->src, col, "%s %lld is not between 1 and "
                         "2^30", what, f);
  sd->width = (int)f;
  return true;
}

/* The next name of the directive's list, then `,` (or nothing when last). */
static bool next_var(SchedParser *sp, SchedDirective *sd, const char *what, bool comma) {
  if (!(sd->vars[sd->nvars++] = ident(sp, what))) return false;
  return !comma || punct(sp, ',', "','");
}

/* split(i, i0, i1, f), divide(i, i0, i1, n), pos(j, jp, A(i,j)),
 * bound(i, ib, n, max_exact), fuse(i, j, f). */
static bool parse_rewrite(SchedParser *sp, SchedDirective *sd) {
  if (!next_var(sp, sd, "an index variable", true)) return false;
  switch (sd->kind) {
  case SCHED_FUSE:
    return next_var(sp, sd, "the inner index", true) &&
           next_var(sp, sd, "the fused index's name", false) && punct(sp, ')', "')'");
  case SCHED_SPLIT:
  case SCHED_DIVIDE:
    return next_var(sp, sd, "the outer index's name", true) &&
           next_var(sp, sd, "the inner index's name", true) &&
           parse_count(sp, sd, sd->kind == SCHED_SPLIT ? "a split factor" : "a part count") &&
           punct(sp, ')', "')'");
  case SCHED_POS:
    if (!next_var(sp, sd, "the position variable's name", true) ||
        !next_var(sp, sd, "a tensor access", false) || !punct(sp, '(', "'(' of the access"))
      return false;
    do {
      if (sd->nvars == NT_MAX_ORDER + 3) return serr(sp, "too many indices in %s", "pos");
      if (!next_var(sp, sd, "an index variable", false)) return false;
      skip_blank(sp);
    } while (*sp->p == ',' && sp->p++);
    return punct(sp, ')', "')' closing the access") && punct(sp, ')', "')'");
  case SCHED_BOUND:
    if (!next_var(sp, sd, "the bounded variable's name", true) ||
        !parse_count(sp, sd, "a bound") || !punct(sp, ',', "',' and a bound kind"))
      return false;
    sd->arg = ident(sp, "a bound kind (max_exact or max_constraint)");
    return sd->arg && punct(sp, ')', "')'");
  default: return TJ_BUG(sp->d, "not a loop rewrite");
  }
}

static bool parse_directive(SchedParser *sp, SchedDirective *sd) {
  sd->col = col_of(sp);
  const char *name = ident(sp, "a schedule directive");
  if (!name) return false;
  int k = 0;
  while (k < NSCHED && strcmp(SCHED_NAMES[k], name) != 0) k++;
  if (k == NSCHED)
    return diag_error_at(sp->d, TJ_ERR_PARSE, sp->src, sd->col,
                         "unknown schedule directive '%s'", name);
  sd->kind = (SchedKind)k;
  if (!punct(sp, '(', "'('")) return false;
  if (sd->kind == SCHED_PRECOMPUTE) return parse_raw_arg(sp, sd);
  if (sd->kind == SCHED_SEQUENCE || sd->kind == SCHED_NOSEQUENCE) return punct(sp, ')', "')'");
  if (sd->kind == SCHED_METHOD)
    return (sd->arg = ident(sp, "a method (gett, ttgt, log, loops or sell)")) && punct(sp, ')', "')'");
  if (sd->kind >= SCHED_SPLIT) return parse_rewrite(sp, sd);
  return parse_vars(sp, sd);
}

bool nt_schedule_parse(const char *src, Schedule *out, Arena *a, Diag *d) {
  SchedParser sp = {.src = src, .p = src, .a = a, .d = d};
  memset(out, 0, sizeof *out);
  out->src = arena_strdup(a, src);
  for (;;) {
    while (*sp.p && strchr(" \t\r\n,;", *sp.p)) sp.p++;
    if (!*sp.p) return true;
    if (out->n == (int)(sizeof out->d / sizeof out->d[0]))
      return serr(&sp, "too many schedule directives (max %s)", "16");
    if (!parse_directive(&sp, &out->d[out->n])) return false;
    out->n++;
  }
}

void nt_schedule_print(FILE *out, const Schedule *s) {
  for (int i = 0; i < s->n; i++) {
    const SchedDirective *sd = &s->d[i];
    fprintf(out, "%s%s(", i ? " " : "", SCHED_NAMES[sd->kind]);
    if (sd->kind == SCHED_PRECOMPUTE || sd->kind == SCHED_METHOD) fputs(sd->arg, out);
    for (int k = 0; k < sd->nvars; k++) /* pos: the access's indices in () */
      fprintf(out, "%s%s%s", sd->kind == SCHED_POS && k == 3 ? "(" : k ? "," : "",
              sd->vars[k], sd->kind == SCHED_POS && k == sd->nvars - 1 ? ")" : "");
    if (sd->kind == SCHED_SPLIT || sd->kind == SCHED_DIVIDE || sd->kind == SCHED_BOUND)
      fprintf(out, ",%d", sd->width);
    if (sd->kind == SCHED_BOUND) fprintf(out, ",%s", sd->arg);
    if (sd->kind == SCHED_VECTORIZE || sd->kind == SCHED_UNROLL) fprintf(out, ",%d", sd->width);
    if (sd->kind == SCHED_PARALLELIZE && sd->width)
      fprintf(out, ",%s", cin_strategy_name(sd->width));
    if (sd->kind == SCHED_PARALLELIZE && sd->arg) fprintf(out, ",%s", sd->arg);
    fputc(')', out);
  }
}

char *nt_directive_text(const SchedDirective *sd) {
  Schedule one = {.n = 1};
  one.d[0] = *sd;
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return NULL;
  nt_schedule_print(f, &one);
  if (fclose(f) != 0) {
    free(buf);
    return NULL;
  }
  return buf;
}

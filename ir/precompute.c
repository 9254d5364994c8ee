/* precompute(e, I, w): the subexpression e of the right-hand side computed
 * into a workspace w over the index set I, then read from it (TACO's
 * precompute; the seed paper's where()).
 *
 *   y(i) = b(i) - A(i,j) * x(j)        precompute(A(i,j) * x(j), {}, t)
 *     forall(i, where(y(i) = b(i) - t, forall(j, t += A(i,j) * x(j))))
 *   A(i,j) = B(i,k) * C(k,j)  (CSR)     precompute(B(i,k) * C(k,j), {j}, w)
 *     forall(i, where(forall(j, A(i,j) = w(j)), forall(k, forall(j, w(j) += ...))))
 *
 * e is matched against the expression's structure (by tensor and index
 * names, operators and literals; the sums the checker placed are looked
 * through), so it must be a node of the expression as parsed:
 * `B(i,j) * c(j)` is one in `B(i,j) * c(j) * d(i)`, `c(j) * d(i)` is not.
 *
 * A scalar workspace (I = {}) takes the indices summed inside e (used
 * nowhere else on the right): the rewrite wraps e in those sums, moved in
 * from the scope they had (which must distribute over the path down to e:
 * products, negations, numerators), and the sum carries the name w; the
 * concrete notation then makes it the where() of a scalar temp. A
 * workspace over I = {j} of the whole right-hand side into the last level
 * of a sparse output is the planner's row workspace, and one over I = {j}
 * or {i, j, ...} of a subexpression (or into a dense output) a dense
 * row, matrix or tensor (lower/schedule.c and lower/precompute.c
 * apply them). Other forms are refused with what is lowered.
 */
#include "notation.h"

#include <stdio.h>
#include <string.h>

/* ---- the directive's parts ---- */

/* The top-level comma-separated parts of s (outside () and {}), blanks
 * trimmed, as arena strings; returns how many, or -1 out of memory. */
static int split_parts(Arena *a, const char *s, const char **part, int max) {
  int n = 0, depth = 0;
  const char *start = s;
  for (const char *c = s;; c++) {
    if (*c == '(' || *c == '{') depth++;
    if (*c == ')' || *c == '}') depth--;
    if (*c && (*c != ',' || depth > 0)) continue;
    const char *b = start, *e = c;
    while (b < e && (*b == ' ' || *b == '\t')) b++;
    while (e > b && (e[-1] == ' ' || e[-1] == '\t')) e--;
    if (n < max && !(part[n] = arena_strndup(a, b, (size_t)(e - b)))) return -1;
    n++;
    if (!*c) return n;
    start = c + 1;
  }
}

static bool is_name(const char *s) {
  if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z'))) return false;
  for (; *s; s++)
    if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
          (*s >= '0' && *s <= '9')))
      return false;
  return true;
}

static bool refuse(Diag *d, const SchedDirective *sd, const char *fmt, const char *x,
                   const char *y) {
  char msg[512];
  snprintf(msg, sizeof msg, fmt, x, y);
  return diag_error(d, TJ_ERR_UNSUPPORTED, "precompute(%s): %s", sd->arg, msg);
}

/* The index set: "{}", "{i,j}" or one bare name; names must be indices of
 * as. */
static bool parse_index_set(Arena *a, const Assignment *as, const SchedDirective *sd,
                            const char *s, Precompute *pc, Diag *d) {
  const char *names[NT_MAX_INDICES];
  int n = 0;
  size_t len = strlen(s);
  if (len >= 2 && s[0] == '{' && s[len - 1] == '}') {
    char *inner = arena_strndup(a, s + 1, len - 2);
    if (!inner) return diag_error(d, TJ_ERR_NOMEM, "out of memory");
    n = split_parts(a, inner, names, NT_MAX_INDICES);
    if (n < 0) return diag_error(d, TJ_ERR_NOMEM, "out of memory");
    if (n == 1 && names[0][0] == 0) n = 0;
  } else {
    names[n++] = s;
  }
  if (n > NT_MAX_INDICES) return refuse(d, sd, "too many indices in %s%s", s, "");
  pc->nvars = 0;
  for (int k = 0; k < n; k++) {
    if (!is_name(names[k]))
      return diag_error(d, TJ_ERR_PARSE, "precompute(%s): the index set '%s' is not {}, "
                        "{i, j, ...} or one index", sd->arg, s);
    IndexVar *v = NULL;
    for (int q = 0; q < as->nindices; q++)
      if (strcmp(as->indices[q]->name, names[k]) == 0) v = as->indices[q];
    if (!v) return refuse(d, sd, "unknown index %s in the index set%s", names[k], "");
    for (int q = 0; q < pc->nvars; q++)
      if (pc->vars[q] == v) return refuse(d, sd, "index %s is in the index set twice%s",
                                          names[k], "");
    pc->vars[pc->nvars++] = v;
  }
  return true;
}

/* ---- matching ---- */

/* Whether rhs node x is e: the same structure, implicit sums on the rhs
 * side looked through (the user writes what they wrote). */
static bool same(const Expr *x, const Expr *e) {
  while (x->kind == EX_SUM && x->u.sum.implicit && e->kind != EX_SUM) x = x->u.sum.a;
  if (x->kind != e->kind) return false;
  switch (x->kind) {
  case EX_ACCESS:
  case EX_LITERAL: return nt_expr_equal(x, e);
  case EX_SUM:
    return x->u.sum.op == e->u.sum.op && x->u.sum.def == e->u.sum.def &&
           strcmp(x->u.sum.iv->name, e->u.sum.iv->name) == 0 && same(x->u.sum.a, e->u.sum.a);
  case EX_OP:
    if (x->u.op.id != e->u.op.id || x->u.op.def != e->u.op.def) return false;
    break;
  default: break;
  }
  Expr *kx[2], *ke[2];
  int n = nt_children(x, kx);
  if (nt_children(e, ke) != n) return false;
  for (int i = 0; i < n; i++)
    if (!same(kx[i], ke[i])) return false;
  return true;
}

typedef struct Match {
  const Expr *node;                     /* the match (never an implicit sum) */
  const Expr *path[NT_MAX_HEIGHT];      /* its ancestors, root first */
  int depth;
  int count;
} Match;

static void find(const Expr *x, const Expr *e, const Expr **path, int depth, Match *m) {
  if (depth >= NT_MAX_HEIGHT) return;
  if (!(x->kind == EX_SUM && x->u.sum.implicit) && same(x, e)) {
    if (m->count++ == 0) {
      m->node = x;
      m->depth = depth;
      memcpy(m->path, path, (size_t)depth * sizeof *path);
    }
    return;
  }
  Expr *k[2];
  int n = nt_children(x, k);
  path[depth] = x;
  for (int i = 0; i < n; i++) find(k[i], e, path, depth + 1, m);
}

int nt_uses_outside(const Expr *e, const Expr *skip, const IndexVar *v) {
  if (e == skip) return 0;
  if (e->kind == EX_ACCESS) return nt_uses_index(e, v);
  Expr *k[2];
  int n = nt_children(e, k), c = 0;
  for (int i = 0; i < n; i++) c += nt_uses_outside(k[i], skip, v);
  return c;
}

bool nt_sum_passes(const Expr *p, const Expr *c) {
  if (p->kind == EX_SUM) return p->u.sum.op == OP_ADD && !p->u.sum.def;
  OpKind op = nt_expr_op(p);
  if (op == OP_NONE) return false;
  Expr *k[2];
  nt_children(p, k);
  return nt_op(op)->laws & (k[0] == c ? OL_LINEAR_X : OL_LINEAR_Y);
}

/* ---- the rewrite ---- */

typedef struct Rewrite {
  const Expr *node;                     /* e's node, wrapped in the sums */
  int nsums;
  const Expr *drop[NT_MAX_INDICES];     /* sum nodes moved down to e (removed) */
  IndexVar *iv[NT_MAX_INDICES];         /* the sums around e, outermost first */
  OpKind op[NT_MAX_INDICES];
  const struct NtDef *def[NT_MAX_INDICES];
  const char *name;
} Rewrite;

static Expr *replace(Arena *a, const Expr *x, const void *ctx) {
  const Rewrite *rw = ctx;
  for (int k = 0; k < rw->nsums; k++)
    if (rw->drop[k] == x) return nt_map_expr(a, x->u.sum.a, replace, ctx);
  if (x != rw->node) return NULL;
  Expr *c = nt_map_expr(a, x, NULL, NULL);
  for (int k = rw->nsums - 1; c && k >= 0; k--) {
    Expr *s = nt_reduce(a, rw->op[k], rw->iv[k], c, false, x->col);
    if (s) s->dtype = x->dtype, s->u.sum.def = rw->def[k];
    c = s;
  }
  if (c && c->kind == EX_SUM) c->u.sum.temp = rw->name;
  return c;
}

/* The scope of v above the match: the sum over v on the path (its index
 * there in *at), or the root (-1). */
static const Expr *scope_of(const Match *m, const IndexVar *v, int *at) {
  for (int k = m->depth - 1; k >= 0; k--)
    if (m->path[k]->kind == EX_SUM && m->path[k]->u.sum.iv == v) return *at = k, m->path[k];
  return *at = -1, NULL;
}

/* The scalar workspace: the indices summed only inside the match move into
 * sums around it, the outermost one named w. */
static Assignment *scalar_workspace(Arena *a, const Assignment *as, const SchedDirective *sd,
                                    const Match *m, const Precompute *pc, Diag *d) {
  Rewrite rw = {.node = m->node, .name = pc->ws};
  const Expr *pre[NT_MAX_INDICES];
  int npre = 0;
  for (const Expr *x = m->node; x->kind == EX_SUM && npre < NT_MAX_INDICES; x = x->u.sum.a)
    pre[npre++] = x;       /* sums the user wrote as part of e: kept inside */
  int scope_at[NT_MAX_INDICES];
  for (int q = 0; q < as->nindices; q++) {
    IndexVar *v = as->indices[q];
    if (!nt_uses_index(m->node, v) || nt_uses_index(as->lhs, v)) continue;
    bool inside = false;
    for (int k = 0; k < npre; k++) inside |= pre[k]->u.sum.iv == v;
    if (inside) continue;
    if (nt_uses_outside(as->rhs, m->node, v)) continue;   /* a per-iteration value of v */
    int at;
    const Expr *s = scope_of(m, v, &at);
    /* every node between the scope and e must let the sum move down */
    const Expr *below = m->node;
    for (int k = m->depth - 1; k > at; k--) {
      if (!nt_sum_passes(m->path[k], below))
        return refuse(d, sd, "index %s is summed over a larger subexpression, and the "
                      "operator between it and this one does not distribute over the sum; "
                      "precompute that subexpression%s", v->name, ""), NULL;
      below = m->path[k];
    }
    OpKind op = s ? s->u.sum.op : as->root_op;
    if (!(s && s->u.sum.a == m->node) && (m->depth - 1 > at || !s)) {
      /* moved past other nodes (or out of the root): only a plain sum moves */
      bool plain = op == OP_ADD && !(s && s->u.sum.def) && !as->semiring;
      bool whole = !s && m->node == as->rhs && !as->accumulate;
      if (!plain && !whole)
        return refuse(d, sd, "index %s is reduced over the whole right-hand side by an "
                      "operator other than +; only a sum moves inside%s", v->name, ""), NULL;
    }
    if (rw.nsums == NT_MAX_INDICES) return refuse(d, sd, "too many sums%s%s", "", ""), NULL;
    /* keep the sums' nesting: outer scopes first */
    int k = rw.nsums++;
    while (k > 0 && scope_at[k - 1] > at) {
      scope_at[k] = scope_at[k - 1], rw.iv[k] = rw.iv[k - 1], rw.op[k] = rw.op[k - 1];
      rw.def[k] = rw.def[k - 1], rw.drop[k] = rw.drop[k - 1];
      k--;
    }
    scope_at[k] = at, rw.iv[k] = v, rw.op[k] = op, rw.def[k] = s ? s->u.sum.def : NULL;
    rw.drop[k] = s;
  }
  for (int k = 0; k < pc->nstripped; k++) {
    bool moved = false;
    for (int q = 0; q < rw.nsums; q++) moved |= strcmp(rw.iv[q]->name, pc->stripped[k]) == 0;
    if (!moved)
      return refuse(d, sd, "%s is summed over more than this subexpression (it is used "
                    "outside it)%s", pc->stripped[k], ""), NULL;
  }
  if (rw.nsums == 0 && npre == 0)
    return refuse(d, sd, "no index is summed inside this subexpression, so a scalar "
                  "workspace would hold one term of the loop it sits in (an index it uses "
                  "is also used outside it); a workspace over an index set of a "
                  "subexpression is lowered only for the whole right-hand side into the "
                  "last level of a sparse output%s%s", "", ""), NULL;
  Assignment *out = arena_alloc(a, sizeof *out);
  if (!out) return diag_error(d, TJ_ERR_NOMEM, "out of memory"), NULL;
  *out = *as;
  if (!(out->rhs = nt_map_expr(a, as->rhs, replace, &rw)))
    return diag_error(d, TJ_ERR_NOMEM, "out of memory"), NULL;
  bool root_left = false;
  for (int q = 0; q < out->nindices; q++) root_left |= nt_is_root_reduction(out, out->indices[q]);
  if (!root_left && !out->accumulate) out->root_op = OP_ADD;
  return out;
}

bool nt_precompute_parse(Arena *a, const Assignment *as, const SchedDirective *sd,
                         Precompute *pc, Diag *d) {
  const char *part[3];
  int n = split_parts(a, sd->arg ? sd->arg : "", part, 3);
  if (n < 0) return diag_error(d, TJ_ERR_NOMEM, "out of memory");
  if (n != 3)
    return diag_error(d, TJ_ERR_PARSE, "precompute(%s): expected precompute(<expression>, "
                      "<index set: {}, {i, j} or one index>, <workspace>)", sd->arg ? sd->arg : "");
  memset(pc, 0, sizeof *pc);
  if (!is_name(part[2]))
    return diag_error(d, TJ_ERR_PARSE, "precompute(%s): the workspace's name '%s' is not a "
                      "name", sd->arg, part[2]);
  for (int t = 0; t < as->ntensors; t++)
    if (strcmp(as->tensors[t]->name, part[2]) == 0)
      return refuse(d, sd, "the workspace's name %s is a tensor of the expression%s", part[2],
                    "");
  for (int q = 0; q < as->nindices; q++)
    if (strcmp(as->indices[q]->name, part[2]) == 0)
      return refuse(d, sd, "the workspace's name %s is an index of the expression%s", part[2],
                    "");
  pc->ws = part[2];
  static const char prefix[] = "precompute__ = ";
  char *src = arena_printf(a, "%s%s", prefix, part[0]);
  Diag pd;
  diag_init(&pd);
  Assignment *pa = src ? nt_parse(a, src, &pd) : NULL;
  if (!pa && !src) return diag_error(d, TJ_ERR_NOMEM, "out of memory");
  if (!pa) { /* "1:<col>: msg" and a caret line: the message, at e's column */
    int col = 0, skip = 0;
    if (sscanf(pd.msg, "1:%d: %n", &col, &skip) < 1 || skip == 0) col = 0, skip = 0;
    int len = (int)strcspn(pd.msg + skip, "\n");
    col -= (int)sizeof prefix - 1;
    return diag_error(d, TJ_ERR_PARSE, "precompute(%s): %s at column %d of '%s'", sd->arg,
                      arena_strndup(a, pd.msg + skip, (size_t)len), col > 0 ? col : 1, part[0]);
  }
  if (as->semiring && !nt_apply_semiring(a, pa, as->semiring, d)) return false;
  pc->expr = pa->rhs;   /* under a semiring, + and * read as its add and mul */
  if (!parse_index_set(a, as, sd, part[1], pc, d)) return false;
  const Expr *path[NT_MAX_HEIGHT];
  Match *m = arena_alloc(a, sizeof *m);
  if (!m) return diag_error(d, TJ_ERR_NOMEM, "out of memory");
  find(as->rhs, pc->expr, path, 0, m);
  /* sum(j, e) around the whole rhs is the root reduction (no node): e */
  for (const Expr *e = pc->expr; m->count == 0 && e->kind == EX_SUM; e = e->u.sum.a) {
    if (pc->nstripped < NT_MAX_INDICES) pc->stripped[pc->nstripped++] = e->u.sum.iv->name;
    find(as->rhs, e->u.sum.a, path, 0, m);
  }
  if (m->count == 0)
    return refuse(d, sd, "%s is not a subexpression of the right-hand side (match it as "
                  "parsed: a * b * c is (a * b) * c; parenthesize, or name a node of it)%s",
                  part[0], "");
  if (m->count > 1)
    return refuse(d, sd, "%s occurs more than once in the right-hand side; which one is "
                  "meant is ambiguous%s", part[0], "");
  pc->node = m->node;
  pc->match = m;
  for (int k = 0; k < pc->nvars; k++)
    if (!nt_uses_index(m->node, pc->vars[k]))
      return refuse(d, sd, "the index set names %s, which the subexpression does not use%s",
                    pc->vars[k]->name, "");
  return true;
}

Assignment *nt_precompute_scalars(Arena *a, const Assignment *as, const Schedule *s, Diag *d) {
  for (int k = 0; s && k < s->n; k++) {
    const SchedDirective *sd = &s->d[k];
    if (sd->kind != SCHED_PRECOMPUTE) continue;
    Precompute pc;
    if (!nt_precompute_parse(a, as, sd, &pc, d)) return NULL;
    if (pc.nvars > 0) continue;   /* a workspace over indices: the planner's */
    if (!(as = scalar_workspace(a, as, sd, pc.match, &pc, d))) return NULL;
  }
  return (Assignment *)as;
}

/* If-conversion of a co-iteration's case chain. In a union's merged loop
 * the case that runs changes from one coordinate to the next at random
 * (sparse B + C with unrelated patterns: B alone, C alone or both, about
 * as often), so the if / else-if chain mispredicts once every few
 * entries. When every case is a few value loads and then the same
 * statements, differing only in the values they store or assign, the
 * chain becomes one copy of those statements whose values are selects:
 *   if (cb == j && cc == j) { vb = b[pb]; vc = c[pc]; out[p] = vb + vc; p++ }
 *   else if (cb == j) { vb' = b[pb]; out[p] = vb'; p++ }
 *   else { vc' = c[pc]; out[p] = vc'; p++ }
 * becomes
 *   vb = b[pb]; vc = c[pc]; vb' = b[pb]; vc' = c[pc];
 *   out[p] = cb == j && cc == j ? vb + vc : cb == j ? vb' : vc'; p++
 * The same values are stored; only the loads run unconditionally. They
 * are safe: inside the loop of the lattice point every iterator of the
 * dominated cases is within its segment (the loop's condition), and
 * dense accesses are located at a coordinate inside their extent. The
 * caller says whether some case always runs (exhaustive); the last case's
 * condition is then the default and is dropped. A plain sum's three
 * cases (x + y, x, y) store one add of two selects instead, an absent
 * side reading the add's exact identity (add_of_selects). */
#include "lowerer.h"


static bool stmts_same(const LirStmt *x, const LirStmt *y, LirExpr ***vals, int nvals, int *at);

/* Whether statements x and y are the same but for the values they store or
 * assign; y's values are recorded in vals[*at...] (x's are its own). */
static bool stmt_same(const LirStmt *x, const LirStmt *y, LirExpr ***vals, int nvals, int *at) {
  if (x->kind != y->kind) return false;
  switch (x->kind) {
  case LS_ASSIGN:
    if (x->u.assign.var != y->u.assign.var || x->u.assign.op != y->u.assign.op ||
        x->u.assign.with || y->u.assign.with || *at >= nvals || !lir_expr_speculable(y->u.assign.e))
      return false;
    (*vals)[(*at)++] = y->u.assign.e;
    return true;
  case LS_STORE:
    if (!lir_expr_equal(x->u.store.ptr, y->u.store.ptr) || !lir_expr_equal(x->u.store.idx, y->u.store.idx) ||
        x->u.store.op != y->u.store.op || x->u.store.atomic != y->u.store.atomic ||
        *at >= nvals || !lir_expr_speculable(y->u.store.e))
      return false;
    (*vals)[(*at)++] = y->u.store.e;
    return true;
  case LS_SETFIELD:
    return x->u.setfield.operand == y->u.setfield.operand && x->u.setfield.field == y->u.setfield.field &&
           x->u.setfield.level == y->u.setfield.level && lir_expr_equal(x->u.setfield.e, y->u.setfield.e);
  case LS_IF:
    return lir_expr_equal(x->u.cond.cond, y->u.cond.cond) &&
           stmts_same(x->u.cond.then, y->u.cond.then, vals, nvals, at) &&
           stmts_same(x->u.cond.els, y->u.cond.els, vals, nvals, at);
  case LS_CALL:
    return x->u.call.h == y->u.call.h && x->u.call.operand == y->u.call.operand &&
           x->u.call.arr == y->u.call.arr && x->u.call.level == y->u.call.level &&
           x->u.call.raw == y->u.call.raw &&
           x->u.call.ptr == y->u.call.ptr && x->u.call.plan == y->u.call.plan &&
           x->u.call.mark == y->u.call.mark && x->u.call.ret == y->u.call.ret &&
           lir_expr_equal(x->u.call.a, y->u.call.a) && lir_expr_equal(x->u.call.b, y->u.call.b);
  case LS_BLOCK: return stmts_same(x->u.block, y->u.block, vals, nvals, at);
  case LS_COMMENT: return true;
  default: return false; /* declarations (of fresh variables) and loops differ */
  }
}

static bool stmts_same(const LirStmt *x, const LirStmt *y, LirExpr ***vals, int nvals, int *at) {
  for (; x && y; x = x->next, y = y->next)
    if (!stmt_same(x, y, vals, nvals, at)) return false;
  return !x && !y;
}

/* The statements after a case's leading declarations of values. */
static LirStmt *after_decls(LirStmt *s) {
  while (s && s->kind == LS_DECL && lir_expr_speculable(s->u.decl.init)) s = s->next;
  return s;
}

/* Replaces, in order, the values stored or assigned by the tail s with
 * vals[*at...] (the selects). */
static void set_values(LirStmt *s, LirExpr **vals, int *at) {
  for (; s; s = s->next) {
    if (s->kind == LS_ASSIGN) s->u.assign.e = vals[(*at)++];
    else if (s->kind == LS_STORE) s->u.store.e = vals[(*at)++];
    else if (s->kind == LS_IF) {
      set_values(s->u.cond.then, vals, at);
      set_values(s->u.cond.els, vals, at);
    } else if (s->kind == LS_BLOCK) set_values(s->u.block, vals, at);
  }
}

enum { MAX_VALUES = 16 };

/* The initializer of e when e reads a variable that one of the leading
 * declarations of body (up to tail) declares, else e itself. */
static const LirExpr *value_of(const LirExpr *e, const LirStmt *body, const LirStmt *tail) {
  if (e->kind != LE_VAR) return e;
  for (const LirStmt *d = body; d && d != tail; d = d->next)
    if (d->kind == LS_DECL && d->u.decl.var == e->u.var) return d->u.decl.init;
  return e;
}

/* Whether x and y (of cases kx, ky) read the same value. */
static bool same_value(const LirExpr *x, const LirExpr *y, LirStmt *const *bodies,
                       LirStmt *const *tail, int kx, int ky) {
  const LirExpr *vx = value_of(x, bodies[kx], tail[kx]), *vy = value_of(y, bodies[ky], tail[ky]);
  return vx && vy && lir_expr_equal(vx, vy);
}

/* A sparse add's three cases as one add of two selects, when they are
 *   c1 && c2 ? x + y : c1 ? x : y      (x, y of a float or integer type)
 * which becomes
 *   (c1 ? x : id) + (c1 ? (c2 ? y : id) : y)
 * with id the add's exact identity (-0.0 for floats: x + -0.0 is x for
 * every x, -0.0 and NaN included; 0 for integers): the same value for every
 * c1, c2. The merge loop of u200k's add ran 4-6% faster (one add of two
 * masked moves instead of a chain of two selects over the sum).
 * NULL where the cases are not of that shape. */
static LirExpr *add_of_selects(Lowerer *lw, LirExpr *const *conds, LirExpr *const *e,
                               LirStmt *const *bodies, LirStmt *const *tail) {
  const LirExpr *sum = e[0], *both = conds[0];
  if (sum->kind != LE_BIN || sum->u.bin.op != LOP_ADD || both->kind != LE_BIN ||
      both->u.bin.op != LOP_AND || !lir_expr_equal(both->u.bin.a, conds[1]))
    return NULL;
  LirType t = sum->type;
  if (!lir_type_is_float(t) && !lir_type_is_int(t)) return NULL;
  LirExpr *x = sum->u.bin.a, *y = sum->u.bin.b;
  if (!same_value(x, e[1], bodies, tail, 0, 1) || !same_value(y, e[2], bodies, tail, 0, 2))
    return NULL;
  Arena *a = lw->a;
  LirExpr *id = lir_type_is_float(t) ? lir_const_fp(a, t, -0.0) : lir_const_int(a, t, 0);
  LirExpr *tx = lir_select(a, conds[1], x, id);
  LirExpr *ty = lir_select(a, conds[1], lir_select(a, both->u.bin.b, y, id), y);
  return lir_bin(a, LOP_ADD, tx, ty);
}

LirStmt *lw_cases_as_selects(Lowerer *lw, int n, LirExpr *const *conds, LirStmt *const *bodies,
                             bool exhaustive) {
  if (!exhaustive || n < 2 || n > LAT_MAX_POINTS) return NULL;
  LirStmt *tail[LAT_MAX_POINTS];
  LirExpr *val_store[LAT_MAX_POINTS][MAX_VALUES];
  int nv = -1;
  for (int k = 0; k < n; k++) {
    if (!bodies[k]) return NULL;
    tail[k] = after_decls(bodies[k]);
    if (!tail[k]) return NULL;
    LirExpr **vals = val_store[k];
    int at = 0;
    if (!stmts_same(tail[0], tail[k], &vals, MAX_VALUES, &at)) return NULL;
    if (nv >= 0 && at != nv) return NULL;
    nv = at;
  }
  Arena *a = lw->a;
  LirExpr *sel[MAX_VALUES];
  int ndiffer = 0;
  for (int v = 0; v < nv; v++) { /* c0 ? e0 : c1 ? e1 : ... : e(n-1) */
    LirExpr *e = val_store[n - 1][v];
    bool differs = false;
    for (int k = 0; k + 1 < n; k++) differs |= !lir_expr_equal(val_store[k][v], e);
    if (differs && ndiffer++) return NULL; /* one value per case: each condition used once */
    LirExpr *e3[3] = {val_store[0][v], val_store[1][v], e};
    LirExpr *sum = differs && n == 3 ? add_of_selects(lw, conds, e3, bodies, tail) : NULL;
    for (int k = n - 2; k >= 0 && differs && !sum; k--) e = lir_select(a, conds[k], val_store[k][v], e);
    sel[v] = sum ? sum : e;
  }
  LirStmt *s = NULL;
  for (int k = 0; k < n; k++) /* every case's value loads, then one tail */
    for (LirStmt *d = bodies[k]; d != tail[k];) {
      LirStmt *next = d->next;
      d->next = NULL;
      lir_append(&s, d);
      d = next;
    }
  int at = 0;
  set_values(tail[0], sel, &at);
  lir_append(&s, tail[0]);
  return s;
}

/* Walks over the loop IR: the one place that knows which operands each
 * expression kind has (lir_expr_slots, lir_expr_kids), a pre-order visitor over an
 * expression tree built on it (lir_expr_walk, a callback and its context),
 * and the questions several passes ask of expressions (does e read a
 * marked variable, how often does it read v, does it load) and of a
 * parallel loop's body (what it captures from outside: lir_capture, for
 * the backends that outline it). Passes write a callback instead of their
 * own switch over every expression kind.
 */
#include <stdlib.h>

#include "loop_ir.h"

int lir_expr_slots(LirExpr *e, LirExpr **slot[3]) {
  switch (e->kind) {
  case LE_LOAD: slot[0] = &e->u.load.ptr, slot[1] = &e->u.load.idx; return 2;
  case LE_BIN: slot[0] = &e->u.bin.a, slot[1] = &e->u.bin.b; return 2;
  case LE_UN: slot[0] = &e->u.un.a; return 1;
  case LE_CAST: slot[0] = &e->u.cast; return 1;
  case LE_SELECT:
    slot[0] = &e->u.sel.cond, slot[1] = &e->u.sel.a, slot[2] = &e->u.sel.b;
    return 3;
  default: return 0;   /* CONST, VAR, FIELD */
  }
}

int lir_expr_kids(const LirExpr *e, LirExpr *kids[3]) {
  LirExpr **slot[3];
  int n = lir_expr_slots((LirExpr *)e, slot);
  for (int i = 0; i < n; i++) kids[i] = *slot[i];
  return n;
}

bool lir_expr_walk(const LirExpr *e, LirExprVisit fn, void *cx) {
  if (!e) return false;
  LirVisit v = fn(e, cx);
  if (v != LV_DESCEND) return v == LV_STOP;
  LirExpr *kids[3];
  int n = lir_expr_kids(e, kids);
  for (int i = 0; i < n; i++)
    if (lir_expr_walk(kids[i], fn, cx)) return true;
  return false;
}

int lir_stmt_exprs(const LirStmt *s, LirExpr *x[4]) {
  switch (s->kind) {
  case LS_DECL: x[0] = s->u.decl.init; return 1;
  case LS_ASSIGN: x[0] = s->u.assign.e, x[1] = s->u.assign.identity; return 2;
  case LS_STORE: x[0] = s->u.store.ptr, x[1] = s->u.store.idx, x[2] = s->u.store.e; return 3;
  case LS_SETFIELD: x[0] = s->u.setfield.e; return 1;
  case LS_FOR: x[0] = s->u.loop.lo, x[1] = s->u.loop.hi, x[2] = s->u.loop.step; return 3;
  case LS_WHILE: x[0] = s->u.whl.cond; return 1;
  case LS_IF: x[0] = s->u.cond.cond; return 1;
  case LS_CALL: x[0] = s->u.call.a, x[1] = s->u.call.b; return 2;
  case LS_PREFETCH: x[0] = s->u.prefetch.ptr, x[1] = s->u.prefetch.idx; return 2;
  default: return 0;   /* BLOCK, COMMENT */
  }
}

int lir_stmt_bodies(const LirStmt *s, LirStmt *body[2]) {
  switch (s->kind) {
  case LS_FOR: body[0] = s->u.loop.body; return 1;
  case LS_WHILE: body[0] = s->u.whl.body; return 1;
  case LS_IF: body[0] = s->u.cond.then, body[1] = s->u.cond.els; return 2;
  case LS_BLOCK: body[0] = s->u.block; return 1;
  default: return 0;
  }
}

/* The deepest nesting of FOR and WHILE loops in the statement list s. */
static int loop_depth(const LirStmt *s) {
  int deepest = 0;
  for (; s; s = s->next) {
    LirStmt *body[2];
    int n = lir_stmt_bodies(s, body), d = 0;
    for (int i = 0; i < n; i++) {
      int di = loop_depth(body[i]);
      if (di > d) d = di;
    }
    if (s->kind == LS_FOR || s->kind == LS_WHILE) d++;
    if (d > deepest) deepest = d;
  }
  return deepest;
}

bool lir_par_light(const LirStmt *loop) {
  const LoopAttrs *at = &loop->u.loop.at;
  return lir_unit_step(loop) && at->balance &&
         loop_depth(loop->u.loop.body) <= (at->leaves ? 2 : 1);
}

/* ---- questions about one expression ---- */

typedef struct Marked {
  const char *mark;
  int n;
} Marked;

static LirVisit marked_var(const LirExpr *e, void *cx) {
  const Marked *m = cx;
  return e->kind == LE_VAR && e->u.var->id < m->n && m->mark[e->u.var->id] ? LV_STOP
                                                                          : LV_DESCEND;
}

bool lir_reads_marked(const LirExpr *e, const char *mark, int nmark) {
  Marked m = {mark, nmark};
  return lir_expr_walk(e, marked_var, &m);
}

typedef struct Reads {
  const LirVar *v;
  int n;
} Reads;

static LirVisit count_var(const LirExpr *e, void *cx) {
  Reads *r = cx;
  if (e->kind == LE_VAR && e->u.var == r->v) r->n++;
  return LV_DESCEND;
}

int lir_count_reads(const LirExpr *e, const LirVar *v) {
  Reads r = {v, 0};
  lir_expr_walk(e, count_var, &r);
  return r.n;
}

static LirVisit is_load(const LirExpr *e, void *cx) {
  (void)cx;
  return e->kind == LE_LOAD ? LV_STOP : LV_DESCEND;
}

bool lir_has_load(const LirExpr *e) { return lir_expr_walk(e, is_load, NULL); }

/* ---- what a parallel loop's body captures ----
 * One walk over the body in statement order (declarations precede uses). */

typedef struct Capture {
  LirCapture *c;
  unsigned char *inner;  /* by var id: declared in the body (or its iv) */
  unsigned char *seen;   /* by var id: already in c->vars */
} Capture;

static void use_var(Capture *w, const LirVar *v) {
  if (!v || w->inner[v->id] || w->seen[v->id]) return;
  w->seen[v->id] = 1;
  w->c->vars[w->c->n++] = v;
}

static LirVisit capture_expr(const LirExpr *e, void *cx) {
  if (e->kind == LE_VAR) use_var(cx, e->u.var);
  return LV_DESCEND;
}

static void write_var(Capture *w, const LirVar *v) {
  if (v && !w->inner[v->id]) w->c->writes_outer = true;
}

static void capture_list(Capture *w, const LirStmt *s) {
  for (; s; s = s->next) {
    LirExpr *x[4];
    LirStmt *body[2];
    int n = lir_stmt_exprs(s, x);
    for (int i = 0; i < n; i++) lir_expr_walk(x[i], capture_expr, w);
    switch (s->kind) {
    case LS_DECL: w->inner[s->u.decl.var->id] = 1; break;
    case LS_ASSIGN: write_var(w, s->u.assign.var); break;
    case LS_FOR: w->inner[s->u.loop.iv->id] = 1; break;
    case LS_CALL:
      if (s->u.call.h == LH_RESERVE || s->u.call.h == LH_ALLOC || s->u.call.h == LH_GETT)
        w->c->may_fail = true;
      if (s->u.call.h == LH_FREE || s->u.call.h == LH_THREADS || s->u.call.h == LH_THREAD_SLOT)
        write_var(w, s->u.call.ptr);
      use_var(w, s->u.call.ptr);
      use_var(w, s->u.call.mark);
      write_var(w, s->u.call.ret);
      use_var(w, s->u.call.ret);
      break;
    default: break;
    }
    n = lir_stmt_bodies(s, body);
    for (int i = 0; i < n; i++) capture_list(w, body[i]);
  }
}

bool lir_capture(const LirKernel *k, const LirStmt *loop, LirCapture *c) {
  size_t n = (size_t)k->nvars + 1;
  *c = (LirCapture){.vars = calloc(n, sizeof *c->vars)};
  Capture w = {c, calloc(n, 1), calloc(n, 1)};
  bool ok = c->vars && w.inner && w.seen;
  if (ok) {
    w.inner[loop->u.loop.iv->id] = 1;
    lir_expr_walk(loop->u.loop.step, capture_expr, &w);
    capture_list(&w, loop->u.loop.body);
  } else {
    lir_capture_free(c);
  }
  free(w.inner);
  free(w.seen);
  return ok;
}

void lir_capture_free(LirCapture *c) {
  free(c->vars);
  c->vars = NULL;
  c->n = 0;
}

static LirVisit traps(const LirExpr *e, void *cx) {
  (void)cx;
  const LirExpr *by = e->kind == LE_BIN ? e->u.bin.b : NULL;
  bool safe_by = by && by->kind == LE_CONST && by->u.c.i != 0 && by->u.c.i != -1;
  bool int_div = e->kind == LE_BIN && (e->u.bin.op == LOP_DIV || e->u.bin.op == LOP_REM) &&
                 !lir_type_is_float(e->type) && !safe_by;
  bool to_int = e->kind == LE_CAST && lir_type_is_float(e->u.cast->type) &&
                !lir_type_is_float(e->type);
  return int_div || to_int ? LV_STOP : LV_DESCEND;
}

bool lir_expr_speculable(const LirExpr *e) { return !lir_expr_walk(e, traps, NULL); }

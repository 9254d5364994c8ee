/* Peeling of short gather reductions (a loop-IR pass, run last).
 *
 * Requires: a lowered kernel. A scalar `for` qualifies when its body
 * holds only declarations, blocks and one update `t += e` of a float
 * variable declared outside it, and gathers (a load whose index is itself
 * loaded: x[crd[p]], the loop over a fiber of a sparse operand); it must
 * sit at least two loops deep (a leaf fiber of a CSF tensor, not a
 * matrix's row) and walk another fiber in every iteration of the loop
 * around it. With the width F (LOWER_PEEL_WIDTH = 3), n = hi - lo and
 * q_r = min(lo + r, hi - 1):
 *
 *   if (n > 0 && n <= F) {
 *     <body at q_0> ... <body at q_F-1>, each computing its e_r
 *     t += e_0 + ((n > 1 ? e_1 : 0) + (n > 2 ? e_2 : 0))      (F = 3)
 *   } else for (p = lo; p < hi; p++) body
 *
 * A short fiber then takes no loop exit, whose branch mispredicts about
 * once a fiber when lengths are irregular (openflight_sym's leaf fibers:
 * 2.4 entries on average, 60% of one, 89% of at most 3): TTV over it ran
 * in 0.20 ms against 0.38 as a plain loop (clang -O3, thread CPU time).
 * Each peeled copy costs about 12 instructions a fiber whatever its
 * length: as plain C in one process (load 15, thread CPU, medians of 41),
 * F = 2, 3, 4 ran openflight_sym in 0.35, 0.35, 0.38 ms and rand3-1000
 * (1.6 entries a fiber, 97% of at most 3) in 2.22, 2.35, 2.75 ms; F = 3
 * keeps rand3-1000's 3-entry fibers (10%) out of the loop. Matrix rows
 * are left alone: where their lengths are regular the predictor learns
 * the exits, and the peeled form lost (luxembourg_osm's 2-entry rows 0.20
 * against 0.14 ms; wiki-Vote 0.11 against 0.09). The clamped positions
 * keep every load inside the fiber, and the selects drop the copies past
 * its end (a NaN or infinity read there never reaches t). The sum is
 * reassociated, as the vectorizer's lanes are.
 */
#include <string.h>

#include "lower.h"

typedef struct Peel {
  Arena *a;
  LirKernel *k;
  int width;             /* F */
  LirVar *iv;
  LirVar *acc;           /* t */
  const LirStmt *upd;    /* t += e */
  int nren;
  LirExpr **ren;         /* [copy * nren + id]: a var's replacement, or NULL */
} Peel;

typedef struct Loaded {
  const char *loaded;
  int n;
} Loaded;

/* A load whose index loads, or reads a variable marked loaded; a select's
 * condition is not looked at. */
static LirVisit gather_at(const LirExpr *e, void *cx) {
  const Loaded *l = cx;
  if (e->kind == LE_LOAD)
    return lir_has_load(e->u.load.idx) || lir_reads_marked(e->u.load.idx, l->loaded, l->n)
               ? LV_STOP : LV_SKIP;
  if (e->kind == LE_SELECT)
    return lir_expr_walk(e->u.sel.a, gather_at, cx) || lir_expr_walk(e->u.sel.b, gather_at, cx)
               ? LV_STOP : LV_SKIP;
  return LV_DESCEND;
}

/* Whether e has a load whose index loads (a gather), given that the
 * variables marked in loaded[] hold loaded values. */
static bool gathers(const LirExpr *e, const char *loaded, int n) {
  Loaded l = {loaded, n};
  return lir_expr_walk(e, gather_at, &l);
}

/* Checks a loop body: declarations (marking in loaded[] those that read
 * memory), blocks, comments and the single update; counts gathers. */
static bool body_ok(Peel *p, const LirStmt *s, char *loaded, int *ngather) {
  for (; s; s = s->next) {
    switch (s->kind) {
    case LS_COMMENT: break;
    case LS_BLOCK:
      if (!body_ok(p, s->u.block, loaded, ngather)) return false;
      break;
    case LS_DECL:
      if (!s->u.decl.init || s->u.decl.var->id >= p->nren) return false;
      *ngather += gathers(s->u.decl.init, loaded, p->nren);
      if (lir_has_load(s->u.decl.init) || lir_reads_marked(s->u.decl.init, loaded, p->nren))
        loaded[s->u.decl.var->id] = 1;
      break;
    case LS_ASSIGN:
      if (p->upd || s->u.assign.op != LOP_ADD || s->u.assign.with ||
          !lir_type_is_float(s->u.assign.var->type) || lir_count_reads(s->u.assign.e, s->u.assign.var))
        return false;
      p->upd = s;
      p->acc = s->u.assign.var;
      *ngather += gathers(s->u.assign.e, loaded, p->nren);
      break;
    default: return false;
    }
  }
  return true;
}

static bool qualifies(Peel *p, const LirStmt *loop) {
  const LoopAttrs *at = &loop->u.loop.at;
  if (at->parallel || at->vec_width || at->balance || !lir_unit_step(loop)) return false;
  p->iv = loop->u.loop.iv;
  p->upd = NULL;
  p->acc = NULL;
  p->nren = p->k->nvars;
  char *loaded = arena_alloc(p->a, (size_t)p->nren + 1);
  if (!loaded) return false;
  memset(loaded, 0, (size_t)p->nren + 1);
  int ngather = 0;
  return body_ok(p, loop->u.loop.body, loaded, &ngather) && p->upd && ngather > 0 &&
         p->acc->id < p->nren && !lir_count_reads(loop->u.loop.lo, p->acc) &&
         !lir_count_reads(loop->u.loop.hi, p->acc);
}

static LirExpr *clone(Peel *p, int r, const LirExpr *e) {
  return lir_clone_renamed(p->a, p->ren + (size_t)r * (size_t)p->nren, p->nren, e);
}

static LirVar *fresh(Peel *p, const char *name, LirType t) {
  return lir_var_numbered(p->a, p->k, name, t);
}

/* Copy r of the body with the update's value bound to *val. */
static LirStmt *copy_body(Peel *p, int r, const LirStmt *s, LirVar **val) {
  LirStmt *out = NULL;
  for (; s; s = s->next) {
    if (s->kind == LS_BLOCK) {
      lir_append(&out, copy_body(p, r, s->u.block, val));
    } else if (s->kind == LS_DECL) {
      LirVar *x = s->u.decl.var, *y = fresh(p, x->name, x->type);
      LirExpr *init = clone(p, r, s->u.decl.init);
      if (!y) return NULL;
      p->ren[r * p->nren + x->id] = lir_ref(p->a, y);
      lir_append(&out, lir_decl(p->a, y, init));
    } else if (s == p->upd) {
      *val = fresh(p, "peel", p->acc->type);
      if (!*val) return NULL;
      lir_append(&out, lir_decl(p->a, *val, clone(p, r, s->u.assign.e)));
    }
  }
  return out;
}

/* The balanced sum of term[lo..hi): (t0 + t1) + (t2 + t3), t0 + (t1 + t2). */
static LirExpr *sum_terms(Arena *a, LirExpr **term, int lo, int hi) {
  if (hi - lo == 1) return term[lo];
  int mid = lo + (hi - lo) / 2;
  return lir_bin(a, LOP_ADD, sum_terms(a, term, lo, mid), sum_terms(a, term, mid, hi));
}

/* The block that replaces loop (described at the top of the file), or
 * NULL. */
static LirStmt *rewrite(Peel *p, const LirStmt *loop) {
  Arena *a = p->a;
  LirType it = p->iv->type, vt = p->acc->type;
  LirExpr *lo = loop->u.loop.lo, *hi = loop->u.loop.hi;
  p->ren = arena_alloc(a, sizeof *p->ren * (size_t)p->nren * (size_t)p->width);
  LirVar *n = fresh(p, "peel_n", it), *last = fresh(p, "peel_last", it);
  if (!p->ren || !n || !last) return NULL;
  memset(p->ren, 0, sizeof *p->ren * (size_t)p->nren * (size_t)p->width);
  LirStmt *then = lir_decl(a, last, lir_bin(a, LOP_SUB, hi, lir_const_int(a, it, 1)));
  LirExpr *term[LOWER_PEEL_MAX];
  for (int r = 0; r < p->width; r++) {
    LirVar *q = fresh(p, p->iv->name, it), *val = NULL;
    if (!q) return NULL;
    LirExpr *at = lir_bin(a, LOP_ADD, lo, lir_const_int(a, it, r));
    lir_append(&then, lir_decl(a, q, r ? lir_bin(a, LOP_MIN, at, lir_ref(a, last)) : at));
    p->ren[r * p->nren + p->iv->id] = lir_ref(a, q);
    lir_append(&then, copy_body(p, r, loop->u.loop.body, &val));
    if (!val) return NULL;
    LirExpr *more = lir_bin(a, LOP_GT, lir_ref(a, n), lir_const_int(a, it, r));
    term[r] = r ? lir_select(a, more, lir_ref(a, val), lir_const_fp(a, vt, 0)) : lir_ref(a, val);
  }
  lir_append(&then, lir_update(a, p->acc, LOP_ADD, sum_terms(a, term, 0, p->width)));
  LirStmt *copy = lir_for(a, p->iv, lo, hi, loop->u.loop.body);   /* longer (or no) fibers */
  if (!copy) return NULL;
  copy->u.loop.at = loop->u.loop.at;
  LirExpr *zero = lir_const_int(a, it, 0), *most = lir_const_int(a, it, p->width);
  LirExpr *is_short = lir_bin(a, LOP_AND, lir_bin(a, LOP_GT, lir_ref(a, n), zero),
                              lir_bin(a, LOP_LE, lir_ref(a, n), most));
  LirStmt *s = lir_decl(a, n, lir_bin(a, LOP_SUB, hi, lo));
  lir_append(&s, lir_if(a, is_short, lir_block(a, then), copy));
  LirStmt *b = lir_block(a, s);
  return b && !a->failed ? b : NULL;
}

/* Marks the variables of s (any depth) whose value depends on a marked
 * one; sets *changed when it marks one. */
static void mark_deps(const LirStmt *s, char *dep, int n, bool *changed) {
  for (; s; s = s->next) {
    const LirVar *x = NULL;
    bool d = false;
    switch (s->kind) {
    case LS_DECL: x = s->u.decl.var, d = s->u.decl.init && lir_reads_marked(s->u.decl.init, dep, n); break;
    case LS_ASSIGN: x = s->u.assign.var, d = lir_reads_marked(s->u.assign.e, dep, n); break;
    case LS_BLOCK: mark_deps(s->u.block, dep, n, changed); break;
    case LS_IF:
      mark_deps(s->u.cond.then, dep, n, changed);
      mark_deps(s->u.cond.els, dep, n, changed);
      break;
    case LS_FOR: mark_deps(s->u.loop.body, dep, n, changed); break;
    case LS_WHILE: mark_deps(s->u.whl.body, dep, n, changed); break;
    default: break;
    }
    if (x && d && x->id < n && !dep[x->id]) dep[x->id] = 1, *changed = true;
  }
}

/* Whether loop walks another fiber in every iteration of the loop around
 * it (its bounds depend on that loop's variable): TTV's loop over B(i,j,:)
 * does, TTM's under its dense loop over k walks the same fiber k times,
 * whose trip count the branch predictor then learns. */
static bool new_fiber_each_time(Peel *p, const LirStmt *around, const LirStmt *loop) {
  if (!around) return true;
  int n = p->k->nvars;
  char *dep = arena_alloc(p->a, (size_t)n);
  if (!dep) return false;
  memset(dep, 0, (size_t)n);
  dep[around->u.loop.iv->id] = 1;
  bool changed = true;
  while (changed) {
    changed = false;
    mark_deps(around->u.loop.body, dep, n, &changed);
  }
  return lir_reads_marked(loop->u.loop.lo, dep, n) || lir_reads_marked(loop->u.loop.hi, dep, n);
}

static LirStmt *peel_list(Peel *p, LirStmt *s, const LirStmt *around, int depth, int *n);

static LirStmt *copy_node(Peel *p, const LirStmt *s) {
  LirStmt *c = arena_alloc(p->a, sizeof *c);
  if (c) *c = *s, c->next = NULL;
  return c;
}

/* s with its qualifying loops peeled: s itself when nothing changed, else
 * a new statement (its next unset). depth: the loops around s (a leaf
 * fiber of an order-3 CSF tensor is at depth 2 or more; a matrix's row at
 * depth 1 is left alone). */
static LirStmt *peel_stmt(Peel *p, LirStmt *s, const LirStmt *around, int depth, int *n) {
  LirStmt *c = NULL;
  switch (s->kind) {
  case LS_FOR: {
    if (s->u.loop.at.vec_width) return s;   /* a vector loop's body stays straight-line */
    if (depth >= 2 && qualifies(p, s) && new_fiber_each_time(p, around, s)) {
      LirStmt *b = rewrite(p, s);
      *n += b != NULL;
      return b ? b : s;
    }
    LirStmt *body = peel_list(p, s->u.loop.body, s, depth + 1, n);
    if (body == s->u.loop.body || !(c = copy_node(p, s))) return s;
    c->u.loop.body = body;
    return c;
  }
  case LS_WHILE: {
    LirStmt *body = peel_list(p, s->u.whl.body, NULL, depth + 1, n);
    if (body == s->u.whl.body || !(c = copy_node(p, s))) return s;
    c->u.whl.body = body;
    return c;
  }
  case LS_IF: {
    LirStmt *then = peel_list(p, s->u.cond.then, around, depth, n);
    LirStmt *els = peel_list(p, s->u.cond.els, around, depth, n);
    if ((then == s->u.cond.then && els == s->u.cond.els) || !(c = copy_node(p, s))) return s;
    c->u.cond.then = then, c->u.cond.els = els;
    return c;
  }
  case LS_BLOCK: {
    LirStmt *b = peel_list(p, s->u.block, around, depth, n);
    if (b == s->u.block || !(c = copy_node(p, s))) return s;
    c->u.block = b;
    return c;
  }
  default: return s;
  }
}

/* The list s with its loops peeled, copied where it changes: the
 * vectorizer's tiers share one body list, so the scalar tier's copy is
 * peeled while the vector tiers keep the original. */
static LirStmt *peel_list(Peel *p, LirStmt *s, const LirStmt *around, int depth, int *n) {
  if (!s) return NULL;
  LirStmt *rest = peel_list(p, s->next, around, depth, n);
  LirStmt *self = peel_stmt(p, s, around, depth, n);
  if (self == s && rest == s->next) return s;
  LirStmt *c = self == s ? copy_node(p, s) : self;
  if (!c) return s;
  c->next = rest;
  return c;
}

int lower_peel(Arena *a, LirKernel *k, int width) {
  if (k->nvars == 0 || width < 2 || width > LOWER_PEEL_MAX) return 0;
  Peel p = {.a = a, .k = k, .width = width};
  int n = 0;
  k->body = peel_list(&p, k->body, NULL, 0, &n);
  return n;
}

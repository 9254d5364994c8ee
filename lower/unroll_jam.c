/* Unroll-and-jam of independent outer loops: register blocking for dense
 * nests (a loop-IR pass, run after vectorization).
 *
 * Requires: a lowered (and possibly vectorized) kernel. A `for` qualifies
 * when it is marked parallel (its iterations are independent: they write
 * disjoint output elements and assign no outer variable), has unit step
 * and no balance array, its body holds only straight-line statements,
 * blocks and `for` loops whose bounds do not depend on its induction
 * variable, and some load in its body does not depend on it either (a
 * value the unrolled copies share: C(k,j) in GEMM, x(j) in GEMV). With F
 * the factor, the loop becomes
 *
 *   for (ib = 0; ib < (hi - lo + F - 1) / F; ib++)       // still parallel
 *     i0 = lo + ib * F
 *     if (i0 + F <= hi) { jam of the F bodies with i = i0 + r }
 *     else for (i = i0; i < hi; i++) body                // the last rows
 *
 * where the jam keeps one copy of each inner loop and puts the F copies of
 * every straight-line statement next to each other inside it. Inner vector
 * loops then load each shared vector once for F rows; reductions get F
 * independent accumulators. The copies are independent iterations, so any
 * interleaving of their statements computes exactly what the loop did.
 */
#include <stdio.h>
#include <string.h>

#include "lower.h"

typedef struct Jam {
  Arena *a;
  LirKernel *k;
  const LirVar *iv;
  char *dep;        /* var id -> depends on iv (sized for the input kernel) */
  int ndep;         /* entries in dep */
  int factor;
  LirExpr **ren;    /* [copy * nvars + id]: replacement for a var, or NULL */
  int nren;         /* vars covered by ren (the kernel's count before copying) */
  bool shared_load; /* a load independent of iv seen */
} Jam;

/* ---- which variables depend on the induction variable ---- */

static bool expr_dep(const Jam *j, const LirExpr *e) {
  return lir_reads_marked(e, j->dep, j->ndep);
}

/* Notes a load that does not depend on iv (after dependence is settled). */
static LirVisit shared_load(const LirExpr *e, void *cx) {
  Jam *j = cx;
  if (e->kind != LE_LOAD || expr_dep(j, e)) return LV_DESCEND;
  j->shared_load = true;
  return LV_STOP;
}

static void find_shared_loads(Jam *j, const LirExpr *e) {
  if (!j->shared_load) lir_expr_walk(e, shared_load, j);
}

/* One pass of dependence propagation over a body; returns whether the body
 * has only jammable statements. Sets *changed when a new var became
 * dependent. Inner loop ivs depend on iv when their bounds do. */
static bool scan(Jam *j, const LirStmt *s, bool *changed) {
  for (; s; s = s->next) {
    const LirVar *x = NULL;
    bool d = false;
    switch (s->kind) {
    case LS_COMMENT: break;
    case LS_BLOCK:
      if (!scan(j, s->u.block, changed)) return false;
      break;
    case LS_DECL:
      x = s->u.decl.var;
      d = expr_dep(j, s->u.decl.init);
      break;
    case LS_ASSIGN:
      x = s->u.assign.var;
      d = expr_dep(j, s->u.assign.e);
      break;
    case LS_STORE: break;
    case LS_FOR:
      x = s->u.loop.iv;
      d = expr_dep(j, s->u.loop.lo) || expr_dep(j, s->u.loop.hi) || expr_dep(j, s->u.loop.step);
      if (s->u.loop.at.parallel || !scan(j, s->u.loop.body, changed)) return false;
      break;
    default: return false; /* while, if, calls: not jammed */
    }
    if (x && d && x->id < j->ndep && !j->dep[x->id]) {
      j->dep[x->id] = 1;
      *changed = true;
    }
  }
  return true;
}

/* Inner loop bounds must be the same for every copy; collects shared loads. */
static bool bounds_shared(Jam *j, const LirStmt *s) {
  for (; s; s = s->next) {
    switch (s->kind) {
    case LS_BLOCK:
      if (!bounds_shared(j, s->u.block)) return false;
      break;
    case LS_FOR:
      if (j->dep[s->u.loop.iv->id]) return false;
      if (!bounds_shared(j, s->u.loop.body)) return false;
      break;
    case LS_DECL: find_shared_loads(j, s->u.decl.init); break;
    case LS_ASSIGN: find_shared_loads(j, s->u.assign.e); break;
    case LS_STORE: find_shared_loads(j, s->u.store.e); break;
    default: break;
    }
  }
  return true;
}

static bool jammable(Jam *j, const LirStmt *loop) {
  const LoopAttrs *at = &loop->u.loop.at;
  if (!at->parallel || at->balance || at->vec_width || !lir_unit_step(loop)) return false;
  memset(j->dep, 0, (size_t)j->ndep);
  j->dep[loop->u.loop.iv->id] = 1;
  j->shared_load = false;
  bool changed = true;
  while (changed) { /* assignments in inner loops can feed earlier reads */
    changed = false;
    if (!scan(j, loop->u.loop.body, &changed)) return false;
  }
  return bounds_shared(j, loop->u.loop.body) && j->shared_load;
}

/* ---- copying a body with renamed variables ---- */

static LirExpr *clone_expr(Jam *j, int r, const LirExpr *e) {
  return lir_clone_renamed(j->a, j->ren + (size_t)r * (size_t)j->nren, j->nren, e);
}

/* Copy r of a straight-line statement; a DECL gets a fresh variable. */
static LirStmt *clone_simple(Jam *j, int r, const LirStmt *s) {
  Arena *a = j->a;
  switch (s->kind) {
  case LS_DECL: {
    const LirVar *x = s->u.decl.var;
    LirExpr *init = s->u.decl.init ? clone_expr(j, r, s->u.decl.init) : NULL;
    LirVar *y = lir_var_numbered(a, j->k, x->name, x->type);
    if (!y) return NULL;
    if (x->id < j->nren) j->ren[r * j->nren + x->id] = lir_ref(a, y);
    return lir_decl(a, y, init);
  }
  case LS_ASSIGN: {
    LirExpr *to = clone_expr(j, r, lir_ref(a, s->u.assign.var));
    LirStmt *c = lir_assign(a, to ? to->u.var : s->u.assign.var, clone_expr(j, r, s->u.assign.e));
    if (c) c->u.assign.op = s->u.assign.op;
    if (c && s->u.assign.with) {
      LirExpr *w = clone_expr(j, r, lir_ref(a, s->u.assign.with));
      if (!w) return NULL;
      if (w->kind == LE_VAR) /* else a plain assignment, which means the same */
        c->u.assign.with = w->u.var, c->u.assign.identity = s->u.assign.identity;
    }
    return c;
  }
  case LS_STORE: {
    LirStmt *c = lir_store(a, clone_expr(j, r, s->u.store.ptr), clone_expr(j, r, s->u.store.idx),
                           clone_expr(j, r, s->u.store.e));
    if (c) c->u.store.op = s->u.store.op, c->u.store.atomic = s->u.store.atomic;
    LirExpr *old = c && s->u.store.old ? clone_expr(j, r, lir_ref(a, s->u.store.old)) : NULL;
    if (old) c->u.store.old = old->u.var;
    return c;
  }
  default: return lir_comment(a, s->u.comment);
  }
}

/* A DECL or ASSIGN of a variable that does not depend on iv computes the
 * same value in every copy: it is emitted once. */
static bool varies(const Jam *j, const LirStmt *s) {
  const LirVar *x = s->kind == LS_DECL ? s->u.decl.var : s->kind == LS_ASSIGN ? s->u.assign.var : NULL;
  return !x || x->id >= j->ndep || j->dep[x->id];
}

/* After copy 0 of an invariant DECL: the other copies use its variable. */
static void share_decl(Jam *j, const LirStmt *s) {
  if (s->kind != LS_DECL || s->u.decl.var->id >= j->nren) return;
  int id = s->u.decl.var->id;
  for (int r = 1; r < j->factor; r++) j->ren[r * j->nren + id] = j->ren[id];
}

/* The jam of the factor copies of list s: one copy of every loop and
 * block, the copies of each straight-line statement side by side. */
static LirStmt *jam_list(Jam *j, const LirStmt *s) {
  Arena *a = j->a;
  LirStmt *out = NULL;
  for (; s; s = s->next) {
    if (s->kind == LS_FOR) {
      LirStmt *f = lir_for(a, s->u.loop.iv, clone_expr(j, 0, s->u.loop.lo),
                           clone_expr(j, 0, s->u.loop.hi), jam_list(j, s->u.loop.body));
      if (!f) return NULL;
      f->u.loop.step = s->u.loop.step;
      f->u.loop.at = s->u.loop.at;
      lir_append(&out, f);
    } else if (s->kind == LS_BLOCK) {
      lir_append(&out, lir_block(a, jam_list(j, s->u.block)));
    } else if (s->kind == LS_COMMENT) {
      lir_append(&out, lir_comment(a, s->u.comment));
    } else if (!varies(j, s)) {
      lir_append(&out, clone_simple(j, 0, s));
      share_decl(j, s);
    } else {
      for (int r = 0; r < j->factor; r++) lir_append(&out, clone_simple(j, r, s));
    }
  }
  return out;
}

/* Rewrites the loop at *slot as described at the top of the file. */
static bool rewrite(Jam *j, LirStmt *loop) {
  Arena *a = j->a;
  LirVar *iv = loop->u.loop.iv;
  LirType t = iv->type;
  LirExpr *lo = loop->u.loop.lo, *hi = loop->u.loop.hi;
  LirExpr *F = lir_const_int(a, t, j->factor);
  LirVar *ib = lir_var(a, j->k, arena_printf(a, "%s_blk", iv->name), t);
  LirVar *i0 = lir_var(a, j->k, arena_printf(a, "%s_0", iv->name), t);
  j->nren = j->k->nvars;
  j->ren = arena_alloc(a, sizeof *j->ren * (size_t)j->nren * (size_t)j->factor);
  if (!ib || !i0 || !j->ren) return false;
  for (int r = 0; r < j->factor; r++)
    j->ren[r * j->nren + iv->id] =
        r ? lir_bin(a, LOP_ADD, lir_ref(a, i0), lir_const_int(a, t, r)) : lir_ref(a, i0);
  LirStmt *jammed = jam_list(j, loop->u.loop.body);
  LirStmt *last = lir_for(a, iv, lir_ref(a, i0), hi, loop->u.loop.body);
  LirExpr *full = lir_bin(a, LOP_LE, lir_bin(a, LOP_ADD, lir_ref(a, i0), F), hi);
  LirStmt *body = lir_decl(a, i0, lir_bin(a, LOP_ADD, lo, lir_bin(a, LOP_MUL, lir_ref(a, ib), F)));
  if (!body) return false;
  body->next = lir_if(a, full, lir_block(a, jammed), last);
  LirExpr *n = lir_bin(a, LOP_ADD, lir_bin(a, LOP_SUB, hi, lo), lir_const_int(a, t, j->factor - 1));
  loop->u.loop.iv = ib;
  loop->u.loop.lo = lir_const_int(a, t, 0);
  loop->u.loop.hi = lir_bin(a, LOP_DIV, n, F);
  loop->u.loop.body = body;
  return !a->failed;
}

static int walk(Jam *j, LirStmt *s) {
  int n = 0;
  for (; s; s = s->next) {
    switch (s->kind) {
    case LS_FOR:
      if (jammable(j, s)) {
        if (!rewrite(j, s)) return n;
        n++;
      } else {
        n += walk(j, s->u.loop.body);
      }
      break;
    case LS_WHILE: n += walk(j, s->u.whl.body); break;
    case LS_IF: n += walk(j, s->u.cond.then) + walk(j, s->u.cond.els); break;
    case LS_BLOCK: n += walk(j, s->u.block); break;
    default: break;
    }
  }
  return n;
}

/* Whether the list s assigns a variable it does not declare (a FOR's iv
 * counts as declared by it); decl marks what it declares. */
static bool assigns_outer(const LirStmt *s, char *decl) {
  for (; s; s = s->next) {
    switch (s->kind) {
    case LS_DECL: decl[s->u.decl.var->id] = 1; break;
    case LS_ASSIGN:
      if (!decl[s->u.assign.var->id]) return true;
      break;
    case LS_BLOCK:
      if (assigns_outer(s->u.block, decl)) return true;
      break;
    case LS_FOR:
      decl[s->u.loop.iv->id] = 1;
      if (assigns_outer(s->u.loop.body, decl)) return true;
      break;
    default: break;
    }
  }
  return false;
}

LirStmt *lower_jam_copies(Arena *a, LirKernel *k, const LirStmt *loop, int trips,
                          LirVar *const *sums, LirVar *const *parts, int nsums) {
  if (loop->kind != LS_FOR || loop->u.loop.at.parallel || loop->u.loop.at.vec_width ||
      !lir_unit_step(loop) || trips < 2 || trips > LOWER_JAM_MAX)
    return NULL;
  Jam j = {.a = a, .k = k, .factor = trips, .ndep = k->nvars};
  j.dep = arena_alloc(a, (size_t)j.ndep);
  char *decl = arena_alloc(a, (size_t)j.ndep);
  if (!j.dep || !decl) return NULL;
  for (int s = 0; s < nsums; s++) decl[sums[s]->id] = j.dep[sums[s]->id] = 1;
  if (assigns_outer(loop->u.loop.body, decl)) return NULL;
  j.dep[loop->u.loop.iv->id] = 1;
  bool changed = true;
  while (changed) {
    changed = false;
    if (!scan(&j, loop->u.loop.body, &changed)) return NULL;
  }
  if (!bounds_shared(&j, loop->u.loop.body)) return NULL;
  const LirVar *iv = loop->u.loop.iv;
  const LirExpr *lo = loop->u.loop.lo;
  j.nren = k->nvars;
  j.ren = arena_alloc(a, sizeof *j.ren * (size_t)j.nren * (size_t)j.factor);
  if (!j.ren) return NULL;
  for (int r = 0; r < j.factor; r++) {
    j.ren[r * j.nren + iv->id] =
        lo->kind == LE_CONST ? lir_const_int(a, iv->type, lo->u.c.i + r)
        : r ? lir_bin(a, LOP_ADD, (LirExpr *)lo, lir_const_int(a, iv->type, r)) : (LirExpr *)lo;
    for (int s = 0; s < nsums; s++)
      j.ren[r * j.nren + sums[s]->id] = lir_ref(a, parts[r * nsums + s]);
  }
  LirStmt *out = jam_list(&j, loop->u.loop.body);
  return a->failed ? NULL : out;
}

LirStmt *lower_clone_stmt(Arena *a, LirKernel *k, LirStmt *s) {
  Jam j = {.a = a, .k = k, .factor = 1, .ndep = k->nvars, .nren = k->nvars};
  j.dep = arena_alloc(a, (size_t)j.ndep);
  j.ren = arena_alloc(a, sizeof *j.ren * (size_t)j.nren);
  if (!j.dep || !j.ren) return NULL;
  char *decl = arena_alloc(a, (size_t)j.ndep);
  bool changed = false;
  if (!decl || !scan(&j, s->kind == LS_FOR ? s->u.loop.body : s, &changed)) return NULL;
  LirStmt *next = s->next;
  s->next = NULL;
  LirStmt *c = jam_list(&j, s);
  s->next = next;
  return a->failed ? NULL : c;
}

int lower_unroll_jam(Arena *a, LirKernel *k, int factor) {
  if (factor < 2 || k->nvars == 0) return 0;
  Jam j = {.a = a, .k = k, .factor = factor, .ndep = k->nvars};
  j.dep = arena_alloc(a, (size_t)j.ndep);
  if (!j.dep) return 0;
  return walk(&j, k->body);
}

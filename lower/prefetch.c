/* Software prefetch of rows reached through a sparse coordinate (a loop-IR
 * pass, run last).
 *
 * Requires: a lowered, vectorized kernel. A scalar unit-step `for` over
 * positions p inside a vector loop over j qualifies when its straight-line
 * body declares x = crd[p] (crd an input's coordinate array) and loads
 * B[f(x, j)], an index unit-stride in j (SpMM's B(k,j): a row segment of W
 * lanes). Such rows are at random addresses, so each costs a miss whose
 * latency the loop otherwise waits out a few rows at a time. With
 * D = LOWER_PREFETCH_AHEAD positions ahead:
 *
 *   for (p = lo; p < hi; p++) {
 *     q = min(p + D, crd_len - 1);          // past the fiber: the next rows'
 *     x' = crd[q]; ... (f's declarations, renamed)
 *     __builtin_prefetch(&B[f(x', j)]);     // W lanes: every line they span
 *     <body>
 *   }
 *
 * q runs on into the next fibers, so a row of 16 entries is prefetched
 * from its first entry (clamped to the fiber, the first D entries of every
 * row are not: a hand-C copy of the loops on u200k took 291 ms so, 278
 * without prefetches, 268 running on). The clamp keeps the coordinate load
 * inside the array; the prefetch itself never faults. f's declarations
 * must load nothing else and be speculable. The vector loop around runs
 * this copy only when B's array holds LOWER_PREFETCH_MIN_BYTES or more
 * (walk). Invalidates nothing: the new statements are declarations and a
 * hint, in copies of the loops (vector tiers share their bodies).
 * TJ_PREFETCH=0 turns it off, TJ_PREFETCH=<n> sets D.
 *
 * The row may be read in a constant loop over a block's rows inside p's
 * body (BSR SpMM: B[(crd[p] * 4 + j_i) * n + j] for j_i < 4): then each
 * of the block's c rows is prefetched, j_i replaced by 0 .. c - 1, and
 * ahead is D / c blocks (the same rows ahead as a CSR row's D entries).
 * Only rows that feed LOWER_PREFETCH_BLOCK_USES products or more (the
 * block's rows jammed: each prefetched line serves that many FMAs) are
 * prefetched, and the copy runs from LOWER_PREFETCH_BLOCK_MIN_BYTES, where
 * a CSR row's hints (one FMA a line) wait for 16 MB. 4x4 BSR SpMM, 64
 * columns, 27 dense 4x4 blocks a block row, CSR/BSR (tjblocked, one
 * pinned thread, two runs): 4096 rows (B 2 MB) 1.71-1.75x -> 1.87-1.99x,
 * 16384 rows (B 8 MB) 1.46-1.51x -> 1.54-1.57x.
 *
 * Second, segments reached through a coordinate (SpGEMM's rows of C at
 * k = B's crd[p]): a scalar unit-step `for` over p outside vector loops
 * whose straight-line body declares x = crd[p] and lo = pos[g(x)] (an
 * input's pos array, g loading nothing else) and then runs an inner loop
 * from lo over positions q that loads input arrays at q (the segment's crd
 * and values), with E = D / 2 (at least 1):
 *
 *   for (p = lo; p < hi; p++) {
 *     q = min(p + E, crd_len - 1); x' = crd[q]; ... lo' = pos[g(x')];
 *     __builtin_prefetch(&crd2[lo']); __builtin_prefetch(&vals2[lo']);
 *     <body>
 *   }
 *
 * A row of C is a short segment at a random address (cage11: 14 entries,
 * two lines each of crd and values), so its first lines are the misses;
 * pos itself is small and read E rows early. No size guard: the hints cost
 * a few instructions a segment, not an entry.
 */
#include <string.h>

#include "lower.h"

typedef struct Pf {
  Arena *a;
  LirKernel *k;
  int ahead;
  int nvars;
  LirExpr *guard;   /* the vector loop's prefetched arrays are big (ORed) */
} Pf;

/* The straight-line declarations of a body, in order (blocks flattened,
 * nested loops and conditionals not entered). */
typedef struct Decls {
  const LirStmt *d[64];
  int n;
  int nvars;
  bool assigns_decl;   /* an ASSIGN to one of them: values not pure */
  bool blocks;            /* enter a block loop (below) */
  const LirStmt *inner;   /* the one constant loop over a block's rows whose
                             declarations follow first_inner, or NULL */
  int first_inner;
  int trips;              /* its trip count */
} Decls;

/* A `for (v = 0; v < c; v++)`, 2 <= c <= LOWER_PREFETCH_BLOCK_TRIPS,
 * scalar: the trip count, else 0. */
static int block_trips(const LirStmt *s) {
  if (s->kind != LS_FOR || s->u.loop.at.vec_width > 0 || !lir_unit_step(s)) return 0;
  const LirExpr *lo = s->u.loop.lo, *hi = s->u.loop.hi;
  if (lo->kind != LE_CONST || hi->kind != LE_CONST || lo->u.c.i != 0) return 0;
  return hi->u.c.i >= 2 && hi->u.c.i <= LOWER_PREFETCH_BLOCK_TRIPS ? (int)hi->u.c.i : 0;
}

static void collect(const LirStmt *s, Decls *ds, char *declared) {
  for (; s; s = s->next) {
    if (s->kind == LS_BLOCK) collect(s->u.block, ds, declared);
    else if (ds->blocks && !ds->inner && block_trips(s)) {
      ds->inner = s, ds->first_inner = ds->n, ds->trips = block_trips(s);
      collect(s->u.loop.body, ds, declared);
    } else if (s->kind == LS_DECL && ds->n < 64) {
      ds->d[ds->n++] = s;
      if (s->u.decl.var->id < ds->nvars) declared[s->u.decl.var->id] = 1;
    } else if (s->kind == LS_ASSIGN && s->u.assign.var->id < ds->nvars &&
               declared[s->u.assign.var->id]) {
      ds->assigns_decl = true;
    }
  }
}

/* Finds the declaration of v anywhere in the list s. */
static const LirStmt *find_decl(const LirStmt *s, const LirVar *v) {
  for (; s; s = s->next) {
    if (s->kind == LS_DECL && s->u.decl.var == v) return s;
    LirStmt *body[2];
    int n = lir_stmt_bodies(s, body);
    for (int i = 0; i < n; i++) {
      const LirStmt *d = find_decl(body[i], v);
      if (d) return d;
    }
  }
  return NULL;
}

/* The length field of an input's coordinate array that ptr was declared
 * from (`int32_t *A1_crd = A->levels[1].crd`), or NULL. */
static LirExpr *crd_len(Pf *p, const LirExpr *ptr) {
  if (ptr->kind != LE_VAR) return NULL;
  const LirStmt *d = find_decl(p->k->body, ptr->u.var);
  const LirExpr *f = d ? d->u.decl.init : NULL;
  if (f && f->kind == LE_CAST) f = f->u.cast;
  if (!f || f->kind != LE_FIELD || f->u.field.field != LF_CRD) return NULL;
  int op = f->u.field.operand;
  if (op < 0 || op >= p->k->noperands || p->k->operands[op].is_output) return NULL;
  return lir_field(p->a, p->k, op, LF_CRD_LEN, f->u.field.level);
}

/* x = crd[p] or x = (T)crd[p]: the coordinate load at the loop's iv. */
static const LirExpr *coord_load(const LirStmt *d, const LirVar *iv) {
  const LirExpr *e = d->u.decl.init;
  if (e && e->kind == LE_CAST) e = e->u.cast;
  if (!e || e->kind != LE_LOAD || e->u.load.idx->kind != LE_VAR || e->u.load.idx->u.var != iv)
    return NULL;
  return e;
}

typedef struct Slice {
  char *need;        /* by var id (< nvars): f reads it (through declarations) */
  int nvars;
  const LirStmt *coord;   /* the coordinate declaration f reads, or NULL */
  LirExpr *len;
} Slice;

static LirVisit mark_vars(const LirExpr *e, void *cx) {
  Slice *sl = cx;
  if (e->kind == LE_VAR && e->u.var->id < sl->nvars) sl->need[e->u.var->id] = 1;
  return LV_DESCEND;
}

/* Marks the declarations idx reads, back to the coordinate load; false
 * when one loads anything else or may trap. */
static bool slice(Pf *p, const Decls *ds, const LirVar *iv, const LirExpr *idx, Slice *sl) {
  memset(sl->need, 0, (size_t)p->nvars);
  sl->coord = NULL;
  lir_expr_walk(idx, mark_vars, sl);
  for (int i = ds->n - 1; i >= 0; i--) {
    const LirStmt *d = ds->d[i];
    if (d->u.decl.var->id >= sl->nvars || !sl->need[d->u.decl.var->id]) continue;
    const LirExpr *c = coord_load(d, iv);
    if (c) {
      if (sl->coord && sl->coord != d) return false;   /* two coordinates: leave it */
      if (!(sl->len = crd_len(p, c->u.load.ptr))) return false;
      sl->coord = d;
      continue;
    }
    const LirExpr *e = d->u.decl.init;
    if (!e || lir_has_load(e) || !lir_expr_speculable(e)) return false;
    lir_expr_walk(e, mark_vars, sl);
  }
  return sl->coord != NULL;
}

/* Emits, into *out, q = min(p + ahead, len - 1) and the slice's
 * declarations renamed (ren: by var id), those not emitted yet. */
static bool emit_slice(Pf *p, const Decls *ds, const LirVar *iv, const Slice *sl, LirExpr **ren,
                       int ahead, LirStmt **out) {
  Arena *a = p->a;
  if (!ren[iv->id]) {
    LirVar *q = lir_var_numbered(a, p->k, "pf_q", iv->type);
    if (!q) return false;
    LirExpr *len = sl->len->type == iv->type ? sl->len : lir_cast(a, iv->type, sl->len);
    LirExpr *at = lir_bin(a, LOP_ADD, lir_ref(a, (LirVar *)iv),
                          lir_const_int(a, iv->type, ahead));
    LirExpr *last = lir_bin(a, LOP_SUB, len, lir_const_int(a, iv->type, 1));
    lir_append(out, lir_decl(a, q, lir_bin(a, LOP_MIN, at, last)));
    ren[iv->id] = lir_ref(a, q);
  }
  for (int i = 0; i < ds->n; i++) {
    const LirVar *x = ds->d[i]->u.decl.var;
    if (x->id >= p->nvars || !sl->need[x->id] || ren[x->id]) continue;
    LirVar *y = lir_var_numbered(a, p->k, arena_printf(a, "pf_%s", x->name), x->type);
    if (!y) return false;
    lir_append(out, lir_decl(a, y, lir_clone_renamed(a, ren, p->nvars, ds->d[i]->u.decl.init)));
    ren[x->id] = lir_ref(a, y);
  }
  return !a->failed;
}

/* emit_slice, then the prefetch of ptr[idx]; where idx reads the block
 * loop's iv, once for each of its values (the declarations inside that
 * loop renamed again for each). */
static bool emit(Pf *p, const Decls *ds, const LirVar *iv, const Slice *sl, LirExpr **ren,
                 int ahead, const LirExpr *ptr, const LirExpr *idx, LirStmt **out) {
  const LirVar *bv = ds->inner ? ds->inner->u.loop.iv : NULL;
  int copies = bv && bv->id < p->nvars && sl->need[bv->id] ? ds->trips : 1;
  for (int c = 0; c < copies; c++) {
    if (copies > 1) {
      ren[bv->id] = lir_const_int(p->a, bv->type, c);
      for (int i = ds->first_inner; i < ds->n; i++) {
        const LirVar *x = ds->d[i]->u.decl.var;
        if (x->id < p->nvars) ren[x->id] = NULL;
      }
    }
    if (!emit_slice(p, ds, iv, sl, ren, ahead, out)) return false;
    lir_append(out, lir_prefetch(p->a, (LirExpr *)ptr, lir_clone_renamed(p->a, ren, p->nvars, idx)));
  }
  return !p->a->failed;
}

typedef struct Targets {
  Pf *p;
  const Decls *ds;
  const LirVar *iv, *viv;
  Slice sl;
  LirExpr **ren;
  LirStmt *out;
  const LirExpr *len;   /* the coordinate array's length q is clamped to */
  int ahead;            /* positions ahead (blocks, with a block loop) */
  const LirStmt *at;    /* the statement target() is walking */
  int n;
  bool failed;
} Targets;

static LirExpr *is_big(Pf *p, const LirExpr *ptr, int64_t min_bytes);

/* How many times the statements s (nested ones too) read v. */
static int reads_in(const LirStmt *s, const LirVar *v) {
  int n = 0;
  for (; s; s = s->next) {
    LirExpr *x[4];
    LirStmt *body[2];
    int ne = lir_stmt_exprs(s, x), nb = lir_stmt_bodies(s, body);
    for (int i = 0; i < ne; i++) n += x[i] ? lir_count_reads(x[i], v) : 0;
    for (int i = 0; i < nb; i++) n += reads_in(body[i], v);
  }
  return n;
}

/* In a block loop, whether the row the declaration `at` loads (x = B[f])
 * feeds LOWER_PREFETCH_BLOCK_USES products or more: the block's rows are
 * jammed, so each prefetched line serves as many FMAs. Two rows of a 4x4
 * block a pass (short block rows: the pass is made twice, the second from
 * L1) lost with the hints: blocks8-4096 0.587 -> 0.642 ms. */
static bool block_row_used_enough(const Targets *t, const LirExpr *load) {
  const LirStmt *at = t->at;
  if (!t->ds->inner) return true;
  if (!at || at->kind != LS_DECL) return false;
  const LirExpr *init = at->u.decl.init;
  if (init && init->kind == LE_CAST) init = init->u.cast;
  return init == load && reads_in(t->ds->inner->u.loop.body, at->u.decl.var) >=
                             LOWER_PREFETCH_BLOCK_USES;
}

/* A load B[f] whose index reads the vector loop's iv and, through the
 * body's declarations, the coordinate at p: prefetched. */
static LirVisit target(const LirExpr *e, void *cx) {
  Targets *t = cx;
  if (e->kind != LE_LOAD) return LV_DESCEND;
  const LirExpr *ptr = e->u.load.ptr, *idx = e->u.load.idx;
  if (ptr->kind != LE_VAR || lir_has_load(idx)) return LV_DESCEND;
  if (!slice(t->p, t->ds, t->iv, idx, &t->sl) || t->viv->id >= t->sl.nvars ||
      !t->sl.need[t->viv->id])
    return LV_DESCEND;
  if (!block_row_used_enough(t, e)) return LV_DESCEND;
  LirExpr *big = is_big(t->p, ptr, t->ds->inner ? LOWER_PREFETCH_BLOCK_MIN_BYTES
                                                 : LOWER_PREFETCH_MIN_BYTES);
  if (!big) return LV_DESCEND;   /* no size to ask: not prefetched */
  /* one look-ahead position serves the loop: a row read through another
   * coordinate array (another length) is left alone */
  if (t->len && !lir_expr_equal(t->len, t->sl.len)) return LV_DESCEND;
  t->len = t->sl.len;
  if (!emit(t->p, t->ds, t->iv, &t->sl, t->ren, t->ahead, ptr, idx, &t->out)) t->failed = true;
  Pf *p = t->p;
  if (!p->guard) p->guard = big;
  else if (!lir_expr_equal(p->guard, big) &&
           !(p->guard->kind == LE_BIN && p->guard->u.bin.op == LOP_OR &&
             lir_expr_equal(p->guard->u.bin.b, big)))
    p->guard = lir_bin(p->a, LOP_OR, p->guard, big);
  t->n++;
  return t->failed ? LV_STOP : LV_SKIP;
}

/* The body's straight-line statements' loads (and its block loop's), as
 * target() asks. */
static void targets_in(Targets *t, const LirStmt *s) {
  for (; s && !t->failed; s = s->next) {
    if (s->kind == LS_BLOCK || s == t->ds->inner) {
      targets_in(t, s->kind == LS_BLOCK ? s->u.block : s->u.loop.body);
      continue;
    }
    LirExpr *x[4];
    int n = s->kind == LS_DECL || s->kind == LS_ASSIGN || s->kind == LS_STORE
                ? lir_stmt_exprs(s, x) : 0;
    t->at = s;
    for (int i = 0; i < n; i++) lir_expr_walk(x[i], target, t);
  }
}

/* The array's size in bytes >= min_bytes, when ptr was declared from an
 * input's array field; NULL otherwise. */
static LirExpr *is_big(Pf *p, const LirExpr *ptr, int64_t min_bytes) {
  const LirStmt *d = find_decl(p->k->body, ptr->u.var);
  const LirExpr *f = d ? d->u.decl.init : NULL;
  if (f && f->kind == LE_CAST) f = f->u.cast;
  if (!f || f->kind != LE_FIELD) return NULL;
  int op = f->u.field.operand, lv = f->u.field.level;
  LirField len = f->u.field.field == LF_VALS ? LF_VALS_LEN
                 : f->u.field.field == LF_CRD ? LF_CRD_LEN
                 : f->u.field.field == LF_POS ? LF_POS_LEN : LF_DIM;
  if (len == LF_DIM || op < 0 || op >= p->k->noperands || p->k->operands[op].is_output)
    return NULL;
  int64_t bytes = lir_type_bytes(lir_elem_type(ptr->type));
  Arena *a = p->a;
  LirExpr *n = lir_field(a, p->k, op, len, lv);
  return lir_bin(a, LOP_GE, n, lir_const_int(a, LT_I64, min_bytes / bytes));
}

/* A copy of loop with the prefetches at the top of its body, or NULL when
 * it does not qualify; ORs into p->guard when they pay (a big array). */
static LirStmt *rewrite(Pf *p, const LirStmt *loop, const LirVar *viv) {
  Arena *a = p->a;
  char *declared = arena_alloc(a, (size_t)p->nvars);
  Decls *ds = arena_alloc(a, sizeof *ds);
  Targets t = {.p = p, .ds = ds, .iv = loop->u.loop.iv, .viv = viv};
  t.sl.need = arena_alloc(a, (size_t)p->nvars);
  t.ren = arena_alloc(a, sizeof *t.ren * (size_t)p->nvars);
  LirStmt *c = arena_alloc(a, sizeof *c);
  if (!declared || !ds || !t.sl.need || !t.ren || !c) return NULL;
  memset(declared, 0, (size_t)p->nvars);
  memset(t.ren, 0, sizeof *t.ren * (size_t)p->nvars);
  ds->n = 0, ds->nvars = p->nvars, ds->assigns_decl = false, ds->inner = NULL;
  ds->blocks = true;
  t.sl.nvars = p->nvars;
  collect(loop->u.loop.body, ds, declared);
  if (ds->assigns_decl || ds->n >= 64) return NULL;
  t.ahead = ds->inner ? (p->ahead / ds->trips > 0 ? p->ahead / ds->trips : 1) : p->ahead;
  t.out = NULL;
  targets_in(&t, loop->u.loop.body);
  if (t.failed || t.n == 0 || !t.out) return NULL;
  LirStmt *b = lir_block(a, t.out);
  if (!b) return NULL;
  b->next = loop->u.loop.body;
  *c = *loop;
  c->next = NULL;
  c->u.loop.body = b;
  return c;
}

static LirStmt *cow_list(Pf *p, LirStmt *s, const LirVar *viv, int *n);

static LirStmt *copy_node(Pf *p, const LirStmt *s) {
  LirStmt *c = arena_alloc(p->a, sizeof *c);
  if (c) *c = *s, c->next = NULL;
  return c;
}

/* s with the qualifying loops inside vector loops rewritten: s itself when
 * nothing changed, else a copy (its next unset). viv: the innermost vector
 * loop's iv around s, or NULL. */
static LirStmt *cow_stmt(Pf *p, LirStmt *s, const LirVar *viv, int *n) {
  LirStmt *c = NULL, *b, *e;
  switch (s->kind) {
  case LS_FOR: {
    const LoopAttrs *at = &s->u.loop.at;
    if (at->vec_width > 0) viv = s->u.loop.iv;
    else if (viv && !at->parallel && lir_unit_step(s) && (c = rewrite(p, s, viv))) {
      *n += 1;
      return c;
    }
    b = cow_list(p, s->u.loop.body, viv, n);
    if (b == s->u.loop.body || !(c = copy_node(p, s))) return s;
    c->u.loop.body = b;
    return c;
  }
  case LS_WHILE:
    b = cow_list(p, s->u.whl.body, viv, n);
    if (b == s->u.whl.body || !(c = copy_node(p, s))) return s;
    c->u.whl.body = b;
    return c;
  case LS_IF:
    b = cow_list(p, s->u.cond.then, viv, n);
    e = cow_list(p, s->u.cond.els, viv, n);
    if ((b == s->u.cond.then && e == s->u.cond.els) || !(c = copy_node(p, s))) return s;
    c->u.cond.then = b, c->u.cond.els = e;
    return c;
  case LS_BLOCK:
    b = cow_list(p, s->u.block, viv, n);
    if (b == s->u.block || !(c = copy_node(p, s))) return s;
    c->u.block = b;
    return c;
  default: return s;
  }
}

static LirStmt *cow_list(Pf *p, LirStmt *s, const LirVar *viv, int *n) {
  if (!s) return NULL;
  LirStmt *rest = cow_list(p, s->next, viv, n);
  LirStmt *self = cow_stmt(p, s, viv, n);
  if (self == s && rest == s->next) return s;
  LirStmt *c = self == s ? copy_node(p, s) : self;
  if (!c) return s;
  c->next = rest;
  return c;
}

/* ---- segments reached through a coordinate ---- */

/* The field (kind kind, of an input) ptr was declared from, or false. */
static bool input_field(Pf *p, const LirExpr *ptr, LirField kind) {
  if (ptr->kind != LE_VAR) return false;
  const LirStmt *d = find_decl(p->k->body, ptr->u.var);
  const LirExpr *f = d ? d->u.decl.init : NULL;
  if (f && f->kind == LE_CAST) f = f->u.cast;
  if (!f || f->kind != LE_FIELD || f->u.field.field != kind) return false;
  int op = f->u.field.operand;
  return op >= 0 && op < p->k->noperands && !p->k->operands[op].is_output;
}

/* The first `for` in the straight-line statements s (blocks entered). */
static const LirStmt *first_loop(const LirStmt *s) {
  for (; s; s = s->next) {
    if (s->kind == LS_FOR) return s;
    if (s->kind == LS_BLOCK) {
      const LirStmt *l = first_loop(s->u.block);
      if (l) return l;
    }
  }
  return NULL;
}

typedef struct SegLoads {
  Pf *p;
  const LirVar *iv;
  const LirExpr *ptr[4];
  int n;
} SegLoads;

/* ptr[iv], ptr an input's crd or values: a line of the segment. */
static LirVisit seg_load(const LirExpr *e, void *cx) {
  SegLoads *sl = cx;
  if (e->kind != LE_LOAD) return LV_DESCEND;
  const LirExpr *ptr = e->u.load.ptr, *idx = e->u.load.idx;
  if (idx->kind != LE_VAR || idx->u.var != sl->iv || ptr->kind != LE_VAR) return LV_DESCEND;
  if (!input_field(sl->p, ptr, LF_CRD) && !input_field(sl->p, ptr, LF_VALS)) return LV_DESCEND;
  for (int i = 0; i < sl->n; i++)
    if (sl->ptr[i]->u.var == ptr->u.var) return LV_SKIP;
  if (sl->n < 4) sl->ptr[sl->n++] = ptr;
  return LV_SKIP;
}

static void seg_loads_in(SegLoads *sl, const LirStmt *s) {
  for (; s; s = s->next) {
    if (s->kind == LS_BLOCK) {
      seg_loads_in(sl, s->u.block);
      continue;
    }
    LirExpr *x[4];
    int n = s->kind == LS_DECL || s->kind == LS_ASSIGN || s->kind == LS_STORE
                ? lir_stmt_exprs(s, x) : 0;
    for (int i = 0; i < n; i++) lir_expr_walk(x[i], seg_load, sl);
  }
}

/* A copy of the scalar loop with its inner segment's first lines
 * prefetched E iterations ahead (the second pattern above), or NULL. */
static LirStmt *seg_rewrite(Pf *p, const LirStmt *loop) {
  const LirStmt *inner = first_loop(loop->u.loop.body);
  if (!inner || !lir_unit_step(inner) || inner->u.loop.lo->kind != LE_VAR) return NULL;
  Arena *a = p->a;
  char *declared = arena_alloc(a, (size_t)p->nvars);
  Decls *ds = arena_alloc(a, sizeof *ds);
  Slice sl = {.need = arena_alloc(a, (size_t)p->nvars), .nvars = p->nvars};
  LirExpr **ren = arena_alloc(a, sizeof *ren * (size_t)p->nvars);
  LirStmt *c = arena_alloc(a, sizeof *c);
  if (!declared || !ds || !sl.need || !ren || !c) return NULL;
  memset(declared, 0, (size_t)p->nvars);
  memset(ren, 0, sizeof *ren * (size_t)p->nvars);
  ds->n = 0, ds->nvars = p->nvars, ds->assigns_decl = false, ds->inner = NULL;
  ds->blocks = false;
  collect(loop->u.loop.body, ds, declared);
  if (ds->assigns_decl || ds->n >= 64) return NULL;
  const LirStmt *lo = NULL;   /* lo = pos[g], declared in the body */
  for (int i = 0; i < ds->n; i++)
    if (ds->d[i]->u.decl.var == inner->u.loop.lo->u.var) lo = ds->d[i];
  const LirExpr *ld = lo ? lo->u.decl.init : NULL;
  if (ld && ld->kind == LE_CAST) ld = ld->u.cast;
  if (!ld || ld->kind != LE_LOAD || !input_field(p, ld->u.load.ptr, LF_POS) ||
      lir_has_load(ld->u.load.idx) || !slice(p, ds, loop->u.loop.iv, ld->u.load.idx, &sl))
    return NULL;
  SegLoads segs = {.p = p, .iv = inner->u.loop.iv};
  seg_loads_in(&segs, inner->u.loop.body);
  if (segs.n == 0) return NULL;
  LirStmt *out = NULL;
  int ahead = p->ahead / 2 > 0 ? p->ahead / 2 : 1;
  if (!emit_slice(p, ds, loop->u.loop.iv, &sl, ren, ahead, &out)) return NULL;
  const LirVar *lv = lo->u.decl.var;
  LirVar *y = lir_var_numbered(a, p->k, arena_printf(a, "pf_%s", lv->name), lv->type);
  if (!y) return NULL;
  lir_append(&out, lir_decl(a, y, lir_clone_renamed(a, ren, p->nvars, lo->u.decl.init)));
  for (int i = 0; i < segs.n; i++)
    lir_append(&out, lir_prefetch(a, (LirExpr *)segs.ptr[i], lir_ref(a, y)));
  LirStmt *b = lir_block(a, out);
  if (!b || a->failed) return NULL;
  b->next = loop->u.loop.body;
  *c = *loop;
  c->next = NULL;
  c->u.loop.body = b;
  return c;
}

/* Outside vector loops: each vector loop with loops to prefetch in becomes
 *   if (<a prefetched array is big>) <the loop with prefetches> else <the loop>
 * (a small array stays in cache, where the hints only cost: bcsstk33's
 * 4.5 MB B ran 7% slower with them). A loop whose remainder runs as its
 * masked step stays as it is. Returns how many loops it rewrote. */
static int walk(Pf *p, LirStmt **slot) {
  int n = 0;
  for (; *slot; slot = &(*slot)->next) {
    LirStmt *s = *slot;
    switch (s->kind) {
    case LS_FOR: {
      if (s->u.loop.at.vec_width <= 0) {
        LirStmt *c = lir_unit_step(s) ? seg_rewrite(p, s) : NULL;
        if (c) {   /* a copy: bodies may be shared */
          c->next = s->next;
          *slot = s = c;
          n++;
        }
        n += walk(p, &s->u.loop.body);
        break;
      }
      if (s->u.loop.at.masked_tail) break;
      int m = 0;
      p->guard = NULL;
      LirStmt *with = cow_stmt(p, s, NULL, &m);
      LirStmt *plain = copy_node(p, s);
      if (with == s || !m || !p->guard || !plain) break;
      LirStmt *w = lir_if(p->a, p->guard, with, plain);
      if (!w) break;
      w->next = s->next;
      *slot = w;
      n += m;
      break;
    }
    case LS_WHILE: n += walk(p, &s->u.whl.body); break;
    case LS_IF: n += walk(p, &s->u.cond.then) + walk(p, &s->u.cond.els); break;
    case LS_BLOCK: n += walk(p, &s->u.block); break;
    default: break;
    }
  }
  return n;
}

int lower_prefetch(Arena *a, LirKernel *k, int ahead) {
  if (k->nvars == 0 || ahead <= 0) return 0;
  Pf p = {.a = a, .k = k, .ahead = ahead, .nvars = k->nvars};
  return walk(&p, &k->body);
}

/* Register promotion of output updates across a reduction loop (a loop-IR
 * pass, run before vectorization).
 *
 * A loop L whose body adds into output elements that do not move while L
 * runs,
 *   for (p = pos[r]; p < pos[r + 1]; p++)       // a block row of BSR
 *     for (ii = 0; ii < 4; ii++)                // constant bounds
 *       t = 0; for (jj ...) t += A[..ii..] * B[..]; C[(ib*4 + ii)*N + k] += t
 * keeps them in accumulators instead:
 *   acc_0 = 0; ... acc_3 = 0
 *   for (p ...) { for (jj ...) { b = B[..]; acc_0 += A[..0..] * b; ... } }
 *   C[(ib*4 + 0)*N + k] += acc_0; ...
 * A loop of constant bounds (at most LOWER_JAM_MAX trips) between L and the
 * update whose induction variable is all that moves the update's index is
 * unrolled and jammed first (lower_jam_copies), so loads its copies share
 * are made once. An update qualifies when it is `+=` at L's top level
 * (through blocks), into an output's values pointer, at an index that
 * reads no variable L declares or assigns; L must read no output values,
 * store into them only by `+=`, and call no runtime helper (a reserve
 * moves the arrays). A temp `t = 0` added only into one such update
 * becomes the accumulator itself. The outer vector loop then holds the
 * accumulators in registers (lower/vectorize.c sizes its lanes by their
 * count): the register-blocked micro-kernel of BSR SpMM. Keeps the meaning
 * up to reassociation of the sums (C's element gets the sum of its
 * updates, added once). TJ_PROMOTE=0 turns it off.
 * Three variations, each with its own section below: with no loop around
 * L to vectorize (SpMV) the block's column loop moves around L (lanes
 * across the block row); under a vector loop 8 rows go as two groups of
 * 4, 4 rows as two of 2 (when the block row is short: chosen at run
 * time); and a scalar
 * summed through a short constant loop (n_out_of_m) gets one partial sum
 * per trip.
 */
#include <string.h>

#include "lower.h"

typedef struct Promote {
  Arena *a;
  LirKernel *k;
  char *outvals;   /* var id -> only ever an output's values pointer */
  int nvars;       /* its entries (the kernel's count on entry) */
  char *inside;    /* var id -> declared or assigned in the loop at hand */
  int ninside;     /* its entries (jamming adds variables) */
  bool whole;      /* in a choice's branches: no more row groups */
  int vector_bits; /* the target's vector registers (row groups of 4x4) */
} Promote;

static bool known(const Promote *p, const LirVar *v) { return v->id < p->nvars; }

/* ---- which variables hold an output's values pointer ---- */

static bool is_outvals_field(const Promote *p, const LirExpr *e) {
  while (e && e->kind == LE_CAST) e = e->u.cast;
  return e && e->kind == LE_FIELD && e->u.field.field == LF_VALS &&
         p->k->operands[e->u.field.operand].is_output;
}

/* bad marks pointer variables also given something else. */
static void find_outvals(Promote *p, const LirStmt *s, char *bad) {
  for (; s; s = s->next) {
    const LirVar *x = NULL;
    const LirExpr *e = NULL;
    switch (s->kind) {
    case LS_DECL: x = s->u.decl.var, e = s->u.decl.init; break;
    case LS_ASSIGN: x = s->u.assign.var, e = s->u.assign.e; break;
    case LS_CALL: x = s->u.call.h == LH_ALLOC ? s->u.call.ptr : NULL; break;
    case LS_FOR: find_outvals(p, s->u.loop.body, bad); break;
    case LS_WHILE: find_outvals(p, s->u.whl.body, bad); break;
    case LS_IF:
      find_outvals(p, s->u.cond.then, bad);
      find_outvals(p, s->u.cond.els, bad);
      break;
    case LS_BLOCK: find_outvals(p, s->u.block, bad); break;
    default: break;
    }
    if (!x || !known(p, x) || !lir_type_is_ptr(x->type)) continue;
    bool ok = s->kind == LS_ASSIGN ? s->u.assign.op < 0 && !s->u.assign.with : s->kind == LS_DECL;
    if (ok && is_outvals_field(p, e)) p->outvals[x->id] = 1;
    else bad[x->id] = 1;
  }
}

/* ---- what a loop touches ---- */

static void mark_list(Promote *p, const LirStmt *s) {
  for (; s; s = s->next) {
    const LirVar *x = s->kind == LS_DECL     ? s->u.decl.var
                      : s->kind == LS_ASSIGN ? s->u.assign.var
                      : s->kind == LS_FOR    ? s->u.loop.iv
                      : s->kind == LS_CALL && s->u.call.h == LH_ALLOC ? s->u.call.ptr
                                             : NULL;
    if (x && x->id < p->ninside) p->inside[x->id] = 1;
    switch (s->kind) {
    case LS_FOR: mark_list(p, s->u.loop.body); break;
    case LS_WHILE: mark_list(p, s->u.whl.body); break;
    case LS_IF:
      mark_list(p, s->u.cond.then);
      mark_list(p, s->u.cond.els);
      break;
    case LS_BLOCK: mark_list(p, s->u.block); break;
    default: break;
    }
  }
}

/* Marks what loop L declares or assigns (its iv among them). */
static bool mark_inside(Promote *p, const LirStmt *L) {
  if (p->ninside < p->k->nvars) {
    p->ninside = p->k->nvars;
    p->inside = arena_alloc(p->a, (size_t)p->ninside);
    if (!p->inside) return p->ninside = 0, false;
  }
  memset(p->inside, 0, (size_t)p->ninside);
  p->inside[L->u.loop.iv->id] = 1;
  mark_list(p, L->u.loop.body);
  return true;
}

/* A variable made after the marking (a jammed copy's) is inside. */
static LirVisit inside_var(const LirExpr *e, void *cx) {
  const Promote *p = cx;
  bool in = e->kind == LE_VAR && (e->u.var->id >= p->ninside || p->inside[e->u.var->id]);
  return in ? LV_STOP : LV_DESCEND;
}

static bool reads_inside(const Promote *p, const LirExpr *e) {
  return lir_expr_walk(e, inside_var, (void *)p);
}

static bool is_outvals(const Promote *p, const LirExpr *e) {
  return e->kind == LE_VAR && known(p, e->u.var) && p->outvals[e->u.var->id];
}

static LirVisit outvals_load(const LirExpr *e, void *cx) {
  return e->kind == LE_LOAD && is_outvals(cx, e->u.load.ptr) ? LV_STOP : LV_DESCEND;
}

/* Whether e loads through an output's values pointer. */
static bool loads_outvals(const Promote *p, const LirExpr *e) {
  return lir_expr_walk(e, outvals_load, (void *)p);
}

/* The body of a loop that may keep updates in registers: no runtime call,
 * no read of output values, output values only added to (in any order:
 * every element ends up with the sum of its updates), no atomics. */
static bool body_ok(const Promote *p, const LirStmt *s) {
  for (; s; s = s->next) {
    switch (s->kind) {
    case LS_CALL: return false;
    case LS_DECL:
      if (loads_outvals(p, s->u.decl.init)) return false;
      break;
    case LS_ASSIGN:
      if (loads_outvals(p, s->u.assign.e)) return false;
      break;
    case LS_STORE:
      if (loads_outvals(p, s->u.store.idx) || loads_outvals(p, s->u.store.e)) return false;
      if (is_outvals(p, s->u.store.ptr) && (s->u.store.op != LOP_ADD || s->u.store.atomic))
        return false;
      break;
    case LS_SETFIELD: return false;
    case LS_FOR:
      if (loads_outvals(p, s->u.loop.lo) || loads_outvals(p, s->u.loop.hi) ||
          !body_ok(p, s->u.loop.body))
        return false;
      break;
    case LS_WHILE:
      if (loads_outvals(p, s->u.whl.cond) || !body_ok(p, s->u.whl.body)) return false;
      break;
    case LS_IF:
      if (loads_outvals(p, s->u.cond.cond) || !body_ok(p, s->u.cond.then) ||
          !body_ok(p, s->u.cond.els))
        return false;
      break;
    case LS_BLOCK:
      if (!body_ok(p, s->u.block)) return false;
      break;
    default: break;
    }
  }
  return true;
}

/* An update `out[idx] += e` that stays put while the loop runs. */
static bool fixed_update(const Promote *p, const LirStmt *s) {
  return s->kind == LS_STORE && s->u.store.op == LOP_ADD && !s->u.store.atomic &&
         is_outvals(p, s->u.store.ptr) && !reads_inside(p, s->u.store.ptr) &&
         !reads_inside(p, s->u.store.idx);
}

static bool has_fixed_update(const Promote *p, const LirStmt *s) {
  for (; s; s = s->next)
    if (fixed_update(p, s) || (s->kind == LS_BLOCK && has_fixed_update(p, s->u.block)))
      return true;
  return false;
}

/* A loop of constant bounds whose updates stay put but for its own
 * induction variable: jammed, its copies' updates do. */
static bool jam_candidate(Promote *p, const LirStmt *q) {
  if (q->kind != LS_FOR || q->u.loop.lo->kind != LE_CONST || q->u.loop.hi->kind != LE_CONST)
    return false;
  int iv = q->u.loop.iv->id;
  p->inside[iv] = 0;
  bool yes = has_fixed_update(p, q->u.loop.body);
  p->inside[iv] = 1;
  return yes;
}

static bool has_jam_candidate(Promote *p, const LirStmt *s) {
  for (; s; s = s->next)
    if (jam_candidate(p, s) || (s->kind == LS_BLOCK && has_jam_candidate(p, s->u.block)))
      return true;
  return false;
}

/* Jams the candidates at the top level of the list at *slot (through
 * blocks); returns how many. */
static int jam_top(Promote *p, LirStmt **slot) {
  int n = 0;
  for (; *slot; slot = &(*slot)->next) {
    LirStmt *s = *slot;
    if (s->kind == LS_BLOCK) n += jam_top(p, &s->u.block);
    if (!jam_candidate(p, s)) continue;
    int trips = (int)(s->u.loop.hi->u.c.i - s->u.loop.lo->u.c.i);
    LirStmt *jam = trips > 1 && trips <= LOWER_JAM_MAX
                       ? lower_jam_copies(p->a, p->k, s, trips, NULL, NULL, 0) : NULL;
    if (!jam) continue;
    LirStmt *b = lir_block(p->a, jam);
    if (!b) return n;
    b->next = s->next;
    *slot = b;
    n++;
  }
  return n;
}

/* ---- the accumulators ---- */

#define PROMOTE_MAX 32

typedef struct Acc {
  const LirStmt *store;   /* the first update of this element */
  LirVar *var;
} Acc;

typedef struct Accs {
  Acc acc[PROMOTE_MAX];
  int n;
} Accs;

/* Reads of v in the list s, and whether every assignment to v is `v += e`. */
static int uses(const LirStmt *s, const LirVar *v, bool *only_add) {
  int n = 0;
  for (; s; s = s->next) {
    switch (s->kind) {
    case LS_DECL: n += lir_count_reads(s->u.decl.init, v); break;
    case LS_ASSIGN:
      n += lir_count_reads(s->u.assign.e, v);
      if (s->u.assign.var == v && (s->u.assign.op != LOP_ADD || s->u.assign.with))
        *only_add = false;
      break;
    case LS_STORE:
      n += lir_count_reads(s->u.store.ptr, v) + lir_count_reads(s->u.store.idx, v) +
           lir_count_reads(s->u.store.e, v);
      break;
    case LS_FOR:
      n += lir_count_reads(s->u.loop.lo, v) + lir_count_reads(s->u.loop.hi, v) +
           uses(s->u.loop.body, v, only_add);
      break;
    case LS_WHILE: n += lir_count_reads(s->u.whl.cond, v) + uses(s->u.whl.body, v, only_add); break;
    case LS_IF:
      n += lir_count_reads(s->u.cond.cond, v) + uses(s->u.cond.then, v, only_add) +
           uses(s->u.cond.els, v, only_add);
      break;
    case LS_BLOCK: n += uses(s->u.block, v, only_add); break;
    case LS_CALL: n += lir_count_reads(s->u.call.a, v) + lir_count_reads(s->u.call.b, v); break;
    default: break;
    }
  }
  return n;
}

/* Every `v += e` in s becomes `to += e`. */
static void rename_updates(LirStmt *s, const LirVar *v, LirVar *to) {
  for (; s; s = s->next) {
    if (s->kind == LS_ASSIGN && s->u.assign.var == v) s->u.assign.var = to;
    if (s->kind == LS_FOR) rename_updates(s->u.loop.body, v, to);
    if (s->kind == LS_WHILE) rename_updates(s->u.whl.body, v, to);
    if (s->kind == LS_IF) rename_updates(s->u.cond.then, v, to), rename_updates(s->u.cond.els, v, to);
    if (s->kind == LS_BLOCK) rename_updates(s->u.block, v, to);
  }
}

static LirExpr *zero(Arena *a, LirType t) {
  return lir_type_is_float(t) ? lir_const_fp(a, t, 0.0) : lir_const_int(a, t, 0);
}

/* The accumulator of update s (a new one for a new element). */
static LirVar *acc_of(Promote *p, Accs *A, const LirStmt *s) {
  for (int i = 0; i < A->n; i++) {
    const LirStmt *f = A->acc[i].store;
    if (lir_expr_equal(f->u.store.ptr, s->u.store.ptr) && lir_expr_equal(f->u.store.idx, s->u.store.idx))
      return A->acc[i].var;
  }
  if (A->n == PROMOTE_MAX) return NULL;
  LirVar *v = lir_var_numbered(p->a, p->k, "acc", s->u.store.e->type);
  if (v) A->acc[A->n++] = (Acc){s, v};
  return v;
}

/* Whether the DECL at d declares a temp `t = 0` that the rest of the list
 * (from d on, through `end`) only adds to and reads once, in update u. */
static bool fusable(const LirStmt *d, const LirStmt *u) {
  if (d->kind != LS_DECL || u->u.store.e->kind != LE_VAR || u->u.store.e->u.var != d->u.decl.var)
    return false;
  const LirExpr *init = d->u.decl.init;
  if (init && !(init->kind == LE_CONST && init->u.c.i == 0 && init->u.c.f == 0.0)) return false;
  bool only_add = true;
  return uses(d->next, d->u.decl.var, &only_add) == 1 && only_add;
}

/* Gives every fixed update at the top level of list s (through blocks) its
 * accumulator; false past PROMOTE_MAX of them. */
static bool collect(Promote *p, Accs *A, const LirStmt *s) {
  for (; s; s = s->next) {
    if (s->kind == LS_BLOCK && !collect(p, A, s->u.block)) return false;
    if (fixed_update(p, s) && !acc_of(p, A, s)) return false;
  }
  return true;
}

/* Replaces the fixed updates at the top level of the list at *slot
 * (through blocks) by their accumulators' updates; head is the list's
 * start, where a fused temp's DECL is looked for. */
static bool replace_updates(Promote *p, Accs *A, LirStmt **slot) {
  LirStmt **head = slot;
  for (; *slot;) {
    LirStmt *s = *slot;
    if (s->kind == LS_BLOCK && !replace_updates(p, A, &s->u.block)) return false;
    if (!fixed_update(p, s)) {
      slot = &s->next;
      continue;
    }
    LirVar *acc = acc_of(p, A, s);
    LirStmt **d = head;
    while (*d != s && !fusable(*d, s)) d = &(*d)->next;
    if (*d != s) {   /* t = 0; ... t += e ...; out[i] += t  ->  ... acc += e ... */
      const LirVar *t = (*d)->u.decl.var;
      *d = (*d)->next;
      rename_updates(*head, t, acc);
      LirStmt **at = head;   /* unlink the update */
      while (*at != s) at = &(*at)->next;
      *at = s->next;
      slot = at;
      continue;
    }
    LirStmt *u = lir_update(p->a, acc, LOP_ADD, s->u.store.e);
    if (!u) return false;
    u->next = s->next;
    *slot = u;
    slot = &u->next;
  }
  return true;
}

/* ---- lanes across the loop: SpMV ----
 *
 * With no loop around L left to vectorize (SpMV: y's rows are all the
 * output), the block's column loop J of constant bounds, the one loop of
 * L's body, is moved around L:
 *   acc_r = 0;  for (p ...) { decls; for (jj = 0; jj < 8; jj++) acc_r += e }
 * becomes
 *   acc_r = 0;  for (jj = 0; jj < 8; jj++) {
 *                 a_r = 0; for (p ...) { decls; a_r += e }; acc_r += a_r }
 * which the vectorizer takes as an outer loop: lanes over jj, a vector
 * a_r per row across the whole block row (one multiply-add per row and
 * block, the horizontal sum once per block row). Valid because L's body,
 * promoted, only adds into accumulators: its iterations commute. */

/* Finds in the list at *slot (through blocks) its one FOR, after DECLs
 * and comments only, with constant bounds and nothing after it: *found
 * (NULL: no FOR at all), *at its slot. False when the list is otherwise. */
static bool only_loop(LirStmt **slot, LirStmt **found, LirStmt ***at) {
  for (; *slot; slot = &(*slot)->next) {
    LirStmt *t = *slot;
    if (*found && t->kind != LS_COMMENT) return false;
    if (t->kind == LS_DECL || t->kind == LS_COMMENT) continue;
    if (t->kind == LS_BLOCK) {
      if (!only_loop(&t->u.block, found, at)) return false;
      continue;
    }
    if (t->kind != LS_FOR || t->u.loop.lo->kind != LE_CONST || t->u.loop.hi->kind != LE_CONST ||
        !lir_unit_step(t) || t->u.loop.at.vec_width || t->u.loop.at.parallel)
      return false;
    *found = t;
    *at = slot;
  }
  return true;
}

/* Calls fn on each assignment in list s to a variable declared outside
 * it (decl: by var id, marks those declared inside, ivs among them, as
 * the walk meets them) and on each store; false when s holds anything but
 * declarations, assignments, stores, loops, blocks and comments, or when
 * fn says no. */
static bool outer_assigns(const LirStmt *s, char *decl, bool (*fn)(const LirStmt *, void *),
                          void *cx) {
  for (; s; s = s->next) {
    switch (s->kind) {
    case LS_DECL: decl[s->u.decl.var->id] = 1; break;
    case LS_ASSIGN:
      if (!decl[s->u.assign.var->id] && !fn(s, cx)) return false;
      break;
    case LS_STORE:
      if (!fn(s, cx)) return false;
      break;
    case LS_FOR:
      decl[s->u.loop.iv->id] = 1;
      if (!outer_assigns(s->u.loop.body, decl, fn, cx)) return false;
      break;
    case LS_BLOCK:
      if (!outer_assigns(s->u.block, decl, fn, cx)) return false;
      break;
    case LS_COMMENT: break;
    default: return false;
    }
  }
  return true;
}

/* `+=` into one of the accumulators (Accs); no store. */
static bool acc_sum(const LirStmt *s, void *cx) {
  const Accs *A = cx;
  if (s->kind != LS_ASSIGN) return false;
  bool acc = false;
  for (int i = 0; i < A->n; i++) acc |= A->acc[i].var == s->u.assign.var;
  return acc && s->u.assign.op == LOP_ADD && !s->u.assign.with;
}

/* L, promoted into A's accumulators, with its column loop moved around
 * it; L itself when that does not apply. */
static LirStmt *lanes_across(Promote *p, LirStmt *L, const Accs *A) {
  Arena *a = p->a;
  LirStmt **jslot = NULL, *J = NULL;
  char *decl = arena_alloc(a, (size_t)p->k->nvars);
  if (!only_loop(&L->u.loop.body, &J, &jslot) || !J || !decl ||
      !outer_assigns(L->u.loop.body, decl, acc_sum, (void *)A))
    return L;
  LirStmt *inner = J->u.loop.body, *sums = NULL, *zeros = NULL;
  for (int i = 0; i < A->n; i++) {
    LirVar *acc = A->acc[i].var, *lane = lir_var_numbered(a, p->k, "lane", acc->type);
    if (!lane) return L;
    rename_updates(inner, acc, lane);
    lir_append(&zeros, lir_decl(a, lane, zero(a, lane->type)));
    lir_append(&sums, lir_update(a, acc, LOP_ADD, lir_ref(a, lane)));
  }
  *jslot = inner ? lir_block(a, inner) : NULL;   /* L's body keeps its decls */
  LirStmt *outer = lir_for(a, J->u.loop.iv, J->u.loop.lo, J->u.loop.hi, zeros);
  if (!outer || a->failed) return L;
  L->next = NULL;
  lir_append(&zeros, L);
  lir_append(&zeros, sums);
  outer->u.loop.body = zeros;
  return outer;
}

/* ---- row groups: BSR 8x8 and 4x4 ----
 *
 * Under a vector loop, a candidate of 8 trips (8x8's rows) would keep 8
 * accumulators: 16 lanes each, four passes of the vector loop over each
 * block row. L is copied once per group of 4 rows instead, each copy's
 * candidate bounded to its group, and each copy promoted on its own: 4
 * accumulators of 32 lanes live at a time (lower/vectorize.c counts the
 * most any one loop keeps), two passes over B's rows of a block, which
 * read 4 cache lines of each row in a row, not 2. A candidate of 4 trips
 * (4x4) goes as two groups of 2 rows: 2 accumulators of 64 lanes, one
 * pass over B's whole rows instead of two half rows (tjblocked,
 * blocks8-32768 4x4: 0.98x -> 1.21x CSR; blocks8-4096 within noise; a
 * Zen 2 host, AVX2) where the target's vectors are narrower than 512
 * bits. With AVX-512 a 4x4 block's rows stay whole (4 accumulators of 32
 * lanes, 16 of the 32 registers), whose loop over the blocks prefetches
 * B's rows (lower/prefetch.c): blocks8-32768 4x4 7.97 -> 6.99-7.35 ms,
 * blocks8-4096 0.548-0.571 -> 0.536-0.558 (a Xeon VM, two runs each);
 * in hand C on that host, without prefetch, whole was faster too (0.502
 * against 0.575 ms). */

#define PROMOTE_GROUP 4

/* The rows of a group for a candidate of `trips` rows. */
static int64_t group_of(const Promote *p, int64_t trips) {
  return trips != 4 ? PROMOTE_GROUP : p->vector_bits >= 512 ? 4 : 2;
}

static LirStmt *first_candidate(Promote *p, LirStmt *s) {
  for (; s; s = s->next) {
    if (jam_candidate(p, s)) return s;
    LirStmt *in = s->kind == LS_BLOCK ? first_candidate(p, s->u.block) : NULL;
    if (in) return in;
  }
  return NULL;
}

static LirStmt *loop_of(LirStmt *s, const LirVar *iv) {
  for (; s; s = s->next) {
    if (s->kind == LS_FOR && s->u.loop.iv == iv) return s;
    LirStmt *in = s->kind == LS_BLOCK ? loop_of(s->u.block, iv) : NULL;
    if (in) return in;
  }
  return NULL;
}

/* Whether list s holds nothing but q and declarations, comments and
 * blocks of them (which each copy computes again to no effect). */
static bool only_decls_but(const LirStmt *s, const LirStmt *q) {
  for (; s; s = s->next)
    if (s != q && s->kind != LS_DECL && s->kind != LS_COMMENT &&
        !(s->kind == LS_BLOCK && only_decls_but(s->u.block, q)))
      return false;
  return true;
}

/* A store `+=` into output values (no atomics); no assignment to a
 * variable declared outside the candidate. */
static bool group_sum(const LirStmt *s, void *cx) {
  return s->kind == LS_STORE && s->u.store.op == LOP_ADD && !s->u.store.atomic &&
         is_outvals(cx, s->u.store.ptr);
}

/* The copies run L's iterations once per group, each over the group's rows
 * of the candidate q only: legal when nothing else in L's body has an
 * effect (else it would happen once per copy), and q's rows only add into
 * output values (so running them group after group, not row after row
 * within each iteration of L, gives each element the same sum) and keep
 * their variables to themselves. */
static bool groupable(Promote *p, const LirStmt *L, const LirStmt *q) {
  char *decl = arena_alloc(p->a, (size_t)p->k->nvars);
  return decl && only_decls_but(L->u.loop.body, q) &&
         outer_assigns(q->u.loop.body, decl, group_sum, p);
}

static bool split_groups(Promote *p, LirStmt **slot) {
  LirStmt *L = *slot;
  if (L->u.loop.at.vec_width || L->u.loop.at.parallel) return false;
  if (!mark_inside(p, L) || !body_ok(p, L->u.loop.body)) return false;
  LirStmt *q = first_candidate(p, L->u.loop.body);
  if (!q || !groupable(p, L, q)) return false;
  int64_t lo = q->u.loop.lo->u.c.i, trips = q->u.loop.hi->u.c.i - lo;
  int64_t G = group_of(p, trips);
  if (trips <= G || trips > LOWER_JAM_MAX || trips % G) return false;
  LirStmt *copies = NULL;
  for (int64_t g = 0; g < trips / G; g++) {
    LirStmt *c = lower_clone_stmt(p->a, p->k, L), *cq = c ? loop_of(c->u.loop.body, q->u.loop.iv) : NULL;
    if (!cq) return false;
    cq->u.loop.lo = lir_const_int(p->a, q->u.loop.iv->type, lo + g * G);
    cq->u.loop.hi = lir_const_int(p->a, q->u.loop.iv->type, lo + (g + 1) * G);
    lir_append(&copies, c);
  }
  if (p->a->failed) return false;
  lir_append(&copies, L->next);
  *slot = copies;
  return true;
}

/* ---- row groups chosen at run time ----
 *
 * Groups pay off while a block row's rows of B stay in L1 between the
 * groups' passes (the blocks8 matrices: 6 blocks of 8 per block row); a
 * FEM matrix's block rows hold about 25 blocks of 8, whose 200 rows of B
 * the second group rereads from L2 (tjblocked, bcsstk33 8x8: 0.47x CSR
 * grouped, 0.60x whole; 4x4's 2-row groups lost 2-3x there). A loop K
 * around L whose body reads L's bounds from DECLs that K does not move is
 * copied, and the block row's length picks one:
 *   if ((hi - lo) * trips <= PROMOTE_GROUP_ROWS) K with L in groups
 *   else K with L whole
 * where trips is the grouped loop's (a block's rows: about as many rows
 * of B per block). */

#define PROMOTE_GROUP_ROWS 64   /* rows of B: 16-32 kB a pass (L1: 48 kB) */

/* The slot of the FOR over iv in the list at *slot (through blocks). */
static LirStmt **slot_of(LirStmt **slot, const LirVar *iv) {
  for (; *slot; slot = &(*slot)->next) {
    if ((*slot)->kind == LS_FOR && (*slot)->u.loop.iv == iv) return slot;
    LirStmt **in = (*slot)->kind == LS_BLOCK ? slot_of(&(*slot)->u.block, iv) : NULL;
    if (in) return in;
  }
  return NULL;
}

/* The init of the DECL of v in list s (through blocks), or NULL. */
static const LirExpr *init_of(const LirStmt *s, const LirVar *v) {
  for (; s; s = s->next) {
    if (s->kind == LS_DECL && s->u.decl.var == v) return s->u.decl.init;
    const LirExpr *in = s->kind == LS_BLOCK ? init_of(s->u.block, v) : NULL;
    if (in) return in;
  }
  return NULL;
}

/* The first FOR at the top level of list s (through blocks) that
 * split_groups would take, its grouped loop's trips in *trips. */
static LirStmt *group_loop(Promote *p, LirStmt *s, int64_t *trips) {
  for (; s; s = s->next) {
    LirStmt *in = s->kind == LS_BLOCK ? group_loop(p, s->u.block, trips) : NULL;
    if (in) return in;
    if (s->kind != LS_FOR || s->u.loop.at.vec_width || s->u.loop.at.parallel) continue;
    if (!mark_inside(p, s) || !body_ok(p, s->u.loop.body)) continue;
    LirStmt *q = first_candidate(p, s->u.loop.body);
    if (!q || !groupable(p, s, q)) continue;
    *trips = q->u.loop.hi->u.c.i - q->u.loop.lo->u.c.i;
    int64_t G = group_of(p, *trips);
    if (*trips > G && *trips <= LOWER_JAM_MAX && *trips % G == 0) return s;
  }
  return NULL;
}

/* The rewrite on the free loop K at *slot; true when it made it (*slot
 * is then the IF, its else branch the K to keep whole). */
static bool groups_by_length(Promote *p, LirStmt **slot) {
  LirStmt *K = *slot;
  int64_t trips = 0;
  LirStmt *L = group_loop(p, K->u.loop.body, &trips);
  if (!L || L->u.loop.lo->kind != LE_VAR || L->u.loop.hi->kind != LE_VAR) return false;
  const LirExpr *lo = init_of(K->u.loop.body, L->u.loop.lo->u.var);
  const LirExpr *hi = init_of(K->u.loop.body, L->u.loop.hi->u.var);
  if (!lo || !hi || lo->type != hi->type || !mark_inside(p, K) || reads_inside(p, lo) ||
      reads_inside(p, hi))
    return false;
  LirStmt *Kg = lower_clone_stmt(p->a, p->k, K);
  LirStmt **Lg = Kg ? slot_of(&Kg->u.loop.body, L->u.loop.iv) : NULL;
  if (!Lg || !split_groups(p, Lg)) return false;
  Arena *a = p->a;
  LirExpr *len = lir_bin(a, LOP_SUB, lir_clone_renamed(a, NULL, 0, hi), lir_clone_renamed(a, NULL, 0, lo));
  LirExpr *cond = lir_bin(a, LOP_LE, lir_bin(a, LOP_MUL, len, lir_const_int(a, lo->type, trips)),
                          lir_const_int(a, lo->type, PROMOTE_GROUP_ROWS));
  LirStmt *choice = lir_if(a, cond, Kg, K);
  if (!choice || a->failed) return false;
  choice->next = K->next;
  Kg->next = K->next = NULL;
  *slot = choice;
  return true;
}

/* Tries the rewrite on the loop at *slot; true when it made it. around_free:
 * a loop around it that is neither parallel nor vectorized (SpMM's k). */
static bool promote_loop(Promote *p, LirStmt **slot, bool around_free) {
  LirStmt *L = *slot;
  if (L->u.loop.at.vec_width || L->u.loop.at.parallel) return false;
  if (!mark_inside(p, L) || !body_ok(p, L->u.loop.body)) return false;
  if (!has_fixed_update(p, L->u.loop.body) && !has_jam_candidate(p, L->u.loop.body)) return false;
  if (jam_top(p, &L->u.loop.body) && !mark_inside(p, L)) return false;
  Accs A = {.n = 0};
  if (!collect(p, &A, L->u.loop.body) || A.n == 0) return false;
  if (!replace_updates(p, &A, &L->u.loop.body)) return false;
  Arena *a = p->a;
  LirStmt *before = NULL, *after = NULL;
  for (int i = 0; i < A.n; i++) {
    const LirStmt *u = A.acc[i].store;
    LirVar *v = A.acc[i].var;
    lir_append(&before, lir_decl(a, v, zero(a, v->type)));
    lir_append(&after, lir_store_update(a, u->u.store.ptr, u->u.store.idx, LOP_ADD, lir_ref(a, v)));
  }
  if (a->failed) return false;
  LirStmt *rest = L->next, *mid = around_free ? L : lanes_across(p, L, &A);
  lir_append(&after, rest);
  mid->next = after;
  lir_append(&before, mid);
  *slot = before;
  return true;
}

/* ---- split sums: n_out_of_m ----
 *
 * A loop L whose body adds into a scalar t declared outside it through a
 * short loop Q of constant trip count c (2:4's two stored entries per
 * block: for (q = p; q < p + 2; q++) t += A[q] * B[..crd[q]..]) chains its
 * c additions per iteration of L on t. Q is jammed with copy r adding into
 * its own t_r (declared before L, zero), and t gets t_0 + .. + t_{c-1}
 * after L: c independent chains (on SpMM's vector loop, c accumulators of
 * its lanes). */

#define SPLIT_MAX 4   /* partial sums, all told (registers: 4 x 4 on AVX-512) */

/* Q's trip count when constant: constant bounds, or a hi declared in
 * list head (before Q) as lo + c; 0 otherwise. */
static int64_t trips_of(const LirStmt *head, const LirStmt *q) {
  const LirExpr *lo = q->u.loop.lo, *hi = q->u.loop.hi;
  if (lo->kind == LE_CONST && hi->kind == LE_CONST) return hi->u.c.i - lo->u.c.i;
  if (lo->kind != LE_VAR || hi->kind != LE_VAR) return 0;
  for (const LirStmt *s = head; s && s != q; s = s->next) {
    if (s->kind != LS_DECL || s->u.decl.var != hi->u.var) continue;
    const LirExpr *e = s->u.decl.init;
    if (e && e->kind == LE_BIN && e->u.bin.op == LOP_ADD && e->u.bin.a->kind == LE_VAR &&
        e->u.bin.a->u.var == lo->u.var && e->u.bin.b->kind == LE_CONST)
      return e->u.bin.b->u.c.i;
  }
  return 0;
}

typedef struct Sums {
  LirVar *var[SPLIT_MAX];
  int n;
} Sums;

/* `+=` into a scalar, noted in S (Sums); no store, and no more than
 * SPLIT_MAX scalars. */
static bool scalar_sum(const LirStmt *s, void *cx) {
  Sums *S = cx;
  if (s->kind != LS_ASSIGN) return false;
  LirVar *x = s->u.assign.var;
  if (s->u.assign.op != LOP_ADD || s->u.assign.with || lir_type_is_ptr(x->type)) return false;
  int i = 0;
  while (i < S->n && S->var[i] != x) i++;
  if (i == S->n && S->n == SPLIT_MAX) return false;
  if (i == S->n) S->var[S->n++] = x;
  return true;
}

static bool declared_in(const LirStmt *s, const LirVar *v) {
  for (; s; s = s->next)
    if ((s->kind == LS_DECL && s->u.decl.var == v) ||
        (s->kind == LS_FOR && (s->u.loop.iv == v || declared_in(s->u.loop.body, v))) ||
        (s->kind == LS_WHILE && declared_in(s->u.whl.body, v)) ||
        (s->kind == LS_IF && (declared_in(s->u.cond.then, v) || declared_in(s->u.cond.els, v))) ||
        (s->kind == LS_BLOCK && declared_in(s->u.block, v)))
      return true;
  return false;
}

/* Splits the sums of the first short loop at the top level of the list at
 * *slot (through blocks; head: the list's start) in loop L; the new
 * partial sums' DECLs go to *before and the final additions to *after. */
static bool split_in(Promote *p, const LirStmt *L, LirStmt **slot, LirStmt **before,
                     LirStmt **after) {
  LirStmt *head = *slot;
  for (; *slot; slot = &(*slot)->next) {
    LirStmt *q = *slot;
    if (q->kind == LS_BLOCK) {
      if (split_in(p, L, &q->u.block, before, after)) return true;
      continue;
    }
    if (q->kind != LS_FOR || q->u.loop.at.vec_width || q->u.loop.at.parallel) continue;
    int64_t c = trips_of(head, q);
    char *decl = arena_alloc(p->a, (size_t)p->k->nvars);
    Sums S = {.n = 0};
    if (c < 2 || !decl || !outer_assigns(q->u.loop.body, decl, scalar_sum, &S) || S.n == 0 || S.n * c > SPLIT_MAX)
      continue;
    bool only_add = true;
    for (int i = 0; i < S.n; i++)   /* t is declared outside L and read nowhere in it */
      if (declared_in(L->u.loop.body, S.var[i]) || uses(L->u.loop.body, S.var[i], &only_add))
        return false;
    if (!only_add) return false;
    LirVar *parts[SPLIT_MAX * SPLIT_MAX];
    for (int r = 0; r < c; r++)
      for (int i = 0; i < S.n; i++) {
        LirVar *t = S.var[i], *v = lir_var_numbered(p->a, p->k, t->name, t->type);
        if (!v) return false;
        parts[r * S.n + i] = v;
        lir_append(before, lir_decl(p->a, v, zero(p->a, t->type)));
      }
    LirStmt *jam = lower_jam_copies(p->a, p->k, q, (int)c, S.var, parts, S.n);
    if (!jam) return false;
    for (int i = 0; i < S.n; i++) {
      LirExpr *sum = lir_ref(p->a, parts[i]);
      for (int r = 1; r < c; r++) sum = lir_bin(p->a, LOP_ADD, sum, lir_ref(p->a, parts[r * S.n + i]));
      lir_append(after, lir_update(p->a, S.var[i], LOP_ADD, sum));
    }
    LirStmt *b = lir_block(p->a, jam);
    if (!b || p->a->failed) return false;
    b->next = q->next;
    *slot = b;
    return true;
  }
  return false;
}

/* The rewrite on the loop at *slot; true when it made it. */
static bool split_sums(Promote *p, LirStmt **slot) {
  LirStmt *L = *slot, *before = NULL, *after = NULL;
  if (L->u.loop.at.vec_width || L->u.loop.at.parallel || !mark_inside(p, L)) return false;
  if (!split_in(p, L, &L->u.loop.body, &before, &after)) return false;
  lir_append(&after, L->next);
  L->next = after;
  lir_append(&before, L);
  *slot = before;
  return true;
}

/* Loops outermost first; a loop that was rewritten is not entered (its
 * updates are now the accumulators'). */
static int walk(Promote *p, LirStmt **slot, bool around_free) {
  int n = 0;
  for (; *slot; slot = &(*slot)->next) {
    LirStmt *s = *slot;
    switch (s->kind) {
    case LS_FOR:
      if (!p->whole && !s->u.loop.at.parallel && !s->u.loop.at.vec_width &&
          groups_by_length(p, slot)) {
        LirStmt *choice = *slot;   /* its groups are made: neither branch regroups */
        p->whole = true;
        n += walk(p, &choice->u.cond.then, around_free) + walk(p, &choice->u.cond.els, around_free);
        p->whole = false;
        break;
      }
      if (around_free && !p->whole && split_groups(p, slot)) s = *slot;   /* the first group's copy */
      if (promote_loop(p, slot, around_free) || split_sums(p, slot)) {
        n++;
        while ((*slot)->kind == LS_DECL) slot = &(*slot)->next;   /* on past the loop */
      } else {
        bool free_loop = !s->u.loop.at.parallel && !s->u.loop.at.vec_width;
        n += walk(p, &s->u.loop.body, around_free || free_loop);
      }
      break;
    case LS_WHILE: n += walk(p, &s->u.whl.body, true); break;
    case LS_IF: n += walk(p, &s->u.cond.then, around_free) + walk(p, &s->u.cond.els, around_free); break;
    case LS_BLOCK: n += walk(p, &s->u.block, around_free); break;
    default: break;
    }
  }
  return n;
}

int lower_promote(Arena *a, LirKernel *k, int vector_bits) {
  if (k->nvars == 0) return 0;
  Promote p = {.a = a, .k = k, .nvars = k->nvars, .vector_bits = vector_bits};
  p.outvals = arena_alloc(a, (size_t)p.nvars);
  char *bad = arena_alloc(a, (size_t)p.nvars);
  if (!p.outvals || !bad) return 0;
  find_outvals(&p, k->body, bad);
  for (int i = 0; i < p.nvars; i++) p.outvals[i] &= !bad[i];
  return walk(&p, &k->body, false);
}

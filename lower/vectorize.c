/* Explicit vectorization of dense inner loops (a loop-IR pass).
 *
 * Requires: a lowered kernel. A `for` qualifies when it is innermost, its
 * body is straight-line (DECL / ASSIGN / STORE), every store writes at a
 * unit-stride index (uniform + iv), and every variable declared outside the
 * loop that the body assigns is a reduction (v += e, *=, min, max, or a
 * fold by a user-defined operator, lir_fold) read nowhere else in the body,
 * and no array it stores into is read or written at another index
 * (no_carried_memory). Loads may be uniform (broadcast), unit-stride
 * (vector loads) or, when the plan allows gathers, anything else.
 * The loop becomes
 *   vend = lo + (hi - lo) / W * W;
 *   for (iv = lo; iv < vend; iv += W) body   // vec_width W: one SIMD step
 *   for (iv = vend; iv < hi; iv++) body      // scalar remainder
 * and the JIT widens the first loop into <W x T> operations with vector
 * accumulators for the reductions. A loop that gathers marks its vector
 * loop masked_tail (LowerOptions.masked_tail): the JIT runs the remainder
 * as one masked W-lane step into the same accumulators, so a row of 16 +
 * 7 entries makes 3 vector steps and one horizontal reduction (the C
 * backend and the interpreter run the scalar remainder). Invalidates nothing: the IR means the
 * same scalar program. Parallel loops are left alone (their chunks are not
 * multiples of W), and so are loops marked scalar (LoopAttrs.scalar).
 */
#include <string.h>

#include "../ir/lir_class.h"
#include "lower.h"

typedef struct Vec {
  Arena *a;
  LirKernel *k;
  const LirVar *iv;
  char *inner;          /* var id -> declared in the body */
  char *cls;            /* var id -> LirClass of an inner var */
  int *reads;           /* var id -> reads in the body */
  int cap;              /* entries allocated in inner / cls / reads */
  bool gathers, unit_load, unit_store, reduction;
  bool masked_tail;     /* LowerOptions.masked_tail */
} Vec;

/* Body variables have the class of what they were assigned; outer ones are
 * uniform (the reductions among them are never read: reductions_unread). */
static LirClass var_class(void *cx, const LirVar *x) {
  Vec *v = cx;
  return v->inner[x->id] ? (LirClass)v->cls[x->id] : LIR_UNIFORM;
}

static void count_read(void *cx, const LirVar *x) { ((Vec *)cx)->reads[x->id]++; }

static void note_load(void *cx, LirClass ptr, LirClass idx) {
  Vec *v = cx;
  if (ptr != LIR_UNIFORM) return;
  if (idx == LIR_UNIT) v->unit_load = true;
  if (idx == LIR_VARYING) v->gathers = true;
}

/* The class of e in v's loop; counts variable reads and records loads. */
static LirClass expr_class(Vec *v, const LirExpr *e) {
  LirClassEnv env = {var_class, count_read, note_load, v};
  return lir_classify(e, v->iv, &env);
}

/* Checks the body statement by statement; false when not vectorizable. */
static bool legal_list(Vec *v, const LirStmt *s) {
  for (; s; s = s->next) {
    switch (s->kind) {
    case LS_COMMENT: break;
    case LS_BLOCK:
      if (!legal_list(v, s->u.block)) return false;
      break;
    case LS_DECL:
      v->inner[s->u.decl.var->id] = 1;
      /* joined: a second pass sees what nested loops assign later */
      v->cls[s->u.decl.var->id] =
          lir_class_join((LirClass)v->cls[s->u.decl.var->id],
                         s->u.decl.init ? expr_class(v, s->u.decl.init) : LIR_UNIFORM);
      break;
    case LS_ASSIGN: {
      const LirVar *x = s->u.assign.var;
      if (s->u.assign.with && !v->inner[x->id]) { /* a fold: reads x and with only */
        if (lir_type_is_ptr(x->type) || x->type == LT_BOOL || !v->inner[s->u.assign.with->id])
          return false;
        v->reduction = true;
        break;
      }
      LirClass c = expr_class(v, s->u.assign.e);
      if (v->inner[x->id]) {
        v->cls[x->id] = lir_class_join((LirClass)v->cls[x->id], lir_class_join(c, LIR_VARYING));
        break;
      }
      if (x == v->iv || !lir_bin_reduces(s->u.assign.op) || lir_type_is_ptr(x->type) ||
          x->type == LT_BOOL)
        return false;
      v->reduction = true;
      break;
    }
    case LS_FOR: { /* outer-loop vectorization: a nested loop, same for all lanes */
      const LirExpr *st = s->u.loop.step;
      if (s->u.loop.at.parallel || s->u.loop.at.vec_width || !st || st->kind != LE_CONST ||
          expr_class(v, s->u.loop.lo) != LIR_UNIFORM || expr_class(v, s->u.loop.hi) != LIR_UNIFORM)
        return false;
      if (!legal_list(v, s->u.loop.body)) return false;
      break;
    }
    case LS_STORE:
      if (s->u.store.atomic) return false;  /* one element at a time */
      if (expr_class(v, s->u.store.ptr) != LIR_UNIFORM) return false;
      if (expr_class(v, s->u.store.idx) != LIR_UNIT) return false;
      expr_class(v, s->u.store.e);
      v->unit_store = true;
      break;
    default: return false;
    }
  }
  return true;
}

/* Reduction variables may not be read elsewhere in the body. */
static bool reductions_unread(Vec *v, const LirStmt *s) {
  for (; s; s = s->next) {
    if (s->kind == LS_BLOCK && !reductions_unread(v, s->u.block)) return false;
    if (s->kind == LS_FOR && !reductions_unread(v, s->u.loop.body)) return false;
    if (s->kind == LS_ASSIGN && !v->inner[s->u.assign.var->id] &&
        v->reads[s->u.assign.var->id] > 0)
      return false;
  }
  return true;
}

/* Sizes the per-variable tables for the kernel's current variable count
 * (split() adds variables as the pass goes). */
static bool ensure_tables(Vec *v) {
  if (v->k->nvars <= v->cap) return true;
  int cap = v->k->nvars * 2 + 16;
  v->inner = arena_alloc(v->a, (size_t)cap);
  v->cls = arena_alloc(v->a, (size_t)cap);
  v->reads = arena_alloc(v->a, (size_t)cap * sizeof(int));
  v->cap = v->inner && v->cls && v->reads ? cap : 0;
  return v->cap > 0;
}

/* ---- memory carried across iterations ----
 * Lanes run W iterations at once, so a store must not reach a later
 * iteration's load or store. An access to an array the loop stores into
 * at the store's index plus another constant is such a reach (pos[q + 1] =
 * max(pos[q + 1], pos[q])); at the same index it is not (y[p] = y[p] + e).
 * Indices with other bases (a row r * n + k beside row r' * n + k of a
 * block) are taken as apart by at least the trip count, which a vector
 * step needs to be W or more; arrays are told apart by their pointer
 * expression, and distinct operands do not alias. */
enum { MAX_STORES = 32 };
typedef struct Stores {
  const LirExpr *ptr[MAX_STORES], *idx[MAX_STORES];
  int n;
  bool overflow, carried;
} Stores;

static void collect_stores(const LirStmt *s, Stores *st) {
  for (; s; s = s->next) {
    if (s->kind == LS_BLOCK) collect_stores(s->u.block, st);
    if (s->kind == LS_FOR) collect_stores(s->u.loop.body, st);
    if (s->kind != LS_STORE) continue;
    if (st->n == MAX_STORES) {
      st->overflow = true;
      return;
    }
    st->ptr[st->n] = s->u.store.ptr, st->idx[st->n++] = s->u.store.idx;
  }
}

/* e as base + offset, the offset a constant added or subtracted last. */
static const LirExpr *split_offset(const LirExpr *e, int64_t *off) {
  *off = 0;
  if (e->kind == LE_BIN && (e->u.bin.op == LOP_ADD || e->u.bin.op == LOP_SUB) &&
      e->u.bin.b->kind == LE_CONST) {
    *off = e->u.bin.op == LOP_ADD ? e->u.bin.b->u.c.i : -e->u.bin.b->u.c.i;
    return e->u.bin.a;
  }
  if (e->kind == LE_BIN && e->u.bin.op == LOP_ADD && e->u.bin.a->kind == LE_CONST) {
    *off = e->u.bin.a->u.c.i;
    return e->u.bin.b;
  }
  return e;
}

/* Marks st->carried when ptr[idx] touches a stored array at the store's
 * index plus another constant. */
static void check_access(Stores *st, const LirExpr *ptr, const LirExpr *idx) {
  int64_t oa, ob;
  const LirExpr *b = split_offset(idx, &ob);
  for (int i = 0; i < st->n; i++)
    if (lir_expr_equal(st->ptr[i], ptr) && lir_expr_equal(split_offset(st->idx[i], &oa), b) &&
        oa != ob)
      st->carried = true;
}

static LirVisit check_load(const LirExpr *e, void *st) {
  if (e->kind == LE_LOAD) check_access(st, e->u.load.ptr, e->u.load.idx);
  return LV_DESCEND;
}

static void check_loads(Stores *st, const LirExpr *e) { lir_expr_walk(e, check_load, st); }

static void check_stmts(Stores *st, const LirStmt *s) {
  for (; s; s = s->next) switch (s->kind) {
    case LS_BLOCK: check_stmts(st, s->u.block); break;
    case LS_FOR:
      check_loads(st, s->u.loop.lo);
      check_loads(st, s->u.loop.hi);
      check_stmts(st, s->u.loop.body);
      break;
    case LS_DECL: check_loads(st, s->u.decl.init); break;
    case LS_ASSIGN: check_loads(st, s->u.assign.e); break;
    case LS_STORE:
      check_access(st, s->u.store.ptr, s->u.store.idx);
      check_loads(st, s->u.store.ptr);
      check_loads(st, s->u.store.idx);
      check_loads(st, s->u.store.e);
      break;
    default: break;
    }
}

/* No array the body stores into is read or written at another index. */
static bool no_carried_memory(const LirStmt *body) {
  Stores st = {.n = 0};
  collect_stores(body, &st);
  if (st.overflow) return false;
  if (st.n == 0) return true;
  check_stmts(&st, body);
  return !st.carried;
}

static bool has_loop(const LirStmt *s);

static bool vectorizable(Vec *v, const LirStmt *loop, bool allow_gather) {
  if (!ensure_tables(v)) return false;
  size_t n = (size_t)v->k->nvars;
  memset(v->inner, 0, n);
  memset(v->cls, 0, n);
  memset(v->reads, 0, n * sizeof *v->reads);
  v->gathers = v->unit_load = v->unit_store = v->reduction = false;
  v->iv = loop->u.loop.iv;
  if (!lir_unit_step(loop)) return false;
  const LirStmt *body = loop->u.loop.body;
  if (!legal_list(v, body) || (has_loop(body) && !legal_list(v, body)) ||
      !reductions_unread(v, body) || !no_carried_memory(body))
    return false;
  if (v->gathers && !allow_gather) return false;
  return v->unit_store || (v->reduction && v->unit_load);
}

static bool has_loop(const LirStmt *s) {
  for (; s; s = s->next) {
    switch (s->kind) {
    case LS_FOR:
    case LS_WHILE: return true;
    case LS_IF:
      if (has_loop(s->u.cond.then) || has_loop(s->u.cond.els)) return true;
      break;
    case LS_BLOCK:
      if (has_loop(s->u.block)) return true;
      break;
    default: break;
    }
  }
  return false;
}

/* Replaces *slot (a FOR) by: vend decl, vector loop, scalar remainder;
 * returns the slot of the last statement it put there.
 * A loop that gathers only takes the vector path for at least 2W trips:
 * measured on this machine (Zen 5), gathers win on long sparse rows
 * (bcsstk33, 68 per row: 1.5x) but lose on short ones (cage11, 14 per
 * row: 0.8x) when most of the row would run in the remainder anyway.
 * Shorter rows run a plain loop of their own in the else branch, not the
 * remainder: its start is the guard's phi of vend, which cost PageRank's
 * pull on luxembourg_osm (2 entries a row) 0.22 against 0.185 ms. */
static LirStmt **split(Vec *v, LirStmt **slot, int w, bool gathers, bool tiered) {
  Arena *a = v->a;
  LirStmt *loop = *slot, *rest = loop->next;
  const LirVar *iv = loop->u.loop.iv;
  const char *name = tiered ? arena_printf(a, "%s_vend%d", iv->name, w)
                            : arena_printf(a, "%s_vend", iv->name);
  LirVar *vend = lir_var(a, v->k, name, iv->type);
  LirExpr *lo = loop->u.loop.lo, *hi = loop->u.loop.hi;
  LirExpr *len = lir_bin(a, LOP_SUB, hi, lo);
  LirExpr *blocks = lir_bin(a, LOP_DIV, len, lir_const_int(a, iv->type, w));
  LirExpr *end = lir_bin(a, LOP_ADD, lo, lir_bin(a, LOP_MUL, blocks, lir_const_int(a, iv->type, w)));
  LirStmt *tail = lir_for(a, loop->u.loop.iv, lir_ref(a, vend), hi, loop->u.loop.body);
  tail->u.loop.at.remainder = true;
  LirStmt *plain = gathers ? lir_for(a, loop->u.loop.iv, lo, hi, loop->u.loop.body) : NULL;
  /* The plain loop is not vectorized, and LLVM unrolls it by 8 after a
   * prologue of len % 8 trips: TTV on openflight_sym 0.203 -> 0.173 ms,
   * SpMV cage11 1.02-1.10x, bcsstk33, luxembourg_osm, wiki-Vote 1.00-1.03x,
   * u200k (16 a row: never here) 1.00x (A/B in one process, load 17-21). */
  if (plain) {
    plain->u.loop.at.remainder = true;
    plain->u.loop.at.unroll = 8;
  }
  loop->u.loop.hi = lir_ref(a, vend);
  loop->u.loop.step = lir_const_int(a, iv->type, w);
  loop->u.loop.at.vec_width = w;
  LirStmt *decl = lir_decl(a, vend, end);
  decl->next = loop;
  loop->next = tail;
  if (gathers) { /* one branch a row: if (hi - lo >= 2W) { vector loop; remainder } else plain */
    loop->u.loop.at.masked_tail = v->masked_tail;
    *slot = lir_if(a, lir_bin(a, LOP_GE, len, lir_const_int(a, iv->type, 2 * w)),
                   lir_block(a, decl), plain);
    (*slot)->next = rest;
    return slot;
  }
  tail->next = rest;
  *slot = decl;
  return &loop->next;
}

/* An outer loop: vector loops of tiers[0] lanes (several registers: the
 * nested loop keeps that many accumulators live), then of each narrower
 * tier for what is left, then the scalar remainder. Returns the
 * remainder's slot. */
static LirStmt **split_outer(Vec *v, LirStmt **slot, const int *tiers, int n) {
  LirStmt **tail = split(v, slot, tiers[0], false, n > 1);
  for (int t = 1; t < n; t++) {
    LirStmt **rem = tail;   /* the remainder loop, split in its turn: */
    tail = split(v, rem, tiers[t], false, true);
    (*rem)->next->u.loop.at.remainder = false;   /* its vend decl, then it */
  }
  return tail;
}

/* Variables declared from a load (through casts): pos[p], pos[p + 1]. */
typedef struct Loaded {
  const LirVar *var[64];
  int n;
} Loaded;

static bool is_loaded(const Loaded *L, const LirExpr *e) {
  for (int i = 0; e->kind == LE_VAR && i < L->n; i++)
    if (L->var[i] == e->u.var) return true;
  return false;
}

/* How deep loops whose bounds were read from memory (sparse fibers) nest
 * in s: 1 for SpMM's row under its vector loop, 2 for MTTKRP's slice. */
static int sparse_depth(const LirStmt *s, Loaded *L) {
  int d = 0;
  for (; s; s = s->next) {
    int here = 0;
    switch (s->kind) {
    case LS_DECL: {
      const LirExpr *e = s->u.decl.init;
      while (e && e->kind == LE_CAST) e = e->u.cast;
      if (e && e->kind == LE_LOAD && L->n < 64) L->var[L->n++] = s->u.decl.var;
      break;
    }
    case LS_FOR:
      here = sparse_depth(s->u.loop.body, L) +
             (is_loaded(L, s->u.loop.lo) || is_loaded(L, s->u.loop.hi));
      break;
    case LS_IF: {
      int t = sparse_depth(s->u.cond.then, L), e = sparse_depth(s->u.cond.els, L);
      here = t > e ? t : e;
      break;
    }
    case LS_BLOCK: here = sparse_depth(s->u.block, L); break;
    default: break;
    }
    if (here > d) d = here;
  }
  return d;
}

/* Whether the list s updates v in a nested loop (depth > 0). */
static bool updated_in_loop(const LirStmt *s, const LirVar *v, int depth) {
  for (; s; s = s->next) {
    if (s->kind == LS_ASSIGN && depth > 0 && s->u.assign.var == v) return true;
    if ((s->kind == LS_FOR && updated_in_loop(s->u.loop.body, v, depth + 1)) ||
        (s->kind == LS_WHILE && updated_in_loop(s->u.whl.body, v, depth + 1)) ||
        (s->kind == LS_IF && (updated_in_loop(s->u.cond.then, v, depth) ||
                              updated_in_loop(s->u.cond.els, v, depth))) ||
        (s->kind == LS_BLOCK && updated_in_loop(s->u.block, v, depth)))
      return true;
  }
  return false;
}

/* Accumulators an outer vector loop's body keeps live across its nested
 * loops: of the variables declared at its top level (through blocks), the
 * most that one nested loop updates (promoted row groups run one after
 * another). Each is a vector of the loop's lanes. */
static int live_in(const LirStmt *s, const LirStmt *loop) {
  const LirStmt *body = loop->kind == LS_FOR ? loop->u.loop.body : loop->u.whl.body;
  int n = 0;
  for (; s; s = s->next) {
    if (s->kind == LS_BLOCK) n += live_in(s->u.block, loop);
    if (s->kind == LS_DECL && updated_in_loop(body, s->u.decl.var, 1)) n++;
  }
  return n;
}

static int accumulators(const LirStmt *s, const LirStmt *body) {
  int most = 0;
  for (; s; s = s->next) {
    int n = s->kind == LS_BLOCK                          ? accumulators(s->u.block, body)
            : s->kind == LS_FOR || s->kind == LS_WHILE ? live_in(body, s)
                                                       : 0;
    if (n > most) most = n;
  }
  return most;
}

typedef struct Pass {
  Vec v;
  const LowerOptions *opt;
  int width;
  int outer_width;  /* lanes of an outer-loop vector loop */
  int deep_width;   /* ... around sparse fibers nested two deep: twice as
                       wide, then halving tiers (a rank-32 or -16 MTTKRP
                       walks its slice once, not 4 or 2 times) */
  int count;
  bool asked;       /* a loop carries vectorize(i, w): only such loops */
} Pass;

/* Whether a loop of the list asks for vectorize(i, w). */
static bool any_asked(const LirStmt *s) {
  for (; s; s = s->next) {
    if ((s->kind == LS_FOR && (s->u.loop.at.vectorize || any_asked(s->u.loop.body))) ||
        (s->kind == LS_WHILE && any_asked(s->u.whl.body)) ||
        (s->kind == LS_IF && (any_asked(s->u.cond.then) || any_asked(s->u.cond.els))) ||
        (s->kind == LS_BLOCK && any_asked(s->u.block)))
      return true;
  }
  return false;
}

int lower_tier_cap(int64_t extent) {
  if (extent <= 0 || extent >= LOWER_TIER_CAP_ALL) return 0;
  int w = 1;
  while (2 * w <= extent) w *= 2;
  return w;
}

/* The tier cap of a loop over iv: its index's extent when the kernel was
 * compiled knowing it. Tiers are powers of two and a tier of W lanes runs
 * only while W iterations remain, so over an extent n none wider than the
 * largest power of two <= n is ever entered: leaving them out changes no
 * executed instruction for that extent and shrinks the code LLVM compiles
 * (a rank-16 MTTKRP emitted 64-, 32-, 16- and 8-lane nests). */
static int tier_cap(const Pass *p, const LirVar *iv) {
  const Assignment *as = p->opt->extents;
  for (int v = 0; as && v < as->nindices; v++)
    if (!strcmp(as->indices[v]->name, iv->name)) return lower_tier_cap(as->indices[v]->extent);
  return 0;
}

/* Whether loop (in the list from head) runs a constant number of trips
 * below limit: its bound is declared in the list as lo + c (n_out_of_m's
 * block of n positions): a vector path it never enters would only add a
 * branch and mark the plain 2-trip loop a remainder. */
static bool short_trip(const LirStmt *head, const LirStmt *loop, int64_t limit) {
  const LirExpr *lo = loop->u.loop.lo, *hi = loop->u.loop.hi;
  if (lo->kind != LE_VAR || hi->kind != LE_VAR) return false;
  for (const LirStmt *s = head; s && s != loop; s = s->next) {
    if (s->kind != LS_DECL || s->u.decl.var != hi->u.var) continue;
    const LirExpr *e = s->u.decl.init;
    return e && e->kind == LE_BIN && e->u.bin.op == LOP_ADD && e->u.bin.a->kind == LE_VAR &&
           e->u.bin.a->u.var == lo->u.var && e->u.bin.b->kind == LE_CONST &&
           e->u.bin.b->u.c.i < limit;
  }
  return false;
}

/* Over a loop of constant bounds (a block's columns, lower/promote.c)
 * the tiers wider than its trips are left out, and with none left the
 * widest power of two that fits is the one tier (4 lanes of a 4x4 block
 * on AVX-512). Returns the tiers kept. */
static int fit_trips(const LirStmt *loop, int *tiers, int n) {
  const LirExpr *lo = loop->u.loop.lo, *hi = loop->u.loop.hi;
  if (lo->kind != LE_CONST || hi->kind != LE_CONST) return n;
  int64_t trips = hi->u.c.i - lo->u.c.i;
  int kept = 0;
  for (int t = 0; t < n; t++)
    if (tiers[t] <= trips) tiers[kept++] = tiers[t];
  if (kept == 0 && trips >= 2) {
    int w = 2;
    while (2 * w <= trips) w *= 2;
    tiers[kept++] = w;
  }
  return kept ? kept : n;
}

static void walk(Pass *p, LirStmt **slot) {
  LirStmt *head = *slot;
  for (; *slot; slot = &(*slot)->next) {
    LirStmt *s = *slot;
    switch (s->kind) {
    case LS_FOR: {
      bool named = !p->asked || s->u.loop.at.vectorize > 0;
      bool free_loop = !s->u.loop.at.parallel && !s->u.loop.at.vec_width && !s->u.loop.at.scalar;
      if (free_loop && named && has_loop(s->u.loop.body) && vectorizable(&p->v, s, false)) {
        Loaded L = {.n = 0};
        int tiers[8], n = 0;
        if (sparse_depth(s->u.loop.body, &L) >= 2) {
          /* every pass re-walks the fibers: halve down to one register;
           * tiers wider than the extent are left out (tier_cap) */
          int cap = tier_cap(p, s->u.loop.iv);
          for (int w = p->deep_width; w > p->width && n < 7; w /= 2)
            if (!cap || w <= cap) tiers[n++] = w;
        } else if (p->outer_width > p->width) {
          /* not capped: without its (never entered) 32-lane tier, SpMM with
           * 16 columns ran 8-12% slower on cage11 (the same loops executed;
           * LLVM allocated registers and laid out the row loop otherwise).
           * Several accumulators (a promoted block of rows, lower/promote.c)
           * share half the registers (16 of AVX-512's 32, 8 of AVX2's 16):
           * BSR 8x8 keeps 8 rows of 2 registers, 4x4 4 rows of 4; two
           * (2:4's partial sums) widen to 8 registers each, one pass of
           * 64 lanes over B's rows instead of two of 32. */
          int regs = p->outer_width / p->width, budget = p->opt->vector_bits >= 512 ? 16 : 8;
          int acc = accumulators(s->u.loop.body, s->u.loop.body);
          if (acc >= 2) while (2 * acc * regs <= budget) regs *= 2;
          while (acc * regs > budget && regs > 1) regs /= 2;
          if (regs > 1) tiers[n++] = p->width * regs;
        }
        tiers[n++] = p->width;
        n = fit_trips(s, tiers, n);
        slot = split_outer(&p->v, slot, tiers, n);
        p->count++;
        break;
      }
      walk(p, &s->u.loop.body);
      if (!free_loop || has_loop(s->u.loop.body) || !named) break;
      if (short_trip(head, s, p->width)) break;   /* never enters a W-lane path */
      if (!vectorizable(&p->v, s, p->opt->vector_gather)) break;
      slot = split(&p->v, slot, p->width, p->v.gathers, false);
      p->count++; /* on past what split put in place */
      break;
    }
    case LS_WHILE: walk(p, &s->u.whl.body); break;
    case LS_IF:
      walk(p, &s->u.cond.then);
      walk(p, &s->u.cond.els);
      break;
    case LS_BLOCK: walk(p, &s->u.block); break;
    default: break;
    }
  }
}

int lower_vectorize(Arena *a, LirKernel *k, const LowerOptions *opt, LirType vtype) {
  /* narrow values (i8, i16, bool) still have 64-bit indices: 32-bit lanes */
  int bits = lir_type_bytes(vtype) <= 4 ? 32 : 64;
  int width = opt->vec_width ? opt->vec_width : opt->vector_bits / bits;
  if (width < 2 || k->nvars == 0) return 0;
  /* Outer loops block 4 registers per row on AVX-512 (32 of them), 2 with
   * 16: unroll-and-jam then keeps 4 rows x that many accumulators live. */
  Pass p = {.opt = opt, .width = width,
            .outer_width = opt->vec_width ? width : width * (opt->vector_bits >= 512 ? 4 : 2)};
  /* Around fibers nested two deep (MTTKRP's slice: 1.26 against 1.47 ms
   * on openflight_sym), one pass of 8 registers beats two of 4: the nest's
   * index loads and branches are paid once. Around a single fiber (SpMM's
   * row) two passes of 4 measured faster (75 against 85 ms on a 200k x 200k
   * matrix and a 100 MB B): the first pass's misses prefetch the second's
   * lines. Sparse nests are never jammed, so the registers are free. */
  p.deep_width = opt->vec_width ? width : 2 * p.outer_width;
  p.v.a = a;
  p.v.k = k;
  p.v.masked_tail = opt->masked_tail;
  p.asked = any_asked(k->body);
  walk(&p, &k->body);
  return p.count;
}

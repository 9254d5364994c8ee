/* Cache blocking of dense contractions (a loop-IR pass, run before
 * vectorization): the GEMM-shaped nest
 *
 *   for i (parallel)                        rows
 *     for j                                 columns, bounds free of i
 *       t = 0
 *       for k { ... t += e ... }            the reduction, bounds free of i, j
 *       out[idx] += t
 *
 * becomes
 *
 *   for jc = jlo; jc < jhi; jc += NC
 *     for kc = klo; kc < khi; kc += KC
 *       for i (parallel)
 *         for j = jc; j < min(jc + NC, jhi)
 *           t = 0; for k = kc; k < min(kc + KC, khi) {...}; out[idx] += t
 *
 * so the KC x NC block of the operand walked by (k, j) stays in the L2
 * cache while every row block uses it (the GotoBLAS / GETT macro-kernel
 * without packing). Summing the partial sums of t into the output is exact
 * reassociation of the same sum, which is why only `t = 0; t += ...;
 * out += t` qualifies. The vectorizer then takes j as a wide outer vector
 * loop and unroll-and-jam blocks i (lower/vectorize.c, lower/unroll_jam.c).
 */
#include <string.h>

#include "lower.h"

enum { TILE_NC = 256, TILE_KC = 256 }; /* 256 x 256 doubles: 512 KiB of L2 */

/* The statements of list s other than comments (looking through a list
 * that is one block); returns how many there are, storing up to max. */
static int plain_stmts(LirStmt *s, LirStmt **out, int max) {
  int n = 0;
  for (; s; s = s->next)
    if (s->kind != LS_COMMENT) {
      if (n < max) out[n] = s;
      n++;
    }
  if (n == 1 && out[0]->kind == LS_BLOCK) return plain_stmts(out[0]->u.block, out, max);
  return n;
}

/* The one statement of list s (through blocks), or NULL. */
static LirStmt *only_stmt(LirStmt *s) {
  LirStmt *one = NULL;
  return plain_stmts(s, &one, 1) == 1 ? one : NULL;
}

/* Marks every variable declared (or iterated) inside list s. */
static void mark_decls(const LirStmt *s, char *mark) {
  for (; s; s = s->next) {
    if (s->kind == LS_DECL) mark[s->u.decl.var->id] = 1;
    if (s->kind == LS_BLOCK) mark_decls(s->u.block, mark);
    if (s->kind == LS_FOR) {
      mark[s->u.loop.iv->id] = 1;
      mark_decls(s->u.loop.body, mark);
    }
    if (s->kind == LS_WHILE) mark_decls(s->u.whl.body, mark);
    if (s->kind == LS_IF) {
      mark_decls(s->u.cond.then, mark);
      mark_decls(s->u.cond.els, mark);
    }
  }
}

/* t is only ever updated by t += e inside the reduction loop's body. */
static bool only_sums(const LirStmt *s, const LirVar *t) {
  for (; s; s = s->next) {
    if (s->kind == LS_ASSIGN && s->u.assign.var == t && s->u.assign.op != LOP_ADD) return false;
    if (s->kind == LS_BLOCK && !only_sums(s->u.block, t)) return false;
    if (s->kind == LS_FOR && !only_sums(s->u.loop.body, t)) return false;
    if (s->kind == LS_WHILE || s->kind == LS_IF) return false;
  }
  return true;
}

static bool is_zero(const LirExpr *e) {
  return !e || (e->kind == LE_CONST && e->u.c.i == 0 && e->u.c.f == 0);
}

/* Finds j and k of a qualifying parallel loop p (see the file comment). */
static bool gemm_shaped(LirKernel *k, Arena *a, LirStmt *p, LirStmt **jl, LirStmt **kl) {
  if (!p->u.loop.at.parallel || p->u.loop.at.balance || !lir_unit_step(p)) return false;
  LirStmt *j = only_stmt(p->u.loop.body);
  if (!j || j->kind != LS_FOR || !lir_unit_step(j) || j->u.loop.at.vec_width) return false;
  LirStmt *b[4];
  if (plain_stmts(j->u.loop.body, b, 3) != 3) return false;
  if (b[0]->kind != LS_DECL || !is_zero(b[0]->u.decl.init) ||
      !lir_type_is_float(b[0]->u.decl.var->type))
    return false;
  const LirVar *t = b[0]->u.decl.var;
  if (b[1]->kind == LS_BLOCK) b[1] = only_stmt(b[1]->u.block);
  if (!b[1] || b[1]->kind != LS_FOR || !lir_unit_step(b[1]) || b[1]->u.loop.at.vec_width) return false;
  if (b[2]->kind != LS_STORE || b[2]->u.store.op != LOP_ADD || b[2]->u.store.atomic || b[2]->u.store.e->kind != LE_VAR ||
      b[2]->u.store.e->u.var != t)
    return false;
  if (!only_sums(b[1]->u.loop.body, t)) return false;
  char *mark = arena_alloc(a, (size_t)k->nvars);
  if (!mark) return false;
  mark[p->u.loop.iv->id] = 1;
  mark_decls(p->u.loop.body, mark);
  int n = k->nvars;
  if (lir_reads_marked(j->u.loop.lo, mark, n) || lir_reads_marked(j->u.loop.hi, mark, n) ||
      lir_reads_marked(b[1]->u.loop.lo, mark, n) || lir_reads_marked(b[1]->u.loop.hi, mark, n))
    return false;
  *jl = j;
  *kl = b[1];
  return true;
}

/* Narrows loop f to [c, min(c + size, hi)) and returns the block loop
 * `for (c = lo; c < hi; c += size) inner`. */
static LirStmt *block_loop(Arena *a, LirKernel *k, LirStmt *f, int size, LirStmt *inner) {
  LirType ty = f->u.loop.iv->type;
  LirVar *c = lir_var(a, k, arena_printf(a, "%s_blk%d", f->u.loop.iv->name, k->nvars), ty);
  if (!c) return NULL;
  LirExpr *sz = lir_const_int(a, ty, size);
  LirStmt *outer = lir_for(a, c, f->u.loop.lo, f->u.loop.hi, inner);
  if (!outer) return NULL;
  outer->u.loop.step = sz;
  f->u.loop.hi = lir_bin(a, LOP_MIN, lir_bin(a, LOP_ADD, lir_ref(a, c), sz), f->u.loop.hi);
  f->u.loop.lo = lir_ref(a, c);
  return outer;
}

static int walk(Arena *a, LirKernel *k, LirStmt **slot) {
  int n = 0;
  for (; *slot; slot = &(*slot)->next) {
    LirStmt *s = *slot, *jl, *kl;
    switch (s->kind) {
    case LS_FOR:
      if (gemm_shaped(k, a, s, &jl, &kl)) {
        LirStmt *rest = s->next;
        s->next = NULL;
        LirStmt *kb = block_loop(a, k, kl, TILE_KC, s);
        LirStmt *jb = kb ? block_loop(a, k, jl, TILE_NC, kb) : NULL;
        if (!jb) return n;
        jb->next = rest;
        *slot = jb;
        n++;
      } else {
        n += walk(a, k, &s->u.loop.body);
      }
      break;
    case LS_BLOCK: n += walk(a, k, &s->u.block); break;
    default: break;
    }
  }
  return n;
}

int lower_tile(Arena *a, LirKernel *k) {
  if (k->nvars == 0) return 0;
  return walk(a, k, &k->body);
}

/* Parallel loops: the body of a FOR marked parallel is outlined into
 *   void <kernel>.par<N>(ptr ctx, i64 lo, i64 hi) {
 *     operands = ctx[0]; v_j = ctx[3 + j] for each captured variable;
 *     for (iv = lo; iv < hi; iv += step) body
 *   }
 * and the kernel fills ctx (8 bytes per entry, by value: the body assigns
 * no outer variable) and calls
 *   tj_rt_parallel_for_leaves(lo, hi, balance pos or NULL, width,
 *                             leaves pos or NULL, width, .par<N>, ctx).
 * A loop whose step is not the constant 1 is split by trip number instead:
 * the runtime sees [0, trips) and the body maps t to ctx[1] + t * ctx[2].
 * A body that breaks the parallel contract (assigns an outer variable, may
 * fail) runs serially, which is always correct; so do nested parallel loops.
 */
#include <stdio.h>
#include <stdlib.h>

#include "emit_internal.h"

enum { CTX_OPERANDS, CTX_LO, CTX_STEP, CTX_VARS };

/* One walk over the body in statement order (declarations precede uses). */
typedef struct Capture {
  unsigned char *inner;  /* by var id: declared in the body (or its iv) */
  unsigned char *seen;   /* by var id: already in vars */
  const LirVar **vars;   /* variables the body uses but does not declare */
  int n;
  bool writes_outer;     /* the body assigns a variable declared outside */
  bool may_fail;         /* the body makes a failing helper call */
} Capture;

static void use_var(Capture *c, const LirVar *v) {
  if (!v || c->inner[v->id] || c->seen[v->id]) return;
  c->seen[v->id] = 1;
  c->vars[c->n++] = v;
}

static void walk_expr(Capture *c, const LirExpr *x) {
  if (!x) return;
  switch (x->kind) {
  case LE_VAR: use_var(c, x->u.var); break;
  case LE_LOAD: walk_expr(c, x->u.load.ptr); walk_expr(c, x->u.load.idx); break;
  case LE_BIN: walk_expr(c, x->u.bin.a); walk_expr(c, x->u.bin.b); break;
  case LE_UN: walk_expr(c, x->u.un.a); break;
  case LE_CAST: walk_expr(c, x->u.cast); break;
  case LE_SELECT:
    walk_expr(c, x->u.sel.cond);
    walk_expr(c, x->u.sel.a);
    walk_expr(c, x->u.sel.b);
    break;
  default: break;
  }
}

static void write_var(Capture *c, const LirVar *v) {
  if (v && !c->inner[v->id]) c->writes_outer = true;
}

static void walk(Capture *c, const LirStmt *s) {
  for (; s; s = s->next) switch (s->kind) {
  case LS_DECL: walk_expr(c, s->u.decl.init); c->inner[s->u.decl.var->id] = 1; break;
  case LS_ASSIGN: walk_expr(c, s->u.assign.e); write_var(c, s->u.assign.var); break;
  case LS_STORE:
    walk_expr(c, s->u.store.ptr);
    walk_expr(c, s->u.store.idx);
    walk_expr(c, s->u.store.e);
    break;
  case LS_SETFIELD: walk_expr(c, s->u.setfield.e); break;
  case LS_FOR:
    walk_expr(c, s->u.loop.lo);
    walk_expr(c, s->u.loop.hi);
    walk_expr(c, s->u.loop.step);
    c->inner[s->u.loop.iv->id] = 1;
    walk(c, s->u.loop.body);
    break;
  case LS_WHILE: walk_expr(c, s->u.whl.cond); walk(c, s->u.whl.body); break;
  case LS_IF:
    walk_expr(c, s->u.cond.cond);
    walk(c, s->u.cond.then);
    walk(c, s->u.cond.els);
    break;
  case LS_CALL:
    walk_expr(c, s->u.call.a);
    walk_expr(c, s->u.call.b);
    if (s->u.call.h == LH_RESERVE || s->u.call.h == LH_ALLOC || s->u.call.h == LH_GETT)
      c->may_fail = true;
    if (s->u.call.h == LH_FREE || s->u.call.h == LH_THREADS || s->u.call.h == LH_THREAD_SLOT)
      write_var(c, s->u.call.ptr);
    use_var(c, s->u.call.ptr);
    break;
  case LS_BLOCK: walk(c, s->u.block); break;
  case LS_COMMENT: break;
  }
}

static LLVMValueRef ctx_addr(Emitter *e, LLVMBuilderRef b, LLVMValueRef ctx, int q) {
  LLVMValueRef idx = LLVMConstInt(e->i64, (unsigned)q, 0);
  return LLVMBuildInBoundsGEP2(b, e->i64, ctx, &idx, 1, "");
}

/* The outlined function's entry: operand pointers and captured variables
 * copied from ctx into this function's own slots. */
static void load_ctx(Emitter *e, LLVMValueRef ctx, const Capture *c) {
  e->operands = LLVMBuildLoad2(e->eb, e->ptr, ctx_addr(e, e->eb, ctx, CTX_OPERANDS), "operands");
  for (int i = 0; i < e->k->noperands; i++) {
    LLVMValueRef idx = LLVMConstInt(e->i64, (unsigned)i, 0);
    LLVMValueRef p = LLVMBuildInBoundsGEP2(e->eb, e->ptr, e->operands, &idx, 1, "");
    e->ops[i] = LLVMBuildLoad2(e->eb, e->ptr, p, "");
  }
  for (int j = 0; j < c->n; j++) {
    LLVMValueRef a = em_slot(e, c->vars[j]);
    if (!a) return;
    LLVMTypeRef t = em_reg_type(e, c->vars[j]->type);
    LLVMValueRef x = LLVMBuildLoad2(e->eb, t, ctx_addr(e, e->eb, ctx, CTX_VARS + j), "");
    LLVMBuildStore(e->eb, x, a);
  }
}

/* [lo, hi) of the iv from the runtime's range (trip numbers unless the
 * step is 1), in the iv's type. */
static void iv_range(Emitter *e, const LirStmt *s, LLVMValueRef ctx,
                     LLVMValueRef *lo, LLVMValueRef *hi) {
  LLVMValueRef l = LLVMGetParam(e->fn, 1), h = LLVMGetParam(e->fn, 2);
  if (!lir_unit_step(s)) {
    LLVMValueRef l0 = LLVMBuildLoad2(e->b, e->i64, ctx_addr(e, e->b, ctx, CTX_LO), "");
    LLVMValueRef st = LLVMBuildLoad2(e->b, e->i64, ctx_addr(e, e->b, ctx, CTX_STEP), "");
    l = LLVMBuildAdd(e->b, l0, LLVMBuildMul(e->b, l, st, ""), "");
    h = LLVMBuildAdd(e->b, l0, LLVMBuildMul(e->b, h, st, ""), "");
  }
  LLVMTypeRef t = em_reg_type(e, s->u.loop.iv->type);
  *lo = LLVMBuildIntCast2(e->b, l, t, 1, "");
  *hi = LLVMBuildIntCast2(e->b, h, t, 1, "");
}

/* Builds .par<N> with the emitter switched to it; restores the kernel's
 * function state afterwards. */
static LLVMValueRef outline(Emitter *e, const LirStmt *s, const Capture *c) {
  char name[160];
  snprintf(name, sizeof name, "%s.par%d", e->t->symbol, e->npar++);
  LLVMTypeRef pt[] = {e->ptr, e->i64, e->i64};
  LLVMValueRef fn = LLVMAddFunction(e->m, name, LLVMFunctionType(e->vd, pt, 3, 0));
  LLVMSetLinkage(fn, LLVMInternalLinkage);
  em_add_fn_attrs(e, fn);
  Emitter saved = *e;
  LLVMBasicBlockRef back = LLVMGetInsertBlock(e->b);
  e->slots = calloc((size_t)e->k->nvars + 1, sizeof *e->slots);
  if (!e->slots) {
    diag_error(e->d, TJ_ERR_NOMEM, "out of memory outlining a parallel loop");
    *e = saved;
    return NULL;
  }
  e->fn = fn;
  e->eb = LLVMCreateBuilderInContext(e->cx);
  e->cleanup = NULL;
  e->rc = e->alloc_out = NULL;
  e->in_parallel = true;
  LLVMBasicBlockRef entry = em_new_block(e, "entry"), body = em_new_block(e, "body");
  LLVMPositionBuilderAtEnd(e->eb, entry);
  LLVMPositionBuilderAtEnd(e->b, body);
  LLVMValueRef ctx = LLVMGetParam(fn, 0), lo, hi;
  load_ctx(e, ctx, c);
  iv_range(e, s, ctx, &lo, &hi);
  bool ok = diag_ok(e->d) && em_scalar_for(e, s, lo, hi);
  if (ok) LLVMBuildRetVoid(e->b);
  LLVMBuildBr(e->eb, body);
  LLVMDisposeBuilder(e->eb);
  free(e->slots);
  int npar = e->npar;
  *e = saved;
  e->npar = npar;
  LLVMPositionBuilderAtEnd(e->b, back);
  return ok ? fn : NULL;
}

/* ctx[CTX_VARS + j] = captured variable j; ctx[0] = operands. */
static LLVMValueRef fill_ctx(Emitter *e, const Capture *c) {
  LLVMTypeRef at = LLVMArrayType(e->i64, (unsigned)(CTX_VARS + c->n));
  LLVMValueRef ctx = LLVMBuildAlloca(e->eb, at, "par.ctx");
  LLVMBuildStore(e->b, e->operands, ctx_addr(e, e->b, ctx, CTX_OPERANDS));
  for (int j = 0; j < c->n; j++) {
    LLVMValueRef a = em_slot(e, c->vars[j]);
    if (!a) return NULL;
    LLVMValueRef x = LLVMBuildLoad2(e->b, em_reg_type(e, c->vars[j]->type), a, "");
    LLVMBuildStore(e->b, x, ctx_addr(e, e->b, ctx, CTX_VARS + j));
  }
  return ctx;
}

/* The runtime's range: [lo, hi), or [0, trips) with lo and step in ctx. */
static bool run_range(Emitter *e, const LirStmt *s, LLVMValueRef ctx,
                      LLVMValueRef *lo, LLVMValueRef *hi) {
  LLVMValueRef l = emit_expr(e, s->u.loop.lo), h = l ? emit_expr(e, s->u.loop.hi) : NULL;
  if (!h) return false;
  l = LLVMBuildIntCast2(e->b, l, e->i64, 1, "");
  h = LLVMBuildIntCast2(e->b, h, e->i64, 1, "");
  if (lir_unit_step(s)) {
    *lo = l, *hi = h;
    return true;
  }
  LLVMValueRef st = emit_expr(e, s->u.loop.step);
  if (!st) return false;
  st = LLVMBuildIntCast2(e->b, st, e->i64, 1, "");
  LLVMBuildStore(e->b, l, ctx_addr(e, e->b, ctx, CTX_LO));
  LLVMBuildStore(e->b, st, ctx_addr(e, e->b, ctx, CTX_STEP));
  LLVMValueRef one = LLVMConstInt(e->i64, 1, 0);
  LLVMValueRef span = LLVMBuildSub(e->b, LLVMBuildAdd(e->b, LLVMBuildSub(e->b, h, l, ""), st, ""), one, "");
  LLVMValueRef trips = LLVMBuildSDiv(e->b, span, st, "");
  LLVMValueRef empty = LLVMBuildICmp(e->b, LLVMIntSLE, h, l, "");
  *lo = LLVMConstInt(e->i64, 0, 0);
  *hi = LLVMBuildSelect(e->b, empty, *lo, trips, "");
  return true;
}

/* A balance array as (pointer, width in bytes); null and 0 when absent. */
static bool weight_array(Emitter *e, const LirExpr *x, LLVMValueRef *p, LLVMValueRef *w) {
  *p = LLVMConstNull(e->ptr);
  *w = LLVMConstInt(e->i32, 0, 0);
  if (!x) return true;
  if (x->type != LT_PTR_I32 && x->type != LT_PTR_I64 && x->type != LT_PTR_U8 &&
      x->type != LT_PTR_U16)   /* 8- and 16-bit positions are unsigned */
    return em_bug(e, "parallel balance array is not an integer pointer");
  if (!(*p = emit_expr(e, x))) return false;
  *w = LLVMConstInt(e->i32, (unsigned)em_elem_bytes(x->type), 0);
  return true;
}

/* tj_rt_parallel_for_sched(lo, hi, pos, width, leaves, width, strategy, body, ctx) */
static bool call_runtime(Emitter *e, const LirStmt *s, LLVMValueRef fn,
                         LLVMValueRef ctx, LLVMValueRef lo, LLVMValueRef hi) {
  const LirExpr *bal = lir_unit_step(s) ? s->u.loop.at.balance : NULL;
  LLVMValueRef pos, pw, leaf, lw;
  if (!weight_array(e, bal, &pos, &pw) ||
      !weight_array(e, bal ? s->u.loop.at.leaves : NULL, &leaf, &lw))
    return false;
  LLVMTypeRef pt[] = {e->i64, e->i64, e->ptr, e->i32, e->ptr, e->i32, e->i32, e->ptr, e->ptr};
  LLVMTypeRef ft = LLVMFunctionType(e->vd, pt, 9, 0);
  LLVMValueRef rt = LLVMGetNamedFunction(e->m, "tj_rt_parallel_for_sched");
  if (!rt) rt = LLVMAddFunction(e->m, "tj_rt_parallel_for_sched", ft);
  LLVMValueRef strategy = LLVMConstInt(e->i32, (unsigned)s->u.loop.at.schedule, 0);
  LLVMValueRef args[] = {lo, hi, pos, pw, leaf, lw, strategy, fn, ctx};
  LLVMBuildCall2(e->b, ft, rt, args, 9, "");
  return true;
}

bool emit_parallel_for(Emitter *e, const LirStmt *s) {
  size_t n = (size_t)e->k->nvars + 1;
  Capture c = {.inner = calloc(n, 1), .seen = calloc(n, 1),
               .vars = calloc(n, sizeof *c.vars)};
  bool ok = c.inner && c.seen && c.vars;
  if (!ok) diag_error(e->d, TJ_ERR_NOMEM, "out of memory outlining a parallel loop");
  if (ok) {
    c.inner[s->u.loop.iv->id] = 1;
    walk_expr(&c, s->u.loop.step);
    walk(&c, s->u.loop.body);
  }
  LLVMValueRef ctx = NULL, fn = NULL, lo, hi;
  if (ok && (c.writes_outer || c.may_fail || !e->cleanup || e->in_cleanup))
    ok = em_scalar_for(e, s, emit_expr(e, s->u.loop.lo), NULL);
  else if (ok)
    ok = (ctx = fill_ctx(e, &c)) && run_range(e, s, ctx, &lo, &hi) &&
         (fn = outline(e, s, &c)) && call_runtime(e, s, fn, ctx, lo, hi);
  free(c.inner);
  free(c.seen);
  free(c.vars);
  return ok;
}

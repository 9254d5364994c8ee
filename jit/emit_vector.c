/* Vector loops: a FOR with vec_width W (step W, trip count a multiple of W,
 * a straight-line body of DECL / ASSIGN / STORE / BLOCK) becomes one LLVM
 * iteration per W lanes over <W x T> values. Each value has a class:
 *   uniform     one scalar for all lanes (outer variables, constants,
 *               fields, loads at uniform indices)
 *   unit        lanes base+0 .. base+W-1, kept as the scalar base (the iv,
 *               and uniform +/- unit integer arithmetic)
 *   varying     a <W x T> register
 * so unit-stride loads and stores are single vector accesses and anything
 * else loads by gather. Reductions into outer variables keep a vector
 * accumulator and combine it horizontally after the loop:
 *   acc = splat(identity); for (iv = lo; iv < hi; iv += W) { ...; acc op= x; }
 *   s = s op reduce(acc)
 * a fold by a user-defined operator (lir_fold) the same way, its operator
 * applied lane-wise in the loop and lane by lane after it.
 * Loads reached only under a condition (select arms, && / ||) are masked.
 * The body may hold scalar `for` loops with uniform bounds (outer-loop
 * vectorization: GEMM's k loop inside the vector loop over j); a body
 * variable assigned inside such a loop lives in a <W x T> stack slot
 * (SROA keeps it in registers) so its lanes carry across the trips.
 */
#include <llvm-c/DebugInfo.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../ir/lir_class.h"
#include "emit_internal.h"

#define MAX_LANES 64
enum { FAM_FOLD = 1000 };  /* a reduction family past every LirBinOp */

typedef struct VVal {
  LLVMValueRef v;  /* scalar (uniform), scalar base (unit) or vector (varying) */
  LirClass c;
} VVal;

typedef struct VecLoop {
  Emitter *e;
  const LirStmt *s;
  unsigned w;
  LLVMValueRef base;      /* the iv at lane 0 of this iteration */
  unsigned char *inner;   /* by var id: declared in the body */
  VVal *val;              /* by var id: current value of a body variable */
  int *red;               /* by var id: reduction op family + 1 (FAM_FOLD + 1:
                             a fold), or 0 */
  const LirStmt **fold;   /* by var id: the fold (lir_fold) into it */
  LLVMValueRef *acc;      /* by var id: accumulator alloca */
  const LirVar **rvars;   /* the reduction variables, in order */
  int nred;
  int *depth;             /* by var id: loop nesting depth of its declaration */
  LLVMValueRef *vslot;    /* by var id: <W x T> slot of a variable carried
                             across a nested loop's trips, or NULL */
  LLVMValueRef mask;      /* the lanes below the bound in a masked tail's
                             step, else NULL (all lanes) */
} VecLoop;

static const VVal none = {NULL, LIR_VARYING};

static bool fail(VecLoop *v, const char *what) {
  const LirVar *iv = v->s->u.loop.iv;
  return diag_error(v->e->d, TJ_ERR_INTERNAL,
                    "internal error: vector loop over %s: %s",
                    iv->name ? iv->name : "?", what);
}

bool emit_is_vector_loop(const LirStmt *s) {
  int w = s->u.loop.at.vec_width;
  const LirExpr *st = s->u.loop.step;
  return w >= 2 && w <= MAX_LANES && (w & (w - 1)) == 0 && st &&
         st->kind == LE_CONST && st->u.c.i == w;
}

/* ---- vector values ---- */

static LLVMValueRef splat(VecLoop *v, LLVMValueRef x) {
  LLVMBuilderRef b = v->e->b;
  LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(x), v->w);
  LLVMValueRef ins = LLVMBuildInsertElement(b, LLVMGetPoison(vt), x,
                                            LLVMConstInt(v->e->i32, 0, 0), "");
  LLVMValueRef zero = LLVMConstNull(LLVMVectorType(v->e->i32, v->w));
  return LLVMBuildShuffleVector(b, ins, LLVMGetPoison(vt), zero, "");
}

/* <0, 1, ..., W-1> of integer type t. */
static LLVMValueRef lane_ids(VecLoop *v, LLVMTypeRef t) {
  LLVMValueRef c[MAX_LANES];
  for (unsigned q = 0; q < v->w; q++) c[q] = LLVMConstInt(t, q, 0);
  return LLVMConstVector(c, v->w);
}

static LLVMValueRef to_vec(VecLoop *v, VVal x) {
  if (!x.v) return NULL;
  if (x.c == LIR_VARYING) return x.v;
  LLVMValueRef s = splat(v, x.v);
  if (x.c == LIR_UNIFORM) return s;
  return LLVMBuildNSWAdd(v->e->b, s, lane_ids(v, LLVMTypeOf(x.v)), "");
}

/* mask & cond (either may be NULL = all lanes); cond is a bool VVal. */
static LLVMValueRef and_mask(VecLoop *v, LLVMValueRef mask, LLVMValueRef cond) {
  if (!mask) return cond;
  return cond ? LLVMBuildAnd(v->e->b, mask, cond, "") : NULL;
}

static LLVMValueRef intrinsic2(Emitter *e, const char *name, LLVMTypeRef t0,
                               LLVMTypeRef t1, LLVMValueRef *args, unsigned n) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  LLVMTypeRef tys[] = {t0, t1};
  LLVMValueRef f = LLVMGetIntrinsicDeclaration(e->m, id, tys, 2);
  LLVMTypeRef ft = LLVMIntrinsicGetType(e->cx, id, tys, 2);
  return LLVMBuildCall2(e->b, ft, f, args, n, "");
}

/* ---- classes (ir/lir_class.c has the rules) ---- */

/* Variables other than the iv: a body variable has the class of its value
 * (varying when it lives in a vector slot), a reduction its accumulator's,
 * and any other outer variable is uniform. */
static LirClass var_class(void *cx, const LirVar *x) {
  VecLoop *v = cx;
  if (v->vslot[x->id]) return LIR_VARYING;
  if (v->inner[x->id]) return v->val[x->id].c;
  return v->red[x->id] ? LIR_VARYING : LIR_UNIFORM;
}

static LirClass classify(VecLoop *v, const LirExpr *x) {
  LirClassEnv env = {var_class, NULL, NULL, v};
  return lir_classify(x, v->s->u.loop.iv, &env);
}

/* ---- expressions ---- */

static VVal vexpr(VecLoop *v, const LirExpr *x, LLVMValueRef mask);

static VVal mk(LLVMValueRef x, LirClass c) { return (VVal){x, c}; }

/* The current value of a body variable (from its vector slot when it is
 * carried across a nested loop). */
static VVal inner_value(VecLoop *v, const LirVar *var) {
  LLVMValueRef slot = v->vslot[var->id];
  if (!slot) return v->val[var->id];
  LLVMTypeRef vt = LLVMVectorType(em_reg_type(v->e, var->type), v->w);
  return mk(LLVMBuildLoad2(v->e->b, vt, slot, ""), LIR_VARYING);
}

/* ptr[idx]: scalar (uniform index, no mask), one vector load (unit), or a
 * gather; masked lanes read nothing and yield zero. */
static VVal vload(VecLoop *v, const LirExpr *x, LLVMValueRef mask) {
  Emitter *e = v->e;
  if (classify(v, x->u.load.ptr) != LIR_UNIFORM)
    return fail(v, "load through a pointer that differs per lane"), none;
  LLVMValueRef p = emit_expr(e, x->u.load.ptr);
  VVal i = vexpr(v, x->u.load.idx, mask);
  if (!p || !i.v) return none;
  LirType t = lir_elem_type(x->u.load.ptr->type);
  LLVMTypeRef et = em_mem_type(e, t), vt = LLVMVectorType(et, v->w);
  unsigned align = (unsigned)em_elem_bytes(x->u.load.ptr->type);
  LLVMValueRef r, al = LLVMConstInt(e->i32, align, 0);
  if (i.c == LIR_UNIFORM && !mask) {
    r = LLVMBuildLoad2(e->b, et, LLVMBuildInBoundsGEP2(e->b, et, p, &i.v, 1, ""), "");
    em_tag(e, r, e->tbaa[t]);
    if (t == LT_BOOL) r = LLVMBuildICmp(e->b, LLVMIntNE, r, LLVMConstNull(et), "");
    return mk(r, LIR_UNIFORM);
  }
  if (i.c == LIR_UNIT) {
    LLVMValueRef a = LLVMBuildInBoundsGEP2(e->b, et, p, &i.v, 1, "");
    if (mask) {
      LLVMValueRef args[] = {a, al, mask, LLVMConstNull(vt)};
      r = intrinsic2(e, "llvm.masked.load", vt, e->ptr, args, 4);
    } else {
      r = LLVMBuildLoad2(e->b, vt, a, "");
      LLVMSetAlignment(r, align);
    }
  } else {
    LLVMValueRef iv = to_vec(v, i);
    LLVMValueRef ptrs = LLVMBuildInBoundsGEP2(e->b, et, p, &iv, 1, "");
    LLVMValueRef m = mask ? mask : LLVMConstAllOnes(LLVMVectorType(e->i1, v->w));
    LLVMValueRef args[] = {ptrs, al, m, LLVMConstNull(vt)};
    r = intrinsic2(e, "llvm.masked.gather", vt, LLVMTypeOf(ptrs), args, 4);
  }
  em_tag(e, r, e->tbaa[t]);
  if (t == LT_BOOL) r = LLVMBuildICmp(e->b, LLVMIntNE, r, LLVMConstNull(vt), "");
  return mk(r, LIR_VARYING);
}

/* a op b on classed values: scalar when uniform or unit (lir_class_bin),
 * else on vectors. Masked-off lanes of an integer division divide by 1. */
static VVal vbinop(VecLoop *v, LirBinOp op, LirType t, VVal a, VVal b,
                   LLVMValueRef mask) {
  Emitter *e = v->e;
  if (!a.v || !b.v) return none;
  bool idiv = (op == LOP_DIV || op == LOP_REM) && !lir_type_is_float(t);
  LirClass c = lir_class_bin(op, t, a.c, b.c);
  if (c == LIR_UNIFORM && idiv && mask) c = LIR_VARYING;
  if (c != LIR_VARYING) return mk(em_binop(e, op, t, a.v, b.v), c);
  LLVMValueRef x = to_vec(v, a), y = to_vec(v, b);
  if (idiv && mask)
    y = LLVMBuildSelect(e->b, mask, y,   /* a vector of 1s, not a scalar of the vector type */
                        splat(v, LLVMConstInt(LLVMGetElementType(LLVMTypeOf(y)), 1, 0)), "");
  return mk(em_binop(e, op, t, x, y), LIR_VARYING);
}

static VVal vbin(VecLoop *v, const LirExpr *x, LLVMValueRef mask) {
  const LirExpr *a = x->u.bin.a, *b = x->u.bin.b;
  LirBinOp op = x->u.bin.op;
  if ((op == LOP_AND || op == LOP_OR) && !em_is_speculatable(b)) {
    VVal av = vexpr(v, a, mask);
    LLVMValueRef c = to_vec(v, av);
    if (!c) return none;
    if (op == LOP_OR) c = LLVMBuildNot(v->e->b, c, "");
    VVal bv = vexpr(v, b, and_mask(v, mask, c));
    return bv.v ? mk(em_binop(v->e, op, LT_BOOL, to_vec(v, av), to_vec(v, bv)), LIR_VARYING)
                : none;
  }
  VVal av = vexpr(v, a, mask);
  return vbinop(v, op, a->type, av, vexpr(v, b, mask), mask);
}

static VVal vcast(VecLoop *v, const LirExpr *x, LLVMValueRef mask) {
  VVal a = vexpr(v, x->u.cast, mask);
  LirType from = x->u.cast->type, to = x->type;
  if (!a.v) return none;
  LirClass c = lir_class_cast(from, to, a.c);
  if (c != LIR_VARYING) return mk(em_convert(v->e, a.v, from, to), c);
  return mk(em_convert(v->e, to_vec(v, a), from, to), LIR_VARYING);
}

/* cond ? a : b; arms that may trap are evaluated under their lanes' mask. */
static VVal vselect(VecLoop *v, const LirExpr *x, LLVMValueRef mask) {
  const LirExpr *a = x->u.sel.a, *b = x->u.sel.b;
  VVal c = vexpr(v, x->u.sel.cond, mask), av, bv;
  if (!c.v) return none;
  LLVMValueRef cv = to_vec(v, c);
  if (em_is_speculatable(a) && em_is_speculatable(b)) {
    av = vexpr(v, a, mask), bv = vexpr(v, b, mask);
  } else {
    av = vexpr(v, a, and_mask(v, mask, cv));
    bv = vexpr(v, b, and_mask(v, mask, LLVMBuildNot(v->e->b, cv, "")));
  }
  if (!av.v || !bv.v) return none;
  if (lir_class_lanewise(lir_class_join(c.c, lir_class_join(av.c, bv.c))) == LIR_UNIFORM)
    return mk(LLVMBuildSelect(v->e->b, c.v, av.v, bv.v, ""), LIR_UNIFORM);
  return mk(LLVMBuildSelect(v->e->b, cv, to_vec(v, av), to_vec(v, bv), ""), LIR_VARYING);
}

/* x under mask (NULL = all lanes); uniform code that cannot trap, or runs
 * for all lanes, goes through the scalar emitter. */
static VVal vexpr(VecLoop *v, const LirExpr *x, LLVMValueRef mask) {
  if (!diag_ok(v->e->d)) return none;
  if (classify(v, x) == LIR_UNIFORM && (!mask || em_is_speculatable(x)))
    return mk(emit_expr(v->e, x), LIR_UNIFORM);
  switch (x->kind) {
  case LE_VAR:
    if (x->u.var == v->s->u.loop.iv) return mk(v->base, LIR_UNIT);
    if (v->inner[x->u.var->id]) return inner_value(v, x->u.var);
    return fail(v, "the body reads a reduction variable"), none;
  case LE_LOAD: return vload(v, x, mask);
  case LE_BIN: return vbin(v, x, mask);
  case LE_UN: {
    VVal a = vexpr(v, x->u.un.a, mask);
    if (!a.v) return none;
    LirClass c = lir_class_lanewise(a.c);
    LLVMValueRef r = em_unop(v->e, x->u.un.op, x->u.un.a->type,
                             c == LIR_UNIFORM ? a.v : to_vec(v, a));
    return mk(r, c);
  }
  case LE_CAST: return vcast(v, x, mask);
  case LE_SELECT: return vselect(v, x, mask);
  default: return mk(emit_expr(v->e, x), LIR_UNIFORM);
  }
}

/* ---- statements ---- */

/* Records a body variable's value; uniform values also go to its slot so
 * the scalar emitter can read them. */
static bool set_inner(VecLoop *v, const LirVar *var, VVal x) {
  if (!x.v) return false;
  if (v->vslot[var->id]) {
    LLVMBuildStore(v->e->b, to_vec(v, x), v->vslot[var->id]);
    return true;
  }
  v->val[var->id] = x;
  if (x.c == LIR_UNIFORM) {
    LLVMValueRef a = em_slot(v->e, var);
    if (!a) return false;
    LLVMBuildStore(v->e->b, x.v, a);
  }
  return true;
}

/* new in the step's lanes, old in the masked-off ones of a masked tail. */
static LLVMValueRef keep_masked(VecLoop *v, LLVMValueRef new, LLVMValueRef old) {
  return v->mask ? LLVMBuildSelect(v->e->b, v->mask, new, old, "") : new;
}

/* acc = f(acc, with) lane by lane: the fold's accumulator read as a body
 * variable while its value is computed. */
static bool vfold(VecLoop *v, const LirStmt *s) {
  const LirVar *var = s->u.assign.var;
  Emitter *e = v->e;
  LLVMTypeRef vt = LLVMVectorType(em_reg_type(e, var->type), v->w);
  v->inner[var->id] = 1;
  LLVMValueRef old = LLVMBuildLoad2(e->b, vt, v->acc[var->id], "");
  v->val[var->id] = mk(old, LIR_VARYING);
  VVal x = vexpr(v, s->u.assign.e, v->mask);
  v->inner[var->id] = 0;
  if (!x.v) return false;
  LLVMBuildStore(e->b, keep_masked(v, to_vec(v, x), old), v->acc[var->id]);
  return true;
}

static bool vassign(VecLoop *v, const LirStmt *s) {
  const LirVar *var = s->u.assign.var;
  int op = s->u.assign.op;
  if (s->u.assign.with && !v->inner[var->id]) return vfold(v, s);
  VVal x = vexpr(v, s->u.assign.e, v->mask);
  if (!x.v) return false;
  if (v->inner[var->id])
    return set_inner(v, var, op < 0 ? x : vbinop(v, (LirBinOp)op, var->type,
                                                 inner_value(v, var), x, v->mask));
  Emitter *e = v->e;
  LLVMTypeRef vt = LLVMVectorType(em_reg_type(e, var->type), v->w);
  LLVMValueRef acc = LLVMBuildLoad2(e->b, vt, v->acc[var->id], "");
  LLVMValueRef r = em_binop(e, (LirBinOp)op, var->type, acc, to_vec(v, x));
  if (!r) return false;
  LLVMBuildStore(e->b, keep_masked(v, r, acc), v->acc[var->id]);
  return true;
}

static bool vstore(VecLoop *v, const LirStmt *s) {
  Emitter *e = v->e;
  const LirExpr *p = s->u.store.ptr;
  if (classify(v, p) != LIR_UNIFORM)
    return fail(v, "store through a pointer that differs per lane");
  VVal i = vexpr(v, s->u.store.idx, v->mask);
  if (i.v && i.c != LIR_UNIT)
    return fail(v, "store at an index that is not unit-stride in the iv");
  VVal x = vexpr(v, s->u.store.e, v->mask);
  LLVMValueRef pv = emit_expr(e, p);
  if (!i.v || !x.v || !pv) return false;
  LirType t = lir_elem_type(p->type);
  LLVMTypeRef et = em_mem_type(e, t), vt = LLVMVectorType(et, v->w);
  unsigned align = (unsigned)em_elem_bytes(p->type);
  LLVMValueRef a = LLVMBuildInBoundsGEP2(e->b, et, pv, &i.v, 1, "");
  LLVMValueRef val = to_vec(v, x);
  LLVMValueRef al = LLVMConstInt(e->i32, align, 0);
  if (s->u.store.op >= 0) {
    LLVMValueRef old;
    if (v->mask) {
      LLVMValueRef args[] = {a, al, v->mask, LLVMConstNull(vt)};
      old = intrinsic2(e, "llvm.masked.load", vt, e->ptr, args, 4);
    } else {
      old = LLVMBuildLoad2(e->b, vt, a, "");
      LLVMSetAlignment(old, align);
    }
    em_tag(e, old, e->tbaa[t]);
    if (t == LT_BOOL) old = LLVMBuildICmp(e->b, LLVMIntNE, old, LLVMConstNull(vt), "");
    val = em_binop(e, (LirBinOp)s->u.store.op, t, old, val);
    if (!val) return false;
  }
  if (t == LT_BOOL) val = LLVMBuildZExt(e->b, val, vt, "");
  LLVMValueRef st;
  if (v->mask) {
    LLVMValueRef args[] = {val, a, al, v->mask};
    st = intrinsic2(e, "llvm.masked.store", vt, e->ptr, args, 4);
  } else {
    st = LLVMBuildStore(e->b, val, a);
    LLVMSetAlignment(st, align);
  }
  em_tag(e, st, e->tbaa[t]);
  return true;
}

/* A prefetch of W lanes: of the one line at a uniform index; at a
 * unit-stride one, of every line the lanes span (64-byte lines: a 32-lane
 * f64 row segment is 4 of them); at indices that differ per lane, none
 * (a hint may be dropped). */
static bool vprefetch(VecLoop *v, const LirStmt *s) {
  Emitter *e = v->e;
  const LirExpr *p = s->u.prefetch.ptr;
  if (classify(v, p) != LIR_UNIFORM) return true;
  LirClass c = classify(v, s->u.prefetch.idx);
  if (c != LIR_UNIFORM && c != LIR_UNIT) return true;
  VVal i = vexpr(v, s->u.prefetch.idx, NULL);
  if (!i.v) return false;
  if (i.c != LIR_UNIFORM && i.c != LIR_UNIT) return true;   /* a vector of indices: none */
  c = i.c;
  LLVMValueRef pv = emit_expr(e, p);
  if (!pv) return false;
  LirType t = lir_elem_type(p->type);
  int bytes = em_elem_bytes(p->type), per_line = bytes < 64 ? 64 / bytes : 1;
  int lines = c == LIR_UNIT ? ((int)v->w * bytes + 63) / 64 : 1;
  LLVMTypeRef it = LLVMTypeOf(i.v);
  for (int l = 0; l < lines; l++) {
    LLVMValueRef at = l ? LLVMBuildAdd(e->b, i.v, LLVMConstInt(it, (unsigned long long)(l * per_line), 0), "")
                        : i.v;
    em_prefetch(e, pv, t, at);
  }
  return true;
}

static bool vstmts(VecLoop *v, const LirStmt *s);

static bool vstmts_cb(void *v, const LirStmt *s) { return vstmts(v, s); }

/* A scalar loop inside the vector body: its bounds are the same for every
 * lane, its iv is uniform (kept in its scalar slot). */
static bool vnested(VecLoop *v, const LirStmt *s) {
  const LirExpr *st = s->u.loop.step;
  if (classify(v, s->u.loop.lo) != LIR_UNIFORM || classify(v, s->u.loop.hi) != LIR_UNIFORM ||
      (st && classify(v, st) != LIR_UNIFORM))
    return fail(v, "a nested loop's bounds differ per lane");
  return em_loop_with(v->e, s, emit_expr(v->e, s->u.loop.lo), NULL, vstmts_cb, v);
}

static bool vstmts(VecLoop *v, const LirStmt *s) {
  for (; s; s = s->next) {
    bool ok = true;
    switch (s->kind) {
    case LS_DECL:
      ok = set_inner(v, s->u.decl.var,
                     s->u.decl.init
                         ? vexpr(v, s->u.decl.init, v->mask)
                         : mk(LLVMConstNull(em_reg_type(v->e, s->u.decl.var->type)), LIR_UNIFORM));
      break;
    case LS_ASSIGN: ok = vassign(v, s); break;
    case LS_STORE: ok = vstore(v, s); break;
    case LS_BLOCK: ok = vstmts(v, s->u.block); break;
    case LS_FOR: ok = vnested(v, s); break;
    case LS_COMMENT: break;
    case LS_PREFETCH: ok = vprefetch(v, s); break;
    default: return fail(v, "the body holds a statement other than decl/assign/store/for");
    }
    if (!ok || !diag_ok(v->e->d)) return false;
  }
  return true;
}

/* ---- reductions ---- */

/* A <W x T> slot for a body variable carried across nested-loop trips. */
static bool carry(VecLoop *v, const LirVar *var) {
  if (v->vslot[var->id]) return true;
  LLVMTypeRef vt = LLVMVectorType(em_reg_type(v->e, var->type), v->w);
  v->vslot[var->id] = LLVMBuildAlloca(v->e->eb, vt, "vcarry");
  return v->vslot[var->id] != NULL;
}

/* Marks body declarations (and nested loop ivs), finds reductions into
 * outer variables and the body variables assigned in a deeper loop than
 * the one that declares them. */
static bool scan(VecLoop *v, const LirStmt *s, int depth) {
  for (; s; s = s->next) {
    if (s->kind == LS_DECL) {
      v->inner[s->u.decl.var->id] = 1;
      v->depth[s->u.decl.var->id] = depth;
    }
    if (s->kind == LS_BLOCK && !scan(v, s->u.block, depth)) return false;
    if (s->kind == LS_FOR) {
      v->inner[s->u.loop.iv->id] = 1;
      v->depth[s->u.loop.iv->id] = depth + 1;
      if (!scan(v, s->u.loop.body, depth + 1)) return false;
    }
    if (s->kind != LS_ASSIGN) continue;
    if (v->inner[s->u.assign.var->id]) {
      if (depth > v->depth[s->u.assign.var->id] && !carry(v, s->u.assign.var)) return false;
      continue;
    }
    const LirVar *var = s->u.assign.var;
    if (var == v->s->u.loop.iv) return fail(v, "the body assigns the iv");
    int op = s->u.assign.op, fam = s->u.assign.with ? FAM_FOLD : op == LOP_SUB ? LOP_ADD : op;
    bool num = lir_type_is_int(var->type) || lir_type_is_float(var->type);
    if (fam == FAM_FOLD) {
      if (v->fold[var->id] && v->fold[var->id]->u.assign.e != s->u.assign.e)
        return fail(v, "one reduction variable folded twice");
      v->fold[var->id] = s;
    }
    if (!num || (!lir_bin_reduces(fam) && fam != FAM_FOLD))
      return fail(v, "the body assigns an outer variable other than by +=, *=, min or max");
    if (v->red[var->id] && v->red[var->id] != fam + 1)
      return fail(v, "one reduction variable updated with two operators");
    if (!v->red[var->id]) v->rvars[v->nred++] = var;
    v->red[var->id] = fam + 1;
  }
  return true;
}

static LLVMValueRef identity(Emitter *e, LirType t, int fam) {
  LLVMTypeRef rt = em_reg_type(e, t);
  switch (fam) {
  case LOP_MUL: return lir_type_is_float(t) ? LLVMConstReal(rt, 1) : LLVMConstInt(rt, 1, 0);
  case LOP_MIN:
    return lir_type_is_float(t) ? LLVMConstReal(rt, INFINITY)
                                : LLVMConstInt(rt, (unsigned long long)lir_int_max(t), 1);
  case LOP_MAX:
    return lir_type_is_float(t) ? LLVMConstReal(rt, -INFINITY)
                                : LLVMConstInt(rt, (unsigned long long)lir_int_min(t), 1);
  default: return LLVMConstNull(rt);
  }
}

/* A fold's lanes, one at a time through its operator f(var, with) in
 * the scalar emitter: s = f(s, acc[0]); ...; s = f(s, acc[W-1]). */
static bool combine_fold(VecLoop *v, const LirVar *var, LLVMValueRef acc) {
  Emitter *e = v->e;
  const LirStmt *f = v->fold[var->id];
  LLVMValueRef slot = em_slot(e, var), wslot = em_slot(e, f->u.assign.with);
  if (!slot || !wslot) return false;
  for (unsigned q = 0; q < v->w; q++) {
    LLVMBuildStore(e->b, LLVMBuildExtractElement(e->b, acc, LLVMConstInt(e->i32, q, 0), ""),
                   wslot);
    LLVMValueRef r = emit_expr(e, f->u.assign.e);
    if (!r) return false;
    LLVMBuildStore(e->b, r, slot);
  }
  return true;
}

/* s = s op reduce(acc), float sums and products reassociated. */
static bool combine(VecLoop *v, const LirVar *var) {
  static const char *fname[] = {[LOP_ADD] = "llvm.vector.reduce.fadd",
      [LOP_MUL] = "llvm.vector.reduce.fmul", [LOP_MIN] = "llvm.vector.reduce.fmin",
      [LOP_MAX] = "llvm.vector.reduce.fmax"};
  static const char *iname[] = {[LOP_ADD] = "llvm.vector.reduce.add",
      [LOP_MUL] = "llvm.vector.reduce.mul", [LOP_MIN] = "llvm.vector.reduce.smin",
      [LOP_MAX] = "llvm.vector.reduce.smax"};
  Emitter *e = v->e;
  int fam = v->red[var->id] - 1;
  LLVMTypeRef vt = LLVMVectorType(em_reg_type(e, var->type), v->w);
  LLVMValueRef slot = em_slot(e, var);
  if (!slot) return false;
  LLVMValueRef acc = LLVMBuildLoad2(e->b, vt, v->acc[var->id], "");
  if (fam == FAM_FOLD) return combine_fold(v, var, acc);
  LLVMValueRef s = LLVMBuildLoad2(e->b, em_reg_type(e, var->type), slot, ""), r;
  if (lir_type_is_float(var->type) && (fam == LOP_ADD || fam == LOP_MUL)) {
    LLVMValueRef args[] = {s, acc};
    r = em_intrinsic(e, fname[fam], vt, args, 2);
    LLVMSetFastMathFlags(r, LLVMFastMathAllowReassoc |
                                (e->contract ? LLVMFastMathAllowContract : 0));
  } else {
    const char *name = lir_type_is_float(var->type) ? fname[fam]
                       : lir_type_is_unsigned(var->type) && fam == LOP_MIN ? "llvm.vector.reduce.umin"
                       : lir_type_is_unsigned(var->type) && fam == LOP_MAX ? "llvm.vector.reduce.umax"
                                                                           : iname[fam];
    r = em_binop(e, (LirBinOp)fam, var->type, s, em_intrinsic(e, name, vt, &acc, 1));
  }
  if (!r) return false;
  LLVMBuildStore(e->b, r, slot);
  return true;
}

/* ---- the loop ---- */

void em_loop_hints(Emitter *e, LLVMValueRef br, LoopAttrs at, bool no_vectorize) {
  LLVMMetadataRef ops[4];
  unsigned n = 1;
  if (at.vec_width > 1 || no_vectorize) {
    LLVMMetadataRef w[] = {em_md_str(e, "llvm.loop.vectorize.width"),
                           em_md_int(e->i32, at.vec_width)};
    LLVMMetadataRef en[] = {em_md_str(e, "llvm.loop.vectorize.enable"),
                            em_md_int(e->i1, !no_vectorize)};
    if (!no_vectorize) ops[n++] = LLVMMDNodeInContext2(e->cx, w, 2);
    ops[n++] = LLVMMDNodeInContext2(e->cx, en, 2);
  }
  if (at.unroll > 0) {
    LLVMMetadataRef u[] = {em_md_str(e, "llvm.loop.unroll.count"),
                           em_md_int(e->i32, at.unroll)};
    ops[n++] = LLVMMDNodeInContext2(e->cx, u, 2);
  } else if (at.remainder || at.scalar) {
    LLVMMetadataRef u[] = {em_md_str(e, "llvm.loop.unroll.disable")};
    ops[n++] = LLVMMDNodeInContext2(e->cx, u, 1);
  }
  if (n == 1) return;
  LLVMMetadataRef tmp = LLVMTemporaryMDNode(e->cx, NULL, 0);
  ops[0] = tmp;
  LLVMMetadataRef node = LLVMMDNodeInContext2(e->cx, ops, n);
  LLVMMetadataReplaceAllUsesWith(tmp, node);  /* also disposes tmp */
  LLVMSetMetadata(br, e->loop_kind, LLVMMetadataAsValue(e->cx, node));
}

static bool has_for(const LirStmt *s) {
  for (; s; s = s->next)
    if (s->kind == LS_FOR || s->kind == LS_WHILE ||
        (s->kind == LS_BLOCK && has_for(s->u.block)))
      return true;
  return false;
}

const LirStmt *emit_masked_tail(const LirStmt *s) {
  const LirStmt *t = s->next;
  const LirExpr *hi = s->u.loop.hi;
  if (!s->u.loop.at.masked_tail || !t || t->kind != LS_FOR || !t->u.loop.at.remainder ||
      t->u.loop.iv != s->u.loop.iv || t->u.loop.body != s->u.loop.body ||
      hi->kind != LE_VAR || t->u.loop.lo->kind != LE_VAR || t->u.loop.lo->u.var != hi->u.var ||
      (t->u.loop.step && !(t->u.loop.step->kind == LE_CONST && t->u.loop.step->u.c.i == 1)) ||
      has_for(s->u.loop.body))
    return NULL;
  return t;
}

/* The remainder tail (fewer than W trips from the vector loop's end) as
 * one step under the mask base + lane < hi, into the loop's accumulators:
 *   if (base < hi) { <W-lane body, masked> } */
static bool masked_step(VecLoop *v, const LirStmt *tail) {
  Emitter *e = v->e;
  LLVMValueRef base = emit_expr(e, tail->u.loop.lo), hi = emit_expr(e, tail->u.loop.hi);
  if (!base || !hi) return false;
  LLVMBasicBlockRef step = em_new_block(e, "vtail"), end = em_new_block(e, "vtail.end");
  LLVMBuildCondBr(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, base, hi, ""), step, end);
  LLVMPositionBuilderAtEnd(e->b, step);
  v->base = base;
  LLVMValueRef lanes = to_vec(v, mk(base, LIR_UNIT));
  v->mask = LLVMBuildICmp(e->b, LLVMIntSLT, lanes, splat(v, hi), "");
  bool ok = vstmts(v, tail->u.loop.body);
  v->mask = NULL;
  if (!ok) return false;
  LLVMBuildBr(e->b, end);
  LLVMPositionBuilderAtEnd(e->b, end);
  return true;
}

/* Emits, for reductions r:
 *          lo < hi ? init : done             (only with reductions; hi:
 *                                             a masked tail's bound)
 *   init:  acc_r = splat(identity); iv = lo; br cond
 *   cond:  iv < hi ? body : exit
 *   body:  <W-lane body>; iv += W; br cond  (!llvm.loop vectorize.enable false)
 *   exit:  [masked tail: masked_step]; r = r op reduce(acc_r); br done
 * The guard keeps a row too short for the vector loop (a gather loop takes
 * it from 2W entries on) off the horizontal reduction, whose latency would
 * otherwise lead its scalar remainder's chain: SpMV on luxembourg_osm (2 a
 * row) 0.29 -> 0.20 ms, wiki-Vote 0.055 -> 0.041, cage11 0.206 -> 0.202
 * (the same loops in C, thread CPU time, medians of 41). */
static bool emit_loop(VecLoop *v) {
  Emitter *e = v->e;
  const LirStmt *s = v->s;
  LLVMBasicBlockRef done = NULL;
  const LirStmt *tail = emit_masked_tail(s);
  if (v->nred > 0) {   /* with a masked tail, up to the tail's bound */
    LLVMValueRef lo0 = emit_expr(e, s->u.loop.lo);
    LLVMValueRef hi0 = emit_expr(e, (tail ? tail : s)->u.loop.hi);
    if (!lo0 || !hi0) return false;
    LLVMBasicBlockRef init = em_new_block(e, "vfor.init");
    done = em_new_block(e, "vfor.done");
    LLVMBuildCondBr(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, lo0, hi0, ""), init, done);
    LLVMPositionBuilderAtEnd(e->b, init);
  }
  for (int q = 0; q < v->nred; q++) {
    const LirVar *r = v->rvars[q];
    LLVMTypeRef vt = LLVMVectorType(em_reg_type(e, r->type), v->w);
    v->acc[r->id] = LLVMBuildAlloca(e->eb, vt, "vacc");
    int fam = v->red[r->id] - 1;
    LLVMValueRef id = fam == FAM_FOLD ? emit_expr(e, v->fold[r->id]->u.assign.identity)
                                      : identity(e, r->type, fam);
    if (!id) return false;
    LLVMBuildStore(e->b, splat(v, id), v->acc[r->id]);
  }
  LLVMValueRef a = em_slot(e, s->u.loop.iv), lo = emit_expr(e, s->u.loop.lo);
  if (!a || !lo) return false;
  LLVMBuildStore(e->b, lo, a);
  LLVMBasicBlockRef cond = em_new_block(e, "vfor.cond"), body = em_new_block(e, "vfor.body");
  LLVMBasicBlockRef exit = em_new_block(e, "vfor.end");
  LLVMTypeRef t = em_reg_type(e, s->u.loop.iv->type);
  LLVMBuildBr(e->b, cond);
  LLVMPositionBuilderAtEnd(e->b, cond);
  v->base = LLVMBuildLoad2(e->b, t, a, "");
  LLVMValueRef hi = emit_expr(e, s->u.loop.hi);
  if (!hi) return false;
  LLVMBuildCondBr(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, v->base, hi, ""), body, exit);
  LLVMPositionBuilderAtEnd(e->b, body);
  if (!vstmts(v, s->u.loop.body)) return false;
  LLVMBuildStore(e->b, LLVMBuildNSWAdd(e->b, v->base, LLVMConstInt(t, v->w, 0), ""), a);
  em_loop_hints(e, LLVMBuildBr(e->b, cond), s->u.loop.at, true);
  LLVMPositionBuilderAtEnd(e->b, exit);
  if (tail && !masked_step(v, tail)) return false;
  for (int q = 0; q < v->nred; q++)
    if (!combine(v, v->rvars[q])) return false;
  if (done) {
    LLVMBuildBr(e->b, done);
    LLVMPositionBuilderAtEnd(e->b, done);
  }
  return true;
}

bool emit_vector_for(Emitter *e, const LirStmt *s) {
  size_t n = (size_t)e->k->nvars + 1;
  VecLoop v = {.e = e, .s = s, .w = (unsigned)s->u.loop.at.vec_width};
  v.inner = calloc(n, 1);
  v.val = calloc(n, sizeof *v.val);
  v.red = calloc(n, sizeof *v.red);
  v.acc = calloc(n, sizeof *v.acc);
  v.rvars = calloc(n, sizeof *v.rvars);
  v.depth = calloc(n, sizeof *v.depth);
  v.vslot = calloc(n, sizeof *v.vslot);
  v.fold = calloc(n, sizeof *v.fold);
  bool ok = v.inner && v.val && v.red && v.acc && v.rvars && v.depth && v.vslot && v.fold;
  if (!ok) diag_error(e->d, TJ_ERR_NOMEM, "out of memory emitting a vector loop");
  ok = ok && scan(&v, s->u.loop.body, 0) && emit_loop(&v);
  free(v.inner);
  free(v.val);
  free(v.red);
  free(v.acc);
  free(v.rvars);
  free(v.depth);
  free(v.vslot);
  free(v.fold);
  return ok;
}

/* Loop IR -> LLVM IR through the LLVM-C builder.
 *
 * The kernel is laid out as
 *   entry:   allocas for every variable (zero / null), operand pointers
 *   body:    the statements; then rc = 0; br cleanup
 *   (any failing helper call stores its code in rc and branches to cleanup)
 *   cleanup: the cleanup statements; ret rc
 * Loads and stores of tensor arrays carry TBAA tags by element type and the
 * tj_storage fields their own tag, so LLVM may keep array bases, lengths and
 * accumulators in registers across stores to value arrays.
 */
#include "emit_internal.h"

#include <llvm-c/DebugInfo.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../runtime/abi.h"


/* ---- types, slots, metadata ---- */

LLVMTypeRef em_reg_type(Emitter *e, LirType t) {
  switch (t) {
  case LT_BOOL: return e->i1;
  case LT_I8: case LT_U8: return e->i8;
  case LT_I16: case LT_U16: return e->i16;
  case LT_I32: case LT_U32: return e->i32;
  case LT_I64: case LT_U64: return e->i64;
  case LT_F32: return e->f32;
  case LT_F64: return e->f64;
  case LT_VOID: return e->vd;
  default: return e->ptr;
  }
}

/* Booleans are bytes in memory. */
LLVMTypeRef em_mem_type(Emitter *e, LirType t) {
  return t == LT_BOOL ? e->i8 : em_reg_type(e, t);
}

static LLVMValueRef zero_of(Emitter *e, LirType t) {
  return LLVMConstNull(em_reg_type(e, t));
}

bool em_bug(Emitter *e, const char *what) { return TJ_BUG(e->d, what); }

LLVMMetadataRef em_md_str(Emitter *e, const char *s) {
  return LLVMMDStringInContext2(e->cx, s, strlen(s));
}

LLVMMetadataRef em_md_int(LLVMTypeRef t, long long v) {
  return LLVMValueAsMetadata(LLVMConstInt(t, (unsigned long long)v, 1));
}

/* Scalar TBAA: one root, one type node per element type and one for the
 * tj_storage fields; distinct siblings never alias. */
static void tbaa_init(Emitter *e) {
  static const char *names[NTYPES] = {
      [LT_BOOL] = "bool", [LT_I8] = "int8", [LT_I16] = "int16",
      [LT_I32] = "int32", [LT_I64] = "int64", /* unsigned alias signed, as in C */
      [LT_U8] = "int8", [LT_U16] = "int16", [LT_U32] = "int32", [LT_U64] = "int64",
      [LT_F32] = "float", [LT_F64] = "double"};
  LLVMMetadataRef root_ops[] = {em_md_str(e, "tensorjit tbaa")};
  LLVMMetadataRef root = LLVMMDNodeInContext2(e->cx, root_ops, 1);
  e->tbaa_kind = LLVMGetMDKindIDInContext(e->cx, "tbaa", 4);
  for (int t = 0; t <= NTYPES; t++) {
    const char *name = t == NTYPES ? "tj_storage field" : names[t];
    if (!name) continue;
    LLVMMetadataRef ty_ops[] = {em_md_str(e, name), root, em_md_int(e->i64, 0)};
    LLVMMetadataRef ty = LLVMMDNodeInContext2(e->cx, ty_ops, 3);
    LLVMMetadataRef tag_ops[] = {ty, ty, em_md_int(e->i64, 0)};
    LLVMValueRef tag =
        LLVMMetadataAsValue(e->cx, LLVMMDNodeInContext2(e->cx, tag_ops, 3));
    if (t == NTYPES) e->tbaa_field = tag;
    else e->tbaa[t] = tag;
  }
}

void em_tag(Emitter *e, LLVMValueRef inst, LLVMValueRef node) {
  if (node) LLVMSetMetadata(inst, e->tbaa_kind, node);
}

/* The alloca of v, created zero-initialized in the entry block on first use
 * (so cleanup code reached from an early failure sees null pointers). */
LLVMValueRef em_slot(Emitter *e, const LirVar *v) {
  if (!v || v->id < 0 || v->id >= e->k->nvars) {
    em_bug(e, "loop IR variable out of range");
    return NULL;
  }
  if (!e->slots[v->id]) {
    LLVMTypeRef t = em_reg_type(e, v->type);
    LLVMValueRef a = LLVMBuildAlloca(e->eb, t, v->name ? v->name : "v");
    LLVMBuildStore(e->eb, LLVMConstNull(t), a);
    e->slots[v->id] = a;
  }
  return e->slots[v->id];
}

LLVMValueRef em_intrinsic(Emitter *e, const char *name, LLVMTypeRef t,
                              LLVMValueRef *args, unsigned n) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  LLVMValueRef f = LLVMGetIntrinsicDeclaration(e->m, id, &t, 1);
  LLVMTypeRef ft = LLVMIntrinsicGetType(e->cx, id, &t, 1);
  return LLVMBuildCall2(e->b, ft, f, args, n, "");
}

LLVMValueRef em_helper(Emitter *e, const char *name, LLVMTypeRef ret,
                           LLVMTypeRef *params, unsigned n,
                           LLVMValueRef *args) {
  LLVMTypeRef ft = LLVMFunctionType(ret, params, n, 0);
  LLVMValueRef f = LLVMGetNamedFunction(e->m, name);
  if (!f) {
    f = LLVMAddFunction(e->m, name, ft);
    unsigned nounwind = LLVMGetEnumAttributeKindForName("nounwind", 8);
    LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex,
                            LLVMCreateEnumAttribute(e->cx, nounwind, 0));
  }
  return LLVMBuildCall2(e->b, ft, f, args, n, "");
}

LLVMBasicBlockRef em_new_block(Emitter *e, const char *name) {
  return LLVMAppendBasicBlockInContext(e->cx, e->fn, name);
}

/* ---- expressions ---- */


/* Byte offset of an operand field in tj_storage. */
static bool field_offset(Emitter *e, LirField f, int level, size_t *off) {
  size_t lv = offsetof(tj_storage, levels) +
              (size_t)level * sizeof(tj_level_storage);
  if (f != LF_VALS && f != LF_VALS_LEN &&
      (level < 0 || level >= TJ_MAX_ORDER))
    return em_bug(e, "operand field level out of range");
  switch (f) {
  case LF_DIM: *off = offsetof(tj_storage, dims) + 8 * (size_t)level; break;
  case LF_LVL_SIZE: *off = lv + offsetof(tj_level_storage, size); break;
  case LF_POS: *off = lv + offsetof(tj_level_storage, pos); break;
  case LF_CRD: *off = lv + offsetof(tj_level_storage, crd); break;
  case LF_POS_LEN: *off = lv + offsetof(tj_level_storage, pos_len); break;
  case LF_CRD_LEN: *off = lv + offsetof(tj_level_storage, crd_len); break;
  case LF_VALS: *off = offsetof(tj_storage, vals); break;
  case LF_VALS_LEN: *off = offsetof(tj_storage, vals_len); break;
  case LF_SLICE_OFF: case LF_SLICE_SIZE: case LF_SLICE_STRIDE:
    *off = offsetof(tj_storage, slice) + 8 * (3 * (size_t)level + (size_t)(f - LF_SLICE_OFF));
    break;
  default: return em_bug(e, "unknown operand field");
  }
  return true;
}

static LLVMValueRef field_addr(Emitter *e, int operand, LirField f,
                               int level) {
  size_t off = 0;
  if (operand < 0 || operand >= e->k->noperands) {
    em_bug(e, "operand index out of range");
    return NULL;
  }
  if (!field_offset(e, f, level, &off)) return NULL;
  LLVMValueRef idx = LLVMConstInt(e->i64, off, 0);
  return LLVMBuildInBoundsGEP2(e->b, e->i8, e->ops[operand], &idx, 1, "");
}

static LLVMValueRef emit_field(Emitter *e, const LirExpr *x) {
  LLVMValueRef a = field_addr(e, x->u.field.operand, x->u.field.field,
                              x->u.field.level);
  if (!a) return NULL;
  LLVMValueRef v = LLVMBuildLoad2(e->b, em_reg_type(e, x->type), a, "");
  em_tag(e, v, e->tbaa_field);
  return v;
}

static LLVMValueRef elem_addr(Emitter *e, const LirExpr *p, const LirExpr *i,
                              LirType *elem) {
  if (!p || !i || !lir_type_is_ptr(p->type) || !lir_type_is_int(i->type)) {
    em_bug(e, "load/store needs a pointer and an integer index");
    return NULL;
  }
  LLVMValueRef pv = emit_expr(e, p), iv = emit_expr(e, i);
  if (!pv || !iv) return NULL;
  *elem = lir_elem_type(p->type);
  return LLVMBuildInBoundsGEP2(e->b, em_mem_type(e, *elem), pv, &iv, 1, "");
}

static LLVMValueRef load_elem(Emitter *e, LLVMValueRef addr, LirType t) {
  LLVMValueRef v = LLVMBuildLoad2(e->b, em_mem_type(e, t), addr, "");
  em_tag(e, v, e->tbaa[t]);
  if (t == LT_BOOL) v = LLVMBuildICmp(e->b, LLVMIntNE, v,
                                      LLVMConstInt(e->i8, 0, 0), "");
  return v;
}

static void store_elem(Emitter *e, LLVMValueRef addr, LirType t,
                       LLVMValueRef v) {
  if (t == LT_BOOL) v = LLVMBuildZExt(e->b, v, e->i8, "");
  em_tag(e, LLVMBuildStore(e->b, v, addr), e->tbaa[t]);
}

static LLVMValueRef emit_load(Emitter *e, const LirExpr *x) {
  LirType t;
  LLVMValueRef a = elem_addr(e, x->u.load.ptr, x->u.load.idx, &t);
  return a ? load_elem(e, a, t) : NULL;
}

static LLVMValueRef int_minmax_cmp(Emitter *e, LirBinOp op, bool is_unsigned,
                                   LLVMValueRef a, LLVMValueRef b) {
  LLVMValueRef args[] = {a, b};
  const char *name = op == LOP_MIN ? (is_unsigned ? "llvm.umin" : "llvm.smin")
                                   : (is_unsigned ? "llvm.umax" : "llvm.smax");
  return em_intrinsic(e, name, LLVMTypeOf(a), args, 2);
}

/* Signed integers add, subtract and multiply with nsw; unsigned ones wrap
 * (no flag) and divide, compare, min and max as unsigned. */
static LLVMValueRef int_binop(Emitter *e, LirBinOp op, bool is_unsigned, LLVMValueRef a,
                              LLVMValueRef b) {
  static const LLVMIntPredicate pred[2][LOP_OR + 1] = {
      {[LOP_LT] = LLVMIntSLT, [LOP_LE] = LLVMIntSLE, [LOP_GT] = LLVMIntSGT,
       [LOP_GE] = LLVMIntSGE, [LOP_EQ] = LLVMIntEQ, [LOP_NE] = LLVMIntNE},
      {[LOP_LT] = LLVMIntULT, [LOP_LE] = LLVMIntULE, [LOP_GT] = LLVMIntUGT,
       [LOP_GE] = LLVMIntUGE, [LOP_EQ] = LLVMIntEQ, [LOP_NE] = LLVMIntNE}};
  bool u = is_unsigned;
  switch (op) {
  case LOP_ADD: return u ? LLVMBuildAdd(e->b, a, b, "") : LLVMBuildNSWAdd(e->b, a, b, "");
  case LOP_SUB: return u ? LLVMBuildSub(e->b, a, b, "") : LLVMBuildNSWSub(e->b, a, b, "");
  case LOP_MUL: return u ? LLVMBuildMul(e->b, a, b, "") : LLVMBuildNSWMul(e->b, a, b, "");
  case LOP_DIV: return u ? LLVMBuildUDiv(e->b, a, b, "") : LLVMBuildSDiv(e->b, a, b, "");
  case LOP_REM: return u ? LLVMBuildURem(e->b, a, b, "") : LLVMBuildSRem(e->b, a, b, "");
  case LOP_MIN: case LOP_MAX: return int_minmax_cmp(e, op, u, a, b);
  case LOP_POW:
    em_bug(e, "pow on integer operands");
    return NULL;
  case LOP_AND: return LLVMBuildAnd(e->b, a, b, "");
  case LOP_OR: return LLVMBuildOr(e->b, a, b, "");
  default: return LLVMBuildICmp(e->b, pred[u][op], a, b, "");
  }
}

static LLVMValueRef contract(Emitter *e, LLVMValueRef inst) {
  if (e->contract) LLVMSetFastMathFlags(inst, LLVMFastMathAllowContract);
  return inst;
}

static LLVMValueRef float_binop(Emitter *e, LirBinOp op, LLVMValueRef a,
                                LLVMValueRef b) {
  static const LLVMRealPredicate pred[] = {
      [LOP_LT] = LLVMRealOLT, [LOP_LE] = LLVMRealOLE, [LOP_GT] = LLVMRealOGT,
      [LOP_GE] = LLVMRealOGE, [LOP_EQ] = LLVMRealOEQ, [LOP_NE] = LLVMRealUNE};
  LLVMValueRef args[] = {a, b};
  switch (op) {
  case LOP_ADD: return contract(e, LLVMBuildFAdd(e->b, a, b, ""));
  case LOP_SUB: return contract(e, LLVMBuildFSub(e->b, a, b, ""));
  case LOP_MUL: return contract(e, LLVMBuildFMul(e->b, a, b, ""));
  case LOP_DIV: return LLVMBuildFDiv(e->b, a, b, "");
  case LOP_REM: return LLVMBuildFRem(e->b, a, b, "");
  case LOP_POW: return em_intrinsic(e, "llvm.pow", LLVMTypeOf(a), args, 2);
  case LOP_MIN: return em_intrinsic(e, "llvm.minnum", LLVMTypeOf(a), args, 2);
  case LOP_MAX: return em_intrinsic(e, "llvm.maxnum", LLVMTypeOf(a), args, 2);
  case LOP_AND: case LOP_OR:
    em_bug(e, "logical operator on floating operands");
    return NULL;
  default: return LLVMBuildFCmp(e->b, pred[op], a, b, "");
  }
}

/* a op b where both are registers of loop IR type t (the operand type). */
LLVMValueRef em_binop(Emitter *e, LirBinOp op, LirType t, LLVMValueRef a,
                          LLVMValueRef b) {
  if (!a || !b) return NULL;
  if ((unsigned)op > LOP_OR) {
    em_bug(e, "unknown binary operator");
    return NULL;
  }
  if (lir_type_is_float(t)) return float_binop(e, op, a, b);
  if (lir_type_is_int(t) || t == LT_BOOL) return int_binop(e, op, lir_type_is_unsigned(t), a, b);
  em_bug(e, "binary operator on a pointer or void");
  return NULL;
}

/* True when evaluating x cannot trap (no loads, no integer division), so it
 * may run unconditionally instead of behind a branch. */
static LirVisit may_trap(const LirExpr *x, void *cx) {
  (void)cx;
  bool int_div = x->kind == LE_BIN && (x->u.bin.op == LOP_DIV || x->u.bin.op == LOP_REM) &&
                 !lir_type_is_float(x->u.bin.a->type);
  return x->kind == LE_LOAD || int_div ? LV_STOP : LV_DESCEND;
}

bool em_is_speculatable(const LirExpr *x) { return !lir_expr_walk(x, may_trap, NULL); }

/* c ? a : b with a and b evaluated only on their own branch (C semantics;
 * also used for && and ||). */
static LLVMValueRef branchy_select(Emitter *e, LLVMValueRef c,
                                   const LirExpr *a, LLVMValueRef a_val,
                                   const LirExpr *b, LLVMValueRef b_val) {
  LLVMBasicBlockRef then = em_new_block(e, "sel.a"), els = em_new_block(e, "sel.b");
  LLVMBasicBlockRef join = em_new_block(e, "sel.join");
  LLVMBuildCondBr(e->b, c, then, els);
  LLVMPositionBuilderAtEnd(e->b, then);
  LLVMValueRef av = a ? emit_expr(e, a) : a_val;
  LLVMBasicBlockRef then_end = LLVMGetInsertBlock(e->b);
  LLVMBuildBr(e->b, join);
  LLVMPositionBuilderAtEnd(e->b, els);
  LLVMValueRef bv = b ? emit_expr(e, b) : b_val;
  LLVMBasicBlockRef els_end = LLVMGetInsertBlock(e->b);
  LLVMBuildBr(e->b, join);
  LLVMPositionBuilderAtEnd(e->b, join);
  if (!av || !bv) return NULL;
  LLVMValueRef phi = LLVMBuildPhi(e->b, LLVMTypeOf(av), "");
  LLVMValueRef vals[] = {av, bv};
  LLVMBasicBlockRef from[] = {then_end, els_end};
  LLVMAddIncoming(phi, vals, from, 2);
  return phi;
}

static LLVMValueRef emit_bin(Emitter *e, const LirExpr *x) {
  const LirExpr *a = x->u.bin.a, *b = x->u.bin.b;
  if (!a || !b || a->type != b->type) {
    em_bug(e, "binary operands differ in type");
    return NULL;
  }
  LirBinOp op = x->u.bin.op;
  if ((op == LOP_AND || op == LOP_OR) && !em_is_speculatable(b)) {
    LLVMValueRef av = emit_expr(e, a);
    if (!av) return NULL;
    LLVMValueRef t = LLVMConstInt(e->i1, 1, 0), f = LLVMConstInt(e->i1, 0, 0);
    return op == LOP_AND ? branchy_select(e, av, b, NULL, NULL, f)
                         : branchy_select(e, av, NULL, t, b, NULL);
  }
  return em_binop(e, op, a->type, emit_expr(e, a), emit_expr(e, b));
}

LLVMValueRef em_unop(Emitter *e, LirUnOp op, LirType t, LLVMValueRef a) {
  static const char *fname[] = {[LUN_SQRT] = "llvm.sqrt", [LUN_ABS] = "llvm.fabs",
                                [LUN_EXP] = "llvm.exp", [LUN_LOG] = "llvm.log"};
  if (!a) return NULL;
  bool fp = lir_type_is_float(t);
  switch (op) {
  case LUN_NEG: return fp ? LLVMBuildFNeg(e->b, a, "") : LLVMBuildNeg(e->b, a, "");
  case LUN_NOT:
    if (t == LT_BOOL) return LLVMBuildNot(e->b, a, "");
    return fp ? LLVMBuildFCmp(e->b, LLVMRealOEQ, a, LLVMConstNull(LLVMTypeOf(a)), "")
              : LLVMBuildICmp(e->b, LLVMIntEQ, a, LLVMConstNull(LLVMTypeOf(a)), "");
  case LUN_ABS:
    if (lir_type_is_unsigned(t)) return a;
    if (!fp) {
      LLVMValueRef args[] = {a, LLVMConstInt(e->i1, 0, 0)};
      return em_intrinsic(e, "llvm.abs", LLVMTypeOf(a), args, 2);
    }
    /* fall through */
  case LUN_SQRT: case LUN_EXP: case LUN_LOG:
    if (!fp) break;
    return em_intrinsic(e, fname[op], LLVMTypeOf(a), &a, 1);
  }
  em_bug(e, "unary operator not defined on this type");
  return NULL;
}

LLVMValueRef em_convert(Emitter *e, LLVMValueRef v, LirType from, LirType to) {
  if (!v) return NULL;
  LLVMTypeRef tt = em_reg_type(e, to), vt = LLVMTypeOf(v);
  if (LLVMGetTypeKind(vt) == LLVMVectorTypeKind)
    tt = LLVMVectorType(tt, LLVMGetVectorSize(vt));
  if (from == to || (lir_type_is_ptr(from) && lir_type_is_ptr(to))) return v;
  if (to == LT_BOOL)
    return lir_type_is_float(from)
               ? LLVMBuildFCmp(e->b, LLVMRealUNE, v, LLVMConstNull(LLVMTypeOf(v)), "")
               : LLVMBuildICmp(e->b, LLVMIntNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
  if (from == LT_BOOL)
    return lir_type_is_float(to) ? LLVMBuildUIToFP(e->b, v, tt, "")
                                 : LLVMBuildZExt(e->b, v, tt, "");
  /* widening extends by the source's signedness (zext from unsigned) */
  if (lir_type_is_int(from) && lir_type_is_int(to))
    return LLVMBuildIntCast2(e->b, v, tt, !lir_type_is_unsigned(from), "");
  if (lir_type_is_int(from) && lir_type_is_float(to))
    return lir_type_is_unsigned(from) ? LLVMBuildUIToFP(e->b, v, tt, "")
                                      : LLVMBuildSIToFP(e->b, v, tt, "");
  if (lir_type_is_float(from) && lir_type_is_int(to))
    return lir_type_is_unsigned(to) ? LLVMBuildFPToUI(e->b, v, tt, "")
                                    : LLVMBuildFPToSI(e->b, v, tt, "");
  if (lir_type_is_float(from) && lir_type_is_float(to))
    return LLVMBuildFPCast(e->b, v, tt, "");
  em_bug(e, "unsupported cast");
  return NULL;
}

static LLVMValueRef emit_select(Emitter *e, const LirExpr *x) {
  const LirExpr *a = x->u.sel.a, *b = x->u.sel.b;
  if (!a || !b || a->type != b->type || x->u.sel.cond->type != LT_BOOL) {
    em_bug(e, "select needs a bool condition and arms of one type");
    return NULL;
  }
  LLVMValueRef c = emit_expr(e, x->u.sel.cond);
  if (!c) return NULL;
  if (!em_is_speculatable(a) || !em_is_speculatable(b))
    return branchy_select(e, c, a, NULL, b, NULL);
  LLVMValueRef av = emit_expr(e, a), bv = emit_expr(e, b);
  return av && bv ? LLVMBuildSelect(e->b, c, av, bv, "") : NULL;
}

static LLVMValueRef emit_const(Emitter *e, const LirExpr *x) {
  if (lir_type_is_float(x->type))
    return LLVMConstReal(em_reg_type(e, x->type), x->u.c.f);
  if (lir_type_is_ptr(x->type)) return LLVMConstNull(e->ptr);
  if (x->type == LT_BOOL) return LLVMConstInt(e->i1, x->u.c.i != 0, 0);
  return LLVMConstInt(em_reg_type(e, x->type), (unsigned long long)x->u.c.i, 1);
}

LLVMValueRef emit_expr(Emitter *e, const LirExpr *x) {
  if (!diag_ok(e->d)) return NULL;
  if (!x) {
    em_bug(e, "missing loop IR expression");
    return NULL;
  }
  LLVMValueRef s;
  switch (x->kind) {
  case LE_CONST: return emit_const(e, x);
  case LE_VAR:
    s = em_slot(e, x->u.var);
    return s ? LLVMBuildLoad2(e->b, em_reg_type(e, x->type), s, "") : NULL;
  case LE_FIELD: return emit_field(e, x);
  case LE_LOAD: return emit_load(e, x);
  case LE_BIN: return emit_bin(e, x);
  case LE_UN: return em_unop(e, x->u.un.op, x->u.un.a->type, emit_expr(e, x->u.un.a));
  case LE_CAST:
    return em_convert(e, emit_expr(e, x->u.cast), x->u.cast->type, x->type);
  case LE_SELECT: return emit_select(e, x);
  }
  em_bug(e, "unknown loop IR expression kind");
  return NULL;
}

/* ---- statements ---- */


static bool same_type(Emitter *e, LirType got, LirType want, const char *what) {
  return got == want ? true : em_bug(e, what);
}

static bool emit_assign(Emitter *e, const LirStmt *s) {
  const LirVar *v = s->u.assign.var;
  LLVMValueRef a = em_slot(e, v);
  if (!a || !s->u.assign.e ||
      !same_type(e, s->u.assign.e->type, v->type, "assignment type mismatch"))
    return false;
  LLVMValueRef x = emit_expr(e, s->u.assign.e);
  if (x && s->u.assign.op >= 0)
    x = em_binop(e, (LirBinOp)s->u.assign.op, v->type,
              LLVMBuildLoad2(e->b, em_reg_type(e, v->type), a, ""), x);
  if (!x) return false;
  LLVMBuildStore(e->b, x, a);
  return true;
}

/* ptr[idx] op= x as one atomicrmw (monotonic: the parallel loop's end is
 * the only ordering point): fadd / fmin / fmax on floats, add / min / max
 * on integers. */
static bool emit_atomic(Emitter *e, const LirStmt *s, LLVMValueRef addr, LirType t,
                        LLVMValueRef x) {
  bool fl = lir_type_is_float(t);
  LLVMAtomicRMWBinOp op;
  switch (s->u.store.op) {
  case LOP_ADD: op = fl ? LLVMAtomicRMWBinOpFAdd : LLVMAtomicRMWBinOpAdd; break;
  case LOP_MIN: op = fl ? LLVMAtomicRMWBinOpFMin : LLVMAtomicRMWBinOpMin; break;
  case LOP_MAX: op = fl ? LLVMAtomicRMWBinOpFMax : LLVMAtomicRMWBinOpMax; break;
  default: return em_bug(e, "an atomic store whose update has no atomicrmw");
  }
  LLVMBuildAtomicRMW(e->b, op, addr, x, LLVMAtomicOrderingMonotonic, 0);
  return true;
}

/* ptr[idx] = old op x, or = e reading old, by compare-and-swap (the
 * updates with no atomicrmw: *, user-defined reductions):
 *   cur = load atomic monotonic ptr[idx]            (as an integer of t's size)
 *   cas: old = cur; new = old op x (or e); (seen, ok) = cmpxchg ptr[idx], cur, new
 *        cur = seen; if (!ok) goto cas */
static bool emit_cas(Emitter *e, const LirStmt *s, LLVMValueRef addr, LirType t) {
  LLVMValueRef x = s->u.store.old ? NULL : emit_expr(e, s->u.store.e);
  if (!s->u.store.old && !x) return false;
  LLVMTypeRef mt = em_mem_type(e, t);
  LLVMTypeRef it = LLVMIntTypeInContext(e->cx, lir_type_bytes(t) * 8);
  bool fl = lir_type_is_float(t);
  LLVMValueRef first = LLVMBuildLoad2(e->b, it, addr, "cas.first");
  LLVMSetOrdering(first, LLVMAtomicOrderingMonotonic);
  LLVMSetAlignment(first, (unsigned)lir_type_bytes(t));
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(e->b), loop = em_new_block(e, "cas");
  LLVMBasicBlockRef done = em_new_block(e, "cas.done");
  LLVMBuildBr(e->b, loop);
  LLVMPositionBuilderAtEnd(e->b, loop);
  LLVMValueRef cur = LLVMBuildPhi(e->b, it, "cas.cur");
  LLVMValueRef old = fl ? LLVMBuildBitCast(e->b, cur, mt, "") : cur;
  if (t == LT_BOOL) old = LLVMBuildICmp(e->b, LLVMIntNE, old, LLVMConstInt(e->i8, 0, 0), "");
  LLVMValueRef nv;
  if (s->u.store.old) {
    LLVMValueRef slot = em_slot(e, s->u.store.old);
    if (!slot) return false;
    LLVMBuildStore(e->b, old, slot);
    nv = emit_expr(e, s->u.store.e);
  } else {
    nv = em_binop(e, (LirBinOp)s->u.store.op, t, old, x);
  }
  if (!nv) return false;
  if (t == LT_BOOL) nv = LLVMBuildZExt(e->b, nv, e->i8, "");
  if (fl) nv = LLVMBuildBitCast(e->b, nv, it, "");
  LLVMValueRef pair = LLVMBuildAtomicCmpXchg(e->b, addr, cur, nv, LLVMAtomicOrderingMonotonic,
                                             LLVMAtomicOrderingMonotonic, 0);
  LLVMValueRef seen = LLVMBuildExtractValue(e->b, pair, 0, "cas.seen");
  LLVMValueRef ok = LLVMBuildExtractValue(e->b, pair, 1, "cas.ok");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(e->b);
  LLVMBuildCondBr(e->b, ok, done, loop);
  LLVMValueRef in_v[2] = {first, seen};
  LLVMBasicBlockRef in_b[2] = {pre, latch};
  LLVMAddIncoming(cur, in_v, in_b, 2);
  LLVMPositionBuilderAtEnd(e->b, done);
  return true;
}

static bool emit_store(Emitter *e, const LirStmt *s) {
  LirType t;
  LLVMValueRef addr = elem_addr(e, s->u.store.ptr, s->u.store.idx, &t);
  if (!addr || !s->u.store.e ||
      !same_type(e, s->u.store.e->type, t, "store type mismatch"))
    return false;
  int op = s->u.store.op;
  if (s->u.store.atomic && (s->u.store.old || (op != LOP_ADD && op != LOP_MIN && op != LOP_MAX)))
    return emit_cas(e, s, addr, t);
  LLVMValueRef x = emit_expr(e, s->u.store.e);
  if (x && s->u.store.atomic) return emit_atomic(e, s, addr, t, x);
  if (x && s->u.store.op >= 0)
    x = em_binop(e, (LirBinOp)s->u.store.op, t, load_elem(e, addr, t), x);
  if (!x) return false;
  store_elem(e, addr, t, x);
  return true;
}

static bool emit_setfield(Emitter *e, const LirStmt *s) {
  LirField f = s->u.setfield.field;
  if (f != LF_POS_LEN && f != LF_CRD_LEN && f != LF_VALS_LEN)
    return em_bug(e, "SETFIELD of a field that is not a length");
  if (!s->u.setfield.e ||
      !same_type(e, s->u.setfield.e->type, LT_I64, "SETFIELD needs an i64"))
    return false;
  LLVMValueRef x = emit_expr(e, s->u.setfield.e);
  LLVMValueRef a = x ? field_addr(e, s->u.setfield.operand, f,
                                  s->u.setfield.level) : NULL;
  if (!a) return false;
  em_tag(e, LLVMBuildStore(e->b, x, a), e->tbaa_field);
  return true;
}

static bool check_for(Emitter *e, const LirStmt *s) {
  const LirVar *iv = s->u.loop.iv;
  if (!iv || !lir_type_is_int(iv->type)) return em_bug(e, "FOR needs an integer iv");
  const LirExpr *bounds[] = {s->u.loop.lo, s->u.loop.hi, s->u.loop.step};
  for (int q = 0; q < 3; q++)
    if ((bounds[q] || q < 2) && (!bounds[q] || bounds[q]->type != iv->type))
      return em_bug(e, "FOR bounds and step must have the iv's type");
  return true;
}

/* Emits for (iv = lo; iv < hi; iv += step) body:
 *   store lo; br cond
 *   cond:  iv < hi ? body : exit      (hi re-read each trip when NULL)
 *   body:  ...; br latch
 *   latch: iv += step; br cond   (!llvm.loop hints) */
static bool scalar_body(void *e, const LirStmt *body) { return emit_stmts(e, body); }

bool em_scalar_for(Emitter *e, const LirStmt *s, LLVMValueRef lo,
                   LLVMValueRef hi) {
  return em_loop_with(e, s, lo, hi, scalar_body, e);
}

bool em_loop_with(Emitter *e, const LirStmt *s, LLVMValueRef lo, LLVMValueRef hi,
                  EmBody body_fn, void *cx) {
  const LirVar *iv = s->u.loop.iv;
  LLVMValueRef a = em_slot(e, iv);
  if (!a || !lo) return false;
  LLVMBuildStore(e->b, lo, a);
  LLVMBasicBlockRef cond = em_new_block(e, "for.cond"), body = em_new_block(e, "for.body");
  LLVMBasicBlockRef latch = em_new_block(e, "for.latch"), exit = em_new_block(e, "for.end");
  LLVMTypeRef t = em_reg_type(e, iv->type);
  LLVMBuildBr(e->b, cond);
  LLVMPositionBuilderAtEnd(e->b, cond);
  LLVMValueRef i = LLVMBuildLoad2(e->b, t, a, iv->name ? iv->name : "");
  if (!hi) hi = emit_expr(e, s->u.loop.hi);
  if (!hi) return false;
  LLVMBuildCondBr(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, i, hi, ""), body, exit);
  LLVMPositionBuilderAtEnd(e->b, body);
  if (!body_fn(cx, s->u.loop.body)) return false;
  LLVMBuildBr(e->b, latch);
  LLVMPositionBuilderAtEnd(e->b, latch);
  LLVMValueRef step = s->u.loop.step ? emit_expr(e, s->u.loop.step)
                                     : LLVMConstInt(t, 1, 0);
  if (!step) return false;
  LLVMValueRef next = LLVMBuildNSWAdd(e->b, LLVMBuildLoad2(e->b, t, a, ""), step, "");
  LLVMBuildStore(e->b, next, a);
  em_loop_hints(e, LLVMBuildBr(e->b, cond), s->u.loop.at,
                s->u.loop.at.remainder || s->u.loop.at.scalar || e->no_llvm_vectorize);
  LLVMPositionBuilderAtEnd(e->b, exit);
  return true;
}

/* A vector loop (see emit_vector.c), an outlined parallel loop (see
 * emit_parallel.c; nested ones run serially) or a scalar loop. */
static bool emit_for(Emitter *e, const LirStmt *s) {
  if (!check_for(e, s)) return false;
  if (s->u.loop.at.vec_width > 0 && emit_is_vector_loop(s))
    return emit_vector_for(e, s);
  if (s->u.loop.at.parallel && !e->in_parallel) return emit_parallel_for(e, s);
  return em_scalar_for(e, s, emit_expr(e, s->u.loop.lo), NULL);
}

static bool emit_while(Emitter *e, const LirStmt *s) {
  LLVMBasicBlockRef cond = em_new_block(e, "while.cond");
  LLVMBasicBlockRef body = em_new_block(e, "while.body");
  LLVMBasicBlockRef exit = em_new_block(e, "while.end");
  if (!s->u.whl.cond || s->u.whl.cond->type != LT_BOOL)
    return em_bug(e, "WHILE needs a bool condition");
  LLVMBuildBr(e->b, cond);
  LLVMPositionBuilderAtEnd(e->b, cond);
  LLVMValueRef c = emit_expr(e, s->u.whl.cond);
  if (!c) return false;
  LLVMBuildCondBr(e->b, c, body, exit);
  LLVMPositionBuilderAtEnd(e->b, body);
  if (!emit_stmts(e, s->u.whl.body)) return false;
  LLVMValueRef back = LLVMBuildBr(e->b, cond);
  if (e->no_llvm_vectorize) em_loop_hints(e, back, (LoopAttrs){0}, true);
  LLVMPositionBuilderAtEnd(e->b, exit);
  return true;
}

static bool emit_if(Emitter *e, const LirStmt *s) {
  if (!s->u.cond.cond || s->u.cond.cond->type != LT_BOOL)
    return em_bug(e, "IF needs a bool condition");
  LLVMValueRef c = emit_expr(e, s->u.cond.cond);
  if (!c) return false;
  LLVMBasicBlockRef then = em_new_block(e, "if.then"), join = em_new_block(e, "if.end");
  LLVMBasicBlockRef els = s->u.cond.els ? em_new_block(e, "if.else") : join;
  LLVMBuildCondBr(e->b, c, then, els);
  LLVMPositionBuilderAtEnd(e->b, then);
  if (!emit_stmts(e, s->u.cond.then)) return false;
  LLVMBuildBr(e->b, join);
  if (s->u.cond.els) {
    LLVMPositionBuilderAtEnd(e->b, els);
    if (!emit_stmts(e, s->u.cond.els)) return false;
    LLVMBuildBr(e->b, join);
  }
  LLVMPositionBuilderAtEnd(e->b, join);
  return true;
}

/* if (rc_value != 0) { rc = rc_value; goto cleanup; } */
bool em_fail_if_nonzero(Emitter *e, LLVMValueRef rcv) {
  if (e->in_cleanup) return em_bug(e, "a failing helper call inside cleanup");
  if (!e->cleanup) return em_bug(e, "a failing helper call inside a parallel loop");
  LLVMBasicBlockRef fail = em_new_block(e, "fail"), ok = em_new_block(e, "ok");
  LLVMValueRef bad = LLVMBuildICmp(e->b, LLVMIntNE, rcv,
                                   LLVMConstInt(e->i32, 0, 0), "");
  LLVMBuildCondBr(e->b, bad, fail, ok);
  LLVMPositionBuilderAtEnd(e->b, fail);
  LLVMBuildStore(e->b, rcv, e->rc);
  LLVMBuildBr(e->b, e->cleanup);
  LLVMPositionBuilderAtEnd(e->b, ok);
  return true;
}

static bool call_reserve(Emitter *e, const LirStmt *s) {
  const LirExpr *need = s->u.call.a;
  if (!need || need->type != LT_I64) return em_bug(e, "RESERVE needs an i64 count");
  if (s->u.call.operand < 0 || s->u.call.operand >= e->k->noperands)
    return em_bug(e, "RESERVE operand out of range");
  LLVMValueRef n = emit_expr(e, need);
  if (!n) return false;
  LLVMTypeRef pt[] = {e->ptr, e->i32, e->i32, e->i64};
  LLVMValueRef args[] = {e->ops[s->u.call.operand],
                         LLVMConstInt(e->i32, (unsigned)s->u.call.arr |
                                                  (s->u.call.raw ? TJ_ARR_NOZERO : 0u), 0),
                         LLVMConstInt(e->i32, (unsigned)s->u.call.level, 0), n};
  return em_fail_if_nonzero(e, em_helper(e, "tj_rt_reserve", e->i32, pt, 4, args));
}

static bool call_alloc(Emitter *e, const LirStmt *s) {
  const LirExpr *bytes = s->u.call.a;
  if (!bytes || bytes->type != LT_I64) return em_bug(e, "ALLOC needs i64 bytes");
  LLVMValueRef var = em_slot(e, s->u.call.ptr), n = emit_expr(e, bytes);
  if (!var || !n) return false;
  LLVMTypeRef pt[] = {e->i64, e->ptr};
  LLVMValueRef args[] = {n, e->alloc_out};
  LLVMValueRef rcv = em_helper(e, "tj_rt_alloc", e->i32, pt, 2, args);
  LLVMBuildStore(e->b, LLVMBuildLoad2(e->b, e->ptr, e->alloc_out, ""), var);
  return em_fail_if_nonzero(e, rcv);
}

static bool call_free(Emitter *e, const LirStmt *s) {
  LLVMValueRef var = em_slot(e, s->u.call.ptr);
  if (!var) return false;
  LLVMValueRef p = LLVMBuildLoad2(e->b, e->ptr, var, "");
  em_helper(e, "tj_rt_free", e->vd, &e->ptr, 1, &p);
  LLVMBuildStore(e->b, LLVMConstNull(e->ptr), var);
  return true;
}

int em_elem_bytes(LirType ptr) { return lir_type_bytes(lir_elem_type(ptr)); }

/* The range ptr[a .. b) of call s: *base = &ptr[a], *count = b - a
 * (i64); false when an operand failed to emit. */
static bool call_range(Emitter *e, const LirStmt *s, LLVMValueRef *base, LLVMValueRef *count) {
  const LirVar *v = s->u.call.ptr;
  LLVMValueRef var = em_slot(e, v);
  LLVMValueRef lo = emit_expr(e, s->u.call.a), hi = emit_expr(e, s->u.call.b);
  if (!var || !lo || !hi) return false;
  lo = LLVMBuildIntCast2(e->b, lo, e->i64, 1, "");
  hi = LLVMBuildIntCast2(e->b, hi, e->i64, 1, "");
  LLVMTypeRef et = em_mem_type(e, lir_elem_type(v->type));
  *base = LLVMBuildInBoundsGEP2(e->b, et, LLVMBuildLoad2(e->b, e->ptr, var, ""), &lo, 1, "");
  *count = LLVMBuildSub(e->b, hi, lo, "");
  return true;
}

static bool call_sort(Emitter *e, const LirStmt *s) {
  const LirVar *v = s->u.call.ptr;
  if (!v || !lir_type_is_ptr(v->type) || !lir_type_is_int(lir_elem_type(v->type)))
    return em_bug(e, "SORT_CRD needs an integer pointer variable");
  LLVMValueRef base, count;
  if (!call_range(e, s, &base, &count)) return false;
  LLVMTypeRef pt[] = {e->ptr, e->i64, e->i32};
  LLVMValueRef args[] = {base, count, LLVMConstInt(e->i32, (unsigned)em_elem_bytes(v->type), 0)};
  em_helper(e, "tj_rt_sort_crd", e->vd, pt, 3, args);
  return true;
}

/* ret = tj_rt_marked_crd(&ptr[a], mark, b, width) */
static bool call_marked(Emitter *e, const LirStmt *s) {
  const LirVar *v = s->u.call.ptr;
  LLVMValueRef var = em_slot(e, v), mark = em_slot(e, s->u.call.mark);
  LLVMValueRef ret = em_slot(e, s->u.call.ret);
  LLVMValueRef lo = emit_expr(e, s->u.call.a), words = emit_expr(e, s->u.call.b);
  if (!var || !mark || !ret || !lo || !words) return false;
  lo = LLVMBuildIntCast2(e->b, lo, e->i64, 1, "");
  words = LLVMBuildIntCast2(e->b, words, e->i64, 1, "");
  LLVMTypeRef et = em_mem_type(e, lir_elem_type(v->type));
  LLVMValueRef base = LLVMBuildInBoundsGEP2(e->b, et, LLVMBuildLoad2(e->b, e->ptr, var, ""),
                                            &lo, 1, "");
  LLVMTypeRef pt[] = {e->ptr, e->ptr, e->i64, e->i32};
  LLVMValueRef args[] = {base, LLVMBuildLoad2(e->b, e->ptr, mark, ""), words,
                         LLVMConstInt(e->i32, (unsigned)em_elem_bytes(v->type), 0)};
  LLVMBuildStore(e->b, em_helper(e, "tj_rt_marked_crd", e->i64, pt, 4, args), ret);
  return true;
}

/* memset(ptr + lo, 0, (hi - lo) * sizeof elem) */
static bool call_zero(Emitter *e, const LirStmt *s) {
  const LirVar *v = s->u.call.ptr;
  if (!v || !lir_type_is_ptr(v->type)) return em_bug(e, "ZERO needs a pointer");
  LLVMValueRef base, count;
  if (!call_range(e, s, &base, &count)) return false;
  LLVMValueRef len = LLVMBuildMul(e->b, count,
                                  LLVMConstInt(e->i64, (unsigned)em_elem_bytes(v->type), 0), "");
  LLVMBuildMemSet(e->b, base, LLVMConstInt(e->i8, 0, 0), len,
                  (unsigned)em_elem_bytes(v->type));
  return true;
}

/* var = tj_rt_threads(), or var = tj_rt_thread_slot(n) */
static bool call_thread(Emitter *e, const LirStmt *s) {
  LLVMValueRef var = em_slot(e, s->u.call.ptr);
  if (!var) return false;
  LLVMValueRef r;
  if (s->u.call.h == LH_THREADS) {
    r = em_helper(e, "tj_rt_threads", e->i32, NULL, 0, NULL);
    r = LLVMBuildSExt(e->b, r, e->i64, "");
  } else {
    LLVMValueRef n = emit_expr(e, s->u.call.a);
    if (!n) return false;
    n = LLVMBuildIntCast2(e->b, n, e->i64, 1, "");
    r = em_helper(e, "tj_rt_thread_slot", e->i64, &e->i64, 1, &n);
    /* the same value all through one thread's body: no memory effects, so
       LLVM hoists it out of the loops of a parallel body (a slot asked for
       per iteration, as per-thread partials do, then costs one call) */
    static const char *const attrs[] = {"memory", "willreturn", "speculatable"};
    LLVMValueRef f = LLVMGetCalledValue(r);
    for (int k = 0; k < 3; k++)
      LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex,
                              LLVMCreateEnumAttribute(
                                  e->cx, LLVMGetEnumAttributeKindForName(attrs[k],
                                                                         strlen(attrs[k])), 0));
  }
  LLVMBuildStore(e->b, r, var);
  return true;
}

static bool emit_call(Emitter *e, const LirStmt *s) {
  switch (s->u.call.h) {
  case LH_RESERVE: return call_reserve(e, s);
  case LH_ALLOC: return call_alloc(e, s);
  case LH_FREE: return call_free(e, s);
  case LH_SORT_CRD: return call_sort(e, s);
  case LH_MARKED_CRD: return call_marked(e, s);
  case LH_ZERO: return call_zero(e, s);
  case LH_GETT: return emit_gett_call(e, s);
  case LH_THREADS:
  case LH_THREAD_SLOT: return call_thread(e, s);
  }
  return em_bug(e, "unknown runtime helper");
}

void em_prefetch(Emitter *e, LLVMValueRef ptr, LirType elem, LLVMValueRef idx) {
  LLVMValueRef addr = LLVMBuildGEP2(e->b, em_mem_type(e, elem), ptr, &idx, 1, "");
  LLVMValueRef args[] = {addr, LLVMConstInt(e->i32, 0, 0), LLVMConstInt(e->i32, 3, 0),
                         LLVMConstInt(e->i32, 1, 0)};
  em_intrinsic(e, "llvm.prefetch", e->ptr, args, 4);
}

static bool emit_prefetch(Emitter *e, const LirStmt *s) {
  const LirExpr *p = s->u.prefetch.ptr, *i = s->u.prefetch.idx;
  if (!lir_type_is_ptr(p->type) || !lir_type_is_int(i->type))
    return em_bug(e, "prefetch needs a pointer and an integer index");
  LLVMValueRef pv = emit_expr(e, p), iv = emit_expr(e, i);
  if (!pv || !iv) return false;
  em_prefetch(e, pv, lir_elem_type(p->type), iv);
  return true;
}

static bool emit_decl(Emitter *e, const LirStmt *s) {
  const LirVar *v = s->u.decl.var;
  LLVMValueRef a = em_slot(e, v);
  if (!a) return false;
  const LirExpr *init = s->u.decl.init;
  if (init && !same_type(e, init->type, v->type, "declaration type mismatch"))
    return false;
  LLVMValueRef x = init ? emit_expr(e, init) : zero_of(e, v->type);
  if (!x) return false;
  LLVMBuildStore(e->b, x, a);
  return true;
}

static bool emit_stmt(Emitter *e, const LirStmt *s) {
  switch (s->kind) {
  case LS_DECL: return emit_decl(e, s);
  case LS_ASSIGN: return emit_assign(e, s);
  case LS_STORE: return emit_store(e, s);
  case LS_SETFIELD: return emit_setfield(e, s);
  case LS_FOR: return emit_for(e, s);
  case LS_WHILE: return emit_while(e, s);
  case LS_IF: return emit_if(e, s);
  case LS_CALL: return emit_call(e, s);
  case LS_BLOCK: return emit_stmts(e, s->u.block);
  case LS_COMMENT: return true;
  case LS_PREFETCH: return emit_prefetch(e, s);
  }
  return em_bug(e, "unknown loop IR statement kind");
}

bool emit_stmts(Emitter *e, const LirStmt *s) {
  for (; s; s = s->next) {
    if (!emit_stmt(e, s) || !diag_ok(e->d)) return false;
    if (s->kind == LS_FOR && s->u.loop.at.vec_width > 0 && emit_is_vector_loop(s) &&
        emit_masked_tail(s))
      s = s->next;   /* its remainder ran as the vector loop's masked step */
  }
  return true;
}

/* ---- the kernel function ---- */

void em_add_fn_attrs(Emitter *e, LLVMValueRef fn) {
  const EmitTarget *t = e->t;
  unsigned nounwind = LLVMGetEnumAttributeKindForName("nounwind", 8);
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                          LLVMCreateEnumAttribute(e->cx, nounwind, 0));
  if (t->cpu && *t->cpu)
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
        LLVMCreateStringAttribute(e->cx, "target-cpu", 10, t->cpu,
                                  (unsigned)strlen(t->cpu)));
  if (t->features && *t->features)
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
        LLVMCreateStringAttribute(e->cx, "target-features", 15, t->features,
                                  (unsigned)strlen(t->features)));
}

static void init_types(Emitter *e) {
  e->i1 = LLVMInt1TypeInContext(e->cx);
  e->i8 = LLVMInt8TypeInContext(e->cx);
  e->i16 = LLVMInt16TypeInContext(e->cx);
  e->i32 = LLVMInt32TypeInContext(e->cx);
  e->i64 = LLVMInt64TypeInContext(e->cx);
  e->f32 = LLVMFloatTypeInContext(e->cx);
  e->f64 = LLVMDoubleTypeInContext(e->cx);
  e->ptr = LLVMPointerTypeInContext(e->cx, 0);
  e->vd = LLVMVoidTypeInContext(e->cx);
  e->loop_kind = LLVMGetMDKindIDInContext(e->cx, "llvm.loop", 9);
  tbaa_init(e);
}

/* Block b's position in the sorted array blocks[n] (by address). */
static int block_index(LLVMBasicBlockRef *blocks, int n, LLVMBasicBlockRef b) {
  int lo = 0, hi = n - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    if (blocks[mid] == b) return mid;
    if ((uintptr_t)blocks[mid] < (uintptr_t)b) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

static int cmp_block(const void *a, const void *b) {
  uintptr_t x = (uintptr_t)*(LLVMBasicBlockRef const *)a, y = (uintptr_t)*(LLVMBasicBlockRef const *)b;
  return x < y ? -1 : x > y;
}

/* Whether fn's control flow has a cycle (a depth-first search meets a
 * block still on its path). Sets *ok false when out of memory. */
static bool has_cycle(LLVMValueRef fn, bool *ok) {
  int n = (int)LLVMCountBasicBlocks(fn);
  LLVMBasicBlockRef *blocks = malloc(sizeof *blocks * (size_t)(n + 1));
  int *stack = malloc(sizeof *stack * (size_t)(n + 1)), *next = calloc((size_t)n + 1, sizeof *next);
  char *state = calloc((size_t)n + 1, 1);  /* 0 new, 1 on the path, 2 done */
  bool cycle = false;
  *ok = blocks && stack && next && state;
  if (*ok) {
    LLVMGetBasicBlocks(fn, blocks);
    LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(fn);
    qsort(blocks, (size_t)n, sizeof *blocks, cmp_block);
    int sp = 0;
    stack[sp++] = block_index(blocks, n, entry);
    state[stack[0]] = 1;
    while (sp > 0 && !cycle) {
      int v = stack[sp - 1];
      LLVMValueRef term = LLVMGetBasicBlockTerminator(blocks[v]);
      int nsucc = term ? (int)LLVMGetNumSuccessors(term) : 0;
      if (next[v] == nsucc) {
        state[v] = 2;
        sp--;
        continue;
      }
      int w = block_index(blocks, n, LLVMGetSuccessor(term, (unsigned)next[v]++));
      if (w < 0) continue;
      if (state[w] == 1) cycle = true;
      else if (state[w] == 0) state[w] = 1, stack[sp++] = w;
    }
  }
  free(blocks);
  free(stack);
  free(next);
  free(state);
  return cycle;
}

/* A kernel function without loops (theirs all outlined for the parallel
 * runtime, or a call into a runtime routine) only reserves outputs, fills a
 * context and calls: it runs once per kernel call, so it is not worth
 * LLVM's optimizer and SelectionDAG. optnone has both skip it (fast
 * instruction selection), which took 0.4-0.7 ms off SpMV's compile
 * (bench/README.md, "Compile latency"). */
static bool mark_optnone_if_loop_free(Emitter *e, LLVMValueRef fn) {
  bool ok;
  if (has_cycle(fn, &ok) || !ok)
    return ok || diag_error(e->d, TJ_ERR_NOMEM, "out of memory emitting %s", e->t->symbol);
  static const char *const kinds[] = {"optnone", "noinline"};
  for (int i = 0; i < 2; i++) {
    unsigned kind = LLVMGetEnumAttributeKindForName(kinds[i], strlen(kinds[i]));
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(e->cx, kind, 0));
  }
  return true;
}

/* entry: rc, alloc_out and operands[k] loads; the rest as described above. */
static bool emit_function(Emitter *e, const EmitTarget *t) {
  LLVMTypeRef ft = LLVMFunctionType(e->i32, &e->ptr, 1, 0);
  e->fn = LLVMAddFunction(e->m, t->symbol, ft);
  em_add_fn_attrs(e, e->fn);
  /* 8 zero bytes before the entry: a caller built with -fsanitize=function
   * reads the signature word at fn - 8 and, finding no magic there, skips
   * its check (without them it may read an unmapped page). */
  LLVMSetPrefixData(e->fn, LLVMConstInt(e->i64, 0, 0));
  LLVMValueRef arg = LLVMGetParam(e->fn, 0);
  LLVMSetValueName2(arg, "operands", 8);
  e->operands = arg;
  LLVMBasicBlockRef entry = em_new_block(e, "entry"), body = em_new_block(e, "body");
  e->cleanup = em_new_block(e, "cleanup");
  LLVMPositionBuilderAtEnd(e->eb, entry);
  e->rc = LLVMBuildAlloca(e->eb, e->i32, "rc");
  e->alloc_out = LLVMBuildAlloca(e->eb, e->ptr, "alloc.out");
  for (int i = 0; i < e->k->noperands; i++) {
    LLVMValueRef idx = LLVMConstInt(e->i64, (unsigned)i, 0);
    LLVMValueRef p = LLVMBuildInBoundsGEP2(e->eb, e->ptr, arg, &idx, 1, "");
    e->ops[i] = LLVMBuildLoad2(e->eb, e->ptr, p, e->k->operands[i].name
                                                    ? e->k->operands[i].name : "");
  }
  LLVMPositionBuilderAtEnd(e->b, body);
  if (!emit_stmts(e, e->k->body)) return false;
  LLVMBuildStore(e->b, LLVMConstInt(e->i32, 0, 0), e->rc);
  LLVMBuildBr(e->b, e->cleanup);
  LLVMPositionBuilderAtEnd(e->b, e->cleanup);
  e->in_cleanup = true;
  if (!emit_stmts(e, e->k->cleanup)) return false;
  LLVMBuildRet(e->b, LLVMBuildLoad2(e->b, e->i32, e->rc, ""));
  LLVMBuildBr(e->eb, body);
  return mark_optnone_if_loop_free(e, e->fn);
}

bool emit_kernel(LLVMContextRef cx, const LirKernel *k, const EmitTarget *t,
                 LLVMModuleRef *out, Diag *d) {
  *out = NULL;
  if (!k || !t || !t->symbol) return TJ_BUG(d, "emit_kernel without a kernel");
  if (k->noperands < 0 || k->noperands > LIR_MAX_OPERANDS || k->nvars < 0)
    return TJ_BUG(d, "kernel operand or variable count out of range");
  Emitter e = {.cx = cx, .k = k, .t = t, .d = d, .contract = t->fp_contract,
               .no_llvm_vectorize = t->no_llvm_vectorize};
  e.slots = calloc((size_t)k->nvars + 1, sizeof *e.slots);
  if (!e.slots) return diag_error(d, TJ_ERR_NOMEM, "out of memory emitting %s", t->symbol);
  e.m = LLVMModuleCreateWithNameInContext(t->symbol, cx);
  if (t->triple) LLVMSetTarget(e.m, t->triple);
  if (t->data_layout) LLVMSetDataLayout(e.m, t->data_layout);
  e.b = LLVMCreateBuilderInContext(cx);
  e.eb = LLVMCreateBuilderInContext(cx);
  init_types(&e);
  bool ok = emit_function(&e, t) && diag_ok(d);
  LLVMDisposeBuilder(e.b);
  LLVMDisposeBuilder(e.eb);
  free(e.slots);
  if (!ok) {
    LLVMDisposeModule(e.m);
    return false;
  }
  *out = e.m;
  return true;
}

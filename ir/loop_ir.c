/* Loop IR constructors and type helpers. Nodes are only built here, so every
 * expression carries a correct type from birth. */
#include "loop_ir.h"

#include <math.h>
#include <string.h>

bool lir_type_is_ptr(LirType t) { return t >= LT_PTR_I8; }
bool lir_type_is_float(LirType t) { return t == LT_F32 || t == LT_F64; }
bool lir_type_is_int(LirType t) { return t >= LT_I8 && t <= LT_U64; }
bool lir_type_is_unsigned(LirType t) { return t >= LT_U8 && t <= LT_U64; }

int lir_type_bytes(LirType t) {
  switch (t) {
  case LT_BOOL: case LT_I8: case LT_U8: return 1;
  case LT_I16: case LT_U16: return 2;
  case LT_I32: case LT_U32: case LT_F32: return 4;
  default: return 8;
  }
}

int64_t lir_int_max(LirType t) {
  if (t == LT_BOOL) return 1;
  if (t == LT_U64) return -1;
  int bits = 8 * lir_type_bytes(t) - !lir_type_is_unsigned(t);
  return (int64_t)(UINT64_MAX >> (64 - bits));
}

int64_t lir_int_min(LirType t) {
  return t == LT_BOOL || lir_type_is_unsigned(t) ? 0 : -lir_int_max(t) - 1;
}

LirType lir_dtype_type(int dtype) {
  /* tj_dtype: F64 0, F32 1, I64 2, I32 3, I16 4, I8 5, BOOL 6, U64 7, U32 8,
   * U16 9, U8 10 */
  static const LirType t[] = {LT_F64, LT_F32, LT_I64, LT_I32, LT_I16, LT_I8, LT_I8,
                              LT_U64, LT_U32, LT_U16, LT_U8};
  return dtype >= 0 && dtype < (int)(sizeof t / sizeof *t) ? t[dtype] : LT_VOID;
}

/* Element and pointer types, one pair a row. */
static const LirType ptr_elem[][2] = {
  {LT_PTR_I8, LT_I8},   {LT_PTR_I16, LT_I16}, {LT_PTR_I32, LT_I32}, {LT_PTR_I64, LT_I64},
  {LT_PTR_U8, LT_U8},   {LT_PTR_U16, LT_U16}, {LT_PTR_U32, LT_U32}, {LT_PTR_U64, LT_U64},
  {LT_PTR_F32, LT_F32}, {LT_PTR_F64, LT_F64}, {LT_PTR_BOOL, LT_BOOL}};
enum { NPTR = sizeof ptr_elem / sizeof ptr_elem[0] };

LirType lir_elem_type(LirType p) {
  for (int k = 0; k < NPTR; k++)
    if (ptr_elem[k][0] == p) return ptr_elem[k][1];
  return LT_VOID;
}

LirType lir_ptr_type(LirType e) {
  for (int k = 0; k < NPTR; k++)
    if (ptr_elem[k][1] == e) return ptr_elem[k][0];
  return LT_VOID;
}

const char *lir_type_c(LirType t) {
  static const char *names[] = {
      [LT_VOID] = "void",        [LT_BOOL] = "bool",
      [LT_I8] = "int8_t",        [LT_I16] = "int16_t",
      [LT_I32] = "int32_t",      [LT_I64] = "int64_t",
      [LT_U8] = "uint8_t",       [LT_U16] = "uint16_t",
      [LT_U32] = "uint32_t",     [LT_U64] = "uint64_t",
      [LT_PTR_I8] = "int8_t *",  [LT_PTR_I16] = "int16_t *",
      [LT_PTR_U8] = "uint8_t *", [LT_PTR_U16] = "uint16_t *",
      [LT_PTR_U32] = "uint32_t *", [LT_PTR_U64] = "uint64_t *",
      [LT_F32] = "float",        [LT_F64] = "double",
      [LT_PTR_I32] = "int32_t *", [LT_PTR_I64] = "int64_t *",
      [LT_PTR_F32] = "float *",  [LT_PTR_F64] = "double *",
      [LT_PTR_BOOL] = "bool *"};
  return names[t];
}

LirKernel *lir_kernel(Arena *a, const char *name) {
  LirKernel *k = arena_alloc(a, sizeof *k);
  if (k) k->name = arena_strdup(a, name);
  return k;
}

LirVar *lir_var(Arena *a, LirKernel *k, const char *name, LirType t) {
  LirVar *v = arena_alloc(a, sizeof *v);
  if (!v) return NULL;
  v->id = k->nvars++;
  v->name = name;
  v->type = t;
  return v;
}

LirVar *lir_var_numbered(Arena *a, LirKernel *k, const char *base, LirType t) {
  const char *name = arena_printf(a, "%s_%d", base, k->nvars);
  return name ? lir_var(a, k, name, t) : NULL;
}

static LirExpr *expr_new(Arena *a, LirExprKind kind, LirType t) {
  LirExpr *e = arena_alloc(a, sizeof *e);
  if (e) {
    e->kind = kind;
    e->type = t;
  }
  return e;
}

LirExpr *lir_const_int(Arena *a, LirType t, int64_t v) {
  LirExpr *e = expr_new(a, LE_CONST, t);
  if (e) {
    e->u.c.i = v;
    e->u.c.f = (double)v;
  }
  return e;
}

LirExpr *lir_const_fp(Arena *a, LirType t, double v) {
  LirExpr *e = expr_new(a, LE_CONST, t);
  if (e) {
    e->u.c.f = v;
    e->u.c.i = v > -9.2e18 && v < 9.2e18 ? (int64_t)v : 0;
  }
  return e;
}

LirExpr *lir_ref(Arena *a, LirVar *v) {
  LirExpr *e = expr_new(a, LE_VAR, v ? v->type : LT_VOID);
  if (e) e->u.var = v;
  return e;
}

/* Index arrays of 1 and 2 bytes are unsigned (loads zero-extend), 4 and
 * 8 signed. */
static LirType width_ptr(int bytes) {
  return bytes == 1 ? LT_PTR_U8 : bytes == 2 ? LT_PTR_U16 : bytes == 4 ? LT_PTR_I32 : LT_PTR_I64;
}

LirType lir_field_type(const LirKernel *k, int operand, LirField f) {
  const LirOperand *o = &k->operands[operand];
  switch (f) {
  case LF_POS: return width_ptr(o->pos_width);
  case LF_CRD: return width_ptr(o->crd_width);
  case LF_VALS: return lir_ptr_type(lir_dtype_type(o->dtype));
  default: return LT_I64;
  }
}

LirExpr *lir_field(Arena *a, const LirKernel *k, int operand, LirField f,
                   int level) {
  LirExpr *e = expr_new(a, LE_FIELD, lir_field_type(k, operand, f));
  if (e) {
    e->u.field.operand = operand;
    e->u.field.field = f;
    e->u.field.level = level;
  }
  return e;
}

LirExpr *lir_load(Arena *a, LirExpr *ptr, LirExpr *idx) {
  if (!ptr || !idx) return NULL;
  LirExpr *e = expr_new(a, LE_LOAD, lir_elem_type(ptr->type));
  if (e) {
    e->u.load.ptr = ptr;
    e->u.load.idx = idx;
  }
  return e;
}

LirExpr *lir_bin(Arena *a, LirBinOp op, LirExpr *x, LirExpr *y) {
  if (!x || !y) return NULL;
  LirType t = op >= LOP_LT ? LT_BOOL : x->type;
  LirExpr *e = expr_new(a, LE_BIN, t);
  if (e) {
    e->u.bin.op = op;
    e->u.bin.a = x;
    e->u.bin.b = y;
  }
  return e;
}

LirExpr *lir_un(Arena *a, LirUnOp op, LirExpr *x) {
  if (!x) return NULL;
  LirExpr *e = expr_new(a, LE_UN, op == LUN_NOT ? LT_BOOL : x->type);
  if (e) {
    e->u.un.op = op;
    e->u.un.a = x;
  }
  return e;
}

LirExpr *lir_cast(Arena *a, LirType t, LirExpr *x) {
  if (!x) return NULL;
  if (x->type == t) return x;
  LirExpr *e = expr_new(a, LE_CAST, t);
  if (e) e->u.cast = x;
  return e;
}

LirExpr *lir_select(Arena *a, LirExpr *c, LirExpr *x, LirExpr *y) {
  if (!c || !x || !y) return NULL;
  LirExpr *e = expr_new(a, LE_SELECT, x->type);
  if (e) {
    e->u.sel.cond = c;
    e->u.sel.a = x;
    e->u.sel.b = y;
  }
  return e;
}

static LirStmt *stmt_new(Arena *a, LirStmtKind kind) {
  LirStmt *s = arena_alloc(a, sizeof *s);
  if (s) s->kind = kind;
  return s;
}

LirStmt *lir_decl(Arena *a, LirVar *v, LirExpr *init) {
  LirStmt *s = stmt_new(a, LS_DECL);
  if (s) {
    s->u.decl.var = v;
    s->u.decl.init = init;
  }
  return s;
}

LirStmt *lir_assign(Arena *a, LirVar *v, LirExpr *e) {
  LirStmt *s = stmt_new(a, LS_ASSIGN);
  if (s) {
    s->u.assign.var = v;
    s->u.assign.e = e;
    s->u.assign.op = -1;
  }
  return s;
}

LirStmt *lir_update(Arena *a, LirVar *v, LirBinOp op, LirExpr *e) {
  LirStmt *s = lir_assign(a, v, e);
  if (s) s->u.assign.op = (int)op;
  return s;
}

LirStmt *lir_fold(Arena *a, LirVar *v, LirVar *with, LirExpr *e, LirExpr *identity) {
  LirStmt *s = lir_assign(a, v, e);
  if (s) s->u.assign.with = with, s->u.assign.identity = identity;
  return s;
}

LirStmt *lir_store(Arena *a, LirExpr *ptr, LirExpr *idx, LirExpr *e) {
  LirStmt *s = stmt_new(a, LS_STORE);
  if (s) {
    s->u.store.ptr = ptr;
    s->u.store.idx = idx;
    s->u.store.e = e;
    s->u.store.op = -1;
  }
  return s;
}

LirStmt *lir_store_update(Arena *a, LirExpr *ptr, LirExpr *idx, LirBinOp op,
                          LirExpr *e) {
  LirStmt *s = lir_store(a, ptr, idx, e);
  if (s) s->u.store.op = (int)op;
  return s;
}

LirStmt *lir_setfield(Arena *a, int operand, LirField f, int level,
                      LirExpr *e) {
  LirStmt *s = stmt_new(a, LS_SETFIELD);
  if (s) {
    s->u.setfield.operand = operand;
    s->u.setfield.field = f;
    s->u.setfield.level = level;
    s->u.setfield.e = e;
  }
  return s;
}

LirStmt *lir_for(Arena *a, LirVar *iv, LirExpr *lo, LirExpr *hi,
                 LirStmt *body) {
  LirStmt *s = stmt_new(a, LS_FOR);
  if (s) {
    s->u.loop.iv = iv;
    s->u.loop.lo = lo;
    s->u.loop.hi = hi;
    s->u.loop.step = iv ? lir_const_int(a, iv->type, 1) : NULL;
    s->u.loop.body = body;
  }
  return s;
}

LirStmt *lir_while(Arena *a, LirExpr *cond, LirStmt *body) {
  LirStmt *s = stmt_new(a, LS_WHILE);
  if (s) {
    s->u.whl.cond = cond;
    s->u.whl.body = body;
  }
  return s;
}

LirStmt *lir_if(Arena *a, LirExpr *cond, LirStmt *then, LirStmt *els) {
  LirStmt *s = stmt_new(a, LS_IF);
  if (s) {
    s->u.cond.cond = cond;
    s->u.cond.then = then;
    s->u.cond.els = els;
  }
  return s;
}

LirStmt *lir_call(Arena *a, LirHelper h) {
  LirStmt *s = stmt_new(a, LS_CALL);
  if (s) s->u.call.h = h;
  return s;
}

LirStmt *lir_block(Arena *a, LirStmt *body) {
  LirStmt *s = stmt_new(a, LS_BLOCK);
  if (s) s->u.block = body;
  return s;
}

LirStmt *lir_comment(Arena *a, const char *text) {
  LirStmt *s = stmt_new(a, LS_COMMENT);
  if (s) s->u.comment = text;
  return s;
}

LirStmt *lir_prefetch(Arena *a, LirExpr *ptr, LirExpr *idx) {
  LirStmt *s = stmt_new(a, LS_PREFETCH);
  if (s) s->u.prefetch.ptr = ptr, s->u.prefetch.idx = idx;
  return s;
}

void lir_append(LirStmt **head, LirStmt *s) {
  if (!s) return;
  while (*head) head = &(*head)->next;
  *head = s;
}

bool lir_unit_step(const LirStmt *loop) {
  const LirExpr *st = loop->u.loop.step;
  return !st || (st->kind == LE_CONST && st->u.c.i == 1);
}

/* The fields of x and y other than their operands agree. */
static bool same_node(const LirExpr *x, const LirExpr *y) {
  switch (x->kind) {
  case LE_CONST:
    return x->u.c.i == y->u.c.i && (x->u.c.f == y->u.c.f || (isnan(x->u.c.f) && isnan(y->u.c.f)));
  case LE_VAR: return x->u.var == y->u.var;
  case LE_FIELD:
    return x->u.field.operand == y->u.field.operand && x->u.field.field == y->u.field.field &&
           x->u.field.level == y->u.field.level;
  case LE_BIN: return x->u.bin.op == y->u.bin.op;
  case LE_UN: return x->u.un.op == y->u.un.op;
  default: return true;   /* LOAD, CAST, SELECT: their operands say it all */
  }
}

bool lir_expr_equal(const LirExpr *x, const LirExpr *y) {
  if (x == y) return true;
  if (!x || !y || x->kind != y->kind || x->type != y->type || !same_node(x, y)) return false;
  LirExpr *xk[3], *yk[3];
  int n = lir_expr_kids(x, xk);
  lir_expr_kids(y, yk);
  for (int i = 0; i < n; i++)
    if (!lir_expr_equal(xk[i], yk[i])) return false;
  return true;
}

const char *lir_bin_name(LirBinOp op) {
  static const char *names[] = {
#define LIR_BINOP(k, s, r) s,
#include "loop_ir.def"
#undef LIR_BINOP
  };
  return (unsigned)op < sizeof names / sizeof *names ? names[op] : "?";
}

bool lir_bin_reduces(int op) {
  static const bool reduces[] = {
#define LIR_BINOP(k, s, r) r,
#include "loop_ir.def"
#undef LIR_BINOP
  };
  return op >= 0 && (unsigned)op < sizeof reduces / sizeof *reduces && reduces[op];
}

const char *lir_un_name(LirUnOp op) {
  static const char *names[] = {
#define LIR_UNOP(k, s) s,
#include "loop_ir.def"
#undef LIR_UNOP
  };
  return (unsigned)op < sizeof names / sizeof *names ? names[op] : "?";
}

LirExpr *lir_clone_renamed(Arena *a, LirExpr *const *ren, int nren, const LirExpr *e) {
  if (e->kind == LE_VAR) {
    int id = e->u.var->id;
    LirExpr *to = id < nren ? ren[id] : NULL;
    return to ? to : (LirExpr *)e;
  }
  if (e->kind == LE_CONST || e->kind == LE_FIELD) return (LirExpr *)e;   /* shared */
  LirExpr *c = arena_alloc(a, sizeof *c), **slot[3];
  if (!c) return NULL;
  *c = *e;
  int n = lir_expr_slots(c, slot);
  for (int i = 0; i < n; i++)
    if (!(*slot[i] = lir_clone_renamed(a, ren, nren, *slot[i]))) return NULL;
  return c;
}

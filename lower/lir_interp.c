/* A tree-walking interpreter for verified loop IR over the kernel ABI.
 *
 * The environment is one slot per LirVar id. Values are tagged by the
 * expression's type; every pointer value remembers where it came from (an
 * operand's pos/crd/vals array, or a workspace from ALLOC), so a load or
 * store is checked against that array's current extent, and a pointer left
 * stale by a reserve that moved its array is caught. Integer arithmetic
 * wraps, f32 arithmetic rounds to float, && / || and ?: short-circuit, and
 * min/max are `a < b ? a : b` -- exactly what lir_print's C does.
 */
#include "lir_interp.h"

#include "../ir/notation.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef enum { ORG_NONE, ORG_FIELD, ORG_WS } PtrOrigin;

typedef struct Ptr {
  char *base;
  int8_t org;      /* PtrOrigin */
  int8_t arr;      /* ORG_FIELD: TJ_ARR_POS / CRD / VALS */
  int16_t operand; /* ORG_FIELD */
  int32_t index;   /* ORG_FIELD: level; ORG_WS: workspace number */
} Ptr;

typedef union Val {
  int64_t i;   /* I32 (sign-extended), I64, BOOL (0/1) */
  double f;    /* F64, and F32 holding a float value */
  Ptr p;
} Val;

typedef struct Workspace {
  char *mem;
  int64_t bytes;
  const char *name;  /* the ALLOC's variable */
  bool is_live;
} Workspace;

typedef struct Interp {
  const LirKernel *k;
  tj_storage **ops;
  Diag *d;
  Val *env;          /* by LirVar id */
  Workspace *ws;
  int nws, cap_ws;
  int32_t rc;        /* the kernel's return code */
} Interp;

typedef enum { EX_OK, EX_FAIL, EX_FAULT } Exit;  /* FAIL = goto fail */

static bool fault(Interp *in, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static bool fault(Interp *in, const char *fmt, ...) {
  char buf[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return diag_error(in->d, TJ_ERR_INVALID, "loop IR interpreter: %s", buf);
}

static const char *opname(const LirKernel *k, int op) {
  const char *n = k->operands[op].name;
  return n && *n ? n : "operand";
}

/* ---- values ---- */

/* v in t's width: signed ones sign-extended, unsigned ones zero-extended
 * (U64: the bits). */
static int64_t wrap(LirType t, uint64_t v) {
  switch (t) {
  case LT_I8: return (int8_t)(uint8_t)v;
  case LT_I16: return (int16_t)(uint16_t)v;
  case LT_I32: return (int32_t)(uint32_t)v;
  case LT_U8: return (uint8_t)v;
  case LT_U16: return (uint16_t)v;
  case LT_U32: return (uint32_t)v;
  case LT_BOOL: return v != 0;
  default: return (int64_t)v;
  }
}

static int elem_size(LirType t) { return lir_type_bytes(t); }

static void read_elem(LirType t, const char *addr, Val *out) {
  int32_t i32;
  int16_t i16;
  int8_t i8;
  float f32;
  uint8_t b;
  uint64_t u = 0;
  if (lir_type_is_unsigned(t)) { /* little-endian: the low bytes, zero-extended */
    memcpy(&u, addr, (size_t)lir_type_bytes(t));
    out->i = (int64_t)u;
    return;
  }
  switch (t) {
  case LT_I8: memcpy(&i8, addr, 1); out->i = i8; break;
  case LT_I16: memcpy(&i16, addr, 2); out->i = i16; break;
  case LT_I32: memcpy(&i32, addr, 4); out->i = i32; break;
  case LT_I64: memcpy(&out->i, addr, 8); break;
  case LT_F32: memcpy(&f32, addr, 4); out->f = f32; break;
  case LT_F64: memcpy(&out->f, addr, 8); break;
  default: memcpy(&b, addr, 1); out->i = b != 0; break;
  }
}

static void write_elem(LirType t, char *addr, Val v) {
  int32_t i32 = (int32_t)v.i;
  int16_t i16 = (int16_t)v.i;
  int8_t i8 = (int8_t)v.i;
  float f32 = (float)v.f;
  uint8_t b = v.i != 0;
  if (lir_type_is_unsigned(t)) { /* little-endian: the low bytes */
    memcpy(addr, &v.i, (size_t)lir_type_bytes(t));
    return;
  }
  switch (t) {
  case LT_I8: memcpy(addr, &i8, 1); break;
  case LT_I16: memcpy(addr, &i16, 2); break;
  case LT_I32: memcpy(addr, &i32, 4); break;
  case LT_I64: memcpy(addr, &v.i, 8); break;
  case LT_F32: memcpy(addr, &f32, 4); break;
  case LT_F64: memcpy(addr, &v.f, 8); break;
  default: memcpy(addr, &b, 1); break;
  }
}

/* ---- pointers: where they point and how far ---- */

static void array_name(Interp *in, Ptr p, char *buf, size_t n) {
  static const char *arr[] = {"pos", "crd", "vals"};
  if (p.org == ORG_WS)
    snprintf(buf, n, "%s", in->ws[p.index].name);
  else if (p.arr == TJ_ARR_VALS)
    snprintf(buf, n, "%s_vals", opname(in->k, p.operand));
  else
    snprintf(buf, n, "%s_%s%d", opname(in->k, p.operand), arr[p.arr], p.index);
}

/* The current base and length (in entries) of an operand array. */
static char *field_array(Interp *in, Ptr p, int64_t *len) {
  tj_storage *s = in->ops[p.operand];
  if (p.arr == TJ_ARR_VALS) {
    *len = s->vals_len > s->vals_cap ? s->vals_len : s->vals_cap;
    return s->vals;
  }
  tj_level_storage *l = &s->levels[p.index];
  if (p.arr == TJ_ARR_POS) {
    *len = l->pos_len > l->pos_cap ? l->pos_len : l->pos_cap;
    return l->pos;
  }
  *len = l->crd_len > l->crd_cap ? l->crd_len : l->crd_cap;
  return l->crd;
}

/* Sets *extent to the entries of type elem p may touch; faults on a null,
 * freed or stale pointer. */
static bool ptr_extent(Interp *in, Ptr p, LirType elem, int64_t *extent) {
  char name[96];
  if (p.org == ORG_NONE) return fault(in, "access through a null pointer");
  array_name(in, p, name, sizeof name);
  if (p.org == ORG_WS) {
    Workspace *w = &in->ws[p.index];
    if (!w->is_live) return fault(in, "%s used after it was freed", name);
    *extent = w->bytes / elem_size(elem);
    return true;
  }
  if (field_array(in, p, extent) != p.base)
    return fault(in, "stale pointer to %s (the array moved after a reserve)",
                 name);
  return true;
}

/* The address of p[idx], bounds-checked. */
static char *elem_addr(Interp *in, Ptr p, LirType elem, int64_t idx) {
  int64_t n = 0;  /* set by ptr_extent; gcc cannot see it */
  char name[96];
  if (!ptr_extent(in, p, elem, &n)) return NULL;
  if (idx >= 0 && idx < n) return p.base + idx * elem_size(elem);
  array_name(in, p, name, sizeof name);
  if (n == 0) fault(in, "index %lld out of bounds of %s, which is empty",
                    (long long)idx, name);
  else fault(in, "index %lld out of bounds 0..%lld of %s", (long long)idx,
             (long long)(n - 1), name);
  return NULL;
}

/* ---- expressions ---- */

static bool eval(Interp *in, const LirExpr *e, Val *out);

static bool int_div(Interp *in, LirBinOp op, LirType t, int64_t a, int64_t b,
                    Val *out) {
  int64_t min = lir_int_min(t);
  if (b == 0) return fault(in, "integer %s by zero",
                           op == LOP_DIV ? "division" : "remainder");
  if (lir_type_is_unsigned(t)) {
    uint64_t x = (uint64_t)a, y = (uint64_t)b;
    out->i = wrap(t, op == LOP_DIV ? x / y : x % y);
    return true;
  }
  if (a == min && b == -1) out->i = op == LOP_DIV ? min : 0;  /* wraps */
  else out->i = wrap(t, (uint64_t)(op == LOP_DIV ? a / b : a % b));
  return true;
}

static bool int_op(Interp *in, LirBinOp op, LirType t, int64_t a, int64_t b,
                   Val *out) {
  uint64_t x = (uint64_t)a, y = (uint64_t)b;
  if (lir_type_is_unsigned(t) && op >= LOP_MIN && op <= LOP_GE) {
    switch (op) { /* unsigned order (values are zero-extended bits) */
    case LOP_MIN: out->i = x < y ? a : b; return true;
    case LOP_MAX: out->i = x > y ? a : b; return true;
    case LOP_LT: out->i = x < y; return true;
    case LOP_LE: out->i = x <= y; return true;
    case LOP_GT: out->i = x > y; return true;
    default: out->i = x >= y; return true;
    }
  }
  switch (op) {
  case LOP_ADD: out->i = wrap(t, x + y); return true;
  case LOP_SUB: out->i = wrap(t, x - y); return true;
  case LOP_MUL: out->i = wrap(t, x * y); return true;
  case LOP_DIV: case LOP_REM: return int_div(in, op, t, a, b, out);
  case LOP_MIN: out->i = a < b ? a : b; return true;
  case LOP_MAX: out->i = a > b ? a : b; return true;
  case LOP_LT: out->i = a < b; return true;
  case LOP_LE: out->i = a <= b; return true;
  case LOP_GT: out->i = a > b; return true;
  case LOP_GE: out->i = a >= b; return true;
  case LOP_EQ: out->i = a == b; return true;
  case LOP_NE: out->i = a != b; return true;
  case LOP_AND: out->i = a && b; return true;
  case LOP_OR: out->i = a || b; return true;
  case LOP_POW: break; /* float only (the verifier's rule) */
  }
  return fault(in, "unknown operator");
}

/* Arithmetic in float for f32 (so every result rounds to float). */
static double f32_op(LirBinOp op, float a, float b) {
  switch (op) {
  case LOP_ADD: return a + b;
  case LOP_SUB: return a - b;
  case LOP_MUL: return a * b;
  case LOP_DIV: return a / b;
  case LOP_POW: return powf(a, b);
  case LOP_MIN: return a < b ? a : b;
  default: return a > b ? a : b;
  }
}

static double f64_op(LirBinOp op, double a, double b) {
  switch (op) {
  case LOP_ADD: return a + b;
  case LOP_SUB: return a - b;
  case LOP_MUL: return a * b;
  case LOP_DIV: return a / b;
  case LOP_POW: return pow(a, b);
  case LOP_MIN: return a < b ? a : b;
  default: return a > b ? a : b;
  }
}

static bool float_op(LirBinOp op, LirType t, double a, double b, Val *out) {
  switch (op) {
  case LOP_LT: out->i = a < b; return true;
  case LOP_LE: out->i = a <= b; return true;
  case LOP_GT: out->i = a > b; return true;
  case LOP_GE: out->i = a >= b; return true;
  case LOP_EQ: out->i = a == b; return true;
  case LOP_NE: out->i = a != b; return true;
  default: break;
  }
  out->f = t == LT_F32 ? f32_op(op, (float)a, (float)b) : f64_op(op, a, b);
  return true;
}

/* a op b where both have type t (not short-circuiting). */
static bool apply(Interp *in, LirBinOp op, LirType t, Val a, Val b, Val *out) {
  if (lir_type_is_float(t)) return float_op(op, t, a.f, b.f, out);
  return int_op(in, op, t, a.i, b.i, out);
}

static bool eval_bin(Interp *in, const LirExpr *e, Val *out) {
  Val a, b;
  LirBinOp op = e->u.bin.op;
  if (!eval(in, e->u.bin.a, &a)) return false;
  if ((op == LOP_AND && !a.i) || (op == LOP_OR && a.i)) {
    out->i = op == LOP_OR;
    return true;
  }
  if (!eval(in, e->u.bin.b, &b)) return false;
  return apply(in, op, e->u.bin.a->type, a, b, out);
}

static bool eval_un(Interp *in, const LirExpr *e, Val *out) {
  Val a;
  LirType t = e->u.un.a->type;
  bool f32 = t == LT_F32;
  if (!eval(in, e->u.un.a, &a)) return false;
  if (!lir_type_is_float(t)) {
    uint64_t x = (uint64_t)a.i;
    switch (e->u.un.op) {
    case LUN_NOT: out->i = !a.i; break;
    case LUN_NEG: out->i = wrap(t, 0 - x); break;
    default: out->i = a.i < 0 && !lir_type_is_unsigned(t) ? wrap(t, 0 - x) : a.i; break;  /* abs */
    }
    return true;
  }
  float x = (float)a.f;
  switch (e->u.un.op) {
  case LUN_NEG: out->f = -a.f; break;
  case LUN_SQRT: out->f = f32 ? sqrtf(x) : sqrt(a.f); break;
  case LUN_ABS: out->f = f32 ? fabsf(x) : fabs(a.f); break;
  case LUN_EXP: out->f = f32 ? expf(x) : exp(a.f); break;
  case LUN_LOG: out->f = f32 ? logf(x) : log(a.f); break;
  default: return fault(in, "'!' on a float");
  }
  return true;
}

/* C conversions; a float out of the target's range gives the target's
 * minimum, as x86's cvtt* instructions do. */
static void convert(LirType to, LirType from, Val a, Val *out) {
  if (to == LT_BOOL) {
    out->i = lir_type_is_float(from) ? a.f != 0 : a.i != 0;
  } else if (lir_type_is_int(to) && !lir_type_is_float(from)) {
    out->i = wrap(to, (uint64_t)a.i);
  } else if (lir_type_is_unsigned(to)) { /* [0, 2^bits); outside it 0 */
    double lim = to == LT_U64 ? 0x1p64 : (double)lir_int_max(to) + 1;
    out->i = a.f > -1 && a.f < lim ? wrap(to, (uint64_t)a.f) : 0;
  } else if (lir_type_is_int(to)) {
    double lim = -(double)lir_int_min(to);
    int64_t min = lir_int_min(to);
    bool in_range = a.f > -lim - 1 && a.f < lim;  /* false for NaN */
    out->i = in_range ? wrap(to, (uint64_t)(int64_t)a.f) : min;
  } else if (lir_type_is_float(from)) {
    out->f = to == LT_F32 ? (double)(float)a.f : a.f;
  } else if (lir_type_is_unsigned(from)) {
    out->f = to == LT_F32 ? (double)(float)(uint64_t)a.i : (double)(uint64_t)a.i;
  } else {
    out->f = to == LT_F32 ? (double)(float)a.i : (double)a.i;
  }
}

static void eval_field(Interp *in, const LirExpr *e, Val *out) {
  tj_storage *s = in->ops[e->u.field.operand];
  int l = e->u.field.level;
  Ptr p = {.org = ORG_FIELD, .operand = (int16_t)e->u.field.operand,
           .index = l};
  int64_t len;
  switch (e->u.field.field) {
  case LF_DIM: out->i = s->dims[l]; return;
  case LF_LVL_SIZE: out->i = s->levels[l].size; return;
  case LF_POS_LEN: out->i = s->levels[l].pos_len; return;
  case LF_CRD_LEN: out->i = s->levels[l].crd_len; return;
  case LF_VALS_LEN: out->i = s->vals_len; return;
  case LF_SLICE_OFF: case LF_SLICE_SIZE: case LF_SLICE_STRIDE:
    out->i = s->slice[l][e->u.field.field - LF_SLICE_OFF];
    return;
  case LF_POS: p.arr = TJ_ARR_POS; break;
  case LF_CRD: p.arr = TJ_ARR_CRD; break;
  case LF_VALS: p.arr = TJ_ARR_VALS; break;
  }
  p.base = field_array(in, p, &len);
  out->p = p;
}

static bool eval(Interp *in, const LirExpr *e, Val *out) {
  Val a, b;
  switch (e->kind) {
  case LE_CONST:
    if (lir_type_is_ptr(e->type)) out->p = (Ptr){0};
    else if (lir_type_is_float(e->type))
      out->f = e->type == LT_F32 ? (double)(float)e->u.c.f : e->u.c.f;
    else out->i = wrap(e->type, (uint64_t)e->u.c.i);
    return true;
  case LE_VAR: *out = in->env[e->u.var->id]; return true;
  case LE_FIELD: eval_field(in, e, out); return true;
  case LE_LOAD: {
    if (!eval(in, e->u.load.ptr, &a) || !eval(in, e->u.load.idx, &b))
      return false;
    const char *addr = elem_addr(in, a.p, e->type, b.i);
    if (!addr) return false;
    read_elem(e->type, addr, out);
    return true;
  }
  case LE_BIN: return eval_bin(in, e, out);
  case LE_UN: return eval_un(in, e, out);
  case LE_CAST:
    if (!eval(in, e->u.cast, &a)) return false;
    convert(e->type, e->u.cast->type, a, out);
    return true;
  case LE_SELECT:
    if (!eval(in, e->u.sel.cond, &a)) return false;
    return eval(in, a.i ? e->u.sel.a : e->u.sel.b, out);
  }
  return fault(in, "unknown expression kind");
}

/* ---- statements ---- */

static Exit exec_list(Interp *in, const LirStmt *s);

/* *dst = e, or *dst = *dst op e (with C's short-circuit for && and ||). */
static bool update(Interp *in, int op, LirType t, Val *dst, const LirExpr *e) {
  Val v;
  if (op == LOP_AND && !dst->i) return true;
  if (op == LOP_OR && dst->i) return true;
  if (!eval(in, e, &v)) return false;
  if (op < 0) {
    *dst = v;
    return true;
  }
  return apply(in, (LirBinOp)op, t, *dst, v, dst);
}

static Exit exec_store(Interp *in, const LirStmt *s) {
  Val p, idx, old;
  LirType t = lir_elem_type(s->u.store.ptr->type);
  if (!eval(in, s->u.store.ptr, &p) || !eval(in, s->u.store.idx, &idx))
    return EX_FAULT;
  char *addr = elem_addr(in, p.p, t, idx.i);
  if (!addr) return EX_FAULT;
  if (s->u.store.op >= 0) read_elem(t, addr, &old);
  if (!update(in, s->u.store.op, t, &old, s->u.store.e)) return EX_FAULT;
  write_elem(t, addr, old);
  return EX_OK;
}

static Exit exec_setfield(Interp *in, const LirStmt *s) {
  Val v;
  tj_storage *st = in->ops[s->u.setfield.operand];
  int l = s->u.setfield.level;
  if (!eval(in, s->u.setfield.e, &v)) return EX_FAULT;
  switch (s->u.setfield.field) {
  case LF_POS_LEN: st->levels[l].pos_len = v.i; break;
  case LF_CRD_LEN: st->levels[l].crd_len = v.i; break;
  default: st->vals_len = v.i; break;
  }
  return EX_OK;
}

static Exit exec_for(Interp *in, const LirStmt *s) {
  Val *iv = &in->env[s->u.loop.iv->id], hi, step;
  LirType t = s->u.loop.iv->type;
  if (!eval(in, s->u.loop.lo, iv)) return EX_FAULT;
  for (;;) {
    if (!eval(in, s->u.loop.hi, &hi)) return EX_FAULT;
    if (!(iv->i < hi.i)) return EX_OK;
    Exit r = exec_list(in, s->u.loop.body);
    if (r != EX_OK) return r;
    if (!eval(in, s->u.loop.step, &step)) return EX_FAULT;
    if (s->u.loop.at.vec_width > 0) step.i = 1; /* lanes run in order */
    iv->i = wrap(t, (uint64_t)iv->i + (uint64_t)step.i);
  }
}

static Exit exec_while(Interp *in, const LirStmt *s) {
  Val c;
  for (;;) {
    if (!eval(in, s->u.whl.cond, &c)) return EX_FAULT;
    if (!c.i) return EX_OK;
    Exit r = exec_list(in, s->u.whl.body);
    if (r != EX_OK) return r;
  }
}

static Exit exec_alloc(Interp *in, const LirStmt *s) {
  Val n;
  void *mem;
  if (!eval(in, s->u.call.a, &n)) return EX_FAULT;
  if (in->nws == in->cap_ws) {
    int cap = in->cap_ws ? 2 * in->cap_ws : 8;
    Workspace *ws = realloc(in->ws, (size_t)cap * sizeof *ws);
    if (!ws) {
      in->rc = TJ_KERNEL_NOMEM;
      return EX_FAIL;
    }
    in->ws = ws, in->cap_ws = cap;
  }
  int32_t rc = tj_rt_alloc(n.i, &mem);
  if (rc != 0) {
    in->rc = rc;
    return EX_FAIL;
  }
  in->ws[in->nws] = (Workspace){mem, n.i > 0 ? n.i : 0, s->u.call.ptr->name,
                                true};
  in->env[s->u.call.ptr->id].p =
      (Ptr){.base = mem, .org = ORG_WS, .index = in->nws++};
  return EX_OK;
}

static Exit exec_free(Interp *in, const LirStmt *s) {
  Val *v = &in->env[s->u.call.ptr->id];
  char name[96];
  if (v->p.org == ORG_FIELD) {
    array_name(in, v->p, name, sizeof name);
    fault(in, "tj_rt_free of %s, which the kernel does not own", name);
    return EX_FAULT;
  }
  if (v->p.org == ORG_WS) {
    Workspace *w = &in->ws[v->p.index];
    if (!w->is_live) {
      fault(in, "%s freed twice", w->name);
      return EX_FAULT;
    }
    tj_rt_free(w->mem);
    w->is_live = false;
  }
  v->p = (Ptr){0};
  return EX_OK;
}

/* memset(ptr + lo, 0, (hi - lo) * size) and sort_crd(ptr + lo, hi - lo, size). */
static Exit exec_range(Interp *in, const LirStmt *s) {
  Val p = in->env[s->u.call.ptr->id], lo, hi = {0};
  LirType t = lir_elem_type(s->u.call.ptr->type);
  int64_t n = 0;
  bool is_zero = s->u.call.h == LH_ZERO;
  if (!eval(in, s->u.call.a, &lo)) return EX_FAULT;
  if (!eval(in, s->u.call.b, &hi)) return EX_FAULT;
  if (is_zero ? lo.i == hi.i : hi.i - lo.i < 2) return EX_OK;  /* C does nothing */
  if (!ptr_extent(in, p.p, t, &n)) return EX_FAULT;
  if (lo.i < 0 || lo.i > hi.i || hi.i > n) {
    char name[96];
    array_name(in, p.p, name, sizeof name);
    fault(in, "%s range %lld..%lld out of bounds 0..%lld of %s",
          is_zero ? "zero" : "sort", (long long)lo.i, (long long)hi.i,
          (long long)n, name);
    return EX_FAULT;
  }
  if (is_zero)
    memset(p.p.base + lo.i * elem_size(t), 0,
           (size_t)(hi.i - lo.i) * (size_t)elem_size(t));
  else
    tj_rt_sort_crd(p.p.base + lo.i * elem_size(t), hi.i - lo.i, elem_size(t));
  return EX_OK;
}

/* ret = marked_crd(ptr + lo, mark, words, size), the marks' array and the
 * output's room checked first. */
static Exit exec_marked(Interp *in, const LirStmt *s) {
  Val p = in->env[s->u.call.ptr->id], m = in->env[s->u.call.mark->id], lo, words;
  LirType t = lir_elem_type(s->u.call.ptr->type);
  int64_t n = 0, nm = 0;
  if (!eval(in, s->u.call.a, &lo) || !eval(in, s->u.call.b, &words)) return EX_FAULT;
  if (!ptr_extent(in, p.p, t, &n) || !ptr_extent(in, m.p, LT_BOOL, &nm)) return EX_FAULT;
  if (lo.i < 0 || words.i < 0 || nm < words.i * 65 + 64) {
    fault(in, "marked coordinates: marks of %lld bytes for %lld words", (long long)nm,
          (long long)words.i);
    return EX_FAULT;
  }
  const uint8_t *mk = (const uint8_t *)m.p.base;
  int64_t count = 0;
  for (int64_t j = 0; j < words.i * 64; j++) count += mk[words.i * 64 + j / 64] && mk[j];
  if (lo.i + count > n) {
    fault(in, "marked coordinates: %lld from %lld past the array's %lld", (long long)count,
          (long long)lo.i, (long long)n);
    return EX_FAULT;
  }
  in->env[s->u.call.ret->id].i =
      tj_rt_marked_crd(p.p.base + lo.i * elem_size(t), m.p.base, words.i, elem_size(t));
  return EX_OK;
}

/* A helper's return code: 0 goes on, else the kernel's fail exit. */
static Exit helper_rc(Interp *in, int32_t rc) {
  if (rc == 0) return EX_OK;
  in->rc = rc;
  return EX_FAIL;
}

static Exit exec_call(Interp *in, const LirStmt *s) {
  Val need;
  switch (s->u.call.h) {
  case LH_RESERVE:
    if (!eval(in, s->u.call.a, &need)) return EX_FAULT;
    return helper_rc(in, tj_rt_reserve(in->ops[s->u.call.operand],
                                       s->u.call.arr | (s->u.call.raw ? TJ_ARR_NOZERO : 0),
                                       s->u.call.level, need.i));
  case LH_GETT:   /* the runtime's portable micro-kernel */
    return helper_rc(in, tj_rt_gett(in->ops, s->u.call.plan, NULL));
  case LH_ALLOC: return exec_alloc(in, s);
  case LH_FREE: return exec_free(in, s);
  case LH_MARKED_CRD: return exec_marked(in, s);
  case LH_THREADS:      /* serial: one slot, this thread's */
  case LH_THREAD_SLOT:
    in->env[s->u.call.ptr->id].i = s->u.call.h == LH_THREADS ? 1 : 0;
    return EX_OK;
  default: return exec_range(in, s);
  }
}

static Exit exec_stmt(Interp *in, const LirStmt *s) {
  Val c;
  switch (s->kind) {
  case LS_DECL:
    in->env[s->u.decl.var->id] = (Val){0};
    if (s->u.decl.init && !eval(in, s->u.decl.init, &in->env[s->u.decl.var->id]))
      return EX_FAULT;
    return EX_OK;
  case LS_ASSIGN:
    return update(in, s->u.assign.op, s->u.assign.var->type,
                  &in->env[s->u.assign.var->id], s->u.assign.e)
               ? EX_OK : EX_FAULT;
  case LS_STORE: return exec_store(in, s);
  case LS_SETFIELD: return exec_setfield(in, s);
  case LS_FOR: return exec_for(in, s);
  case LS_WHILE: return exec_while(in, s);
  case LS_IF:
    if (!eval(in, s->u.cond.cond, &c)) return EX_FAULT;
    return exec_list(in, c.i ? s->u.cond.then : s->u.cond.els);
  case LS_CALL: return exec_call(in, s);
  case LS_BLOCK: return exec_list(in, s->u.block);
  case LS_COMMENT: return EX_OK;
  case LS_PREFETCH: return EX_OK;   /* a hint: reads nothing */
  }
  fault(in, "unknown statement kind");
  return EX_FAULT;
}

static Exit exec_list(Interp *in, const LirStmt *s) {
  for (; s; s = s->next) {
    Exit r = exec_stmt(in, s);
    if (r != EX_OK) return r;
  }
  return EX_OK;
}

/* ---- the kernel ---- */

/* The storages must have the orders, dtypes and widths k was built for. */
static bool check_operands(Interp *in) {
  const LirKernel *k = in->k;
  if (!in->ops && k->noperands > 0) return fault(in, "operands is NULL");
  for (int i = 0; i < k->noperands; i++) {
    const LirOperand *o = &k->operands[i];
    const tj_storage *s = in->ops[i];
    const char *n = opname(k, i);
    if (!s) return fault(in, "operand %d (%s) is NULL", i, n);
    if (s->order != o->order || s->order < 0 || s->order > TJ_MAX_ORDER)
      return fault(in, "operand %s has order %d but the kernel expects %d", n,
                   s->order, o->order);
    if (s->dtype != o->dtype)
      return fault(in, "operand %s has dtype %s but the kernel expects %s", n,
                   nt_dtype_name((tj_dtype)s->dtype), nt_dtype_name((tj_dtype)o->dtype));
    if ((o->pos_width && s->pos_width != o->pos_width) ||
        (o->crd_width && s->crd_width != o->crd_width))
      return fault(in, "operand %s has pos/crd widths %d/%d but the kernel "
                   "expects %d/%d", n, s->pos_width, s->crd_width,
                   o->pos_width, o->crd_width);
  }
  return true;
}

/* Frees what the kernel left allocated; a leak is a fault of the IR. */
static Exit release_workspaces(Interp *in, Exit r) {
  for (int i = 0; i < in->nws; i++) {
    if (!in->ws[i].is_live) continue;
    if (r != EX_FAULT) {
      fault(in, "workspace %s was never freed", in->ws[i].name);
      r = EX_FAULT;
    }
    tj_rt_free(in->ws[i].mem);
    in->ws[i].is_live = false;
  }
  return r;
}

int32_t lir_interp(const LirKernel *k, tj_storage **operands, Diag *d) {
  Interp in = {.k = k, .ops = operands, .d = d};
  if (!lir_verify(k, d) || !check_operands(&in)) return LIR_INTERP_FAULT;
  in.env = calloc((size_t)(k->nvars > 0 ? k->nvars : 1), sizeof *in.env);
  if (!in.env) {
    diag_error(d, TJ_ERR_NOMEM, "loop IR interpreter: out of memory");
    return LIR_INTERP_FAULT;
  }
  Exit r = exec_list(&in, k->body);
  if (r == EX_OK) in.rc = 0;
  Exit rc = exec_list(&in, k->cleanup);  /* `fail:` -- runs on every exit */
  if (r != EX_FAULT) r = rc;
  r = release_workspaces(&in, r);
  free(in.env);
  free(in.ws);
  return r == EX_FAULT ? LIR_INTERP_FAULT : in.rc;
}

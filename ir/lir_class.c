/* Vectorization classes (lir_class.h). A class is a fact about the lanes
 * iv = b, b+1, ..., b+W-1 of one vector step:
 *   uniform   constants, fields, variables declared outside the loop (the
 *             caller says), and any operation or load of uniform values;
 *   unit      the iv itself, and what keeps "lane l = base + l": integer
 *             uniform + unit, unit + uniform, unit - uniform, and integer
 *             casts of a unit value;
 *   varying   everything else (products, uniform - unit, loads at a unit or
 *             varying index, loads through a varying pointer, floats).
 * Why the two edge rules:
 *   - unit +/- uniform stays unit only for integers. A float value is never
 *     unit: the emitter adds lane numbers with integer adds, and float
 *     addition of lane numbers does not round like the scalar program.
 *   - An int -> int cast of a unit value is unit, widening or narrowing:
 *     truncation is exact modulo 2^32 (trunc(b + l) == trunc(b) + l), and a
 *     widened i32 unit value is a truncated coordinate, which fits in 32 bits
 *     (a 32-bit crd width implies extents up to INT32_MAX), so its lanes do
 *     not wrap. Before this file the vectorizer kept only widenings to i64
 *     and the emitter any int -> int cast, so a narrowed unit index made the
 *     vectorizer refuse a store or count a gather where the emitter would
 *     have made one vector access.
 *     int <-> float casts are varying (a float is never unit).
 */
#include "lir_class.h"

LirClass lir_class_join(LirClass a, LirClass b) { return a > b ? a : b; }

LirClass lir_class_bin(LirBinOp op, LirType t, LirClass a, LirClass b) {
  if (a == LIR_UNIFORM && b == LIR_UNIFORM) return LIR_UNIFORM;
  if (!lir_type_is_int(t)) return LIR_VARYING;
  if (op == LOP_ADD && ((a == LIR_UNIT && b == LIR_UNIFORM) ||
                        (a == LIR_UNIFORM && b == LIR_UNIT)))
    return LIR_UNIT;
  return op == LOP_SUB && a == LIR_UNIT && b == LIR_UNIFORM ? LIR_UNIT : LIR_VARYING;
}

LirClass lir_class_cast(LirType from, LirType to, LirClass a) {
  if (a == LIR_UNIT && lir_type_is_int(from) && lir_type_is_int(to)) return LIR_UNIT;
  return lir_class_lanewise(a);
}

LirClass lir_class_load(LirClass ptr, LirClass idx) {
  return ptr == LIR_UNIFORM && idx == LIR_UNIFORM ? LIR_UNIFORM : LIR_VARYING;
}

LirClass lir_class_lanewise(LirClass a) { return a == LIR_UNIFORM ? LIR_UNIFORM : LIR_VARYING; }

LirClass lir_classify(const LirExpr *e, const LirVar *iv, const LirClassEnv *env) {
  LirClass a, b, c;
  switch (e->kind) {
  case LE_CONST:
  case LE_FIELD: return LIR_UNIFORM;
  case LE_VAR:
    if (env->on_read) env->on_read(env->cx, e->u.var);
    return e->u.var == iv ? LIR_UNIT : env->var(env->cx, e->u.var);
  case LE_LOAD:
    a = lir_classify(e->u.load.ptr, iv, env), b = lir_classify(e->u.load.idx, iv, env);
    if (env->on_load) env->on_load(env->cx, a, b);
    return lir_class_load(a, b);
  case LE_BIN:
    a = lir_classify(e->u.bin.a, iv, env), b = lir_classify(e->u.bin.b, iv, env);
    return lir_class_bin(e->u.bin.op, e->u.bin.a->type, a, b);
  case LE_UN: return lir_class_lanewise(lir_classify(e->u.un.a, iv, env));
  case LE_CAST: return lir_class_cast(e->u.cast->type, e->type, lir_classify(e->u.cast, iv, env));
  case LE_SELECT:
    a = lir_classify(e->u.sel.cond, iv, env), b = lir_classify(e->u.sel.a, iv, env);
    c = lir_classify(e->u.sel.b, iv, env);
    return lir_class_lanewise(lir_class_join(a, lir_class_join(b, c)));
  }
  return LIR_VARYING;
}

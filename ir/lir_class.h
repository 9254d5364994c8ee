/* Vectorization classes of loop-IR values: how a value varies across the
 * lanes of a loop over iv run W iterations at a time. One rule set, read by
 * the vectorizer (lower/vectorize.c, which decides what to widen) and the
 * vector emitter (jit/emit_vector.c, which widens it), so the two cannot
 * disagree on what a unit-stride access is. The rules are in lir_class.c.
 */
#ifndef TJ_IR_LIR_CLASS_H
#define TJ_IR_LIR_CLASS_H

#include "loop_ir.h"

/* Ordered: a join is the larger. */
typedef enum {
  LIR_UNIFORM,  /* one value for all lanes */
  LIR_UNIT,     /* lane l holds base + l (integers only) */
  LIR_VARYING   /* anything else: one register of W lanes */
} LirClass;

/* What a classification needs from its caller: the class of variables other
 * than iv (each side answers from its own state), and optional hooks. */
typedef struct LirClassEnv {
  LirClass (*var)(void *cx, const LirVar *v);        /* required */
  void (*on_read)(void *cx, const LirVar *v);        /* each variable read, iv too */
  void (*on_load)(void *cx, LirClass ptr, LirClass idx);  /* each load */
  void *cx;
} LirClassEnv;

/* The class of e in a loop over iv; visits every subexpression (so every
 * hook runs), also where the answer is known early. */
LirClass lir_classify(const LirExpr *e, const LirVar *iv, const LirClassEnv *env);

/* The per-node rules lir_classify applies, for code that classifies values
 * as it builds them. */
LirClass lir_class_join(LirClass a, LirClass b);
/* a op b, the operands of type t. */
LirClass lir_class_bin(LirBinOp op, LirType t, LirClass a, LirClass b);
/* (to) a, a of type from. */
LirClass lir_class_cast(LirType from, LirType to, LirClass a);
/* ptr[idx]. */
LirClass lir_class_load(LirClass ptr, LirClass idx);
/* A lane-wise operation (unary op, select) of operands joined into a. */
LirClass lir_class_lanewise(LirClass a);

#endif

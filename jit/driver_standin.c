/* Outputs whose levels no kernel writes directly, through a stand-in.
 *
 * A loose_compressed level (lo and hi per segment) is read by kernels but
 * not appended to: its segments may sit anywhere in crd. An output with
 * such a level is compiled over a stand-in of the same name, dims and
 * dtype whose levels are the ones a kernel writes in their place
 * (LevelType.written: compressed for loose_compressed,
 * lv_output_standin), and each run evaluates into a fresh stand-in (under
 * `+=` holding the output's contents) that is then repacked into the
 * output (rt_tensor_assign_levels: the caller's wrapped arrays refilled
 * where the result fits them). Every phase evaluates, since the output is
 * built whole; a failed run leaves the output empty, or as it was under
 * `+=`. The schedule, the plan and the kernel are the stand-in's, so the
 * output costs one repack a run over a CSR-like output.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ir/level.h"
#include "driver.h"

struct DrvStandin {
  tj_tensor *t;                      /* the compile's stand-in, owned */
  tj_format fmt;                     /* its format */
  bool accumulate;                   /* `+=`: a run's stand-in starts as the output */
  int norig;
  tj_tensor *orig[NT_MAX_TENSORS];   /* the compile's operands */
  char out[64];                      /* the output's name */
};

/* Whether s's output has a level no kernel writes: its stand-in's
 * format then goes to *fmt. Blocked outputs and views keep their own
 * routes (and messages); no split (an expression that does not check) is
 * not taken (the usual route says why). */
static bool wanted(const DrvSplit *s, tj_format *fmt) {
  const tj_tensor *a = drv_split_output(s);
  if (!a || a->blocked || a->base) return false;
  return lv_output_standin(tj_tensor_format(a), fmt);
}

bool drv_standin_wanted(const DrvSplit *s) {
  tj_format f;
  return wanted(s, &f);
}

void drv_standin_free(DrvStandin *s) {
  if (!s) return;
  tj_tensor_free(s->t);
  free(s);
}

tj_status drv_standin_compile(tj_context *cx, const DrvSplit *sp, const char *expr,
                              tj_tensor *const *ops, int n, const char *schedule,
                              const tj_options *opts, tj_kernel **out) {
  if (n <= 0 || n > NT_MAX_TENSORS)
    return rt_set_error(TJ_ERR_INVALID, "tj_compile: %d operands", n);
  DrvStandin *s = calloc(1, sizeof *s);
  tj_tensor **ops2 = calloc((size_t)n, sizeof *ops2);
  if (!s || !ops2) {
    free(s), free(ops2);
    return rt_set_error(TJ_ERR_NOMEM, "out of memory");
  }
  if (!wanted(sp, &s->fmt)) {
    free(s), free(ops2);
    return rt_set_error(TJ_ERR_INVALID, "tj_compile: %s has no output a stand-in is made for",
                        expr);
  }
  s->accumulate = drv_split_accumulates(sp);
  snprintf(s->out, sizeof s->out, "%s", tj_tensor_name(drv_split_output(sp)));
  const tj_tensor *a = drv_operand_named(ops, n, s->out);
  tj_status st = tj_tensor_new(s->out, tj_tensor_dtype(a), tj_tensor_order(a), a->dims, &s->fmt,
                               &s->t);
  if (st == TJ_OK) {
    for (int k = 0; k < n; k++) ops2[k] = ops[k] == a ? s->t : ops[k];
    st = tj_compile(cx, expr, ops2, n, schedule, opts, out);
  }
  free(ops2);
  if (st != TJ_OK) {
    drv_standin_free(s);
    return st;
  }
  s->norig = n;
  memcpy(s->orig, ops, (size_t)n * sizeof *ops);
  (*out)->standin = s;
  return TJ_OK;
}

tj_status drv_standin_run(tj_kernel *k, tj_tensor *const *operands, int n, bool interpret,
                          DrvRunFn run) {
  DrvStandin *s = k->standin;
  if (!operands) operands = s->orig, n = s->norig;
  if (n <= 0 || n > NT_MAX_TENSORS)
    return rt_set_error(TJ_ERR_INVALID, "tj_kernel_run: %d operands", n);
  tj_tensor *a = drv_operand_named(operands, n, s->out);
  tj_format f;
  if (!a)
    return rt_set_error(TJ_ERR_INVALID, "tj_kernel_run: no operand named %s (the output)",
                        s->out);
  if (a->blocked || a->base || !lv_output_standin(tj_tensor_format(a), &f) ||
      memcmp(f.levels, s->fmt.levels, sizeof f.levels) || tj_tensor_order(a) != s->t->order)
    return rt_set_error(TJ_ERR_FORMAT, "tj_kernel_run: output %s is not in the format the "
                        "kernel was compiled for", s->out);
  /* this run's stand-in: the output's dims (and, under +=, its contents) */
  tj_tensor *fresh;
  tj_status st = s->accumulate ? rt_tensor_convert_all(a, &s->fmt, &fresh)
                 : tj_tensor_new(s->out, tj_tensor_dtype(a), tj_tensor_order(a), a->dims,
                                 &s->fmt, &fresh);
  if (st != TJ_OK) return st;
  tj_tensor *ops2[NT_MAX_TENSORS];
  for (int i = 0; i < n; i++) ops2[i] = operands[i] == a ? fresh : operands[i];
  st = run(k, TJ_EVALUATE, ops2, n, interpret);
  if (st == TJ_OK) st = rt_tensor_assign_levels(a, fresh, s->accumulate);
  tj_tensor_free(fresh);
  return st;
}

/* Numbered kernels for soak and stress tests: kernel number n (0, 1, 2,
 * ...) is one of five expressions over a 12 x 10 matrix A in one of four
 * formats, with a schedule, options and a constant that all follow from n,
 * so distinct numbers are distinct kernel-cache keys. Each is checked
 * against plain C loops over dense copies of its operands.
 *
 *   NkInputs in;  nk_inputs_init(&in, seed);      shared, read-only
 *   NkOutputs out; nk_outputs_init(&out);         one set per thread
 *   NkSpec s = nk_spec(n);
 *   tj_tensor *ops[NK_MAX_OPS]; int m = nk_operands(&in, &out, &s, ops);
 *   tj_compile(cx, s.expr, ops, m, s.schedule, &s.opts, &k); run ...
 *   nk_check(&in, &out, &s, why, sizeof why)
 */
#ifndef TJ_TESTS_NUMBERED_KERNELS_H
#define TJ_TESTS_NUMBERED_KERNELS_H

#include <stdbool.h>
#include <stddef.h>

#include "tensorjit.h"

enum { NK_I = 12, NK_J = 10, NK_FORMATS = 4, NK_TEMPLATES = 5, NK_MAX_OPS = 4 };

/* Inputs in every format, with their dense copies (the oracle's). */
typedef struct NkInputs {
  double a[NK_I][NK_J], b[NK_I][NK_J], xi[NK_I], xj[NK_J], z[NK_I];
  tj_tensor *A[NK_FORMATS], *B, *x_i, *x_j, *z_t;
} NkInputs;

/* The outputs the kernels write (y over i, y over j, C, the scalar a). */
typedef struct NkOutputs {
  tj_tensor *y, *yt, *C, *s;
} NkOutputs;

typedef struct NkSpec {
  long n;
  int templ, fmt;
  const char *schedule;    /* NULL or "parallelize(i)" */
  tj_options opts;
  double c;                /* the expression's constant */
  char expr[128];
} NkSpec;

/* Seeded values (ck_assert on a library failure). */
void nk_inputs_init(NkInputs *in, unsigned seed);
void nk_inputs_free(NkInputs *in);
void nk_outputs_init(NkOutputs *out);
void nk_outputs_free(NkOutputs *out);
NkSpec nk_spec(long n);
/* A's format of s, as spelled for tj_format_parse. */
const char *nk_format(const NkSpec *s);
/* The operands of s, output first; returns their count. */
int nk_operands(const NkInputs *in, const NkOutputs *out, const NkSpec *s, tj_tensor **ops);
/* True when out holds s's result on in; else false and why says what
 * differs (kernel number, expression, entry, values). */
bool nk_check(const NkInputs *in, const NkOutputs *out, const NkSpec *s, char *why, size_t n);

#endif

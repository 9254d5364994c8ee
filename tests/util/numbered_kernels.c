/* Numbered kernels and their plain-C oracle (see numbered_kernels.h). */
#include "numbered_kernels.h"

#include <check.h>
#include <math.h>
#include <stdio.h>

#define OK(call) ck_assert_msg((call) == TJ_OK, "%s", tj_last_error())

static const char *FORMATS[NK_FORMATS] = {"ds", "dd", "ss", "ds:1,0"};

static tj_tensor *tensor(const char *name, const char *fmt, int order, const int64_t *dims,
                         const double *vals) {
  tj_format f = tj_format_dense(order);
  if (fmt) OK(tj_format_parse(fmt, &f));
  tj_tensor *t;
  OK(tj_tensor_new(name, TJ_F64, order, dims, &f, &t));
  int64_t n = 1;
  for (int m = 0; m < order; m++) n *= dims[m];
  for (int64_t p = 0; vals && p < n; p++) {
    int64_t c[2] = {order == 2 ? p / dims[1] : p, order == 2 ? p % dims[1] : 0};
    if (vals[p] != 0) OK(tj_tensor_insert(t, c, vals[p]));
  }
  OK(tj_tensor_pack(t));
  return t;
}

void nk_inputs_init(NkInputs *in, unsigned seed) {
  for (int i = 0; i < NK_I; i++)
    for (int j = 0; j < NK_J; j++) {
      seed = seed * 1103515245u + 12345u;
      in->a[i][j] = (seed >> 16) % 100 < 30 ? (double)((seed >> 8) % 9) - 4 : 0;
      seed = seed * 1103515245u + 12345u;
      in->b[i][j] = (seed >> 16) % 100 < 40 ? (double)((seed >> 8) % 7) - 3 : 0;
    }
  double shift = (double)(seed % 5);
  for (int i = 0; i < NK_I; i++) in->xi[i] = 0.5 * i - 2 + shift, in->z[i] = 3 - i;
  for (int j = 0; j < NK_J; j++) in->xj[j] = 1 + j - shift;
  int64_t d2[2] = {NK_I, NK_J}, di = NK_I, dj = NK_J;
  for (int f = 0; f < NK_FORMATS; f++) in->A[f] = tensor("A", FORMATS[f], 2, d2, &in->a[0][0]);
  in->B = tensor("B", "ds", 2, d2, &in->b[0][0]);
  in->x_i = tensor("x", NULL, 1, &di, in->xi);
  in->x_j = tensor("x", NULL, 1, &dj, in->xj);
  in->z_t = tensor("z", NULL, 1, &di, in->z);
}

void nk_inputs_free(NkInputs *in) {
  for (int f = 0; f < NK_FORMATS; f++) tj_tensor_free(in->A[f]);
  tj_tensor_free(in->B);
  tj_tensor_free(in->x_i);
  tj_tensor_free(in->x_j);
  tj_tensor_free(in->z_t);
}

void nk_outputs_init(NkOutputs *out) {
  int64_t d2[2] = {NK_I, NK_J}, di = NK_I, dj = NK_J;
  out->y = tensor("y", NULL, 1, &di, NULL);
  out->yt = tensor("y", NULL, 1, &dj, NULL);
  out->C = tensor("C", NULL, 2, d2, NULL);
  out->s = tensor("a", NULL, 0, NULL, NULL);
}

void nk_outputs_free(NkOutputs *out) {
  tj_tensor_free(out->y);
  tj_tensor_free(out->yt);
  tj_tensor_free(out->C);
  tj_tensor_free(out->s);
}

/* The constant alone differs every NK_TEMPLATES * NK_FORMATS * 16 = 320. */
NkSpec nk_spec(long n) {
  NkSpec s = {.n = n, .templ = (int)(n % NK_TEMPLATES), .fmt = (int)(n / NK_TEMPLATES % NK_FORMATS)};
  long base = NK_TEMPLATES * NK_FORMATS;
  bool par = n / base % 2;
  s.opts = tj_options_default();
  s.opts.opt_level = (int)(n / (base * 2) % 4);
  s.opts.no_vectorize = (int)(n / (base * 8) % 2);
  s.opts.nthreads = par ? 2 : 1;
  s.c = 1 + 0.125 * (double)(n / (base * 16));
  static const char *exprs[NK_TEMPLATES] = {
      "y(i) = %.17g * A(i,j) * x(j)", "y(i) = A(i,j) * x(j) + %.17g * z(i)",
      "C(i,j) = A(i,j) + %.17g * B(i,j)", "a = %.17g * A(i,j) * B(i,j)",
      "y(j) = %.17g * A(i,j) * x(i)"};
  /* Row-parallel where the loop over i is outermost and the output's rows
   * are i; elsewhere LLVM's vectorizers off instead (also in the key). */
  bool rows = s.templ < 3 && s.fmt != 3;
  s.schedule = par && rows ? "parallelize(i)" : NULL;
  s.opts.no_llvm_vectorize = par && !rows;
  snprintf(s.expr, sizeof s.expr, exprs[s.templ], s.c);
  return s;
}

const char *nk_format(const NkSpec *s) { return FORMATS[s->fmt]; }

int nk_operands(const NkInputs *in, const NkOutputs *out, const NkSpec *s, tj_tensor **ops) {
  tj_tensor *A = in->A[s->fmt];
  switch (s->templ) {
  case 0: ops[0] = out->y, ops[1] = A, ops[2] = in->x_j; return 3;
  case 1: ops[0] = out->y, ops[1] = A, ops[2] = in->x_j, ops[3] = in->z_t; return 4;
  case 2: ops[0] = out->C, ops[1] = A, ops[2] = in->B; return 3;
  case 3: ops[0] = out->s, ops[1] = A, ops[2] = in->B; return 3;
  default: ops[0] = out->yt, ops[1] = A, ops[2] = in->x_i; return 3;
  }
}

static bool close_to(double got, double want, double tol) {
  if (got == want) return true;   /* infinities too */
  return !isinf(want) && fabs(got - want) <= tol * (1 + fabs(want));
}

bool nk_check(const NkInputs *in, const NkOutputs *out, const NkSpec *s, char *why, size_t n) {
  double c = s->c, got = NAN, want;
  int64_t co[2];
  if (s->templ == 3) {
    want = 0;
    for (int i = 0; i < NK_I; i++)
      for (int j = 0; j < NK_J; j++) want += c * in->a[i][j] * in->b[i][j];
    if (tj_tensor_get(out->s, NULL, &got) == TJ_OK && close_to(got, want, 1e-9)) return true;
    snprintf(why, n, "kernel %ld (%s): %g, want %g", s->n, s->expr, got, want);
    return false;
  }
  if (s->templ == 2) {
    for (co[0] = 0; co[0] < NK_I; co[0]++)
      for (co[1] = 0; co[1] < NK_J; co[1]++) {
        want = in->a[co[0]][co[1]] + c * in->b[co[0]][co[1]];
        if (tj_tensor_get(out->C, co, &got) != TJ_OK || !close_to(got, want, 1e-12)) {
          snprintf(why, n, "kernel %ld (%s) C(%ld,%ld): %g, want %g", s->n, s->expr,
                   (long)co[0], (long)co[1], got, want);
          return false;
        }
      }
    return true;
  }
  int64_t rows = s->templ == 4 ? NK_J : NK_I;
  for (co[0] = 0; co[0] < rows; co[0]++) {
    int64_t r = co[0];
    want = 0;
    if (s->templ == 4) {
      for (int i = 0; i < NK_I; i++) want += c * in->a[i][r] * in->xi[i];
    } else {
      for (int j = 0; j < NK_J; j++) want += (s->templ == 0 ? c : 1) * in->a[r][j] * in->xj[j];
      if (s->templ == 1) want += c * in->z[r];
    }
    if (tj_tensor_get(s->templ == 4 ? out->yt : out->y, co, &got) != TJ_OK ||
        !close_to(got, want, 1e-9)) {
      snprintf(why, n, "kernel %ld (%s) y(%ld): %g, want %g", s->n, s->expr, (long)r, got, want);
      return false;
    }
  }
  return true;
}

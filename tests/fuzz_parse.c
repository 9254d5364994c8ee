/* libFuzzer target for the index-notation front-end: every input is parsed
 * (NUL-terminated copy), printed and re-parsed (the printed form must parse
 * to an equal tree), checked against a few fixed declarations, and lowered
 * to concrete index notation and evaluated by the reference interpreter,
 * all in a fresh arena, then again under a semiring. "defs | expr"
 * inputs go through the definition parser and inlining. The input is also
 * fed to the schedule parser. Crashes, leaks and sanitizer reports are bugs;
 * errors are expected and must leave a message.
 *
 * Build by hand (from the repository root):
 *   clang-19 -g -O1 -fsanitize=fuzzer,address,undefined -I. \
 *     tests/fuzz_parse.c ir/notation.c ir/parse.c ir/check.c ir/cin.c \
 *     ir/ref_eval.c ir/arena.c ir/diag.c -lm -o /tmp/fuzz_parse
 *   /tmp/fuzz_parse -max_total_time=20 tests/data/notation
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/notation.h"

static TensorDecl decl(const char *name, tj_dtype dt, const char *levels,
                       int order, int64_t dim) {
  TensorDecl t;
  memset(&t, 0, sizeof t);
  t.name = name;
  t.order = order;
  t.dtype = dt;
  t.format.order = order;
  for (int m = 0; m < order; m++) {
    t.dims[m] = dim;
    t.format.levels[m] = levels[m];
    t.format.mode_order[m] = m;
  }
  return t;
}

static void must(int cond, const char *what, const char *src) {
  if (cond) return;
  fprintf(stderr, "fuzz_parse: %s for input \"%s\"\n", what, src);
  abort();
}

/* Evaluates small checked assignments (every dim here is at most 3). */
static void run_ref(const Assignment *as, const char *src) {
  if (as->nindices > 5) return;
  static double store[NT_MAX_TENSORS][27];
  double *dense[NT_MAX_TENSORS];
  for (int t = 0; t < as->ntensors; t++) {
    for (int k = 0; k < 27; k++) store[t][k] = (k % 5) - 1.5;
    dense[t] = store[t];
  }
  Diag d;
  diag_init(&d);
  must(nt_ref_eval(as, dense, NULL, &d), "nt_ref_eval failed", src);
}

/* Parses, prints, re-parses and compares; then checks and builds CIN. */
static void run_notation(const char *src) {
  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d);
  Assignment *as = nt_parse(&a, src, &d);
  must(as || d.msg[0], "parse failed without a message", src);
  if (as) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (f) {
      nt_print(f, as);
      fclose(f);
      Diag d2;
      diag_init(&d2);
      Assignment *back = nt_parse(&a, buf, &d2);
      must(back && nt_equal(as, back), "print does not re-parse equal", src);
      free(buf);
    }
    TensorDecl decls[] = {
        decl("A", TJ_F64, "dd", 2, 3), decl("B", TJ_F64, "ds", 2, 3),
        decl("C", TJ_F64, "dd", 2, 3), decl("x", TJ_F64, "d", 1, 3),
        decl("y", TJ_F64, "d", 1, 3),  decl("a", TJ_F64, "", 0, 0),
        decl("F", TJ_F32, "dd", 2, 3), decl("T", TJ_F64, "sss", 3, 2),
        decl("O", TJ_F64, "dd", 2, -1)};
    Diag d3;
    diag_init(&d3);
    if (nt_check(&a, as, decls, (int)(sizeof decls / sizeof decls[0]), NULL,
                 0, &d3)) {
      Cin *c = cin_from_assignment(&a, as, NULL, &d3);
      must(c != NULL, "cin_from_assignment failed", src);
      FILE *null = fopen("/dev/null", "w");
      if (null) {
        cin_print(null, c);
        fclose(null);
      }
      run_ref(as, src);
      /* the same under a semiring (chosen by the input's length) */
      static const char *const srs[] = {"min.plus", "max.times", "or.and", "plus.pair"};
      if (nt_apply_semiring(&a, as, nt_semiring(srs[strlen(src) % 4]), &d3)) run_ref(as, src);
      else must(d3.msg[0] != 0, "semiring refused without a message", src);
    } else {
      must(d3.msg[0] != 0, "check failed without a message", src);
    }
  }
  arena_free(&a);
}

/* "defs | expression": the definitions parsed, then the expression with
 * them inlined; a parse that fails must say why. */
static void run_defs(const char *src) {
  const char *bar = strchr(src, '|');
  if (!bar) return;
  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d);
  char *defs = arena_strndup(&a, src, (size_t)(bar - src));
  NtDefs table = {0};
  if (defs && nt_parse_defs(&a, defs, &table, &d)) {
    Assignment *as = nt_parse_with(&a, bar + 1, &table, &d);
    must(as || d.msg[0], "parse with definitions failed without a message", src);
  } else {
    must(!defs || d.msg[0], "definitions refused without a message", src);
  }
  arena_free(&a);
}

static void run_schedule(const char *src) {
  Arena a;
  arena_init(&a);
  Diag d;
  diag_init(&d);
  Schedule s;
  if (nt_schedule_parse(src, &s, &a, &d)) {
    FILE *null = fopen("/dev/null", "w");
    if (null) {
      nt_schedule_print(null, &s);
      fclose(null);
    }
  } else {
    must(d.msg[0] != 0, "schedule parse failed without a message", src);
  }
  arena_free(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *src = malloc(size + 1);
  if (!src) return 0;
  memcpy(src, data, size);
  src[size] = 0;
  run_notation(src);
  run_defs(src);
  run_schedule(src);
  free(src);
  return 0;
}

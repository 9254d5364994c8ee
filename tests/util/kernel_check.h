/* Differential kernel checking: one call builds seeded random operands for
 * an index-notation expression, compiles it, runs it through the JIT and
 * through the loop-IR interpreter, evaluates the reference interpreter on
 * the same inputs, and compares the three (values within a relative
 * tolerance; for sparse outputs also the stored structure).
 *
 *   KcCase c = {.expr = "y(i) = A(i,j) * x(j)", .formats = "A:ds:1,0 x:s",
 *               .extents = "i=5 j=7", .seed = 42, .density = 0.3};
 *   KcOutcome o;
 *   ck_assert_msg(kc_run(cx, &c, &o) == KC_PASS, "%s", o.msg);
 *
 * Tensors not named in `formats` are dense; index extents not named in
 * `extents` are 5. On anything but KC_PASS, o.msg starts with
 * "seed=... expr=... formats=..." and says what differs.
 */
#ifndef TJ_TESTS_KERNEL_CHECK_H
#define TJ_TESTS_KERNEL_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensorjit.h"

#define KC_MAX_TENSORS 20

/* Where the stored entries of every input go. */
typedef enum {
  KC_RANDOM = 0,   /* each coordinate stored with probability density */
  KC_EMPTY_ROWS,   /* as RANDOM, but odd rows (mode 0) and the last are empty */
  KC_ONE_ROW,      /* as RANDOM, but only row dims[0]/2 of mode 0 */
  KC_DUPLICATES    /* as RANDOM, plus repeated inserts (kept in 'u' levels) */
} KcPattern;

enum {
  KC_SPLIT = 1u << 0,     /* also ASSEMBLE, COMPUTE, then new values + COMPUTE */
  KC_NO_INTERP = 1u << 1, /* skip the loop-IR interpreter */
  KC_POSITIVE = 1u << 2,  /* input values > 0 (sqrt, log) */
  KC_QUIET = 1u << 3      /* do not print failures to stderr */
};

typedef struct KcCase {
  const char *expr;
  const char *formats;  /* "A:ds:1,0 x:s y:s" (space separated) */
  const char *extents;  /* "i=5 j=7" */
  tj_dtype dtype;
  int width;            /* 0 default, 64: 64-bit pos/crd for sparse tensors */
  double density;       /* 0..1 for every input; < 0: random per input */
  KcPattern pattern;
  uint64_t seed;
  unsigned flags;
  const char *full;     /* inputs stored at density 1 ("c d"), or NULL */
  const tj_options *opts; /* for tj_compile; NULL defaults */
  const char *schedule; /* for tj_compile; NULL none */
  const tj_options *cross; /* also compile with these (another backend) and
                              require the two results to agree */
} KcCase;

typedef enum {
  KC_PASS = 0,
  KC_SETUP_ERROR,    /* the test's own tensors could not be built */
  KC_COMPILE_ERROR,  /* tj_compile failed: status and message in outcome */
  KC_RUN_ERROR,      /* a kernel run or the reference failed */
  KC_MISMATCH        /* values or structure differ */
} KcResult;

typedef struct KcOutcome {
  KcResult result;
  tj_status status;     /* of the failing call (KC_*_ERROR) */
  int cache_hit;        /* tj_kernel_times of the compiled kernel */
  char msg[2048];
} KcOutcome;

/* Runs case c in context cx (shared so that equal shapes hit the cache).
 * Owns nothing afterwards: every tensor it made is freed. */
KcResult kc_run(tj_context *cx, const KcCase *c, KcOutcome *out);

/* ---- pieces, for tests that drive kernels themselves ---- */

/* splitmix64 step: a seeded generator. */
uint64_t kc_rand(uint64_t *state);
double kc_uniform(uint64_t *state);   /* [0, 1) */

/* A tensor named name with the given format spec (NULL or "" dense),
 * dims, dtype and 64-bit widths if width == 64, filled with seeded random
 * entries (pattern from pseed, values from vseed). NULL on failure. */
tj_tensor *kc_tensor(const char *name, const char *fmt, int order,
                     const int64_t *dims, tj_dtype dt, int width,
                     double density, KcPattern pat, uint64_t pseed,
                     uint64_t vseed, unsigned flags);

/* Compares got with want over every coordinate (relative tolerance for the
 * dtype) and, if got has a sparse level, checks its structure: coordinates
 * in range, strictly increasing in level order, every nonzero of want
 * stored. Returns true when equal; else writes what differs into why. */
bool kc_compare(const tj_tensor *got, const tj_tensor *want, char *why,
                size_t n);

#endif

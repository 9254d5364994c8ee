/* libFuzzer target for the REPL's command line (tools/repl.c): each input
 * is up to 8 lines run in a fresh session (its own context) that already
 * holds a few small tensors (A 4x5 CSR, B 5x4 DCSR, x and y vectors, s a
 * scalar). A line either works or fails with a message (tool_msg); a
 * crash, a sanitizer report or a leak is a bug.
 * Sizes stay small: an input with a number of more than 3 digits, or
 * whose numbers multiply past 10^6, is skipped, and so is one
 * with '/' or '\\' (the session runs in a scratch folder, so load and save
 * touch only files there).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tool.h"

static const char *PREAMBLE[] = {
    "A = random(4, 5, \"ds\", 0.5)", "B = random(5, 4, \"ss\", 0.4)", "x = random(5)",
    "y = zeros(4)", "s = zeros()", "format C \"ds\"", NULL};

static char dir[64];

/* No paths, no NUL, numbers of at most 3 digits whose product (with the
 * preamble's, which is small) stays under 10^6: random(999, 999, 999)
 * would only measure memory. */
static bool acceptable(const uint8_t *d, size_t n) {
  size_t run = 0;
  int64_t num = 0, product = 1;
  for (size_t i = 0; i <= n; i++) {
    if (i < n && (d[i] == '/' || d[i] == '\\' || d[i] == 0)) return false;
    if (i < n && d[i] >= '0' && d[i] <= '9') {
      if (++run > 3) return false;
      num = num * 10 + (d[i] - '0');
      continue;
    }
    if (run && num > 1 && (product *= num) > 1000000) return false;
    run = 0, num = 0;
  }
  return true;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  snprintf(dir, sizeof dir, "/tmp/tj_fuzz_repl_XXXXXX");
  if (!mkdtemp(dir) || chdir(dir) != 0) abort();
  /* a file that load() can find */
  FILE *f = fopen("m.mtx", "w");
  fputs("%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1\n3 2 2\n", f);
  fclose(f);
  /* the REPL prints what it does; the fuzzer does not need to see it */
  if (!freopen("/dev/null", "w", stdout)) abort();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 2048 || !acceptable(data, size)) return 0;
  CliArgs a;
  memset(&a, 0, sizeof a);
  a.opts = tj_options_default();
  a.opts.opt_level = 1;
  a.opts.nthreads = 1;
  a.seed = 1;
  Repl *r = repl_new(&a);
  if (!r) abort();
  bool quit = false;
  for (int i = 0; PREAMBLE[i]; i++) {
    char line[128];
    snprintf(line, sizeof line, "%s", PREAMBLE[i]);
    if (!repl_line(r, line, &quit)) {
      fprintf(stderr, "fuzz_repl: preamble line failed: %s\n", tool_msg());
      abort();
    }
  }
  char *text = malloc(size + 1);
  memcpy(text, data, size);
  text[size] = 0;
  int lines = 0;
  for (char *line = text, *next; line && !quit && lines < 8; line = next, lines++) {
    next = strchr(line, '\n');
    if (next) *next++ = 0;
    if (!repl_line(r, line, &quit) && !tool_msg()[0]) {
      fprintf(stderr, "fuzz_repl: a line failed without a message\n");
      abort();
    }
  }
  free(text);
  repl_free(r);
  return 0;
}

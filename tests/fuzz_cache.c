/* libFuzzer target for the disk kernel cache's file reader
 * (jit/driver_cache.c, drv_disk_parse): bytes are read as a cache file for
 * a fixed key and must be rejected with a warning, or accepted only when
 * they hold exactly what a writer would have written. The first byte picks:
 *   0..127   the bytes as the whole file (garbage, truncations, headers)
 *   128..255 a valid file for the key with the rest as object code and
 *            symbol, then damaged: byte (b*7) % size set to the second
 *            byte when b is odd, else truncated to b*3 bytes
 * Accepted objects are never loaded here (the checks decide what a
 * compile would hand to LLJIT; loading is the trusted path).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit/driver.h"

static const char *KEY = "y(i)=A(i,j)*x(j)|f=d,ds,d|variant=2|llvm-19|x86-64";

static void must(bool cond, const char *what) {
  if (cond) return;
  fprintf(stderr, "fuzz_cache: %s\n", what);
  abort();
}

static bool parse(const void *bytes, size_t n, DiskObject *out) {
  char *copy = malloc(n ? n : 1);
  memcpy(copy, bytes, n);
  FILE *f = fmemopen(copy, n ? n : 1, "rb");
  must(f != NULL, "fmemopen");
  if (!n) fgetc(f);   /* an empty file: at EOF at once */
  bool ok = drv_disk_parse(f, KEY, "fuzz", "tj-0.o", out);
  fclose(f);
  free(copy);
  if (!ok) must(out->obj == NULL && out->len == 0, "a rejected file left an object");
  return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2 || size > 1 << 16) return 0;
  DiskObject got;
  if (data[0] < 128) {
    if (parse(data + 1, size - 1, &got)) free(got.obj);
    return 0;
  }
  /* a valid file: object = data[2..], symbol from its first bytes */
  const uint8_t *obj = data + 2;
  size_t len = size - 2;
  char symbol[16];
  snprintf(symbol, sizeof symbol, "evaluate_%02x", data[1]);
  char *file = NULL;
  size_t flen = 0;
  FILE *w = open_memstream(&file, &flen);
  must(w && drv_disk_serialize(w, KEY, obj, len, symbol), "serialize");
  fclose(w);
  bool ok = parse(file, flen, &got);
  must(ok == (len > 0), "a freshly written file is not accepted");
  if (ok) {
    must(got.len == len && memcmp(got.obj, obj, len) == 0, "object bytes changed");
    must(strcmp(got.symbol, symbol) == 0, "symbol changed");
    free(got.obj);
  }
  int b = data[0] - 128;
  if (b % 2) {
    size_t at = (size_t)(b * 7) % flen;
    bool changed = file[at] != (char)data[1];
    file[at] = (char)data[1];
    if (parse(file, flen, &got)) {
      /* only a change the checks do not cover (the symbol's tail) passes */
      must(!changed || (got.len == len && memcmp(got.obj, obj, len) == 0),
           "a damaged object was accepted");
      free(got.obj);
    }
  } else if ((size_t)b * 3 < flen) {
    must(!parse(file, (size_t)b * 3, &got), "a truncated file was accepted");
  }
  free(file);
  return 0;
}

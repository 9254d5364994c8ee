/* libFuzzer target for the tensor file readers (runtime/mtx.c, tns.c,
 * reader.c, io.c). The first two bytes say how the rest is read:
 *   byte 0, bits 0-1  the file name's extension: .mtx, .tns, or .dat (sniffed)
 *           bit 2     gzip-compress the bytes first (.gz appended)
 *           bit 3     cut byte 1's count of bytes off the end of the file
 *           bits 4-6  the format asked for (see FORMATS)
 * A read either fails with a message or gives a tensor; a tensor is then
 * written back (.tns, or .mtx for a matrix) and read again, which must
 * give the same entries. Formats with a dense level allocate per declared
 * dim, not per byte of input, so they are only asked for when every number
 * in the input is short (dims below 10^5): the fuzzer then never allocates
 * more than the input justifies.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "tensorjit.h"

static const char *FORMATS[8] = {NULL, "ss", "uq", "sss", "s", "(i,j) -> (j : compressed, i : compressed)",
                                 "ds:1,0", "uqq"};

static char dir[64];

static void must(bool cond, const char *what) {
  if (cond) return;
  fprintf(stderr, "fuzz_io: %s\n", what);
  abort();
}

/* Whether every run of digits in the input is at most 5 long. */
static bool small_numbers(const uint8_t *d, size_t n) {
  size_t run = 0;
  for (size_t i = 0; i < n; i++) {
    run = d[i] >= '0' && d[i] <= '9' ? run + 1 : 0;
    if (run > 5) return false;
  }
  return true;
}

static bool has_dense(const tj_format *f) { return strchr(f->levels, 'd') != NULL; }

static void write_input(const char *path, const uint8_t *d, size_t n, bool gz, int cut) {
  if (!gz) {
    FILE *f = fopen(path, "wb");
    must(f != NULL, "cannot write the input file");
    must(fwrite(d, 1, n, f) == n || n == 0, "short write");
    fclose(f);
    return;
  }
  gzFile g = gzopen(path, "wb");
  must(g != NULL, "gzopen");
  if (n) gzwrite(g, d, (unsigned)n);
  gzclose(g);
  if (cut) {
    FILE *f = fopen(path, "rb+");
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fclose(f);
    must(truncate(path, len > cut ? len - cut : 0) == 0, "truncate");
  }
}

static int cmp_entries(const int64_t *c, int order, int64_t a, int64_t b) {
  for (int m = 0; m < order; m++)
    if (c[a * order + m] != c[b * order + m]) return c[a * order + m] < c[b * order + m] ? -1 : 1;
  return 0;
}

/* Entries of t as a sorted list of (coords, value); owned by the caller. */
static void entries(const tj_tensor *t, int64_t **coords, double **vals, int64_t *n) {
  must(tj_tensor_unpack(t, coords, vals, n) == TJ_OK, "unpack failed");
  int order = tj_tensor_order(t);
  /* insertion sort on (coords, value): inputs here are small */
  for (int64_t i = 1; i < *n; i++)
    for (int64_t j = i; j > 0; j--) {
      int c = cmp_entries(*coords, order, j - 1, j);
      if (c < 0 || (c == 0 && !((*vals)[j - 1] > (*vals)[j]))) break;
      for (int m = 0; m < order; m++) {
        int64_t x = (*coords)[j * order + m];
        (*coords)[j * order + m] = (*coords)[(j - 1) * order + m];
        (*coords)[(j - 1) * order + m] = x;
      }
      double v = (*vals)[j];
      (*vals)[j] = (*vals)[j - 1];
      (*vals)[j - 1] = v;
    }
}

static bool same_value(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

/* Writes t and reads it back in the same format: same entries. */
static void round_trip(const tj_tensor *t) {
  if (tj_tensor_nnz(t) > 20000) return;
  int order = tj_tensor_order(t);
  char path[96];
  snprintf(path, sizeof path, "%s/back.%s", dir, order == 2 ? "mtx" : "tns");
  if (order == 0) return;   /* .tns of a scalar sums its entries */
  must(tj_tensor_write(t, path) == TJ_OK, "write failed");
  tj_tensor *b;
  tj_status st = tj_tensor_read(path, NULL, tj_tensor_format(t), &b);
  if (st != TJ_OK) fprintf(stderr, "%s\n", tj_last_error());
  must(st == TJ_OK, "re-reading a written tensor failed");
  int64_t *c1, *c2, n1, n2;
  double *v1, *v2;
  entries(t, &c1, &v1, &n1);
  entries(b, &c2, &v2, &n2);
  /* a .tns file holds no dims and no explicit zeros of dense fill */
  must(n1 == n2, "round trip changed the entry count");
  for (int64_t e = 0; e < n1; e++) {
    for (int m = 0; m < order; m++) must(c1[e * order + m] == c2[e * order + m], "coords differ");
    must(same_value(v1[e], v2[e]), "values differ");
  }
  free(c1), free(v1), free(c2), free(v2);
  tj_tensor_free(b);
  unlink(path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  snprintf(dir, sizeof dir, "/tmp/tj_fuzz_io_XXXXXX");
  must(mkdtemp(dir) != NULL, "mkdtemp");
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2 || size > 1 << 16) return 0;
  uint8_t mode = data[0], cut = data[1];
  data += 2, size -= 2;
  static const char *ext[4] = {"mtx", "tns", "dat", "mtx"};
  bool gz = mode & 4;
  char path[96];
  snprintf(path, sizeof path, "%s/in.%s%s", dir, ext[mode & 3], gz ? ".gz" : "");
  write_input(path, data, size, gz, (mode & 8) ? cut : 0);
  const char *spec = FORMATS[(mode >> 4) & 7];
  tj_format f, *fp = NULL;
  if (spec) {
    must(tj_format_parse(spec, &f) == TJ_OK, "a fixed format does not parse");
    fp = &f;
  }
  if ((!fp || has_dense(fp)) && !small_numbers(data, size)) {
    unlink(path);
    return 0;
  }
  tj_tensor *t = NULL;
  tj_status st = tj_tensor_read(path, "T", fp, &t);
  if (st == TJ_OK) {
    must(t != NULL, "read succeeded without a tensor");
    if (!has_dense(tj_tensor_format(t))) round_trip(t);
    tj_tensor_free(t);
  } else {
    must(t == NULL, "a failed read left a tensor");
    must(tj_last_error()[0] != 0, "a failed read left no message");
  }
  unlink(path);
  return 0;
}

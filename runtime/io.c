/* tj_tensor_read / tj_tensor_write: dispatch on the file name.
 *
 * The type comes from the extension after an optional .gz (.mtx or .tns);
 * an unknown extension is sniffed: a %%MatrixMarket banner means .mtx,
 * anything else is read as .tns. The tensor's default name is the file
 * name without directory and extensions ("data/m.mtx.gz" -> "m").
 * Writing goes to a temporary file beside the target, renamed over it when
 * complete: a full disk leaves the old file (or none), never half a file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <inttypes.h>
#include <string.h>
#include <zlib.h>

#include "reader.h"

/* The extension of path after stripping ".gz" (e.g. ".mtx"), or "". */
static void extension(const char *path, char *ext, size_t n) {
  const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  size_t len = strlen(base);
  if (len > 3 && !strcasecmp(base + len - 3, ".gz")) len -= 3;
  size_t dot = len;
  while (dot > 0 && base[dot - 1] != '.') dot--;
  ext[0] = 0;
  if (dot > 1 && len - dot + 1 < n) {
    memcpy(ext, base + dot - 1, len - dot + 1);
    ext[len - dot + 1] = 0;
  }
}

/* Prints value v of dtype dt and a newline: an integer dtype's exactly
 * (u64 above 2^63 too), a float's with %.17g (reads back the same). */
static bool print_value(gzFile f, int dt, RtVal v) {
  if (dt == TJ_U64) return gzprintf(f, "%" PRIu64 "\n", (uint64_t)v.i) > 0;
  if (rt_dtype_is_int(dt)) return gzprintf(f, "%" PRId64 "\n", v.i) > 0;
  return gzprintf(f, "%.17g\n", v.f) > 0;
}

/* Prints t's entries (coords, vals: n of them) to f; an integer tensor
 * as a Matrix Market `integer` matrix. */
static bool print_entries(gzFile f, const tj_tensor *t, const int64_t *coords,
                          const RtVal *vals, int64_t n, bool mtx) {
  int order = t->order, dt = t->st.dtype;
  bool ok = true;
  if (mtx)
    ok = gzprintf(f, "%%%%MatrixMarket matrix coordinate %s general\n"
                  "%" PRId64 " %" PRId64 " %" PRId64 "\n",
                  rt_dtype_is_int(dt) ? "integer" : "real", t->dims[0], t->dims[1], n) > 0;
  if (order == 0) {
    RtVal v = {.i = 0};   /* all bits 0: integer 0 and 0.0 alike */
    for (int64_t e = 0; e < n; e++) v = rt_val_add(dt, v, vals[e]);
    ok = print_value(f, dt, v);
  }
  for (int64_t e = 0; ok && order > 0 && e < n; e++) {
    for (int m = 0; ok && m < order; m++)
      ok = gzprintf(f, "%" PRId64 " ", coords[e * order + m] + 1) > 0;
    ok = ok && print_value(f, dt, vals[e]);
  }
  return ok;
}

/* Opens where the contents of *path go: a fresh temporary file beside it
 * (*tmp, malloc'd; renamed over *path once complete, so a full disk or a
 * failure never leaves half a file there), with the mode of the file it
 * replaces; or the file itself when it exists and is not a regular file
 * (/dev/stdout, a FIFO: *tmp NULL). A symbolic link is followed: *path
 * becomes its target (malloc'd in *real). -1 with errno set on failure. */
static int open_output(const char **path, char **real, char **tmp) {
  static _Atomic unsigned serial;
  struct stat sb;
  *tmp = *real = NULL;
  bool exists = stat(*path, &sb) == 0;
  if (exists && !S_ISREG(sb.st_mode)) return open(*path, O_WRONLY | O_TRUNC | O_CLOEXEC);
  struct stat lsb;
  if (exists && lstat(*path, &lsb) == 0 && S_ISLNK(lsb.st_mode)) {
    if (!(*real = realpath(*path, NULL))) return -1;
    *path = *real;
  }
  size_t n = strlen(*path) + 48;
  if (!(*tmp = malloc(n))) {
    errno = ENOMEM;
    return -1;
  }
  for (int tries = 0; tries < 100; tries++) {
    snprintf(*tmp, n, "%s.tmp-%ld-%u", *path, (long)getpid(), serial++);
    int fd = open(*tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0 && exists) (void)fchmod(fd, sb.st_mode & 07777);   /* as it was */
    if (fd >= 0 || errno != EEXIST) {
      if (fd < 0) free(*tmp), *tmp = NULL;
      return fd;
    }
  }
  free(*tmp), *tmp = NULL;
  errno = EEXIST;
  return -1;
}

/* Writes t's stored entries (less every zero of a format with a dense
 * level, RT_DROP_DENSE_ZEROS), 1-based coordinates and values (integers
 * exact, floats %.17g), one per line (gzip-compressed when path ends in .gz): after the Matrix
 * Market header `coordinate real general` when mtx, else as FROSTT .tns,
 * where an order-0 tensor is one line holding its value. The file appears
 * under path only once complete (open_output). */
static tj_status write_entries(const tj_tensor *t, const char *path, bool mtx) {
  int64_t *coords, n;
  RtVal *vals;
  tj_status st = rt_tensor_entries_val(t, RT_DROP_DENSE_ZEROS, &coords, &vals, &n);
  if (st != TJ_OK) return st;
  size_t len = strlen(path);
  bool gz = len > 3 && !strcmp(path + len - 3, ".gz");
  char *tmp, *real;
  const char *target = path;
  int fd = open_output(&target, &real, &tmp);
  int err = errno;
  gzFile f = fd >= 0 ? gzdopen(fd, gz ? "wb" : "wT") : NULL;
  if (!f) {
    if (fd >= 0) close(fd), err = ENOMEM;
    if (tmp) unlink(tmp);
    free(tmp), free(real), free(coords), free(vals);
    return err == ENOMEM ? rt_set_error(TJ_ERR_NOMEM, "%s: out of memory", path)
                         : rt_set_error(TJ_ERR_IO, "%s: cannot open for writing: %s", path,
                                        strerror(err));
  }
  errno = 0;
  bool ok = print_entries(f, t, coords, vals, n, mtx);
  int zerr = Z_OK;
  if (!ok) gzerror(f, &zerr);
  err = errno;
  int rc = gzclose(f);
  if (ok && rc != Z_OK) ok = false, err = errno, zerr = rc == Z_MEM_ERROR ? Z_MEM_ERROR : Z_ERRNO;
  if (ok && tmp && rename(tmp, target) != 0) ok = false, err = errno;
  if (!ok && tmp) unlink(tmp);
  free(tmp), free(real), free(coords), free(vals);
  if (ok) return TJ_OK;
  if (zerr == Z_MEM_ERROR) return rt_set_error(TJ_ERR_NOMEM, "%s: out of memory", path);
  return rt_set_error(TJ_ERR_IO, "%s: write failed: %s", path,
                      err ? strerror(err) : "zlib error");
}

/* The file name stem: no directory, no .gz, no last extension. */
static char *stem(const char *path) {
  const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  char *s = strdup(base);
  if (!s) return NULL;
  size_t len = strlen(s);
  if (len > 3 && !strcasecmp(s + len - 3, ".gz")) s[len -= 3] = 0;
  char *dot = strrchr(s, '.');
  if (dot && dot != s) *dot = 0;
  return s;
}

tj_status tj_tensor_read(const char *path, const char *name,
                         const tj_format *fmt, tj_tensor **out) {
  return tj_tensor_read_as(path, name, fmt, TJ_F64, out);
}

static tj_status read_file(const char *path, const char *name, const tj_format *fmt,
                           tj_dtype dt, tj_tensor **out);

tj_status tj_tensor_read_as(const char *path, const char *name, const tj_format *fmt,
                            tj_dtype dt, tj_tensor **out) {
  if (!path || !out)
    return rt_set_error(TJ_ERR_INVALID, "tj_tensor_read: NULL argument");
  *out = NULL;
  if (!fmt || !rt_format_sliced(fmt)) return read_file(path, name, fmt, dt, out);
  /* A format with slices: the file's tensor, owned by a view of it. */
  tj_format f = *fmt;
  rt_format_unslice(&f);
  tj_tensor *base = NULL;
  tj_status st = read_file(path, name, &f, dt, &base);
  if (st == TJ_OK) st = tj_tensor_view(base, NULL, fmt, out);
  if (st != TJ_OK) {
    tj_tensor_free(base);
    return st;
  }
  (*out)->owns_base = true;
  return TJ_OK;
}

static tj_status read_file(const char *path, const char *name, const tj_format *fmt,
                           tj_dtype dt, tj_tensor **out) {
  if (!rt_dtype_valid(dt))
    return rt_set_error(TJ_ERR_DTYPE, "%s: unknown dtype %d", path, (int)dt);
  char ext[16];
  extension(path, ext, sizeof ext);
  RtReader *r;
  tj_status st = rd_open(path, &r);
  if (st != TJ_OK) return st;
  bool is_mtx = !strcasecmp(ext, ".mtx");
  if (!is_mtx && strcasecmp(ext, ".tns")) {
    char *line;
    st = rd_line(r, &line);
    is_mtx = st == TJ_OK && line && !strncasecmp(line, "%%MatrixMarket", 14);
    rd_unread(r);
  }
  char *own = name ? NULL : stem(path);
  if (st == TJ_OK && !name && !own)
    st = rt_set_error(TJ_ERR_NOMEM, "%s: out of memory", path);
  if (st == TJ_OK)
    st = is_mtx ? mtx_read(r, name ? name : own, fmt, dt, out)
                : tns_read(r, name ? name : own, fmt, dt, out);
  free(own);
  rd_close(r);
  return st;
}

tj_status tj_tensor_write(const tj_tensor *t, const char *path) {
  if (!t || !path)
    return rt_set_error(TJ_ERR_INVALID, "tj_tensor_write: NULL argument");
  char ext[16];
  extension(path, ext, sizeof ext);
  bool mtx = !strcasecmp(ext, ".mtx") ||
             (strcasecmp(ext, ".tns") && t->order == 2);
  if (mtx && t->order != 2)
    return rt_set_error(TJ_ERR_SHAPE, "%s: a .mtx file holds a matrix, but "
                        "tensor %s has order %d (write .tns)", path, t->name,
                        t->order);
  return write_entries(t, path, mtx);
}

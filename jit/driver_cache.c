/* The on-disk kernel cache (opt-in: TJ_CACHE_DIR or
 * tj_context_set_cache_dir). A kernel variant's object code is stored in
 * <dir>/tj-<hash>.o, keyed by the in-memory cache key plus the variant and
 * the backend's target (for LLVM: its version, the CPU and features). Only
 * backends that make relocatable objects (LLVM) use it. The file holds a header
 * (magic, format version, key, symbol, object size, checksum) before the
 * object bytes; a file whose header, key or checksum does not match is
 * ignored with a warning and rewritten, never loaded blindly. Files are
 * written to a temporary name and renamed, so readers never see half a
 * file.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver.h"

static const char MAGIC[8] = {'T', 'J', 'K', 'C', 'A', 'C', 'H', 'E'};
enum { FORMAT_VERSION = 1 };

typedef struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t key_len;
  uint64_t obj_len;
  uint64_t checksum;
  char symbol[128];
} FileHeader;

static uint64_t fnv(const void *p, size_t n, uint64_t h) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/* The full disk key of variant v of e (malloc'd). */
static char *disk_key(const CacheEntry *e, int v) {
  const char *target = e->be->target(e->bstate);
  size_t n = strlen(e->key) + strlen(target) + 64;
  char *k = malloc(n);
  if (k) snprintf(k, n, "%s|variant=%d|%s", e->key, v, target);
  return k;
}

static char *cache_path(const char *dir, const char *key) {
  size_t n = strlen(dir) + 40;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/tj-%016llx.o", dir, (unsigned long long)fnv(key, strlen(key), 1469598103934665603ull));
  return p;
}

static void warn(const char *path, const char *why) {
  fprintf(stderr, "tensorjit: warning: ignoring kernel cache file %s: %s\n", path, why);
}

/* Reads and validates a cache file; on success *obj (malloc'd) and header. */
static bool read_file(const char *path, const char *key, FileHeader *h, void **obj) {
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  bool ok = false;
  char *stored = NULL;
  *obj = NULL;
  size_t klen = strlen(key);
  if (fread(h, sizeof *h, 1, f) != 1) warn(path, "truncated header");
  else if (memcmp(h->magic, MAGIC, sizeof MAGIC) != 0) warn(path, "not a tensorjit cache file");
  else if (h->version != FORMAT_VERSION) warn(path, "written by another cache format version");
  else if (h->key_len != klen || h->obj_len == 0 || h->obj_len > ((uint64_t)1 << 32))
    warn(path, "key or size does not match");
  else if (!(stored = malloc(klen + 1)) || fread(stored, 1, klen, f) != klen)
    warn(path, "truncated key");
  else if (memcmp(stored, key, klen) != 0) warn(path, "key does not match (hash collision)");
  else if (!(*obj = malloc(h->obj_len)) || fread(*obj, 1, h->obj_len, f) != h->obj_len)
    warn(path, "truncated object code");
  else if (fnv(*obj, h->obj_len, 1469598103934665603ull) != h->checksum)
    warn(path, "checksum mismatch");
  else if (memchr(h->symbol, 0, sizeof h->symbol) == NULL) warn(path, "bad symbol");
  else ok = true;
  if (!ok) {
    free(*obj);
    *obj = NULL;
  }
  free(stored);
  fclose(f);
  return ok;
}

static void write_file(const char *path, const char *key, const void *obj, size_t len,
                       const char *symbol) {
  FileHeader h = {0};
  memcpy(h.magic, MAGIC, sizeof MAGIC);
  h.version = FORMAT_VERSION;
  h.key_len = (uint32_t)strlen(key);
  h.obj_len = len;
  h.checksum = fnv(obj, len, 1469598103934665603ull);
  snprintf(h.symbol, sizeof h.symbol, "%s", symbol);
  size_t n = strlen(path) + 32;
  char *tmp = malloc(n);
  if (!tmp) return;
  snprintf(tmp, n, "%s.%ld.tmp", path, (long)getpid());
  FILE *f = fopen(tmp, "wb");
  bool ok = f && fwrite(&h, sizeof h, 1, f) == 1 && fwrite(key, 1, h.key_len, f) == h.key_len &&
            fwrite(obj, 1, len, f) == len;
  if (f && fclose(f) != 0) ok = false;
  if (ok && rename(tmp, path) == 0) {
    free(tmp);
    return;
  }
  fprintf(stderr, "tensorjit: warning: cannot write kernel cache file %s: %s\n", path,
          strerror(errno));
  remove(tmp);
  free(tmp);
}

bool drv_disk_compile(CacheEntry *e, int v, const char *dir, bool *from_disk, Diag *d) {
  *from_disk = false;
  char *key = disk_key(e, v), *path = key ? cache_path(dir, key) : NULL;
  if (!key || !path) {
    free(key);
    free(path);
    return diag_error(d, TJ_ERR_NOMEM, "out of memory");
  }
  FileHeader h;
  void *obj = NULL;
  bool ok = false;
  if (read_file(path, key, &h, &obj)) {
    Diag ld;
    diag_init(&ld);
    ok = e->be->add_object(e->bstate, obj, h.obj_len, h.symbol, &e->bk[v], &ld);
    if (!ok) warn(path, ld.msg);
    *from_disk = ok;
    free(obj);
    obj = NULL;
  }
  if (!ok) {
    size_t len = 0;
    char symbol[128];
    ok = e->be->emit_object(e->bstate, e->lir[v], &e->bopt, &obj, &len, symbol, d) &&
         e->be->add_object(e->bstate, obj, len, symbol, &e->bk[v], d);
    if (ok) write_file(path, key, obj, len, symbol);
    free(obj);
  }
  free(key);
  free(path);
  return ok;
}

/* The on-disk kernel cache (opt-in: TJ_CACHE_DIR or
 * tj_context_set_cache_dir; "" there means the default folder,
 * $XDG_CACHE_HOME/tensorjit, else ~/.cache/tensorjit). A kernel variant's
 * object code is stored in <dir>/tj-<hash>.o, keyed by the in-memory cache
 * key plus the variant and the backend's target (for LLVM: its version, the
 * CPU and features). Only backends that make relocatable objects (LLVM) use
 * it. The file holds a header (magic, format version, key, symbol, object
 * size, checksum) before the object bytes; a file whose header, key,
 * length or checksum does not match is ignored with a warning and
 * rewritten, never loaded blindly (the object's size is checked against
 * the file's length before anything is allocated for it).
 *
 * The checksum catches corruption, not a crafted file, so the cache trusts
 * only what the current user alone can write, as ssh does with ~/.ssh:
 *   - the folder (created with mode 0700, like any missing parent) is opened
 *     with O_DIRECTORY|O_NOFOLLOW and its descriptor fstat'ed: it must be a
 *     directory owned by geteuid() and writable by neither group nor others;
 *     every file is then reached through that descriptor (openat), so the
 *     folder cannot be swapped after the check;
 *   - every folder above it (on its real path) is owned by root or this
 *     user and writable by group or others only with the sticky bit, as
 *     /tmp is, so no one else can rename the folder and put theirs there;
 *   - a file is opened with O_NOFOLLOW (and O_NONBLOCK, against FIFOs) and
 *     its descriptor fstat'ed: a regular file, same owner and mode rules,
 *     and one link (a hard link elsewhere is a name someone else made);
 *   - files are written to a temporary name created O_CREAT|O_EXCL|
 *     O_NOFOLLOW with mode 0600 in the same folder, then renamed, so readers
 *     never see half a file.
 * A refused folder gets one warning per context and is not used at all; a
 * refused file gets one warning, is neither loaded nor replaced, and its
 * kernel is compiled in memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* The full disk key of variant v of e (malloc'd). */
static char *disk_key(const CacheEntry *e, int v) {
  const char *target = e->be->target(e->bstate);
  size_t n = strlen(e->key) + strlen(target) + 64;
  char *k = malloc(n);
  if (k) snprintf(k, n, "%s|variant=%d|%s", e->key, v, target);
  return k;
}

/* The file name of key in its folder: "tj-<16 hex><suffix>" (".o" for a
 * kernel, ".gett" for a timed GETT choice). */
static void cache_name(const char *key, const char *suffix, char name[32]) {
  snprintf(name, 32, "tj-%016llx%s",
           (unsigned long long)rt_fnv1a(RT_FNV_BASIS, key, strlen(key)), suffix);
}

static void warn(const char *dir, const char *name, const char *why) {
  fprintf(stderr, "tensorjit: warning: ignoring kernel cache file %s/%s: %s\n", dir, name, why);
}

/* Why st (of a descriptor opened without following links) cannot be trusted,
 * written into buf, or NULL when it can: the wanted type (S_IFDIR or
 * S_IFREG), owned by this user, writable by neither group nor others. */
static const char *untrusted(const struct stat *st, mode_t type, char *buf, size_t n) {
  if ((st->st_mode & S_IFMT) != type)
    return type == S_IFDIR ? "not a directory" : "not a regular file";
  if (st->st_uid != geteuid()) {
    snprintf(buf, n, "owned by uid %u, not by this user (uid %u)", (unsigned)st->st_uid,
             (unsigned)geteuid());
    return buf;
  }
  if (st->st_mode & (S_IWGRP | S_IWOTH)) {
    snprintf(buf, n, "writable by %s (mode %04o)",
             st->st_mode & S_IWGRP ? "its group" : "others", (unsigned)(st->st_mode & 07777));
    return buf;
  }
  /* Our files are written under one name: another is a link someone made
   * (a hard link keeps the inode, its owner and mode, wherever it is). */
  if (type == S_IFREG && st->st_nlink != 1) {
    snprintf(buf, n, "has %lu hard links (ours have one)", (unsigned long)st->st_nlink);
    return buf;
  }
  return NULL;
}

/* Why a folder above path cannot be trusted (written into buf), or NULL:
 * each must be owned by root or this user, and writable by group or others
 * only with the sticky bit (as /tmp), so that no one else can rename the
 * cache folder away and put another in its place. Judged on the real path,
 * so a link among the parents counts for where it leads. */
static const char *untrusted_parents(const char *path, char *buf, size_t n) {
  char *real = realpath(path, NULL);
  if (!real) {
    snprintf(buf, n, "cannot resolve its path: %s", strerror(errno));
    return buf;
  }
  const char *why = NULL;
  for (char *slash; !why && (slash = strrchr(real, '/'));) {
    bool root = slash == real;
    slash[root] = 0;   /* real is now the parent ("/" kept for the root) */
    struct stat st;
    if (stat(real, &st) != 0)
      snprintf(buf, n, "its parent %s: %s", real, strerror(errno)), why = buf;
    else if (st.st_uid != 0 && st.st_uid != geteuid())
      snprintf(buf, n, "its parent %s is owned by uid %u, neither root nor this user", real,
               (unsigned)st.st_uid), why = buf;
    else if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
      snprintf(buf, n, "its parent %s is writable by %s (mode %04o) without the sticky bit",
               real, st.st_mode & S_IWOTH ? "others" : "its group",
               (unsigned)(st.st_mode & 07777)), why = buf;
    if (root) break;
  }
  free(real);
  return why;
}

/* Why open(..., O_NOFOLLOW) of path (relative to dfd) failed with err. */
static const char *open_failure(int dfd, const char *path, int err) {
  struct stat st;
  if (fstatat(dfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
    return "a symbolic link (not followed)";
  return strerror(err);
}

/* The default folder (malloc'd), or NULL when neither an absolute
 * $XDG_CACHE_HOME nor $HOME is set. */
static char *default_dir(void) {
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  const char *base = xdg && xdg[0] == '/' ? xdg : home && *home ? home : NULL;
  if (!base) return NULL;
  const char *tail = base == xdg ? "/tensorjit" : "/.cache/tensorjit";
  size_t n = strlen(base) + strlen(tail) + 1;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s%s", base, tail);
  return p;
}

/* mkdir -p path with mode 0700 for what is missing; 0 or an errno. An
 * existing component is left as it is (the last one is checked after). */
static int make_dirs(char *path) {
  for (char *s = path + 1;; s++) {
    if (*s != '/' && *s != 0) continue;
    char c = *s;
    *s = 0;
    struct stat st;
    int err = mkdir(path, 0700) == 0 || errno == EEXIST ? 0 : errno;
    if (err && stat(path, &st) == 0 && S_ISDIR(st.st_mode)) err = 0;
    *s = c;
    if (err || !c) return err;
  }
}

static void refuse_dir(const char *path, const char *why) {
  fprintf(stderr,
          "tensorjit: warning: not using kernel cache folder %s: %s; compiling in memory\n",
          path, why);
}

void drv_disk_open(DiskCache *dc) {
  if (dc->checked) return;
  dc->checked = true;
  if (!*dc->path) {
    char *p = default_dir();
    if (!p) {
      refuse_dir("(default)", "neither XDG_CACHE_HOME nor HOME is set");
      return;
    }
    free(dc->path);
    dc->path = p;
  }
  size_t n = strlen(dc->path);
  while (n > 1 && dc->path[n - 1] == '/') dc->path[--n] = 0;   /* "d/" would follow a link */
  int err = make_dirs(dc->path);
  if (err) {
    refuse_dir(dc->path, strerror(err));
    return;
  }
  int fd = open(dc->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    refuse_dir(dc->path, open_failure(AT_FDCWD, dc->path, errno));
    return;
  }
  struct stat st;
  char buf[600];
  const char *why = fstat(fd, &st) != 0 ? strerror(errno) : untrusted(&st, S_IFDIR, buf, sizeof buf);
  if (!why) why = untrusted_parents(dc->path, buf, sizeof buf);
  if (why) {
    refuse_dir(dc->path, why);
    close(fd);
    return;
  }
  dc->fd = fd;
}

void drv_disk_free(DiskCache *dc) {
  if (dc->fd >= 0) close(dc->fd);
  free(dc->path);
  free(dc);
}

/* Bytes from f's position to its end, or -1 when f cannot seek. */
static int64_t bytes_left(FILE *f) {
  off_t at = ftello(f);
  if (at < 0 || fseeko(f, 0, SEEK_END) != 0) return -1;
  off_t end = ftello(f);
  if (end < 0 || fseeko(f, at, SEEK_SET) != 0) return -1;
  return (int64_t)(end - at);
}

bool drv_disk_parse(FILE *f, const char *key, const char *dir, const char *name,
                    DiskObject *out) {
  memset(out, 0, sizeof *out);
  FileHeader h;
  bool ok = false;
  char *stored = NULL;
  void *obj = NULL;
  size_t klen = strlen(key);
  if (fread(&h, sizeof h, 1, f) != 1) warn(dir, name, "truncated header");
  else if (memcmp(h.magic, MAGIC, sizeof MAGIC) != 0) warn(dir, name, "not a tensorjit cache file");
  else if (h.version != FORMAT_VERSION) warn(dir, name, "written by another cache format version");
  else if (h.key_len != klen || h.obj_len == 0 || h.obj_len > ((uint64_t)1 << 32))
    warn(dir, name, "key or size does not match");
  else if (bytes_left(f) != (int64_t)(klen + h.obj_len))   /* before allocating obj_len */
    warn(dir, name, "size does not match the file's length");
  else if (!(stored = malloc(klen + 1)) || fread(stored, 1, klen, f) != klen)
    warn(dir, name, "truncated key");
  else if (memcmp(stored, key, klen) != 0) warn(dir, name, "key does not match (hash collision)");
  else if (!(obj = malloc(h.obj_len)) || fread(obj, 1, h.obj_len, f) != h.obj_len)
    warn(dir, name, "truncated object code");
  else if (rt_fnv1a(RT_FNV_BASIS, obj, h.obj_len) != h.checksum)
    warn(dir, name, "checksum mismatch");
  else if (memchr(h.symbol, 0, sizeof h.symbol) == NULL) warn(dir, name, "bad symbol");
  else ok = true;
  free(stored);
  if (!ok) {
    free(obj);
    return false;
  }
  out->obj = obj;
  out->len = h.obj_len;
  memcpy(out->symbol, h.symbol, sizeof out->symbol);
  return true;
}

bool drv_disk_serialize(FILE *f, const char *key, const void *obj, size_t len,
                        const char *symbol) {
  FileHeader h = {0};
  memcpy(h.magic, MAGIC, sizeof MAGIC);
  h.version = FORMAT_VERSION;
  h.key_len = (uint32_t)strlen(key);
  h.obj_len = len;
  h.checksum = rt_fnv1a(RT_FNV_BASIS, obj, len);
  snprintf(h.symbol, sizeof h.symbol, "%s", symbol);
  return fwrite(&h, sizeof h, 1, f) == 1 && fwrite(key, 1, h.key_len, f) == h.key_len &&
         fwrite(obj, 1, len, f) == len;
}

typedef enum { FILE_NONE, FILE_OK, FILE_BAD, FILE_REFUSED } FileState;

/* Reads and validates cache file name in dc: FILE_OK with *out (its object
 * malloc'd); FILE_NONE when there is none; FILE_BAD (to rewrite) or
 * FILE_REFUSED (untrusted: leave alone) with a warning. */
static FileState read_file(const DiskCache *dc, const char *name, const char *key,
                           DiskObject *out) {
  memset(out, 0, sizeof *out);
  int fd = openat(dc->fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return FILE_NONE;
    warn(dc->path, name, open_failure(dc->fd, name, errno));
    return FILE_REFUSED;
  }
  struct stat st;
  char buf[96];
  const char *why = fstat(fd, &st) != 0 ? strerror(errno) : untrusted(&st, S_IFREG, buf, sizeof buf);
  FILE *f = why ? NULL : fdopen(fd, "rb");
  if (!f) {
    warn(dc->path, name, why ? why : strerror(errno));
    close(fd);
    return FILE_REFUSED;
  }
  bool ok = drv_disk_parse(f, key, dc->path, name, out);
  fclose(f);
  return ok ? FILE_OK : FILE_BAD;
}

/* Writes name in dc through a fresh 0600 temporary file and a rename. */
static void write_file(const DiskCache *dc, const char *name, const char *key, const void *obj,
                       size_t len, const char *symbol) {
  char tmp[96];   /* unique per process and key being written */
  snprintf(tmp, sizeof tmp, "%s.%ld.%p.tmp", name, (long)getpid(), (const void *)key);
  int fd = openat(dc->fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
  if (fd >= 0 && !f) close(fd);
  bool ok = f && drv_disk_serialize(f, key, obj, len, symbol);
  if (f && fclose(f) != 0) ok = false;
  if (ok && renameat(dc->fd, tmp, dc->fd, name) == 0) return;
  fprintf(stderr, "tensorjit: warning: cannot write kernel cache file %s/%s: %s\n", dc->path,
          name, strerror(errno));
  if (fd >= 0) unlinkat(dc->fd, tmp, 0);
}

bool drv_disk_compile(CacheEntry *e, int v, const DiskCache *dc, bool *from_disk, Diag *d) {
  *from_disk = false;
  char *key = disk_key(e, v);
  if (!key) return diag_error(d, TJ_ERR_NOMEM, "out of memory");
  char name[32];
  cache_name(key, ".o", name);
  DiskObject got;
  void *obj = NULL;
  bool ok = false;
  FileState fs = read_file(dc, name, key, &got);
  if (fs == FILE_OK) {
    Diag ld;
    diag_init(&ld);
    ok = e->be->add_object(e->bstate, got.obj, got.len, got.symbol, &e->bk[v], &ld);
    if (!ok) warn(dc->path, name, ld.msg);
    *from_disk = ok;
    free(got.obj);
  }
  if (!ok && fs == FILE_REFUSED) {
    ok = e->be->compile(e->bstate, e->lir[v], &e->bopt, &e->bk[v], d);
  } else if (!ok) {
    size_t len = 0;
    char symbol[128];
    ok = e->be->emit_object(e->bstate, e->lir[v], &e->bopt, &obj, &len, symbol, d) &&
         e->be->add_object(e->bstate, obj, len, symbol, &e->bk[v], d);
    if (ok) write_file(dc, name, key, obj, len, symbol);
    free(obj);
  }
  free(key);
  return ok;
}

/* ---- GETT methods chosen by timing ---- */

/* The disk key of a timed GETT choice: the runtime's key (plan words, dims,
 * threads) and the target, whose timings they are (malloc'd). */
static char *gett_key(const CacheEntry *e, uint64_t key) {
  const char *target = e->be->target(e->bstate);
  size_t n = strlen(target) + 64;
  char *k = malloc(n);
  if (k) snprintf(k, n, "gett-method|%016llx|%s", (unsigned long long)key, target);
  return k;
}

static const char GETT_SYMBOL[] = "gett-method";

bool drv_disk_gett_load(const CacheEntry *e, uint64_t key) {
  char *k = gett_key(e, key);
  if (!k) return false;
  char name[32];
  cache_name(k, ".gett", name);   /* one small file per contraction, sizes, threads */
  DiskObject got;
  bool ok = false;
  if (read_file(e->disk, name, k, &got) == FILE_OK) {
    int32_t m;
    ok = got.len == sizeof m && strcmp(got.symbol, GETT_SYMBOL) == 0;
    if (ok) memcpy(&m, got.obj, sizeof m);
    ok = ok && m >= TJ_GETT_GETT && m <= TJ_GETT_LOG;
    if (ok) rt_gett_tuned_put(key, m);
    else warn(e->disk->path, name, "not a GETT method");
    if (ok && getenv("TJ_GETT_VERBOSE"))
      fprintf(stderr, "tensorjit: GETT method %s from the disk cache (%s)\n",
              lower_gett_method_name(m), name);
    free(got.obj);
  }
  free(k);
  return ok;
}

void drv_disk_gett_save(const CacheEntry *e, uint64_t key) {
  int32_t m = rt_gett_tuned_get(key);
  if (m < 0) return;   /* not timed (TJ_GETT_TUNE=0, or a candidate failed) */
  char *k = gett_key(e, key);
  if (!k) return;
  char name[32];
  cache_name(k, ".gett", name);   /* one small file per contraction, sizes, threads */
  write_file(e->disk, name, k, &m, sizeof m, GETT_SYMBOL);
  free(k);
}

/* Line reader over zlib's gzFile, so .gz input is transparent (gzopen reads
 * plain files too). Tracks the line number for `file:line: what` errors
 * and reports truncated or corrupt gzip data as an error, not as EOF.
 * Also the number scanners the .mtx and .tns parsers share.
 */
#ifndef TJ_RUNTIME_READER_H
#define TJ_RUNTIME_READER_H

#include <stdint.h>

#include "tensor.h"

struct RtReader;

/* Opens path for reading into *out (owned by the caller: rd_close);
 * TJ_ERR_IO for a missing file, a directory or an unreadable file. */
tj_status rd_open(const char *path, RtReader **out);
/* Closes r and frees it (NULL is fine). */
void rd_close(RtReader *r);
/* Next line (without its newline) into *line, owned by r and valid until
 * the next call; *line is NULL at the end of the input. */
tj_status rd_line(RtReader *r, char **line);
/* Makes the next rd_line return the current line again. */
void rd_unread(RtReader *r);
/* The current line number (1-based; 0 before the first line). */
int64_t rd_lineno(const RtReader *r);
/* The path r reads. */
const char *rd_path(const RtReader *r);
/* Records "path:line: <message>" as TJ_ERR_IO and returns TJ_ERR_IO. */
tj_status rd_error(const RtReader *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Records "path:line: out of memory" as TJ_ERR_NOMEM and returns it. */
tj_status rd_nomem(const RtReader *r);

/* Scanner results. */
enum { RD_OK = 0, RD_NONE = 1, RD_BAD = 2, RD_RANGE = 3 };
/* Parses a decimal integer token at *p (skipping blanks); advances *p. */
int rd_int(const char **p, int64_t *out);
/* Parses a real number token at *p (skipping blanks); advances *p. */
int rd_real(const char **p, double *out);
/* Parses a value token at *p into dtype dt (skipping blanks; advances *p):
 * for an integer dtype an integer token is read exactly (no detour
 * through a double, so i64 and u64 values above 2^53 survive, u64 up to
 * 2^64 - 1), other tokens as reals rounded to nearest (saturating into
 * the dtype's range); results as rd_real's. */
int rd_value(const char **p, int dt, RtVal *out);
/* Copies the token at p (up to 40 chars) into buf for messages. */
const char *rd_token(const char *p, char *buf, int n);
/* True when only blanks remain at p. */
int rd_at_end(const char *p);

#endif

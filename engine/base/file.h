/* Opening and reading input files within bounds: configs, checkpoints, data files, anything read
 * in one piece. A folder or a device is never read; a FIFO or a pipe only when the caller can read
 * it once and knows a bound. */
#ifndef CT_FILE_H
#define CT_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* ct_file_open's flags. CT_FILE_STREAM: a FIFO or a pipe (/dev/stdin from a pipe, bash's <(...))
 * is accepted, for a caller that reads it once; without it such a file is refused, with why. */
enum { CT_FILE_REGULAR = 0, CT_FILE_STREAM = 1 };

/* Opens `path` for reading (*fd, close-on-exec). `what` names what the file should be ("a config
 * file", "a cutrain checkpoint"), for the refusals: a folder, a device (/dev/zero, a terminal),
 * a FIFO or pipe without CT_FILE_STREAM (CT_ERR_IO). An open that a signal interrupts (a FIFO
 * waiting for its writer) fails with CT_ERR_STOPPED, so the caller's stop request wins. */
ct_status ct_file_open(const char *path, int flags, const char *what, int *fd, ct_err *err);

/* Reads all of `path` into a new buffer (*buf, malloc'd; *len bytes). One byte past the end is
 * allocated and set to 0, so a text file is a C string. `limit`: the most bytes accepted (0: no
 * limit, for regular files only: a stream needs a bound, so with 0 CT_FILE_STREAM is ignored); a
 * longer file fails with CT_ERR_DATA, "PATH: longer than LIMIT bytes, more than WHAT holds".
 * Refusals as ct_file_open's; read failures CT_ERR_IO, a read interrupted by a signal
 * CT_ERR_STOPPED; CT_ERR_NOMEM. On failure *buf is NULL and *len 0. Messages name the path. */
ct_status ct_file_read(const char *path, int flags, size_t limit, const char *what, uint8_t **buf, size_t *len,
                       ct_err *err);

#endif

/* The one whole-file reader: configs, checkpoints, anything read in one piece. */
#ifndef CT_FILE_H
#define CT_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* Reads all of `path` into a new buffer (*buf, malloc'd; *len bytes). One byte past the end is
 * allocated and set to 0, so a text file is a C string. `limit`: the most bytes accepted (0: no
 * limit); a longer file fails with CT_ERR_DATA. Other failures: CT_ERR_IO (cannot open or read),
 * CT_ERR_NOMEM. On failure *buf is NULL and *len 0. Messages name the path. */
ct_status ct_file_read(const char *path, size_t limit, uint8_t **buf, size_t *len, ct_err *err);

#endif

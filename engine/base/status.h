/* Internal error reporting: every fallible internal function returns a ct_status and, on failure,
 * leaves a message in the caller's ct_err. The public handle copies it for ct_errmsg(). */
#ifndef CT_STATUS_H
#define CT_STATUS_H

#include "cutrain.h"

typedef struct ct_err {
    ct_status status;
    int line;          /* config line the message names, 0 when none */
    char msg[1024];
} ct_err;

/* Records status and a printf-style message; returns status so callers can `return ct_fail(...)`. */
ct_status ct_fail(ct_err *err, ct_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Same, prefixed with "file:line: " (line 0 prints "file: "). */
ct_status ct_fail_at(ct_err *err, ct_status status, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

void ct_err_clear(ct_err *err);

#endif

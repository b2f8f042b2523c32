#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/status.h"

static void vformat(ct_err *err, const char *prefix, const char *fmt, va_list ap)
{
    size_t used = (size_t)snprintf(err->msg, sizeof err->msg, "%s", prefix);
    if (used < sizeof err->msg)
        vsnprintf(err->msg + used, sizeof err->msg - used, fmt, ap);
}

ct_status ct_fail(ct_err *err, ct_status status, const char *fmt, ...)
{
    if (!err)
        return status;
    va_list ap;
    va_start(ap, fmt);
    vformat(err, "", fmt, ap);
    va_end(ap);
    err->status = status;
    err->line = 0;
    return status;
}

ct_status ct_fail_at(ct_err *err, ct_status status, const char *file, int line, const char *fmt, ...)
{
    if (!err)
        return status;
    char prefix[512];
    if (line > 0)
        snprintf(prefix, sizeof prefix, "%s:%d: ", file ? file : "?", line);
    else
        snprintf(prefix, sizeof prefix, "%s: ", file ? file : "?");
    va_list ap;
    va_start(ap, fmt);
    vformat(err, prefix, fmt, ap);
    va_end(ap);
    err->status = status;
    err->line = line;
    return status;
}

void ct_err_clear(ct_err *err)
{
    err->status = CT_OK;
    err->line = 0;
    err->msg[0] = '\0';
}

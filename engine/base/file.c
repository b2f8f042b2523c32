/* The whole-file reader (file.h). The size from fstat is only a first guess: the buffer grows as
 * data arrives, so a file that changes while it is read, or a pipe, is still read whole. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"

/* Appends the rest of fd to a growing buffer of `guess` + 1 bytes to begin with (+1: the end of
 * the file is seen, and the closing 0 fits, without growing an exact-size buffer). */
static ct_status read_all(int fd, const char *path, size_t guess, size_t limit, uint8_t **out, size_t *out_len,
                          ct_err *err)
{
    size_t cap = (limit && guess > limit ? limit : guess) + 1u, len = 0;
    uint8_t *buf = malloc(cap);
    if (!buf)
        return ct_fail(err, CT_ERR_NOMEM, "%s: out of memory reading it", path);
    for (;;) {
        if (len == cap) {
            size_t grown = cap > SIZE_MAX / 2u ? SIZE_MAX : cap * 2u;
            uint8_t *bigger = grown > cap ? realloc(buf, grown) : NULL;
            if (!bigger) {
                free(buf);
                return ct_fail(err, CT_ERR_NOMEM, "%s: out of memory reading it", path);
            }
            buf = bigger;
            cap = grown;
        }
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int saved = errno;
            free(buf);
            return ct_fail(err, CT_ERR_IO, "%s: read failed: %s", path, strerror(saved));
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (limit && len > limit) {
            free(buf);
            return ct_fail(err, CT_ERR_DATA, "%s: larger than %zu bytes", path, limit);
        }
    }
    buf[len] = 0;   /* the loop only ends on a read into free room, so len < cap */
    *out = buf;
    *out_len = len;
    return CT_OK;
}

ct_status ct_file_read(const char *path, size_t limit, uint8_t **buf, size_t *len, ct_err *err)
{
    *buf = NULL;
    *len = 0;
    int fd;
    do
        fd = open(path, O_RDONLY);
    while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return ct_fail(err, CT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    size_t guess = 0;
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0 && (unsigned long long)sb.st_size < SIZE_MAX)
        guess = (size_t)sb.st_size;
    ct_status st = read_all(fd, path, guess, limit, buf, len, err);
    close(fd);
    return st;
}

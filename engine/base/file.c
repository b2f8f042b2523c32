/* Bounded input files (file.h). The size from fstat is only a first guess: the buffer grows as
 * data arrives, so a file that changes while it is read, or a pipe, is still read whole; what
 * bounds a read is the file being regular (it ends) or the caller's limit (a stream may not). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"

/* What a non-regular file is, in words, or NULL for a regular file. */
static const char *kind_of(mode_t mode)
{
    if (S_ISREG(mode))
        return NULL;
    if (S_ISDIR(mode))
        return "a folder";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISFIFO(mode))
        return "a FIFO or pipe";
    if (S_ISSOCK(mode))
        return "a socket";
    return "not a regular file";
}

static ct_status check_kind(const char *path, mode_t mode, int flags, const char *what, ct_err *err)
{
    const char *kind = kind_of(mode);
    if (!kind || (S_ISFIFO(mode) && (flags & CT_FILE_STREAM)))
        return CT_OK;
    if (S_ISFIFO(mode))
        return ct_fail(err, CT_ERR_IO, "%s: %s, not %s: it is read more than once (its size and header first), "
                                       "which a pipe cannot be; copy it to a regular file", path, kind, what);
    return ct_fail(err, CT_ERR_IO, "%s: %s, not %s", path, kind, what);
}

ct_status ct_file_open(const char *path, int flags, const char *what, int *fd, ct_err *err)
{
    *fd = -1;
    what = what ? what : "a file";
    struct stat sb;
    if (stat(path, &sb) != 0)
        return ct_fail(err, CT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    ct_status st = check_kind(path, sb.st_mode, flags, what, err);
    if (st != CT_OK)
        return st;
    /* Only an accepted FIFO may block in open (until its writer comes); anything else is opened
     * without blocking, in case it was swapped for a FIFO since the stat. */
    int fifo = S_ISFIFO(sb.st_mode);
    int f = open(path, O_RDONLY | O_CLOEXEC | (fifo ? 0 : O_NONBLOCK));
    if (f < 0 && errno == EINTR)
        return ct_fail(err, CT_ERR_STOPPED, "%s: interrupted by a signal while waiting to open it (a FIFO whose "
                                            "writer has not come)", path);
    if (f < 0)
        return ct_fail(err, CT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(f, &sb) != 0)
        st = ct_fail(err, CT_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    if (st == CT_OK)
        st = check_kind(path, sb.st_mode, flags, what, err);
    int fl = st == CT_OK && !fifo ? fcntl(f, F_GETFL) : 0;
    if (st == CT_OK && !fifo && (fl < 0 || fcntl(f, F_SETFL, fl & ~O_NONBLOCK) != 0))
        st = ct_fail(err, CT_ERR_IO, "%s: cannot set blocking reads: %s", path, strerror(errno));
    if (st != CT_OK) {
        close(f);
        return st;
    }
    *fd = f;
    return CT_OK;
}

/* Appends the rest of fd to a growing buffer of `guess` + 1 bytes to begin with (+1: the end of
 * the file is seen, and the closing 0 fits, without growing an exact-size buffer). */
static ct_status read_all(int fd, const char *path, size_t guess, size_t limit, const char *what, uint8_t **out,
                          size_t *out_len, ct_err *err)
{
    size_t cap = (limit && guess > limit ? limit : guess) + 1u, len = 0;
    uint8_t *buf = malloc(cap);
    if (!buf)
        return ct_fail(err, CT_ERR_NOMEM, "%s: out of memory reading it", path);
    for (;;) {
        if (len == cap) {
            size_t grown = cap > SIZE_MAX / 2u ? SIZE_MAX : cap * 2u;
            /* a bound one past the limit is enough to see a longer file */
            if (limit && grown > limit + 1u)
                grown = limit + 1u > cap ? limit + 1u : cap + 1u;
            uint8_t *bigger = grown > cap ? realloc(buf, grown) : NULL;
            if (!bigger) {
                free(buf);
                return ct_fail(err, CT_ERR_NOMEM, "%s: out of memory reading it", path);
            }
            buf = bigger;
            cap = grown;
        }
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0) {
            int saved = errno;
            free(buf);
            if (saved == EINTR)   /* only a pipe's read waits: the signal is a request to stop */
                return ct_fail(err, CT_ERR_STOPPED, "%s: interrupted by a signal while reading it", path);
            return ct_fail(err, CT_ERR_IO, "%s: read failed: %s", path, strerror(saved));
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (limit && len > limit) {
            free(buf);
            return ct_fail(err, CT_ERR_DATA, "%s: longer than %zu bytes: not %s", path, limit, what);
        }
    }
    buf[len] = 0;   /* the loop only ends on a read into free room, so len < cap */
    *out = buf;
    *out_len = len;
    return CT_OK;
}

ct_status ct_file_read(const char *path, int flags, size_t limit, const char *what, uint8_t **buf, size_t *len,
                       ct_err *err)
{
    *buf = NULL;
    *len = 0;
    what = what ? what : "a file";
    int fd;
    ct_status st = ct_file_open(path, limit > 0 ? flags : CT_FILE_REGULAR, what, &fd, err);
    if (st != CT_OK)
        return st;
    struct stat sb;
    size_t guess = 0;
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0 && (unsigned long long)sb.st_size < SIZE_MAX)
        guess = (size_t)sb.st_size;
    st = read_all(fd, path, guess, limit, what, buf, len, err);
    close(fd);
    return st;
}

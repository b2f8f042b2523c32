/* TensorBoard event files written by hand: no protobuf library for three messages with five
 * fields, and TensorBoard's reader checks every CRC. */
#define _POSIX_C_SOURCE 200809L
#include "base/event_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/crc32c.h"

struct ct_event_file {
    FILE *f;
    char path[4096];
};

static void put_le(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

void ct_tfrecord_frame(const void *data, size_t n, unsigned char header[CT_TFRECORD_HEADER],
                       unsigned char footer[CT_TFRECORD_FOOTER])
{
    put_le(header, (uint64_t)n, 8);
    put_le(header + 8, ct_crc32c_mask(ct_crc32c(header, 8)), 4);
    put_le(footer, ct_crc32c_mask(ct_crc32c(data, n)), 4);
}

/* Protocol buffer output that counts what it would write past its capacity, so that one encoder
 * both sizes and fills. */
typedef struct pb_out {
    unsigned char *buf;
    size_t cap, len;
} pb_out;

static void pb_bytes(pb_out *o, const void *p, size_t n)
{
    if (o->len + n <= o->cap)
        memcpy(o->buf + o->len, p, n);
    o->len += n;
}

static void pb_varint(pb_out *o, uint64_t v)
{
    unsigned char b[10];
    size_t n = 0;
    do {
        b[n] = (unsigned char)(v & 0x7f);
        v >>= 7;
        if (v)
            b[n] |= 0x80;
        n++;
    } while (v);
    pb_bytes(o, b, n);
}

static size_t varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >>= 7)
        n++;
    return n;
}

/* wire types: 0 varint, 1 fixed 64 bits, 2 length-delimited, 5 fixed 32 bits */
static void pb_key(pb_out *o, unsigned field, unsigned wire)
{
    pb_varint(o, (uint64_t)(field << 3 | wire));
}

static void pb_string(pb_out *o, unsigned field, const char *s)
{
    size_t n = strlen(s);
    pb_key(o, field, 2);
    pb_varint(o, n);
    pb_bytes(o, s, n);
}

static size_t value_size(const ct_scalar *s)
{
    size_t tag = strlen(s->tag);
    return 1 + varint_size(tag) + tag + 1 + 4;
}

size_t ct_event_encode(unsigned char *buf, size_t cap, double wall_time, int64_t step, const char *file_version,
                       const ct_scalar *scalars, int n)
{
    pb_out o = {.buf = buf, .cap = cap};
    uint64_t bits;
    unsigned char le[8];
    memcpy(&bits, &wall_time, sizeof bits);
    put_le(le, bits, 8);
    pb_key(&o, 1, 1);
    pb_bytes(&o, le, 8);
    pb_key(&o, 2, 0);
    pb_varint(&o, (uint64_t)step); /* int64: two's complement, as protobuf encodes it */
    if (file_version) {
        pb_string(&o, 3, file_version);
        return o.len;
    }
    size_t summary = 0;
    for (int i = 0; i < n; i++)
        summary += 1 + varint_size(value_size(&scalars[i])) + value_size(&scalars[i]);
    pb_key(&o, 5, 2);
    pb_varint(&o, summary);
    for (int i = 0; i < n; i++) {
        pb_key(&o, 1, 2);
        pb_varint(&o, value_size(&scalars[i]));
        pb_string(&o, 1, scalars[i].tag);
        uint32_t fbits;
        memcpy(&fbits, &scalars[i].value, sizeof fbits);
        put_le(le, fbits, 4);
        pb_key(&o, 2, 5);
        pb_bytes(&o, le, 4);
    }
    return o.len;
}

static double wall_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static ct_status write_event(ct_event_file *f, int64_t step, const char *file_version, const ct_scalar *scalars,
                             int n, ct_err *err)
{
    double now = wall_clock();
    size_t size = ct_event_encode(NULL, 0, now, step, file_version, scalars, n);
    unsigned char *data = malloc(size);
    if (!data)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for a TensorBoard event of %zu bytes", size);
    ct_event_encode(data, size, now, step, file_version, scalars, n);
    unsigned char header[CT_TFRECORD_HEADER], footer[CT_TFRECORD_FOOTER];
    ct_tfrecord_frame(data, size, header, footer);
    int ok = fwrite(header, sizeof header, 1, f->f) == 1 && fwrite(data, size, 1, f->f) == 1 &&
             fwrite(footer, sizeof footer, 1, f->f) == 1 && fflush(f->f) == 0;
    free(data);
    if (!ok)
        return ct_fail(err, CT_ERR_IO, "cannot write TensorBoard events to %s: %s", f->path, strerror(errno));
    return CT_OK;
}

/* mkdir -p: each missing folder of the path, then the path must be a folder. */
static ct_status make_dirs(const char *dir, ct_err *err)
{
    char path[4096];
    if (!dir[0] || strlen(dir) >= sizeof path)
        return ct_fail(err, CT_ERR_USAGE, "TensorBoard folder \"%s\": empty or too long", dir);
    strcpy(path, dir);
    for (char *p = path + 1;; p++) {
        if (*p == '/' || !*p) {
            char was = *p;
            *p = '\0';
            if (mkdir(path, 0777) != 0 && errno != EEXIST) {
                if (!was)
                    return ct_fail(err, CT_ERR_IO, "cannot create the TensorBoard folder %s: %s", dir,
                                   strerror(errno));
                return ct_fail(err, CT_ERR_IO, "cannot create the TensorBoard folder %s (at %s): %s", dir, path,
                               strerror(errno));
            }
            *p = was;
            if (!was)
                break;
        }
    }
    struct stat st;
    if (stat(dir, &st) != 0)
        return ct_fail(err, CT_ERR_IO, "cannot create the TensorBoard folder %s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return ct_fail(err, CT_ERR_IO, "cannot create the TensorBoard folder %s: a file of that name is there", dir);
    return CT_OK;
}

ct_status ct_event_file_open(const char *dir, ct_event_file **out, ct_err *err)
{
    *out = NULL;
    ct_status st = make_dirs(dir, err);
    if (st != CT_OK)
        return st;
    ct_event_file *f = calloc(1, sizeof *f);
    if (!f)
        return ct_fail(err, CT_ERR_NOMEM, "out of memory for a TensorBoard event file");
    char host[256] = "localhost";
    if (gethostname(host, sizeof host) != 0)
        strcpy(host, "localhost");
    host[sizeof host - 1] = '\0';
    long now = (long)time(NULL);
    int fd = -1;
    for (int attempt = 1; attempt <= 100 && fd < 0; attempt++) {
        int w = attempt == 1 ? snprintf(f->path, sizeof f->path, "%s/events.out.tfevents.%ld.%s", dir, now, host)
                             : snprintf(f->path, sizeof f->path, "%s/events.out.tfevents.%ld.%s.%d", dir, now,
                                        host, attempt);
        if (w < 0 || (size_t)w >= sizeof f->path) {
            free(f);
            return ct_fail(err, CT_ERR_USAGE, "TensorBoard folder %s: path too long", dir);
        }
        fd = open(f->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0 || !(f->f = fdopen(fd, "wb"))) {
        st = ct_fail(err, CT_ERR_IO, "cannot write in the TensorBoard folder %s: %s", dir, strerror(errno));
        if (fd >= 0)
            close(fd);
        free(f);
        return st;
    }
    st = write_event(f, 0, CT_EVENT_FILE_VERSION, NULL, 0, err);
    if (st != CT_OK) {
        ct_event_file_close(f);
        return st;
    }
    *out = f;
    return CT_OK;
}

ct_status ct_event_file_write(ct_event_file *f, int64_t step, const ct_scalar *scalars, int n, ct_err *err)
{
    return write_event(f, step, NULL, scalars, n, err);
}

const char *ct_event_file_path(const ct_event_file *f)
{
    return f ? f->path : NULL;
}

void ct_event_file_close(ct_event_file *f)
{
    if (!f)
        return;
    fclose(f->f);
    free(f);
}

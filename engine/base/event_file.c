/* TensorBoard event files written by hand (base/protobuf.h): no protobuf library for three
 * messages with five fields, and TensorBoard's reader checks every CRC. */
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
#include "base/protobuf.h"

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

static size_t value_size(const ct_scalar *s)
{
    return ct_pb_len_field_size(1, strlen(s->tag)) + 1 + 4;
}

size_t ct_event_encode(unsigned char *buf, size_t cap, double wall_time, int64_t step, const char *file_version,
                       const ct_scalar *scalars, int n)
{
    /* a fixed buffer sizes and fills in one pass, so the nested lengths are computed first */
    ct_pb o = ct_pb_fixed(buf, cap);
    ct_pb_double(&o, 1, wall_time);
    ct_pb_int(&o, 2, step);
    if (file_version) {
        ct_pb_string(&o, 3, file_version);
        return o.len;
    }
    size_t summary = 0;
    for (int i = 0; i < n; i++)
        summary += ct_pb_len_field_size(1, value_size(&scalars[i]));
    ct_pb_key(&o, 5, CT_PB_LEN);
    ct_pb_varint(&o, summary);
    for (int i = 0; i < n; i++) {
        ct_pb_key(&o, 1, CT_PB_LEN);
        ct_pb_varint(&o, value_size(&scalars[i]));
        ct_pb_string(&o, 1, scalars[i].tag);
        ct_pb_float(&o, 2, scalars[i].value);
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
